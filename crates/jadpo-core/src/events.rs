//! The run's log: one [`RunEvent`] per kind of line (an attempt, a delivery ended
//! at its claim, a schedule's run, an alert, a prune, an event found invalid, a
//! delivery orphaned, deliveries adopted, a store error, an internal fault). The
//! event owns its name ([`RunEvent::name`]), its human line
//! ([`RunEvent::write_text`]) and its JSON line ([`RunEvent::write_json`]: every
//! key always present, in a fixed order, `null` for a missing value), so a sink
//! renders the event itself and no field can go missing on the way.
//!
//! The runtime never writes to the terminal: it hands its events to the
//! [`RunLog`] of the thread's `tracing` dispatcher, when that dispatcher is a
//! [`LogSink`] (the binary that runs the runtime installs one: `jadpoc run`'s
//! text and JSON formats; a test may install one for its thread alone). With none
//! installed, as under `jadpoc test`, an event costs a look at the dispatcher and
//! goes nowhere. The lines of one batch of outcomes go to the sink together
//! ([`log_batch`]), for it to write at once.
//!
//! The time `at` is the runtime's clock (virtual under a test), never the sink's.

use crate::clock::rfc3339;
use crate::codes::RuntimeCode;
use crate::rules::{ClaimDecision, Decision, FailedBecause, Failure, Outcome};
use crate::store::{BreakerAlert, LeftAtClaim, PruneCounts};
use serde::ser::{Serialize, SerializeStruct, Serializer};
use std::fmt;
use std::io::Write;

/// The target of the run's `tracing` spans.
pub const TARGET: &str = "jadpo::run";

/// The name of the span around one delivery attempt's call.
pub const ATTEMPT_SPAN: &str = "delivery.attempt.call";

/// What the alert of an outage says.
pub const CONNECTION_UNAVAILABLE: &str = "connection_unavailable";

/// Why an orphaned delivery was left, as its line says.
pub const ORPHANED_REASON: &str = "no running process's program has this subscriber";

/// One line of the run's log.
#[derive(Clone, Copy)]
pub enum RunEvent<'a> {
    /// An attempt and the decision that followed it (`delivery.attempt`).
    Attempt {
        /// When the attempt ended.
        at_ms: i64,
        /// The delivery.
        delivery: i64,
        /// Its subscriber.
        subscriber: &'a str,
        /// The attempt's number.
        attempt: u32,
        /// How the call ended.
        outcome: &'a Outcome,
        /// What the core decided after it.
        decision: &'a Decision,
        /// How long the attempt took, from its claim.
        duration_ms: i64,
    },
    /// A delivery ended at its claim, never run (`delivery.ended_at_claim`).
    EndedAtClaim {
        /// When it was claimed.
        at_ms: i64,
        /// The delivery.
        delivery: i64,
        /// Its subscriber.
        subscriber: &'a str,
        /// How it ended.
        end: ClaimEnd<'a>,
    },
    /// A schedule's run (`schedule.run`).
    ScheduleRun {
        /// When it ended.
        at_ms: i64,
        /// The schedule.
        schedule: &'a str,
        /// The run's number.
        run: u64,
        /// How its call ended.
        outcome: &'a Outcome,
    },
    /// The alert of an outage (`delivery.alert`): the connection, when the outage
    /// began, and the deliveries it holds.
    Alert {
        /// The connection.
        connection: &'a str,
        /// When its breaker opened.
        since_ms: i64,
        /// Deliveries the outage holds.
        held: u64,
    },
    /// What `run --retain`'s background prune deleted (`retention.pruned`).
    Pruned {
        /// When it pruned.
        at_ms: i64,
        /// What it deleted.
        counts: PruneCounts,
    },
    /// An event written in SQL whose payload does not match the program: kept,
    /// invalid, delivered to no one (`event.invalid`).
    EventInvalid {
        /// When it was expanded.
        at_ms: i64,
        /// The event.
        event_id: i64,
        /// Its name.
        name: &'a str,
        /// The code `jadpoc emit` refuses such a payload with.
        code: &'a str,
        /// Why.
        reason: &'a str,
    },
    /// A claim left a delivery whose subscriber no running process's program has
    /// (`delivery.orphaned`).
    Orphaned {
        /// When it was claimed.
        at_ms: i64,
        /// The delivery.
        delivery: i64,
        /// Its subscriber.
        subscriber: &'a str,
    },
    /// This process took back orphaned deliveries of its subscribers
    /// (`delivery.adopted`).
    Adopted {
        /// When.
        at_ms: i64,
        /// How many.
        deliveries: u64,
    },
    /// A store error a loop met; it pauses and tries again (`runtime.error`).
    Error {
        /// When.
        at_ms: i64,
        /// The error.
        message: &'a dyn fmt::Display,
    },
    /// A task of the run panicked, a defect: what it was and the panic's message
    /// (the run stops; `runtime.internal_fault`).
    InternalFault {
        /// When.
        at_ms: i64,
        /// What panicked: `an attempt`, `the call of delivery 7`, `the store's claim`.
        task: &'a str,
        /// The panic's message.
        message: &'a str,
    },
}

