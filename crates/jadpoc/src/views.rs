//! The JSON and text shapes of `jadpoc deliveries`, `jadpoc events` and `jadpoc
//! status` (runtime.md's interface; more keys are welcome, these are kept).

use jadpo_core::clock::rfc3339;
use jadpo_core::rules::breaker::Pause;
use jadpo_core::store::{
    AttemptView, BreakerAction, BreakerView, DeliveryView, EventView, PauseAction, PruneCounts, StatusView,
};
use serde_json::{Map, Value, json};

/// A delivery: `{"id", "event_id", "event", "subscriber", "connection", "state",
/// "attempts", "due_at", "held_since", "last_failure"}` and a few more.
pub fn delivery_json(d: &DeliveryView) -> Value {
    json!({
        "id": d.id,
        "event_id": d.event_id,
        "event": d.event,
        "subscriber": d.subscriber,
        "connection": d.connection,
        "state": d.state.as_str(),
        "attempts": d.attempts,
        "due_at": d.due_at_ms.map(rfc3339),
        "held_since": d.held_since_ms.map(rfc3339),
        "last_failure": d.last_failure.as_ref().map(|f| json!({"code": f.code, "kind": f.kind.as_str(), "reason": f.reason})),
        "end_reason": d.end_reason,
        "lease_until": d.lease_until_ms.map(rfc3339),
        "budget_start": rfc3339(d.budget_start_ms),
        "held_ms": d.held_ms,
        "created_at": rfc3339(d.created_at_ms),
        "order_key": d.order_key,
        "waiting_on": d.waiting_on,
    })
}

/// An attempt of a delivery's history.
pub fn attempt_json(a: &AttemptView) -> Value {
    json!({
        "attempt": a.attempt,
        "started_at": rfc3339(a.started_at_ms),
        "duration_ms": a.duration_ms,
        "outcome": a.outcome,
        "code": a.code,
        "kind": a.kind,
        "http_status": a.http_status,
        "reason": a.reason,
    })
}

/// `deliveries show`: the delivery with its `"history"`.
pub fn delivery_with_history_json(d: &DeliveryView, history: &[AttemptView]) -> Value {
    let mut v = delivery_json(d);
    if let Value::Object(o) = &mut v {
        o.insert("history".into(), Value::Array(history.iter().map(attempt_json).collect()));
    }
    v
}

/// `{"states": {...}, "subscribers": {NAME: {STATE: N}}, "breakers_open": N,
/// "breakers_paused": N, "oldest_pending_s": S, "invalid_events": N, "unexpanded_events": N}`.
pub fn status_json(s: &StatusView) -> Value {
    let states: Map<String, Value> = s.states.iter().map(|(st, n)| (st.as_str().to_string(), json!(n))).collect();
    let subscribers: Map<String, Value> = s
        .subscribers
        .iter()
        .map(|(name, counts)| {
            let c: Map<String, Value> = counts.iter().map(|(st, n)| (st.as_str().to_string(), json!(n))).collect();
            (name.clone(), Value::Object(c))
        })
        .collect();
    json!({
        "states": states,
        "subscribers": subscribers,
        "breakers_open": s.breakers_open,
        "breakers_paused": s.breakers_paused,
        "oldest_pending_s": s.oldest_pending_s,
        "invalid_events": s.events.invalid,
        "unexpanded_events": s.events.unexpanded,
    })
}

/// One line per delivery for people.
pub fn delivery_line(d: &DeliveryView) -> String {
    let mut line = format!(
        "{:>8}  {:<9}  {:>2} attempt{}  {}  ({} #{})",
        d.id,
        state_word(d),
        d.attempts,
        if d.attempts == 1 { " " } else { "s" },
        d.subscriber,
        d.event,
        d.event_id
    );
    if let Some(blocker) = d.waiting_on {
        line.push_str(&format!("  waiting on #{blocker}"));
    } else if let Some(due) = d.due_at_ms {
        line.push_str(&format!("  due {}", rfc3339(due)));
    }
    if let Some(held) = d.held_since_ms {
        line.push_str(&format!("  held since {} by `{}`'s breaker", rfc3339(held), d.connection));
    }
    if let Some(f) = &d.last_failure {
        line.push_str(&format!("  last failure {} ({})", f.kind.as_str(), f.code));
    }
    line
}

/// A delivery's state for people: a pending delivery held back by an earlier one
/// of its key is `waiting`.
fn state_word(d: &DeliveryView) -> &'static str {
    if d.waiting_on.is_some() { "waiting" } else { d.state.as_str() }
}

