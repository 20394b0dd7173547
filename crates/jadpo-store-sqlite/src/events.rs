//! Events beyond `emit`: the expansion of events written in SQL, the listing of
//! events with their deliveries, replays, and the counts `status` shows.

use super::reads::{view_columns, view_of};
use super::schema::VERSION_WITH_VERSIONS;
use super::tx::Tx;
use super::{Error, state_of};
use jadpo_core::store::{DeliveryView, EventCounts, EventFilter, EventView, NewDelivery};
use rusqlite::{Connection, Row, named_params, params};

/// The columns of an event as listed; `states` is false on a store older than
/// the events' states (read-only handles only), which reads every event as
/// expanded and valid.
fn event_columns(states: bool) -> &'static str {
    if states {
        "e.id, e.name, e.payload, e.emitted_at, e.expanded, e.invalid_code, e.invalid_reason, e.replay_of"
    } else {
        "e.id, e.name, e.payload, e.emitted_at, 1 AS expanded, NULL AS invalid_code, NULL AS invalid_reason, \
         NULL AS replay_of"
    }
}

/// The version column of an event as listed: none on a store older than the
/// versions (read-only handles only).
fn version_column(schema: i64) -> &'static str {
    if schema >= VERSION_WITH_VERSIONS { "e.version" } else { "NULL AS version" }
}

fn event_of(r: &Row<'_>) -> Result<EventView, Error> {
    let code: Option<String> = r.get("invalid_code")?;
    let reason: Option<String> = r.get("invalid_reason")?;
    Ok(EventView {
        id: r.get("id")?,
        name: r.get("name")?,
        payload: r.get("payload")?,
        emitted_at_ms: r.get("emitted_at")?,
        expanded: r.get::<_, i64>("expanded")? != 0,
        invalid: code.map(|c| (c, reason.unwrap_or_default())),
        replay_of: r.get("replay_of")?,
        version: r.get("version")?,
        deliveries: Vec::new(),
    })
}

/// An event's deliveries counted by state.
fn delivery_counts(tx: &Tx<'_>, event: &mut EventView) -> Result<(), Error> {
    let mut stmt = tx.prepare_cached(
        "SELECT state, count(*) AS n FROM jadpo_deliveries WHERE event_id = ?1 GROUP BY state ORDER BY state",
    )?;
    let mut rows = stmt.query([event.id])?;
    while let Some(r) = rows.next()? {
        let state = state_of(&r.get::<_, String>("state")?)?;
        event.deliveries.push((state, u64::try_from(r.get::<_, i64>("n")?).unwrap_or(0)));
    }
    Ok(())
}

/// Write an event's deliveries, due at once with a fresh budget.
pub(super) fn insert_deliveries(
    tx: &Tx<'_>,
    event_id: i64,
    deliveries: &[NewDelivery],
    now_ms: i64,
) -> Result<(), Error> {
    let mut del = tx.prepare_cached(
        "INSERT INTO jadpo_deliveries (event_id, subscriber, connection, state, \
         attempts, due_at, budget_start, held_ms, created_at, order_key) \
         VALUES (?1, ?2, ?3, 'pending', 0, ?4, ?4, 0, ?4, ?5)",
    )?;
    for d in deliveries {
        del.execute(params![event_id, d.subscriber, d.connection, now_ms, d.order_key])?;
    }
    Ok(())
}

/// Mark an event expanded (invalid with `code` and `reason` when given), only
/// while it is not yet: returns whether it was, and so whether its deliveries
/// are this caller's to write.
pub(super) fn mark_expanded(tx: &Tx<'_>, id: i64, code: Option<&str>, reason: Option<&str>) -> Result<bool, Error> {
    let marked = tx
        .prepare_cached(
            "UPDATE jadpo_events SET expanded = 1, invalid_code = ?2, invalid_reason = ?3, \
             version = (SELECT version FROM temp.jadpo_writer) WHERE id = ?1 AND expanded = 0",
        )?
        .execute(params![id, code, reason])?;
    Ok(marked == 1)
}

