//! The store: events, deliveries, attempts, handled records, schedules and
//! breakers, behind traits split by who uses them.
//!
//! - [`Views`]: reads alone. A command that only reads holds one of these, and
//!   so cannot claim or change a row.
//! - [`Store`]: what a run and a writing command call (emit, claim, record,
//!   schedules, versions, retention).
//! - [`Transact`] with [`Rows`]: one transaction's typed reads and guarded
//!   writes, over which [`rows`] writes the [`Actions`] once for every store (an
//!   operator's retry, skip, pause and resume, replays, the tick's sweep and the
//!   expansion of events written in SQL).
//!
//! The traits are synchronous and coarse-grained (one call = one transaction),
//! which both stores implement without a change to the core or the workers:
//! SQLite (one `BEGIN IMMEDIATE` writer per file) and PostgreSQL (`FOR UPDATE
//! SKIP LOCKED` in [`Store::claim`], guarded statements for every other change);
//! the workers call them from blocking threads.
//!
//! The stores are crates of their own (`jadpo-store-sqlite`, `jadpo-store-postgres`),
//! each mapping its driver's errors into [`StoreError`]; `jadpo-runtime` opens one
//! from where it is. `jadpo-store-conformance` holds both to the same suite.

pub mod columns;
mod raise;
pub mod rows;

pub use raise::{EndedDelivery, NoRaise, OrphanedDelivery, Raise, recovered};
pub use rows::{Actions, PruneRows, Rows, Transact};

use crate::rules::breaker::BreakerRow;
use crate::rules::{ClaimDecision, Decision, Failure, Outcome, Record};
use crate::version::{BacklogRow, OrphanRow, ProcessRow, ProgramVersion, VersionView};
use jadpo_check::program::DeliveryState;
use std::time::Duration;

/// How long a locked store is waited on, in all, before an operation gives up.
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(60);

/// What a command means to do with the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read and write; a missing store is created (with its folder) and migrated.
    ReadWrite,
    /// Only read (`status`, `deliveries`, `breakers`): nothing is created, migrated
    /// or locked for writing, so it works on a read-only file and beside a writer.
    ReadOnly,
}

/// How to open a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    /// Read-write or read-only.
    pub access: Access,
    /// How long a locked store is waited on before an operation gives up.
    pub lock_wait: Duration,
}

impl OpenOptions {
    /// Read-write, waiting [`DEFAULT_LOCK_WAIT`] on a lock.
    pub fn read_write() -> OpenOptions {
        OpenOptions { access: Access::ReadWrite, lock_wait: DEFAULT_LOCK_WAIT }
    }

    /// Read-only, waiting [`DEFAULT_LOCK_WAIT`] on a lock.
    pub fn read_only() -> OpenOptions {
        OpenOptions { access: Access::ReadOnly, lock_wait: DEFAULT_LOCK_WAIT }
    }
}

/// Why a delivery ended as its last attempt decided: the failure's reason
/// ([`crate::rules::FailedBecause`]'s word), `succeeded`, or `outcome_unknown` for a
/// parked one; `None` while it goes on.
pub fn end_reason_after_attempt(decision: &Decision) -> Option<&'static str> {
    match decision {
        Decision::Succeeded => Some(END_SUCCEEDED),
        Decision::Retry { .. } => None,
        Decision::Failed { because, .. } => Some(because.as_str()),
        Decision::Parked { .. } => Some(END_OUTCOME_UNKNOWN),
    }
}

/// Why a delivery ended at a claim: `handled` (a handled record was found), or the
/// reason it was given up; `None` when the claim did not end it.
pub fn end_reason_at_claim(decision: &ClaimDecision) -> Option<&'static str> {
    match decision {
        ClaimDecision::Handled => Some(END_HANDLED),
        ClaimDecision::GiveUp { because, .. } => Some(because.as_str()),
        ClaimDecision::Skip
        | ClaimDecision::Run { .. }
        | ClaimDecision::Hold { .. }
        | ClaimDecision::Wait { .. }
        | ClaimDecision::Leave { .. } => None,
    }
}

/// The end reason of a delivery whose attempt succeeded.
pub const END_SUCCEEDED: &str = "succeeded";
/// The end reason of a delivery a claim found handled already.
pub const END_HANDLED: &str = "handled";
/// The end reason of a parked delivery (an outside call may have happened).
pub const END_OUTCOME_UNKNOWN: &str = "outcome_unknown";
/// The end reason of a delivery an operator skipped.
pub const END_SKIPPED: &str = "skipped";

