//! The live driver of time: the tokio loops behind `jadpoc run`.
//!
//! Claim loops take due deliveries in batches (one transaction per batch), taking
//! turns (one claim at a time per process), start each attempt as its own task
//! under the subscriber's `timeout:`, and hand its outcome to one committer that
//! records every outcome waiting in one batch (one transaction per batch, each
//! outcome with its attempt row). A loop takes its in-flight permits before it
//! claims, so every delivery it claims starts at once and its run's time limit
//! (counted from the claim) is all its own. The tick, once a second, sweeps
//! the breakers (alerts, probes woken, releases) and runs due schedules. Expired
//! leases are taken back by the claims themselves (a claim reads ended leases
//! before due deliveries). One more loop expands events written in SQL (their
//! deliveries made, or the event kept invalid), looking as often as an idle claim
//! loop polls.
//!
//! The clock is the runtime's: the system clock on SQLite, the database's on
//! PostgreSQL (re-read at every tick: [`crate::clock::AnchoredClock`]). Events
//! other processes store wake the claim loops when the store can tell
//! ([`crate::store::Store::listen`]); polling stays as the fallback.
//!
//! A lost store never ends the run: every store error is logged and tried again
//! after a pause that grows while the errors go on (claims, the tick, the
//! schedules' rows at start), and the committer keeps a batch it could not write
//! and writes it again, until written or until its attempts' leases have ended
//! (then the leases bring those deliveries back, as after a crash).
//!
//! The work itself is the [`Runtime`]'s steps ([`crate::steps`]); this module only
//! decides when they run.

use crate::config::{RETAIN_EVERY_MS, STORE_ERROR_PAUSE_MAX_MS, STORE_ERROR_PAUSE_MS, TICK_MS};
use crate::drivers::SendMark;
use crate::events;
use crate::rules::{self, Outcome};
use crate::steps::{Done, DueClaim, PreparedCall, RunSummary, Runtime};
use crate::store::{Claimed, StoreError};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tracing::Instrument;

impl Runtime {
    /// Run until `stop` turns true; then stop claiming, let running attempts and
    /// schedule runs finish for up to the grace period, record their outcomes, and
    /// return.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) -> Result<RunSummary, StoreError> {
        anchor_clock(&self).await;
        let mut backoff = Backoff::default();
        loop {
            let now = self.clock.now_ms();
            let rt = self.clone();
            match blocking(move || rt.sync_schedules(now)).await {
                Ok(()) => break,
                Err(e) => {
                    events::error(now, &e);
                    tokio::select! {
                        _ = backoff.pause() => {}
                        _ = stop.changed() => {}
                    }
                    if *stop.borrow() {
                        return Ok(RunSummary::default());
                    }
                    anchor_clock(&self).await;
                }
            }
        }
        let wake = self.wake.clone();
        let store = self.store.clone();
        // Another process's event wakes every idle loop, and leaves a permit for a
        // loop busy claiming (its claim may have missed the event).
        let waker: crate::store::Waker = Arc::new(move || {
            wake.notify_waiters();
            wake.notify_one();
        });
        if let Err(e) = blocking(move || store.listen(waker)).await {
            events::error(self.clock.now_ms(), &e);
        }

        let capacity = self.config.batch * self.config.workers.max(1);
        // Outcomes waiting for the committer: up to twice the attempts in flight, so
        // attempts ending while a batch is written need not wait for it.
        let (tx, rx) = mpsc::channel::<Done>(capacity * 2);
        let committer = tokio::spawn(committer(self.clone(), rx));
        let inflight = Arc::new(Semaphore::new(capacity));
        let (hard_tx, hard_rx) = watch::channel(false);

        let mut loops = Vec::new();
        let turn = Arc::new(Mutex::new(()));
        for _ in 0..self.config.workers.max(1) {
            loops.push(tokio::spawn(claim_loop(
                self.clone(),
                tx.clone(),
                inflight.clone(),
                turn.clone(),
                stop.clone(),
                hard_rx.clone(),
            )));
        }
        let tick = tokio::spawn(tick_loop(self.clone(), inflight.clone(), stop.clone(), hard_rx.clone()));
        let retain =
            self.config.retain_ms.map(|older_than| tokio::spawn(retain_loop(self.clone(), older_than, stop.clone())));
        let expand = tokio::spawn(expand_loop(self.clone(), stop.clone()));