/// How a delivery ended at its claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimEnd<'a> {
    /// A handled record was found: `succeeded` without running.
    Handled,
    /// Given up: `failed` with this failure.
    GaveUp {
        /// The failure recorded.
        failure: &'a Failure,
        /// Why it failed.
        because: FailedBecause,
    },
}

/// What an outcome is called in a line (and in the metrics' labels).
pub fn outcome_word(outcome: &Outcome) -> &'static str {
    if matches!(outcome, Outcome::Succeeded { .. }) { "succeeded" } else { "failed" }
}

/// A failure's parts as a line shows them.
struct FailureParts<'a> {
    kind: &'static str,
    code: &'a str,
    reason: Option<&'a str>,
}

impl<'a> FailureParts<'a> {
    fn of(outcome: &'a Outcome) -> Option<FailureParts<'a>> {
        match outcome {
            Outcome::Succeeded { .. } => None,
            Outcome::Failed(f) => {
                Some(FailureParts { kind: f.kind.as_str(), code: &f.code, reason: f.reason.as_deref() })
            }
        }
    }

    /// ` KIND (CODE)`, then `: REASON` when the driver gave one, as `deliveries
    /// show` writes a failure.
    fn write_text(&self, out: &mut Vec<u8>) {
        let _ = write!(out, " {} ({})", self.kind, self.code);
        if let Some(reason) = self.reason.filter(|r| !r.is_empty()) {
            let _ = write!(out, ": {reason}");
        }
    }
}

impl<'a> RunEvent<'a> {
    /// The line's `event`.
    pub fn name(&self) -> &'static str {
        match self {
            RunEvent::Attempt { .. } => "delivery.attempt",
            RunEvent::EndedAtClaim { .. } => "delivery.ended_at_claim",
            RunEvent::ScheduleRun { .. } => "schedule.run",
            RunEvent::Alert { .. } => "delivery.alert",
            RunEvent::Pruned { .. } => "retention.pruned",
            RunEvent::EventInvalid { .. } => "event.invalid",
            RunEvent::Orphaned { .. } => "delivery.orphaned",
            RunEvent::Adopted { .. } => "delivery.adopted",
            RunEvent::Error { .. } => "runtime.error",
            RunEvent::InternalFault { .. } => RuntimeCode::RuntimeInternalFault.as_str(),
        }
    }

