//! What the operator's console reads besides the listings' reads: deliveries by
//! any filter a page a time (a keyset on the id, newest first), and attempts
//! counted per minute. Nothing here writes.
//!
//! The filter's SQL names only the conditions given; a state is written as its
//! word (a fixed word of the runtime's, never an operator's text), so that the
//! planner matches it to the partial indexes of failed and parked deliveries
//! (schema version 8) whatever plan it caches.

use super::reads::{view_columns, view_of};
use super::{StoreError, col, pg_error};
use jadpo_core::store::{AttemptRate, DeliveryFilter, DeliveryView, RATE_MINUTE_MS};
use postgres::Client;
use postgres::types::ToSql;

/// One value bound to the filter's statement.
enum Bound {
    Text(String),
    Int(i64),
}

impl Bound {
    fn sql(&self) -> &(dyn ToSql + Sync) {
        match self {
            Bound::Text(t) => t,
            Bound::Int(i) => i,
        }
    }
}

/// The statement listing deliveries by `filter` and its values, in order.
fn deliveries_sql(filter: &DeliveryFilter) -> (String, Vec<Bound>) {
    let mut terms: Vec<String> = Vec::new();
    let mut values: Vec<Bound> = Vec::new();
    let mut bind = |term: &str, cast: &str, value: Bound, terms: &mut Vec<String>| {
        values.push(value);
        terms.push(format!("{term} ${}::{cast}", values.len()));
    };
    if let Some(state) = filter.state {
        terms.push(format!("d.state = '{}'", state.as_str()));
    }
    if let Some(s) = &filter.subscriber {
        bind("d.subscriber =", "text", Bound::Text(s.clone()), &mut terms);
    }
    if let Some(c) = &filter.connection {
        bind("d.connection =", "text", Bound::Text(c.clone()), &mut terms);
    }
    if let Some(e) = &filter.event {
        bind("e.name =", "text", Bound::Text(e.clone()), &mut terms);
    }
    if let Some(t) = filter.since_ms {
        bind("d.created_at >=", "bigint", Bound::Int(t), &mut terms);
    }
    if let Some(t) = filter.until_ms {
        bind("d.created_at <", "bigint", Bound::Int(t), &mut terms);
    }
    if let Some(code) = &filter.failure_code {
        bind("d.last_code =", "text", Bound::Text(code.clone()), &mut terms);
    }
    if let Some(id) = filter.before_id {
        bind("d.id <", "bigint", Bound::Int(id), &mut terms);
    }
    let clause = if terms.is_empty() { String::new() } else { format!("WHERE {}", terms.join(" AND ")) };
    let limit = match filter.limit {
        Some(l) => {
            values.push(Bound::Int(i64::try_from(l).unwrap_or(i64::MAX)));
            format!("LIMIT ${}", values.len())
        }
        None => String::new(),
    };
    let sql = format!(
        "SELECT {} FROM deliveries d JOIN events e ON e.id = d.event_id {clause} ORDER BY d.id {} {limit}",
        view_columns!(),
        // With a limit, the newest come first (a page of the console is the
        // newest before its cursor).
        if filter.limit.is_some() { "DESC" } else { "ASC" }
    );
    (sql, values)
}

pub(super) fn deliveries(c: &mut Client, filter: &DeliveryFilter) -> Result<Vec<DeliveryView>, StoreError> {
    let (sql, values) = deliveries_sql(filter);
    let params: Vec<&(dyn ToSql + Sync)> = values.iter().map(Bound::sql).collect();
    c.query(&sql, &params).map_err(pg_error)?.iter().map(view_of).collect()
}

pub(super) fn attempt_rates(c: &mut Client, since_ms: i64) -> Result<Vec<AttemptRate>, StoreError> {
    let rows = c
        .query(
            "SELECT (started_at / $2) * $2 AS minute, \
                 count(*) FILTER (WHERE outcome = 'succeeded') AS succeeded, \
                 count(*) FILTER (WHERE outcome <> 'succeeded') AS failed \
                 FROM attempts WHERE started_at >= $1 GROUP BY minute ORDER BY minute",
            &[&since_ms, &RATE_MINUTE_MS],
        )
        .map_err(pg_error)?;
    rows.iter()
        .map(|r| {
            Ok(AttemptRate {
                minute_ms: col(r, "minute")?,
                succeeded: u64::try_from(col::<i64>(r, "succeeded")?).unwrap_or(0),
                failed: u64::try_from(col::<i64>(r, "failed")?).unwrap_or(0),
            })
        })
        .collect()
}