        while !*stop.borrow() {
            if stop.changed().await.is_err() {
                break;
            }
        }
        for l in loops {
            let _ = l.await;
        }
        let _ = tick.await;
        if let Some(retain) = retain {
            let _ = retain.await;
        }
        let _ = expand.await;
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

    /// Make a prepared call under its run time limit.
    async fn call_prepared(&self, prepared: Result<PreparedCall, Outcome>) -> Outcome {
        let p = match prepared {
            Ok(p) => p,
            Err(defect) => return defect,
        };
        // The driver tells whether the request may have reached the provider: if so
        // (and the action is not idempotent), the time limit cannot say the call
        // did not happen.
        let sent = SendMark::new();
        // A limit that passed before the call starts (its claim was slow to
        // write) ends it unmade: a request sent now would be cut at once.
        if self.clock.now_ms() >= p.deadline_ms {
            return sent.at_time_limit();
        }
        tokio::select! {
            o = p.driver.call_marked(p.request, sent.clone()) => o,
            _ = self.clock.sleep_until(p.deadline_ms) => sent.at_time_limit(),
        }
    }

    async fn attempt(self: Arc<Self>, c: Claimed) -> Done {
        let span = events::attempt_span(c.id, &c.subscriber, c.attempt);
        let outcome = self.call_prepared(self.prepare_call(&c)).instrument(span).await;
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
            events::error(now, &e);
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
/// last anchor: the next tick tries again.
async fn anchor_clock(rt: &Arc<Runtime>) {
    let store = rt.store.clone();
    let read = blocking(move || {
        let before = Instant::now();
        let db = store.db_now_ms()?;
        Ok(db.map(|db| (db, before + before.elapsed() / 2)))
    })
    .await;
    if let Ok(Some((db, at))) = read {
        rt.clock.anchor(db, at);
    }
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
    // The tick may take some first (a schedule's run): then this claim takes fewer.
    if let Ok(extra) = inflight.clone().try_acquire_many_owned(u32::try_from(more).unwrap_or(u32::MAX)) {
        permits.merge(extra);
    }
    Some(permits)
}

/// Run `work` as its own task once `permit` gives an in-flight permit, holding it
/// until the work ends; a hard stop (the grace period over) cuts either wait short,
/// and the permit goes back either way.
fn spawn_under_permit(
    permit: impl Future<Output = Option<OwnedSemaphorePermit>> + Send + 'static,
    mut hard: watch::Receiver<bool>,
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
            () = work => {}
            _ = hard.changed() => {}
        }
        drop(permit);
    });
}

