//! jadpo's own events: stored with their deliveries inside the transaction of the
//! change that raises them (a claim that gives a delivery up, a recorded outcome,
//! a breaker that closes, an outage's alert), once its guarded statement matched.

use super::Error;
use super::tx::Tx;
use jadpo_core::store::{EndedDelivery, NewEvent, Raise};
use rusqlite::params;

/// The number of the version this connection stores its events with, if one is
/// kept ([`super::versions::WRITER_TABLE`]).
pub(super) fn writer_version(tx: &Tx<'_>) -> Result<Option<i64>, Error> {
    Ok(tx.prepare_cached("SELECT version FROM temp.jadpo_writer")?.query_row([], |r| r.get(0))?)
}

/// Store events and their deliveries, due at `now_ms`; returns their ids in order.
pub(super) fn insert_events(tx: &Tx<'_>, events: &[NewEvent], now_ms: i64) -> Result<Vec<i64>, Error> {
    // Most outcomes raise nothing: no statement is looked up for them.
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let mut ids = Vec::with_capacity(events.len());
    // Read once for the batch, not by a subquery in each event's insert.
    let version = writer_version(tx)?;
    let mut ev =
        tx.prepare_cached("INSERT INTO jadpo_events (name, payload, emitted_at, version) VALUES (?1, ?2, ?3, ?4)")?;
    let mut del = tx.prepare_cached(
        "INSERT INTO jadpo_deliveries (event_id, subscriber, connection, state, \
         attempts, due_at, budget_start, held_ms, created_at, order_key) \
         VALUES (?1, ?2, ?3, 'pending', 0, ?4, ?4, 0, ?4, ?5)",
    )?;
    for e in events {
        ev.execute(params![e.name, e.payload, now_ms, version])?;
        let id = tx.last_insert_rowid();
        for d in &e.deliveries {
            del.execute(params![id, d.subscriber, d.connection, now_ms, d.order_key])?;
        }
        ids.push(id);
    }
    Ok(ids)
}

/// A delivery a claim gave up (its statement matched): store what that raises.
pub(super) fn given_up(tx: &Tx<'_>, raise: &dyn Raise, ended: &EndedDelivery<'_>, now_ms: i64) -> Result<(), Error> {
    insert_events(tx, &raise.delivery_ended(ended), now_ms).map(drop)
}
