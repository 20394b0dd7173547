//! What the live driver does next, decided without IO.
//!
//! The [`Conductor`] is told the time and what happened ([`Input`]: the run
//! started, a claim came back, attempts ended, work is due, the stop was asked,
//! a store call failed or panicked, ...) and answers with what to do next
//! ([`Action`]: claim, record, read the next due time, tick, expand, prune,
//! start attempts and schedule runs, cut off what still runs, say the process
//! stopped) and until when to wait ([`Conductor::next_wake`]). It holds no
//! future, thread, lock or clock: the shell (`super`) performs its actions,
//! waits, and hands back what came of them.
//!
//! What it keeps:
//!
//! - the in-flight permits: every attempt and schedule run holds one while it
//!   runs, so a claim takes only as many deliveries as there are permits free
//!   (their run's time limit, counted from the claim, is all their own);
//! - one claim at a time: taken at once after a claim that filled its limit;
//!   after one that drained what is due, the claims sleep until the next due
//!   time, a poll, or work made due meanwhile. With one writer, a claim of a few
//!   waits up to [`CLAIM_GATHER`] for a quarter of its permits;
//! - the outcomes waiting to be written: with one writer, the next claim writes
//!   them in its own transaction, and a record writes them alone only when no
//!   claim is under way or waiting for permits, or when they have waited
//!   [`LEFT_TO_CLAIMS`]; otherwise a record writes every outcome waiting, one
//!   record at a time;
//! - the tick (every [`TICK_MS`]), the expansion of events written in SQL (at
//!   once again after a full batch, else after the poll interval) and the
//!   prune (every [`RETAIN_EVERY_MS`], with `--retain`);
//! - the pause after store errors in a row ([`Backoff`]), for the start, the
//!   claims, the records and the tick;
//! - the stop: no new claim, tick, expansion or prune; running attempts and
//!   schedule runs finish for up to the grace period (counted once the loops'
//!   calls under way have come back), then are cut off; the outcomes left are
//!   written (tried again until written or their leases have ended); then the
//!   process says it stopped, and the run is over.

use super::InternalFault;
use jadpo_core::config::{
    CLAIM_GATHER, LEFT_TO_CLAIMS, RETAIN_EVERY_MS, RuntimeConfig, STORE_ERROR_PAUSE_MAX_MS, STORE_ERROR_PAUSE_MS,
    TICK_MS,
};
use jadpo_core::steps::{Done, RunSummary};
use jadpo_core::store::StoreError;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// An outcome waiting to be written: dropped once its attempt's lease has ended
/// (another claim may have taken the delivery back and counted the attempt).
pub(crate) trait Leased {
    /// When the attempt's lease ends, if it has one.
    fn lease_until_ms(&self) -> Option<i64>;
}

impl Leased for Done {
    fn lease_until_ms(&self) -> Option<i64> {
        self.lease_until_ms
    }
}

/// How the conductor runs, from the runtime's configuration and its store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    /// In-flight permits: attempts and schedule runs at once.
    pub in_flight: usize,
    /// Most deliveries one claim takes: half the permits, so that the attempts
    /// of one claim run while the next is written.
    pub claim_most: usize,
    /// The store's writes all take one lock: claims write the outcomes waiting.
    pub one_writer: bool,
    /// How long an idle claim, or an expansion that found less than a batch,
    /// waits before looking again.
    pub poll: Duration,
    /// Most events one expansion takes.
    pub expand_limit: usize,
    /// With `--retain`: prune what is older than this many milliseconds at once
    /// and then every [`RETAIN_EVERY_MS`].
    pub prune_older_than_ms: Option<u64>,
    /// How long running attempts and schedule runs may finish after a stop.
    pub grace: Duration,
}

impl Settings {
    /// The settings of a run under `config` on a store with one writer or not.
    pub fn new(config: &RuntimeConfig, one_writer: bool) -> Settings {
        let in_flight = config.batch.saturating_mul(config.workers.max(1));
        Settings {
            in_flight,
            claim_most: (in_flight / 2).max(1),
            one_writer,
            poll: Duration::from_millis(config.poll_ms),
            expand_limit: config.batch,
            prune_older_than_ms: config.retain_ms,
            grace: Duration::from_millis(config.stop_grace_ms),
        }
    }
}