async fn claim_loop(
    rt: Arc<Runtime>,
    tx: mpsc::Sender<Done>,
    inflight: Arc<Semaphore>,
    turn: Arc<Mutex<()>>,
    mut stop: watch::Receiver<bool>,
    hard: watch::Receiver<bool>,
) {
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
        let Some(mut permits) = take_permits(&inflight, rt.config.batch, &mut stop).await else {
            return;
        };
        let limit = permits.num_permits();
        let now = rt.clock.now_ms();
        let r = rt.clone();
        let report = blocking(move || r.claim_due(now, limit)).await;
        let DueClaim { report, waiting } = match report {
            Ok(claim) => {
                backoff.reset();
                claim
            }
            Err(e) => {
                drop(permits);
                drop(my_turn);
                events::error(now, &e);
                tokio::select! {
                    _ = backoff.pause() => {}
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
            let (rt2, tx2) = (rt.clone(), tx.clone());
            // Boxed: the task is moved at its spawn and as it ends, and an
            // attempt's future is large.
            let work = Box::pin(async move {
                let done = rt2.attempt(c).await;
                let _ = tx2.send(done).await;
            });
            spawn_under_permit(std::future::ready(Some(permit)), hard.clone(), work);
        }
        // The permits no claimed delivery needed go back now.
        drop(permits);
        drop(my_turn);
        if changed < limit {
            // Drained what is due: sleep until the next due time, a poll for work
            // other processes added, an in-process emit, an attempt's end freeing a
            // connection's slot, or the stop. Deliveries left waiting for a slot
            // are due already: they wait for the wake (or the poll), not their time.
            let store = rt.store.clone();
            let next = if waiting > 0 { None } else { blocking(move || store.next_due_ms()).await.ok().flatten() };
            let until = next.unwrap_or(i64::MAX).min(now.saturating_add(rules::ms_i64(rt.config.poll_ms)));
            tokio::select! {
                _ = rt.wake.notified() => {}
                _ = rt.clock.sleep_until(until) => {}
                _ = stop.changed() => {}
            }
        }
    }
}

/// Record the outcomes `rx` brings, every outcome waiting in one batch (a batch
/// costs the store far less per outcome than one outcome a transaction).
async fn committer(rt: Arc<Runtime>, mut rx: mpsc::Receiver<Done>) -> u64 {
    let mut total = 0u64;
    let max = rx.max_capacity();
    // Outcomes not yet written: a batch the store refused is kept and written
    // again (with what came meanwhile) after a pause.
    let mut batch: Vec<Done> = Vec::new();
    let mut backoff = Backoff::default();
    let mut open = true;
    loop {
        if batch.is_empty() {
            match rx.recv().await {
                Some(first) => batch.push(first),
                None => break,
            }
        }
        while open && batch.len() < max {
            match rx.try_recv() {
                Ok(d) => batch.push(d),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => open = false,
            }
        }
        let r = rt.clone();
        let now = rt.clock.now_ms();
        let taken = std::mem::take(&mut batch);
        let written = tokio::task::spawn_blocking(move || {
            let result = r.record_outcomes(&taken);
            (taken, result)
        })
        .await;
        match written {
            Ok((_, Ok(written))) => {
                total += written as u64;
                backoff.reset();
            }
            Ok((kept, Err(e))) => {
                events::error(now, &e);
                // An outcome whose lease has ended is the lease's now: another
                // claim may have taken the delivery back and counted the attempt.
                let now = rt.clock.now_ms();
                batch = kept.into_iter().filter(|d| d.lease_until_ms.is_some_and(|until| until > now)).collect();
                if !batch.is_empty() {
                    backoff.pause().await;
                }
            }
            // The deliveries stay `running` and come back when their leases end.
            Err(e) => events::error(now, &StoreError::Corrupt(format!("a store task failed: {e}"))),
        }
        if !open && batch.is_empty() {
            break;
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
    let mut backoff = Backoff::default();
    loop {
        if *stop.borrow() {
            return;
        }
        anchor_clock(&rt).await;
        let now = rt.clock.now_ms();
        let r = rt.clone();
        let mut pause_ms = TICK_MS;
        match blocking(move || r.tick(now)).await {
            Ok(claimed) => {
                backoff.reset();
                for c in claimed {
                    // A schedule's run holds a permit like an attempt, so a stop
                    // waits for it; its time limit counts from when it has one
                    // (the work starts only then).
                    let permit = inflight.clone().acquire_owned();
                    let permit = async move { permit.await.ok() };
                    spawn_under_permit(permit, hard.clone(), rt.clone().run_schedule(c.name, c.run));
                }
            }
            Err(e) => {
                events::error(now, &e);
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
async fn retain_loop(rt: Arc<Runtime>, older_than_ms: u64, mut stop: watch::Receiver<bool>) {
    loop {
        if *stop.borrow() {
            return;
        }
        let now = rt.clock.now_ms();
        let store = rt.store.clone();
        let plan = crate::retention::plan(now, older_than_ms, false);
        match blocking(move || crate::retention::prune(store.as_ref(), &plan)).await {
            Ok(counts) if counts.deliveries > 0 => events::pruned(now, &counts),
            Ok(_) => {}
            Err(e) => events::error(now, &e),
        }
        tokio::select! {
            _ = rt.clock.sleep_until(now.saturating_add(rules::ms_i64(RETAIN_EVERY_MS))) => {}
            _ = stop.changed() => {}
        }
    }
}

/// Expand events written in SQL: a full batch is followed at once by the next;
/// otherwise the loop looks again after the poll interval.
async fn expand_loop(rt: Arc<Runtime>, mut stop: watch::Receiver<bool>) {
    loop {
        if *stop.borrow() {
            return;
        }
        let now = rt.clock.now_ms();
        let limit = rt.config.batch;
        let r = rt.clone();
        let pause = match blocking(move || r.expand_events(now, limit)).await {
            Ok(report) if report.expanded.len() + report.invalid.len() >= limit => continue,
            Ok(_) => rt.config.poll_ms,
            Err(e) => {
                events::error(now, &e);
                STORE_ERROR_PAUSE_MS
            }
        };
        tokio::select! {
            _ = rt.clock.sleep_until(now.saturating_add(rules::ms_i64(pause))) => {}
            _ = stop.changed() => {}
        }
    }
}