    /// The line of a delivery ended at its claim by `decision` (handled, or
    /// given up); `None` for a decision that ends nothing.
    pub fn ended_at_claim(
        at_ms: i64,
        delivery: i64,
        subscriber: &'a str,
        decision: &'a ClaimDecision,
    ) -> Option<RunEvent<'a>> {
        let end = match decision {
            ClaimDecision::Handled => ClaimEnd::Handled,
            ClaimDecision::GiveUp { failure, because, .. } => ClaimEnd::GaveUp { failure, because: *because },
            _ => return None,
        };
        Some(RunEvent::EndedAtClaim { at_ms, delivery, subscriber, end })
    }

    /// The line of a delivery a claim left: orphaned when no running process's
    /// program has its subscriber; `None` when one has (a rolling deploy leaves
    /// many: not logged).
    pub fn left_at_claim(at_ms: i64, left: &'a LeftAtClaim) -> Option<RunEvent<'a>> {
        match left.until_ms {
            Some(_) => None,
            None => Some(RunEvent::Orphaned { at_ms, delivery: left.id, subscriber: &left.subscriber }),
        }
    }

    /// The line of an outage's alert.
    pub fn alert(alert: &'a BreakerAlert) -> RunEvent<'a> {
        RunEvent::Alert { connection: &alert.connection, since_ms: alert.since_ms, held: alert.held }
    }

    /// The human line (`--log-format text`), unended, at the end of `out`. Alerts,
    /// prunes, invalid events, orphans, adoptions, errors and faults have none:
    /// they stay their JSON line in either format (an operator's tools pick them
    /// out).
    pub fn write_text(&self, out: &mut Vec<u8>) {
        match *self {
            RunEvent::Attempt { at_ms, delivery, subscriber, attempt, outcome, decision, .. } => {
                let word = outcome_word(outcome);
                let _ = write!(out, "{} delivery {delivery} {subscriber} attempt {attempt}: {word}", rfc3339(at_ms));
                if let Some(failure) = FailureParts::of(outcome) {
                    failure.write_text(out);
                }
                let _ = write!(out, " -> {}", decision.state().as_str());
                if let Some(due_ms) = decision.due_at_ms() {
                    let _ = write!(out, ", next at {}", rfc3339(due_ms));
                }
                if let Decision::Failed { because, .. } = decision {
                    let _ = write!(out, " ({})", because.as_str());
                }
            }
            RunEvent::EndedAtClaim { at_ms, delivery, subscriber, end } => {
                let (state, kind, because) = end.parts();
                let kind = kind.map_or("", |(kind, _)| kind);
                let _ = write!(
                    out,
                    "{} delivery {delivery} {subscriber} ended at its claim -> {state} {kind} ({because})",
                    rfc3339(at_ms)
                );
            }
            RunEvent::ScheduleRun { at_ms, schedule, run, outcome } => {
                let word = outcome_word(outcome);
                let _ = write!(out, "{} schedule {schedule} run {run}: {word}", rfc3339(at_ms));
                if let Some(failure) = FailureParts::of(outcome) {
                    failure.write_text(out);
                }
            }
            RunEvent::Alert { .. }
            | RunEvent::Pruned { .. }
            | RunEvent::EventInvalid { .. }
            | RunEvent::Orphaned { .. }
            | RunEvent::Adopted { .. }
            | RunEvent::Error { .. }
            | RunEvent::InternalFault { .. } => self.write_json(out),
        }
    }

    /// The JSON line (`--log-format json`), unended, at the end of `out`: one
    /// object, `event` first and then the event's keys in their fixed order,
    /// `null` for a key without a value.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        // Writing to a `Vec` cannot fail, and every value here is JSON.
        let _ = serde_json::to_writer(out, self);
    }

    /// [`RunEvent::write_text`] as a string.
    pub fn text_line(&self) -> String {
        let mut out = Vec::new();
        self.write_text(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// [`RunEvent::write_json`] as a string.
    pub fn json_line(&self) -> String {
        let mut out = Vec::new();
        self.write_json(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// An event shows as its JSON line.
impl fmt::Debug for RunEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.json_line())
    }
}

impl ClaimEnd<'_> {
    /// The state it ends in, its failure's kind and code, and why.
    fn parts(&self) -> (&'static str, Option<(&'static str, &str)>, &'static str) {
        match self {
            ClaimEnd::Handled => ("succeeded", None, "handled"),
            ClaimEnd::GaveUp { failure, because } => {
                ("failed", Some((failure.kind.as_str(), failure.code.as_str())), because.as_str())
            }
        }
    }
}

