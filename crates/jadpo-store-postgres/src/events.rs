//! Events beyond `emit`: the expansion of events written in SQL (`emit` of the
//! schema, in the application's own transaction), the listing of events with
//! their deliveries, replays, and the counts `status` shows.

use super::builtin::DeliveryIds;
use super::reads::{view_columns, view_of};
use super::schema::VERSION_WITH_VERSIONS;
use super::unnest::Columns;
use super::versions::WRITER_VERSION;
use super::{StoreError, col, pg_error, state_of};
use jadpo_core::store::{DeliveryView, EventCounts, EventFilter, EventView, Expansion, NewDelivery, UnexpandedEvent};
use postgres::{Client, GenericClient, Row, Transaction};
use std::collections::HashSet;

/// An event (`e`) joined with its deliveries (`d`), each reached by its key.
macro_rules! event_deliveries {
    () => {
        "events e CROSS JOIN LATERAL unnest(e.delivery_ids) AS x(id) JOIN deliveries d ON d.id = x.id"
    };
}

/// An event's version column as listed: its own, or none on a schema older
/// than the versions (read by a handle that only reads).
macro_rules! version_column {
    (true) => {
        "e.version"
    };
    (false) => {
        "NULL::bigint AS version"
    };
}

/// An event's columns, as [`event_of`] reads them, with its version's
/// (`true`) or none in its place (`false`).
macro_rules! event_columns {
    ($version:tt) => {
        concat!(
            "e.id, e.name, e.payload, e.emitted_at, e.expanded, e.invalid_code, e.invalid_reason, e.replay_of, ",
            version_column!($version)
        )
    };
}

/// Events newest first, by name (`$1`) and emitted from `$2` until `$3` when
/// given, at most `$4`.
macro_rules! list_events {
    ($version:tt) => {
        concat!(
            "SELECT ",
            event_columns!($version),
            " FROM events e WHERE ($1::text IS NULL OR e.name = $1) \
             AND ($2::bigint IS NULL OR e.emitted_at >= $2) AND ($3::bigint IS NULL OR e.emitted_at < $3) \
             ORDER BY e.id DESC LIMIT $4"
        )
    };
}

/// The event `$1`.
macro_rules! one_event {
    ($version:tt) => {
        concat!("SELECT ", event_columns!($version), " FROM events e WHERE e.id = $1")
    };
}

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
        version: col(r, "version")?,
        deliveries: Vec::new(),
    })
}

