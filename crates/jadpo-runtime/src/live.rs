//! The live driver of time: the tokio loops behind `jadpoc run`.
//!
//! Claim loops take due deliveries in batches (one transaction per batch, up to
//! half the process's in-flight permits), taking turns (one claim at a time per
//! process), start each attempt as its own task under the subscriber's
//! `timeout:`, and leave its outcome to be written with every outcome waiting in
//! one batch (one transaction per batch, each outcome with its attempt row). On
//! a store whose writes all take one lock (SQLite) the next claim writes them in
//! its own transaction, which then commits and syncs once for both; a committer
//! writes what no claim took within [`LEFT_TO_CLAIMS`]. There the claims are
//! the work a busy run waits on: the claim loops run on a thread of their own
//! (`jadpo-claims`) and call the store on it, one claim following the last
//! without a blocking thread to wake or attempts to queue behind. On
//! PostgreSQL, whose writers work at once, the committer writes every outcome
//! beside the claims.
//! A loop takes its in-flight permits before it claims, so every delivery it
//! claims starts at once and its run's time limit (counted from the claim) is
//! all its own. An outcome is logged once its transaction has committed (the
//! claims' outcomes on a thread of their own, in the order written). The
//! tick, once a second, sweeps
//! the breakers (alerts, probes woken, releases) and runs due schedules. Expired
//! leases are taken back by the claims themselves (a claim reads ended leases
//! before due deliveries). One more loop expands events written in SQL (their
//! deliveries made, or the event kept invalid), looking as often as an idle claim
//! loop polls.
//!
//! The clock is the runtime's: the system clock on SQLite, the database's on
//! PostgreSQL (re-read at every tick: [`jadpo_core::clock::AnchoredClock`]). Events
//! other processes store wake the claim loops when the store can tell
//! ([`jadpo_core::store::Store::listen`]); polling stays as the fallback.
//!
//! A lost store never ends the run: every store error is logged and tried again
//! after a pause that grows while the errors go on (claims, the tick, the
//! schedules' rows at start), and the committer keeps a batch it could not write
//! and writes it again, until written or until its attempts' leases have ended
//! (then the leases bring those deliveries back, as after a crash).
//!
//! A panic is not a store error: a task that panics (an attempt's call, a store
//! call, a loop) is a defect. It is logged as `runtime.internal_fault` with its
//! message, an attempt whose call panicked is recorded `failed` with that code,
//! and the run stops as on a stop, returning the fault ([`InternalFault`]).
//!
//! The work itself is the [`Runtime`]'s steps ([`jadpo_core::steps`]); this module
//! only decides when they run, and wakes its idle loops when the steps say work is
//! due ([`Live`] observes the steps).

use futures_util::FutureExt;
use jadpo_check::program::FailureKind;
use jadpo_core::clock::Clock;
use jadpo_core::codes::RuntimeCode;
use jadpo_core::config::{
    CLAIM_GATHER, LEFT_TO_CLAIMS, RETAIN_EVERY_MS, STORE_ERROR_PAUSE_MAX_MS, STORE_ERROR_PAUSE_MS, TICK_MS,
};
use jadpo_core::drivers::SendMark;
use jadpo_core::events::{self, RunEvent};
use jadpo_core::rules::{self, Outcome};
use jadpo_core::steps::{Done, DueClaim, Observer, PreparedCall, RunSummary, Runtime};
use jadpo_core::store::{Claimed, Recorded, StoreError, WaitingAtClaim, Waker};
use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, Notify, OwnedSemaphorePermit, Semaphore, watch};
use tracing::Instrument;

/// A task of the run panicked, a defect: the run stopped of itself, as on a stop
/// (running attempts finished and were recorded), keeping what it had committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalFault {
    /// What panicked: `a claim loop`, `the call of delivery 7`, `the store's claim`.
    pub task: String,
    /// The panic's message.
    pub message: String,
}

impl std::fmt::Display for InternalFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} panicked: {}", RuntimeCode::RuntimeInternalFault, self.task, self.message)
    }
}

impl std::error::Error for InternalFault {}