/// A store call the shell makes for an [`Action`]: named when it panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    /// [`Action::Start`].
    Start,
    /// [`Action::Listen`].
    Listen,
    /// [`Action::Claim`].
    Claim,
    /// [`Action::ReadNextDue`].
    NextDue,
    /// [`Action::Record`].
    Record,
    /// [`Action::Tick`].
    Tick,
    /// [`Action::Expand`].
    Expand,
    /// [`Action::Prune`].
    Prune,
    /// [`Action::MarkStopped`].
    MarkStopped,
}

/// How an attempt's or a schedule run's task ended.
#[derive(Debug)]
pub(crate) enum Ended<T> {
    /// It finished: an attempt's outcome, to be written; a schedule run's record.
    Finished(T),
    /// The stop's grace period ran out: cut off, nothing written.
    Cut,
    /// It panicked, a defect: nothing written, the run stops.
    Panicked(InternalFault),
}

/// What happened, as the shell tells the conductor. `O` is an attempt's outcome,
/// `C` a claimed delivery, `S` a claimed schedule run.
#[derive(Debug)]
pub(crate) enum Input<O, C, S> {
    /// The run's first writes are done.
    Started,
    /// The run's first writes failed.
    StartFailed(StoreError),
    /// The store listens for other processes' events, or could not.
    Listened(Result<(), StoreError>),
    /// A claim came back: how many outcomes it wrote, the deliveries to run, how
    /// many rows it changed in all, and how many due deliveries it left waiting
    /// for a connection's free slot.
    Claimed { written: usize, run: Vec<C>, changed: usize, waiting: usize },
    /// A claim failed; the outcomes it was to write are handed back, with the
    /// runtime's time then.
    ClaimFailed { error: StoreError, outcomes: Vec<O>, now_ms: i64 },
    /// The next due time read after a claim drained what was due (none: nothing
    /// is due, or the store could not tell).
    NextDue(Result<Option<Instant>, StoreError>),
    /// A record came back: how many outcomes it wrote (one whose lease another
    /// claim took is not written).
    Recorded { written: usize },
    /// A record failed; its outcomes are handed back, with the runtime's time then.
    RecordFailed { error: StoreError, outcomes: Vec<O>, now_ms: i64 },
    /// The tick came back: the schedule runs it claimed.
    Ticked(Result<Vec<S>, StoreError>),
    /// An expansion came back: how many events it took.
    Expanded(Result<usize, StoreError>),
    /// A prune came back.
    Pruned(Result<jadpo_core::store::PruneCounts, StoreError>),
    /// An attempt's task ended.
    AttemptEnded(Ended<O>),
    /// A schedule run's task ended (its record written, or not).
    ScheduleRunEnded(Ended<Result<(), StoreError>>),
    /// The process said it stopped (or could not).
    MarkedStopped(Result<(), StoreError>),
    /// Deliveries are due now (an event stored, a slot freed, ...).
    WorkDue,
    /// The caller asked the run to stop.
    StopAsked,
    /// A task panicked, a defect; the run stops.
    Fault(InternalFault),
    /// A store call panicked, a defect; the run stops.
    Panicked { call: Call, fault: InternalFault },
}

impl<O, C, S> Input<O, C, S> {
    /// The store error it reports, if any.
    pub fn store_error(&self) -> Option<&StoreError> {
        match self {
            Input::StartFailed(error)
            | Input::ClaimFailed { error, .. }
            | Input::RecordFailed { error, .. }
            | Input::Listened(Err(error))
            | Input::NextDue(Err(error))
            | Input::Ticked(Err(error))
            | Input::Expanded(Err(error))
            | Input::Pruned(Err(error))
            | Input::ScheduleRunEnded(Ended::Finished(Err(error)))
            | Input::MarkedStopped(Err(error)) => Some(error),
            _ => None,
        }
    }