/// An event's deliveries counted by state.
fn delivery_counts(tx: &mut impl GenericClient, event: &mut EventView) -> Result<(), StoreError> {
    let rows = tx
        .query(
            concat!(
                "SELECT d.state, count(*) AS n FROM ",
                event_deliveries!(),
                " WHERE e.id = $1 GROUP BY d.state ORDER BY d.state"
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

/// Up to `limit` events not expanded yet, oldest first, locked as they are
/// read; events another process holds are skipped: processes expand different
/// events, and never wait on each other's.
pub(super) fn unexpanded(tx: &mut Transaction<'_>, limit: usize) -> Result<Vec<UnexpandedEvent>, StoreError> {
    tx.query(
        "SELECT id, name, payload FROM events WHERE NOT expanded ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED",
        &[&i64::try_from(limit).unwrap_or(i64::MAX)],
    )
    .map_err(pg_error)?
    .iter()
    .map(|r| Ok(UnexpandedEvent { id: col(r, "id")?, name: col(r, "name")?, payload: col(r, "payload")? }))
    .collect()
}

/// Whether any event waits to be expanded.
pub(super) fn expansion_waiting(c: &mut Client) -> Result<bool, StoreError> {
    let row =
        c.query_one("SELECT EXISTS (SELECT 1 FROM events WHERE NOT expanded) AS waiting", &[]).map_err(pg_error)?;
    col(&row, "waiting")
}

/// Mark the events read as expanded (or invalid), each with the ids of its
/// deliveries, and write those deliveries, in three statements. Each mark is
/// guarded by itself as well as by the lock: an event found expanded already
/// when it is written is not expanded again, nor given deliveries. Returns, in
/// order, whether each was marked.
pub(super) fn write_expansions(
    tx: &mut Transaction<'_>,
    events: &[UnexpandedEvent],
    decided: &[Expansion],
    now_ms: i64,
) -> Result<Vec<bool>, StoreError> {
    let none: &[NewDelivery] = &[];
    let made = decided
        .iter()
        .map(|d| match d {
            Expansion::Deliveries(d) => d.as_slice(),
            Expansion::Invalid { .. } => none,
        })
        .collect();
    let batch = DeliveryIds::of(tx, made)?;
    let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
    let mut u = Columns::default();
    u.add("id", "bigint", ids.as_slice())
        .add("code", "text", decided.iter().map(|d| invalid(d).map(|(code, _)| code)).collect::<Vec<Option<&str>>>())
        .add(
            "reason",
            "text",
            decided.iter().map(|d| invalid(d).map(|(_, reason)| reason)).collect::<Vec<Option<&str>>>(),
        )
        .add("lo", "bigint", batch.lo.as_slice())
        .add("hi", "bigint", batch.hi.as_slice());
    let marked = tx
        .query(
            &format!(
                "UPDATE events e SET expanded = true, invalid_code = u.code, invalid_reason = u.reason, \
                     version = {}, delivery_ids = ($1::bigint[])[u.lo:u.hi] FROM {} \
                     WHERE e.id = u.id AND NOT e.expanded RETURNING e.id",
                WRITER_VERSION,
                u.rows_clause(2)
            ),
            &u.params_after(&[&batch.ids]),
        )
        .map_err(pg_error)?
        .iter()
        .map(|r| col::<i64>(r, "id"))
        .collect::<Result<HashSet<i64>, _>>()?;
    drop(u);
    batch.insert(tx, &ids, |event| marked.contains(&event), now_ms)?;
    Ok(ids.iter().map(|id| marked.contains(id)).collect())
}

pub(super) fn list(c: &mut Client, filter: &EventFilter, schema: i64) -> Result<Vec<EventView>, StoreError> {
    let mut tx = c.build_transaction().read_only(true).start().map_err(pg_error)?;
    let sql = if schema >= VERSION_WITH_VERSIONS { list_events!(true) } else { list_events!(false) };
    let limit = filter.limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
    let rows = tx.query(sql, &[&filter.name, &filter.since_ms, &filter.until_ms, &limit]).map_err(pg_error)?;
    let mut out = rows.iter().map(event_of).collect::<Result<Vec<_>, _>>()?;
    for e in &mut out {
        delivery_counts(&mut tx, e)?;
    }
    tx.commit().map_err(pg_error)?;
    Ok(out)
}

pub(super) fn one(c: &mut Client, id: i64, schema: i64) -> Result<Option<(EventView, Vec<DeliveryView>)>, StoreError> {
    let mut tx = c.build_transaction().read_only(true).start().map_err(pg_error)?;
    let sql = if schema >= VERSION_WITH_VERSIONS { one_event!(true) } else { one_event!(false) };
    let Some(row) = tx.query_opt(sql, &[&id]).map_err(pg_error)? else {
        return Ok(None);
    };
    let mut event = event_of(&row)?;
    delivery_counts(&mut tx, &mut event)?;
    const DELIVERIES: &str =
        concat!("SELECT ", view_columns!(), " FROM ", event_deliveries!(), " WHERE e.id = $1 ORDER BY d.id");
    let deliveries =
        tx.query(DELIVERIES, &[&id]).map_err(pg_error)?.iter().map(view_of).collect::<Result<Vec<_>, _>>()?;
    tx.commit().map_err(pg_error)?;
    Ok(Some((event, deliveries)))
}

pub(super) fn counts(c: &mut Client) -> Result<EventCounts, StoreError> {
    let row = c
        .query_one(
            "SELECT (SELECT count(*) FROM events WHERE invalid_code IS NOT NULL) AS invalid, \
                 (SELECT count(*) FROM events WHERE NOT expanded) AS unexpanded",
            &[],
        )
        .map_err(pg_error)?;
    let names = c.query("SELECT name, count(*) AS n FROM events GROUP BY name ORDER BY name", &[]).map_err(pg_error)?;
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

/// An invalid event's code and reason.
fn invalid(decided: &Expansion) -> Option<(&str, &str)> {
    match decided {
        Expansion::Deliveries(_) => None,
        Expansion::Invalid { code, reason } => Some((code.as_str(), reason.as_str())),
    }
}