/// The run's own stop: turned on by the caller's stop or by the first panic of a
/// task, which it keeps for the run's result.
#[derive(Clone)]
struct Halt {
    stop: watch::Sender<bool>,
    fault: Arc<std::sync::Mutex<Option<InternalFault>>>,
    clock: Arc<dyn Clock>,
}

impl Halt {
    fn new(clock: Arc<dyn Clock>) -> Halt {
        Halt { stop: watch::Sender::new(false), fault: Arc::default(), clock }
    }

    /// The stop, as a loop watches it (it only ever turns to true).
    fn subscribe(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }

    fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// `task` panicked with `panic`: log it and stop the run.
    fn panicked(&self, task: &str, panic: &(dyn Any + Send)) {
        let message = panic_message(panic);
        events::log(RunEvent::InternalFault { at_ms: self.clock.now_ms(), task, message: &message });
        let mut first = self.fault.lock().unwrap_or_else(PoisonError::into_inner);
        first.get_or_insert_with(|| InternalFault { task: task.to_string(), message });
        drop(first);
        self.stop();
    }

    /// The run's result: `summary`, unless a task panicked.
    fn result(&self, summary: RunSummary) -> Result<RunSummary, InternalFault> {
        match self.fault.lock().unwrap_or_else(PoisonError::into_inner).take() {
            Some(fault) => Err(fault),
            None => Ok(summary),
        }
    }
}

/// The message a panic was raised with.
fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// `work`, a panic in it reported to `halt` as `task`'s (the run stops) rather
/// than lost with its task; `None` then.
async fn supervised<T>(halt: Halt, task: &'static str, work: impl Future<Output = T>) -> Option<T> {
    match AssertUnwindSafe(work).catch_unwind().await {
        Ok(done) => Some(done),
        Err(panic) => {
            halt.panicked(task, &*panic);
            None
        }
    }
}

/// Wait until `at_ms` on `clock`'s time (at once if it has passed), on tokio's
/// timer.
fn sleep_until(clock: &dyn Clock, at_ms: i64) -> tokio::time::Sleep {
    let wait = u64::try_from(at_ms.saturating_sub(clock.now_ms())).unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(wait))
}

/// A runtime as the live driver runs it: its steps, and the wake-up of its idle
/// claim loops when the steps (or an in-process emit) say work is due.
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

/// What the live driver observes of its runtime's steps: due work wakes its claim
/// loops; claims and attempts go on to `then` (the metrics), if any.
struct Wake {
    wake: Arc<Notify>,
    then: Option<Arc<dyn Observer>>,
}