/// A delivery and its history for people.
pub fn delivery_text(d: &DeliveryView, history: &[AttemptView]) -> String {
    let mut out = format!(
        "delivery {}\n  event       {} #{}\n  subscriber  {}\n  connection  {}\n  state       {}\n  attempts    {}\n",
        d.id,
        d.event,
        d.event_id,
        d.subscriber,
        d.connection,
        state_word(d),
        d.attempts
    );
    if let Some(key) = &d.order_key {
        out.push_str(&format!("  order key   {key:?}\n"));
    }
    if let Some(blocker) = d.waiting_on {
        out.push_str(&format!("  waiting on  delivery {blocker}, the earliest of its key not ended\n"));
    } else if let Some(due) = d.due_at_ms {
        out.push_str(&format!("  due at      {}\n", rfc3339(due)));
    }
    if let Some(h) = d.held_since_ms {
        out.push_str(&format!("  held since  {}\n", rfc3339(h)));
    }
    if let Some(f) = &d.last_failure {
        out.push_str(&format!("  last failure {} ({})", f.kind.as_str(), f.code));
        if let Some(r) = &f.reason {
            out.push_str(&format!(": {r}"));
        }
        out.push('\n');
    }
    if let Some(why) = &d.end_reason {
        out.push_str(&format!("  ended       {why}\n"));
    }
    out.push_str("  history\n");
    if history.is_empty() {
        out.push_str("    (no attempts yet)\n");
    }
    for a in history {
        out.push_str(&format!("    #{} {} {}ms {}", a.attempt, rfc3339(a.started_at_ms), a.duration_ms, a.outcome));
        if let (Some(k), Some(c)) = (&a.kind, &a.code) {
            out.push_str(&format!(" {k} ({c})"));
        }
        if let Some(s) = a.http_status {
            out.push_str(&format!(" http {s}"));
        }
        if let Some(r) = &a.reason {
            out.push_str(&format!(": {r}"));
        }
        out.push('\n');
    }
    out
}

/// `jadpoc status` for people.
pub fn status_text(s: &StatusView) -> String {
    let counts = |c: &[(jadpo_check::program::DeliveryState, u64)]| {
        c.iter().map(|(st, n)| format!("{} {n}", st.as_str())).collect::<Vec<_>>().join(", ")
    };
    let mut out = format!("deliveries: {}\n", counts(&s.states));
    for (name, c) in &s.subscribers {
        out.push_str(&format!("  {name}: {}\n", counts(c)));
    }
    out.push_str(&format!("breakers open: {}\n", s.breakers_open));
    if s.breakers_paused > 0 {
        out.push_str(&format!("connections paused: {}\n", s.breakers_paused));
    }
    match s.oldest_pending_s {
        Some(age) => out.push_str(&format!("oldest pending: {age}s\n")),
        None => out.push_str("oldest pending: none\n"),
    }
    out.push_str(&format!("invalid events: {}\n", s.events.invalid));
    if s.events.unexpanded > 0 {
        out.push_str(&format!("events to expand: {}\n", s.events.unexpanded));
    }
    out
}

/// An operator's pause: `{"at", "until", "by", "reason"}` (`until` null until
/// resumed).
pub fn pause_json(p: &Pause) -> Value {
    json!({
        "at": rfc3339(p.at_ms),
        "until": p.until_ms.map(rfc3339),
        "by": p.by,
        "reason": p.reason,
    })
}

/// An operator's pause for people: `paused by NAME at T until T: REASON`.
pub fn pause_text(p: &Pause) -> String {
    let mut out = format!("paused by {} at {} {}", p.by, rfc3339(p.at_ms), until_text(p.until_ms));
    if let Some(r) = &p.reason {
        out.push_str(&format!(": {r}"));
    }
    out
}

/// When a pause ends: `until T`, or `until resumed` for one with no end.
fn until_text(until_ms: Option<i64>) -> String {
    match until_ms {
        Some(until) => format!("until {}", rfc3339(until)),
        None => "until resumed".to_string(),
    }
}

