//! The run's log events, typed: one per attempt outcome, delivery ended at its
//! claim, schedule run, alert, store error and internal fault, emitted through
//! `tracing`.
//!
//! The runtime never writes to the terminal: it emits these events (under the
//! target [`TARGET`], each named as its line's `event`), and the binary that runs it
//! installs the sink that prints them (`jadpoc run`'s text and JSON formats). With
//! no sink installed, as under `jadpoc test`, they cost a callsite check and go
//! nowhere.
//!
//! Each event carries every field of its line, in the line's order; a field
//! without a value (an `Option` that is `None`) is left unrecorded, and a sink
//! shows it as `null`. The time `at` is the runtime's clock (virtual under a test),
//! never the sink's.

use crate::clock::rfc3339;
use crate::codes::RuntimeCode;
use crate::rules::{ClaimDecision, Decision, Outcome};
use crate::store::{BreakerAlert, LeftAtClaim};

/// The target of every event of the run's log.
pub const TARGET: &str = "jadpo::run";

/// The name of an attempt's event (its line's `event`).
pub const ATTEMPT: &str = "delivery.attempt";
/// The name of the event of a delivery ended at its claim.
pub const ENDED_AT_CLAIM: &str = "delivery.ended_at_claim";
/// The name of a schedule run's event.
pub const SCHEDULE_RUN: &str = "schedule.run";
/// The name of an outage's alert.
pub const ALERT: &str = "delivery.alert";
/// The name of the event of a background prune that deleted something.
pub const PRUNED: &str = "retention.pruned";
/// The name of the event of an event written in SQL found invalid.
pub const EVENT_INVALID: &str = "event.invalid";
/// [`left_at_claim`]'s event name (a delivery orphaned).
pub const ORPHANED: &str = "delivery.orphaned";
/// [`adopted`]'s event name.
pub const ADOPTED: &str = "delivery.adopted";
/// The name of a store error's event.
pub const ERROR: &str = "runtime.error";
/// The name of the event of a task that panicked: the code it is.
pub const INTERNAL_FAULT: &str = RuntimeCode::RuntimeInternalFault.as_str();
/// The name of the span around one delivery attempt's call.
pub const ATTEMPT_SPAN: &str = "delivery.attempt.call";
/// The name of the span around the lines of a batch of outcomes: a sink may write
/// them at once, when the span is left.
pub const LINES_SPAN: &str = "run.lines";

/// What an outcome is called in a line.
pub fn outcome_word(outcome: &Outcome) -> &'static str {
    if matches!(outcome, Outcome::Succeeded { .. }) { "succeeded" } else { "failed" }
}

/// An attempt and the decision that followed it.
pub fn attempt(
    at_ms: i64,
    delivery: i64,
    subscriber: &str,
    attempt: u32,
    outcome: &Outcome,
    decision: &Decision,
    duration_ms: i64,
) {
    let failure = outcome.failure();
    let because = match decision {
        Decision::Failed { because, .. } => Some(because.as_str()),
        _ => None,
    };
    tracing::info!(
        name: ATTEMPT,
        target: TARGET,
        at = rfc3339(at_ms).as_str(),
        delivery,
        subscriber,
        attempt,
        outcome = outcome_word(outcome),
        kind = failure.as_ref().map(|f| f.kind.as_str()),
        code = failure.as_ref().map(|f| f.code.as_str()),
        http_status = outcome.http_status(),
        duration_ms,
        state = decision.state().as_str(),
        due_at = decision.due_at_ms().map(rfc3339).as_deref(),
        because,
        reason = failure.as_ref().and_then(|f| f.reason.as_deref()),
    );
}

/// A delivery ended at its claim (handled, or given up); other decisions emit
/// nothing.
pub fn ended_at_claim(at_ms: i64, delivery: i64, subscriber: &str, decision: &ClaimDecision) {
    let (state, kind, code, because) = match decision {
        ClaimDecision::Handled => ("succeeded", None, None, Some("handled")),
        ClaimDecision::GiveUp { failure, because, .. } => {
            ("failed", Some(failure.kind.as_str()), Some(failure.code.as_str()), Some(because.as_str()))
        }
        _ => return,
    };
    tracing::info!(
        name: ENDED_AT_CLAIM,
        target: TARGET,
        at = rfc3339(at_ms).as_str(),
        delivery,
        subscriber,
        state,
        kind,
        code,
        because,
    );
}