impl Observer for Wake {
    fn work_due(&self) {
        self.wake.notify_waiters();
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

impl Live {
    /// `runtime` to run live; `observer` (the metrics), if given, sees its claims
    /// and attempts.
    pub fn new(runtime: Runtime, observer: Option<Arc<dyn Observer>>) -> Live {
        let wake = Arc::new(Notify::new());
        let runtime = runtime.with_observer(Arc::new(Wake { wake: wake.clone(), then: observer }));
        Live { runtime, wake }
    }

    /// Notified to wake idle claim loops (after an in-process emit).
    pub fn waker(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Run until `stop` turns true, or a task panics; then stop claiming, let
    /// running attempts and schedule runs finish for up to the grace period, record
    /// their outcomes, and return (the fault, if a task panicked).
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) -> Result<RunSummary, InternalFault> {
        let halt = Halt::new(self.clock().clone());
        let mut backoff = Backoff::default();
        // Nothing is claimed before the store's clock is read (a store that has
        // one): a host's own clock may be minutes off the others'.
        loop {
            let rt = self.clone();
            let started = match anchor_clock(&self, &halt).await {
                Ok(()) => {
                    let now = self.clock().now_ms();
                    blocking(&halt, "start", move || rt.start(now)).await
                }
                Err(e) => Err(e),
            };
            match started {
                Ok(()) => break,
                Err(Blocked::Stopping) => return halt.result(RunSummary::default()),
                Err(Blocked::Store(e)) => {
                    events::log(RunEvent::Error { at_ms: self.clock().now_ms(), message: &e });
                    tokio::select! {
                        _ = backoff.pause() => {}
                        _ = stop.changed() => {}
                    }
                    if *stop.borrow() {
                        return halt.result(RunSummary::default());
                    }
                }
            }
        }
        let wake = self.wake.clone();
        let store = self.store().clone();
        // Another process's event wakes every idle loop, and leaves a permit for a
        // loop busy claiming (its claim may have missed the event).
        let waker: Waker = Arc::new(move || {
            wake.notify_waiters();
            wake.notify_one();
        });
        if let Err(e) = blocking(&halt, "listen", move || store.listen(waker)).await {
            e.log(self.clock().now_ms());
        }

        let capacity = self.config().batch * self.config().workers.max(1);
        // With one writer, claims write the outcomes waiting (read once: the
        // claim loops and the committer go by it).
        let one_writer = self.store().one_writer();
        let finished = Arc::new(Finished { one_writer, ..Finished::default() });
        let turn = Arc::new(Mutex::new(()));
        let committer = committer(self.clone(), finished.clone(), turn.clone(), halt.clone());
        let committer = tokio::spawn(supervised(halt.clone(), "the committer", committer));
        let inflight = Arc::new(Semaphore::new(capacity));
        let (hard_tx, hard_rx) = watch::channel(false);

        // With one writer, the claims are the store's work that a busy run waits
        // on: their loops run on a thread of their own and call the store there,
        // so that one claim follows another without waiting for a blocking
        // thread to wake or behind the attempts queued on the run's threads.
        let claim_thread = if one_writer { ClaimThread::start() } else { None };
        let attempts = tokio::runtime::Handle::current();
        // The outcomes the claims write are logged in the order written, on a
        // thread of their own: a claim does not wait for the last one's lines.
        let (log, to_log) = std::sync::mpsc::channel::<Written>();
        let r = self.clone();
        let logger = tokio::task::spawn_blocking(move || {
            for (done, written) in to_log {
                r.outcomes_written(&done, &written);
            }
        });
        let mut loops = Vec::new();
        for _ in 0..self.config().workers.max(1) {
            let claims = Claims {
                finished: finished.clone(),
                inflight: inflight.clone(),
                turn: turn.clone(),
                // A claim costs its transaction and round trips whatever it
                // takes (and, with one writer, a sync of the store's log), so it
                // takes up to half the process's permits: the attempts of one
                // claim run while the next is written.
                most: (capacity / 2).max(1),
                here: claim_thread.is_some(),
                attempts: attempts.clone(),
                log: log.clone(),
            };
            let work = supervised(
                halt.clone(),
                "a claim loop",
                claim_loop(self.clone(), claims, halt.clone(), hard_rx.clone()),
            );
            loops.push(match &claim_thread {
                Some(thread) => thread.spawn(work),
                None => tokio::spawn(work),
            });
        }
        let tick = tick_loop(self.clone(), inflight.clone(), halt.clone(), hard_rx.clone());
        let tick = tokio::spawn(supervised(halt.clone(), "the tick", tick));
        let retain = self.config().retain_ms.map(|older_than| {
            tokio::spawn(supervised(halt.clone(), "the retention", retain_loop(self.clone(), older_than, halt.clone())))
        });
        let expand = tokio::spawn(supervised(halt.clone(), "the expansion", expand_loop(self.clone(), halt.clone())));

        // The caller's stop (or its going away), or a task's panic.
        let mut halted = halt.subscribe();
        tokio::select! {
            _ = stop.wait_for(|s| *s) => {}
            _ = halted.wait_for(|s| *s) => {}
        }
        halt.stop();
        for l in loops {
            let _ = l.await;
        }
        drop(claim_thread);
        drop(log);
        let _ = tick.await;
        if let Some(retain) = retain {
            let _ = retain.await;
        }
        let _ = expand.await;
        // Let running attempts and schedule runs finish: they hold the in-flight
        // permits.
        let grace = Duration::from_millis(self.config().stop_grace_ms);
        let all = u32::try_from(capacity).unwrap_or(u32::MAX);
        let ended = tokio::time::timeout(grace, inflight.acquire_many(all)).await;
        let abandoned = if ended.is_ok() {
            0
        } else {
            let left = capacity - inflight.available_permits();
            let _ = hard_tx.send(true);
            left as u64
        };
        finished.close();
        let _ = committer.await;
        let _ = logger.await;
        // No longer counted as running: its subscribers' deliveries are orphaned
        // at once if no other process has them, not after its heartbeat ages.
        let r = self.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || r.stopped()).await.unwrap_or(Ok(())) {
            events::log(RunEvent::Error { at_ms: self.clock().now_ms(), message: &e });
        }
        let recorded = finished.recorded.load(Ordering::Relaxed);
        halt.result(RunSummary { recorded, abandoned })
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
    /// defect it is: reported to `halt` (the run stops), and concluded as
    /// `runtime.internal_fault`.
    async fn attempt(self: Arc<Self>, c: Claimed, halt: &Halt) -> Done {
        let span = events::attempt_span(c.id, &c.subscriber, c.attempt);
        let call = AssertUnwindSafe(async { self.call_prepared(self.prepare_call(&c)).await });
        let outcome = call.catch_unwind().instrument(span).await.unwrap_or_else(|panic| {
            halt.panicked(&format!("the call of delivery {}", c.id), &*panic);
            Outcome::fail(FailureKind::InternalFault, RuntimeCode::RuntimeInternalFault)
        });
        let now = self.clock().now_ms();
        self.conclude(&c, outcome, now)
    }

    /// Run one schedule's run and record it; its run time limit counts from now.
    async fn run_schedule(self: Arc<Self>, name: String, run: u64, halt: Halt) {
        let started_ms = self.clock().now_ms();
        let outcome = self.call_prepared(self.prepare_schedule(&name, started_ms)).await;
        let now = self.clock().now_ms();
        let rt = self.clone();
        if let Err(e) =
            blocking(&halt, "schedule run's record", move || rt.finish_schedule(&name, run, &outcome, now)).await
        {
            e.log(now);
        }
    }
}

/// The pause after store errors in a row: [`STORE_ERROR_PAUSE_MS`], doubling with
/// each error up to [`STORE_ERROR_PAUSE_MAX_MS`]; a success starts it over.
#[derive(Debug, Default)]
struct Backoff {
    errors: u32,
}

impl Backoff {
    fn next_ms(&mut self) -> u64 {
        let ms = STORE_ERROR_PAUSE_MS.saturating_mul(1 << self.errors.min(16)).min(STORE_ERROR_PAUSE_MAX_MS);
        self.errors = self.errors.saturating_add(1);
        ms
    }

    async fn pause(&mut self) {
        tokio::time::sleep(Duration::from_millis(self.next_ms())).await;
    }

    fn reset(&mut self) {
        self.errors = 0;
    }
}

/// Read the store's clock, if it has one, and anchor the runtime's clock to it
/// (taken as read half-way through the round trip). A failed reading keeps the
/// last anchor and is returned: a run begins only once a reading succeeded; the
/// tick tries again at its next turn.
async fn anchor_clock(rt: &Arc<Live>, halt: &Halt) -> Result<(), Blocked> {
    let store = rt.store().clone();
    let read = blocking(halt, "clock", move || {
        let before = Instant::now();
        let db = store.db_now_ms()?;
        Ok(db.map(|db| (db, before + before.elapsed() / 2)))
    })
    .await?;
    if let Some((db, at)) = read {
        rt.clock().anchor(db, at);
    }
    Ok(())
}

/// How a store call on a blocking thread came back without its result.
#[derive(Debug)]
enum Blocked {
    /// The store's error: logged, and the call made again later.
    Store(StoreError),
    /// The call panicked (reported as it happened) or was cut off: the run is
    /// stopping.
    Stopping,
}

impl Blocked {
    /// Log a store error met at `at_ms` (a panic was reported as it happened).
    fn log(&self, at_ms: i64) {
        if let Blocked::Store(e) = self {
            events::log(RunEvent::Error { at_ms, message: e });
        }
    }
}

/// Run the store call `what`, on a blocking thread or, with `here`, on this
/// thread (the claim thread's, which has nothing else to do meanwhile); `None`
/// if it panicked (reported to `halt`: the run stops) or was cut off.
async fn store_call<R: Send + 'static>(
    halt: &Halt,
    what: &str,
    here: bool,
    f: impl FnOnce() -> R + Send + 'static,
) -> Option<R> {
    let out = if here {
        std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(Some)
    } else {
        tokio::task::spawn_blocking(f).await.map_err(|e| e.try_into_panic().ok())
    };
    out.map_err(|panic| {
        if let Some(panic) = panic {
            halt.panicked(&format!("the store's {what}"), &*panic);
        }
    })
    .ok()
}

/// Run the store call `what` on a blocking thread (see [`store_call`]).
async fn blocking<T: Send + 'static>(
    halt: &Halt,
    what: &str,
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, Blocked> {
    store_call(halt, what, false, f).await.ok_or(Blocked::Stopping)?.map_err(Blocked::Store)
}

/// Run the store call `what` over the outcomes `done` (see [`store_call`]),
/// handing them back with its result: to log them, or keep them for another try.
async fn with_outcomes<T: Send + 'static>(
    halt: &Halt,
    what: &str,
    done: Vec<Done>,
    here: bool,
    f: impl FnOnce(&[Done]) -> Result<T, StoreError> + Send + 'static,
) -> Option<(Vec<Done>, Result<T, StoreError>)> {
    store_call(halt, what, here, move || {
        let result = f(&done);
        (done, result)
    })
    .await
}