/// Everything that can go wrong in a store, as values.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file exists and is not a jadpo store; it is left untouched.
    #[error("`{path}` is not a jadpo store (refusing to touch it)")]
    Foreign {
        /// The file given.
        path: String,
    },
    /// The store was made by a newer jadpo.
    #[error("`{path}` has schema version {found}; this jadpoc knows up to {known}")]
    TooNew {
        /// The file given.
        path: String,
        /// Its `user_version`.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// The store's schema is older than what a command that only reads needs (it
    /// creates and changes nothing, so it cannot bring it up to date): the
    /// migrations it lacks, and the command that applies them.
    #[error(
        "`{path}` has schema version {found}, older than this jadpoc reads (version {needs} or newer): \
         `jadpoc migrate --db '{path}'` applies migrations {first} to {known} (`--print` shows their SQL \
         first), as `jadpoc run` and `jadpoc emit` do",
        first = .found + 1
    )]
    TooOld {
        /// The store given.
        path: String,
        /// Its version.
        found: i64,
        /// The oldest version the reads know.
        needs: i64,
        /// The newest version this build knows, which `jadpoc migrate` brings it to.
        known: i64,
    },
    /// The database stayed locked by another process past every retry.
    #[error("the store stayed locked for {waited_s}s; no change was made")]
    Busy {
        /// How long we waited.
        waited_s: u64,
    },
    /// The disk holding the store is full.
    #[error("the disk holding the store `{path}` is full; no change was made")]
    Full {
        /// The file given.
        path: String,
    },
    /// The store can only be read (its file, folder or disk is read-only).
    #[error("the store `{path}` is read-only; no change was made")]
    ReadOnly {
        /// The file given.
        path: String,
    },
    /// A read-only command found no store.
    #[error("no store at `{path}` (`jadpoc emit` or `jadpoc run` creates one)")]
    Missing {
        /// The file given.
        path: String,
    },
    /// The database server could not be reached (the URL shown without password).
    #[error("cannot reach the database `{url}`: {message}")]
    Unreachable {
        /// The URL, its password replaced by `***`.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The connection to the database server was lost during the operation (its
    /// transaction is rolled back by the server; the operation is tried again).
    #[error("the connection to the database was lost: {message}")]
    ConnectionLost {
        /// The driver's words.
        message: String,
    },
    /// The store could not be created or opened.
    #[error("cannot open the store `{path}`: {message}")]
    Open {
        /// The file given.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A constraint of the store's schema refused a change (a defect: every change
    /// is guarded before it is written).
    #[error("the store refused a change: {message}")]
    Constraint {
        /// The database's words.
        message: String,
    },
    /// Any other failure of the store's database, in its driver's words.
    #[error("store error: {message}")]
    Database {
        /// The driver's words (PostgreSQL's prefixed by its SQLSTATE).
        message: String,
        /// The driver's error itself, for a caller that looks into it (none
        /// where the store's own words say all).
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// Other processes kept changing a row under a change (an operator's,
    /// past [`rows::CHANGE_TRIES`] tries; an outcome's count of its breaker),
    /// and the change gave up; nothing was changed.
    #[error("{what}; no change was made")]
    Contended {
        /// What kept changing, and under which change.
        what: String,
    },
    /// A row that does not read back as this build wrote it.
    #[error("corrupt store row: {0}")]
    Corrupt(String),
}

/// An event to store, with the deliveries it makes.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// The event's name.
    pub name: String,
    /// Its JSON payload (already validated).
    pub payload: String,
    /// One delivery per subscriber whose `on:` names it.
    pub deliveries: Vec<NewDelivery>,
}

/// A delivery to create with its event.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    /// The subscriber's name.
    pub subscriber: String,
    /// The connection its action calls through.
    pub connection: String,
    /// Its subscriber's `order_by:` value: deliveries of one subscriber with one
    /// key run one at a time, in event order. `None` for an unordered subscriber,
    /// or an event that left the field out.
    pub order_key: Option<String>,
}

/// A delivery found due by a claim, before the core decides.
#[derive(Debug, Clone)]
pub struct ClaimCandidate {
    /// The delivery's id.
    pub id: i64,
    /// Its subscriber.
    pub subscriber: String,
    /// Its connection.
    pub connection: String,
    /// Its record.
    pub record: Record,
    /// Whether a handled record exists for it.
    pub handled: bool,
    /// Its connection's breaker as it stands in this claim (closed and never
    /// failed when the connection has no row yet).
    pub breaker: BreakerRow,
}

pub use crate::rules::breaker::ClaimVerdict;