/// A breaker: `{"connection", "state", "failures_in_a_row", "opened_at",
/// "pause_s", "alerts"}`, `"held"`, the deliveries it holds now, and `"paused"`,
/// an operator's pause (see [`pause_json`]) or null.
pub fn breaker_json(b: &BreakerView) -> Value {
    let r = &b.row;
    json!({
        "connection": b.connection,
        "state": r.state.as_str(),
        "failures_in_a_row": r.failures_in_a_row,
        "opened_at": r.opened_at_ms.map(rfc3339),
        "pause_s": r.pause_ms / 1000,
        "alerts": r.alerts,
        "held": b.held,
        "probe": r.probe,
        "paused": r.pause.as_ref().map(pause_json),
        "rate_next_call_at": r.rate_tat_us.map(|us| rfc3339(us.div_euclid(1000))),
    })
}

/// One line per breaker for people.
pub fn breaker_line(b: &BreakerView) -> String {
    let r = &b.row;
    let mut line = format!(
        "{}  {}  {} in a row  {}  {} held",
        b.connection,
        r.state.as_str(),
        jadpo_check::plural(u64::from(r.failures_in_a_row), "failure"),
        jadpo_check::plural(u64::from(r.alerts), "alert"),
        b.held
    );
    if r.state != jadpo_check::program::BreakerState::Closed
        && let Some(opened) = r.opened_at_ms
    {
        line.push_str(&format!("  opened {}  pause {}", rfc3339(opened), jadpo_check::format_duration(r.pause_ms)));
    }
    if let Some(p) = &r.pause {
        line.push_str(&format!("  {}", pause_text(p)));
    }
    if let Some(us) = r.rate_tat_us {
        // The rate's (or a Retry-After's) next turn at the steady rate.
        line.push_str(&format!("  rate: next call at {}", rfc3339(us.div_euclid(1000))));
    }
    line
}

/// An operator's action on a connection: `{"connection", "action": "pause" |
/// "resume" | "pause_ended", "at", "by", "reason", "until"}` (`until` the end a
/// pause was given with `--for`, else null).
pub fn breaker_action_json(a: &BreakerAction) -> Value {
    json!({
        "connection": a.connection,
        "action": a.action.as_str(),
        "at": rfc3339(a.at_ms),
        "by": a.by,
        "reason": a.reason,
        "until": a.until_ms.map(rfc3339),
    })
}

/// One line per operator's action for people: `T  CONN  paused by NAME until
/// T: REASON`, `T  CONN  resumed by NAME: REASON`, `T  CONN  pause by NAME ended`.
pub fn breaker_action_line(a: &BreakerAction) -> String {
    let mut line = format!("{}  {}  ", rfc3339(a.at_ms), a.connection);
    match a.action {
        PauseAction::Pause => line.push_str(&format!("paused by {} {}", a.by, until_text(a.until_ms))),
        PauseAction::Resume => line.push_str(&format!("resumed by {}", a.by)),
        PauseAction::Ended => line.push_str(&format!("pause by {} ended", a.by)),
    }
    if let Some(r) = &a.reason {
        line.push_str(&format!(": {r}"));
    }
    line
}

/// `jadpoc prune`'s counts: `{"dry_run", "cut", "deliveries", "attempts",
/// "handled", "events"}`.
pub fn prune_json(counts: &PruneCounts, cut_ms: i64, dry_run: bool) -> Value {
    json!({
        "dry_run": dry_run,
        "cut": rfc3339(cut_ms),
        "deliveries": counts.deliveries,
        "attempts": counts.attempts,
        "handled": counts.handled,
        "events": counts.events,
    })
}

/// `jadpoc prune`'s counts for people.
pub fn prune_text(counts: &PruneCounts, cut_ms: i64, dry_run: bool) -> String {
    let deliveries = if counts.deliveries == 1 { "delivery" } else { "deliveries" };
    format!(
        "{} {} {deliveries}, {}, {}, {} (last active before {})\n",
        if dry_run { "would prune" } else { "pruned" },
        counts.deliveries,
        jadpo_check::plural(counts.attempts, "attempt"),
        jadpo_check::plural(counts.handled, "handled record"),
        jadpo_check::plural(counts.events, "event"),
        rfc3339(cut_ms)
    )
}

/// An event: `{"id", "name", "emitted_at", "expanded", "invalid", "replay_of",
/// "delivery_states", "payload"}`; the payload as JSON (as a string if the
/// stored text is not JSON).
pub fn event_json(e: &EventView) -> Value {
    let states: Map<String, Value> = e.deliveries.iter().map(|(st, n)| (st.as_str().to_string(), json!(n))).collect();
    json!({
        "id": e.id,
        "name": e.name,
        "emitted_at": rfc3339(e.emitted_at_ms),
        "expanded": e.expanded,
        "invalid": e.invalid.as_ref().map(|(code, reason)| json!({"code": code, "reason": reason})),
        "replay_of": e.replay_of,
        "delivery_states": states,
        "payload": serde_json::from_str::<Value>(&e.payload).unwrap_or_else(|_| Value::String(e.payload.clone())),
    })
}

