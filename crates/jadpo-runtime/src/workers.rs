//! The tokio workers and the tick.
//!
//! `workers` claim loops take due deliveries in batches (one transaction per
//! batch), start each attempt as its own task under the subscriber's `timeout:`,
//! and hand its outcome to one committer that records outcomes in batches (one
//! transaction per batch, each outcome with its attempt row). A loop takes its
//! in-flight permits before it claims, so every delivery it claims starts at once
//! and its run's time limit (counted from the claim) is all its own. The tick,
//! once a second, sweeps the breakers (alerts, probes woken, releases) and runs
//! due schedules. Expired leases are taken back by the claims themselves (a claim
//! reads ended leases before due deliveries).
//!
//! Each step is a plain method of [`Runtime`] ([`Runtime::claim_due`],
//! [`Runtime::prepare_call`], [`Runtime::conclude`], [`Runtime::record_outcomes`],
//! [`Runtime::tick`]) so that the tokio loops here and the sequential scenario
//! driver of `jadpoc test` ([`crate::scenario`]) run one copy of the attempt logic.

use crate::clock::Clock;
use crate::core::breaker;
use crate::core::{self, ClaimDecision, FailedBecause, Failure, Outcome, decide_after_attempt, decide_at_claim};
use crate::drivers::{CallRequest, Driver};
use crate::log::{Line, Logger, alert_line, attempt_line, claim_line, schedule_line};
use crate::payload::call_args;
use crate::store::{ClaimCandidate, ClaimReport, Claimed, ClaimedSchedule, Recorded, ScheduleSpec, Store, StoreError};
use jadpo_check::program::{FailureKind, Program};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, watch};

/// How often the tick runs.
const TICK_MS: u64 = jadpo_check::budget::SECOND_MS;
/// How long running attempts and schedule runs may finish after a stop.
const STOP_GRACE_MS: u64 = 10 * jadpo_check::budget::SECOND_MS;
/// How long a loop waits after a store error before it tries again.
const STORE_ERROR_PAUSE: Duration = Duration::from_secs(1);

/// How the runtime runs.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Claim loops (`--workers`).
    pub workers: usize,
    /// Most deliveries one claim takes, and most attempts one loop has in flight.
    pub batch: usize,
    /// How often an idle loop looks for work other processes added.
    pub poll_ms: u64,
    /// How long running attempts and schedule runs may finish after a stop.
    pub stop_grace_ms: u64,
    /// A seed for the random source of waits (a fresh one when `None`).
    pub seed: Option<u64>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig { workers: 4, batch: 256, poll_ms: 100, stop_grace_ms: STOP_GRACE_MS, seed: None }
    }
}

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
    schedules: Vec<ScheduleSpec>,
    logger: Arc<Logger>,
    wake: Arc<Notify>,
    rng: Mutex<StdRng>,
    config: RuntimeConfig,
}

