//! The live driver of time: the async shell behind `jadpoc run`.
//!
//! What to do and when is decided by the `conductor`'s pure state machine,
//! given the time and what came back; this shell only performs what it asks
//! and waits. One task runs the loop: it shell each action to the store calls
//! (claims, records, the next due time, the tick, the expansion of events
//! written in SQL, the prune, the start and the stop's last write), to new tasks
//! (attempts and schedule runs, each cut off when the stop's grace period is
//! over) or to the cut itself, then waits for whichever comes first: something
//! coming back, work made due (an in-process emit, an attempt freeing a
//! connection's slot, another process's event when the store can tell:
//! [`jadpo_core::store::Store::listen`]), the caller's stop, or the time the
//! conductor next has something to do.
//!
//! No store call blocks an async thread: on a store whose writes all take one
//! lock (SQLite) they are made in order on a thread of their own, so that one
//! claim follows another without a blocking thread to wake or attempts to queue
//! behind; on PostgreSQL, whose writers work at once, on tokio's blocking
//! threads (`store_calls`). With one writer a claim writes the outcomes waiting
//! in its own transaction, which then commits and syncs once for both. An
//! outcome is logged once its transaction has committed (those a claim wrote on
//! a thread of their own, in the order written).
//!
//! The clock is the runtime's: the system clock on SQLite, the database's on
//! PostgreSQL (re-read at every tick: [`jadpo_core::clock::AnchoredClock`]).
//!
//! A lost store never ends the run: every store error is logged as it comes
//! back and the conductor tries again after a pause that grows while the errors
//! go on. A panic is not a store error: a task or store call that panics is a
//! defect. It is logged as `runtime.internal_fault` with its message, an attempt
//! whose call panicked is recorded `failed` with that code, and the run stops as
//! on a stop, returning the fault ([`InternalFault`]).
//!
//! The work itself is the [`Runtime`]'s steps ([`jadpo_core::steps`]); [`Live`]
//! observes them to wake its claims when the steps say work is due.

mod conductor;
mod store_calls;

use conductor::{Action, Call, Conductor, Ended, Input, Settings};
use futures_util::FutureExt;
use jadpo_check::program::FailureKind;
use jadpo_core::clock::Clock;
use jadpo_core::codes::RuntimeCode;
use jadpo_core::drivers::SendMark;
use jadpo_core::events::{self, RunEvent};
use jadpo_core::retention;
use jadpo_core::rules::Outcome;
use jadpo_core::steps::{Done, DueClaim, Observer, PreparedCall, RunSummary, Runtime};
use jadpo_core::store::{Claimed, ClaimedSchedule, Recorded, StoreError, WaitingAtClaim, Waker};
use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};
use store_calls::StoreCalls;
use tokio::sync::{Notify, mpsc, watch};
use tracing::Instrument;

/// A task of the run panicked, a defect: the run stopped of itself, as on a stop
/// (running attempts finished and were recorded), keeping what it had committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalFault {
    /// What panicked: `an attempt`, `the call of delivery 7`, `the store's claim`.
    pub task: String,
    /// The panic's message.
    pub message: String,
}

impl InternalFault {
    /// `task` panicked with `panic`.
    fn of(task: &str, panic: &(dyn Any + Send)) -> InternalFault {
        let message = if let Some(s) = panic.downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = panic.downcast_ref::<String>() {
            s.clone()
        } else {
            "a panic without a message".to_string()
        };
        InternalFault { task: task.to_string(), message }
    }
}

impl std::fmt::Display for InternalFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} panicked: {}", RuntimeCode::RuntimeInternalFault, self.task, self.message)
    }
}

impl std::error::Error for InternalFault {}

/// Wait until `at_ms` on `clock`'s time (at once if it has passed), on tokio's
/// timer.
fn sleep_until(clock: &dyn Clock, at_ms: i64) -> tokio::time::Sleep {
    let wait = u64::try_from(at_ms.saturating_sub(clock.now_ms())).unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(wait))
}

/// Wait until `at`, or for ever.
async fn wait_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// A runtime as the live driver runs it: its steps, and the wake-up of its idle
/// claims when the steps (or an in-process emit) say work is due.
pub struct Live {
    runtime: Runtime,
    wake: Arc<Notify>,
}

impl std::ops::Deref for Live {
    type Target = Runtime;

    fn deref(&self) -> &Runtime {
        &self.runtime
    }
}

/// What the live driver observes of its runtime's steps: due work wakes its
/// claims; claims and attempts go on to `then` (the metrics), if any.
struct Wake {
    wake: Arc<Notify>,
    then: Option<Arc<dyn Observer>>,
}

impl Observer for Wake {
    fn work_due(&self) {
        // One waiter, the driver's loop: woken now, or at its next wait.
        self.wake.notify_one();
    }

