//! The pure core: every rule of a delivery's life, decided once.
//!
//! Nothing here reads a clock, touches the store or draws from a global random
//! source: times come in as `now` (milliseconds since the Unix epoch) and
//! randomness through a `rand::Rng` parameter, so the same code runs under the
//! system clock in `jadpoc run` and under a virtual clock with a seeded source in
//! `jadpoc test`.

pub mod breaker;
pub mod hold;
pub mod rate;
pub mod retention;

use crate::codes::RuntimeCode;
use jadpo_check::budget;
use jadpo_check::program::{Budget, DeliveryState, FailureKind};
use rand::{Rng, RngExt};

/// What a claim adds to the run's time limit to make its lease.
pub const LEASE_GRACE_MS: u64 = 30 * budget::SECOND_MS;

/// The code recorded when a delivery's worker was lost (its lease ended).
pub const CODE_LEASE_EXPIRED: &str = RuntimeCode::LeaseExpired.as_str();
/// The code recorded when the run's time limit ended an attempt, or when a delivery
/// was never tried within its window.
pub const CODE_DEADLINE_EXCEEDED: &str = RuntimeCode::DeadlineExceeded.as_str();

/// A failure as a record keeps it: its code and kind, and a short reason, never
/// its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// A short stable code such as `http.503` or `fake.unavailable`.
    pub code: String,
    /// How the attempt ended.
    pub kind: FailureKind,
    /// A short human reason, such as the underlying error's text (`connection
    /// refused`); never a header value or a body. No decision reads it.
    pub reason: Option<String>,
}

impl Failure {
    /// A failure with the given code and kind, and no reason.
    pub fn new(code: impl Into<String>, kind: FailureKind) -> Failure {
        Failure { code: code.into(), kind, reason: None }
    }

    /// The same failure with a short human reason.
    #[must_use]
    pub fn with_reason(mut self, reason: impl Into<String>) -> Failure {
        self.reason = Some(reason.into());
        self
    }

    /// The failure recorded when a claim finds a lease that ended.
    pub fn lease_expired() -> Failure {
        Failure::new(CODE_LEASE_EXPIRED, FailureKind::LeaseExpired)
    }

    /// The failure recorded for a run's time limit, or a delivery never tried in time.
    pub fn deadline_exceeded() -> Failure {
        Failure::new(CODE_DEADLINE_EXCEEDED, FailureKind::DeadlineExceeded)
    }
}

/// How one attempt's call ended, as a driver reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The action succeeded.
    Succeeded {
        /// The HTTP status, when the driver speaks HTTP.
        http_status: Option<u16>,
    },
    /// The action failed.
    Failed(CallFailure),
}

impl Outcome {
    /// A success with no HTTP status.
    pub fn ok() -> Outcome {
        Outcome::Succeeded { http_status: None }
    }

    /// A failure of this kind and code, with no HTTP status, no Retry-After and no
    /// reason.
    pub fn fail(kind: FailureKind, code: impl Into<String>) -> Outcome {
        Outcome::Failed(CallFailure::new(kind, code))
    }

    /// The HTTP status of the call, if any.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Outcome::Succeeded { http_status } => *http_status,
            Outcome::Failed(f) => f.http_status,
        }
    }

    /// The failure's code and kind, if the call failed.
    pub fn failure(&self) -> Option<Failure> {
        match self {
            Outcome::Succeeded { .. } => None,
            Outcome::Failed(f) => Some(f.failure()),
        }
    }
}

/// A failed call: its kind and code, and what the provider asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFailure {
    /// How the call failed.
    pub kind: FailureKind,
    /// A short stable code.
    pub code: String,
    /// The HTTP status, when the provider answered over HTTP.
    pub http_status: Option<u16>,
    /// A `Retry-After` asked for, in milliseconds from the end of the attempt.
    pub retry_after_ms: Option<u64>,
    /// A short human reason (see [`Failure::reason`]).
    pub reason: Option<String>,
}

impl CallFailure {
    /// A failure of this kind and code, with no HTTP status, no Retry-After and no
    /// reason.
    pub fn new(kind: FailureKind, code: impl Into<String>) -> CallFailure {
        CallFailure { kind, code: code.into(), http_status: None, retry_after_ms: None, reason: None }
    }

    /// The same failure with a short human reason.
    #[must_use]
    pub fn with_reason(mut self, reason: impl Into<String>) -> CallFailure {
        self.reason = Some(reason.into());
        self
    }

    /// The failure a record keeps of it.
    pub fn failure(&self) -> Failure {
        Failure { code: self.code.clone(), kind: self.kind, reason: self.reason.clone() }
    }
}

