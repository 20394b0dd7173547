//! The run's log: one line per attempt outcome, given-up claim, schedule run and
//! alert, as human text or JSON lines, on stderr (stdout stays free for a
//! command's own output).

use crate::clock::rfc3339;
use crate::rules::{ClaimDecision, Decision, Outcome};
use serde_json::json;
use std::io::Write;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// `2026-01-02T03:04:05Z delivery 7 send_receipt attempt 1: succeeded`.
    #[default]
    Text,
    /// One JSON object a line.
    Json,
}

/// A log line, kept as JSON so both formats come from one place.
#[derive(Debug, Clone)]
pub struct Line(pub serde_json::Value);

/// Writes log lines, many at once under one lock.
#[derive(Debug, Default)]
pub struct Logger {
    format: LogFormat,
    /// A silent logger drops every line (the virtual-time runner reports through
    /// its own output).
    silent: bool,
}

impl Logger {
    /// A logger writing in `format`.
    pub fn new(format: LogFormat) -> Logger {
        Logger { format, silent: false }
    }

    /// A logger that writes nothing.
    pub fn silent() -> Logger {
        Logger { format: LogFormat::Json, silent: true }
    }

    /// Write lines to stderr (a failed write is dropped: logs never stop a run).
    pub fn write(&self, lines: &[Line]) {
        if lines.is_empty() || self.silent {
            return;
        }
        let mut buf = Vec::with_capacity(lines.len() * 160);
        for Line(v) in lines {
            match self.format {
                LogFormat::Json => {
                    let _ = serde_json::to_writer(&mut buf, v);
                }
                LogFormat::Text => text(&mut buf, v),
            }
            buf.push(b'\n');
        }
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(&buf);
        let _ = err.flush();
    }
}

fn text(buf: &mut Vec<u8>, v: &serde_json::Value) {
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("");
    let n = |k: &str| v.get(k).map(|x| x.to_string()).unwrap_or_default();
    let _ = match s("event") {
        "delivery.attempt" => {
            let mut line = format!(
                "{} delivery {} {} attempt {}: {}",
                s("at"),
                n("delivery"),
                s("subscriber"),
                n("attempt"),
                s("outcome")
            );
            if !s("kind").is_empty() {
                line.push_str(&format!(" {} ({})", s("kind"), s("code")));
            }
            line.push_str(&format!(" -> {}", s("state")));
            if !s("due_at").is_empty() {
                line.push_str(&format!(", next at {}", s("due_at")));
            }
            if !s("because").is_empty() {
                line.push_str(&format!(" ({})", s("because")));
            }
            write!(buf, "{line}")
        }
        "delivery.ended_at_claim" => write!(
            buf,
            "{} delivery {} {} ended at its claim -> {} {} ({})",
            s("at"),
            n("delivery"),
            s("subscriber"),
            s("state"),
            s("kind"),
            s("because")
        ),
        "schedule.run" => {
            let mut line = format!("{} schedule {} run {}: {}", s("at"), s("schedule"), n("run"), s("outcome"));
            if !s("kind").is_empty() {
                line.push_str(&format!(" {} ({})", s("kind"), s("code")));
            }
            write!(buf, "{line}")
        }
        _ => write!(buf, "{v}"),
    };
}

/// The line for an attempt and the decision that followed it.
pub fn attempt_line(
    at_ms: i64,
    delivery: i64,
    subscriber: &str,
    attempt: u32,
    outcome: &Outcome,
    decision: &Decision,
    duration_ms: i64,
) -> Line {
    let failure = outcome.failure();
    let because = match decision {
        Decision::Failed { because, .. } => Some(because.as_str()),
        _ => None,
    };
    Line(json!({
        "event": "delivery.attempt",
        "at": rfc3339(at_ms),
        "delivery": delivery,
        "subscriber": subscriber,
        "attempt": attempt,
        "outcome": if failure.is_some() { "failed" } else { "succeeded" },
        "kind": failure.as_ref().map(|f| f.kind.as_str()),
        "code": failure.as_ref().map(|f| f.code.clone()),
        "http_status": outcome.http_status(),
        "duration_ms": duration_ms,
        "state": decision.state().as_str(),
        "due_at": decision.due_at_ms().map(rfc3339),
        "because": because,
    }))
}

/// The line for a delivery ended at its claim (handled, or given up).
pub fn claim_line(at_ms: i64, delivery: i64, subscriber: &str, decision: &ClaimDecision) -> Line {
    let (state, kind, code, because) = match decision {
        ClaimDecision::Handled => ("succeeded", None, None, Some("handled")),
        ClaimDecision::GiveUp { failure, because, .. } => {
            ("failed", Some(failure.kind.as_str()), Some(failure.code.clone()), Some(because.as_str()))
        }
        _ => ("", None, None, None),
    };
    Line(json!({
        "event": "delivery.ended_at_claim",
        "at": rfc3339(at_ms),
        "delivery": delivery,
        "subscriber": subscriber,
        "state": state,
        "kind": kind,
        "code": code,
        "because": because,
    }))
}

/// The line for a schedule's run.
pub fn schedule_line(at_ms: i64, schedule: &str, run: u64, outcome: &Outcome) -> Line {
    let failure = outcome.failure();
    Line(json!({
        "event": "schedule.run",
        "at": rfc3339(at_ms),
        "schedule": schedule,
        "run": run,
        "outcome": if failure.is_some() { "failed" } else { "succeeded" },
        "kind": failure.as_ref().map(|f| f.kind.as_str()),
        "code": failure.as_ref().map(|f| f.code.clone()),
    }))
}

/// The alert of an outage: `{"event": "delivery.alert", "alert":
/// "connection_unavailable", "connection", "since", "held"}`, a JSON line in either
/// log format.
pub fn alert_line(alert: &crate::store::BreakerAlert) -> Line {
    Line(json!({
        "event": "delivery.alert",
        "alert": "connection_unavailable",
        "connection": alert.connection,
        "since": rfc3339(alert.since_ms),
        "held": alert.held,
    }))
}