/// What an operator's retry decides from: a final delivery's state and attempts
/// (its budget is fresh, so nothing else of the row counts).
pub fn retry_subject(state: DeliveryState, attempts: u32, now_ms: i64) -> Record {
    Record {
        state,
        attempts,
        due_at_ms: None,
        lease_until_ms: None,
        budget_start_ms: now_ms,
        held_ms: 0,
        last_failure: None,
    }
}

/// A delivery a claim took to run.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The delivery's id.
    pub id: i64,
    /// Its event's id.
    pub event_id: i64,
    /// Its event's name.
    pub event: String,
    /// Its event's JSON payload.
    pub payload: String,
    /// The number, in the store, of the program version that stored its event,
    /// if known.
    pub event_version: Option<i64>,
    /// Its subscriber.
    pub subscriber: String,
    /// Its connection.
    pub connection: String,
    /// The attempt this claim counted.
    pub attempt: u32,
    /// When the claim was made (the attempt's start).
    pub claimed_at_ms: i64,
    /// When the delivery was due, as the claim read it (a lease taken back: when
    /// the lease ended), for the claim's lag.
    pub due_at_ms: i64,
    /// The record after the claim (state `running`, attempts counted).
    pub record: Record,
}

/// What a claim did, besides the deliveries it took to run.
#[derive(Debug, Clone, Default)]
pub struct ClaimReport {
    /// Deliveries to run now.
    pub run: Vec<Claimed>,
    /// Deliveries ended at the claim: a handled record found (`Handled`), or given
    /// up (`GiveUp`).
    pub ended: Vec<EndedAtClaim>,
    /// Deliveries held by their connection's open breaker.
    pub held: Vec<HeldAtClaim>,
    /// Deliveries left pending for their connection's rate.
    pub waiting: Vec<WaitingAtClaim>,
    /// Deliveries of subscribers this process's program lacks, left for a
    /// process whose program has them, or orphaned.
    pub left: Vec<LeftAtClaim>,
}

/// A delivery a claim left because its subscriber is not in this process's
/// program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftAtClaim {
    /// The delivery's id.
    pub id: i64,
    /// Its subscriber.
    pub subscriber: String,
    /// When it is due again for the process whose program has it; `None`:
    /// orphaned (no running process's program has it).
    pub until_ms: Option<i64>,
}

/// A delivery a claim left pending for its connection's rate (or a provider's
/// `Retry-After`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingAtClaim {
    /// The delivery's id.
    pub id: i64,
    /// Its connection.
    pub connection: String,
    /// Its turn: when it is due again.
    pub until_ms: i64,
}

/// A delivery a claim ended without running it.
#[derive(Debug, Clone)]
pub struct EndedAtClaim {
    /// The delivery's id.
    pub id: i64,
    /// Its subscriber.
    pub subscriber: String,
    /// How it ended: `Handled` or `GiveUp`.
    pub decision: ClaimDecision,
}

/// A delivery a claim held for its connection's open breaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldAtClaim {
    /// The delivery's id.
    pub id: i64,
    /// The connection whose breaker holds it.
    pub connection: String,
}

impl ClaimReport {
    /// How many deliveries the claim changed.
    pub fn changed(&self) -> usize {
        self.run.len() + self.ended.len() + self.held.len() + self.waiting.len() + self.left.len()
    }
}

/// An attempt's outcome and the core's decision, to record in one transaction.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The delivery's id.
    pub id: i64,
    /// Its connection, whose breaker the outcome counts for.
    pub connection: String,
    /// The attempt's number; the record is only written while the delivery is
    /// still `running` with this attempt (a reclaimed lease wins).
    pub attempt: u32,
    /// When the attempt started.
    pub started_at_ms: i64,
    /// When it ended.
    pub ended_at_ms: i64,
    /// How the call ended.
    pub outcome: Outcome,
    /// What the core decided.
    pub decision: Decision,
}

/// Which deliveries to list.
#[derive(Debug, Clone, Default)]
pub struct DeliveryFilter {
    /// Only this state.
    pub state: Option<DeliveryState>,
    /// Only this subscriber.
    pub subscriber: Option<String>,
    /// At most this many, newest first when set.
    pub limit: Option<usize>,
    /// Only deliveries through this connection.
    pub connection: Option<String>,
    /// Only deliveries of events of this name.
    pub event: Option<String>,
    /// Only deliveries created at or after this time.
    pub since_ms: Option<i64>,
    /// Only deliveries created before this time.
    pub until_ms: Option<i64>,
    /// Only deliveries whose last failure has this code.
    pub failure_code: Option<String>,
    /// Only deliveries with a smaller id: the keyset cursor of a page (with
    /// `limit`, the next page starts before the last id of this one).
    pub before_id: Option<i64>,
}

