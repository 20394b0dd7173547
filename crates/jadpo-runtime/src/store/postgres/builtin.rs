//! jadpo's own events: stored with their deliveries inside the transaction of the
//! change that raises them (a claim that gives a delivery up, a recorded outcome,
//! a breaker that closes, an outage's alert), once its guarded statement matched.

use super::super::{BreakerAlert, ClaimRow, EndedDelivery, NewEvent, Raise};
use super::{StoreError, col, pg_error, q};
use crate::rules::Failure;
use postgres::Transaction;

/// Store events and their deliveries, due at `now_ms`, in bulk (one statement for
/// the events, one for their deliveries); returns their ids in order.
pub(super) fn insert_events(
    tx: &mut Transaction<'_>,
    s: &str,
    events: &[NewEvent],
    now_ms: i64,
) -> Result<Vec<i64>, StoreError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    // The events' ids first, so that each delivery names its event in the same
    // bulk insert; taken from the column's own sequence, in emit order.
    let rows = tx
        .query(
            &q(
                "SELECT nextval(pg_get_serial_sequence('{s}.events', 'id')) AS id FROM generate_series(1, $1::bigint)",
                s,
            ),
            &[&(events.len() as i64)],
        )
        .map_err(pg_error)?;
    let mut ids = rows.iter().map(|r| col::<i64>(r, "id")).collect::<Result<Vec<_>, _>>()?;
    ids.sort_unstable();
    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    let payloads: Vec<&str> = events.iter().map(|e| e.payload.as_str()).collect();
    tx.execute(
        &q(
            "INSERT INTO {s}.events (id, name, payload, emitted_at) \
             SELECT id, name, payload, $4::bigint FROM unnest($1::bigint[], $2::text[], $3::text[]) AS u(id, name, payload)",
            s,
        ),
        &[&ids, &names, &payloads, &now_ms],
    )
    .map_err(pg_error)?;
    let (mut event_ids, mut subscribers, mut connections) = (Vec::new(), Vec::new(), Vec::new());
    for (e, &id) in events.iter().zip(&ids) {
        for d in &e.deliveries {
            event_ids.push(id);
            subscribers.push(d.subscriber.as_str());
            connections.push(d.connection.as_str());
        }
    }
    if !event_ids.is_empty() {
        tx.execute(
            &q(
                "INSERT INTO {s}.deliveries (event_id, subscriber, connection, state, attempts, due_at, \
                 budget_start, held_ms, created_at) \
                 SELECT event_id, subscriber, connection, 'pending', 0, $4::bigint, $4::bigint, 0, $4::bigint \
                 FROM unnest($1::bigint[], $2::text[], $3::text[]) WITH ORDINALITY AS u(event_id, subscriber, \
                 connection, n) ORDER BY n",
                s,
            ),
            &[&event_ids, &subscribers, &connections, &now_ms],
        )
        .map_err(pg_error)?;
    }
    Ok(ids)
}

/// A delivery a claim gave up (its statement matched): store what that raises.
pub(super) fn given_up(
    tx: &mut Transaction<'_>,
    s: &str,
    raise: &dyn Raise,
    row: &ClaimRow,
    failure: &Failure,
    now_ms: i64,
) -> Result<(), StoreError> {
    let c = &row.candidate;
    let ended = EndedDelivery {
        id: c.id,
        event_id: row.event_id,
        event: &row.event,
        subscriber: &c.subscriber,
        parked: false,
        failure,
        attempts: c.record.attempts,
    };
    insert_events(tx, s, &raise.delivery_ended(&ended), now_ms).map(drop)
}

/// An outage's alert was written on its breaker: store what that raises.
pub(super) fn alerted(
    tx: &mut Transaction<'_>,
    s: &str,
    raise: &dyn Raise,
    alert: &BreakerAlert,
    now_ms: i64,
) -> Result<(), StoreError> {
    insert_events(tx, s, &raise.connection_unavailable(alert), now_ms).map(drop)
}

/// A breaker that opened at `opened_at_ms` closed at `now_ms`: store what that
/// raises.
pub(super) fn recovered(
    tx: &mut Transaction<'_>,
    s: &str,
    raise: &dyn Raise,
    connection: &str,
    opened_at_ms: Option<i64>,
    now_ms: i64,
) -> Result<(), StoreError> {
    let outage_ms = now_ms.saturating_sub(opened_at_ms.unwrap_or(now_ms)).max(0);
    insert_events(tx, s, &raise.connection_recovered(connection, outage_ms), now_ms).map(drop)
}
