//! The rules the core writes once over the stores' row operations, when a
//! guarded write misses: another process changed the row between this one's
//! read and its write. Each store's real guard is met (the rows read are made
//! stale, the writes are the store's own), and every store ends the same way.

use crate::common;
use common::fixture::Fixture;
use common::{T0, claim, event, record_all};
use jadpo_check::program::DeliveryState;
use jadpo_core::rules::breaker::{BreakerRow, Pause};
use jadpo_core::rules::{Outcome, Record};
use jadpo_core::store::rows::{BreakerSet, CHANGE_TRIES, HeldRow, HeldSet, LongestHeld, OperatorRow, PrunedDelivery};
use jadpo_core::store::{
    Actions, BreakerAction, BreakerView, Expansion, NewDelivery, NewEvent, NoRaise, PrunePlan, PruneRows, Replay,
    RetryResult, Rows, SkipResult, Store, StoreError, Transact, UnexpandedEvent,
};
use std::sync::atomic::{AtomicUsize, Ordering};

/// How the rows a [`Stale`] store reads differ from the store's.
#[derive(Clone, Copy)]
enum Staleness {
    /// Every breaker write finds its row changed (counted in `tries`).
    BreakerKeepsChanging,
    /// A delivery reads in this state, whatever it is.
    DeliveryReadAs(DeliveryState),
    /// A held delivery reads as held a minute longer than it was.
    HeldLonger,
    /// Events read as waiting to be expanded, whatever they are.
    EventsReadAsWaiting,
}

/// A store whose transactions read stale rows, as if another process had
/// changed them since, and write through the store's own guards.
struct Stale {
    inner: Box<dyn Store>,
    staleness: Staleness,
    tries: AtomicUsize,
}

impl Stale {
    fn new(inner: Box<dyn Store>, staleness: Staleness) -> Stale {
        Stale { inner, staleness, tries: AtomicUsize::new(0) }
    }
}

impl Transact for Stale {
    fn transact(&self, work: &mut dyn FnMut(&mut dyn Rows) -> Result<(), StoreError>) -> Result<(), StoreError> {
        self.inner.transact(&mut |rows| work(&mut StaleRows { inner: rows, stale: self }))
    }

    fn expansion_waiting(&self) -> Result<bool, StoreError> {
        Ok(true)
    }
}

struct StaleRows<'a> {
    inner: &'a mut dyn Rows,
    stale: &'a Stale,
}

impl PruneRows for StaleRows<'_> {
    fn prune_deliveries(&mut self, plan: &PrunePlan) -> Result<Vec<PrunedDelivery>, StoreError> {
        self.inner.prune_deliveries(plan)
    }
    fn delete_attempts(&mut self, deliveries: &[i64]) -> Result<u64, StoreError> {
        self.inner.delete_attempts(deliveries)
    }
    fn delete_emptied_events(&mut self, events: &[i64]) -> Result<u64, StoreError> {
        self.inner.delete_emptied_events(events)
    }
}

