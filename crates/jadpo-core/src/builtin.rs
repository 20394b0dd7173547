//! jadpo's own events (`jadpo.delivery_failed`, ...) as the runtime raises them:
//! each built from what the change that raises it read, routed to the program's
//! subscribers of that event like any other, and handed to the store to write in
//! the same transaction as that change (only once its guarded statement matched).
//!
//! **Loop guard:** a delivery of a built-in event that fails or parks raises
//! nothing, so an alerting subscriber that fails cannot feed itself. An outage is
//! alerted once (the breaker row's alert flag), so it raises one
//! `jadpo.connection_unavailable` however many processes see it.

use crate::clock::rfc3339;
use crate::payload::new_event_from_value;
use crate::store::{BreakerAlert, EndedDelivery, NewEvent, OrphanedDelivery, Raise};
use jadpo_check::builtin::{
    CONNECTION_RECOVERED, CONNECTION_UNAVAILABLE, DELIVERY_FAILED, DELIVERY_ORPHANED, DELIVERY_PARKED, is_builtin_event,
};
use jadpo_check::program::Program;
use serde_json::{Value, json};

/// The built-in event `name` with `payload`, with one delivery per subscriber of
/// it; none when the program routes it nowhere.
fn raised(program: &Program, name: &str, payload: &Value) -> Vec<NewEvent> {
    // An event no subscriber uses is not in the program; a payload that does not
    // match its declaration would be a defect of this module (a test builds every
    // event against the checker's declarations).
    match new_event_from_value(program, name, payload) {
        Ok(event) if !event.deliveries.is_empty() => vec![event],
        _ => Vec::new(),
    }
}

/// `jadpo.delivery_failed` or `jadpo.delivery_parked` for a delivery that ended
/// so; nothing for a delivery of a built-in event (the loop guard).
pub fn delivery_ended(program: &Program, ended: &EndedDelivery<'_>) -> Vec<NewEvent> {
    if is_builtin_event(ended.event) {
        return Vec::new();
    }
    let name = if ended.parked { DELIVERY_PARKED } else { DELIVERY_FAILED };
    let payload = json!({
        "delivery": ended.id.to_string(),
        "event": ended.event_id.to_string(),
        "subscriber": ended.subscriber,
        "kind": ended.failure.kind.as_str(),
        "code": ended.failure.code,
        "attempts": ended.attempts,
    });
    raised(program, name, &payload)
}

/// `jadpo.delivery_orphaned` for a delivery a claim orphaned; nothing for a
/// delivery of a built-in event (the loop guard).
pub fn delivery_orphaned(program: &Program, orphaned: &OrphanedDelivery<'_>) -> Vec<NewEvent> {
    if is_builtin_event(orphaned.event) {
        return Vec::new();
    }
    let payload = json!({
        "delivery": orphaned.id.to_string(),
        "event": orphaned.event_id.to_string(),
        "subscriber": orphaned.subscriber,
        "attempts": orphaned.attempts,
    });
    raised(program, DELIVERY_ORPHANED, &payload)
}

/// `jadpo.connection_unavailable` for an outage's alert: the same `since` and
/// `held` as its `delivery.alert` log line.
pub fn connection_unavailable(program: &Program, alert: &BreakerAlert) -> Vec<NewEvent> {
    let payload = json!({
        "connection": alert.connection,
        "since": rfc3339(alert.since_ms),
        "held": alert.held,
    });
    raised(program, CONNECTION_UNAVAILABLE, &payload)
}

/// `jadpo.connection_recovered` for a breaker that closed after `outage_ms`.
pub fn connection_recovered(program: &Program, connection: &str, outage_ms: i64) -> Vec<NewEvent> {
    let payload = json!({ "connection": connection, "outage_ms": outage_ms });
    raised(program, CONNECTION_RECOVERED, &payload)
}

/// The program's built-in events, for the store's changes to raise.
#[derive(Debug, Clone, Copy)]
pub struct Raiser<'a> {
    /// The program whose subscribers they are routed to.
    pub program: &'a Program,
}

impl Raise for Raiser<'_> {
    fn delivery_ended(&self, ended: &EndedDelivery<'_>) -> Vec<NewEvent> {
        delivery_ended(self.program, ended)
    }

    fn delivery_orphaned(&self, orphaned: &OrphanedDelivery<'_>) -> Vec<NewEvent> {
        delivery_orphaned(self.program, orphaned)
    }

    fn connection_unavailable(&self, alert: &BreakerAlert) -> Vec<NewEvent> {
        connection_unavailable(self.program, alert)
    }

    fn connection_recovered(&self, connection: &str, outage_ms: i64) -> Vec<NewEvent> {
        connection_recovered(self.program, connection, outage_ms)
    }
}
