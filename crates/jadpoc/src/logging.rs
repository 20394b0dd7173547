//! The sink of the run's log: the runtime hands its [`RunEvent`]s to the
//! [`RunLog`] installed for the process; this module's writes each to stderr,
//! one line each, as human text or JSON (runtime.md's formats), as the event
//! itself renders it.
//!
//! stdout stays free for a command's own output. A line is written whole under one
//! lock, so lines from several workers never interleave; a failed write is dropped
//! (logs never stop a run). The lines of a batch of outcomes come together and
//! are written together: one write for the batch, not one a line.

use jadpo_core::events::{LogSink, RunEvent, RunLog};
use std::io::Write;
use std::sync::Mutex;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// `2026-01-02T03:04:05Z delivery 7 send_receipt attempt 1: succeeded -> succeeded`.
    #[default]
    Text,
    /// One JSON object a line, its keys in a fixed order, `null` for a key without
    /// a value.
    Json,
}

/// Print the run's log to stderr in `format` from now on (once per process; a
/// second call changes nothing).
pub fn install(format: LogFormat) {
    let _ = tracing::subscriber::set_global_default(LogSink::new(Lines::new(format, std::io::stderr())));
}

/// The run's lines in one format, written to `out`.
pub struct Lines<W> {
    format: LogFormat,
    out: Mutex<W>,
}

impl<W: Write> Lines<W> {
    /// A sink writing lines in `format` to `out`.
    pub fn new(format: LogFormat, out: W) -> Lines<W> {
        Lines { format, out: Mutex::new(out) }
    }

    /// `event`'s line in this log's format, ended, at the end of `out`.
    fn put(&self, event: &RunEvent<'_>, out: &mut Vec<u8>) {
        match self.format {
            LogFormat::Text => event.write_text(out),
            LogFormat::Json => event.write_json(out),
        }
        out.push(b'\n');
    }

    /// Write `lines` whole, under the lock.
    fn write(&self, lines: &[u8]) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write_all(lines);
        let _ = out.flush();
    }
}

