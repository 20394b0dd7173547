//! Events beyond `emit`: the expansion of events written in SQL (`emit` of the
//! schema, in the application's own transaction), the listing of events with
//! their deliveries, replays, and the counts `status` shows.

use super::super::{
    DeliveryView, EventCounts, EventFilter, EventView, ExpandReport, Expansion, NewEvent, Replay, UnexpandedEvent,
};
use super::builtin::{insert_deliveries, insert_events_of, next_ids};
use super::reads::{VIEW_COLUMNS, view_of};
use super::{StoreError, col, pg_error, q, state_of};
use postgres::{Client, GenericClient, Row};

/// An event (`e`) joined with its deliveries (`d`), each reached by its key.
const EVENT_DELIVERIES: &str =
    "{s}.events e CROSS JOIN LATERAL unnest(e.delivery_ids) AS x(id) JOIN {s}.deliveries d ON d.id = x.id";

const EVENT_COLUMNS: &str = "e.id, e.name, e.payload, e.emitted_at, e.expanded, e.invalid_code, e.invalid_reason, \
     e.replay_of";

fn event_of(r: &Row) -> Result<EventView, StoreError> {
    let code: Option<String> = col(r, "invalid_code")?;
    let reason: Option<String> = col(r, "invalid_reason")?;
    Ok(EventView {
        id: col(r, "id")?,
        name: col(r, "name")?,
        payload: col(r, "payload")?,
        emitted_at_ms: col(r, "emitted_at")?,
        expanded: col(r, "expanded")?,
        invalid: code.map(|c| (c, reason.unwrap_or_default())),
        replay_of: col(r, "replay_of")?,
        deliveries: Vec::new(),
    })
}

/// An event's deliveries counted by state.
fn delivery_counts(tx: &mut impl GenericClient, s: &str, event: &mut EventView) -> Result<(), StoreError> {
    let rows = tx
        .query(
            &q(
                &format!("SELECT d.state, count(*) AS n FROM {EVENT_DELIVERIES} WHERE e.id = $1 GROUP BY d.state ORDER BY d.state"),
                s,
            ),
            &[&event.id],
        )
        .map_err(pg_error)?;
    for r in &rows {
        let state = state_of(&col::<String>(r, "state")?)?;
        event.deliveries.push((state, u64::try_from(col::<i64>(r, "n")?).unwrap_or(0)));
    }
    Ok(())
}

pub(super) fn expand(
    client: &mut Client,
    s: &str,
    now_ms: i64,
    limit: usize,
    expand: &mut dyn FnMut(&UnexpandedEvent) -> Expansion,
) -> Result<ExpandReport, StoreError> {
    let mut tx = client.transaction().map_err(pg_error)?;
    // The events are locked as they are read, and events another process holds
    // are skipped: processes expand different events, and never wait on each
    // other's.
    let rows = tx
        .query(
            &q(
                "SELECT id, name, payload FROM {s}.events WHERE NOT expanded ORDER BY id LIMIT $1 \
                 FOR UPDATE SKIP LOCKED",
                s,
            ),
            &[&i64::try_from(limit).unwrap_or(i64::MAX)],
        )
        .map_err(pg_error)?;
    let mut report = ExpandReport::default();
    if rows.is_empty() {
        tx.commit().map_err(pg_error)?;
        return Ok(report);
    }
    let mark = tx
        .prepare(&q(
            "UPDATE {s}.events SET expanded = true, invalid_code = $2, invalid_reason = $3, delivery_ids = $4 \
             WHERE id = $1 AND NOT expanded",
            s,
        ))
        .map_err(pg_error)?;
    for r in &rows {
        let e = UnexpandedEvent { id: col(r, "id")?, name: col(r, "name")?, payload: col(r, "payload")? };
        let decided = expand(&e);
        let (code, reason, deliveries) = match &decided {
            Expansion::Deliveries(d) => (None, None, d.as_slice()),
            Expansion::Invalid { code, reason } => (Some(code.as_str()), Some(reason.as_str()), &[][..]),
        };
        let (_, ids) = next_ids(&mut tx, s, 0, deliveries.len())?;
        // Guarded by itself as well as by the lock: an event expanded and
        // committed since it was read is not expanded again.
        if tx.execute(&mark, &[&e.id, &code, &reason, &ids]).map_err(pg_error)? == 0 {
            continue;
        }
        let subscribers: Vec<&str> = deliveries.iter().map(|d| d.subscriber.as_str()).collect();
        let connections: Vec<&str> = deliveries.iter().map(|d| d.connection.as_str()).collect();
        insert_deliveries(&mut tx, s, &ids, &vec![e.id; ids.len()], &subscribers, &connections, now_ms)?;
        match decided {
            Expansion::Deliveries(deliveries) => report.expanded.push((e.id, deliveries.len())),
            Expansion::Invalid { code, reason } => report.invalid.push((e.id, e.name, code, reason)),
        }
    }
    tx.commit().map_err(pg_error)?;
    Ok(report)
}

