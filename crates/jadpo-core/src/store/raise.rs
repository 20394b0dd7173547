//! jadpo's own events as the store sees them: changes that raise one ask the
//! runtime for the events to store (the runtime knows who subscribes to what), and
//! write them in their own transaction, only once their guarded statement matched.

use super::{BreakerAlert, NewEvent};
use crate::rules::Failure;

/// A delivery that ended `failed` or `parked`, as the change that ended it read it.
#[derive(Debug, Clone, Copy)]
pub struct EndedDelivery<'a> {
    /// The delivery's id.
    pub id: i64,
    /// Its event's id.
    pub event_id: i64,
    /// Its event's name.
    pub event: &'a str,
    /// Its subscriber.
    pub subscriber: &'a str,
    /// Whether it was parked (else it failed).
    pub parked: bool,
    /// The failure it ended with.
    pub failure: &'a Failure,
    /// Attempts it used.
    pub attempts: u32,
}

/// A delivery a claim orphaned (no running process's program has its
/// subscriber), as the claim read it.
#[derive(Debug, Clone, Copy)]
pub struct OrphanedDelivery<'a> {
    /// The delivery's id.
    pub id: i64,
    /// Its event's id.
    pub event_id: i64,
    /// Its event's name.
    pub event: &'a str,
    /// Its subscriber.
    pub subscriber: &'a str,
    /// Attempts it used.
    pub attempts: u32,
}

/// Builds the events a store change raises; every method answers the events to
/// store with the change (none when no subscriber routes them).
pub trait Raise: Sync {
    /// A delivery given up at a claim (`failed`).
    fn delivery_ended(&self, ended: &EndedDelivery<'_>) -> Vec<NewEvent>;
    /// A delivery orphaned at a claim.
    fn delivery_orphaned(&self, orphaned: &OrphanedDelivery<'_>) -> Vec<NewEvent>;
    /// An outage's alert, raised once by the tick's sweep.
    fn connection_unavailable(&self, alert: &BreakerAlert) -> Vec<NewEvent>;
    /// A breaker that was open or probing closed, `outage_ms` after it opened.
    fn connection_recovered(&self, connection: &str, outage_ms: i64) -> Vec<NewEvent>;
}

/// The events a breaker that opened at `opened_at_ms` and closed at `now_ms`
/// raises, its outage measured from its opening (none when it never opened).
pub fn recovered(raise: &dyn Raise, connection: &str, opened_at_ms: Option<i64>, now_ms: i64) -> Vec<NewEvent> {
    let outage_ms = now_ms.saturating_sub(opened_at_ms.unwrap_or(now_ms)).max(0);
    raise.connection_recovered(connection, outage_ms)
}

/// Raises nothing: for a store used without a program (tests, tools).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRaise;

impl Raise for NoRaise {
    fn delivery_ended(&self, _ended: &EndedDelivery<'_>) -> Vec<NewEvent> {
        Vec::new()
    }

    fn delivery_orphaned(&self, _orphaned: &OrphanedDelivery<'_>) -> Vec<NewEvent> {
        Vec::new()
    }

    fn connection_unavailable(&self, _alert: &BreakerAlert) -> Vec<NewEvent> {
        Vec::new()
    }

    fn connection_recovered(&self, _connection: &str, _outage_ms: i64) -> Vec<NewEvent> {
        Vec::new()
    }
}