impl Runtime {
    /// A runtime for `program`; `drivers[i]` performs calls through connection `i`
    /// (a call through a connection without one ends as a defect, `runtime.no_driver`).
    pub fn new(
        program: Arc<Program>,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        drivers: Vec<Arc<dyn Driver>>,
        logger: Arc<Logger>,
        config: RuntimeConfig,
    ) -> Runtime {
        let subscribers = program.subscribers.iter().enumerate().map(|(i, s)| (s.name.clone(), i)).collect();
        let schedules = program
            .schedules
            .iter()
            .map(|s| ScheduleSpec { name: s.name.clone(), every_ms: s.every_ms, timeout_ms: s.timeout_ms })
            .collect();
        let rng = match config.seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_rng(&mut rand::rng()),
        };
        Runtime {
            program,
            store,
            clock,
            drivers,
            subscribers,
            schedules,
            logger,
            wake: Arc::new(Notify::new()),
            rng: Mutex::new(rng),
            config,
        }
    }

    /// Notified to wake idle claim loops (after an in-process emit).
    pub fn waker(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// A subscriber's run time limit (the default for one this program no longer
    /// has), from which its leases are made.
    fn run_timeout_ms(&self, subscriber: &str) -> u64 {
        self.subscribers
            .get(subscriber)
            .map_or(jadpo_check::budget::DEFAULT_RUN_TIMEOUT_MS, |&i| self.program.subscribers[i].timeout_ms)
    }

    /// The core's claim decision for a candidate at `now_ms`.
    fn decide_claim(&self, c: &ClaimCandidate, now_ms: i64) -> ClaimDecision {
        let timeout = self.run_timeout_ms(&c.subscriber);
        match self.subscribers.get(&c.subscriber) {
            Some(&i) => decide_at_claim(&c.record, &self.program.subscribers[i].budget, now_ms, c.handled, timeout),
            // A delivery of a subscriber this program no longer has: a defect of
            // the deployment, failed so an operator sees it (and can retry it).
            None => match decide_at_claim(&c.record, &Default::default(), now_ms, c.handled, timeout) {
                decided @ (ClaimDecision::Skip | ClaimDecision::Handled) => decided,
                ClaimDecision::Run { lease_expired, .. }
                | ClaimDecision::Hold { lease_expired, .. }
                | ClaimDecision::GiveUp { lease_expired, .. } => ClaimDecision::GiveUp {
                    failure: Failure::new("runtime.unknown_subscriber", FailureKind::InternalFault),
                    because: FailedBecause::Defect,
                    lease_expired,
                },
            },
        }
    }

    /// Run until `stop` turns true; then stop claiming, let running attempts and
    /// schedule runs finish for up to the grace period, record their outcomes, and
    /// return.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) -> Result<RunSummary, StoreError> {
        let now = self.clock.now_ms();
        let rt = self.clone();
        blocking(move || rt.sync_schedules(now)).await?;

        let (tx, rx) = mpsc::channel::<Done>(self.config.batch * self.config.workers.max(1) * 2);
        let committer = tokio::spawn(committer(self.clone(), rx));
        let capacity = self.config.batch * self.config.workers.max(1);
        let inflight = Arc::new(Semaphore::new(capacity));
        let (hard_tx, hard_rx) = watch::channel(false);

        let mut loops = Vec::new();
        for _ in 0..self.config.workers.max(1) {
            loops.push(tokio::spawn(claim_loop(
                self.clone(),
                tx.clone(),
                inflight.clone(),
                stop.clone(),
                hard_rx.clone(),
            )));
        }
        let tick = tokio::spawn(tick_loop(self.clone(), inflight.clone(), stop.clone(), hard_rx.clone()));

        while !*stop.borrow() {
            if stop.changed().await.is_err() {
                break;
            }
        }
        for l in loops {
            let _ = l.await;
        }
        let _ = tick.await;
        // Let running attempts and schedule runs finish: they hold the in-flight
        // permits.
        let grace = Duration::from_millis(self.config.stop_grace_ms);
        let all = u32::try_from(capacity).unwrap_or(u32::MAX);
        let finished = tokio::time::timeout(grace, inflight.acquire_many(all)).await;
        let abandoned = if finished.is_ok() {
            0
        } else {
            let left = capacity - inflight.available_permits();
            let _ = hard_tx.send(true);
            left as u64
        };
        drop(tx);
        let recorded = committer.await.unwrap_or(0);
        Ok(RunSummary { recorded, abandoned })
    }

    /// Claim up to `limit` due deliveries at `now_ms`, the core deciding each, and
    /// log those ended at their claim. The claimed ones are to be run.
    pub fn claim_due(&self, now_ms: i64, limit: usize) -> Result<ClaimReport, StoreError> {
        let report = self.store.claim(now_ms, limit, &mut |c| {
            let decision = self.decide_claim(c, now_ms);
            breaker::decide_at_claim(decision, &c.breaker, c.id, now_ms)
        })?;
        let lines: Vec<Line> = report.ended.iter().map(|(id, sub, d)| claim_line(now_ms, *id, sub, d)).collect();
        self.logger.write(&lines);
        Ok(report)
    }

    /// The call a claimed delivery makes, or the defect that stops it before it is
    /// made (as the outcome to record).
    pub fn prepare_call(&self, c: &Claimed) -> Result<PreparedCall, Outcome> {
        let defect = |code: &str| Outcome::fail(FailureKind::InternalFault, code);
        let Some(&si) = self.subscribers.get(&c.subscriber) else {
            return Err(defect("runtime.unknown_subscriber"));
        };
        let sub = &self.program.subscribers[si];
        let Ok(payload) = serde_json::from_str::<Value>(&c.payload) else {
            return Err(defect("runtime.bad_payload"));
        };
        let Some(action) = self.program.actions.get(sub.call.action) else {
            return Err(defect("runtime.unknown_action"));
        };
        let Some(driver) = self.drivers.get(action.connection) else {
            return Err(defect("runtime.no_driver"));
        };
        let request = CallRequest {
            action: action.name.clone(),
            args: call_args(&self.program, &sub.call, &payload),
            event_id: Some(c.event_id),
            event: c.event.clone(),
            delivery: Some(c.id),
            attempt: c.attempt,
        };
        let deadline_ms = c.claimed_at_ms.saturating_add(core::ms_i64(sub.timeout_ms));
        Ok(PreparedCall { driver: driver.clone(), request, deadline_ms })
    }

    /// What to record for a claimed delivery whose call ended with `outcome` at
    /// `now_ms`: the core decides, drawing from the runtime's random source.
    pub fn conclude(&self, c: &Claimed, outcome: Outcome, now_ms: i64) -> Done {
        let budget =
            self.subscribers.get(&c.subscriber).map(|&i| self.program.subscribers[i].budget).unwrap_or_default();
        let decision = {
            let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
            decide_after_attempt(&c.record, &budget, &outcome, now_ms, &mut *rng)
        };
        Done {
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
        }
    }

    /// Record finished attempts in one transaction and log those written; returns
    /// how many were still owned by their attempt and written (one whose lease
    /// another claim took is that claim's to report).
    pub fn record_outcomes(&self, done: &[Done]) -> Result<usize, StoreError> {
        let records: Vec<Recorded> = done.iter().map(|d| d.recorded.clone()).collect();
        let written = self.store.record(&records)?;
        let lines: Vec<Line> = written
            .iter()
            .filter_map(|&i| done.get(i))
            .map(|d| {
                let r = &d.recorded;
                attempt_line(
                    r.ended_at_ms,
                    r.id,
                    &d.subscriber,
                    r.attempt,
                    &r.outcome,
                    &r.decision,
                    r.ended_at_ms - r.started_at_ms,
                )
            })
            .collect();
        self.logger.write(&lines);
        Ok(lines.len())
    }

    /// The tick's work at `now_ms`: sweep the breakers (alerts, probes woken,
    /// releases), logging each alert this process raised, and claim the schedules
    /// due (the caller runs them).
    pub fn tick(&self, now_ms: i64) -> Result<Vec<ClaimedSchedule>, StoreError> {
        let lease_until = |subscriber: &str| core::lease_until_ms(now_ms, self.run_timeout_ms(subscriber));
        let sweep = self.store.sweep_breakers(now_ms, &lease_until)?;
        let lines: Vec<Line> = sweep.alerts.iter().map(alert_line).collect();
        self.logger.write(&lines);
        if !sweep.woken.is_empty() || sweep.released > 0 {
            // A woken probe or released deliveries are due now.
            self.wake.notify_waiters();
        }
        if self.schedules.is_empty() {
            return Ok(Vec::new());
        }
        self.store.claim_schedules(&self.schedules, now_ms)
    }

    /// The earliest time the tick has work at or after `now_ms`, if any (for the
    /// virtual-time driver, which runs the tick only when it has something to do).
    pub fn next_tick_work_ms(&self, now_ms: i64) -> Result<Option<i64>, StoreError> {
        let sweep = self.store.next_sweep_ms(now_ms)?;
        let schedules = if self.schedules.is_empty() { None } else { self.store.next_schedule_due_ms()? };
        Ok(match (sweep, schedules) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    /// Make sure every declared schedule has its row (at start).
    pub fn sync_schedules(&self, now_ms: i64) -> Result<(), StoreError> {
        self.store.sync_schedules(&self.schedules, now_ms)
    }

    /// The call a schedule's run makes, or the defect that stops it.
    pub fn prepare_schedule(&self, name: &str, started_ms: i64) -> Result<PreparedCall, Outcome> {
        let defect = |code: &str| Outcome::fail(FailureKind::InternalFault, code);
        let Some(s) = self.program.schedules.iter().find(|s| s.name == name) else {
            return Err(defect("runtime.unknown_schedule"));
        };
        let Some((action, driver)) =
            self.program.actions.get(s.call.action).and_then(|a| Some((a, self.drivers.get(a.connection)?)))
        else {
            return Err(defect("runtime.unknown_action"));
        };
        let request = CallRequest {
            action: action.name.clone(),
            args: call_args(&self.program, &s.call, &Value::Null),
            event_id: None,
            event: name.to_string(),
            delivery: None,
            attempt: 1,
        };
        let deadline_ms = started_ms.saturating_add(core::ms_i64(s.timeout_ms));
        Ok(PreparedCall { driver: driver.clone(), request, deadline_ms })
    }

    /// Record and log how a schedule's run ended.
    pub fn finish_schedule(&self, name: &str, run: u64, outcome: &Outcome, now_ms: i64) -> Result<(), StoreError> {
        let failure = outcome.failure();
        let result = self.store.record_schedule(name, run, now_ms, failure.as_ref()).map(|_| ());
        self.logger.write(&[schedule_line(now_ms, name, run, outcome)]);
        result
    }

    /// Make a prepared call under its run time limit.
    async fn call_prepared(&self, prepared: Result<PreparedCall, Outcome>) -> Outcome {
        let p = match prepared {
            Ok(p) => p,
            Err(defect) => return defect,
        };
        tokio::select! {
            o = p.driver.call(p.request) => o,
            _ = self.clock.sleep_until(p.deadline_ms) => {
                Outcome::fail(FailureKind::DeadlineExceeded, core::CODE_DEADLINE_EXCEEDED)
            }
        }
    }

    async fn attempt(self: Arc<Self>, c: Claimed) -> Done {
        let outcome = self.call_prepared(self.prepare_call(&c)).await;
        let now = self.clock.now_ms();
        self.conclude(&c, outcome, now)
    }

    /// Run one schedule's run and record it; its run time limit counts from now.
    async fn run_schedule(self: Arc<Self>, name: String, run: u64) {
        let started_ms = self.clock.now_ms();
        let outcome = self.call_prepared(self.prepare_schedule(&name, started_ms)).await;
        let now = self.clock.now_ms();
        let rt = self.clone();
        if let Err(e) = blocking(move || rt.finish_schedule(&name, run, &outcome, now)).await {
            self.logger.write(&[error_line(now, &e)]);
        }
    }
}

fn error_line(at_ms: i64, e: &dyn std::fmt::Display) -> Line {
    Line(serde_json::json!({
        "event": "runtime.error",
        "at": crate::clock::rfc3339(at_ms),
        "message": e.to_string(),
    }))
}

/// Run a store call on a blocking thread.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(StoreError::Corrupt(format!("a store task failed: {e}"))),
    }
}

