//! Breaker rows, one per connection, each change one conditional statement;
//! held deliveries read and released.

use super::tx::Tx;
use super::{Error, RowOf, StoreError, by_name, count_in, schema};
use jadpo_check::program::BreakerState;
use jadpo_core::rules::breaker::{BreakerRow, Pause};
use jadpo_core::rules::{self, hold};
use jadpo_core::store::BreakerView;
use jadpo_core::store::rows::{HeldRow, HeldSet, LongestHeld};
use rusqlite::types::ToSql;
use rusqlite::{Connection, OptionalExtension, Row, named_params};

/// A breaker's columns (a macro so that the queries below can be `concat!`ed as
/// constants).
macro_rules! breaker_columns {
    () => {
        "connection, state, failures_in_a_row, opened_at, pause_ms, alerts, alerted_at, probe_delivery, \
         probe_lease_until, paused_at, paused_until, paused_by, pause_reason, rate_tat_us"
    };
}

/// A breaker's columns as every read of breakers lists them, the count of its
/// held deliveries last (a macro so that the queries below can be `concat!`ed
/// as constants).
macro_rules! breaker_read {
    ($held:literal) => {
        concat!("SELECT ", breaker_columns!(), ", ", $held, " AS held FROM jadpo_circuit_breakers b")
    };
}

/// Every breaker's row with the count of deliveries held for it; a `WHERE` may follow.
macro_rules! breakers_with_held {
    () => {
        breaker_read!(
            "(SELECT count(*) FROM jadpo_deliveries d WHERE d.state = 'held' AND d.held_connection = b.connection)"
        )
    };
}

/// A breaker's row with no held count (a claim reads it per connection, and the
/// count would cost a walk of the held deliveries).
const BREAKER_ALONE: &str = concat!(breaker_read!("0"), " WHERE connection = ?1");

/// Every breaker's row with the count of deliveries held for it; a `WHERE` may follow.
pub(super) const BREAKERS_WITH_HELD: &str = breakers_with_held!();

/// The positions of a breaker's columns in what [`breaker_read`] selects.
mod at {
    const COLUMNS: &str = concat!(breaker_columns!(), ", held");
    pub(super) const CONNECTION: usize = crate::column_at(COLUMNS, "connection");
    pub(super) const STATE: usize = crate::column_at(COLUMNS, "state");
    pub(super) const FAILURES: usize = crate::column_at(COLUMNS, "failures_in_a_row");
    pub(super) const OPENED_AT: usize = crate::column_at(COLUMNS, "opened_at");
    pub(super) const PAUSE_MS: usize = crate::column_at(COLUMNS, "pause_ms");
    pub(super) const ALERTS: usize = crate::column_at(COLUMNS, "alerts");
    pub(super) const ALERTED_AT: usize = crate::column_at(COLUMNS, "alerted_at");
    pub(super) const PROBE: usize = crate::column_at(COLUMNS, "probe_delivery");
    pub(super) const PROBE_LEASE_UNTIL: usize = crate::column_at(COLUMNS, "probe_lease_until");
    pub(super) const PAUSED_AT: usize = crate::column_at(COLUMNS, "paused_at");
    pub(super) const PAUSED_UNTIL: usize = crate::column_at(COLUMNS, "paused_until");
    pub(super) const PAUSED_BY: usize = crate::column_at(COLUMNS, "paused_by");
    pub(super) const PAUSE_REASON: usize = crate::column_at(COLUMNS, "pause_reason");
    pub(super) const RATE_TAT_US: usize = crate::column_at(COLUMNS, "rate_tat_us");
    pub(super) const HELD: usize = crate::column_at(COLUMNS, "held");
}

/// Held deliveries whose connection has no breaker that is not closed, nor a
/// pause: a release racing a hold can leave these behind, and the tick's sweep
/// releases them (a pause whose time has come is ended by the sweep first).
macro_rules! held_without_open_breaker {
    () => {
        "state = 'held' AND NOT EXISTS (SELECT 1 FROM \
     jadpo_circuit_breakers b WHERE b.connection = held_connection AND (b.state <> 'closed' \
     OR b.paused_at IS NOT NULL))"
    };
}
pub(super) use held_without_open_breaker;

/// [`held_without_open_breaker`]'s condition.
#[cfg(test)]
pub(super) const HELD_WITHOUT_OPEN_BREAKER: &str = held_without_open_breaker!();