impl<W: Write + Send + 'static> RunLog for Lines<W> {
    fn line(&self, event: &RunEvent<'_>) {
        let mut out = Vec::new();
        self.put(event, &mut out);
        self.write(&out);
    }

    fn lines(&self, events: &[RunEvent<'_>]) {
        let mut out = Vec::new();
        for event in events {
            self.put(event, &mut out);
        }
        self.write(&out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jadpo_check::program::FailureKind;
    use jadpo_core::events;
    use jadpo_core::rules::{CallFailure, ClaimDecision, Decision, FailedBecause, Failure, Outcome};
    use jadpo_core::store::BreakerAlert;
    use std::sync::Arc;

    /// 2023-11-14T22:13:20Z.
    const T0: i64 = 1_700_000_000_000;

    /// What was written, one entry a write.
    #[derive(Clone, Default)]
    struct Writes(Arc<Mutex<Vec<String>>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(String::from_utf8_lossy(buf).into_owned());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Writes {
        fn all(&self) -> Vec<String> {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
        }
    }

    /// The lines `emit` makes in `format`.
    fn lines(format: LogFormat, emit: impl FnOnce()) -> Vec<String> {
        let out = Writes::default();
        tracing::subscriber::with_default(LogSink::new(Lines::new(format, out.clone())), emit);
        out.all().concat().lines().map(str::to_string).collect()
    }

    fn attempt(delivery: i64, attempt: u32, outcome: &Outcome, decision: &Decision, duration_ms: i64) {
        events::log(RunEvent::Attempt {
            at_ms: T0,
            delivery,
            subscriber: "send_receipt",
            attempt,
            outcome,
            decision,
            duration_ms,
        });
    }

    /// One of each line of `jadpoc run`'s log format docs, as a run would log them.
    fn a_run() {
        attempt(7, 1, &Outcome::ok(), &Decision::Succeeded, 12);
        let failure = Failure::new("http.503", FailureKind::Unavailable);
        let retry = Decision::Retry { due_at_ms: T0 + 20_000, failure: failure.clone() };
        let unavailable = Outcome::Failed(CallFailure {
            http_status: Some(503),
            ..CallFailure::new(FailureKind::Unavailable, "http.503")
        });
        attempt(8, 2, &unavailable, &retry, 30);
        let failed = Decision::Failed { failure, because: FailedBecause::PastWindow };
        let with_reason = Outcome::Failed(
            CallFailure::new(FailureKind::Unavailable, "transport.refused").with_reason("connection refused"),
        );
        attempt(9, 3, &with_reason, &failed, 4);
        let give_up = ClaimDecision::GiveUp {
            failure: Failure::deadline_exceeded(),
            because: FailedBecause::PastWindow,
            lease_expired: false,
        };
        for (delivery, decision) in [(10, &ClaimDecision::Handled), (11, &give_up)] {
            events::log(RunEvent::ended_at_claim(T0, delivery, "audit", decision).expect("an end"));
        }
        let ok = Outcome::ok();
        events::log(RunEvent::ScheduleRun { at_ms: T0, schedule: "nightly", run: 3, outcome: &ok });
        let unavailable = Outcome::fail(FailureKind::Unavailable, "fake.unavailable");
        events::log(RunEvent::ScheduleRun { at_ms: T0, schedule: "nightly", run: 4, outcome: &unavailable });
        events::log(RunEvent::alert(&BreakerAlert { connection: "ledger".into(), since_ms: T0, held: 3 }));
        events::log(RunEvent::Error { at_ms: T0, message: &"the store is locked" });
        events::log(RunEvent::InternalFault { at_ms: T0, task: "a claim loop", message: "boom" });
        // Another crate's `tracing` events are not the run's log.
        tracing::info!(target: "hyper", "connection closed");
    }

    #[test]
    fn the_default_text_format_is_one_human_line_per_event() {
        assert_eq!(LogFormat::default(), LogFormat::Text);
        assert_eq!(
            lines(LogFormat::Text, a_run),
            [
                "2023-11-14T22:13:20Z delivery 7 send_receipt attempt 1: succeeded -> succeeded",
                "2023-11-14T22:13:20Z delivery 8 send_receipt attempt 2: failed unavailable (http.503) -> pending, \
                 next at 2023-11-14T22:13:40Z",
                "2023-11-14T22:13:20Z delivery 9 send_receipt attempt 3: failed unavailable (transport.refused): \
                 connection refused -> failed (past_window)",
                "2023-11-14T22:13:20Z delivery 10 audit ended at its claim -> succeeded  (handled)",
                "2023-11-14T22:13:20Z delivery 11 audit ended at its claim -> failed deadline_exceeded (past_window)",
                "2023-11-14T22:13:20Z schedule nightly run 3: succeeded",
                "2023-11-14T22:13:20Z schedule nightly run 4: failed unavailable (fake.unavailable)",
                r#"{"event":"delivery.alert","alert":"connection_unavailable","connection":"ledger","since":"2023-11-14T22:13:20Z","held":3}"#,
                r#"{"event":"runtime.error","at":"2023-11-14T22:13:20Z","message":"the store is locked"}"#,
                r#"{"event":"runtime.internal_fault","at":"2023-11-14T22:13:20Z","task":"a claim loop","message":"boom"}"#,
            ]
        );
    }

    #[test]
    fn a_json_line_keeps_any_text_as_its_string() {
        let odd = "a \"quoted\" word,\n\ta tab, \\, \u{1} and é";
        let failed = Outcome::Failed(CallFailure::new(FailureKind::Unavailable, "transport.refused").with_reason(odd));
        let decision = Decision::Failed {
            failure: Failure::new("transport.refused", FailureKind::Unavailable),
            because: FailedBecause::PastWindow,
        };
        let lines = lines(LogFormat::Json, || attempt(9, 3, &failed, &decision, 4));
        assert_eq!(lines.len(), 1, "one line: {lines:?}");
        let line: serde_json::Value = serde_json::from_str(&lines[0]).expect("JSON");
        assert_eq!(line["reason"], odd);
        assert_eq!(line["delivery"], 9);
        assert_eq!(line["http_status"], serde_json::Value::Null);
    }

    #[test]
    fn the_lines_of_a_batch_are_written_at_once_in_the_order_logged() {
        let out = Writes::default();
        tracing::subscriber::with_default(LogSink::new(Lines::new(LogFormat::Text, out.clone())), || {
            events::log(RunEvent::Error { at_ms: T0, message: &"before" });
            let ok = Outcome::ok();
            let line = |delivery, duration_ms| RunEvent::Attempt {
                at_ms: T0,
                delivery,
                subscriber: "send_receipt",
                attempt: 1,
                outcome: &ok,
                decision: &Decision::Succeeded,
                duration_ms,
            };
            events::log_batch([line(7, 12), line(8, 3)]);
            events::log(RunEvent::Error { at_ms: T0, message: &"after" });
        });
        assert_eq!(
            out.all(),
            [
                "{\"event\":\"runtime.error\",\"at\":\"2023-11-14T22:13:20Z\",\"message\":\"before\"}\n",
                "2023-11-14T22:13:20Z delivery 7 send_receipt attempt 1: succeeded -> succeeded\n\
                 2023-11-14T22:13:20Z delivery 8 send_receipt attempt 1: succeeded -> succeeded\n",
                "{\"event\":\"runtime.error\",\"at\":\"2023-11-14T22:13:20Z\",\"message\":\"after\"}\n",
            ]
        );
    }

    #[test]
    fn the_json_format_has_every_key_in_order_with_null_for_none() {
        assert_eq!(
            lines(LogFormat::Json, a_run),
            [
                r#"{"event":"delivery.attempt","at":"2023-11-14T22:13:20Z","delivery":7,"subscriber":"send_receipt","attempt":1,"outcome":"succeeded","kind":null,"code":null,"http_status":null,"duration_ms":12,"state":"succeeded","due_at":null,"because":null,"reason":null}"#,
                r#"{"event":"delivery.attempt","at":"2023-11-14T22:13:20Z","delivery":8,"subscriber":"send_receipt","attempt":2,"outcome":"failed","kind":"unavailable","code":"http.503","http_status":503,"duration_ms":30,"state":"pending","due_at":"2023-11-14T22:13:40Z","because":null,"reason":null}"#,
                r#"{"event":"delivery.attempt","at":"2023-11-14T22:13:20Z","delivery":9,"subscriber":"send_receipt","attempt":3,"outcome":"failed","kind":"unavailable","code":"transport.refused","http_status":null,"duration_ms":4,"state":"failed","due_at":null,"because":"past_window","reason":"connection refused"}"#,
                r#"{"event":"delivery.ended_at_claim","at":"2023-11-14T22:13:20Z","delivery":10,"subscriber":"audit","state":"succeeded","kind":null,"code":null,"because":"handled"}"#,
                r#"{"event":"delivery.ended_at_claim","at":"2023-11-14T22:13:20Z","delivery":11,"subscriber":"audit","state":"failed","kind":"deadline_exceeded","code":"deadline_exceeded","because":"past_window"}"#,
                r#"{"event":"schedule.run","at":"2023-11-14T22:13:20Z","schedule":"nightly","run":3,"outcome":"succeeded","kind":null,"code":null,"reason":null}"#,
                r#"{"event":"schedule.run","at":"2023-11-14T22:13:20Z","schedule":"nightly","run":4,"outcome":"failed","kind":"unavailable","code":"fake.unavailable","reason":null}"#,
                r#"{"event":"delivery.alert","alert":"connection_unavailable","connection":"ledger","since":"2023-11-14T22:13:20Z","held":3}"#,
                r#"{"event":"runtime.error","at":"2023-11-14T22:13:20Z","message":"the store is locked"}"#,
                r#"{"event":"runtime.internal_fault","at":"2023-11-14T22:13:20Z","task":"a claim loop","message":"boom"}"#,
            ]
        );
    }
}
