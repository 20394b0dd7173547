//! The stores' conformance suite: every store operation, the guarded writes
//! whose guard missed included, run on every store (SQLite in a file, and
//! PostgreSQL), so that the rules the core writes once over them hold on each.
//! The suite is this crate's tests (`tests/it`); here is what they, and the
//! runtime's own store tests, share: the stores ([`fixture`]), a clock origin,
//! events, claims decided by the core as the workers decide them, and a store
//! whose claims run a hook.

pub mod fixture;

use jadpo_check::program::Budget;
use jadpo_core::rng::RandomSource;
use jadpo_core::rules::{self, Failure, Outcome, breaker};
use jadpo_core::store::{
    BreakerAction, BreakerView, ClaimCandidate, ClaimReport, ClaimVerdict, ClaimedSchedule, DeliveryDetail,
    DeliveryFilter, DeliveryView, EventCounts, EventDetail, EventFilter, EventView, NewDelivery, NewEvent, NoRaise,
    PruneCounts, PrunePlan, Raise, Recorded, Rows, ScheduleSpec, StatusView, Store, StoreError, Transact, Views, Waker,
};
use jadpo_core::version::{BacklogRow, OrphanRow, ProcessRow, ProgramVersion, VersionView};
use std::sync::Arc;

/// The tests' "now" at the start.
pub const T0: i64 = 1_700_000_000_000;
/// The subscriber's run time limit in these tests.
pub const TIMEOUT_MS: u64 = 1_000;