    fn claimed(&self, claimed: &Claimed, now_ms: i64) {
        if let Some(o) = &self.then {
            o.claimed(claimed, now_ms);
        }
    }

    fn waiting(&self, waiting: &WaitingAtClaim) {
        if let Some(o) = &self.then {
            o.waiting(waiting);
        }
    }

    fn attempt(&self, recorded: &Recorded, subscriber: &str) {
        if let Some(o) = &self.then {
            o.attempt(recorded, subscriber);
        }
    }
}

/// What comes back to the driver's loop.
type LiveInput = Input<Done, Claimed, ClaimedSchedule>;

/// Outcomes a claim took and the indexes of those it wrote, to be logged.
type Written = (Vec<Done>, Vec<usize>);

impl Live {
    /// `runtime` to run live; `observer` (the metrics), if given, sees its claims
    /// and attempts.
    pub fn new(runtime: Runtime, observer: Option<Arc<dyn Observer>>) -> Live {
        let wake = Arc::new(Notify::new());
        let runtime = runtime.with_observer(Arc::new(Wake { wake: wake.clone(), then: observer }));
        Live { runtime, wake }
    }

    /// Notified to wake idle claims (after an in-process emit).
    pub fn waker(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Run until `stop` turns true (or its sender goes away), or a task panics;
    /// then stop claiming, let running attempts and schedule runs finish for up
    /// to the grace period, record their outcomes, and return (the fault, if a
    /// task panicked).
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) -> Result<RunSummary, InternalFault> {
        let one_writer = self.store().one_writer();
        let mut conductor = Conductor::new(Settings::new(self.config(), one_writer));
        let (inputs, mut inputs_back) = mpsc::unbounded_channel();
        // The outcomes the claims write are logged in the order written, on a
        // thread of their own: a claim does not wait for the last one's lines.
        let (written, to_log) = std::sync::mpsc::channel::<Written>();
        let (live, log) = (self.clone(), tracing::dispatcher::get_default(Clone::clone));
        let logger = tokio::task::spawn_blocking(move || {
            tracing::dispatcher::with_default(&log, || {
                for (done, written) in to_log {
                    live.outcomes_written(&done, &written);
                }
            });
        });
        let shell = Shell {
            live: self.clone(),
            inputs,
            store_calls: StoreCalls::new(one_writer),
            cut: Arc::new(watch::Sender::new(false)),
            written,
        };
        let wake = self.wake.clone();
        let mut work_due = std::pin::pin!(wake.notified());
        work_due.as_mut().enable();
        let mut stop_seen = false;
        let mut arrived = Vec::new();
        conductor.handle_timeout(Instant::now());
        loop {
            while let Some(action) = conductor.poll_action() {
                shell.perform(action);
            }
            if conductor.is_done() {
                break;
            }
            let next_wake = conductor.next_wake();
            tokio::select! {
                // The loop holds a sender: the channel stays open.
                _ = inputs_back.recv_many(&mut arrived, 512) => {
                    arrived.iter().for_each(|input| self.log_what_came(input));
                    conductor.handle_all(Instant::now(), arrived.drain(..));
                }
                () = &mut work_due => {
                    work_due.set(wake.notified());
                    work_due.as_mut().enable();
                    conductor.handle(Instant::now(), Input::WorkDue);
                }
                // The caller's stop, or its going away.
                _ = stop.wait_for(|s| *s), if !stop_seen => {
                    stop_seen = true;
                    conductor.handle(Instant::now(), Input::StopAsked);
                }
                () = wait_until(next_wake) => conductor.handle_timeout(Instant::now()),
            }
        }
        drop(shell);
        let _ = logger.await;
        conductor.result()
    }

    /// Log the store error, the fault or the prune that came back.
    fn log_what_came(&self, input: &LiveInput) {
        if let Some(error) = input.store_error() {
            events::log(RunEvent::Error { at_ms: self.clock().now_ms(), message: error });
        }
        if let Some(fault) = input.fault() {
            let (task, message) = (&fault.task, &fault.message);
            events::log(RunEvent::InternalFault { at_ms: self.clock().now_ms(), task, message });
        }
        if let Input::Pruned(Ok(counts)) = input
            && counts.deliveries > 0
        {
            events::log(RunEvent::Pruned { at_ms: self.clock().now_ms(), counts: *counts });
        }
    }

    /// Read the store's clock, if it has one, and anchor the runtime's clock to
    /// it (taken as read half-way through the round trip). A failed reading
    /// keeps the last anchor.
    fn anchor_clock(&self) -> Result<(), StoreError> {
        let before = Instant::now();
        if let Some(db_ms) = self.store().db_now_ms()? {
            self.clock().anchor(db_ms, before + before.elapsed() / 2);
        }
        Ok(())
    }