/// The claim thread of a store with one writer: a runtime of one thread, on
/// which the claim loops call the store directly. Dropped (the run ended, or
/// its future was dropped), it lets what it still runs end on its own: a
/// runtime dropped on an async thread would panic waiting for it.
struct ClaimThread {
    handle: tokio::runtime::Handle,
    runtime: Option<tokio::runtime::Runtime>,
}

impl ClaimThread {
    /// `None` if the system gives no thread (the loops then run with the
    /// others, calling the store on blocking threads).
    fn start() -> Option<ClaimThread> {
        // Its threads log where the caller's do (a test's subscriber is its thread's).
        let log = tracing::dispatcher::get_default(Clone::clone);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("jadpo-claims")
            .enable_all()
            .on_thread_start(move || LOG.set(Some(tracing::dispatcher::set_default(&log))))
            .on_thread_stop(|| LOG.set(None))
            .build()
            .ok()?;
        Some(ClaimThread { handle: runtime.handle().clone(), runtime: Some(runtime) })
    }

    fn spawn<T: Send + 'static>(&self, work: impl Future<Output = T> + Send + 'static) -> tokio::task::JoinHandle<T> {
        self.handle.spawn(work)
    }
}

impl Drop for ClaimThread {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

thread_local! {
    /// The claim thread's hold on its log (see [`ClaimThread::start`]).
    static LOG: std::cell::Cell<Option<tracing::dispatcher::DefaultGuard>> = const { std::cell::Cell::new(None) };
}

/// Take up to `limit` in-flight permits: wait for one, then, if `gather` is
/// given and fewer than a quarter of `limit` are free, wait up to `gather` for
/// that quarter (attempts ending give theirs back), then take what else is free
/// without waiting (`None` once the stop is asked for: the watch only ever turns
/// to true).
async fn take_permits(
    inflight: &Arc<Semaphore>,
    limit: usize,
    gather: Option<Duration>,
    stop: &mut watch::Receiver<bool>,
) -> Option<OwnedSemaphorePermit> {
    let mut permits = tokio::select! {
        p = inflight.clone().acquire_owned() => p.ok()?,
        _ = stop.changed() => return None,
    };
    let quarter = limit / 4;
    if let Some(wait) = gather.filter(|_| inflight.available_permits() + 1 < quarter) {
        let more = u32::try_from(quarter - 1).unwrap_or(u32::MAX);
        tokio::select! {
            p = tokio::time::timeout(wait, inflight.clone().acquire_many_owned(more)) => {
                if let Ok(Ok(more)) = p {
                    permits.merge(more);
                }
            }
            _ = stop.changed() => return None,
        }
    }
    let more = inflight.available_permits().min(limit.saturating_sub(permits.num_permits()));
    // The tick may take some first (a schedule's run): then this claim takes fewer.
    if let Ok(extra) = inflight.clone().try_acquire_many_owned(u32::try_from(more).unwrap_or(u32::MAX)) {
        permits.merge(extra);
    }
    Some(permits)
}

/// Run `work` as its own task once `permit` gives an in-flight permit, holding it
/// until the work ends; a hard stop (the grace period over) cuts either wait short,
/// and the permit goes back either way. A panic of `work` is reported to `halt` as
/// `task`'s.
fn spawn_under_permit(
    permit: impl Future<Output = Option<OwnedSemaphorePermit>> + Send + 'static,
    mut hard: watch::Receiver<bool>,
    (halt, task): (Halt, &'static str),
    work: impl Future<Output = ()> + Send + 'static,
) {
    tokio::spawn(async move {
        let permit = tokio::select! {
            p = permit => p,
            _ = hard.changed() => None,
        };
        let Some(permit) = permit else {
            return;
        };
        tokio::select! {
            _ = supervised(halt, task, work) => {}
            _ = hard.changed() => {}
        }
        drop(permit);
    });
}

/// Attempts' outcomes waiting to be written. The committer writes them; on a
/// store with one writer ([`jadpo_core::store::Store::one_writer`]) a claim
/// takes those waiting and writes them in its own transaction, so that a busy run
/// commits (and syncs the store's log) once for both.
#[derive(Default)]
struct Finished {
    waiting: std::sync::Mutex<Waiting>,
    /// Wakes the committer: an outcome came, or the run ends.
    wake: Notify,
    /// Outcomes written, by the committer and the claims.
    recorded: AtomicU64,
    /// The store has one writer: claims write the outcomes waiting.
    one_writer: bool,
}

#[derive(Default)]
struct Waiting {
    done: Vec<Done>,
    /// When the oldest of `done` came.
    since: Option<Instant>,
    closed: bool,
}

impl Finished {
    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, done: Done) {
        let mut w = self.lock();
        w.done.push(done);
        w.since.get_or_insert_with(Instant::now);
        drop(w);
        self.wake.notify_one();
    }

    /// Every outcome waiting.
    fn take(&self) -> Vec<Done> {
        let mut w = self.lock();
        w.since = None;
        std::mem::take(&mut w.done)
    }

    /// Outcomes a failed write took, back in front of those that came since,
    /// less those whose leases have ended by `now_ms`: another claim may have
    /// taken such a delivery back and counted the attempt. The committer is
    /// woken for them.
    fn put_back(&self, mut kept: Vec<Done>, now_ms: i64) {
        kept.retain(|d| d.lease_until_ms.is_some_and(|until| until > now_ms));
        if kept.is_empty() {
            return;
        }
        let mut w = self.lock();
        kept.append(&mut w.done);
        w.done = kept;
        w.since = Some(Instant::now());
        drop(w);
        self.wake.notify_one();
    }

    /// `n` more outcomes written.
    fn count(&self, n: usize) {
        self.recorded.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// The run ends: the committer writes what is left and returns.
    fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }
}

/// What a process's claim loops share: the outcomes waiting, the in-flight
/// permits, and the turn they claim in; the most deliveries one claim takes;
/// whether they call the store on their own thread (the claim thread), and the
/// runtime their attempts run on.
struct Claims {
    finished: Arc<Finished>,
    inflight: Arc<Semaphore>,
    turn: Arc<Mutex<()>>,
    most: usize,
    here: bool,
    attempts: tokio::runtime::Handle,
    /// Where the outcomes a claim wrote go to be logged.
    log: std::sync::mpsc::Sender<Written>,
}

/// Outcomes a claim took and the indexes of those it wrote.
type Written = (Vec<Done>, Vec<usize>);

async fn claim_loop(rt: Arc<Live>, claims: Claims, halt: Halt, hard: watch::Receiver<bool>) {
    let Claims { finished, inflight, turn, most, here, attempts, log } = claims;
    let one_writer = finished.one_writer;
    let mut stop = halt.subscribe();
    let mut backoff = Backoff::default();
    loop {
        if *stop.borrow() {
            return;
        }
        // A process's claim loops take turns. Claims of one process running at once
        // only compete for the same index pages and the same cores (the store's work
        // is what limits a busy run), and while one loop claims, the permits coming
        // back gather for the next loop's claim instead of being claimed a few at a
        // time.
        let my_turn = tokio::select! {
            t = turn.lock() => t,
            _ = stop.changed() => return,
        };
        // The permits come first: a delivery claimed and then kept waiting for one
        // would spend its run's time limit, counted from the claim, doing nothing.
        // With one writer, a claim of a few is a commit for a few: a moment is
        // given for more permits to come back.
        let gather = one_writer.then_some(CLAIM_GATHER);
        let Some(mut permits) = take_permits(&inflight, most, gather, &mut stop).await else {
            return;
        };
        let limit = permits.num_permits();
        let now = rt.clock().now_ms();
        // With one writer, the outcomes waiting are written in the claim's transaction.
        let done = if one_writer { finished.take() } else { Vec::new() };
        let r = rt.clone();
        let claimed =
            with_outcomes(&halt, "claim", done, here, move |done| r.record_then_claim_due(done, now, limit)).await;
        let Some((done, claimed)) = claimed else {
            return;
        };
        let (written, DueClaim { report, waiting }) = match claimed {
            Ok(claimed) => {
                backoff.reset();
                claimed
            }
            Err(e) => {
                drop(permits);
                drop(my_turn);
                events::log(RunEvent::Error { at_ms: now, message: &e });
                finished.put_back(done, rt.clock().now_ms());
                tokio::select! {
                    _ = backoff.pause() => {}
                    _ = stop.changed() => {}
                }
                continue;
            }
        };
        let changed = report.changed();
        // A claim takes at most `limit` deliveries to run, so a permit is left
        // for each (were one missing, the rest would come back at their leases'
        // end rather than run over the limit).
        let run: Vec<_> = report.run.into_iter().map_while(|c| Some((c, permits.split(1)?))).collect();
        // The permits no claimed delivery needed go back now.
        drop(permits);
        drop(my_turn);
        // One task on the attempts' runtime starts them all: each started from
        // there is a local spawn.
        let (rt2, finished2, halt2, hard2) = (rt.clone(), finished.clone(), halt.clone(), hard.clone());
        attempts.spawn(async move {
            for (c, permit) in run {
                let (rt3, finished3, halt3) = (rt2.clone(), finished2.clone(), halt2.clone());
                // Boxed: the task is moved at its spawn and as it ends, and an
                // attempt's future is large.
                let work = Box::pin(async move {
                    let done = rt3.attempt(c, &halt3).await;
                    finished3.push(done);
                });
                spawn_under_permit(
                    std::future::ready(Some(permit)),
                    hard2.clone(),
                    (halt2.clone(), "an attempt"),
                    work,
                );
            }
        });
        finished.count(written.len());
        if !written.is_empty() {
            // The logger is there until the claim loops end.
            let _ = log.send((done, written));
        }
        if changed < limit {
            // Drained what is due: sleep until the next due time, a poll for work
            // other processes added, an in-process emit, an attempt's end freeing a
            // connection's slot, or the stop. Deliveries left waiting for a slot
            // are due already: they wait for the wake (or the poll), not their time.
            let store = rt.store().clone();
            let next = if waiting > 0 {
                None
            } else {
                blocking(&halt, "next due time", move || store.next_due_ms()).await.ok().flatten()
            };
            let until = next.unwrap_or(i64::MAX).min(now.saturating_add(rules::ms_i64(rt.config().poll_ms)));
            tokio::select! {
                _ = rt.wake.notified() => {}
                _ = sleep_until(&**rt.clock(), until) => {}
                _ = stop.changed() => {}
            }
        }
    }
}

/// Record the outcomes that come, every outcome waiting in one batch (a batch
/// costs the store far less per outcome than one outcome a transaction). With
/// one writer, outcomes are left to the claims while a claim is under way or
/// waiting its turn, for up to [`LEFT_TO_CLAIMS`]: one that waited longer (the
/// claims wait for permits that other attempts hold) is written alone.
async fn committer(rt: Arc<Live>, finished: Arc<Finished>, turn: Arc<Mutex<()>>, halt: Halt) {
    let one_writer = finished.one_writer;
    let mut backoff = Backoff::default();
    loop {
        let (since, closed) = {
            let w = finished.lock();
            (w.since, w.closed)
        };
        let Some(since) = since else {
            if closed {
                break;
            }
            finished.wake.notified().await;
            continue;
        };
        if one_writer && !closed && turn.try_lock().is_err() {
            let left = LEFT_TO_CLAIMS.saturating_sub(since.elapsed());
            if !left.is_zero() {
                // Not woken by each outcome that comes meanwhile: a claim takes them.
                tokio::time::sleep(left).await;
                continue;
            }
        }
        let batch = finished.take();
        if batch.is_empty() {
            continue;
        }
        let r = rt.clone();
        // After a panic the deliveries stay `running` and come back when their
        // leases end.
        match with_outcomes(&halt, "record of outcomes", batch, false, move |batch| r.record_outcomes(batch)).await {
            Some((_, Ok(written))) => {
                finished.count(written);
                backoff.reset();
            }
            Some((kept, Err(e))) => {
                let now = rt.clock().now_ms();
                events::log(RunEvent::Error { at_ms: now, message: &e });
                finished.put_back(kept, now);
                backoff.pause().await;
            }
            None => {}
        }
    }
}

async fn tick_loop(rt: Arc<Live>, inflight: Arc<Semaphore>, halt: Halt, hard: watch::Receiver<bool>) {
    let mut stop = halt.subscribe();
    let mut backoff = Backoff::default();
    loop {
        if *stop.borrow() {
            return;
        }
        // A failed reading keeps the last anchor; the tick's store calls log
        // the error.
        let _ = anchor_clock(&rt, &halt).await;
        let now = rt.clock().now_ms();
        let r = rt.clone();
        let mut pause_ms = TICK_MS;
        match blocking(&halt, "tick", move || r.tick(now)).await {
            Ok(claimed) => {
                backoff.reset();
                for c in claimed {
                    // A schedule's run holds a permit like an attempt, so a stop
                    // waits for it; its time limit counts from when it has one
                    // (the work starts only then).
                    let permit = inflight.clone().acquire_owned();
                    let permit = async move { permit.await.ok() };
                    let run = rt.clone().run_schedule(c.name, c.run, halt.clone());
                    spawn_under_permit(permit, hard.clone(), (halt.clone(), "a schedule's run"), run);
                }
            }
            Err(e) => {
                e.log(now);
                pause_ms = pause_ms.max(backoff.next_ms());
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(pause_ms)) => {}
            _ = stop.changed() => {}
        }
    }
}

/// `--retain`: prune what is older than `older_than_ms` at once and then every
/// [`RETAIN_EVERY_MS`], each batch its own short transaction.
async fn retain_loop(rt: Arc<Live>, older_than_ms: u64, halt: Halt) {
    let mut stop = halt.subscribe();
    loop {
        if *stop.borrow() {
            return;
        }
        let now = rt.clock().now_ms();
        let store = rt.store().clone();
        let plan = jadpo_core::retention::plan(now, older_than_ms, false);
        match blocking(&halt, "prune", move || jadpo_core::retention::prune(store.as_ref(), &plan)).await {
            Ok(counts) if counts.deliveries > 0 => events::log(RunEvent::Pruned { at_ms: now, counts }),
            Ok(_) => {}
            Err(e) => e.log(now),
        }
        tokio::select! {
            _ = sleep_until(&**rt.clock(), now.saturating_add(rules::ms_i64(RETAIN_EVERY_MS))) => {}
            _ = stop.changed() => {}
        }
    }
}

/// Expand events written in SQL: a full batch is followed at once by the next;
/// otherwise the loop looks again after the poll interval.
async fn expand_loop(rt: Arc<Live>, halt: Halt) {
    let mut stop = halt.subscribe();
    loop {
        if *stop.borrow() {
            return;
        }
        let now = rt.clock().now_ms();
        let limit = rt.config().batch;
        let r = rt.clone();
        let pause = match blocking(&halt, "expansion", move || r.expand_events(now, limit)).await {
            Ok(report) if report.expanded.len() + report.invalid.len() >= limit => continue,
            Ok(_) => rt.config().poll_ms,
            Err(e) => {
                e.log(now);
                STORE_ERROR_PAUSE_MS
            }
        };
        tokio::select! {
            _ = sleep_until(&**rt.clock(), now.saturating_add(rules::ms_i64(pause))) => {}
            _ = stop.changed() => {}
        }
    }
}