    /// The fault it reports, if any.
    pub fn fault(&self) -> Option<&InternalFault> {
        match self {
            Input::Fault(fault)
            | Input::Panicked { fault, .. }
            | Input::AttemptEnded(Ended::Panicked(fault))
            | Input::ScheduleRunEnded(Ended::Panicked(fault)) => Some(fault),
            _ => None,
        }
    }
}

/// What the shell does next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Action<O, C, S> {
    /// Read the store's clock, if it has one, and make the run's first writes
    /// (its version and process kept, its schedules' rows made).
    Start,
    /// Listen for other processes' events (they make work due).
    Listen,
    /// Write `outcomes`, then claim up to `limit` due deliveries, in one store call.
    Claim { limit: usize, outcomes: Vec<O> },
    /// Read when the next delivery is due.
    ReadNextDue,
    /// Write `outcomes`.
    Record { outcomes: Vec<O> },
    /// Run each of these claimed deliveries' attempts (each holds a permit).
    StartAttempts(Vec<C>),
    /// Run this schedule run, then write it (it holds a permit).
    RunSchedule(S),
    /// Read the store's clock, sweep the breakers and claim the schedules due.
    Tick,
    /// Expand up to `limit` events written in SQL.
    Expand { limit: usize },
    /// Prune what is older than `older_than_ms`.
    Prune { older_than_ms: u64 },
    /// The stop's grace period is over: cut off the attempts and schedule runs
    /// still running.
    CutRunning,
    /// Say in the store that this process stopped.
    MarkStopped,
}

/// The pause after store errors in a row: [`STORE_ERROR_PAUSE_MS`], doubling with
/// each error up to [`STORE_ERROR_PAUSE_MAX_MS`]; a success starts it over.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backoff {
    errors_in_a_row: u32,
}

impl Backoff {
    /// The pause after one more error.
    pub fn next_pause(&mut self) -> Duration {
        let ms = STORE_ERROR_PAUSE_MS.saturating_mul(1 << self.errors_in_a_row.min(16)).min(STORE_ERROR_PAUSE_MAX_MS);
        self.errors_in_a_row = self.errors_in_a_row.saturating_add(1);
        Duration::from_millis(ms)
    }

    /// A success.
    pub fn reset(&mut self) {
        self.errors_in_a_row = 0;
    }
}

/// `wait` after `t`; as far as time goes when that is past what an `Instant`
/// holds (a poll interval of years).
fn later(t: Instant, wait: Duration) -> Instant {
    t.checked_add(wait).or_else(|| t.checked_add(Duration::from_secs(365 * 24 * 3600))).unwrap_or(t)
}

/// Where the run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Its first writes: under way (`calling`), or to try again at `retry_at`;
    /// `stop_asked` while a call was under way.
    Starting { calling: bool, retry_at: Option<Instant>, stop_asked: bool },
    /// Claiming, ticking, expanding, pruning.
    Running,
    /// Stopped claiming; what runs finishes until `grace_until` (set once the
    /// loops' calls under way have come back), then is `cut`.
    Draining { grace_until: Option<Instant>, cut: bool },
    /// Saying the process stopped.
    MarkingStopped,
    /// Over.
    Done,
}

/// Where the claims are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClaimState {
    /// To claim as soon as a permit is free (with one writer, waiting until
    /// `gather_until` for a quarter of the claim's permits).
    Ready { gather_until: Option<Instant> },
    /// A claim of up to `limit` is under way, made at `started`.
    Claiming { started: Instant, limit: usize },
    /// Reading the next due time after the claim made at `claim_started`
    /// drained what was due.
    ReadingNextDue { claim_started: Instant },
    /// Nothing due until `until` (or work made due meanwhile).
    Idle { until: Instant },
    /// A claim failed: the next at `until`.
    Paused { until: Instant },
    /// The run stopped claiming.
    Over,
}

/// Where the record of outcomes (outside the claims) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecordState {
    /// Ready to write.
    Idle,
    /// A record is under way.
    Writing,
    /// A record failed: the next at `until`.
    Paused { until: Instant },
}