/// The JSON line: the keys of each kind, in order.
impl Serialize for RunEvent<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let name = "RunEvent";
        match *self {
            RunEvent::Attempt { at_ms, delivery, subscriber, attempt, outcome, decision, duration_ms } => {
                let failure = FailureParts::of(outcome);
                let because = match decision {
                    Decision::Failed { because, .. } => Some(because.as_str()),
                    _ => None,
                };
                let mut s = serializer.serialize_struct(name, 14)?;
                s.serialize_field("event", self.name())?;
                s.serialize_field("at", &rfc3339(at_ms))?;
                s.serialize_field("delivery", &delivery)?;
                s.serialize_field("subscriber", subscriber)?;
                s.serialize_field("attempt", &attempt)?;
                s.serialize_field("outcome", outcome_word(outcome))?;
                s.serialize_field("kind", &failure.as_ref().map(|f| f.kind))?;
                s.serialize_field("code", &failure.as_ref().map(|f| f.code))?;
                s.serialize_field("http_status", &outcome.http_status())?;
                s.serialize_field("duration_ms", &duration_ms)?;
                s.serialize_field("state", decision.state().as_str())?;
                s.serialize_field("due_at", &decision.due_at_ms().map(rfc3339))?;
                s.serialize_field("because", &because)?;
                s.serialize_field("reason", &failure.as_ref().and_then(|f| f.reason))?;
                s.end()
            }
            RunEvent::EndedAtClaim { at_ms, delivery, subscriber, end } => {
                let (state, failure, because) = end.parts();
                let mut s = serializer.serialize_struct(name, 8)?;
                s.serialize_field("event", self.name())?;
                s.serialize_field("at", &rfc3339(at_ms))?;
                s.serialize_field("delivery", &delivery)?;
                s.serialize_field("subscriber", subscriber)?;
                s.serialize_field("state", state)?;
                s.serialize_field("kind", &failure.map(|(kind, _)| kind))?;
                s.serialize_field("code", &failure.map(|(_, code)| code))?;
                s.serialize_field("because", because)?;
                s.end()
            }
            RunEvent::ScheduleRun { at_ms, schedule, run, outcome } => {
                let failure = FailureParts::of(outcome);
                let mut s = serializer.serialize_struct(name, 8)?;
                s.serialize_field("event", self.name())?;
                s.serialize_field("at", &rfc3339(at_ms))?;
                s.serialize_field("schedule", schedule)?;
                s.serialize_field("run", &run)?;
                s.serialize_field("outcome", outcome_word(outcome))?;
                s.serialize_field("kind", &failure.as_ref().map(|f| f.kind))?;
                s.serialize_field("code", &failure.as_ref().map(|f| f.code))?;
                s.serialize_field("reason", &failure.as_ref().and_then(|f| f.reason))?;
                s.end()
            }
            RunEvent::Alert { connection, since_ms, held } => {
                let mut s = serializer.serialize_struct(name, 5)?;
                s.serialize_field("event", self.name())?;
                s.serialize_field("alert", CONNECTION_UNAVAILABLE)?;
                s.serialize_field("connection", connection)?;
                s.serialize_field("since", &rfc3339(since_ms))?;
                s.serialize_field("held", &held)?;
                s.end()
            }
            RunEvent::Pruned { at_ms, counts } => {
                let mut s = serializer.serialize_struct(name, 6)?;
                s.serialize_field("event", self.name())?;
                s.serialize_field("at", &rfc3339(at_ms))?;
                s.serialize_field("deliveries", &counts.deliveries)?;
                s.serialize_field("attempts", &counts.attempts)?;
                s.serialize_field("handled", &counts.handled)?;
                s.serialize_field("events", &counts.events)?;
                s.end()
            }
            RunEvent::EventInvalid { at_ms, event_id, name: event_name, code, reason } => {
                let mut s = serializer.serialize_struct(name, 6)?;
                s.serialize_field("event", self.name())?;
                s.serialize_field("at", &rfc3339(at_ms))?;
                s.serialize_field("event_id", &event_id)?;
                s.serialize_field("event_name", event_name)?;
                s.serialize_field("code", code)?;
                s.serialize_field("reason", reason)?;
                s.end()
            }
            RunEvent::Orphaned { at_ms, delivery, subscriber } => {
                let mut s = serializer.serialize_struct(name, 5)?;
                s.serialize_field("event", self.name())?;
                s.serialize_field("at", &rfc3339(at_ms))?;
                s.serialize_field("delivery", &delivery)?;
                s.serialize_field("subscriber", subscriber)?;
                s.serialize_field("reason", ORPHANED_REASON)?;
                s.end()
            }
            RunEvent::Adopted { at_ms, deliveries } => {
                let mut s = serializer.serialize_struct(name, 3)?;
                s.serialize_field("event", self.name())?;
                s.serialize_field("at", &rfc3339(at_ms))?;
                s.serialize_field("deliveries", &deliveries)?;
                s.end()
            }
            RunEvent::Error { at_ms, message } => {
                let mut s = serializer.serialize_struct(name, 3)?;
                s.serialize_field("event", self.name())?;
                s.serialize_field("at", &rfc3339(at_ms))?;
                s.serialize_field("message", &message.to_string())?;
                s.end()
            }
            RunEvent::InternalFault { at_ms, task, message } => {
                let mut s = serializer.serialize_struct(name, 4)?;
                s.serialize_field("event", self.name())?;
                s.serialize_field("at", &rfc3339(at_ms))?;
                s.serialize_field("task", task)?;
                s.serialize_field("message", message)?;
                s.end()
            }
        }
    }
}

