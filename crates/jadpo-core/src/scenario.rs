//! The virtual-time scenario driver behind `jadpoc test` (testing.md).
//!
//! A test runs the real runtime: the same [`Runtime`] steps as `jadpoc run` (the
//! core's claim and attempt decisions, the tick), a real store (`jadpoc test`'s is
//! the SQLite store on an in-memory database), and the fake driver, under a [`VirtualClock`] that jumps from
//! one due time to the next. Nothing sleeps and nothing reads the system clock;
//! the random source is seeded per run, so a seed gives the same course every time.
//!
//! Attempts run one at a time, in order of due time, then of creation. A fake
//! answers at once; a call that does not answer (`hang`) takes the run's whole
//! `timeout:`, during which nothing else runs.

use crate::clock::{BoxFuture, Clock, VirtualClock, format_offset};
use crate::codes::RuntimeCode;
use crate::config::RuntimeConfig;
use crate::drivers::{CallRequest, Driver, FakeDriver};
use crate::payload::{literal, new_event_from_value};
use crate::rng::RandomSource;
use crate::rules::Outcome;
use crate::rules::breaker::BreakerRow;
use crate::steps::{PreparedCall, Runtime, TickWork};
use crate::store::{Actions, AttemptView, Claimed, DeliveryFilter, DeliveryView, RetryResult, Store, StoreError};
use jadpo_check::format_duration;
use jadpo_check::program::{BreakerExpect, DeliveryExpect, DeliveryState, FailureKind, Program, Step, Test};
use serde_json::{Map, Value};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// Where virtual time starts: a test's times are shown as offsets from it.
pub const START_MS: i64 = 0;

/// The code of the failure a connection with no fake answers in a test.
pub const CODE_NO_FAKE: &str = RuntimeCode::FakeNone.as_str();

/// A connection's driver in a test: a `fake` step swaps what is inside.
struct Slot {
    inner: Mutex<Arc<dyn Driver>>,
}

impl Slot {
    fn set(&self, driver: Arc<dyn Driver>) {
        *self.inner.lock().unwrap_or_else(|e| e.into_inner()) = driver;
    }
}

impl Driver for Slot {
    fn call(&self, request: CallRequest) -> BoxFuture<'_, Outcome> {
        let driver = self.inner.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Box::pin(async move { driver.call(request).await })
    }
}

/// The driver of a connection with no fake: every call fails `unavailable`.
struct NoFake;

impl Driver for NoFake {
    fn call(&self, _request: CallRequest) -> BoxFuture<'_, Outcome> {
        Box::pin(std::future::ready(Outcome::fail(FailureKind::Unavailable, CODE_NO_FAKE)))
    }
}

/// Why a test failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestFailure {
    /// The failing step, counted from 1.
    pub step: usize,
    /// The step as written, shortly (`expect record_payment`).
    pub step_text: String,
    /// Virtual time when it failed, from the test's start.
    pub at_ms: i64,
    /// What differed.
    pub detail: FailureDetail,
}