    /// The moment of `at_ms` on the runtime's clock, on the host's monotonic
    /// time (now if it has passed; `None` past what an `Instant` holds).
    fn instant_at(&self, at_ms: i64) -> Option<Instant> {
        let wait = u64::try_from(at_ms.saturating_sub(self.clock().now_ms())).unwrap_or(0);
        Instant::now().checked_add(Duration::from_millis(wait))
    }

    /// Make a prepared call under its run time limit.
    async fn call_prepared(&self, prepared: Result<PreparedCall, Outcome>) -> Outcome {
        let p = match prepared {
            Ok(p) => p,
            Err(defect) => return defect,
        };
        // The driver tells whether the request may have reached the provider: if so
        // (and the action is not idempotent), the time limit cannot say the call
        // did not happen. It is told the limit, for its own waits.
        let now = self.clock().now_ms();
        let sent = SendMark::with_time_left(p.deadline_ms.saturating_sub(now));
        // A limit that passed before the call starts (its claim was slow to
        // write) ends it unmade: a request sent now would be cut at once.
        if now >= p.deadline_ms {
            return sent.at_time_limit();
        }
        tokio::select! {
            o = p.driver.call_marked(p.request, sent.clone()) => o,
            _ = sleep_until(&**self.clock(), p.deadline_ms) => sent.at_time_limit(),
        }
    }

    /// Make a claimed delivery's call and conclude it. A call that panics is the
    /// defect it is: reported on `inputs` (the run stops), and concluded as
    /// `runtime.internal_fault`.
    async fn attempt(self: Arc<Self>, c: Claimed, inputs: mpsc::UnboundedSender<LiveInput>) -> Done {
        let span = events::attempt_span(c.id, &c.subscriber, c.attempt);
        let call = AssertUnwindSafe(async { self.call_prepared(self.prepare_call(&c)).await });
        let outcome = call.catch_unwind().instrument(span).await.unwrap_or_else(|panic| {
            let _ = inputs.send(Input::Fault(InternalFault::of(&format!("the call of delivery {}", c.id), &*panic)));
            Outcome::fail(FailureKind::InternalFault, RuntimeCode::RuntimeInternalFault)
        });
        let now = self.clock().now_ms();
        self.conclude(&c, outcome, now)
    }
}

/// What the driver's loop performs its actions with, and its tasks share: the
/// runtime, where what comes of them goes, where store calls are made, the cut
/// (the stop's grace period over), and where a claim's written outcomes go to be
/// logged.
#[derive(Clone)]
struct Shell {
    live: Arc<Live>,
    inputs: mpsc::UnboundedSender<LiveInput>,
    store_calls: StoreCalls,
    cut: Arc<watch::Sender<bool>>,
    written: std::sync::mpsc::Sender<Written>,
}

impl Shell {
    fn perform(&self, action: Action<Done, Claimed, ClaimedSchedule>) {
        match action {
            Action::Start => self.store_call(Call::Start, "start", |live| {
                // Nothing is claimed before the store's clock is read (a store
                // that has one): a host's own clock may be minutes off the others'.
                match live.anchor_clock().and_then(|()| live.start(live.clock().now_ms())) {
                    Ok(()) => Input::Started,
                    Err(error) => Input::StartFailed(error),
                }
            }),
            Action::Listen => {
                let wake = self.live.wake.clone();
                let waker: Waker = Arc::new(move || wake.notify_one());
                self.store_call(Call::Listen, "listen", move |live| {
                    Input::Listened(live.store().listen(waker).map(|_| ()))
                });
            }
            Action::Claim { limit, outcomes } => {
                let written = self.written.clone();
                self.store_call(Call::Claim, "claim", move |live| {
                    let now_ms = live.clock().now_ms();
                    match live.record_then_claim_due(&outcomes, now_ms, limit) {
                        Ok((wrote, DueClaim { report, waiting })) => {
                            let (changed, count) = (report.changed(), wrote.len());
                            if !wrote.is_empty() {
                                // The logger is there until the run's end.
                                let _ = written.send((outcomes, wrote));
                            }
                            Input::Claimed { written: count, run: report.run, changed, waiting }
                        }
                        Err(error) => Input::ClaimFailed { error, outcomes, now_ms: live.clock().now_ms() },
                    }
                });
            }
            Action::ReadNextDue => self.store_call(Call::NextDue, "next due time", |live| {
                Input::NextDue(live.store().next_due_ms().map(|due| due.and_then(|ms| live.instant_at(ms))))
            }),
            Action::Record { outcomes } => {
                self.store_call(Call::Record, "record of outcomes", move |live| {
                    match live.record_outcomes(&outcomes) {
                        Ok(written) => Input::Recorded { written },
                        Err(error) => Input::RecordFailed { error, outcomes, now_ms: live.clock().now_ms() },
                    }
                });
            }
            Action::StartAttempts(claimed) => {
                // One task starts them all, so that the loop goes on at once to
                // its next action (the next claim, as often as not).
                let shell = self.clone();
                tokio::spawn(async move {
                    for c in claimed {
                        shell.start_attempt(c);
                    }
                });
            }
            Action::RunSchedule(schedule_run) => self.start_schedule_run(schedule_run),
            Action::Tick => self.store_call(Call::Tick, "tick", |live| {
                // A failed reading keeps the last anchor; the tick's own store
                // calls report the store's state.
                let _ = live.anchor_clock();
                Input::Ticked(live.tick(live.clock().now_ms()))
            }),
            Action::Expand { limit } => self.store_call(Call::Expand, "expansion", move |live| {
                let expanded = live.expand_events(live.clock().now_ms(), limit);
                Input::Expanded(expanded.map(|report| report.expanded.len() + report.invalid.len()))
            }),
            Action::Prune { older_than_ms } => self.store_call(Call::Prune, "prune", move |live| {
                let plan = retention::plan(live.clock().now_ms(), older_than_ms, false);
                Input::Pruned(retention::prune(live.store().as_ref(), &plan))
            }),
            Action::CutRunning => {
                self.cut.send_replace(true);
            }
            // No longer counted as running: its subscribers' deliveries are
            // orphaned at once if no other process has them, not after its
            // heartbeat ages.
            Action::MarkStopped => {
                self.store_call(Call::MarkStopped, "stop", |live| Input::MarkedStopped(live.stopped()))
            }
        }
    }

