//! Breaker rows, shared by every process: each change one guarded statement; an
//! outcome's count that loses a race is read again and counted again. Held
//! deliveries read (locked) and released.

use super::unnest::Columns;
use super::{RowOf, StoreError, col, count_of, pg_error};
use jadpo_check::program::BreakerState;
use jadpo_core::rules::breaker::{BreakerRow, Pause};
use jadpo_core::rules::{self, hold};
use jadpo_core::store::BreakerView;
use jadpo_core::store::rows::{BreakerSet, HeldRow, HeldSet, LongestHeld};
use postgres::{GenericClient, Row, Transaction};

/// Held deliveries whose connection has no breaker that is not closed, nor a
/// pause (a pause whose time has come is ended by the sweep first).
macro_rules! held_without_open_breaker {
    () => {
        "state = 'held' AND NOT EXISTS (SELECT 1 FROM circuit_breakers b WHERE b.connection = held_connection \
         AND (b.state <> 'closed' OR b.paused_at IS NOT NULL))"
    };
}
pub(super) use held_without_open_breaker;

/// A breaker row's columns, as [`breaker_of`] reads them.
macro_rules! breaker_columns {
    () => {
        "connection, state, failures_in_a_row, opened_at, pause_ms, alerts, alerted_at, probe_delivery, \
         probe_lease_until, paused_at, paused_until, paused_by, pause_reason, rate_tat_us"
    };
}

/// The breakers that match `filter` (a `WHERE` clause or nothing), with held
/// counts.
macro_rules! breakers_sql {
    ($filter:literal) => {
        concat!(
            "SELECT ",
            breaker_columns!(),
            ", (SELECT count(*) FROM deliveries d WHERE d.state = 'held' AND d.held_connection = b.connection) \
             AS held FROM circuit_breakers b ",
            $filter,
            " ORDER BY connection"
        )
    };
}

fn breaker_of(r: &Row) -> Result<BreakerView, StoreError> {
    let state: String = col(r, "state")?;
    let state =
        BreakerState::parse(&state).ok_or_else(|| StoreError::Corrupt(format!("unknown breaker state `{state}`")))?;
    let connection: String = col(r, "connection")?;
    let of = RowOf::Breaker(&connection);
    Ok(BreakerView {
        row: BreakerRow {
            state,
            failures_in_a_row: count_of(col(r, "failures_in_a_row")?, of, "failures_in_a_row")?,
            opened_at_ms: col(r, "opened_at")?,
            pause_ms: count_of(col(r, "pause_ms")?, of, "pause_ms")?,
            alerts: count_of(col(r, "alerts")?, of, "alerts")?,
            alerted: col::<Option<i64>>(r, "alerted_at")?.is_some(),
            probe: col(r, "probe_delivery")?,
            probe_lease_until_ms: col(r, "probe_lease_until")?,
            pause: match col::<Option<i64>>(r, "paused_at")? {
                Some(at_ms) => Some(Pause {
                    at_ms,
                    until_ms: col(r, "paused_until")?,
                    by: col::<Option<String>>(r, "paused_by")?.unwrap_or_default(),
                    reason: col(r, "pause_reason")?,
                }),
                None => None,
            },
            rate_tat_us: col(r, "rate_tat_us")?,
        },
        held: u64::try_from(col::<i64>(r, "held")?).unwrap_or(0),
        connection,
    })
}

/// The breakers of `which` (every one: `None`), with held counts.
pub(super) fn read_breakers(
    c: &mut impl GenericClient,
    which: Option<BreakerSet>,
) -> Result<Vec<BreakerView>, StoreError> {
    let sql = match which {
        None => breakers_sql!(""),
        Some(BreakerSet::Paused) => breakers_sql!("WHERE paused_at IS NOT NULL"),
        Some(BreakerSet::Swept) => breakers_sql!("WHERE state <> 'closed' OR paused_at IS NOT NULL"),
    };
    c.query(sql, &[]).map_err(pg_error)?.iter().map(breaker_of).collect()
}