/// Take up to `limit` in-flight permits: wait for one, then take what else is free
/// now without waiting (`None` once the stop is asked for: the watch only ever
/// turns to true).
async fn take_permits(
    inflight: &Arc<Semaphore>,
    limit: usize,
    stop: &mut watch::Receiver<bool>,
) -> Option<OwnedSemaphorePermit> {
    let mut permits = tokio::select! {
        p = inflight.clone().acquire_owned() => p.ok()?,
        _ = stop.changed() => return None,
    };
    let more = inflight.available_permits().min(limit.saturating_sub(1));
    // Another loop may take some first: then this claim takes fewer.
    if let Ok(extra) = inflight.clone().try_acquire_many_owned(u32::try_from(more).unwrap_or(u32::MAX)) {
        permits.merge(extra);
    }
    Some(permits)
}

async fn claim_loop(
    rt: Arc<Runtime>,
    tx: mpsc::Sender<Done>,
    inflight: Arc<Semaphore>,
    mut stop: watch::Receiver<bool>,
    hard: watch::Receiver<bool>,
) {
    loop {
        if *stop.borrow() {
            return;
        }
        // The permits come first: a delivery claimed and then kept waiting for one
        // would spend its run's time limit, counted from the claim, doing nothing.
        let Some(mut permits) = take_permits(&inflight, rt.config.batch, &mut stop).await else {
            return;
        };
        let limit = permits.num_permits();
        let now = rt.clock.now_ms();
        let r = rt.clone();
        let report = blocking(move || r.claim_due(now, limit)).await;
        let report = match report {
            Ok(report) => report,
            Err(e) => {
                drop(permits);
                rt.logger.write(&[error_line(now, &e)]);
                tokio::select! {
                    _ = tokio::time::sleep(STORE_ERROR_PAUSE) => {}
                    _ = stop.changed() => {}
                }
                continue;
            }
        };
        let changed = report.changed();
        for c in report.run {
            // A claim takes at most `limit` deliveries to run, so a permit is left
            // for each (were one missing, the rest would come back at their
            // leases' end rather than run over the limit).
            let Some(permit) = permits.split(1) else {
                break;
            };
            let (rt2, tx2, mut hard2) = (rt.clone(), tx.clone(), hard.clone());
            tokio::spawn(async move {
                tokio::select! {
                    done = rt2.attempt(c) => { let _ = tx2.send(done).await; }
                    _ = hard2.changed() => {}
                }
                drop(permit);
            });
        }
        // The permits no claimed delivery needed go back now.
        drop(permits);
        if changed < limit {
            // Drained what is due: sleep until the next due time, a poll for work
            // other processes added, an in-process emit, or the stop.
            let store = rt.store.clone();
            let next = blocking(move || store.next_due_ms()).await.ok().flatten();
            let until = next.unwrap_or(i64::MAX).min(now.saturating_add(core::ms_i64(rt.config.poll_ms)));
            tokio::select! {
                _ = rt.wake.notified() => {}
                _ = rt.clock.sleep_until(until) => {}
                _ = stop.changed() => {}
            }
        }
    }
}