/// Attempts that started in one minute, by outcome ([`Views::attempt_rates`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AttemptRate {
    /// The minute's start (milliseconds since the epoch, a multiple of 60,000).
    pub minute_ms: i64,
    /// Attempts that succeeded.
    pub succeeded: u64,
    /// Attempts that failed.
    pub failed: u64,
}

/// The length of the minutes [`Views::attempt_rates`] counts attempts in.
pub const RATE_MINUTE_MS: i64 = 60_000;

/// A delivery as `jadpoc deliveries` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryView {
    /// Its id.
    pub id: i64,
    /// Its event's id.
    pub event_id: i64,
    /// Its event's name.
    pub event: String,
    /// Its subscriber.
    pub subscriber: String,
    /// Its connection.
    pub connection: String,
    /// Its state.
    pub state: DeliveryState,
    /// Attempts used.
    pub attempts: u32,
    /// When it is due (pending only).
    pub due_at_ms: Option<i64>,
    /// When its lease ends (running only).
    pub lease_until_ms: Option<i64>,
    /// When it was held from (held only).
    pub held_since_ms: Option<i64>,
    /// Time spent held so far.
    pub held_ms: i64,
    /// The start of its budget.
    pub budget_start_ms: i64,
    /// When it was created.
    pub created_at_ms: i64,
    /// Its last failure.
    pub last_failure: Option<Failure>,
    /// Why it ended as it did, once it has ended (`succeeded`, `handled`,
    /// `outcome_unknown`, `past_window`, `attempts_used`, `not_retryable`, `defect`).
    pub end_reason: Option<String>,
    /// Its ordering key (`order_by:`), if it has one.
    pub order_key: Option<String>,
    /// A pending delivery of a key: the earlier delivery of its key it waits on
    /// (the earliest that has not ended).
    pub waiting_on: Option<i64>,
}

/// One attempt of a delivery's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptView {
    /// Its number.
    pub attempt: u32,
    /// When it started.
    pub started_at_ms: i64,
    /// How long it took.
    pub duration_ms: i64,
    /// `succeeded` or `failed`.
    pub outcome: String,
    /// The failure's code, if it failed.
    pub code: Option<String>,
    /// The failure's kind, if it failed.
    pub kind: Option<String>,
    /// The HTTP status, if any.
    pub http_status: Option<u16>,
    /// The failure's short human reason, if the driver gave one.
    pub reason: Option<String>,
}

/// What an operator retry did to one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryResult {
    /// It is pending again with a fresh budget.
    Retried,
    /// No delivery has that id.
    NotFound,
    /// It is in a state that cannot be retried.
    NotRetryable(DeliveryState),
}

/// What an operator's skip did to one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipResult {
    /// It ended `skipped`; its key's later deliveries go on.
    Skipped,
    /// No delivery has that id.
    NotFound,
    /// It is running or has ended already.
    NotSkippable(DeliveryState),
}

/// Deliveries counted by state and subscriber.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusView {
    /// Counts by state, every state present.
    pub states: Vec<(DeliveryState, u64)>,
    /// Counts by subscriber, then state (only states with deliveries).
    pub subscribers: Vec<(String, Vec<(DeliveryState, u64)>)>,
    /// Breakers not closed.
    pub breakers_open: u64,
    /// Connections an operator has paused.
    pub breakers_paused: u64,
    /// Age in seconds of the oldest pending delivery.
    pub oldest_pending_s: Option<i64>,
    /// Events invalid, and waiting to be expanded ([`Views::event_counts`]).
    pub events: EventCounts,
    /// The program versions kept, newest first, with the processes running each
    /// and its deliveries in flight ([`Views::versions`]).
    pub versions: Vec<VersionView>,
}

/// A connection's circuit breaker as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakerView {
    /// The connection.
    pub connection: String,
    /// Its row.
    pub row: BreakerRow,
    /// Deliveries held for it now.
    pub held: u64,
}

/// An outage's alert, raised once (`delivery.alert`, `connection_unavailable`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakerAlert {
    /// The connection.
    pub connection: String,
    /// When its breaker opened.
    pub since_ms: i64,
    /// Deliveries the outage holds when the alert is written: those held, and
    /// those due that its open breaker will hold at their claim.
    pub held: u64,
}