/// The breakers with a pause recorded (a `WHERE` for [`read_breakers`]).
macro_rules! paused {
    () => {
        "WHERE paused_at IS NOT NULL"
    };
}
pub(super) const PAUSED: &str = paused!();

/// The breakers the tick's sweep looks at: those not closed, and those paused.
macro_rules! swept {
    () => {
        "WHERE state <> 'closed' OR paused_at IS NOT NULL"
    };
}
pub(super) const SWEPT: &str = swept!();

/// The order [`read_breakers`] gives its rows in.
macro_rules! by_connection {
    () => {
        " ORDER BY connection"
    };
}

/// The whole statements [`read_breakers`] runs on a store of this version, by
/// filter: made once, not formatted for every read.
const READS: [(&str, &str); 3] = [
    (PAUSED, concat!(breakers_with_held!(), " ", paused!(), by_connection!())),
    (SWEPT, concat!(breakers_with_held!(), " ", swept!(), by_connection!())),
    ("", concat!(breakers_with_held!(), " ", by_connection!())),
];

/// A breaker's row read by position (see [`at`]), with its `held` count.
pub(super) fn breaker_of(r: &Row<'_>) -> Result<BreakerView, Error> {
    let state = r.get_ref(at::STATE)?;
    let state = state
        .as_str()
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(at::STATE, state.data_type(), Box::new(e)))?;
    let state =
        BreakerState::parse(state).ok_or_else(|| StoreError::Corrupt(format!("unknown breaker state `{state}`")))?;
    let connection: String = r.get(at::CONNECTION)?;
    let of = RowOf::Breaker(&connection);
    Ok(BreakerView {
        row: BreakerRow {
            state,
            failures_in_a_row: count_in(r.get_ref(at::FAILURES)?, "failures_in_a_row", of)?,
            opened_at_ms: r.get(at::OPENED_AT)?,
            pause_ms: count_in(r.get_ref(at::PAUSE_MS)?, "pause_ms", of)?,
            alerts: count_in(r.get_ref(at::ALERTS)?, "alerts", of)?,
            alerted: r.get::<_, Option<i64>>(at::ALERTED_AT)?.is_some(),
            probe: r.get(at::PROBE)?,
            probe_lease_until_ms: r.get(at::PROBE_LEASE_UNTIL)?,
            pause: match r.get::<_, Option<i64>>(at::PAUSED_AT)? {
                Some(at_ms) => Some(Pause {
                    at_ms,
                    until_ms: r.get(at::PAUSED_UNTIL)?,
                    by: r.get::<_, Option<String>>(at::PAUSED_BY)?.unwrap_or_default(),
                    reason: r.get(at::PAUSE_REASON)?,
                }),
                None => None,
            },
            rate_tat_us: r.get(at::RATE_TAT_US)?,
        },
        held: u64::try_from(r.get::<_, i64>(at::HELD)?).unwrap_or(0),
        connection,
    })
}

/// Every breaker matching `filter` (a `WHERE` clause or nothing), with held counts.
pub(super) fn read_breakers(conn: &Connection, filter: &str) -> Result<Vec<BreakerView>, Error> {
    read_breakers_of(conn, filter, schema::VERSION)
}

/// [`read_breakers`] on a store of schema `version`, which may be older than
/// pauses or rates (a read-only handle on a store not migrated yet reads every
/// one as unpaused, with no rate).
pub(super) fn read_breakers_of(conn: &Connection, filter: &str, version: i64) -> Result<Vec<BreakerView>, Error> {
    let made;
    let sql = match READS.iter().find(|(f, _)| *f == filter) {
        Some((_, sql)) if version >= schema::VERSION_WITH_KEYS => *sql,
        _ => {
            let mut sql = BREAKERS_WITH_HELD.to_string();
            if version < schema::VERSION_WITH_PAUSES {
                sql = sql.replacen(
                    "paused_at, paused_until, paused_by, pause_reason",
                    "NULL AS paused_at, NULL AS paused_until, NULL AS paused_by, NULL AS pause_reason",
                    1,
                );
            }
            if version < schema::VERSION_WITH_KEYS {
                sql = sql.replacen("rate_tat_us", "NULL AS rate_tat_us", 1);
            }
            made = format!("{sql} {filter}{}", by_connection!());
            made.as_str()
        }
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query([])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(breaker_of(r)?);
    }
    Ok(out)
}