/// A schedule's run.
pub fn schedule_run(at_ms: i64, schedule: &str, run: u64, outcome: &Outcome) {
    let failure = outcome.failure();
    tracing::info!(
        name: SCHEDULE_RUN,
        target: TARGET,
        at = rfc3339(at_ms).as_str(),
        schedule,
        run,
        outcome = outcome_word(outcome),
        kind = failure.as_ref().map(|f| f.kind.as_str()),
        code = failure.as_ref().map(|f| f.code.as_str()),
        reason = failure.as_ref().and_then(|f| f.reason.as_deref()),
    );
}

/// The alert of an outage: `connection_unavailable`, with the connection, when the
/// outage began and the deliveries it holds.
pub fn alert(alert: &BreakerAlert) {
    tracing::warn!(
        name: ALERT,
        target: TARGET,
        alert = "connection_unavailable",
        connection = alert.connection.as_str(),
        since = rfc3339(alert.since_ms).as_str(),
        held = alert.held,
    );
}

/// What `run --retain`'s background prune deleted.
pub fn pruned(at_ms: i64, counts: &crate::store::PruneCounts) {
    tracing::info!(
        name: PRUNED,
        target: TARGET,
        at = rfc3339(at_ms).as_str(),
        deliveries = counts.deliveries,
        attempts = counts.attempts,
        handled = counts.handled,
        events = counts.events,
    );
}

/// An event written in SQL whose payload does not match the program: kept,
/// invalid, delivered to no one.
pub fn event_invalid(at_ms: i64, event_id: i64, name: &str, code: &str, reason: &str) {
    tracing::warn!(
        name: EVENT_INVALID,
        target: TARGET,
        at = rfc3339(at_ms).as_str(),
        event_id,
        event_name = name,
        code,
        reason,
    );
}

/// A claim left a delivery whose subscriber this process's program lacks: for
/// a process whose program has it (not logged: a rolling deploy leaves many), or
/// orphaned, when no running process's program has it (a warning, kept JSON in
/// either format as alerts are).
pub fn left_at_claim(at_ms: i64, left: &LeftAtClaim) {
    if left.until_ms.is_some() {
        return;
    }
    tracing::warn!(
        name: ORPHANED,
        target: TARGET,
        at = rfc3339(at_ms).as_str(),
        delivery = left.id,
        subscriber = left.subscriber.as_str(),
        reason = "no running process's program has this subscriber",
    );
}

/// This process took back `count` orphaned deliveries of its subscribers.
pub fn adopted(at_ms: i64, count: usize) {
    tracing::info!(name: ADOPTED, target: TARGET, at = rfc3339(at_ms).as_str(), deliveries = count as u64);
}

/// A store error a loop met (it pauses and tries again).
pub fn error(at_ms: i64, e: &dyn std::fmt::Display) {
    tracing::error!(name: ERROR, target: TARGET, at = rfc3339(at_ms).as_str(), message = e.to_string().as_str());
}

/// A task of the run panicked, a defect: what it was and the panic's message (the
/// run stops).
pub fn internal_fault(at_ms: i64, task: &str, message: &str) {
    tracing::error!(name: INTERNAL_FAULT, target: TARGET, at = rfc3339(at_ms).as_str(), task, message);
}

/// The span around the lines of one batch of outcomes, logged one after the
/// other on one thread ([`LINES_SPAN`]).
pub fn lines_span() -> tracing::Span {
    tracing::info_span!(target: TARGET, LINES_SPAN)
}

/// The span around one delivery attempt's call: what a driver emits meanwhile
/// (re-sends, say) is recorded within it.
pub fn attempt_span(delivery: i64, subscriber: &str, attempt: u32) -> tracing::Span {
    tracing::info_span!(target: TARGET, ATTEMPT_SPAN, delivery, subscriber, attempt)
}