/// Where the run's lines go: the binary that runs the runtime gives one, in a
/// [`LogSink`].
pub trait RunLog: Send + Sync + 'static {
    /// Write one event's line.
    fn line(&self, event: &RunEvent<'_>);
    /// Write the lines of one batch, in order, at once.
    fn lines(&self, events: &[RunEvent<'_>]);
}

/// A [`RunLog`] as the runtime finds it: installed as a `tracing` subscriber (for
/// the process with `tracing::subscriber::set_global_default`, for a thread with
/// `tracing::subscriber::set_default`). It takes no `tracing` event or span of
/// its own: the runtime hands it its [`RunEvent`]s whole.
pub struct LogSink {
    log: Box<dyn RunLog>,
}

impl LogSink {
    /// The sink writing the run's lines to `log`.
    pub fn new(log: impl RunLog) -> LogSink {
        LogSink { log: Box::new(log) }
    }
}

impl fmt::Debug for LogSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LogSink")
    }
}

impl tracing::Subscriber for LogSink {
    fn register_callsite(&self, _: &'static tracing::Metadata<'static>) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::never()
    }
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        false
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// `write` with the current thread's [`RunLog`], if one is installed.
fn with_log(write: impl FnOnce(&dyn RunLog)) {
    let mut write = Some(write);
    tracing::dispatcher::get_default(|dispatch| {
        if let (Some(sink), Some(write)) = (dispatch.downcast_ref::<LogSink>(), write.take()) {
            write(&*sink.log);
        }
    });
}

/// Whether a [`RunLog`] is installed for this thread.
pub fn is_logging() -> bool {
    tracing::dispatcher::get_default(|dispatch| dispatch.is::<LogSink>())
}

/// Log `event`, if a [`RunLog`] is installed.
pub fn log(event: RunEvent<'_>) {
    with_log(|log| log.line(&event));
}

/// Log the events of one batch together, if a [`RunLog`] is installed (else
/// `events` is not gone through).
pub fn log_batch<'a>(events: impl IntoIterator<Item = RunEvent<'a>>) {
    with_log(|log| {
        let events: Vec<RunEvent<'a>> = events.into_iter().collect();
        if !events.is_empty() {
            log.lines(&events);
        }
    });
}

