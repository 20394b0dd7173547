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
    let events: Vec<(&NewEvent, Option<i64>)> = events.iter().map(|e| (e, None)).collect();
    insert_events_of(tx, s, &events, now_ms)
}

/// Store events, each with the event it replays if any, and their deliveries, as
/// [`insert_events`] does.
pub(super) fn insert_events_of(
    tx: &mut Transaction<'_>,
    s: &str,
    events: &[(&NewEvent, Option<i64>)],
    now_ms: i64,
) -> Result<Vec<i64>, StoreError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    // The ids first, taken from the columns' own sequences in emit order, so that
    // each event names its deliveries and each delivery its event in the same
    // bulk inserts.
    let n_deliveries = events.iter().map(|(e, _)| e.deliveries.len()).sum();
    let (ids, delivery_ids) = next_ids(tx, s, events.len(), n_deliveries)?;
    let names: Vec<&str> = events.iter().map(|(e, _)| e.name.as_str()).collect();
    let payloads: Vec<&str> = events.iter().map(|(e, _)| e.payload.as_str()).collect();
    let replay_of: Vec<Option<i64>> = events.iter().map(|(_, of)| *of).collect();
    // Each event's deliveries are the slice [lo, hi] (1-based) of all the batch's
    // delivery ids; an event with none has hi = lo - 1 (an empty slice).
    let (mut lo, mut hi) = (Vec::with_capacity(events.len()), Vec::with_capacity(events.len()));
    let (mut event_ids, mut subscribers, mut connections) = (vec![], vec![], vec![]);
    for ((e, _), &id) in events.iter().zip(&ids) {
        lo.push(event_ids.len() as i64 + 1);
        for d in &e.deliveries {
            event_ids.push(id);
            subscribers.push(d.subscriber.as_str());
            connections.push(d.connection.as_str());
        }
        hi.push(event_ids.len() as i64);
    }
    tx.execute(
        &q(
            "INSERT INTO {s}.events (id, name, payload, emitted_at, replay_of, delivery_ids) \
             SELECT id, name, payload, $4::bigint, replay_of, ($6::bigint[])[lo:hi] \
             FROM unnest($1::bigint[], $2::text[], $3::text[], $5::bigint[], $7::bigint[], $8::bigint[]) \
             AS u(id, name, payload, replay_of, lo, hi)",
            s,
        ),
        &[&ids, &names, &payloads, &now_ms, &replay_of, &delivery_ids, &lo, &hi],
    )
    .map_err(pg_error)?;
    insert_deliveries(tx, s, &delivery_ids, &event_ids, &subscribers, &connections, now_ms)?;
    Ok(ids)
}

/// `events` fresh event ids and `deliveries` fresh delivery ids, each from its
/// column's sequence, in order.
pub(super) fn next_ids(
    tx: &mut Transaction<'_>,
    s: &str,
    events: usize,
    deliveries: usize,
) -> Result<(Vec<i64>, Vec<i64>), StoreError> {
    let row = tx
        .query_one(
            &q(
                "SELECT ARRAY(SELECT nextval(pg_get_serial_sequence('{s}.events', 'id')) \
                 FROM generate_series(1, $1::bigint)) AS events, \
                 ARRAY(SELECT nextval(pg_get_serial_sequence('{s}.deliveries', 'id')) \
                 FROM generate_series(1, $2::bigint)) AS deliveries",
                s,
            ),
            &[&(events as i64), &(deliveries as i64)],
        )
        .map_err(pg_error)?;
    let mut events: Vec<i64> = col(&row, "events")?;
    let mut deliveries: Vec<i64> = col(&row, "deliveries")?;
    events.sort_unstable();
    deliveries.sort_unstable();
    Ok((events, deliveries))
}

/// Write deliveries with the ids given (see [`next_ids`]), each of the event
/// named beside it, pending and due at `now_ms` with a fresh budget.
pub(super) fn insert_deliveries(
    tx: &mut Transaction<'_>,
    s: &str,
    ids: &[i64],
    event_ids: &[i64],
    subscribers: &[&str],
    connections: &[&str],
    now_ms: i64,
) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    tx.execute(
        &q(
            "INSERT INTO {s}.deliveries (id, event_id, subscriber, connection, state, attempts, due_at, \
             budget_start, held_ms, created_at) \
             SELECT id, event_id, subscriber, connection, 'pending', 0, $5::bigint, $5::bigint, 0, $5::bigint \
             FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) AS u(id, event_id, subscriber, connection)",
            s,
        ),
        &[&ids, &event_ids, &subscribers, &connections, &now_ms],
    )
    .map_err(pg_error)?;
    Ok(())
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
