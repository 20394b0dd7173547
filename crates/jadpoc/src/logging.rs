//! The sink of the run's log: the runtime emits typed `tracing` events (target
//! [`jadpo_core::events::TARGET`]); this module prints them to stderr, one line
//! each, as human text or JSON (runtime.md's formats), and drops every other event.
//!
//! stdout stays free for a command's own output. A line is written whole under one
//! lock, so lines from several workers never interleave; a failed write is dropped
//! (logs never stop a run). The lines of a batch of outcomes (logged inside
//! [`events::LINES_SPAN`]) are kept on their thread and written together when
//! the span is left: one write for the batch, not one a line. Other spans are of
//! no interest here, and cost nothing.

use jadpo_core::events::{self, TARGET};
use std::cell::RefCell;
use std::io::Write;
use std::sync::Mutex;
use tracing::field::{Field, Visit};
use tracing::span::Id;
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::Registry;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

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
    let subscriber = Registry::default().with(RunLog::new(format, std::io::stderr()));
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// The layer that turns the runtime's events into lines on `out`.
pub struct RunLog<W> {
    format: LogFormat,
    out: Mutex<W>,
}

impl<W: Write> RunLog<W> {
    /// A sink writing lines in `format` to `out`.
    pub fn new(format: LogFormat, out: W) -> RunLog<W> {
        RunLog { format, out: Mutex::new(out) }
    }
}

/// The runtime's events, and its span of batched lines.
fn ours(metadata: &Metadata<'_>) -> bool {
    metadata.target() == TARGET && (metadata.is_event() || metadata.name() == events::LINES_SPAN)
}

thread_local! {
    /// The lines kept while this thread is inside [`events::LINES_SPAN`]: how
    /// deep, and the lines.
    static KEPT: RefCell<(usize, Vec<u8>)> = const { RefCell::new((0, Vec::new())) };
    /// The line being made, its room kept from one event to the next.
    static LINE: RefCell<Line> = const { RefCell::new(Line { keys: Vec::new(), text: String::new() }) };
}

impl<S: Subscriber + for<'a> LookupSpan<'a>, W: Write + Send + 'static> Layer<S> for RunLog<W> {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if ours(metadata) { Interest::always() } else { Interest::never() }
    }

    fn enabled(&self, metadata: &Metadata<'_>, _: Context<'_, S>) -> bool {
        ours(metadata)
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let metadata = event.metadata();
        if !ours(metadata) {
            return;
        }
        LINE.with(|kept| {
            // An event logged while one is being made (by a value's `Debug`) makes
            // its line in room of its own.
            let mut fresh = Line { keys: Vec::new(), text: String::new() };
            let mut borrowed = kept.try_borrow_mut();
            let line = match borrowed.as_deref_mut() {
                Ok(line) => line,
                Err(_) => &mut fresh,
            };
            // Every declared field is a key, in the order declared; one the event
            // left unrecorded (no value) stays `null`.
            line.keys.clear();
            line.text.clear();
            line.set("event", metadata.name());
            line.keys.extend(metadata.fields().iter().map(|f| (f.name(), Val::Null)));
            event.record(line);
            let written = KEPT.with_borrow_mut(|(depth, kept)| {
                let keep = *depth > 0;
                if keep {
                    self.line(line, kept);
                }
                keep
            });
            if !written {
                let mut out = Vec::new();
                self.line(line, &mut out);
                self.write(&out);
            }
        });
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if is_lines_span(id, &ctx) {
            KEPT.with_borrow_mut(|(depth, _)| *depth += 1);
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if !is_lines_span(id, &ctx) {
            return;
        }
        let lines = KEPT.with_borrow_mut(|(depth, kept)| {
            *depth = depth.saturating_sub(1);
            if *depth == 0 { std::mem::take(kept) } else { Vec::new() }
        });
        if !lines.is_empty() {
            self.write(&lines);
        }
    }
}

/// Whether the span `id` is [`events::LINES_SPAN`].
fn is_lines_span<S: Subscriber + for<'a> LookupSpan<'a>>(id: &Id, ctx: &Context<'_, S>) -> bool {
    ctx.metadata(id).is_some_and(|m| m.name() == events::LINES_SPAN)
}

