//! The runtime's steps: claim, prepare a call, conclude, record, tick.
//!
//! Each step is a plain method of [`Runtime`] ([`Runtime::claim_due`],
//! [`Runtime::prepare_call`], [`Runtime::conclude`], [`Runtime::record_outcomes`],
//! [`Runtime::tick`]), taking the time as an argument, so that both drivers of time
//! run one copy of the attempt logic: the tokio loops of `jadpoc run`
//! (`jadpo_runtime::live`) and the sequential virtual-time driver of `jadpoc test`
//! ([`crate::scenario`]).

use crate::breaker_view::{Gate, ProcessBreakers};
use crate::builtin::{self, Raiser};
use crate::clock::Clock;
use crate::codes::RuntimeCode;
use crate::config::RuntimeConfig;
use crate::drivers::{CallRequest, Driver};
use crate::events::{self, RunEvent};
use crate::payload::{ShapeMismatch, call_args, new_event, shape_mismatch, with_defaults};
use crate::rng::RandomSource;
use crate::rules::CallFailure;
use crate::rules::breaker::{self, BreakerRow};
use crate::rules::rate::RateTurn;
use crate::rules::{self, ClaimDecision, Decision, Outcome, decide_after_attempt, decide_at_claim};
use crate::store::{
    Actions, ClaimAt, ClaimCandidate, ClaimReport, ClaimVerdict, Claimed, ClaimedSchedule, EndedDelivery, ExpandReport,
    Expansion, NewEvent, Recorded, ScheduleSpec, Store, StoreError, UnexpandedEvent, WaitingAtClaim,
};
use crate::version::{self, ProcessRow, ProgramVersion};
use jadpo_check::program::{FailureKind, Program, Rate};
use serde_json::Value;
// The maps a claim and an outcome look up for every delivery (by subscriber and
// connection name) hash with FxHash: std's SipHash was a thirtieth of a run's
// instructions, and these keys are the program's own names.
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::{Arc, Mutex};

/// What the steps tell whoever drives or watches them: work that is due now (the
/// live driver claims again when idle), deliveries claimed and attempts
/// recorded (the metrics). Every method does nothing unless overridden; the
/// virtual-time driver attaches none.
pub trait Observer: Send + Sync {
    /// Deliveries are due now: an event stored, raised or released, a slot freed.
    fn work_due(&self) {}
    /// A claim at `now_ms` took `claimed` to run.
    fn claimed(&self, _claimed: &Claimed, _now_ms: i64) {}
    /// A claim left a delivery waiting for its connection's rate.
    fn waiting(&self, _waiting: &WaitingAtClaim) {}
    /// An attempt's outcome was written.
    fn attempt(&self, _recorded: &Recorded, _subscriber: &str) {}
}

/// Observes nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoObserver;

impl Observer for NoObserver {}

/// What a run did, for the caller and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Attempts whose outcome was recorded.
    pub recorded: u64,
    /// Attempts and schedule runs cut off by the stop (an attempt comes back after
    /// its lease).
    pub abandoned: u64,
}

/// One finished attempt on its way to the store.
#[derive(Debug, Clone)]
pub struct Done {
    /// The outcome and the core's decision.
    pub recorded: Recorded,
    /// The delivery's subscriber (for the log line).
    pub subscriber: String,
    /// When the attempt's lease ends: an outcome not written by then is dropped
    /// (another claim may take the delivery back, and the lease is its record).
    pub lease_until_ms: Option<i64>,
    /// jadpo's own events the outcome raises (the delivery failed or parked),
    /// stored with it only if it is written.
    pub raises: Vec<NewEvent>,
}

/// A call ready to be made: its driver, its request and when its run's time limit
/// ends it.
pub struct PreparedCall {
    /// The driver of the action's connection.
    pub driver: Arc<dyn Driver>,
    /// The call.
    pub request: CallRequest,
    /// When the run's time limit ends the call (`deadline_exceeded`).
    pub deadline_ms: i64,
}