/// Event `n`: a `Paid` with one delivery to `rec` through connection `c`.
pub fn event(n: usize) -> NewEvent {
    NewEvent {
        name: "Paid".into(),
        payload: format!(r#"{{"id":"p{n}"}}"#),
        deliveries: vec![NewDelivery { subscriber: "rec".into(), connection: "c".into(), order_key: None }],
    }
}

/// An event of `rec` whose delivery has the ordering key `key`.
pub fn keyed_event(n: usize, key: &str) -> NewEvent {
    NewEvent {
        name: "Paid".into(),
        payload: format!(r#"{{"id":"p{n}"}}"#),
        deliveries: vec![NewDelivery { subscriber: "rec".into(), connection: "c".into(), order_key: Some(key.into()) }],
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
    let mut decide = |c: &ClaimCandidate| {
        let d = rules::decide_at_claim(&c.record, &budget, now, c.handled, TIMEOUT_MS);
        breaker::decide_at_claim(d, &c.breaker, c.id, now)
    };
    store.claim(now, limit, &mut decide, &NoRaise)
}

/// Record every claimed delivery's outcome, decided by the core.
pub fn record_all(store: &dyn Store, report: &ClaimReport, outcome: &Outcome, now: i64) {
    let rng = RandomSource::from_seed(7);
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
            decision: rng.with(|rng| rules::decide_after_attempt(&c.record, &Budget::default(), outcome, now, rng)),
        })
        .collect();
    store.record(&recs, &[], &NoRaise).expect("record");
}

/// What a [`Hooked`] store does in a claim besides the claim itself.
pub trait ClaimHook: Send + Sync {
    /// As the claim starts, before the inner store's.
    fn starting(&self) {}
    /// At the claim's first decision, after it has read its rows and the
    /// breaker's: where another task's write lands in the middle of a claim.
    fn deciding(&self) {}
    /// The store's clock, read: the inner store's unless the hook says otherwise.
    fn db_now_ms(&self, inner: &dyn Views) -> Result<Option<i64>, StoreError> {
        inner.db_now_ms()
    }
}

/// A store whose claims (and clock) run `hook`; everything else is the inner
/// store's.
pub struct Hooked<H> {
    pub inner: Arc<dyn Store>,
    pub hook: H,
}

impl<H: ClaimHook> Views for Hooked<H> {
    fn latest_version(&self) -> Result<Option<ProgramVersion>, StoreError> {
        self.inner.latest_version()
    }
    fn versions(&self, live_since_ms: i64) -> Result<Vec<VersionView>, StoreError> {
        self.inner.versions(live_since_ms)
    }
    fn backlog(&self) -> Result<Vec<BacklogRow>, StoreError> {
        self.inner.backlog()
    }
    fn past_budget(&self, subscriber: &str, attempts: u32, window_cut_ms: i64) -> Result<u64, StoreError> {
        self.inner.past_budget(subscriber, attempts, window_cut_ms)
    }
    fn attempt_rates(&self, since_ms: i64) -> Result<Vec<jadpo_core::store::AttemptRate>, StoreError> {
        self.inner.attempt_rates(since_ms)
    }
    fn deliveries(&self, filter: &DeliveryFilter) -> Result<Vec<DeliveryView>, StoreError> {
        self.inner.deliveries(filter)
    }
    fn delivery(&self, id: i64) -> Result<Option<DeliveryDetail>, StoreError> {
        self.inner.delivery(id)
    }
    fn status(&self, now_ms: i64) -> Result<StatusView, StoreError> {
        self.inner.status(now_ms)
    }
    fn breakers(&self) -> Result<Vec<BreakerView>, StoreError> {
        self.inner.breakers()
    }
    fn breaker_history(&self, connection: Option<&str>) -> Result<Vec<BreakerAction>, StoreError> {
        self.inner.breaker_history(connection)
    }
    fn knows_connection(&self, connection: &str) -> Result<bool, StoreError> {
        self.inner.knows_connection(connection)
    }
    fn prune_preview(&self, plan: &PrunePlan) -> Result<PruneCounts, StoreError> {
        self.inner.prune_preview(plan)
    }
    fn events(&self, filter: &EventFilter) -> Result<Vec<EventView>, StoreError> {
        self.inner.events(filter)
    }
    fn event(&self, id: i64) -> Result<Option<EventDetail>, StoreError> {
        self.inner.event(id)
    }
    fn event_counts(&self) -> Result<EventCounts, StoreError> {
        self.inner.event_counts()
    }
    fn db_now_ms(&self) -> Result<Option<i64>, StoreError> {
        self.hook.db_now_ms(&*self.inner)
    }
}

impl<H: ClaimHook> Transact for Hooked<H> {
    fn transact(&self, work: &mut dyn FnMut(&mut dyn Rows) -> Result<(), StoreError>) -> Result<(), StoreError> {
        self.inner.transact(work)
    }
    fn expansion_waiting(&self) -> Result<bool, StoreError> {
        self.inner.expansion_waiting()
    }
}

impl<H: ClaimHook> Store for Hooked<H> {
    fn record_version(&self, version: &ProgramVersion, now_ms: i64, run: bool) -> Result<i64, StoreError> {
        self.inner.record_version(version, now_ms, run)
    }
    fn heartbeat(&self, process: &ProcessRow, now_ms: i64, live_since_ms: i64) -> Result<Vec<String>, StoreError> {
        self.inner.heartbeat(process, now_ms, live_since_ms)
    }
    fn process_stopped(&self, id: &str) -> Result<(), StoreError> {
        self.inner.process_stopped(id)
    }
    fn orphans(&self, subscribers: &[String], limit: usize) -> Result<Vec<OrphanRow>, StoreError> {
        self.inner.orphans(subscribers, limit)
    }
    fn adopt(&self, rows: &[OrphanRow], now_ms: i64) -> Result<usize, StoreError> {
        self.inner.adopt(rows, now_ms)
    }
    fn emit(&self, events: &[NewEvent], now_ms: i64) -> Result<Vec<i64>, StoreError> {
        self.inner.emit(events, now_ms)
    }
    fn next_due_ms(&self) -> Result<Option<i64>, StoreError> {
        self.inner.next_due_ms()
    }
    fn sync_schedules(&self, schedules: &[ScheduleSpec], now_ms: i64) -> Result<(), StoreError> {
        self.inner.sync_schedules(schedules, now_ms)
    }
    fn claim_schedules(&self, schedules: &[ScheduleSpec], now_ms: i64) -> Result<Vec<ClaimedSchedule>, StoreError> {
        self.inner.claim_schedules(schedules, now_ms)
    }
    fn record_schedule(
        &self,
        name: &str,
        run: u64,
        ended_at_ms: i64,
        failure: Option<&Failure>,
    ) -> Result<bool, StoreError> {
        self.inner.record_schedule(name, run, ended_at_ms, failure)
    }
    fn next_schedule_due_ms(&self) -> Result<Option<i64>, StoreError> {
        self.inner.next_schedule_due_ms()
    }
    fn next_sweep_ms(&self, now_ms: i64) -> Result<Option<i64>, StoreError> {
        self.inner.next_sweep_ms(now_ms)
    }
    fn one_writer(&self) -> bool {
        self.inner.one_writer()
    }
    fn listen(&self, wake: Waker) -> Result<bool, StoreError> {
        self.inner.listen(wake)
    }
    fn claim(
        &self,
        now_ms: i64,
        limit: usize,
        decide: &mut dyn FnMut(&ClaimCandidate) -> ClaimVerdict,
        raise: &dyn Raise,
    ) -> Result<ClaimReport, StoreError> {
        self.hook.starting();
        let mut first = true;
        let mut decide_after_hook = |c: &ClaimCandidate| {
            if std::mem::take(&mut first) {
                self.hook.deciding();
            }
            decide(c)
        };
        self.inner.claim(now_ms, limit, &mut decide_after_hook, raise)
    }
    fn record(
        &self,
        outcomes: &[Recorded],
        raised: &[Vec<NewEvent>],
        raise: &dyn Raise,
    ) -> Result<Vec<usize>, StoreError> {
        self.inner.record(outcomes, raised, raise)
    }
}