/// Where a periodic store call (the tick, the expansion, the prune) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Periodic {
    /// Not made (any more).
    Off,
    /// Next made at this time.
    At(Instant),
    /// Under way, made at `issued`.
    Calling { issued: Instant },
}

impl Periodic {
    fn calling(self) -> bool {
        matches!(self, Periodic::Calling { .. })
    }

    /// The call's time, once due at `now` (then under way).
    fn due(&mut self, now: Instant) -> bool {
        match *self {
            Periodic::At(at) if at <= now => {
                *self = Periodic::Calling { issued: now };
                true
            }
            _ => false,
        }
    }

    /// When the call under way was made (`now` if none was).
    fn issued(self, now: Instant) -> Instant {
        match self {
            Periodic::Calling { issued } => issued,
            _ => now,
        }
    }
}

/// The live driver's decisions: see the module's documentation.
#[derive(Debug)]
pub(crate) struct Conductor<O, C, S> {
    settings: Settings,
    phase: Phase,
    start_backoff: Backoff,
    /// In-flight permits free.
    permits_free: usize,
    attempts_running: usize,
    schedule_runs_running: usize,
    /// Schedule runs the tick claimed, waiting for a permit.
    schedule_runs_waiting: VecDeque<S>,
    claim: ClaimState,
    claim_backoff: Backoff,
    /// Work was made due while a claim (or its next due time's read) was under
    /// way: claim again after it rather than sleep.
    work_due_meanwhile: bool,
    /// Outcomes waiting to be written, oldest first.
    outcomes: Vec<O>,
    /// When the oldest of `outcomes` came.
    outcomes_since: Option<Instant>,
    record: RecordState,
    record_backoff: Backoff,
    tick: Periodic,
    tick_backoff: Backoff,
    expansion: Periodic,
    prune: Periodic,
    listening_call: bool,
    recorded: u64,
    abandoned: u64,
    fault: Option<InternalFault>,
    actions: VecDeque<Action<O, C, S>>,
}

impl<O: Leased, C, S> Conductor<O, C, S> {
    /// A run under `settings`, about to start: its first action is
    /// [`Action::Start`].
    pub fn new(settings: Settings) -> Self {
        Conductor {
            settings,
            phase: Phase::Starting { calling: false, retry_at: None, stop_asked: false },
            start_backoff: Backoff::default(),
            permits_free: settings.in_flight,
            attempts_running: 0,
            schedule_runs_running: 0,
            schedule_runs_waiting: VecDeque::new(),
            claim: ClaimState::Over,
            claim_backoff: Backoff::default(),
            work_due_meanwhile: false,
            outcomes: Vec::new(),
            outcomes_since: None,
            record: RecordState::Idle,
            record_backoff: Backoff::default(),
            tick: Periodic::Off,
            tick_backoff: Backoff::default(),
            expansion: Periodic::Off,
            prune: Periodic::Off,
            listening_call: false,
            recorded: 0,
            abandoned: 0,
            fault: None,
            actions: VecDeque::new(),
        }
    }

    /// The next action to perform, if any.
    pub fn poll_action(&mut self) -> Option<Action<O, C, S>> {
        self.actions.pop_front()
    }

    /// Whether the run is over.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The run's result once over: what it recorded and cut off, or the first
    /// fault.
    pub fn result(&mut self) -> Result<RunSummary, InternalFault> {
        match self.fault.take() {
            Some(fault) => Err(fault),
            None => Ok(RunSummary { recorded: self.recorded, abandoned: self.abandoned }),
        }
    }

    /// `input` came at `now`.
    pub fn handle(&mut self, now: Instant, input: Input<O, C, S>) {
        self.take_in(now, input);
        self.step(now);
    }

    /// `inputs` came together at `now`: what to do is decided once they are all
    /// taken in (the outcomes of attempts that ended together are written in one
    /// record, not one record for the first and another for the rest).
    pub fn handle_all(&mut self, now: Instant, inputs: impl IntoIterator<Item = Input<O, C, S>>) {
        for input in inputs {
            self.take_in(now, input);
        }
        self.step(now);
    }