/// The runtime: a checked program, its store, clock and drivers.
pub struct Runtime {
    program: Arc<Program>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    drivers: Vec<Arc<dyn Driver>>,
    subscribers: HashMap<String, usize>,
    /// Each rate-limited connection's rate, by name.
    rates: HashMap<String, Rate>,
    /// By connection, the last turn (µs) given to a call that waits for its
    /// rate, so that the next to wait queues behind it (see [`rules::rate`]).
    rate_queue: Mutex<HashMap<String, i64>>,
    schedules: Vec<ScheduleSpec>,
    observer: Arc<dyn Observer>,
    random: RandomSource,
    breakers: ProcessBreakers,
    config: RuntimeConfig,
    /// The program's version and this process, when it runs among others on a
    /// store (`jadpoc run`; the virtual-time driver runs alone).
    presence: Option<Presence>,
    /// The subscribers (and their earlier names) of the programs the other
    /// running processes run, as last read: a delivery of one that this
    /// program lacks is left to them rather than orphaned.
    elsewhere: Mutex<Arc<HashSet<String>>>,
}

/// This process among the store's processes: the version it writes and runs.
struct Presence {
    version: ProgramVersion,
    /// Its number in the store, once kept.
    id: Mutex<Option<i64>>,
    process: ProcessRow,
    /// When it last told the store it was alive.
    seen_ms: Mutex<Option<i64>>,
}

/// How many orphaned deliveries one tick takes back at most.
const ADOPT_BATCH: usize = 500;

/// When the tick next has work, by kind: the breakers' sweep (an alert, a
/// probe to wake, deliveries to release, a pause that ends) and the schedules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TickWork {
    /// The sweep's, if it has any.
    pub sweep_ms: Option<i64>,
    /// The earliest schedule's due time, if the program has schedules.
    pub schedules_ms: Option<i64>,
}

impl TickWork {
    /// Whether the sweep has work at `now_ms`.
    pub fn sweep_due(&self, now_ms: i64) -> bool {
        self.sweep_ms.is_some_and(|t| t <= now_ms)
    }

    /// Whether a schedule is due at `now_ms`.
    pub fn schedules_due(&self, now_ms: i64) -> bool {
        self.schedules_ms.is_some_and(|t| t <= now_ms)
    }

