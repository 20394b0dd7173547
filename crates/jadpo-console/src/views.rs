//! The JSON shapes of what the store holds, one definition for `jadpoc
//! deliveries`, `events`, `breakers`, `status` and `prune` with `--format json`
//! and for the console's JSON API (runtime.md's interface; more keys are
//! welcome, these are kept).

use jadpo_core::clock::rfc3339;
use jadpo_core::rules::breaker::{BreakerRow, Pause};
use jadpo_core::store::{
    AttemptRate, AttemptView, BreakerAction, BreakerView, DeliveryView, EventView, PruneCounts, RetryResult, StatusView,
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
        "versions": s.versions.iter().map(|v| json!({
            "id": v.id,
            "hash": v.hash,
            "created_at": rfc3339(v.created_at_ms),
            "accepted": v.accepted,
            "in_flight": v.in_flight,
            "processes": v.processes.iter().map(|p| json!({
                "id": p.id,
                "host": p.host,
                "pid": p.pid,
                "started_at": rfc3339(p.started_at_ms),
                "seen_at": rfc3339(p.seen_at_ms),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
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
        "version": e.version,
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

/// What an operator's retry did to one delivery: `{"id", "result": "retried" |
/// "not_found" | "not_retryable"}`.
pub fn retry_result_json(id: i64, result: &RetryResult) -> Value {
    json!({"id": id, "result": retry_word(result)})
}

/// The word of [`retry_result_json`]'s `"result"`.
pub fn retry_word(result: &RetryResult) -> &'static str {
    match result {
        RetryResult::Retried => "retried",
        RetryResult::NotFound => "not_found",
        RetryResult::NotRetryable(_) => "not_retryable",
    }
}

/// A pause made: `{"connection", "paused": {...}}` (see [`pause_json`]).
pub fn paused_json(connection: &str, pause: &Pause) -> Value {
    json!({"connection": connection, "paused": pause_json(pause)})
}

/// A resume made: `{"connection", "was", "was_paused", "released"}`.
pub fn resumed_json(connection: &str, was: &BreakerRow, released: u64) -> Value {
    json!({
        "connection": connection,
        "was": was.state.as_str(),
        "was_paused": was.pause.is_some(),
        "released": released,
    })
}

/// One event of a replay: `{"event_id", "name", "subscribers", "replay_id",
/// "error"}` (`replay_id` null for a dry run or a refusal, `error` the refusal's
/// words).
pub fn replay_json(
    event_id: i64,
    name: Option<&str>,
    subscribers: &[String],
    replay_id: Option<i64>,
    error: Option<&str>,
) -> Value {
    json!({
        "event_id": event_id, "name": name, "subscribers": subscribers, "replay_id": replay_id, "error": error,
    })
}

/// Attempts per minute: `[{"minute", "succeeded", "failed"}]`, oldest first.
pub fn rates_json(rates: &[AttemptRate]) -> Value {
    Value::Array(
        rates
            .iter()
            .map(|r| json!({"minute": rfc3339(r.minute_ms), "succeeded": r.succeeded, "failed": r.failed}))
            .collect(),
    )
}