    /// What `input` changes.
    fn take_in(&mut self, now: Instant, input: Input<O, C, S>) {
        match input {
            Input::Started => self.started(now),
            Input::StartFailed(_) => {
                if let Phase::Starting { stop_asked, .. } = self.phase {
                    self.phase = if stop_asked {
                        Phase::Done
                    } else {
                        let retry_at = Some(later(now, self.start_backoff.next_pause()));
                        Phase::Starting { calling: false, retry_at, stop_asked }
                    };
                }
            }
            Input::Listened(_) => self.listening_call = false,
            Input::Claimed { written, run, changed, waiting } => self.claimed(written, run, changed, waiting),
            Input::ClaimFailed { outcomes, now_ms, .. } => {
                if let ClaimState::Claiming { limit, .. } = self.claim {
                    self.permits_free += limit;
                }
                self.put_back(outcomes, now_ms, now);
                self.claim = if self.running() {
                    ClaimState::Paused { until: later(now, self.claim_backoff.next_pause()) }
                } else {
                    ClaimState::Over
                };
            }
            Input::NextDue(next) => {
                if let ClaimState::ReadingNextDue { claim_started } = self.claim {
                    let poll = later(claim_started, self.settings.poll);
                    self.claim = if !self.running() {
                        ClaimState::Over
                    } else if std::mem::take(&mut self.work_due_meanwhile) {
                        ClaimState::Ready { gather_until: None }
                    } else {
                        let until = next.ok().flatten().map_or(poll, |due| due.min(poll));
                        ClaimState::Idle { until }
                    };
                }
            }
            Input::Recorded { written } => {
                self.recorded += written as u64;
                self.record_backoff.reset();
                self.record = RecordState::Idle;
            }
            Input::RecordFailed { outcomes, now_ms, .. } => {
                self.put_back(outcomes, now_ms, now);
                self.record = RecordState::Paused { until: later(now, self.record_backoff.next_pause()) };
            }
            Input::Ticked(ticked) => {
                let pause = match ticked {
                    Ok(schedule_runs) => {
                        self.tick_backoff.reset();
                        self.schedule_runs_waiting.extend(schedule_runs);
                        Duration::from_millis(TICK_MS)
                    }
                    Err(_) => Duration::from_millis(TICK_MS).max(self.tick_backoff.next_pause()),
                };
                self.tick = self.next_periodic(later(now, pause));
            }
            Input::Expanded(expanded) => {
                let issued = self.expansion.issued(now);
                let next = match expanded {
                    // A full batch: the next at once.
                    Ok(count) if count >= self.settings.expand_limit => now,
                    Ok(_) => later(issued, self.settings.poll),
                    Err(_) => later(issued, Duration::from_millis(STORE_ERROR_PAUSE_MS)),
                };
                self.expansion = self.next_periodic(next);
            }
            Input::Pruned(_) => {
                let next = later(self.prune.issued(now), Duration::from_millis(RETAIN_EVERY_MS));
                self.prune = self.next_periodic(next);
            }
            Input::AttemptEnded(ended) => {
                self.permits_free += 1;
                self.attempts_running = self.attempts_running.saturating_sub(1);
                match ended {
                    Ended::Finished(outcome) => {
                        self.outcomes.push(outcome);
                        self.outcomes_since.get_or_insert(now);
                    }
                    Ended::Cut => self.abandoned += 1,
                    Ended::Panicked(fault) => self.fault(fault),
                }
            }
            Input::ScheduleRunEnded(ended) => {
                self.permits_free += 1;
                self.schedule_runs_running = self.schedule_runs_running.saturating_sub(1);
                match ended {
                    Ended::Finished(_) => {}
                    Ended::Cut => self.abandoned += 1,
                    Ended::Panicked(fault) => self.fault(fault),
                }
            }
            Input::MarkedStopped(_) => self.phase = Phase::Done,
            Input::WorkDue => match self.claim {
                ClaimState::Idle { .. } => self.claim = ClaimState::Ready { gather_until: None },
                ClaimState::Claiming { .. } | ClaimState::ReadingNextDue { .. } => self.work_due_meanwhile = true,
                ClaimState::Ready { .. } | ClaimState::Paused { .. } | ClaimState::Over => {}
            },
            Input::StopAsked => self.stop(),
            Input::Fault(fault) => self.fault(fault),
            Input::Panicked { call, fault } => {
                self.call_lost(call);
                self.fault(fault);
            }
        }
    }