    /// The earliest work of either kind.
    pub fn at_ms(&self) -> Option<i64> {
        match (self.sweep_ms, self.schedules_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// What a claim took, and how many due deliveries it left for a later claim
/// because their connection has as many attempts in flight as it may.
#[derive(Debug, Default)]
pub struct DueClaim {
    /// The store's report of the claim.
    pub report: ClaimReport,
    /// Due deliveries left for later (a slot frees when an attempt concludes,
    /// which wakes the live driver's claims).
    pub waiting: usize,
}

impl Runtime {
    /// A runtime for `program`; `drivers[i]` performs calls through connection `i`
    /// (a call through a connection without one ends as a defect, `runtime.no_driver`).
    /// Every random draw of the run comes from `random` (hand the same source to
    /// the drivers that draw).
    pub fn new(
        program: Arc<Program>,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        drivers: Vec<Arc<dyn Driver>>,
        random: RandomSource,
        config: RuntimeConfig,
    ) -> Runtime {
        let breakers = ProcessBreakers::new(&program);
        // A subscriber runs the deliveries made under its earlier names (`was:`)
        // as its own.
        let subscribers = program
            .subscribers
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.was.iter().chain([&s.name]).map(move |name| (name.clone(), i)))
            .collect();
        let rates = program.connections.iter().filter_map(|c| Some((c.name.clone(), c.rate?))).collect();
        let schedules = program
            .schedules
            .iter()
            .map(|s| ScheduleSpec { name: s.name.clone(), every_ms: s.every_ms, timeout_ms: s.timeout_ms })
            .collect();
        Runtime {
            program,
            store,
            clock,
            drivers,
            subscribers,
            rates,
            rate_queue: Mutex::new(HashMap::default()),
            schedules,
            observer: Arc::new(NoObserver),
            random,
            breakers,
            config,
            presence: None,
            elsewhere: Mutex::new(Arc::default()),
        }
    }

    /// The same runtime, running `version` as `process` among the store's other
    /// processes: it keeps the version in the store, writes it beside every event
    /// it stores, says it is alive at its ticks, leaves the deliveries of
    /// subscribers its program lacks to the processes whose programs have them
    /// (orphaned when none does), and takes back orphaned deliveries of its own
    /// subscribers.
    #[must_use]
    pub fn with_presence(mut self, version: ProgramVersion, process: ProcessRow) -> Runtime {
        self.presence = Some(Presence { version, id: Mutex::new(None), process, seen_ms: Mutex::new(None) });
        self
    }

    /// The same runtime, its steps observed by `observer`.
    #[must_use]
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Runtime {
        self.observer = observer;
        self
    }

    /// The subscriber a delivery stored under `name` belongs to in this
    /// program: the one of that name, or the one that names it in its `was:`.
    fn subscriber(&self, name: &str) -> Option<&jadpo_check::program::Subscriber> {
        self.subscribers.get(name).and_then(|&i| self.program.subscribers.get(i))
    }

    /// The runtime's store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The runtime's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// How the runtime runs.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// The run's random source.
    pub fn random_source(&self) -> RandomSource {
        self.random.clone()
    }

    /// A subscriber's run time limit, from which its leases are made. The checker
    /// filled in the default (`budget::DEFAULT_RUN_TIMEOUT_MS`), so it is not
    /// applied again here; a subscriber this program lacks gets none: its
    /// deliveries are left at their claim and never run here.
    pub(crate) fn run_timeout_ms(&self, subscriber: &str) -> u64 {
        self.subscriber(subscriber).map_or(0, |s| s.timeout_ms)
    }

    /// The core's claim decision for a candidate at `now_ms`.
    fn decide_claim(&self, c: &ClaimCandidate, now_ms: i64, elsewhere: &HashSet<String>) -> ClaimDecision {
        match self.subscriber(&c.subscriber) {
            Some(sub) => decide_at_claim(&c.record, &sub.budget, now_ms, c.handled, sub.timeout_ms),
            // A delivery of a subscriber this program lacks (a version mix, or one
            // removed): never run or failed here, whatever its budget.
            None => rules::leave_at_claim(&c.record, now_ms, c.handled, elsewhere.contains(&c.subscriber)),
        }
    }

    /// Claim up to `limit` due deliveries at `now_ms`, the core deciding each (the
    /// breaker as this process knows it, see [`ProcessBreakers`]), and log those ended
    /// at their claim. The claimed ones are to be run.
    pub fn claim_due(&self, now_ms: i64, limit: usize) -> Result<DueClaim, StoreError> {
        let claimed =
            self.claim_through(now_ms, |decide, raiser| Ok(((), self.store.claim(now_ms, limit, decide, raiser)?)));
        claimed.map(|((), claim)| claim)
    }

    /// Record finished attempts as [`Runtime::record_outcomes`] does and claim as
    /// [`Runtime::claim_due`] does, in one store call
    /// ([`Store::record_then_claim`]: one transaction on a store with one
    /// writer). Returns which of `done` were written, for the caller to log with
    /// [`Runtime::outcomes_written`] once it has let go of the store.
    pub fn record_then_claim_due(
        &self,
        done: &[Done],
        now_ms: i64,
        limit: usize,
    ) -> Result<(Vec<usize>, DueClaim), StoreError> {
        let (records, raised) = outcome_rows(done);
        let claimed = self.claim_through(now_ms, |decide, raiser| {
            let done = self.store.record_then_claim(&records, &raised, ClaimAt { now_ms, limit }, decide, raiser)?;
            Ok((done.written, done.claimed))
        });
        self.left_to_the_store(&records);
        claimed
    }

    /// A claim at `now_ms` through `claim`, the store's call (with what it
    /// returns beside the claim's report), the core deciding each candidate.
    fn claim_through<T>(
        &self,
        now_ms: i64,
        claim: impl FnOnce(
            &mut dyn FnMut(&ClaimCandidate) -> ClaimVerdict,
            &Raiser<'_>,
        ) -> Result<(T, ClaimReport), StoreError>,
    ) -> Result<(T, DueClaim), StoreError> {
        // Runs let through, by connection, to give back those that did not start.
        let mut let_through: HashMap<String, usize> = HashMap::default();
        let mut waiting = 0;
        // The rates' queues as this claim starts; merged back after it. Each call
        // that waits is due at its own turn, behind those queued before it.
        let mut queued = self.rate_queue.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let raiser = Raiser { program: &self.program };
        // Started before the store reads any breaker's row: outcomes recorded
        // while this claim runs still count for it.
        let view = self.breakers.claim();
        let elsewhere = self.elsewhere.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let claimed = claim(
            &mut |c| {
                let decision = self.decide_claim(c, now_ms, &elsewhere);
                let verdict = breaker::decide_at_claim(decision, &c.breaker, c.id, now_ms);
                if verdict.probe.is_some() {
                    // The probe: the store's row decides it, conditionally.
                    return verdict;
                }
                let decision = verdict.decision;
                match view.gate(&c.connection, &c.breaker, &decision) {
                    Gate::Run => {
                        // A fresh run takes a turn of its connection's rate (a lease
                        // taken back runs: its attempt was counted already).
                        let mut next = None;
                        if let ClaimDecision::Run { lease_expired: false, .. } = decision {
                            let rate = self.rates.get(&c.connection).copied();
                            let last = queued.get(&c.connection).copied();
                            match rules::rate::turn(rate, c.breaker.rate_tat_us, now_ms, last) {
                                Some(RateTurn::Wait { until_ms, turn_us }) => {
                                    queued.insert(c.connection.clone(), turn_us);
                                    // The gate counted it in flight: it does not run.
                                    self.breakers.not_started(&c.connection, 1);
                                    return ClaimVerdict { decision: ClaimDecision::Wait { until_ms }, probe: None };
                                }
                                Some(RateTurn::Go { next_tat_us }) => {
                                    next = Some(BreakerRow { rate_tat_us: Some(next_tat_us), ..c.breaker.clone() });
                                }
                                None => {}
                            }
                        }
                        if matches!(decision, ClaimDecision::Run { .. }) {
                            *let_through.entry(c.connection.clone()).or_default() += 1;
                        }
                        ClaimVerdict { decision, probe: next }
                    }
                    Gate::Hold => ClaimVerdict { decision: decision.held(), probe: None },
                    Gate::Wait => {
                        waiting += 1;
                        ClaimVerdict { decision: ClaimDecision::Skip, probe: None }
                    }
                }
            },
            &raiser,
        );
        drop(view);
        {
            let mut shared = self.rate_queue.lock().unwrap_or_else(|e| e.into_inner());
            for (connection, turn_us) in queued {
                let last = shared.entry(connection).or_insert(turn_us);
                *last = (*last).max(turn_us);
            }
            // A turn that has come queues nobody.
            let now_us = now_ms.saturating_mul(1000);
            shared.retain(|_, turn_us| *turn_us > now_us);
        }
        let started = claimed.as_ref().map(|(_, r)| r.run.as_slice()).unwrap_or_default();
        for c in started {
            if let Some(n) = let_through.get_mut(&c.connection) {
                *n = n.saturating_sub(1);
            }
        }
        for (connection, n) in let_through {
            self.breakers.not_started(&connection, n);
        }
        let (extra, report) = claimed?;
        for e in &report.ended {
            if let Some(line) = RunEvent::ended_at_claim(now_ms, e.id, &e.subscriber, &e.decision) {
                events::log(line);
            }
        }
        for left in &report.left {
            if let Some(line) = RunEvent::left_at_claim(now_ms, left) {
                events::log(line);
            }
        }
        if report.ended.iter().any(|e| matches!(e.decision, ClaimDecision::GiveUp { .. })) {
            // A delivery given up may have raised events whose deliveries are due now.
            self.observer.work_due();
        }
        report.run.iter().for_each(|c| self.observer.claimed(c, now_ms));
        report.waiting.iter().for_each(|w| self.observer.waiting(w));
        Ok((extra, DueClaim { report, waiting }))
    }

    /// A connection with runs counted in flight, and how many (see
    /// [`ProcessBreakers::counted_in_flight`]).
    pub fn counted_in_flight(&self) -> Option<(String, usize)> {
        self.breakers.counted_in_flight()
    }

    /// The call a claimed delivery makes, or the defect that stops it before it is
    /// made (as the outcome to record).
    pub fn prepare_call(&self, c: &Claimed) -> Result<PreparedCall, Outcome> {
        let defect = |code: RuntimeCode| Outcome::fail(FailureKind::InternalFault, code);
        let Some(sub) = self.subscriber(&c.subscriber) else {
            return Err(defect(RuntimeCode::RuntimeUnknownSubscriber));
        };
        let Ok(payload) = serde_json::from_str::<Value>(&c.payload) else {
            return Err(defect(RuntimeCode::RuntimeBadPayload));
        };
        let Some(action) = self.program.actions.get(sub.call.action) else {
            return Err(defect(RuntimeCode::RuntimeUnknownAction));
        };
        let Some(driver) = self.drivers.get(action.connection) else {
            return Err(defect(RuntimeCode::RuntimeNoDriver));
        };
        let payload = match self.program.events.get(sub.event) {
            Some(event) => {
                if let Some(mismatch) = shape_mismatch(event, &sub.call, &payload) {
                    return Err(Outcome::Failed(
                        CallFailure::new(FailureKind::InternalFault, RuntimeCode::RuntimeEventShape)
                            .with_reason(self.shape_reason(c, &mismatch)),
                    ));
                }
                with_defaults(event, payload)
            }
            None => payload,
        };
        let request = CallRequest {
            action: action.name.clone(),
            args: call_args(&self.program, &sub.call, &payload),
            event_id: Some(c.event_id),
            event: c.event.clone(),
            delivery: Some(c.id),
            attempt: c.attempt,
        };
        let deadline_ms = c.claimed_at_ms.saturating_add(rules::ms_i64(sub.timeout_ms));
        Ok(PreparedCall { driver: driver.clone(), request, deadline_ms })
    }

    /// Why a claimed delivery's event does not fit its subscriber's call: the
    /// field, and the versions that stored the event and that run now.
    fn shape_reason(&self, c: &Claimed, mismatch: &ShapeMismatch) -> String {
        let how = if mismatch.missing { "is missing" } else { "is of another type" };
        let stored = c.event_version.map_or("an unrecorded version".to_string(), |id| format!("version #{id}"));
        let running = match &self.presence {
            Some(p) => match *p.id.lock().unwrap_or_else(|e| e.into_inner()) {
                Some(id) => format!("version #{id} ({})", p.version.short()),
                None => format!("version {}", p.version.short()),
            },
            None => "this program".to_string(),
        };
        format!(
            "field `{}` of event {} {how}: stored by {stored}; {running} reads it as {}",
            mismatch.field, c.event_id, mismatch.expected
        )
    }

    /// What to record for a claimed delivery whose call ended with `outcome` at
    /// `now_ms`: the core decides, drawing from the runtime's random source.
    pub fn conclude(&self, c: &Claimed, outcome: Outcome, now_ms: i64) -> Done {
        let budget = self.subscriber(&c.subscriber).map(|s| s.budget).unwrap_or_default();
        let decision = self.random.with(|rng| decide_after_attempt(&c.record, &budget, &outcome, now_ms, rng));
        if self.breakers.concluded(&c.connection, c.id, &outcome, now_ms) {
            // A claim may have left deliveries for this connection's free slot.
            self.observer.work_due();
        }
        let raises = match &decision {
            Decision::Failed { failure, .. } | Decision::Parked { failure } => {
                let ended = EndedDelivery {
                    id: c.id,
                    event_id: c.event_id,
                    event: &c.event,
                    subscriber: &c.subscriber,
                    parked: matches!(decision, Decision::Parked { .. }),
                    failure,
                    attempts: c.attempt,
                };
                builtin::delivery_ended(&self.program, &ended)
            }
            Decision::Succeeded | Decision::Retry { .. } => Vec::new(),
        };
        Done {
            raises,
            recorded: Recorded {
                id: c.id,
                connection: c.connection.clone(),
                attempt: c.attempt,
                started_at_ms: c.claimed_at_ms,
                ended_at_ms: now_ms,
                outcome,
                decision,
            },
            subscriber: c.subscriber.clone(),
            lease_until_ms: c.record.lease_until_ms,
        }
    }

    /// Record finished attempts in one transaction and log those written; returns
    /// how many were still owned by their attempt and written (one whose lease
    /// another claim took is that claim's to report).
    pub fn record_outcomes(&self, done: &[Done]) -> Result<usize, StoreError> {
        let (records, raised) = outcome_rows(done);
        let written = self.store.record(&records, &raised, &Raiser { program: &self.program });
        self.left_to_the_store(&records);
        let written = written?;
        self.outcomes_written(done, &written);
        Ok(written.len())
    }

    /// Recorded or not (a delivery not written comes back at its lease's end),
    /// the store's row speaks for these outcomes from now on.
    fn left_to_the_store(&self, records: &[Recorded]) {
        for r in records {
            self.breakers.recorded(&r.connection, r.id);
        }
    }

    /// Log the outcomes of `done` the store wrote (`written`, their places in
    /// `done`), and wake the claims for the events they raised.
    pub fn outcomes_written(&self, done: &[Done], written: &[usize]) {
        if written.iter().filter_map(|&i| done.get(i)).any(|d| !d.raises.is_empty()) {
            // The events it raised have deliveries due now.
            self.observer.work_due();
        }
        let written = || written.iter().filter_map(|&i| done.get(i));
        events::log_batch(written().map(|d| {
            let r = &d.recorded;
            RunEvent::Attempt {
                at_ms: r.ended_at_ms,
                delivery: r.id,
                subscriber: &d.subscriber,
                attempt: r.attempt,
                outcome: &r.outcome,
                decision: &r.decision,
                duration_ms: r.ended_at_ms - r.started_at_ms,
            }
        }));
        for d in written() {
            self.observer.attempt(&d.recorded, &d.subscriber);
        }
    }

    /// The tick's work at `now_ms`: sweep the breakers (alerts, probes woken,
    /// releases), logging each alert this process raised, and claim the schedules
    /// due (the caller runs them).
    pub fn tick(&self, now_ms: i64) -> Result<Vec<ClaimedSchedule>, StoreError> {
        self.tick_parts(now_ms, true, true)
    }

    /// The tick's work at `now_ms` of the kinds `work` says are due then: the
    /// virtual-time driver, the store's one user, knows when each kind next has
    /// work, and a kind with none does nothing but cost its transaction.
    pub fn tick_due(&self, now_ms: i64, work: &TickWork) -> Result<Vec<ClaimedSchedule>, StoreError> {
        self.tick_parts(now_ms, work.sweep_due(now_ms), work.schedules_due(now_ms))
    }

    fn tick_parts(&self, now_ms: i64, sweep: bool, schedules: bool) -> Result<Vec<ClaimedSchedule>, StoreError> {
        self.among_processes(now_ms)?;
        if sweep {
            let lease_until = |subscriber: &str| rules::lease_until_ms(now_ms, self.run_timeout_ms(subscriber));
            let sweep = self.store.sweep_breakers(now_ms, &lease_until, &Raiser { program: &self.program })?;
            sweep.alerts.iter().for_each(|alert| events::log(RunEvent::alert(alert)));
            if !sweep.woken.is_empty() || sweep.released > 0 || !sweep.alerts.is_empty() {
                // A woken probe, released deliveries or an alert's events are due now.
                self.observer.work_due();
            }
        }
        if !schedules || self.schedules.is_empty() {
            return Ok(Vec::new());
        }
        self.store.claim_schedules(&self.schedules, now_ms)
    }

    /// The earliest time the tick has work at or after `now_ms`, if any (for the
    /// virtual-time driver, which runs the tick only when it has something to do).
    pub fn next_tick_work_ms(&self, now_ms: i64) -> Result<Option<i64>, StoreError> {
        Ok(self.next_tick_work(now_ms)?.at_ms())
    }

    /// When the tick next has work of each kind, at or after `now_ms`.
    pub fn next_tick_work(&self, now_ms: i64) -> Result<TickWork, StoreError> {
        Ok(TickWork { sweep_ms: self.next_sweep_ms(now_ms)?, schedules_ms: self.next_schedules_ms()? })
    }

    /// When the breakers' sweep next has work, at or after `now_ms`.
    pub fn next_sweep_ms(&self, now_ms: i64) -> Result<Option<i64>, StoreError> {
        self.store.next_sweep_ms(now_ms)
    }

    /// When the earliest schedule is due, if the program has schedules.
    pub fn next_schedules_ms(&self) -> Result<Option<i64>, StoreError> {
        if self.schedules.is_empty() { Ok(None) } else { self.store.next_schedule_due_ms() }
    }

    /// Make sure every declared schedule has its row (at start).
    pub fn sync_schedules(&self, now_ms: i64) -> Result<(), StoreError> {
        self.store.sync_schedules(&self.schedules, now_ms)
    }

    /// What a run does first: keep its program's version in the store, say it
    /// is running, and make sure every declared schedule has its row.
    pub fn start(&self, now_ms: i64) -> Result<(), StoreError> {
        if let Some(p) = &self.presence {
            let id = self.store.record_version(&p.version, now_ms, true)?;
            *p.id.lock().unwrap_or_else(|e| e.into_inner()) = Some(id);
        }
        self.among_processes(now_ms)?;
        self.sync_schedules(now_ms)
    }

    /// What a run does last: it no longer counts as running.
    pub fn stopped(&self) -> Result<(), StoreError> {
        match &self.presence {
            Some(p) => self.store.process_stopped(&p.process.id),
            None => Ok(()),
        }
    }

    /// This process among the others (at most every [`version::HEARTBEAT_EVERY_MS`]):
    /// say it is alive, read which subscribers the running processes' programs
    /// have, and take back the orphaned deliveries of its own subscribers.
    fn among_processes(&self, now_ms: i64) -> Result<(), StoreError> {
        let Some(p) = &self.presence else { return Ok(()) };
        {
            let mut seen = p.seen_ms.lock().unwrap_or_else(|e| e.into_inner());
            if seen.is_some_and(|at| now_ms < at.saturating_add(rules::ms_i64(version::HEARTBEAT_EVERY_MS))) {
                return Ok(());
            }
            *seen = Some(now_ms);
        }
        let live_since = now_ms.saturating_sub(rules::ms_i64(version::PROCESS_LIVE_MS));
        let known: HashSet<String> = self.store.heartbeat(&p.process, now_ms, live_since)?.into_iter().collect();
        *self.elsewhere.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(known);
        let mine: Vec<String> = self.subscribers.keys().cloned().collect();
        let orphans = self.store.orphans(&mine, ADOPT_BATCH)?;
        if !orphans.is_empty() && self.store.adopt(&orphans, now_ms)? > 0 {
            events::log(RunEvent::Adopted { at_ms: now_ms, deliveries: orphans.len() as u64 });
            self.observer.work_due();
        }
        Ok(())
    }

    /// The call a schedule's run makes, or the defect that stops it.
    pub fn prepare_schedule(&self, name: &str, started_ms: i64) -> Result<PreparedCall, Outcome> {
        let defect = |code: RuntimeCode| Outcome::fail(FailureKind::InternalFault, code);
        let Some(s) = self.program.schedules.iter().find(|s| s.name == name) else {
            return Err(defect(RuntimeCode::RuntimeUnknownSchedule));
        };
        let Some((action, driver)) =
            self.program.actions.get(s.call.action).and_then(|a| Some((a, self.drivers.get(a.connection)?)))
        else {
            return Err(defect(RuntimeCode::RuntimeUnknownAction));
        };
        let request = CallRequest {
            action: action.name.clone(),
            args: call_args(&self.program, &s.call, &Value::Null),
            event_id: None,
            event: name.to_string(),
            delivery: None,
            attempt: 1,
        };
        let deadline_ms = started_ms.saturating_add(rules::ms_i64(s.timeout_ms));
        Ok(PreparedCall { driver: driver.clone(), request, deadline_ms })
    }

    /// Record and log how a schedule's run ended.
    pub fn finish_schedule(&self, name: &str, run: u64, outcome: &Outcome, now_ms: i64) -> Result<(), StoreError> {
        let failure = outcome.failure();
        let result = self.store.record_schedule(name, run, now_ms, failure.as_ref()).map(|_| ());
        events::log(RunEvent::ScheduleRun { at_ms: now_ms, schedule: name, run, outcome });
        result
    }

    /// What an event written in SQL becomes under this program: its deliveries,
    /// or invalid with the code (as `jadpoc explain` knows it) and message
    /// `jadpoc emit` refuses its payload with (the one validation of
    /// [`crate::payload`]).
    pub fn expansion(&self, e: &UnexpandedEvent) -> Expansion {
        match new_event(&self.program, &e.name, &e.payload) {
            Ok(new) => Expansion::Deliveries(new.deliveries),
            Err(refused) => {
                Expansion::Invalid { code: refused.registered().as_str().to_string(), reason: refused.to_string() }
            }
        }
    }

    /// Expand up to `limit` events written in SQL at `now_ms`: each gets its
    /// deliveries, due at once, or is kept invalid with the reason (logged);
    /// the live driver claims again for the new deliveries.
    pub fn expand_events(&self, now_ms: i64, limit: usize) -> Result<ExpandReport, StoreError> {
        let report = self.store.expand_events(now_ms, limit, &mut |e| self.expansion(e))?;
        for e in &report.invalid {
            let (name, code, reason) = (&e.name, &e.code, &e.reason);
            events::log(RunEvent::EventInvalid { at_ms: now_ms, event_id: e.id, name, code, reason });
        }
        if report.expanded.iter().any(|e| e.deliveries > 0) {
            self.observer.work_due();
        }
        Ok(report)
    }
}

/// The store's rows of finished attempts: each outcome, and the events it raised.
fn outcome_rows(done: &[Done]) -> (Vec<Recorded>, Vec<Vec<NewEvent>>) {
    (done.iter().map(|d| d.recorded.clone()).collect(), done.iter().map(|d| d.raises.clone()).collect())
}