/// A connection's breaker row, if it has one.
pub(super) fn read_breaker(tx: &mut Transaction<'_>, connection: &str) -> Result<Option<BreakerRow>, StoreError> {
    const SQL: &str =
        concat!("SELECT ", breaker_columns!(), ", 0::bigint AS held FROM circuit_breakers WHERE connection = $1");
    match tx.query_opt(SQL, &[&connection]).map_err(pg_error)? {
        Some(r) => Ok(Some(breaker_of(&r)?.row)),
        None => Ok(None),
    }
}

/// Write a breaker's next row only if the row is still as read (`old`; `None` =
/// no row yet). Returns whether it did.
pub(super) fn write_breaker(
    tx: &mut Transaction<'_>,
    connection: &str,
    old: Option<&BreakerRow>,
    next: &BreakerRow,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let state = next.state.as_str();
    let failures = i64::from(next.failures_in_a_row);
    let pause = rules::ms_i64(next.pause_ms);
    let alerts = i64::from(next.alerts);
    let paused_at = next.pause.as_ref().map(|p| p.at_ms);
    let paused_until = next.pause.as_ref().and_then(|p| p.until_ms);
    let paused_by = next.pause.as_ref().map(|p| p.by.as_str());
    let pause_reason = next.pause.as_ref().and_then(|p| p.reason.as_deref());
    // The next row's values, $1 to $15, for both statements.
    let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> = vec![
        &connection,
        &state,
        &failures,
        &next.opened_at_ms,
        &pause,
        &alerts,
        &next.alerted,
        &next.probe,
        &next.probe_lease_until_ms,
        &now_ms,
        &paused_at,
        &paused_until,
        &paused_by,
        &pause_reason,
        &next.rate_tat_us,
    ];
    let n = match old {
        None => tx
            .execute(
                "INSERT INTO circuit_breakers (connection, state, failures_in_a_row, opened_at, pause_ms, \
                     alerts, alerted_at, probe_delivery, probe_lease_until, updated_at, paused_at, paused_until, \
                     paused_by, pause_reason, rate_tat_us) \
                     VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $7 THEN $10::bigint END, $8, $9, $10, $11, $12, \
                     $13, $14, $15) \
                     ON CONFLICT (connection) DO NOTHING",
                &params,
            )
            .map_err(pg_error)?,
        Some(old) => {
            let old_state = old.state.as_str();
            let old_failures = i64::from(old.failures_in_a_row);
            let old_alerts = i64::from(old.alerts);
            let old_paused_at = old.pause.as_ref().map(|p| p.at_ms);
            // The rate's time only moves forward, so a change that is not of the
            // rate keeps the newer one; a change of the rate (a claim's call, a
            // `429`) is conditional on the rate as read.
            let rate_changes = next.rate_tat_us != old.rate_tat_us;
            params.extend_from_slice(&[
                &old_state,
                &old_failures,
                &old.opened_at_ms,
                &old.probe,
                &old_alerts,
                &old_paused_at,
                &rate_changes,
                &old.rate_tat_us,
            ]);
            tx.execute(
                "UPDATE circuit_breakers SET state = $2, failures_in_a_row = $3, opened_at = $4, \
                     pause_ms = $5, alerts = $6, alerted_at = CASE WHEN $7 THEN COALESCE(alerted_at, $10) END, \
                     probe_delivery = $8, probe_lease_until = $9, updated_at = $10, paused_at = $11, \
                     paused_until = $12, paused_by = $13, pause_reason = $14, \
                     rate_tat_us = GREATEST(rate_tat_us, $15::bigint) \
                     WHERE connection = $1 AND state = $16 AND failures_in_a_row = $17 \
                     AND opened_at IS NOT DISTINCT FROM $18 AND probe_delivery IS NOT DISTINCT FROM $19 \
                     AND alerts = $20 AND paused_at IS NOT DISTINCT FROM $21 \
                     AND (NOT $22 OR rate_tat_us IS NOT DISTINCT FROM $23::bigint)",
                &params,
            )
            .map_err(pg_error)?
        }
    };
    Ok(n == 1)
}

fn held_row(r: &Row) -> Result<HeldRow, StoreError> {
    Ok(HeldRow { id: col(r, "id")?, held_ms: col(r, "held_ms")?, held_since_ms: col(r, "held_since")? })
}