    /// Make the store call `call` off the async threads; what it returns, or
    /// its panic (as the store's `what`), comes back to the loop.
    fn store_call(&self, call: Call, what: &'static str, make: impl FnOnce(&Live) -> LiveInput + Send + 'static) {
        let (live, inputs) = (self.live.clone(), self.inputs.clone());
        self.store_calls.make(move || {
            let input = std::panic::catch_unwind(AssertUnwindSafe(|| make(&live))).unwrap_or_else(|panic| {
                Input::Panicked { call, fault: InternalFault::of(&format!("the store's {what}"), &*panic) }
            });
            let _ = inputs.send(input);
        });
    }

    /// Run a claimed delivery's attempt as its own task, until it ends or is cut
    /// off.
    fn start_attempt(&self, c: Claimed) {
        let (inputs, mut cut) = (self.inputs.clone(), self.cut.subscribe());
        // Boxed: the task is moved at its spawn and as it ends, and an attempt's
        // future is large.
        let attempt = Box::pin(AssertUnwindSafe(self.live.clone().attempt(c, inputs.clone())).catch_unwind());
        tokio::spawn(async move {
            let ended = tokio::select! {
                done = attempt => match done {
                    Ok(done) => Ended::Finished(done),
                    Err(panic) => Ended::Panicked(InternalFault::of("an attempt", &*panic)),
                },
                _ = cut.wait_for(|cut| *cut) => Ended::Cut,
            };
            let _ = inputs.send(Input::AttemptEnded(ended));
        });
    }

    /// Run a schedule's run as its own task (its run time limit counts from
    /// now), then write it, unless cut off.
    fn start_schedule_run(&self, schedule_run: ClaimedSchedule) {
        let (shell, mut cut) = (self.clone(), self.cut.subscribe());
        tokio::spawn(async move {
            let live = shell.live.clone();
            let started_ms = live.clock().now_ms();
            let call = AssertUnwindSafe(live.call_prepared(live.prepare_schedule(&schedule_run.name, started_ms)));
            let ended = tokio::select! {
                outcome = call.catch_unwind() => outcome,
                _ = cut.wait_for(|cut| *cut) => {
                    let _ = shell.inputs.send(Input::ScheduleRunEnded(Ended::Cut));
                    return;
                }
            };
            let outcome = match ended {
                Ok(outcome) => outcome,
                Err(panic) => {
                    let fault = InternalFault::of("a schedule's run", &*panic);
                    let _ = shell.inputs.send(Input::ScheduleRunEnded(Ended::Panicked(fault)));
                    return;
                }
            };
            let now_ms = live.clock().now_ms();
            let inputs = shell.inputs.clone();
            shell.store_calls.make(move || {
                let ClaimedSchedule { name, run } = &schedule_run;
                let record = AssertUnwindSafe(|| live.finish_schedule(name, *run, &outcome, now_ms));
                let ended = match std::panic::catch_unwind(record) {
                    Ok(recorded) => Ended::Finished(recorded),
                    Err(panic) => Ended::Panicked(InternalFault::of("the store's schedule run's record", &*panic)),
                };
                let _ = inputs.send(Input::ScheduleRunEnded(ended));
            });
        });
    }
}