impl<W: Write> RunLog<W> {
    /// `line` in this log's format, ended, at the end of `out`.
    fn line(&self, line: &Line, out: &mut Vec<u8>) {
        match self.format {
            LogFormat::Json => line.json(out),
            LogFormat::Text => match text(line) {
                Some(text) => out.extend_from_slice(text.as_bytes()),
                None => line.json(out),
            },
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

/// A value of a line: its strings are kept in the line's one text.
#[derive(Debug, Clone, Copy)]
enum Val {
    Null,
    /// Where in [`Line::text`] the string is.
    Str(usize, usize),
    I64(i64),
    U64(u64),
    Bool(bool),
}

/// An event's keys and values, in order: the event's name, then its fields as
/// declared. A list, not a map: an event has a dozen keys at most, each a
/// `&'static str` of its callsite, so nothing is hashed per key; and the strings
/// share one text, so that a line, its room kept, allocates nothing.
struct Line {
    keys: Vec<(&'static str, Val)>,
    text: String,
}

impl Line {
    fn put(&mut self, key: &'static str, value: Val) {
        match self.keys.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.keys.push((key, value)),
        }
    }

    fn set(&mut self, key: &'static str, value: &str) {
        let start = self.text.len();
        self.text.push_str(value);
        self.put(key, Val::Str(start, self.text.len()));
    }

    fn get(&self, key: &str) -> Option<Val> {
        self.keys.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    /// The string at `key`; `""` when there is none.
    fn str(&self, key: &str) -> &str {
        match self.get(key) {
            Some(Val::Str(from, to)) => self.text.get(from..to).unwrap_or(""),
            _ => "",
        }
    }

    /// The number at `key` as text; `""` when there is none.
    fn number(&self, key: &str) -> String {
        match self.get(key) {
            Some(Val::I64(n)) => n.to_string(),
            Some(Val::U64(n)) => n.to_string(),
            _ => String::new(),
        }
    }

    /// The line as one JSON object, its keys in order, at the end of `out`.
    fn json(&self, out: &mut Vec<u8>) {
        out.push(b'{');
        for (i, (key, value)) in self.keys.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            // Writing to a `Vec` cannot fail, and a `str` is always JSON.
            let _ = serde_json::to_writer(&mut *out, key);
            out.push(b':');
            let _ = match *value {
                Val::Null => serde_json::to_writer(&mut *out, &()),
                Val::Str(from, to) => serde_json::to_writer(&mut *out, self.text.get(from..to).unwrap_or("")),
                Val::I64(n) => serde_json::to_writer(&mut *out, &n),
                Val::U64(n) => serde_json::to_writer(&mut *out, &n),
                Val::Bool(b) => serde_json::to_writer(&mut *out, &b),
            };
        }
        out.push(b'}');
    }
}

/// Records an event's fields into its line.
impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field.name(), value);
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field.name(), Val::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field.name(), Val::U64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field.name(), Val::Bool(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.set(field.name(), &format!("{value:?}"));
    }
}

/// The human line of an event; `None` for alerts, errors and faults, which stay
/// JSON in either format (an operator's tools pick them out).
fn text(v: &Line) -> Option<String> {
    let s = |k: &str| v.str(k);
    let n = |k: &str| v.number(k);
    Some(match s("event") {
        events::ATTEMPT => {
            let mut line = format!(
                "{} delivery {} {} attempt {}: {}",
                s("at"),
                n("delivery"),
                s("subscriber"),
                n("attempt"),
                s("outcome")
            );
            push_failure(&mut line, s);
            line.push_str(&format!(" -> {}", s("state")));
            if !s("due_at").is_empty() {
                line.push_str(&format!(", next at {}", s("due_at")));
            }
            if !s("because").is_empty() {
                line.push_str(&format!(" ({})", s("because")));
            }
            line
        }
        events::ENDED_AT_CLAIM => format!(
            "{} delivery {} {} ended at its claim -> {} {} ({})",
            s("at"),
            n("delivery"),
            s("subscriber"),
            s("state"),
            s("kind"),
            s("because")
        ),
        events::SCHEDULE_RUN => {
            let mut line = format!("{} schedule {} run {}: {}", s("at"), s("schedule"), n("run"), s("outcome"));
            push_failure(&mut line, s);
            line
        }
        _ => return None,
    })
}

/// A failure as `deliveries show` writes it: ` KIND (CODE)`, then `: REASON` when
/// the driver gave one (the resolver's or the OS's words, a time limit).
fn push_failure<'a>(line: &mut String, s: impl Fn(&str) -> &'a str) {
    if s("kind").is_empty() {
        return;
    }
    line.push_str(&format!(" {} ({})", s("kind"), s("code")));
    if !s("reason").is_empty() {
        line.push_str(&format!(": {}", s("reason")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jadpo_check::program::FailureKind;
    use jadpo_core::rules::{CallFailure, ClaimDecision, Decision, FailedBecause, Failure, Outcome};
    use jadpo_core::store::BreakerAlert;
    use std::sync::Arc;

    /// 2023-11-14T22:13:20Z.
    const T0: i64 = 1_700_000_000_000;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The lines `emit` makes in `format`.
    fn lines(format: LogFormat, emit: impl FnOnce()) -> Vec<String> {
        let out = Shared::default();
        let subscriber = Registry::default().with(RunLog::new(format, out.clone()));
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = out.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        String::from_utf8(bytes).expect("utf-8").lines().map(str::to_string).collect()
    }

    fn unavailable() -> Outcome {
        Outcome::Failed(CallFailure {
            http_status: Some(503),
            ..CallFailure::new(FailureKind::Unavailable, "http.503")
        })
    }

    /// One of each event, as a run would emit them.
    fn a_run() {
        events::attempt(T0, 7, "send_receipt", 1, &Outcome::ok(), &Decision::Succeeded, 12);
        let failure = Failure::new("http.503", FailureKind::Unavailable);
        let retry = Decision::Retry { due_at_ms: T0 + 20_000, failure: failure.clone() };
        events::attempt(T0, 8, "send_receipt", 2, &unavailable(), &retry, 30);
        let failed = Decision::Failed { failure, because: FailedBecause::PastWindow };
        let with_reason = Outcome::Failed(
            CallFailure::new(FailureKind::Unavailable, "transport.refused").with_reason("connection refused"),
        );
        events::attempt(T0, 9, "send_receipt", 3, &with_reason, &failed, 4);
        events::ended_at_claim(T0, 10, "audit", &ClaimDecision::Handled);
        let give_up = ClaimDecision::GiveUp {
            failure: Failure::deadline_exceeded(),
            because: FailedBecause::PastWindow,
            lease_expired: false,
        };
        events::ended_at_claim(T0, 11, "audit", &give_up);
        // A claim that runs the delivery ends nothing: no line.
        let run = ClaimDecision::Run { attempt: 1, lease_until_ms: T0, lease_expired: false, failure: None };
        events::ended_at_claim(T0, 12, "audit", &run);
        events::schedule_run(T0, "nightly", 3, &Outcome::ok());
        events::schedule_run(T0, "nightly", 4, &Outcome::fail(FailureKind::Unavailable, "fake.unavailable"));
        events::alert(&BreakerAlert { connection: "ledger".into(), since_ms: T0, held: 3 });
        events::error(T0, &"the store is locked");
        events::internal_fault(T0, "a claim loop", "boom");
        // Another crate's events are not the run's log.
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
        let lines = lines(LogFormat::Json, || events::attempt(T0, 9, "send_receipt", 3, &failed, &decision, 4));
        assert_eq!(lines.len(), 1, "one line: {lines:?}");
        let line: serde_json::Value = serde_json::from_str(&lines[0]).expect("JSON");
        assert_eq!(line["reason"], odd);
        assert_eq!(line["delivery"], 9);
        assert_eq!(line["http_status"], serde_json::Value::Null);
    }

    #[test]
    fn the_lines_of_a_batch_are_written_once_it_ends_in_the_order_logged() {
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
        let out = Writes::default();
        let subscriber = Registry::default().with(RunLog::new(LogFormat::Text, out.clone()));
        let writes = || out.0.lock().unwrap_or_else(|e| e.into_inner()).len();
        tracing::subscriber::with_default(subscriber, || {
            events::error(T0, &"before");
            assert_eq!(writes(), 1);
            {
                let _lines = events::lines_span().entered();
                events::attempt(T0, 7, "send_receipt", 1, &Outcome::ok(), &Decision::Succeeded, 12);
                events::attempt(T0, 8, "send_receipt", 1, &Outcome::ok(), &Decision::Succeeded, 3);
                // Kept until the batch ends.
                assert_eq!(writes(), 1);
            }
            assert_eq!(writes(), 2);
            // A span of another name keeps nothing.
            let _other = events::attempt_span(9, "send_receipt", 1).entered();
            events::error(T0, &"after");
            assert_eq!(writes(), 3);
        });
        let writes = out.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(
            writes[1],
            "2023-11-14T22:13:20Z delivery 7 send_receipt attempt 1: succeeded -> succeeded\n\
             2023-11-14T22:13:20Z delivery 8 send_receipt attempt 1: succeeded -> succeeded\n"
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