/// A connection's breaker row, if it has one.
pub(super) fn read_breaker(tx: &Tx<'_>, connection: &str) -> Result<Option<BreakerRow>, Error> {
    let mut stmt = tx.prepare_cached(BREAKER_ALONE)?;
    let mut rows = stmt.query([connection])?;
    match rows.next()? {
        Some(r) => Ok(Some(breaker_of(r)?.row)),
        None => Ok(None),
    }
}

/// Write a breaker's next row in one conditional statement: only if the row is
/// still as it was read (`old`; `None` = no row yet), so that of processes
/// sharing the store exactly one makes each change. Returns whether it did.
pub(super) fn write_breaker(
    tx: &Tx<'_>,
    connection: &str,
    old: Option<&BreakerRow>,
    next: &BreakerRow,
    now_ms: i64,
) -> Result<bool, Error> {
    let pause_ms = rules::ms_i64(next.pause_ms);
    let state = next.state.as_str();
    let paused_at = next.pause.as_ref().map(|p| p.at_ms);
    let paused_until = next.pause.as_ref().and_then(|p| p.until_ms);
    let paused_by = next.pause.as_ref().map(|p| p.by.as_str());
    let pause_reason = next.pause.as_ref().and_then(|p| p.reason.as_deref());
    // The next row's values, named once for both statements.
    let mut values: Vec<(&str, &dyn ToSql)> = vec![
        (":connection", &connection),
        (":state", &state),
        (":failures", &next.failures_in_a_row),
        (":opened_at", &next.opened_at_ms),
        (":pause_ms", &pause_ms),
        (":alerts", &next.alerts),
        (":alerted", &next.alerted),
        (":probe", &next.probe),
        (":probe_lease_until", &next.probe_lease_until_ms),
        (":now", &now_ms),
        (":paused_at", &paused_at),
        (":paused_until", &paused_until),
        (":paused_by", &paused_by),
        (":pause_reason", &pause_reason),
        (":rate_tat_us", &next.rate_tat_us),
    ];
    let n = match old {
        None => by_name!().execute(
            &mut tx.prepare_cached(
                "INSERT INTO jadpo_circuit_breakers (connection, state, failures_in_a_row, opened_at, \
                 pause_ms, alerts, alerted_at, probe_delivery, probe_lease_until, updated_at, paused_at, \
                 paused_until, paused_by, pause_reason, rate_tat_us) \
                 VALUES (:connection, :state, :failures, :opened_at, :pause_ms, :alerts, \
                 CASE WHEN :alerted THEN :now END, :probe, :probe_lease_until, :now, :paused_at, \
                 :paused_until, :paused_by, :pause_reason, :rate_tat_us) \
                 ON CONFLICT (connection) DO NOTHING",
            )?,
            &values,
        )?,
        Some(old) => {
            let old_state = old.state.as_str();
            // The rate's time only moves forward, so a change that is not of the
            // rate keeps the newer one; a change of the rate (a claim's call, a
            // `429`) is conditional on the rate as read.
            let rate_changes = next.rate_tat_us != old.rate_tat_us;
            let old_paused_at = old.pause.as_ref().map(|p| p.at_ms);
            values.extend_from_slice(&[
                (":old_paused_at", &old_paused_at as &dyn ToSql),
                (":old_state", &old_state),
                (":old_failures", &old.failures_in_a_row),
                (":old_opened_at", &old.opened_at_ms),
                (":old_probe", &old.probe),
                (":old_alerts", &old.alerts),
                (":old_rate_tat_us", &old.rate_tat_us),
                (":rate_changes", &rate_changes),
            ]);
            let mut stmt = tx.prepare_cached(
                "UPDATE jadpo_circuit_breakers SET state = :state, failures_in_a_row = :failures, \
                 opened_at = :opened_at, pause_ms = :pause_ms, alerts = :alerts, \
                 alerted_at = CASE WHEN :alerted THEN COALESCE(alerted_at, :now) END, \
                 probe_delivery = :probe, probe_lease_until = :probe_lease_until, updated_at = :now, \
                 paused_at = :paused_at, paused_until = :paused_until, paused_by = :paused_by, \
                 pause_reason = :pause_reason, rate_tat_us = CASE WHEN :rate_tat_us IS NULL THEN rate_tat_us \
                 WHEN rate_tat_us IS NULL THEN :rate_tat_us ELSE max(rate_tat_us, :rate_tat_us) END \
                 WHERE connection = :connection AND state = :old_state AND failures_in_a_row = :old_failures \
                 AND opened_at IS :old_opened_at AND probe_delivery IS :old_probe AND alerts = :old_alerts \
                 AND paused_at IS :old_paused_at AND (NOT :rate_changes OR rate_tat_us IS :old_rate_tat_us)",
            )?;
            by_name!().execute(&mut stmt, &values)?
        }
    };
    Ok(n == 1)
}