/// What the tick's sweep of the breakers did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BreakerSweep {
    /// Alerts this process raised (each outage's alert is raised by one process).
    pub alerts: Vec<BreakerAlert>,
    /// Held deliveries woken to be a probe, due now.
    pub woken: Vec<i64>,
    /// Held deliveries released because their breaker is closed.
    pub released: u64,
}

/// A schedule the program declares.
#[derive(Debug, Clone)]
pub struct ScheduleSpec {
    /// Its name.
    pub name: String,
    /// Its period.
    pub every_ms: u64,
    /// Its run's time limit.
    pub timeout_ms: u64,
}

/// A schedule's run taken by a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedSchedule {
    /// Its name.
    pub name: String,
    /// The run's number.
    pub run: u64,
}

/// An operator's action on a connection, as the store keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseAction {
    /// `jadpoc breakers pause`.
    Pause,
    /// `jadpoc breakers resume`.
    Resume,
    /// A pause with `--for` came to its end (the sweep ended it).
    Ended,
}

impl PauseAction {
    /// Every action.
    pub const ALL: [PauseAction; 3] = [PauseAction::Pause, PauseAction::Resume, PauseAction::Ended];

    /// The word stored.
    pub fn as_str(self) -> &'static str {
        match self {
            PauseAction::Pause => "pause",
            PauseAction::Resume => "resume",
            PauseAction::Ended => "pause_ended",
        }
    }

    /// The action whose stored word is `word`.
    pub fn parse(word: &str) -> Option<PauseAction> {
        PauseAction::ALL.into_iter().find(|a| a.as_str() == word)
    }
}

/// An operator's action on a connection as the store kept it, for `jadpoc
/// breakers history`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakerAction {
    /// The connection.
    pub connection: String,
    /// What was done.
    pub action: PauseAction,
    /// When.
    pub at_ms: i64,
    /// Who (for a pause's end, who paused).
    pub by: String,
    /// Why, when given.
    pub reason: Option<String>,
    /// When a pause given `--for` was to end.
    pub until_ms: Option<i64>,
}

/// What an operator's resume did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeReport {
    /// The breaker's row before (`None`: the connection had no row, so nothing
    /// was paused, open or held).
    pub was: Option<BreakerRow>,
    /// Held deliveries released, due at once.
    pub released: u64,
}

/// What retention deletes: final deliveries in `states` whose last activity
/// (their last claim, else their creation) is before `cut_ms`, at most `batch`
/// per transaction, with their attempts and handled records, and the events
/// left with no delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunePlan {
    /// Deliveries last active before this are deleted.
    pub cut_ms: i64,
    /// The final states deleted (see [`crate::rules::retention`]).
    pub states: Vec<DeliveryState>,
    /// Most deliveries deleted in one transaction.
    pub batch: usize,
}

/// Rows retention deleted (or, for a dry run, would delete).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneCounts {
    /// Deliveries.
    pub deliveries: u64,
    /// Their attempts.
    pub attempts: u64,
    /// Their handled records.
    pub handled: u64,
    /// Events left with no delivery.
    pub events: u64,
}

impl PruneCounts {
    /// These counts and `other`'s.
    pub fn plus(self, other: PruneCounts) -> PruneCounts {
        PruneCounts {
            deliveries: self.deliveries + other.deliveries,
            attempts: self.attempts + other.attempts,
            handled: self.handled + other.handled,
            events: self.events + other.events,
        }
    }
}

/// An event stored but not yet expanded (written in SQL by the application, with
/// no deliveries): what the expansion step reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnexpandedEvent {
    /// Its id.
    pub id: i64,
    /// Its name as written.
    pub name: String,
    /// Its JSON payload as stored.
    pub payload: String,
}

/// What the expansion step decided for one event.
#[derive(Debug, Clone)]
pub enum Expansion {
    /// Its deliveries, one per subscriber of the event (none when no subscriber
    /// listens to it).
    Deliveries(Vec<NewDelivery>),
    /// Its payload does not match the program: kept, with the refusal's code and
    /// message, and delivered to no one.
    Invalid {
        /// The code `jadpoc emit` and `--listen` refuse such a payload with.
        code: String,
        /// The refusal's message.
        reason: String,
    },
}

/// What one expansion step did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpandReport {
    /// Events expanded into deliveries.
    pub expanded: Vec<Expanded>,
    /// Events found invalid.
    pub invalid: Vec<InvalidEvent>,
}

/// An event the expansion step gave its deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expanded {
    /// The event's id.
    pub id: i64,
    /// How many deliveries it made.
    pub deliveries: usize,
}