/// What the core needs to know of a delivery's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its state.
    pub state: DeliveryState,
    /// Attempts used; a claim that runs the delivery counts its attempt at once.
    pub attempts: u32,
    /// When a `pending` delivery is next due.
    pub due_at_ms: Option<i64>,
    /// When a `running` delivery's lease ends.
    pub lease_until_ms: Option<i64>,
    /// The start of its budget: the event's `emitted_at`, or an operator's retry.
    pub budget_start_ms: i64,
    /// Time spent held by a breaker, which moves the window on.
    pub held_ms: i64,
    /// The last failure, if any.
    pub last_failure: Option<Failure>,
}

impl Record {
    /// A new delivery of an event emitted at `emitted_at_ms`: pending, due at once.
    pub fn new(emitted_at_ms: i64) -> Record {
        Record {
            state: DeliveryState::Pending,
            attempts: 0,
            due_at_ms: Some(emitted_at_ms),
            lease_until_ms: None,
            budget_start_ms: emitted_at_ms,
            held_ms: 0,
            last_failure: None,
        }
    }

    /// The last moment an attempt may start: the budget's start plus `within`,
    /// moved on by the time held.
    pub fn window_end_ms(&self, budget: &Budget) -> i64 {
        self.budget_start_ms.saturating_add(ms_i64(budget.within_ms)).saturating_add(self.held_ms)
    }
}

/// Why a delivery ended `failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedBecause {
    /// A declared failure (`not_found`, `conflict`, `rejected`): the same input
    /// fails the same way.
    NotRetryable,
    /// `internal_fault`: a defect, not retried until someone fixes it.
    Defect,
    /// Every attempt of the budget was used.
    AttemptsUsed,
    /// The next attempt would start past the budget's window.
    PastWindow,
}

impl FailedBecause {
    /// A short word for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            FailedBecause::NotRetryable => "not_retryable",
            FailedBecause::Defect => "defect",
            FailedBecause::AttemptsUsed => "attempts_used",
            FailedBecause::PastWindow => "past_window",
        }
    }
}

/// What happens to a delivery after an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Done; a handled record is written in the same transaction.
    Succeeded,
    /// Tried again at `due_at_ms`.
    Retry {
        /// When the next attempt is due.
        due_at_ms: i64,
        /// The failure to keep on the record.
        failure: Failure,
    },
    /// Not tried again.
    Failed {
        /// The failure to keep on the record.
        failure: Failure,
        /// Why it ended.
        because: FailedBecause,
    },
    /// `outcome_unknown`: an outside call may have happened; never retried
    /// automatically.
    Parked {
        /// The failure to keep on the record.
        failure: Failure,
    },
}

impl Decision {
    /// The delivery's state after this decision.
    pub fn state(&self) -> DeliveryState {
        match self {
            Decision::Succeeded => DeliveryState::Succeeded,
            Decision::Retry { .. } => DeliveryState::Pending,
            Decision::Failed { .. } => DeliveryState::Failed,
            Decision::Parked { .. } => DeliveryState::Parked,
        }
    }

    /// The failure kept on the record, if any.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            Decision::Succeeded => None,
            Decision::Retry { failure, .. } | Decision::Failed { failure, .. } | Decision::Parked { failure } => {
                Some(failure)
            }
        }
    }

    /// When the delivery is next due, if it is.
    pub fn due_at_ms(&self) -> Option<i64> {
        match self {
            Decision::Retry { due_at_ms, .. } => Some(*due_at_ms),
            _ => None,
        }
    }
}

/// Draw the wait after failed attempt `n`: evenly from [0, c(n)], never under 1s.
pub fn draw_wait_ms<R: Rng + ?Sized>(n: u32, rng: &mut R) -> u64 {
    let ceiling = budget::wait_ceiling_ms(n);
    rng.random_range(0..=ceiling).max(budget::MIN_WAIT_MS)
}

/// Decide what follows an attempt that ended with `outcome` at `now_ms`.
///
/// `record.attempts` already counts this attempt (its claim counted it).
pub fn decide_after_attempt<R: Rng + ?Sized>(
    record: &Record,
    budget: &Budget,
    outcome: &Outcome,
    now_ms: i64,
    rng: &mut R,
) -> Decision {
    let call = match outcome {
        Outcome::Succeeded { .. } => return Decision::Succeeded,
        Outcome::Failed(call) => call,
    };
    let failure = call.failure();
    match call.kind {
        FailureKind::OutcomeUnknown => return Decision::Parked { failure },
        FailureKind::InternalFault => {
            return Decision::Failed { failure, because: FailedBecause::Defect };
        }
        kind if !kind.is_retryable() => {
            return Decision::Failed { failure, because: FailedBecause::NotRetryable };
        }
        _ => {}
    }
    if record.attempts >= budget.attempts {
        return Decision::Failed { failure, because: FailedBecause::AttemptsUsed };
    }
    // A Retry-After raises the wait to what it asks; it never lowers it.
    let mut wait = draw_wait_ms(record.attempts.max(1), rng);
    if let Some(asked) = call.retry_after_ms {
        wait = wait.max(asked);
    }
    let due_at_ms = now_ms.saturating_add(ms_i64(wait));
    // Fail now rather than at a claim that could only give up.
    if due_at_ms > record.window_end_ms(budget) {
        return Decision::Failed { failure, because: FailedBecause::PastWindow };
    }
    Decision::Retry { due_at_ms, failure }
}