impl Rows for StaleRows<'_> {
    fn breaker(&mut self, connection: &str) -> Result<Option<BreakerRow>, StoreError> {
        self.inner.breaker(connection)
    }
    fn breakers(&mut self, which: BreakerSet) -> Result<Vec<BreakerView>, StoreError> {
        self.inner.breakers(which)
    }
    fn write_breaker(
        &mut self,
        connection: &str,
        seen: Option<&BreakerRow>,
        next: &BreakerRow,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        if let Staleness::BreakerKeepsChanging = self.stale.staleness {
            self.stale.tries.fetch_add(1, Ordering::Relaxed);
            // Another process wrote the row since it was read: the guard as read
            // is one the row no longer matches.
            let mut changed = seen.cloned().unwrap_or_default();
            changed.failures_in_a_row += 1;
            return self.inner.write_breaker(connection, Some(&changed), next, now_ms);
        }
        self.inner.write_breaker(connection, seen, next, now_ms)
    }
    fn keep_action(&mut self, action: &BreakerAction) -> Result<(), StoreError> {
        self.inner.keep_action(action)
    }
    fn held(&mut self, which: HeldSet<'_>) -> Result<Vec<HeldRow>, StoreError> {
        let mut rows = self.inner.held(which)?;
        if let Staleness::HeldLonger = self.stale.staleness {
            for row in &mut rows {
                row.held_ms += 60_000;
            }
        }
        Ok(rows)
    }
    fn release(&mut self, rows: &[HeldRow], now_ms: i64) -> Result<u64, StoreError> {
        self.inner.release(rows, now_ms)
    }
    fn held_longest(&mut self, connection: &str) -> Result<Option<LongestHeld>, StoreError> {
        self.inner.held_longest(connection)
    }
    fn held_by_outage(&mut self, connection: &str, now_ms: i64) -> Result<u64, StoreError> {
        self.inner.held_by_outage(connection, now_ms)
    }
    fn insert_events(&mut self, events: &[NewEvent], now_ms: i64) -> Result<Vec<i64>, StoreError> {
        self.inner.insert_events(events, now_ms)
    }
    fn insert_replays(&mut self, replays: &[Replay], now_ms: i64) -> Result<Vec<i64>, StoreError> {
        self.inner.insert_replays(replays, now_ms)
    }
    fn operator_row(&mut self, id: i64) -> Result<Option<OperatorRow>, StoreError> {
        let row = self.inner.operator_row(id)?;
        Ok(match self.stale.staleness {
            Staleness::DeliveryReadAs(state) => row.map(|r| OperatorRow { state, ..r }),
            _ => row,
        })
    }
    fn retry_delivery(&mut self, id: i64, seen: DeliveryState, fresh: &Record) -> Result<bool, StoreError> {
        self.inner.retry_delivery(id, seen, fresh)
    }
    fn skip_delivery(
        &mut self,
        id: i64,
        seen: DeliveryState,
        ended: DeliveryState,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        self.inner.skip_delivery(id, seen, ended, now_ms)
    }
    fn unexpanded(&mut self, limit: usize) -> Result<Vec<UnexpandedEvent>, StoreError> {
        if let Staleness::EventsReadAsWaiting = self.stale.staleness {
            return Ok(vec![UnexpandedEvent { id: 1, name: "Paid".into(), payload: r#"{"id":"p1"}"#.into() }]);
        }
        self.inner.unexpanded(limit)
    }
    fn write_expansions(
        &mut self,
        events: &[UnexpandedEvent],
        decided: &[Expansion],
        now_ms: i64,
    ) -> Result<Vec<bool>, StoreError> {
        self.inner.write_expansions(events, decided, now_ms)
    }
}

fn pause(at_ms: i64) -> Pause {
    Pause { at_ms, until_ms: None, by: "ops".into(), reason: Some("maintenance".into()) }
}

/// A pause or a resume of a breaker other processes keep changing is decided
/// again from the row as read each time, [`CHANGE_TRIES`] times, then fails
/// with the same error on every store, having changed nothing.
pub fn a_change_of_a_breaker_that_keeps_changing_fails_having_changed_nothing(f: &dyn Fixture) {
    let stale = Stale::new(f.open(), Staleness::BreakerKeepsChanging);
    let err = stale.pause_connection("c", &pause(T0)).expect_err("the row kept changing");
    assert!(matches!(err, StoreError::Contended { .. }), "{err:?}");
    assert_eq!(err.to_string(), "the breaker of `c` kept changing under its pause; no change was made");
    assert_eq!(stale.tries.load(Ordering::Relaxed), CHANGE_TRIES);
    let store = f.open();
    assert!(store.breakers().expect("breakers").is_empty(), "no row written");
    assert!(store.breaker_history(None).expect("history").is_empty(), "no action kept");

    store.pause_connection("c", &pause(T0)).expect("pause");
    let stale = Stale::new(f.open(), Staleness::BreakerKeepsChanging);
    let err = stale.resume_connection("c", "ops", None, T0 + 1).expect_err("the row kept changing");
    assert_eq!(err.to_string(), "the breaker of `c` kept changing under its resume; no change was made");
    assert!(store.breakers().expect("breakers")[0].row.pause.is_some(), "still paused");
    assert_eq!(store.breaker_history(None).expect("history").len(), 1, "only the pause kept");
}

/// An operator's retry or skip of a delivery whose state changed since it was
/// read is not made: the store's guard on the state read refuses it.
pub fn a_retry_or_skip_of_a_delivery_changed_since_it_was_read_is_not_made(f: &dyn Fixture) {
    let store = f.open();
    store.emit(&[event(1), event(2)], T0).expect("emit");
    let report = claim(&*store, T0, 1);
    record_all(&*store, &report, &Outcome::Succeeded { http_status: Some(200) }, T0 + 5);

    // Delivery 1 succeeded; another process read it failed, and retries it.
    let stale = Stale::new(f.open(), Staleness::DeliveryReadAs(DeliveryState::Failed));
    assert_eq!(stale.retry(&[1], T0 + 10).expect("retry"), vec![RetryResult::NotRetryable(DeliveryState::Failed)]);
    // Delivery 2 is pending; another process read it parked, and skips it.
    let stale = Stale::new(f.open(), Staleness::DeliveryReadAs(DeliveryState::Parked));
    assert_eq!(stale.skip(&[2], T0 + 10).expect("skip"), vec![SkipResult::NotSkippable(DeliveryState::Parked)]);

    let states: Vec<DeliveryState> =
        [1, 2].iter().map(|&id| store.delivery(id).expect("read").expect("there").delivery.state).collect();
    assert_eq!(states, vec![DeliveryState::Succeeded, DeliveryState::Pending], "neither changed");
    assert_eq!(store.delivery(1).expect("read").expect("there").delivery.attempts, 1, "its history kept");
}

/// A held delivery whose hold changed since it was read is not released by a
/// resume; the tick's sweep, reading it as it is, releases it.
pub fn a_release_of_a_hold_changed_since_it_was_read_is_not_made(f: &dyn Fixture) {
    let store = f.open();
    store.emit(&[event(1)], T0).expect("emit");
    store.pause_connection("c", &pause(T0)).expect("pause");
    let held = claim(&*store, T0 + 1, 1);
    assert_eq!(held.held.len(), 1, "the pause holds the delivery: {held:?}");

    let stale = Stale::new(f.open(), Staleness::HeldLonger);
    let report = stale.resume_connection("c", "ops", None, T0 + 2).expect("resume");
    assert_eq!(report.released, 0, "the hold as read is not the hold as stored");
    assert_eq!(store.delivery(1).expect("read").expect("there").delivery.state, DeliveryState::Held);

    let sweep = store.sweep_breakers(T0 + 3, &|_| T0 + 30_000, &NoRaise).expect("sweep");
    assert_eq!(sweep.released, 1, "{sweep:?}");
    assert_eq!(store.delivery(1).expect("read").expect("there").delivery.state, DeliveryState::Pending);
}

/// An event expanded by another process since it was read is not expanded
/// again: no second set of deliveries, and nothing reported.
pub fn an_event_expanded_since_it_was_read_is_not_expanded_again(f: &dyn Fixture) {
    let store = f.open();
    store.emit(&[event(1)], T0).expect("emit");
    let stale = Stale::new(f.open(), Staleness::EventsReadAsWaiting);
    let mut expand = |_: &UnexpandedEvent| {
        Expansion::Deliveries(vec![NewDelivery { subscriber: "rec".into(), connection: "c".into(), order_key: None }])
    };
    let report = stale.expand_events(T0 + 1, 10, &mut expand).expect("expand");
    assert!(report.expanded.is_empty() && report.invalid.is_empty(), "{report:?}");
    assert_eq!(store.event(1).expect("read").expect("there").deliveries.len(), 1, "no second delivery");
}

jadpo_test_support::on_every_store!(
    crate::common::fixture;
    a_change_of_a_breaker_that_keeps_changing_fails_having_changed_nothing,
    a_retry_or_skip_of_a_delivery_changed_since_it_was_read_is_not_made,
    a_release_of_a_hold_changed_since_it_was_read_is_not_made,
    an_event_expanded_since_it_was_read_is_not_expanded_again,
);