/// The span around one delivery attempt's call ([`ATTEMPT_SPAN`]): what a
/// driver emits through `tracing` meanwhile (re-sends, say) is recorded within it.
pub fn attempt_span(delivery: i64, subscriber: &str, attempt: u32) -> tracing::Span {
    tracing::info_span!(target: TARGET, ATTEMPT_SPAN, delivery, subscriber, attempt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::CallFailure;
    use jadpo_check::program::FailureKind;
    use std::sync::{Arc, Mutex};

    /// 2023-11-14T22:13:20Z.
    const T0: i64 = 1_700_000_000_000;

    fn unavailable_503() -> Outcome {
        Outcome::Failed(CallFailure {
            http_status: Some(503),
            ..CallFailure::new(FailureKind::Unavailable, "http.503")
        })
    }

    fn refused(reason: &str) -> Outcome {
        Outcome::Failed(CallFailure::new(FailureKind::Unavailable, "transport.refused").with_reason(reason))
    }

    /// Each event's text and JSON lines, exactly.
    fn assert_lines(event: RunEvent<'_>, name: &str, text: &str, json: &str) {
        assert_eq!(event.name(), name);
        assert_eq!(event.text_line(), text, "text of {name}");
        assert_eq!(event.json_line(), json, "JSON of {name}");
        let parsed: serde_json::Value = serde_json::from_str(json).expect("JSON");
        assert_eq!(parsed["event"], name);
    }

    #[test]
    fn an_attempt_that_succeeded() {
        let ok = Outcome::Succeeded { http_status: Some(200) };
        let event = RunEvent::Attempt {
            at_ms: T0,
            delivery: 7,
            subscriber: "send_receipt",
            attempt: 1,
            outcome: &ok,
            decision: &Decision::Succeeded,
            duration_ms: 12,
        };
        assert_lines(
            event,
            "delivery.attempt",
            "2023-11-14T22:13:20Z delivery 7 send_receipt attempt 1: succeeded -> succeeded",
            r#"{"event":"delivery.attempt","at":"2023-11-14T22:13:20Z","delivery":7,"subscriber":"send_receipt","attempt":1,"outcome":"succeeded","kind":null,"code":null,"http_status":200,"duration_ms":12,"state":"succeeded","due_at":null,"because":null,"reason":null}"#,
        );
    }

    #[test]
    fn an_attempt_retried_later() {
        let retry =
            Decision::Retry { due_at_ms: T0 + 20_000, failure: Failure::new("http.503", FailureKind::Unavailable) };
        let outcome = unavailable_503();
        let event = RunEvent::Attempt {
            at_ms: T0,
            delivery: 8,
            subscriber: "send_receipt",
            attempt: 2,
            outcome: &outcome,
            decision: &retry,
            duration_ms: 30,
        };
        assert_lines(
            event,
            "delivery.attempt",
            "2023-11-14T22:13:20Z delivery 8 send_receipt attempt 2: failed unavailable (http.503) -> pending, \
             next at 2023-11-14T22:13:40Z",
            r#"{"event":"delivery.attempt","at":"2023-11-14T22:13:20Z","delivery":8,"subscriber":"send_receipt","attempt":2,"outcome":"failed","kind":"unavailable","code":"http.503","http_status":503,"duration_ms":30,"state":"pending","due_at":"2023-11-14T22:13:40Z","because":null,"reason":null}"#,
        );
    }

    #[test]
    fn an_attempt_that_failed_for_good_with_a_reason() {
        let failed = Decision::Failed {
            failure: Failure::new("transport.refused", FailureKind::Unavailable),
            because: FailedBecause::PastWindow,
        };
        let outcome = refused("connection refused");
        let event = RunEvent::Attempt {
            at_ms: T0,
            delivery: 9,
            subscriber: "send_receipt",
            attempt: 3,
            outcome: &outcome,
            decision: &failed,
            duration_ms: 4,
        };
        assert_lines(
            event,
            "delivery.attempt",
            "2023-11-14T22:13:20Z delivery 9 send_receipt attempt 3: failed unavailable (transport.refused): \
             connection refused -> failed (past_window)",
            r#"{"event":"delivery.attempt","at":"2023-11-14T22:13:20Z","delivery":9,"subscriber":"send_receipt","attempt":3,"outcome":"failed","kind":"unavailable","code":"transport.refused","http_status":null,"duration_ms":4,"state":"failed","due_at":null,"because":"past_window","reason":"connection refused"}"#,
        );
    }

    #[test]
    fn an_empty_reason_is_no_reason_in_the_text_line_and_kept_in_the_json_line() {
        let parked = Decision::Parked { failure: Failure::new("transport.refused", FailureKind::Unavailable) };
        let outcome = refused("");
        let event = RunEvent::Attempt {
            at_ms: T0,
            delivery: 9,
            subscriber: "s",
            attempt: 1,
            outcome: &outcome,
            decision: &parked,
            duration_ms: 0,
        };
        assert_eq!(
            event.text_line(),
            "2023-11-14T22:13:20Z delivery 9 s attempt 1: failed unavailable (transport.refused) -> parked"
        );
        assert_eq!(
            event.json_line(),
            r#"{"event":"delivery.attempt","at":"2023-11-14T22:13:20Z","delivery":9,"subscriber":"s","attempt":1,"outcome":"failed","kind":"unavailable","code":"transport.refused","http_status":null,"duration_ms":0,"state":"parked","due_at":null,"because":null,"reason":""}"#
        );
    }

    #[test]
    fn a_json_line_keeps_any_text_as_its_string() {
        let odd = "a \"quoted\" word,\n\ta tab, \\, \u{1} and é";
        let outcome = refused(odd);
        let decision = Decision::Failed {
            failure: Failure::new("transport.refused", FailureKind::Unavailable),
            because: FailedBecause::PastWindow,
        };
        let event = RunEvent::Attempt {
            at_ms: T0,
            delivery: 9,
            subscriber: "send_receipt",
            attempt: 3,
            outcome: &outcome,
            decision: &decision,
            duration_ms: 4,
        };
        let line = event.json_line();
        assert!(!line.contains('\n'), "{line}");
        let parsed: serde_json::Value = serde_json::from_str(&line).expect("JSON");
        assert_eq!(parsed["reason"], odd);
    }

    #[test]
    fn a_delivery_handled_at_its_claim() {
        let event = RunEvent::ended_at_claim(T0, 10, "audit", &ClaimDecision::Handled).expect("an end");
        assert_lines(
            event,
            "delivery.ended_at_claim",
            "2023-11-14T22:13:20Z delivery 10 audit ended at its claim -> succeeded  (handled)",
            r#"{"event":"delivery.ended_at_claim","at":"2023-11-14T22:13:20Z","delivery":10,"subscriber":"audit","state":"succeeded","kind":null,"code":null,"because":"handled"}"#,
        );
    }

    #[test]
    fn a_delivery_given_up_at_its_claim() {
        let give_up = ClaimDecision::GiveUp {
            failure: Failure::deadline_exceeded(),
            because: FailedBecause::PastWindow,
            lease_expired: false,
        };
        let event = RunEvent::ended_at_claim(T0, 11, "audit", &give_up).expect("an end");
        assert_lines(
            event,
            "delivery.ended_at_claim",
            "2023-11-14T22:13:20Z delivery 11 audit ended at its claim -> failed deadline_exceeded (past_window)",
            r#"{"event":"delivery.ended_at_claim","at":"2023-11-14T22:13:20Z","delivery":11,"subscriber":"audit","state":"failed","kind":"deadline_exceeded","code":"deadline_exceeded","because":"past_window"}"#,
        );
    }

    #[test]
    fn a_claim_that_runs_or_skips_a_delivery_ends_nothing() {
        let run = ClaimDecision::Run { attempt: 1, lease_until_ms: T0, lease_expired: false, failure: None };
        assert!(RunEvent::ended_at_claim(T0, 12, "audit", &run).is_none());
        assert!(RunEvent::ended_at_claim(T0, 12, "audit", &ClaimDecision::Skip).is_none());
    }

    #[test]
    fn a_schedule_run_that_succeeded_and_one_that_failed() {
        let ok = Outcome::ok();
        assert_lines(
            RunEvent::ScheduleRun { at_ms: T0, schedule: "nightly", run: 3, outcome: &ok },
            "schedule.run",
            "2023-11-14T22:13:20Z schedule nightly run 3: succeeded",
            r#"{"event":"schedule.run","at":"2023-11-14T22:13:20Z","schedule":"nightly","run":3,"outcome":"succeeded","kind":null,"code":null,"reason":null}"#,
        );
        let failed = Outcome::fail(FailureKind::Unavailable, "fake.unavailable");
        assert_lines(
            RunEvent::ScheduleRun { at_ms: T0, schedule: "nightly", run: 4, outcome: &failed },
            "schedule.run",
            "2023-11-14T22:13:20Z schedule nightly run 4: failed unavailable (fake.unavailable)",
            r#"{"event":"schedule.run","at":"2023-11-14T22:13:20Z","schedule":"nightly","run":4,"outcome":"failed","kind":"unavailable","code":"fake.unavailable","reason":null}"#,
        );
        let with_reason = refused("connection refused");
        assert_eq!(
            RunEvent::ScheduleRun { at_ms: T0, schedule: "nightly", run: 5, outcome: &with_reason }.text_line(),
            "2023-11-14T22:13:20Z schedule nightly run 5: failed unavailable (transport.refused): connection refused"
        );
    }

    /// The kinds that stay JSON in the text format: the same line in both.
    fn assert_json_in_both(event: RunEvent<'_>, name: &str, json: &str) {
        assert_lines(event, name, json, json);
    }

    #[test]
    fn an_alert() {
        let alert = BreakerAlert { connection: "ledger".into(), since_ms: T0, held: 3 };
        assert_json_in_both(
            RunEvent::alert(&alert),
            "delivery.alert",
            r#"{"event":"delivery.alert","alert":"connection_unavailable","connection":"ledger","since":"2023-11-14T22:13:20Z","held":3}"#,
        );
    }

    #[test]
    fn a_prune() {
        let counts = PruneCounts { deliveries: 5, attempts: 9, handled: 2, events: 4 };
        assert_json_in_both(
            RunEvent::Pruned { at_ms: T0, counts },
            "retention.pruned",
            r#"{"event":"retention.pruned","at":"2023-11-14T22:13:20Z","deliveries":5,"attempts":9,"handled":2,"events":4}"#,
        );
    }

    #[test]
    fn an_event_found_invalid() {
        assert_json_in_both(
            RunEvent::EventInvalid {
                at_ms: T0,
                event_id: 42,
                name: "Paid",
                code: "ingest.missing_field",
                reason: "field `id` is missing",
            },
            "event.invalid",
            r#"{"event":"event.invalid","at":"2023-11-14T22:13:20Z","event_id":42,"event_name":"Paid","code":"ingest.missing_field","reason":"field `id` is missing"}"#,
        );
    }

    #[test]
    fn a_delivery_orphaned_and_one_left_for_another_process() {
        let orphaned = LeftAtClaim { id: 13, subscriber: "old".into(), until_ms: None };
        assert_json_in_both(
            RunEvent::left_at_claim(T0, &orphaned).expect("orphaned"),
            "delivery.orphaned",
            r#"{"event":"delivery.orphaned","at":"2023-11-14T22:13:20Z","delivery":13,"subscriber":"old","reason":"no running process's program has this subscriber"}"#,
        );
        let left = LeftAtClaim { id: 14, subscriber: "old".into(), until_ms: Some(T0 + 1_000) };
        assert!(RunEvent::left_at_claim(T0, &left).is_none());
    }

    #[test]
    fn deliveries_adopted() {
        assert_json_in_both(
            RunEvent::Adopted { at_ms: T0, deliveries: 6 },
            "delivery.adopted",
            r#"{"event":"delivery.adopted","at":"2023-11-14T22:13:20Z","deliveries":6}"#,
        );
    }

    #[test]
    fn a_store_error() {
        assert_json_in_both(
            RunEvent::Error { at_ms: T0, message: &"the store is locked" },
            "runtime.error",
            r#"{"event":"runtime.error","at":"2023-11-14T22:13:20Z","message":"the store is locked"}"#,
        );
    }

    #[test]
    fn an_internal_fault() {
        assert_json_in_both(
            RunEvent::InternalFault { at_ms: T0, task: "a claim loop", message: "boom" },
            "runtime.internal_fault",
            r#"{"event":"runtime.internal_fault","at":"2023-11-14T22:13:20Z","task":"a claim loop","message":"boom"}"#,
        );
    }

    /// A log keeping each line's text, and each batch as one entry.
    #[derive(Clone, Default)]
    struct Kept(Arc<Mutex<Vec<Vec<String>>>>);

    impl RunLog for Kept {
        fn line(&self, event: &RunEvent<'_>) {
            self.lines(std::slice::from_ref(event));
        }
        fn lines(&self, events: &[RunEvent<'_>]) {
            let lines = events.iter().map(RunEvent::text_line).collect();
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(lines);
        }
    }

    #[test]
    fn events_go_to_the_installed_log_and_nowhere_without_one() {
        let error = RunEvent::Error { at_ms: T0, message: &"lost" };
        assert!(!is_logging());
        // Without a log, a batch is not even gone through.
        log(error);
        log_batch(std::iter::from_fn(|| -> Option<RunEvent<'static>> { panic!("a batch read without a log") }));
        let kept = Kept::default();
        tracing::subscriber::with_default(LogSink::new(kept.clone()), || {
            assert!(is_logging());
            log(error);
            log_batch([error, RunEvent::Adopted { at_ms: T0, deliveries: 1 }]);
            // An empty batch writes nothing.
            log_batch([]);
            // Other `tracing` events and spans are not the run's log.
            tracing::info!(target: TARGET, "not a line");
            let _span = attempt_span(1, "s", 1).entered();
        });
        let error_line = r#"{"event":"runtime.error","at":"2023-11-14T22:13:20Z","message":"lost"}"#;
        let adopted_line = r#"{"event":"delivery.adopted","at":"2023-11-14T22:13:20Z","deliveries":1}"#;
        assert_eq!(
            *kept.0.lock().unwrap_or_else(|e| e.into_inner()),
            vec![vec![error_line.to_string()], vec![error_line.to_string(), adopted_line.to_string()]]
        );
    }
}