/// An event the expansion step kept invalid: its payload does not match the
/// program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidEvent {
    /// The event's id.
    pub id: i64,
    /// Its name as written.
    pub name: String,
    /// The code `jadpoc emit` refuses such a payload with.
    pub code: String,
    /// The refusal's message.
    pub reason: String,
}

/// Which events to list.
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    /// Only events of this name.
    pub name: Option<String>,
    /// Only events emitted at or after this time.
    pub since_ms: Option<i64>,
    /// Only events emitted before this time.
    pub until_ms: Option<i64>,
    /// At most this many (newest first either way).
    pub limit: Option<usize>,
}

/// An event as `jadpoc events` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventView {
    /// Its id.
    pub id: i64,
    /// Its name.
    pub name: String,
    /// Its JSON payload as stored.
    pub payload: String,
    /// When it was stored.
    pub emitted_at_ms: i64,
    /// Whether its deliveries are made (or it was found invalid); false while an
    /// event written in SQL waits for a running process.
    pub expanded: bool,
    /// Why it was found invalid: `(code, reason)`.
    pub invalid: Option<(String, String)>,
    /// The event it replays, when it is a replay.
    pub replay_of: Option<i64>,
    /// The number of the program version that stored it (`jadpoc status` lists
    /// them); none when stored before versions were kept.
    pub version: Option<i64>,
    /// Its deliveries counted by state (only states with deliveries).
    pub deliveries: Vec<(DeliveryState, u64)>,
}

/// A replay to store: a new event, with fresh deliveries, naming the event it
/// replays.
#[derive(Debug, Clone)]
pub struct Replay {
    /// The event replayed.
    pub of: i64,
    /// The new event and its deliveries.
    pub event: NewEvent,
}

/// Events counted for `jadpoc status` and the metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventCounts {
    /// Events kept invalid (their payload did not match the program).
    pub invalid: u64,
    /// Events written in SQL not yet expanded.
    pub unexpanded: u64,
    /// Events in the store by name, whoever stored them.
    pub by_name: Vec<(String, u64)>,
}

/// What `jadpoc status`, the console and its API show at `now_ms`: the counts of
/// [`Views::status`], with the events' ([`Views::event_counts`]) and the
/// program versions with the processes running each ([`Views::versions`]).
pub fn status_now(store: &dyn Views, now_ms: i64) -> Result<StatusView, StoreError> {
    let mut status = store.status(now_ms)?;
    status.events = store.event_counts()?;
    status.versions = store.versions(now_ms.saturating_sub(crate::rules::ms_i64(crate::version::PROCESS_LIVE_MS)))?;
    Ok(status)
}

/// What a store shows: reads only, each in one transaction. A store opened
/// to read (`jadpoc status`, `deliveries`, `breakers`, a console beside a run) is
/// one of these and nothing more, so it cannot claim or change a row.
pub trait Views: Send + Sync {
    /// The version the last run started with, else (no run has started) the
    /// one kept last, if any.
    fn latest_version(&self) -> Result<Option<ProgramVersion>, StoreError>;

    /// The versions kept, newest first, each with the processes seen since
    /// `live_since_ms` that run it and its deliveries in flight.
    fn versions(&self, live_since_ms: i64) -> Result<Vec<VersionView>, StoreError>;

    /// Deliveries not ended, counted by subscriber, connection and state, with
    /// the oldest's creation.
    fn backlog(&self) -> Result<Vec<BacklogRow>, StoreError>;

    /// How many deliveries of `subscriber` waiting to run (pending or held) a
    /// claim would give up under a budget of `attempts` and a window ending
    /// before `window_cut_ms` ([`crate::version::window_cut_ms`]): those past
    /// either.
    fn past_budget(&self, subscriber: &str, attempts: u32, window_cut_ms: i64) -> Result<u64, StoreError>;

    /// List deliveries.
    fn deliveries(&self, filter: &DeliveryFilter) -> Result<Vec<DeliveryView>, StoreError>;

    /// One delivery with its attempts.
    fn delivery(&self, id: i64) -> Result<Option<DeliveryDetail>, StoreError>;

    /// Deliveries counted by state and subscriber.
    fn status(&self, now_ms: i64) -> Result<StatusView, StoreError>;

    /// Every breaker with a row, by connection name (a connection without one is
    /// closed and has never failed).
    fn breakers(&self) -> Result<Vec<BreakerView>, StoreError>;

    /// Whether the store knows `connection`: a breaker row or a delivery through it.
    fn knows_connection(&self, connection: &str) -> Result<bool, StoreError>;