/// What differed at the failing step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureDetail {
    /// A delivery's expectation did not hold.
    Delivery {
        /// The keys expected, with their values.
        expected: Vec<(&'static str, String)>,
        /// The same keys as found.
        found: Vec<(&'static str, String)>,
        /// The subscriber's latest delivery and its attempts, if it has one.
        delivery: Option<Box<(DeliveryView, Vec<AttemptView>)>>,
    },
    /// A breaker's expectation did not hold.
    Breaker {
        /// The keys expected, with their values.
        expected: Vec<(&'static str, String)>,
        /// The same keys as found.
        found: Vec<(&'static str, String)>,
    },
    /// A step could not be done (a `retry` of a delivery that cannot be retried).
    Step(String),
    /// The runtime itself failed (a store error): a defect, not the test's fault.
    Runtime(String),
}

impl From<StoreError> for FailureDetail {
    fn from(e: StoreError) -> Self {
        FailureDetail::Runtime(e.to_string())
    }
}

fn pairs(list: &[(&'static str, String)]) -> String {
    list.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ")
}

impl TestFailure {
    /// The failure for people, each line indented by four spaces.
    pub fn render(&self) -> String {
        let mut out =
            format!("    step {} (`{}`) at {}\n", self.step, self.step_text, format_offset(self.at_ms - START_MS));
        match &self.detail {
            FailureDetail::Delivery { expected, found, delivery } => {
                out.push_str(&format!("    expected  {}\n    found     {}\n", pairs(expected), pairs(found)));
                if let Some(latest) = delivery {
                    out.push_str(&history_text(&latest.0, &latest.1));
                }
            }
            FailureDetail::Breaker { expected, found } => {
                out.push_str(&format!("    expected  {}\n    found     {}\n", pairs(expected), pairs(found)));
            }
            FailureDetail::Step(m) => out.push_str(&format!("    {m}\n")),
            FailureDetail::Runtime(m) => out.push_str(&format!("    the runtime failed: {m}\n")),
        }
        out
    }
}

/// A delivery's attempts with their virtual times.
fn history_text(d: &DeliveryView, history: &[AttemptView]) -> String {
    let mut out = format!(
        "    delivery {} of `{}`: {}, {} used",
        d.id,
        d.subscriber,
        d.state,
        jadpo_check::plural(u64::from(d.attempts), "attempt")
    );
    if let Some(due) = d.due_at_ms {
        out.push_str(&format!(", next due at {}", format_offset(due - START_MS)));
    }
    if let Some(h) = d.held_since_ms {
        out.push_str(&format!(", held since {}", format_offset(h - START_MS)));
    }
    out.push('\n');
    if history.is_empty() {
        out.push_str("      (no attempts)\n");
    }
    for a in history {
        out.push_str(&format!("      {} attempt {} ", format_offset(a.started_at_ms - START_MS), a.attempt));
        match (&a.kind, &a.code) {
            (Some(kind), Some(code)) => out.push_str(&format!("{kind} ({code})")),
            _ => out.push_str(&a.outcome),
        }
        if a.duration_ms > 0 {
            out.push_str(&format!(" after {}", format_duration(u64::try_from(a.duration_ms).unwrap_or(0))));
        }
        out.push('\n');
    }
    out
}

/// What runs later within a `wait`: an attempt, or a schedule's run, whose call
/// never answered and ends at its run's time limit.
enum Work {
    Attempt(Box<Claimed>),
    Schedule { name: String, run: u64 },
}

struct InFlight {
    work: Work,
    outcome: Outcome,
    ends_at_ms: i64,
}

/// One test's run: the runtime on an in-memory store under virtual time.
pub struct Scenario {
    program: Arc<Program>,
    runtime: Runtime,
    clock: Arc<VirtualClock>,
    store: Arc<dyn Store>,
    slots: Vec<Arc<Slot>>,
    inflight: Option<InFlight>,
    /// The tick already ran at this time with nothing changed since: its work due
    /// up to then is done (what is left waits for a claim or a record).
    tick_ran_at: Option<i64>,
    /// What the store said when the next delivery is due, while nothing that
    /// writes deliveries has run since (a claim, an outcome, the sweep, an emit,
    /// a retry). The scenario is its store's one user, so a schedule's run,
    /// which writes its schedule's row alone, leaves it true.
    known_due: Option<Option<i64>>,
    /// When the sweep next has work, while nothing that writes deliveries or
    /// breakers has run since, and only an answer after the time it was asked
    /// at (one due at once counts from the time asked; see
    /// [`Store::next_sweep_ms`]).
    known_sweep: Option<Option<i64>>,
    /// When the earliest schedule is due, while no schedule was claimed since.
    known_schedules: Option<Option<i64>>,
}

/// Poll a call once: a fake answers at once (`Some`); a call that does not is one
/// that never answers (`None`), ended by its run's time limit.
fn answer_now(call: BoxFuture<'_, Outcome>) -> Option<Outcome> {
    let mut call = call;
    match call.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(o) => Some(o),
        Poll::Pending => None,
    }
}

impl Scenario {
    /// A fresh runtime for `program` at virtual time zero on `store` (a new, empty
    /// one), its random source seeded with `seed`, every connection answering
    /// `unavailable` until a `fake` step.
    pub fn new(program: Arc<Program>, store: Arc<dyn Store>, seed: u64) -> Result<Scenario, StoreError> {
        let clock = Arc::new(VirtualClock::new(START_MS));
        let slots: Vec<Arc<Slot>> = program
            .connections
            .iter()
            .map(|_| Arc::new(Slot { inner: Mutex::new(Arc::new(NoFake) as Arc<dyn Driver>) }))
            .collect();
        let drivers = slots.iter().map(|s| s.clone() as Arc<dyn Driver>).collect();
        let config = RuntimeConfig { workers: 1, batch: 1, ..RuntimeConfig::default() };
        let random = RandomSource::from_seed(seed);
        let runtime = Runtime::new(program.clone(), store.clone(), clock.clone(), drivers, random, config);
        runtime.sync_schedules(START_MS)?;
        Ok(Scenario {
            program,
            runtime,
            clock,
            store,
            slots,
            inflight: None,
            tick_ran_at: None,
            known_due: None,
            known_sweep: None,
            known_schedules: None,
        })
    }

    /// Deliveries or breakers may change next (a claim, an outcome, the sweep,
    /// an emit, a retry): what was known of them is read again.
    fn deliveries_change(&mut self) {
        self.known_due = None;
        self.known_sweep = None;
    }

    /// The current virtual time.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Advance virtual time by `ms`, running everything that falls due in between
    /// (and exactly at its end) in due order.
    pub fn wait(&mut self, ms: u64) -> Result<(), FailureDetail> {
        let end = self.now_ms().saturating_add(crate::rules::ms_i64(ms));
        loop {
            if let Some(f) = &self.inflight {
                if f.ends_at_ms > end {
                    break;
                }
                self.clock.advance_to(f.ends_at_ms);
                if let Some(f) = self.inflight.take() {
                    self.finish(f.work, f.outcome)?;
                }
                self.nothing_counted_in_flight()?;
                continue;
            }
            let due = match self.known_due {
                Some(due) => due,
                None => *self.known_due.insert(self.store.next_due_ms()?),
            };
            let now = self.now_ms();
            let schedules_ms = match self.known_schedules {
                Some(at) => at,
                None => *self.known_schedules.insert(self.runtime.next_schedules_ms()?),
            };
            let sweep_ms = match self.known_sweep {
                Some(at) => at,
                None => {
                    let at = self.runtime.next_sweep_ms(now)?;
                    if at.is_none_or(|t| t > now) {
                        self.known_sweep = Some(at);
                    }
                    at
                }
            };
            let work = TickWork { sweep_ms, schedules_ms };
            let tick = work.at_ms().filter(|t| self.tick_ran_at.is_none_or(|ran| *t > ran));
            let next = match (due, tick) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(t) => t,
                    None => break,
                },
            };
            if next > end {
                break;
            }
            self.clock.advance_to(next);
            let now = self.now_ms();
            if due.is_some_and(|d| d <= now) {
                // Attempts first, one at a time; the tick runs once they are drained.
                self.deliveries_change();
                let report = self.runtime.claim_due(now, 1)?.report;
                self.tick_ran_at = None;
                if report.changed() == 0 {
                    // Nothing else runs meanwhile, so a due delivery the claim
                    // leaves alone would be found due again forever.
                    return Err(FailureDetail::Runtime(format!(
                        "a delivery due at {} could not be claimed",
                        format_offset(now - START_MS)
                    )));
                }
                for c in report.run {
                    self.start_attempt(c)?;
                }
                self.nothing_counted_in_flight()?;
            } else {
                // Only the kinds of work due now: the sweep and the schedules' claim
                // each find nothing to do before their time (nothing else writes
                // this store), and their transactions were most of a tick's cost.
                if work.sweep_due(now) {
                    self.deliveries_change();
                }
                if work.schedules_due(now) {
                    self.known_schedules = None;
                }
                let claimed = self.runtime.tick_due(now, &work)?;
                self.tick_ran_at = Some(now);
                for s in claimed {
                    self.start_schedule(s.name, s.run)?;
                }
            }
        }
        self.clock.advance_to(end);
        Ok(())
    }

    /// With no attempt under way, no run may be counted in flight on any
    /// connection: one counted and never started would keep a connection that
    /// has not answered well from running anything again.
    fn nothing_counted_in_flight(&self) -> Result<(), FailureDetail> {
        if self.inflight.is_some() {
            return Ok(());
        }
        match self.runtime.counted_in_flight() {
            None => Ok(()),
            Some((connection, n)) => Err(FailureDetail::Runtime(format!(
                "{n} run(s) of connection `{connection}` counted in flight at {} with no attempt under way",
                format_offset(self.now_ms() - START_MS)
            ))),
        }
    }

    fn start(&mut self, work: Work, prepared: Result<PreparedCall, Outcome>) -> Result<(), StoreError> {
        let now = self.now_ms();
        match prepared {
            Err(defect) => self.finish(work, defect),
            Ok(p) => match answer_now(p.driver.call(p.request)) {
                Some(outcome) => self.finish(work, outcome),
                None => {
                    let outcome = Outcome::fail(FailureKind::DeadlineExceeded, crate::rules::CODE_DEADLINE_EXCEEDED);
                    self.inflight = Some(InFlight { work, outcome, ends_at_ms: p.deadline_ms.max(now) });
                    Ok(())
                }
            },
        }
    }

    fn start_attempt(&mut self, c: Claimed) -> Result<(), StoreError> {
        let prepared = self.runtime.prepare_call(&c);
        self.start(Work::Attempt(Box::new(c)), prepared)
    }

    fn start_schedule(&mut self, name: String, run: u64) -> Result<(), StoreError> {
        let prepared = self.runtime.prepare_schedule(&name, self.now_ms());
        self.start(Work::Schedule { name, run }, prepared)
    }

    fn finish(&mut self, work: Work, outcome: Outcome) -> Result<(), StoreError> {
        let now = self.now_ms();
        self.tick_ran_at = None;
        match work {
            Work::Attempt(c) => {
                self.deliveries_change();
                let done = self.runtime.conclude(&c, outcome, now);
                self.runtime.record_outcomes(&[done])?;
            }
            Work::Schedule { name, run } => self.runtime.finish_schedule(&name, run, &outcome, now)?,
        }
        Ok(())
    }

    /// The subscriber's latest delivery, with its attempts.
    pub fn latest(&self, subscriber: &str) -> Result<Option<(DeliveryView, Vec<AttemptView>)>, StoreError> {
        let filter =
            DeliveryFilter { subscriber: Some(subscriber.to_string()), limit: Some(1), ..DeliveryFilter::default() };
        match self.store.deliveries(&filter)?.into_iter().next() {
            Some(d) => Ok(self.store.delivery(d.id)?.map(|full| (full.delivery, full.attempts))),
            None => Ok(None),
        }
    }

    /// Every delivery so far, oldest first, with its attempts.
    pub fn all_deliveries(&self) -> Result<Vec<(DeliveryView, Vec<AttemptView>)>, StoreError> {
        let mut out = Vec::new();
        for d in self.store.deliveries(&DeliveryFilter::default())? {
            if let Some(full) = self.store.delivery(d.id)? {
                out.push((full.delivery, full.attempts));
            }
        }
        out.sort_by_key(|(d, _)| d.id);
        Ok(out)
    }

    /// A connection's breaker (closed and never failed when it has no row).
    pub fn breaker(&self, connection: &str) -> Result<BreakerRow, StoreError> {
        Ok(self.store.breakers()?.into_iter().find(|b| b.connection == connection).map(|b| b.row).unwrap_or_default())
    }

    /// An operator's change made beside the runtime, as `jadpoc breakers`,
    /// `jadpoc deliveries` or the console make one (a pause, a resume, a skip):
    /// `change` on the store at the current virtual time. What the driver knew
    /// of the deliveries and breakers is read again after it.
    pub fn operator<T>(
        &mut self,
        change: impl FnOnce(&dyn Store, i64) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.deliveries_change();
        self.tick_ran_at = None;
        change(&*self.store, self.now_ms())
    }

    /// Run one step.
    fn step(&mut self, step: &Step) -> Result<(), FailureDetail> {
        let program = self.program.clone();
        match step {
            Step::Fake { connection, answers } => {
                if let Some(slot) = self.slots.get(*connection) {
                    slot.set(Arc::new(FakeDriver::new(answers.clone())));
                }
            }
            Step::Emit { event, fields } => {
                let name = program.events.get(*event).map(|e| e.name.as_str()).unwrap_or_default();
                let payload: Map<String, Value> = fields.iter().map(|(k, v)| (k.clone(), literal(v))).collect();
                let new = new_event_from_value(&program, name, &Value::Object(payload))
                    .map_err(|e| FailureDetail::Step(format!("the event does not check: {e}")))?;
                self.deliveries_change();
                self.store.emit(&[new], self.now_ms())?;
            }
            Step::Wait { ms } => self.wait(*ms)?,
            Step::Retry { subscriber } => {
                let name = subscriber_name(&program, *subscriber);
                let Some((d, _)) = self.latest(name)? else {
                    return Err(FailureDetail::Step(format!("`{name}` has no delivery to retry")));
                };
                self.deliveries_change();
                match self.store.retry(&[d.id], self.now_ms())?.first() {
                    Some(RetryResult::Retried) => {}
                    _ => {
                        return Err(FailureDetail::Step(format!(
                            "`{name}`'s latest delivery is {}; only a failed or parked delivery can be retried",
                            d.state
                        )));
                    }
                }
            }
            Step::Expect { subscriber, expect } => {
                let latest = self.latest(subscriber_name(&program, *subscriber))?;
                let (expected, found) = compare_delivery(expect, latest.as_ref().map(|(d, _)| d));
                if expected != found {
                    return Err(FailureDetail::Delivery { expected, found, delivery: latest.map(Box::new) });
                }
            }
            Step::ExpectBreaker { connection, expect } => {
                let name = program.connections.get(*connection).map(|c| c.name.as_str()).unwrap_or_default();
                let row = self.breaker(name)?;
                let (expected, found) = compare_breaker(expect, &row);
                if expected != found {
                    return Err(FailureDetail::Breaker { expected, found });
                }
            }
        }
        Ok(())
    }
}

fn subscriber_name(program: &Program, i: usize) -> &str {
    program.subscribers.get(i).map(|s| s.name.as_str()).unwrap_or_default()
}

/// The keys an expectation names, as expected and as found.
type Compared = (Vec<(&'static str, String)>, Vec<(&'static str, String)>);

fn compare_delivery(e: &DeliveryExpect, d: Option<&DeliveryView>) -> Compared {
    let Some(d) = d else {
        let mut expected = Vec::new();
        if let Some(s) = e.state {
            expected.push(("state", s.to_string()));
        }
        return (expected, vec![("delivery", "none (no event it subscribes to was emitted)".into())]);
    };
    let mut expected = Vec::new();
    let mut found = Vec::new();
    if let Some(s) = e.state {
        expected.push(("state", s.to_string()));
        found.push(("state", d.state.to_string()));
    }
    if let Some(n) = e.attempts {
        expected.push(("attempts", n.to_string()));
        found.push(("attempts", d.attempts.to_string()));
    }
    if let Some(k) = e.last_failure {
        expected.push(("last_failure", k.to_string()));
        found.push(("last_failure", d.last_failure.as_ref().map_or("none".into(), |f| f.kind.to_string())));
    }
    if let Some(h) = e.held {
        expected.push(("held", h.to_string()));
        found.push(("held", (d.state == DeliveryState::Held).to_string()));
    }
    (expected, found)
}

fn compare_breaker(e: &BreakerExpect, row: &BreakerRow) -> Compared {
    let mut expected = Vec::new();
    let mut found = Vec::new();
    if let Some(s) = e.state {
        expected.push(("state", s.as_str().to_string()));
        found.push(("state", row.state.as_str().to_string()));
    }
    if let Some(n) = e.alerts {
        expected.push(("alerts", n.to_string()));
        found.push(("alerts", row.alerts.to_string()));
    }
    (expected, found)
}

/// The step as written, shortly, for messages.
fn step_text(program: &Program, step: &Step) -> String {
    let conn = |i: usize| program.connections.get(i).map(|c| c.name.as_str()).unwrap_or_default();
    match step {
        Step::Fake { connection, .. } => format!("fake {}", conn(*connection)),
        Step::Emit { event, .. } => {
            format!("emit {}", program.events.get(*event).map(|e| e.name.as_str()).unwrap_or_default())
        }
        Step::Wait { ms } => format!("wait {}", format_duration(*ms)),
        Step::Retry { subscriber } => format!("retry {}", subscriber_name(program, *subscriber)),
        Step::Expect { subscriber, .. } => format!("expect {}", subscriber_name(program, *subscriber)),
        Step::ExpectBreaker { connection, .. } => format!("expect breaker {}", conn(*connection)),
    }
}

impl TestFailure {
    /// The run could not start: its store failed.
    pub fn at_start(e: StoreError) -> TestFailure {
        TestFailure { step: 0, step_text: "start".into(), at_ms: START_MS, detail: e.into() }
    }
}

/// Run `test` against `program` on `store` (a new, empty one) with the random
/// source seeded by `seed`.
pub fn run_test(program: &Arc<Program>, test: &Test, seed: u64, store: Arc<dyn Store>) -> Result<(), TestFailure> {
    let mut scenario = Scenario::new(program.clone(), store, seed).map_err(TestFailure::at_start)?;
    run_steps(&mut scenario, program, test, |_, _| Ok(()))
}

/// Run the test's steps in order, `before(scenario, i)` before its step `i`
/// (from 0); a failure there is that step's.
fn run_steps(
    scenario: &mut Scenario,
    program: &Arc<Program>,
    test: &Test,
    mut before: impl FnMut(&mut Scenario, usize) -> Result<(), FailureDetail>,
) -> Result<(), TestFailure> {
    for (i, step) in test.steps.iter().enumerate() {
        if let Err(detail) = before(scenario, i).and_then(|()| scenario.step(step)) {
            return Err(TestFailure {
                step: i + 1,
                step_text: step_text(program, step),
                at_ms: scenario.now_ms(),
                detail,
            });
        }
    }
    Ok(())
}

/// A test's run and what it left in its store: for a timeline of its attempts
/// (the browser playground draws one).
#[derive(Debug)]
pub struct TracedRun {
    /// What [`run_test`] returns.
    pub result: Result<(), TestFailure>,
    /// Virtual time when the run stopped (at its end, or at the failing step).
    pub end_ms: i64,
    /// Every delivery the run made, oldest first, with its attempts; or why the
    /// store could not list them.
    pub deliveries: Result<Vec<(DeliveryView, Vec<AttemptView>)>, StoreError>,
}

/// As [`run_test`], and then every delivery of the run with its attempts.
pub fn run_test_traced(program: &Arc<Program>, test: &Test, seed: u64, store: Arc<dyn Store>) -> TracedRun {
    run_test_traced_with(program, test, seed, store, |_, _| Ok(()))
}

/// As [`run_test_traced`], with `before(scenario, i)` run before the test's
/// step `i` (from 0): what an operator does between a test's steps
/// ([`Scenario::operator`]), which the test's language has no step for. A
/// failure there is the failure of the step it came before.
pub fn run_test_traced_with(
    program: &Arc<Program>,
    test: &Test,
    seed: u64,
    store: Arc<dyn Store>,
    before: impl FnMut(&mut Scenario, usize) -> Result<(), FailureDetail>,
) -> TracedRun {
    let mut scenario = match Scenario::new(program.clone(), store, seed) {
        Ok(s) => s,
        Err(e) => {
            return TracedRun { result: Err(TestFailure::at_start(e)), end_ms: START_MS, deliveries: Ok(Vec::new()) };
        }
    };
    let result = run_steps(&mut scenario, program, test, before);
    let deliveries = scenario.all_deliveries();
    TracedRun { result, end_ms: scenario.now_ms(), deliveries }
}
