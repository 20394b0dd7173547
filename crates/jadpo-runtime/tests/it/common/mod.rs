//! What the store tests share: a clock origin, events, and claims decided by the
//! core as the workers decide them.

#![allow(dead_code)] // each test file uses a part of it

pub mod fixture;

use jadpo_check::program::Budget;
use jadpo_runtime::rules::{self, Outcome, breaker};
use jadpo_runtime::store::{ClaimReport, NewDelivery, NewEvent, Recorded, Store, StoreError};
use rand::SeedableRng;

/// The tests' "now" at the start.
pub const T0: i64 = 1_700_000_000_000;
/// The subscriber's run time limit in these tests.
pub const TIMEOUT_MS: u64 = 1_000;

/// Event `n`: a `Paid` with one delivery to `rec` through connection `c`.
pub fn event(n: usize) -> NewEvent {
    NewEvent {
        name: "Paid".into(),
        payload: format!(r#"{{"id":"p{n}"}}"#),
        deliveries: vec![NewDelivery { subscriber: "rec".into(), connection: "c".into() }],
    }
}

/// Claims up to `limit` due deliveries with the default budget.
pub fn claim(store: &dyn Store, now: i64, limit: usize) -> ClaimReport {
    claim_with(store, now, limit, Budget::default())
}

/// Claims up to `limit` due deliveries, each decided by the core and its breaker.
pub fn claim_with(store: &dyn Store, now: i64, limit: usize, budget: Budget) -> ClaimReport {
    try_claim(store, now, limit, budget).expect("claim")
}

/// As [`claim_with`], the store's error returned.
pub fn try_claim(store: &dyn Store, now: i64, limit: usize, budget: Budget) -> Result<ClaimReport, StoreError> {
    store.claim(now, limit, &mut |c| {
        let d = rules::decide_at_claim(&c.record, &budget, now, c.handled, TIMEOUT_MS);
        breaker::decide_at_claim(d, &c.breaker, c.id, now)
    })
}

/// Runs each named test of the calling module, a `fn NAME(&dyn Fixture)`, on every
/// store: `mod sqlite` and `mod postgres` of `#[test]`s (a store not available
/// here skips, its fixture saying why).
macro_rules! on_every_store {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $crate::common::on_every_store!(@store $crate::common::fixture::sqlite; $($name),*);
        }
        mod postgres {
            $crate::common::on_every_store!(@store $crate::common::fixture::postgres; $($name),*);
        }
    };
    (@store $fixture:path; $($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                if let Some(f) = $fixture() {
                    super::$name(&*f);
                }
            }
        )*
    };
}
pub(crate) use on_every_store;

/// Record every claimed delivery's outcome, decided by the core.
pub fn record_all(store: &dyn Store, report: &ClaimReport, outcome: &Outcome, now: i64) {
    let mut rng = rand::rngs::StdRng::from_seed([7; 32]);
    let recs: Vec<Recorded> = report
        .run
        .iter()
        .map(|c| Recorded {
            id: c.id,
            connection: c.connection.clone(),
            attempt: c.attempt,
            started_at_ms: c.claimed_at_ms,
            ended_at_ms: now,
            outcome: outcome.clone(),
            decision: rules::decide_after_attempt(&c.record, &Budget::default(), outcome, now, &mut rng),
        })
        .collect();
    store.record(&recs).expect("record");
}