    /// The time is `now` (a wait the conductor asked for may have ended).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.step(now);
    }

    /// When the conductor next has something to do of itself, if ever (it may
    /// have something to do sooner, on an input).
    pub fn next_wake(&self) -> Option<Instant> {
        let mut at: Option<Instant> = None;
        let mut consider = |t: Instant| at = Some(at.map_or(t, |a| a.min(t)));
        match self.phase {
            Phase::Starting { calling: false, retry_at: Some(t), .. } => return Some(t),
            Phase::Starting { .. } | Phase::MarkingStopped | Phase::Done => return None,
            Phase::Running | Phase::Draining { .. } => {}
        }
        match self.claim {
            ClaimState::Idle { until } | ClaimState::Paused { until } => consider(until),
            ClaimState::Ready { gather_until: Some(until) } if self.permits_free > 0 => consider(until),
            _ => {}
        }
        if !self.outcomes.is_empty() {
            match self.record {
                RecordState::Paused { until } => consider(until),
                RecordState::Idle => {
                    if let Some(since) = self.outcomes_since {
                        consider(later(since, LEFT_TO_CLAIMS));
                    }
                }
                RecordState::Writing => {}
            }
        }
        for periodic in [self.tick, self.expansion, self.prune] {
            if let Periodic::At(t) = periodic {
                consider(t);
            }
        }
        if let Phase::Draining { grace_until: Some(t), cut: false } = self.phase
            && self.attempts_running + self.schedule_runs_running > 0
        {
            consider(t);
        }
        at
    }

    fn running(&self) -> bool {
        self.phase == Phase::Running
    }

    fn started(&mut self, now: Instant) {
        let Phase::Starting { stop_asked, .. } = self.phase else { return };
        self.start_backoff.reset();
        self.actions.push_back(Action::Listen);
        self.listening_call = true;
        if stop_asked {
            // Started: the process is in the store, and says it stopped.
            self.phase = Phase::Draining { grace_until: None, cut: false };
            return;
        }
        self.phase = Phase::Running;
        self.claim = ClaimState::Ready { gather_until: None };
        self.tick = Periodic::At(now);
        self.expansion = Periodic::At(now);
        self.prune = if self.settings.prune_older_than_ms.is_some() { Periodic::At(now) } else { Periodic::Off };
    }

    fn claimed(&mut self, written: usize, mut run: Vec<C>, changed: usize, waiting: usize) {
        let ClaimState::Claiming { started, limit } = self.claim else { return };
        self.recorded += written as u64;
        self.claim_backoff.reset();
        // A claim takes at most `limit` deliveries to run, so that a permit is
        // there for each (any more would come back at their leases' end).
        run.truncate(limit);
        self.permits_free += limit - run.len();
        self.attempts_running += run.len();
        if !run.is_empty() {
            self.actions.push_back(Action::StartAttempts(run));
        }
        self.claim = if !self.running() {
            ClaimState::Over
        } else if changed >= limit || std::mem::take(&mut self.work_due_meanwhile) {
            // More may be due.
            ClaimState::Ready { gather_until: None }
        } else if waiting > 0 {
            // Deliveries left waiting for a slot are due already: they wait for
            // the wake of an attempt's end (or the poll), not their time.
            ClaimState::Idle { until: later(started, self.settings.poll) }
        } else {
            self.actions.push_back(Action::ReadNextDue);
            ClaimState::ReadingNextDue { claim_started: started }
        };
    }

    /// Outcomes a failed write took, back in front of those that came since,
    /// less those whose leases have ended by `now_ms`.
    fn put_back(&mut self, mut outcomes: Vec<O>, now_ms: i64, now: Instant) {
        outcomes.retain(|o| o.lease_until_ms().is_some_and(|until| until > now_ms));
        if outcomes.is_empty() {
            return;
        }
        outcomes.append(&mut self.outcomes);
        self.outcomes = outcomes;
        self.outcomes_since = Some(now);
    }

    fn take_outcomes(&mut self) -> Vec<O> {
        self.outcomes_since = None;
        std::mem::take(&mut self.outcomes)
    }

    /// The periodic call's next time, unless the run stopped.
    fn next_periodic(&self, at: Instant) -> Periodic {
        if self.running() { Periodic::At(at) } else { Periodic::Off }
    }

    fn stop(&mut self) {
        match self.phase {
            Phase::Starting { calling: true, retry_at, .. } => {
                self.phase = Phase::Starting { calling: true, retry_at, stop_asked: true };
            }
            Phase::Starting { calling: false, .. } => self.phase = Phase::Done,
            Phase::Running => {
                self.phase = Phase::Draining { grace_until: None, cut: false };
                if !matches!(self.claim, ClaimState::Claiming { .. } | ClaimState::ReadingNextDue { .. }) {
                    self.claim = ClaimState::Over;
                }
                for periodic in [&mut self.tick, &mut self.expansion, &mut self.prune] {
                    if !periodic.calling() {
                        *periodic = Periodic::Off;
                    }
                }
            }
            Phase::Draining { .. } | Phase::MarkingStopped | Phase::Done => {}
        }
    }

    /// A panic: the first is the run's result; the run stops.
    fn fault(&mut self, fault: InternalFault) {
        self.fault.get_or_insert(fault);
        self.stop();
    }

    /// `call` panicked: it will not come back.
    fn call_lost(&mut self, call: Call) {
        match call {
            Call::Start => self.phase = Phase::Done,
            Call::Listen => self.listening_call = false,
            Call::Claim => {
                if let ClaimState::Claiming { limit, .. } = self.claim {
                    self.permits_free += limit;
                }
                // Its outcomes stay `running` and come back when their leases end.
                self.claim = ClaimState::Over;
            }
            Call::NextDue => self.claim = ClaimState::Over,
            Call::Record => self.record = RecordState::Idle,
            Call::Tick => self.tick = Periodic::Off,
            Call::Expand => self.expansion = Periodic::Off,
            Call::Prune => self.prune = Periodic::Off,
            Call::MarkStopped => self.phase = Phase::Done,
        }
    }

    /// Whether a claim is under way or waiting for its permits: with one writer,
    /// outcomes are left to it.
    fn claim_under_way(&self) -> bool {
        match self.claim {
            ClaimState::Claiming { .. } => true,
            ClaimState::Ready { .. } => self.running(),
            _ => false,
        }
    }

    /// Whether a loop's call (claim, next due time, tick, expansion, prune,
    /// listen) is under way.
    fn loops_calling(&self) -> bool {
        matches!(self.claim, ClaimState::Claiming { .. } | ClaimState::ReadingNextDue { .. })
            || self.tick.calling()
            || self.expansion.calling()
            || self.prune.calling()
            || self.listening_call
    }

    /// Decide what to do at `now`.
    fn step(&mut self, now: Instant) {
        match self.phase {
            Phase::Starting { calling: false, retry_at, stop_asked } => {
                if retry_at.is_none_or(|at| at <= now) {
                    self.actions.push_back(Action::Start);
                    self.phase = Phase::Starting { calling: true, retry_at: None, stop_asked };
                }
                return;
            }
            Phase::Starting { calling: true, .. } | Phase::MarkingStopped | Phase::Done => return,
            Phase::Running | Phase::Draining { .. } => {}
        }
        if let ClaimState::Idle { until } | ClaimState::Paused { until } = self.claim
            && until <= now
        {
            self.claim = ClaimState::Ready { gather_until: None };
        }
        if self.running() {
            if self.tick.due(now) {
                self.actions.push_back(Action::Tick);
            }
            if self.expansion.due(now) {
                self.actions.push_back(Action::Expand { limit: self.settings.expand_limit });
            }
            if let Some(older_than_ms) = self.settings.prune_older_than_ms
                && self.prune.due(now)
            {
                self.actions.push_back(Action::Prune { older_than_ms });
            }
        }
        self.start_schedule_runs();
        if self.running() {
            self.claim_if_ready(now);
        }
        self.drain(now);
        self.record_if_due(now);
        self.mark_stopped_once_over();
    }

    /// Schedule runs take the free permits first.
    fn start_schedule_runs(&mut self) {
        if let Phase::Draining { cut: true, .. } = self.phase {
            return;
        }
        while self.permits_free > 0 {
            let Some(schedule_run) = self.schedule_runs_waiting.pop_front() else { break };
            self.permits_free -= 1;
            self.schedule_runs_running += 1;
            self.actions.push_back(Action::RunSchedule(schedule_run));
        }
    }

    fn claim_if_ready(&mut self, now: Instant) {
        let ClaimState::Ready { gather_until } = self.claim else { return };
        if self.permits_free == 0 {
            // Gathering starts once a permit is free.
            self.claim = ClaimState::Ready { gather_until: None };
            return;
        }
        // With one writer a claim of a few is a commit for a few: a moment is
        // given for a quarter of its permits to come back.
        let quarter = self.settings.claim_most / 4;
        if self.settings.one_writer && self.permits_free < quarter {
            let until = gather_until.unwrap_or_else(|| later(now, CLAIM_GATHER));
            if now < until {
                self.claim = ClaimState::Ready { gather_until: Some(until) };
                return;
            }
        }
        let limit = self.permits_free.min(self.settings.claim_most);
        self.permits_free -= limit;
        let outcomes = if self.settings.one_writer { self.take_outcomes() } else { Vec::new() };
        self.actions.push_back(Action::Claim { limit, outcomes });
        self.claim = ClaimState::Claiming { started: now, limit };
        // This claim sees the work made due before it.
        self.work_due_meanwhile = false;
    }

    fn drain(&mut self, now: Instant) {
        let Phase::Draining { grace_until, cut } = self.phase else { return };
        let grace_until = match grace_until {
            Some(at) => at,
            None if self.loops_calling() => return,
            None => {
                let at = later(now, self.settings.grace);
                self.phase = Phase::Draining { grace_until: Some(at), cut };
                at
            }
        };
        if !cut && now >= grace_until && self.attempts_running + self.schedule_runs_running > 0 {
            self.actions.push_back(Action::CutRunning);
            self.schedule_runs_waiting.clear();
            self.phase = Phase::Draining { grace_until: Some(grace_until), cut: true };
        }
    }

    fn record_if_due(&mut self, now: Instant) {
        if let RecordState::Paused { until } = self.record
            && until <= now
        {
            self.record = RecordState::Idle;
        }
        if self.record != RecordState::Idle || self.outcomes.is_empty() {
            return;
        }
        if self.settings.one_writer && self.claim_under_way() {
            // Left to the claim for a while; one that waited longer (the claim
            // waits for permits other attempts hold) is written alone.
            let since = self.outcomes_since.unwrap_or(now);
            if now < later(since, LEFT_TO_CLAIMS) {
                return;
            }
        }
        let outcomes = self.take_outcomes();
        self.actions.push_back(Action::Record { outcomes });
        self.record = RecordState::Writing;
    }

    fn mark_stopped_once_over(&mut self) {
        let Phase::Draining { .. } = self.phase else { return };
        let over = !self.loops_calling()
            && self.attempts_running + self.schedule_runs_running == 0
            && self.schedule_runs_waiting.is_empty()
            && self.outcomes.is_empty()
            && self.record != RecordState::Writing;
        if over {
            self.actions.push_back(Action::MarkStopped);
            self.phase = Phase::MarkingStopped;
        }
    }
}

#[cfg(test)]
mod tests;