/// `events show`: the event with its `"deliveries"`.
pub fn event_with_deliveries_json(e: &EventView, deliveries: &[DeliveryView]) -> Value {
    let mut v = event_json(e);
    if let Value::Object(o) = &mut v {
        o.insert("deliveries".into(), Value::Array(deliveries.iter().map(delivery_json).collect()));
    }
    v
}

/// What became of an event, in words: its deliveries by state, invalid with the
/// reason, or waiting to be expanded.
fn event_fate(e: &EventView) -> String {
    if let Some((code, reason)) = &e.invalid {
        return format!("invalid ({code}): {reason}");
    }
    if !e.expanded {
        return "not expanded yet".to_string();
    }
    let total: u64 = e.deliveries.iter().map(|(_, n)| n).sum();
    if total == 0 {
        return "no deliveries".to_string();
    }
    let states: Vec<String> = e.deliveries.iter().map(|(st, n)| format!("{} {n}", st.as_str())).collect();
    format!("{total} deliver{}: {}", if total == 1 { "y" } else { "ies" }, states.join(", "))
}

/// One line per event for people.
pub fn event_line(e: &EventView) -> String {
    let mut line = format!("{:>8}  {}  {}  {}", e.id, rfc3339(e.emitted_at_ms), e.name, event_fate(e));
    if let Some(of) = e.replay_of {
        line.push_str(&format!("  (replay of #{of})"));
    }
    line
}

/// An event, its payload and its deliveries for people.
pub fn event_text(e: &EventView, deliveries: &[DeliveryView]) -> String {
    let mut out = format!("event {}\n  name        {}\n  emitted at  {}\n", e.id, e.name, rfc3339(e.emitted_at_ms));
    if let Some(of) = e.replay_of {
        out.push_str(&format!("  replay of   #{of}\n"));
    }
    if let Some((code, reason)) = &e.invalid {
        out.push_str(&format!("  invalid     {code}: {reason}\n"));
    } else if !e.expanded {
        out.push_str("  expanded    not yet (a running `jadpoc run` makes its deliveries)\n");
    }
    out.push_str(&format!("  payload     {}\n  deliveries\n", e.payload));
    if deliveries.is_empty() {
        out.push_str("    (none)\n");
    }
    for d in deliveries {
        out.push_str(&format!("  {}\n", delivery_line(d)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use jadpo_check::program::{DeliveryState, FailureKind};
    use jadpo_core::rules::Failure;

    #[test]
    fn a_delivery_shows_why_it_ended_and_each_failures_reason() {
        let d = DeliveryView {
            id: 7,
            event_id: 3,
            event: "Paid".into(),
            subscriber: "book".into(),
            connection: "c".into(),
            state: DeliveryState::Failed,
            order_key: None,
            waiting_on: None,
            attempts: 1,
            due_at_ms: None,
            lease_until_ms: None,
            held_since_ms: None,
            held_ms: 0,
            budget_start_ms: 0,
            created_at_ms: 0,
            last_failure: Some(
                Failure::new("transport.connect", FailureKind::Unavailable).with_reason("connection refused"),
            ),
            end_reason: Some("attempts_used".into()),
        };
        let a = AttemptView {
            attempt: 1,
            started_at_ms: 0,
            duration_ms: 2,
            outcome: "failed".into(),
            code: Some("transport.connect".into()),
            kind: Some("unavailable".into()),
            http_status: None,
            reason: Some("connection refused".into()),
        };
        let text = delivery_text(&d, std::slice::from_ref(&a));
        assert!(text.contains("  last failure unavailable (transport.connect): connection refused\n"), "{text}");
        assert!(text.contains("  ended       attempts_used\n"), "{text}");
        assert!(text.contains("failed unavailable (transport.connect): connection refused\n"), "{text}");
        let json = delivery_with_history_json(&d, &[a]);
        assert_eq!(json["end_reason"], "attempts_used");
        assert_eq!(json["last_failure"]["reason"], "connection refused");
        assert_eq!(json["history"][0]["reason"], "connection refused");
    }
}