/// Release held deliveries as read, in one statement: each pending, due at
/// `now_ms`, its time held counted by the core's rule, and only if still as read
/// (held, with the time held and since when that were read). Returns how many
/// were as read and changed.
pub(super) fn release(tx: &mut Transaction<'_>, rows: &[HeldRow], now_ms: i64) -> Result<u64, StoreError> {
    if rows.is_empty() {
        return Ok(0);
    }
    let mut u = Columns::default();
    u.add("id", "bigint", rows.iter().map(|r| r.id).collect::<Vec<i64>>())
        .add("held_ms", "bigint", rows.iter().map(|r| r.held_ms).collect::<Vec<i64>>())
        .add("since", "bigint", rows.iter().map(|r| r.held_since_ms).collect::<Vec<Option<i64>>>())
        .add(
            "after",
            "bigint",
            rows.iter().map(|r| hold::held_ms_after_release(r.held_ms, r.held_since_ms, now_ms)).collect::<Vec<i64>>(),
        );
    let n = tx
        .execute(
            &format!(
                "UPDATE deliveries d SET state = 'pending', due_at = $1, held_ms = u.after, \
                     held_since = NULL, held_connection = NULL FROM {} \
                     WHERE d.id = u.id AND d.state = 'held' AND d.held_ms = u.held_ms \
                     AND d.held_since IS NOT DISTINCT FROM u.since",
                u.rows_clause(2)
            ),
            &u.params_after(&[&now_ms]),
        )
        .map_err(pg_error)?;
    Ok(n)
}

/// The held deliveries of `which`, locked (those another transaction holds
/// are left out).
pub(super) fn held(tx: &mut Transaction<'_>, which: HeldSet<'_>) -> Result<Vec<HeldRow>, StoreError> {
    let rows = match which {
        HeldSet::Of { connection, one } => tx.query(
            "SELECT id, held_ms, held_since FROM deliveries WHERE state = 'held' AND held_connection = $1 \
                 AND ($2::bigint IS NULL OR id = $2) FOR UPDATE SKIP LOCKED",
            &[&connection, &one],
        ),
        HeldSet::Unheld => tx.query(
            concat!(
                "SELECT id, held_ms, held_since FROM deliveries WHERE ",
                held_without_open_breaker!(),
                " FOR UPDATE SKIP LOCKED"
            ),
            &[],
        ),
    };
    rows.map_err(pg_error)?.iter().map(held_row).collect()
}

/// Release the connection's held deliveries, due at `now_ms`.
pub(super) fn release_held(tx: &mut Transaction<'_>, connection: &str, now_ms: i64) -> Result<u64, StoreError> {
    let rows = held(tx, HeldSet::Of { connection, one: None })?;
    release(tx, &rows, now_ms)
}

/// How many deliveries an outage of `connection` holds at `now_ms`.
pub(super) fn held_by_outage(tx: &mut Transaction<'_>, connection: &str, now_ms: i64) -> Result<u64, StoreError> {
    let row = tx
        .query_one(
            "SELECT (SELECT count(*) FROM deliveries WHERE state = 'held' AND held_connection = $1) + \
                 (SELECT count(*) FROM deliveries WHERE state = 'pending' AND due_at <= $2 AND connection = $1) \
                 AS n",
            &[&connection, &now_ms],
        )
        .map_err(pg_error)?;
    Ok(u64::try_from(col::<i64>(&row, "n")?).unwrap_or(0))
}

/// The delivery `connection` has held longest, with its subscriber.
pub(super) fn held_longest(tx: &mut Transaction<'_>, connection: &str) -> Result<Option<LongestHeld>, StoreError> {
    let longest = tx
        .query_opt(
            "SELECT id, subscriber FROM deliveries WHERE state = 'held' AND held_connection = $1 \
                 ORDER BY held_since, id LIMIT 1",
            &[&connection],
        )
        .map_err(pg_error)?;
    match longest {
        Some(r) => Ok(Some(LongestHeld { id: col(&r, "id")?, subscriber: col(&r, "subscriber")? })),
        None => Ok(None),
    }
}