async fn committer(rt: Arc<Runtime>, mut rx: mpsc::Receiver<Done>) -> u64 {
    let mut total = 0u64;
    let max = rt.config.batch * 4;
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < max {
            match rx.try_recv() {
                Ok(d) => batch.push(d),
                Err(_) => break,
            }
        }
        let r = rt.clone();
        let now = rt.clock.now_ms();
        match blocking(move || r.record_outcomes(&batch)).await {
            Ok(written) => total += written as u64,
            // The deliveries stay `running` and come back when their leases end.
            Err(e) => rt.logger.write(&[error_line(now, &e)]),
        }
    }
    total
}

async fn tick_loop(
    rt: Arc<Runtime>,
    inflight: Arc<Semaphore>,
    mut stop: watch::Receiver<bool>,
    hard: watch::Receiver<bool>,
) {
    loop {
        if *stop.borrow() {
            return;
        }
        let now = rt.clock.now_ms();
        let r = rt.clone();
        match blocking(move || r.tick(now)).await {
            Ok(claimed) => {
                for c in claimed {
                    let (rt2, inflight2, mut hard2) = (rt.clone(), inflight.clone(), hard.clone());
                    tokio::spawn(async move {
                        // A schedule's run holds a permit like an attempt, so a stop
                        // waits for it; its time limit counts from when it has one.
                        let permit = tokio::select! {
                            p = inflight2.acquire_owned() => p,
                            _ = hard2.changed() => return,
                        };
                        let Ok(permit) = permit else {
                            return;
                        };
                        tokio::select! {
                            _ = rt2.run_schedule(c.name, c.run) => {}
                            _ = hard2.changed() => {}
                        }
                        drop(permit);
                    });
                }
            }
            Err(e) => rt.logger.write(&[error_line(now, &e)]),
        }
        tokio::select! {
            _ = rt.clock.sleep_until(now.saturating_add(core::ms_i64(TICK_MS))) => {}
            _ = stop.changed() => {}
        }
    }
}
