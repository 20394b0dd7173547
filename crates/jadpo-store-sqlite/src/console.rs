//! What the operator's console reads besides the listings' reads: deliveries by
//! any filter a page a time (a keyset on the id, newest first), and attempts
//! counted per minute. Nothing here writes.
//!
//! The filter's SQL names only the conditions given, so that SQLite's planner
//! sees each as it is: a state is written as its word (a fixed word of the
//! runtime's, never an operator's text), which lets a page of failed or parked
//! deliveries read the partial index of that state (schema version 6); every
//! other filter (another state among them) walks the primary key from the
//! cursor down and stops at a page.

use super::Error;
use super::reads::{view_columns, view_of};
use jadpo_check::program::DeliveryState;
use jadpo_core::store::{AttemptRate, DeliveryFilter, DeliveryView, RATE_MINUTE_MS};
use rusqlite::Connection;
use rusqlite::types::Value;

/// The states with a partial index of their own (schema version 6).
const INDEXED_STATES: [DeliveryState; 2] = [DeliveryState::Failed, DeliveryState::Parked];

/// The filter's `WHERE` clause and its values, in order.
fn conditions(filter: &DeliveryFilter) -> (String, Vec<Value>) {
    let mut terms: Vec<String> = Vec::new();
    let mut values: Vec<Value> = Vec::new();
    let mut bind = |term: &str, value: Value, terms: &mut Vec<String>| {
        values.push(value);
        terms.push(term.replace('?', &format!("?{}", values.len())));
    };
    if let Some(state) = filter.state {
        // A state with a partial index of its own reads it; any other is a
        // condition on the rows the primary key walks (`+` keeps the planner
        // from reading the claims' index of every row in that state and sorting
        // them, which for a backlog of pending deliveries is the whole backlog).
        let unindexed = if INDEXED_STATES.contains(&state) { "" } else { "+" };
        terms.push(format!("{unindexed}d.state = '{}'", state.as_str()));
    }
    if let Some(s) = &filter.subscriber {
        bind("d.subscriber = ?", Value::Text(s.clone()), &mut terms);
    }
    if let Some(c) = &filter.connection {
        bind("d.connection = ?", Value::Text(c.clone()), &mut terms);
    }
    if let Some(e) = &filter.event {
        bind("e.name = ?", Value::Text(e.clone()), &mut terms);
    }
    if let Some(t) = filter.since_ms {
        bind("d.created_at >= ?", Value::Integer(t), &mut terms);
    }
    if let Some(t) = filter.until_ms {
        bind("d.created_at < ?", Value::Integer(t), &mut terms);
    }
    if let Some(code) = &filter.failure_code {
        bind("d.last_code = ?", Value::Text(code.clone()), &mut terms);
    }
    if let Some(id) = filter.before_id {
        bind("d.id < ?", Value::Integer(id), &mut terms);
    }
    let clause = if terms.is_empty() { String::new() } else { format!("WHERE {}", terms.join(" AND ")) };
    (clause, values)
}

/// The statement listing deliveries by `filter` (for `EXPLAIN QUERY PLAN` too).
pub(super) fn deliveries_sql(filter: &DeliveryFilter, version: i64) -> (String, Vec<Value>) {
    let (clause, mut values) = conditions(filter);
    values.push(Value::Integer(filter.limit.map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX))));
    let sql = format!(
        "SELECT {} FROM jadpo_deliveries d JOIN jadpo_events e ON e.id = d.event_id {clause} \
         ORDER BY d.id {} LIMIT ?{}",
        view_columns(version),
        // With a limit, the newest come first (the latest delivery is one row,
        // and a page of the console the newest before its cursor).
        if filter.limit.is_some() { "DESC" } else { "ASC" },
        values.len()
    );
    (sql, values)
}

pub(super) fn deliveries(
    conn: &mut Connection,
    filter: &DeliveryFilter,
    version: i64,
) -> Result<Vec<DeliveryView>, Error> {
    let (sql, values) = deliveries_sql(filter, version);
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(rusqlite::params_from_iter(values))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(view_of(r)?);
    }
    Ok(out)
}

/// SQLite's plan for listing by `filter`, one line per step (`EXPLAIN QUERY PLAN`).
pub(super) fn deliveries_plan(conn: &Connection, filter: &DeliveryFilter) -> Result<Vec<String>, Error> {
    let (sql, values) = deliveries_sql(filter, super::schema::VERSION);
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
    let mut rows = stmt.query(rusqlite::params_from_iter(values))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(r.get::<_, String>("detail")?);
    }
    Ok(out)
}

pub(super) fn attempt_rates(conn: &mut Connection, since_ms: i64) -> Result<Vec<AttemptRate>, Error> {
    let mut stmt = conn.prepare_cached(
        "SELECT (started_at / ?2) * ?2 AS minute, outcome, count(*) AS n FROM jadpo_attempts \
         WHERE started_at >= ?1 GROUP BY minute, outcome ORDER BY minute",
    )?;
    let mut rows = stmt.query(rusqlite::params![since_ms, RATE_MINUTE_MS])?;
    let mut out: Vec<AttemptRate> = Vec::new();
    while let Some(r) = rows.next()? {
        let minute: i64 = r.get("minute")?;
        let outcome: String = r.get("outcome")?;
        let n = u64::try_from(r.get::<_, i64>("n")?).unwrap_or(0);
        if out.last().is_none_or(|last| last.minute_ms != minute) {
            out.push(AttemptRate { minute_ms: minute, ..AttemptRate::default() });
        }
        if let Some(last) = out.last_mut() {
            if outcome == "succeeded" {
                last.succeeded += n;
            } else {
                last.failed += n;
            }
        }
    }
    Ok(out)
}

impl super::SqliteStore {
    /// How SQLite reads a listing by `filter`, one line per step of its
    /// `EXPLAIN QUERY PLAN` (what the console's measurement shows beside its
    /// timings).
    pub fn deliveries_plan(&self, filter: &DeliveryFilter) -> Result<Vec<String>, jadpo_core::store::StoreError> {
        self.with_retry(|conn| deliveries_plan(conn, filter))
    }
}
