//! Operators' pauses of connections as kept: every pause, resume and end of a
//! pause with who, when and why (the pause itself is on the breaker's row, and
//! what a pause or a resume changes is the core's).

use super::Error;
use super::tx::Tx;
use jadpo_core::store::BreakerAction;
use jadpo_core::store::columns::pause_action_of;
use rusqlite::{Connection, named_params};

/// Keep an operator's action on a connection.
pub(super) fn keep_action(tx: &Tx<'_>, a: &BreakerAction) -> Result<(), Error> {
    tx.prepare_cached(
        "INSERT INTO jadpo_breaker_actions (connection, action, at, by, reason, until) \
         VALUES (:connection, :action, :at, :by, :reason, :until)",
    )?
    .execute(named_params! {
        ":connection": a.connection, ":action": a.action.as_str(), ":at": a.at_ms, ":by": a.by,
        ":reason": a.reason, ":until": a.until_ms,
    })?;
    Ok(())
}

pub(super) fn knows_connection(conn: &mut Connection, connection: &str) -> Result<bool, Error> {
    Ok(conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM jadpo_circuit_breakers WHERE connection = ?1) \
         OR EXISTS (SELECT 1 FROM jadpo_deliveries WHERE connection = ?1)",
        )?
        .query_row([connection], |r| r.get(0))?)
}

pub(super) fn history(conn: &mut Connection, connection: Option<&str>) -> Result<Vec<BreakerAction>, Error> {
    let mut stmt = conn.prepare_cached(
        "SELECT connection, action, at, by, reason, until FROM jadpo_breaker_actions \
         WHERE ?1 IS NULL OR connection = ?1 ORDER BY id",
    )?;
    let mut rows = stmt.query([connection])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(BreakerAction {
            connection: r.get("connection")?,
            action: pause_action_of(&r.get::<_, String>("action")?)?,
            at_ms: r.get("at")?,
            by: r.get("by")?,
            reason: r.get("reason")?,
            until_ms: r.get("until")?,
        });
    }
    Ok(out)
}