/// What a claim does with a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimDecision {
    /// Not claimable now (not due, or held by a live lease): leave it as it is.
    Skip,
    /// A handled record was found: `succeeded` without running.
    Handled,
    /// Run it: this is attempt `attempt`, leased until `lease_until_ms`.
    Run {
        /// The attempt's number (attempts used after this claim).
        attempt: u32,
        /// When the lease ends.
        lease_until_ms: i64,
        /// The previous worker's lease had ended: record `lease_expired` for the
        /// attempt it had counted.
        lease_expired: bool,
        /// The failure kept on the record meanwhile: `lease_expired` then, else
        /// the last attempt's.
        failure: Option<Failure>,
    },
    /// Held by its connection's open breaker: `held`, not due, the claim's attempt
    /// given back (set by [`ClaimDecision::held`], never by the budget).
    Hold {
        /// The previous worker's lease had ended (its attempt is recorded as
        /// `lease_expired`).
        lease_expired: bool,
        /// The failure kept on the record, as for [`ClaimDecision::Run`].
        failure: Option<Failure>,
    },
    /// Its connection's rate has no turn for it now: pending, due at `until_ms`,
    /// the wait added to its time held (no attempt, no `within:` spent).
    Wait {
        /// Its turn.
        until_ms: i64,
    },
    /// Its subscriber is not in this process's program: left for a process whose
    /// program has it, never run or failed here (not counted as an attempt).
    Leave {
        /// When it is due again, for the process that has it (the time until
        /// then added to its time held); `None` when no running process's program
        /// has it: `orphaned`, not due, until one does (see [`leave_at_claim`]).
        until_ms: Option<i64>,
        /// The previous worker's lease had ended (its attempt is recorded as
        /// `lease_expired`).
        lease_expired: bool,
    },
    /// Given up at the claim, without running; not counted as an attempt.
    GiveUp {
        /// The failure kept: the last attempt's, or `deadline_exceeded` if it was
        /// never tried in time.
        failure: Failure,
        /// Why it ended.
        because: FailedBecause,
        /// The previous worker's lease had ended (its attempt is recorded as
        /// `lease_expired`).
        lease_expired: bool,
    },
}

impl ClaimDecision {
    /// A delivery the budget would run, held instead by its connection's breaker;
    /// any other decision is left as it is.
    pub fn held(self) -> ClaimDecision {
        match self {
            ClaimDecision::Run { lease_expired, failure, .. } => ClaimDecision::Hold { lease_expired, failure },
            other => other,
        }
    }
}

/// Decide what a claim at `now_ms` does with a delivery.
///
/// `handled` says whether a handled record exists for it; `run_timeout_ms` is the
/// subscriber's run time limit, from which the lease is made.
pub fn decide_at_claim(
    record: &Record,
    budget: &Budget,
    now_ms: i64,
    handled: bool,
    run_timeout_ms: u64,
) -> ClaimDecision {
    let lease_expired = match record.state {
        DeliveryState::Pending => {
            if record.due_at_ms.is_some_and(|due| due > now_ms) {
                return ClaimDecision::Skip;
            }
            false
        }
        DeliveryState::Running => {
            if record.lease_until_ms.is_none_or(|until| until > now_ms) {
                return ClaimDecision::Skip;
            }
            true
        }
        _ => return ClaimDecision::Skip,
    };
    if handled {
        return ClaimDecision::Handled;
    }
    let last = if lease_expired { Some(Failure::lease_expired()) } else { record.last_failure.clone() };
    let give_up = |because| ClaimDecision::GiveUp {
        failure: last.clone().unwrap_or_else(Failure::deadline_exceeded),
        because,
        lease_expired,
    };
    if record.attempts >= budget.attempts {
        return give_up(FailedBecause::AttemptsUsed);
    }
    if now_ms > record.window_end_ms(budget) {
        return give_up(FailedBecause::PastWindow);
    }
    ClaimDecision::Run {
        attempt: record.attempts + 1,
        lease_until_ms: lease_until_ms(now_ms, run_timeout_ms),
        lease_expired,
        failure: last,
    }
}

/// How long a delivery of a subscriber this process's program lacks waits for a
/// process whose program has it, when one is running: that process takes it
/// when it is due again.
pub const LEAVE_FOR_ANOTHER_MS: u64 = 1_000;