pub(super) fn list(c: &mut Client, s: &str, filter: &EventFilter) -> Result<Vec<EventView>, StoreError> {
    let mut tx = c.build_transaction().read_only(true).start().map_err(pg_error)?;
    let sql = q(
        &format!(
            "SELECT {EVENT_COLUMNS} FROM {{s}}.events e WHERE ($1::text IS NULL OR e.name = $1) \
             AND ($2::bigint IS NULL OR e.emitted_at >= $2) AND ($3::bigint IS NULL OR e.emitted_at < $3) \
             ORDER BY e.id DESC LIMIT $4"
        ),
        s,
    );
    let limit = filter.limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
    let rows = tx.query(&sql, &[&filter.name, &filter.since_ms, &filter.until_ms, &limit]).map_err(pg_error)?;
    let mut out = rows.iter().map(event_of).collect::<Result<Vec<_>, _>>()?;
    for e in &mut out {
        delivery_counts(&mut tx, s, e)?;
    }
    tx.commit().map_err(pg_error)?;
    Ok(out)
}

pub(super) fn one(c: &mut Client, s: &str, id: i64) -> Result<Option<(EventView, Vec<DeliveryView>)>, StoreError> {
    let mut tx = c.build_transaction().read_only(true).start().map_err(pg_error)?;
    let sql = q(&format!("SELECT {EVENT_COLUMNS} FROM {{s}}.events e WHERE e.id = $1"), s);
    let Some(row) = tx.query_opt(&sql, &[&id]).map_err(pg_error)? else {
        return Ok(None);
    };
    let mut event = event_of(&row)?;
    delivery_counts(&mut tx, s, &mut event)?;
    let sql = q(&format!("SELECT {VIEW_COLUMNS} FROM {EVENT_DELIVERIES} WHERE e.id = $1 ORDER BY d.id"), s);
    let deliveries = tx.query(&sql, &[&id]).map_err(pg_error)?.iter().map(view_of).collect::<Result<Vec<_>, _>>()?;
    tx.commit().map_err(pg_error)?;
    Ok(Some((event, deliveries)))
}

pub(super) fn replay(client: &mut Client, s: &str, replays: &[Replay], now_ms: i64) -> Result<Vec<i64>, StoreError> {
    let mut tx = client.transaction().map_err(pg_error)?;
    let events: Vec<(&NewEvent, Option<i64>)> = replays.iter().map(|r| (&r.event, Some(r.of))).collect();
    let ids = insert_events_of(&mut tx, s, &events, now_ms)?;
    tx.commit().map_err(pg_error)?;
    Ok(ids)
}

pub(super) fn counts(c: &mut Client, s: &str) -> Result<EventCounts, StoreError> {
    let row = c
        .query_one(
            &q(
                "SELECT (SELECT count(*) FROM {s}.events WHERE invalid_code IS NOT NULL) AS invalid, \
                 (SELECT count(*) FROM {s}.events WHERE NOT expanded) AS unexpanded",
                s,
            ),
            &[],
        )
        .map_err(pg_error)?;
    let names = c
        .query(&q("SELECT name, count(*) AS n FROM {s}.events GROUP BY name ORDER BY name", s), &[])
        .map_err(pg_error)?;
    let by_name = names
        .iter()
        .map(|r| Ok((col::<String>(r, "name")?, u64::try_from(col::<i64>(r, "n")?).unwrap_or(0))))
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(EventCounts {
        invalid: u64::try_from(col::<i64>(&row, "invalid")?).unwrap_or(0),
        unexpanded: u64::try_from(col::<i64>(&row, "unexpanded")?).unwrap_or(0),
        by_name,
    })
}