    /// Every pause, resume and end of a pause kept, oldest first; only
    /// `connection`'s when given.
    fn breaker_history(&self, connection: Option<&str>) -> Result<Vec<BreakerAction>, StoreError>;

    /// What pruning by `plan` would delete now, deleting nothing.
    fn prune_preview(&self, plan: &PrunePlan) -> Result<PruneCounts, StoreError>;

    /// List events, newest first, with their deliveries counted by state.
    fn events(&self, filter: &EventFilter) -> Result<Vec<EventView>, StoreError>;

    /// One event with its deliveries.
    fn event(&self, id: i64) -> Result<Option<EventDetail>, StoreError>;

    /// Events counted: invalid, and not yet expanded.
    fn event_counts(&self) -> Result<EventCounts, StoreError>;

    /// Attempts started at or after `since_ms`, counted per minute
    /// ([`RATE_MINUTE_MS`], aligned to the epoch) and outcome, oldest minute
    /// first; minutes with no attempt are left out.
    fn attempt_rates(&self, since_ms: i64) -> Result<Vec<AttemptRate>, StoreError>;

    /// The database's clock (`clock_timestamp()` on PostgreSQL), which every
    /// process sharing the store reads alike; `None` for a store whose processes
    /// share one host's clock (SQLite).
    fn db_now_ms(&self) -> Result<Option<i64>, StoreError>;
}

/// A store that writes: what a run, `jadpoc emit` and an operator's command
/// use. Each call is one transaction. The operators' actions, the tick's sweep
/// and the expansion of events are not here: they are the core's, written once
/// over the store's row operations ([`Actions`], over [`Transact`]).
pub trait Store: Views + Transact {
    /// Keep `version` (once per hash, with its files) and write it from now on
    /// beside every event this handle stores, its deliveries being of that
    /// version. `version.created_at_ms` is ignored: `now_ms` is used the first
    /// time. With `run`, a run starts with it at `now_ms` (and
    /// `version.accepted` is what it accepted): it becomes the version the next
    /// run is compared with.
    /// Returns the version's number in this store.
    fn record_version(&self, version: &ProgramVersion, now_ms: i64, run: bool) -> Result<i64, StoreError>;

    /// Note `process` alive at `now_ms`, and read the subscribers (with their
    /// earlier names) of the programs that every process seen since
    /// `live_since_ms` runs.
    fn heartbeat(&self, process: &ProcessRow, now_ms: i64, live_since_ms: i64) -> Result<Vec<String>, StoreError>;

    /// `process` stopped: it no longer counts as running.
    fn process_stopped(&self, id: &str) -> Result<(), StoreError>;

    /// Up to `limit` orphaned deliveries of `subscribers`, oldest first.
    fn orphans(&self, subscribers: &[String], limit: usize) -> Result<Vec<OrphanRow>, StoreError>;

    /// Take back orphaned deliveries, each `pending` and due at `now_ms` with its
    /// time held as [`crate::rules::held_when_adopted`] says, conditional on being as read;
    /// returns how many were.
    fn adopt(&self, rows: &[OrphanRow], now_ms: i64) -> Result<usize, StoreError>;

    /// Store events and their deliveries, due at once, in one transaction; returns
    /// the events' ids in order.
    fn emit(&self, events: &[NewEvent], now_ms: i64) -> Result<Vec<i64>, StoreError>;

    /// Claim up to `limit` due deliveries (pending and due, or running with an
    /// ended lease). For each, `decide` (the core) says what the claim does; every
    /// change is conditional on the row being as it was read, so two processes
    /// never take one delivery. A delivery given up or orphaned at the claim
    /// stores `raise`'s events once its statement matched.
    fn claim(
        &self,
        now_ms: i64,
        limit: usize,
        decide: &mut dyn FnMut(&ClaimCandidate) -> ClaimVerdict,
        raise: &dyn Raise,
    ) -> Result<ClaimReport, StoreError>;

    /// Record attempts' outcomes and decisions in one transaction, each with its
    /// attempt row (and a handled record on success), and count each outcome for
    /// its connection's breaker (the core's [`crate::rules::breaker::after_attempt`]);
    /// a breaker that closes releases its held deliveries, due at once, and
    /// stores `raise.connection_recovered`'s events. `raised[i]` (if any) is
    /// stored with `outcomes[i]` only if that outcome is written. Returns the
    /// indices, in `outcomes`, of those still owned by their attempt and written
    /// (an outcome whose lease another claim took is skipped).
    fn record(
        &self,
        outcomes: &[Recorded],
        raised: &[Vec<NewEvent>],
        raise: &dyn Raise,
    ) -> Result<Vec<usize>, StoreError>;