/// What a claim at `now_ms` does with a delivery whose subscriber is not in this
/// process's program: nothing if it is not claimable (or it was handled, which
/// needs no program); else it is left, due again after
/// [`LEAVE_FOR_ANOTHER_MS`] when `elsewhere` (a running process's program has
/// its subscriber), else `orphaned`. Its budget is not read: it is another
/// program's.
pub fn leave_at_claim(record: &Record, now_ms: i64, handled: bool, elsewhere: bool) -> ClaimDecision {
    match decide_at_claim(record, &Budget::default(), now_ms, handled, 0) {
        decided @ (ClaimDecision::Skip | ClaimDecision::Handled) => decided,
        ClaimDecision::Run { lease_expired, .. }
        | ClaimDecision::Hold { lease_expired, .. }
        | ClaimDecision::GiveUp { lease_expired, .. }
        | ClaimDecision::Leave { lease_expired, .. } => ClaimDecision::Leave {
            until_ms: elsewhere.then(|| now_ms.saturating_add(ms_i64(LEAVE_FOR_ANOTHER_MS))),
            lease_expired,
        },
        ClaimDecision::Wait { until_ms } => ClaimDecision::Wait { until_ms },
    }
}

/// The time held of an orphaned delivery taken back at `now_ms` by a process
/// whose program has its subscriber (it is then `pending`, due now): the time it
/// waited since `orphaned_at_ms` is added, so that it costs its `within:` nothing.
pub fn held_when_adopted(held_ms: i64, orphaned_at_ms: i64, now_ms: i64) -> i64 {
    held_ms.saturating_add(now_ms.saturating_sub(orphaned_at_ms).max(0))
}

/// The end of a lease taken at `now_ms` for a run limited to `run_timeout_ms`.
pub fn lease_until_ms(now_ms: i64, run_timeout_ms: u64) -> i64 {
    now_ms.saturating_add(ms_i64(run_timeout_ms)).saturating_add(ms_i64(LEASE_GRACE_MS))
}

/// The start of a claimed delivery's `within:` window. An ordered delivery
/// (`order_by:`) that has never run starts its window at its first claim: the time
/// it waited behind its key's earlier deliveries costs it nothing. Any other
/// keeps the window it has.
pub fn window_start_at_claim(record: &Record, ordered: bool, now_ms: i64) -> i64 {
    if ordered && record.state == DeliveryState::Pending && record.attempts == 0 {
        record.budget_start_ms.max(now_ms)
    } else {
        record.budget_start_ms
    }
}

/// The states in which a delivery holds back the later deliveries of its key
/// (`order_by:`): until it has succeeded, failed for good or been skipped.
pub const BLOCKS_ITS_KEY: [DeliveryState; 5] = [
    DeliveryState::Pending,
    DeliveryState::Running,
    DeliveryState::Held,
    DeliveryState::Parked,
    DeliveryState::Orphaned,
];

/// An operator's skip: a delivery not running and not ended ends `skipped`, so
/// that its key's later deliveries go on. Any other state is left alone (`None`).
pub fn operator_skip(record: &Record) -> Option<Record> {
    match record.state {
        DeliveryState::Pending | DeliveryState::Held | DeliveryState::Parked | DeliveryState::Orphaned => {
            Some(Record { state: DeliveryState::Skipped, due_at_ms: None, lease_until_ms: None, ..record.clone() })
        }
        _ => None,
    }
}

/// An operator's retry at `now_ms`: a `failed`, `parked`, `skipped` or `orphaned` delivery becomes
/// `pending`, due now, with a fresh budget (attempts from zero, `within` counted
/// from now, time held reset). Any other state is left alone (`None`).
pub fn operator_retry(record: &Record, now_ms: i64) -> Option<Record> {
    match record.state {
        DeliveryState::Failed | DeliveryState::Parked | DeliveryState::Skipped | DeliveryState::Orphaned => {
            Some(Record {
                state: DeliveryState::Pending,
                attempts: 0,
                due_at_ms: Some(now_ms),
                lease_until_ms: None,
                budget_start_ms: now_ms,
                held_ms: 0,
                last_failure: None,
            })
        }
        _ => None,
    }
}

/// A schedule's next due time after a run that ended at `now_ms`, given the time it
/// was due: the next tick of `every` after `now`, counted from the due time, so a
/// schedule missed while nothing ran runs once, not once per missed tick.
pub fn schedule_next_due_ms(due_at_ms: i64, every_ms: u64, now_ms: i64) -> i64 {
    let every = ms_i64(every_ms).max(1);
    if now_ms < due_at_ms {
        return due_at_ms;
    }
    let missed = (now_ms - due_at_ms) / every + 1;
    due_at_ms.saturating_add(missed.saturating_mul(every))
}

/// Milliseconds as `i64`, saturating (budgets are bounded far below this).
pub fn ms_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