pub(super) fn list(
    conn: &mut Connection,
    filter: &EventFilter,
    states: bool,
    schema: i64,
) -> Result<Vec<EventView>, Error> {
    // One read transaction: the events and their counts are of one moment.
    let tx = Tx::deferred(conn)?;
    let mut out = Vec::new();
    {
        let sql = format!(
            "SELECT {}, {} FROM jadpo_events e \
             WHERE (:name IS NULL OR e.name = :name) AND (:since IS NULL OR e.emitted_at >= :since) \
             AND (:until IS NULL OR e.emitted_at < :until) ORDER BY e.id DESC LIMIT :limit",
            event_columns(states),
            version_column(schema)
        );
        let mut stmt = tx.prepare_cached(&sql)?;
        let mut rows = stmt.query(named_params! {
            ":name": filter.name.as_deref(),
            ":since": filter.since_ms,
            ":until": filter.until_ms,
            ":limit": filter.limit.map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX)),
        })?;
        while let Some(r) = rows.next()? {
            out.push(event_of(r)?);
        }
    }
    for e in &mut out {
        delivery_counts(&tx, e)?;
    }
    Ok(out)
}

pub(super) fn one(
    conn: &mut Connection,
    id: i64,
    states: bool,
    version: i64,
) -> Result<Option<(EventView, Vec<DeliveryView>)>, Error> {
    let tx = Tx::deferred(conn)?;
    let mut event = {
        let sql = format!(
            "SELECT {}, {} FROM jadpo_events e WHERE e.id = ?1",
            event_columns(states),
            version_column(version)
        );
        let mut stmt = tx.prepare_cached(&sql)?;
        let mut rows = stmt.query([id])?;
        match rows.next()? {
            Some(r) => event_of(r)?,
            None => return Ok(None),
        }
    };
    delivery_counts(&tx, &mut event)?;
    let mut deliveries = Vec::new();
    {
        let sql = format!(
            "SELECT {} FROM jadpo_deliveries d JOIN jadpo_events e ON e.id = d.event_id \
             WHERE d.event_id = ?1 ORDER BY d.id",
            view_columns(version)
        );
        let mut stmt = tx.prepare_cached(&sql)?;
        let mut rows = stmt.query([id])?;
        while let Some(r) = rows.next()? {
            deliveries.push(view_of(r)?);
        }
    }
    Ok(Some((event, deliveries)))
}

pub(super) fn counts(conn: &mut Connection, states: bool) -> Result<EventCounts, Error> {
    let by_name = conn
        .prepare("SELECT name, count(*) FROM jadpo_events GROUP BY name ORDER BY name")?
        .query_map([], |r| Ok((r.get::<_, String>(0)?, u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0))))?
        .collect::<Result<Vec<_>, _>>()?;
    if !states {
        return Ok(EventCounts { by_name, ..EventCounts::default() });
    }
    let (invalid, unexpanded): (i64, i64) = conn.query_row(
        "SELECT (SELECT count(*) FROM jadpo_events WHERE invalid_code IS NOT NULL), \
         (SELECT count(*) FROM jadpo_events WHERE expanded = 0)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(EventCounts {
        invalid: u64::try_from(invalid).unwrap_or(0),
        unexpanded: u64::try_from(unexpanded).unwrap_or(0),
        by_name,
    })
}

#[cfg(test)]
mod tests {
    use super::mark_expanded;
    use crate::SqliteStore;
    use crate::tx::Tx;

    /// An event another process expanded after this one read it is not marked
    /// again (its deliveries are not written twice).
    #[test]
    fn an_event_expanded_since_it_was_read_is_not_expanded_again() {
        let store = SqliteStore::open_in_memory().expect("open");
        let mut conn = store.lock();
        conn.execute_batch(
            "INSERT INTO jadpo_events (id, name, payload, emitted_at, expanded) VALUES (1, 'Paid', '{}', 0, 0)",
        )
        .expect("an event written in SQL");
        let tx = Tx::immediate(&mut conn).expect("begin");
        assert!(mark_expanded(&tx, 1, None, None).expect("mark"), "the first mark matches");
        assert!(!mark_expanded(&tx, 1, Some("ingest.unknown_event"), Some("stale")).expect("mark"));
        let code: Option<String> =
            tx.query_row("SELECT invalid_code FROM jadpo_events WHERE id = 1", [], |r| r.get(0)).expect("read");
        assert_eq!(code, None, "the stale mark changed nothing");
    }
}
