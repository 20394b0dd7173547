//! Operators' pauses of connections as kept: every pause, resume and end of a
//! pause with who, when and why (the pause itself is on the breaker's row, and
//! what a pause or a resume changes is the core's).

use super::{StoreError, col, pg_error};
use jadpo_core::store::BreakerAction;
use jadpo_core::store::columns::pause_action_of;
use postgres::{Client, Transaction};

/// Keep an operator's action on a connection.
pub(super) fn keep_action(tx: &mut Transaction<'_>, a: &BreakerAction) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO breaker_actions (connection, action, at, by, reason, until) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        &[&a.connection, &a.action.as_str(), &a.at_ms, &a.by, &a.reason, &a.until_ms],
    )
    .map_err(pg_error)?;
    Ok(())
}

pub(super) fn knows_connection(client: &mut Client, connection: &str) -> Result<bool, StoreError> {
    let row = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM circuit_breakers WHERE connection = $1) \
                 OR EXISTS (SELECT 1 FROM deliveries WHERE connection = $1) AS known",
            &[&connection],
        )
        .map_err(pg_error)?;
    col(&row, "known")
}

pub(super) fn history(c: &mut Client, connection: Option<&str>) -> Result<Vec<BreakerAction>, StoreError> {
    let rows = c
        .query(
            "SELECT connection, action, at, by, reason, until FROM breaker_actions \
                 WHERE $1::text IS NULL OR connection = $1 ORDER BY id",
            &[&connection],
        )
        .map_err(pg_error)?;
    rows.iter()
        .map(|r| {
            Ok(BreakerAction {
                connection: col(r, "connection")?,
                action: pause_action_of(&col::<String>(r, "action")?)?,
                at_ms: col(r, "at")?,
                by: col(r, "by")?,
                reason: col(r, "reason")?,
                until_ms: col(r, "until")?,
            })
        })
        .collect()
}