/// Release one held delivery at `now_ms`, as it was read: pending, due at
/// once, its time held counted by the core's rule. Returns whether the row was
/// as read and changed.
pub(super) fn release_one(tx: &Tx<'_>, row: &HeldRow, now_ms: i64) -> Result<bool, Error> {
    let n = by_name!().execute(
        &mut tx.prepare_cached(
            "UPDATE jadpo_deliveries SET state = 'pending', due_at = :now, held_ms = :held_ms_after, \
             held_since = NULL, held_connection = NULL \
             WHERE id = :id AND state = 'held' AND held_ms = :held_ms AND held_since IS :held_since",
        )?,
        named_params! {
            ":id": row.id,
            ":now": now_ms,
            ":held_ms": row.held_ms,
            ":held_since": row.held_since_ms,
            ":held_ms_after": hold::held_ms_after_release(row.held_ms, row.held_since_ms, now_ms),
        },
    )?;
    Ok(n == 1)
}

/// The held deliveries of `which`.
pub(super) fn held(tx: &Tx<'_>, which: HeldSet<'_>) -> Result<Vec<HeldRow>, Error> {
    let of =
        |r: &Row<'_>| Ok(HeldRow { id: r.get("id")?, held_ms: r.get("held_ms")?, held_since_ms: r.get("held_since")? });
    let rows = match which {
        HeldSet::Of { connection, one } => tx
            .prepare_cached(
                "SELECT id, held_ms, held_since FROM jadpo_deliveries WHERE state = 'held' \
                 AND held_connection = :connection AND (:one IS NULL OR id = :one)",
            )?
            .query_map(named_params! {":connection": connection, ":one": one}, of)?
            .collect::<Result<_, _>>()?,
        HeldSet::Unheld => tx
            .prepare_cached(concat!(
                "SELECT id, held_ms, held_since FROM jadpo_deliveries WHERE ",
                held_without_open_breaker!()
            ))?
            .query_map([], of)?
            .collect::<Result<_, _>>()?,
    };
    Ok(rows)
}

/// Release the connection's held deliveries, due at `now_ms`. Returns how many.
pub(super) fn release_held(tx: &Tx<'_>, connection: &str, now_ms: i64) -> Result<u64, Error> {
    release(tx, &held(tx, HeldSet::Of { connection, one: None })?, now_ms)
}

/// Release held deliveries as read, each by [`release_one`]. Returns how many
/// were as read and changed.
pub(super) fn release(tx: &Tx<'_>, rows: &[HeldRow], now_ms: i64) -> Result<u64, Error> {
    let mut released = 0;
    for row in rows {
        if release_one(tx, row, now_ms)? {
            released += 1;
        }
    }
    Ok(released)
}

/// How many deliveries an outage of `connection` holds at `now_ms`: those held,
/// and those due that its open breaker holds at their claim.
pub(super) fn held_by_outage(tx: &Tx<'_>, connection: &str, now_ms: i64) -> Result<u64, Error> {
    let n: i64 = tx
        .prepare_cached(
            "SELECT (SELECT count(*) FROM jadpo_deliveries WHERE state = 'held' AND held_connection = :c) + \
             (SELECT count(*) FROM jadpo_deliveries WHERE state = 'pending' AND due_at <= :now AND connection = :c)",
        )?
        .query_row(named_params! {":c": connection, ":now": now_ms}, |r| r.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// The delivery `connection` has held longest, with its subscriber.
pub(super) fn held_longest(tx: &Tx<'_>, connection: &str) -> Result<Option<LongestHeld>, Error> {
    Ok(tx
        .prepare_cached(
            "SELECT id, subscriber FROM jadpo_deliveries WHERE state = 'held' \
             AND held_connection = ?1 ORDER BY held_since, id LIMIT 1",
        )?
        .query_row([connection], |r| Ok(LongestHeld { id: r.get("id")?, subscriber: r.get("subscriber")? }))
        .optional()?)
}