    /// [`Store::record`], then [`Store::claim`]: in one transaction on a store
    /// with one writer ([`Store::one_writer`]), which then commits, and syncs its
    /// log, once for both; otherwise the two in turn (a claim that fails after
    /// the outcomes were written returns its error, and the outcomes, written
    /// again, find their deliveries no longer `running` under their attempt and
    /// are not written twice).
    fn record_then_claim(
        &self,
        outcomes: &[Recorded],
        raised: &[Vec<NewEvent>],
        claim: ClaimAt,
        decide: &mut dyn FnMut(&ClaimCandidate) -> ClaimVerdict,
        raise: &dyn Raise,
    ) -> Result<RecordedThenClaimed, StoreError> {
        let written = self.record(outcomes, raised, raise)?;
        let claimed = self.claim(claim.now_ms, claim.limit, decide, raise)?;
        Ok(RecordedThenClaimed { written, claimed })
    }

    /// Whether the store's writes all take one lock in turn (SQLite's one writer),
    /// so that a run gains by writing its outcomes with its next claim rather than
    /// beside it ([`Store::record_then_claim`]). A store whose writers work at
    /// once (PostgreSQL) writes outcomes and claims apart.
    fn one_writer(&self) -> bool {
        false
    }

    /// The earliest time a delivery becomes claimable, if any is waiting.
    fn next_due_ms(&self) -> Result<Option<i64>, StoreError>;

    /// Make sure every declared schedule has a row; a schedule seen the first time
    /// is due `every` from now. Rows of schedules no longer declared are kept.
    fn sync_schedules(&self, schedules: &[ScheduleSpec], now_ms: i64) -> Result<(), StoreError>;

    /// Claim the schedules due at `now_ms`, moving each one's due time to its next
    /// tick after now (one catch-up run, not one per missed tick).
    fn claim_schedules(&self, schedules: &[ScheduleSpec], now_ms: i64) -> Result<Vec<ClaimedSchedule>, StoreError>;

    /// Record how a schedule's run `run` ended; a run that is no longer the
    /// schedule's latest (another process claimed a newer one) changes nothing.
    /// Returns whether it was written.
    fn record_schedule(
        &self,
        name: &str,
        run: u64,
        ended_at_ms: i64,
        failure: Option<&Failure>,
    ) -> Result<bool, StoreError>;

    /// The earliest due time of the given schedules.
    fn next_schedule_due_ms(&self) -> Result<Option<i64>, StoreError>;

    /// When the sweep ([`Actions::sweep_breakers`]) next has work, if it has
    /// any: the earliest of the breakers' [`crate::rules::breaker::next_work_ms`],
    /// or `now_ms` while a held delivery has no breaker holding it. An answer
    /// after `now_ms` (or none) holds, at any later time up to it, until the
    /// store changes: only work due at once is counted from `now_ms` (the
    /// virtual-time driver keeps such an answer while nothing writes).
    fn next_sweep_ms(&self, now_ms: i64) -> Result<Option<i64>, StoreError>;

    /// Call `wake` whenever any process stores an event, until the store is
    /// dropped (PostgreSQL: `LISTEN` on one connection of its own, listened to
    /// again after a reconnect, calling `wake` then too). Returns whether the store
    /// can; one that cannot (SQLite) leaves other processes' events to polling.
    fn listen(&self, wake: Waker) -> Result<bool, StoreError>;
}

/// What [`Store::record_then_claim`] did.
#[derive(Debug, Clone, Default)]
pub struct RecordedThenClaimed {
    /// The indices, in the outcomes given, of those written.
    pub written: Vec<usize>,
    /// What the claim did.
    pub claimed: ClaimReport,
}

/// A delivery with its attempts, oldest first ([`Views::delivery`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryDetail {
    /// The delivery.
    pub delivery: DeliveryView,
    /// Its attempts.
    pub attempts: Vec<AttemptView>,
}

/// An event with its deliveries ([`Views::event`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventDetail {
    /// The event.
    pub event: EventView,
    /// Its deliveries.
    pub deliveries: Vec<DeliveryView>,
}

/// When a claim runs and how many deliveries it may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimAt {
    /// The claim's time.
    pub now_ms: i64,
    /// The most deliveries it takes to run.
    pub limit: usize,
}

/// What [`Store::listen`] calls when an event was stored.
pub type Waker = std::sync::Arc<dyn Fn() + Send + Sync>;
