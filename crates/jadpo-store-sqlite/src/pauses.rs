//! Operators' pauses of connections: the pause on the breaker's row (the core's
//! rules say what it holds), every pause and resume kept with who, when and why,
//! and the end of a pause whose time has come.

use super::Error;
use super::StoreError;
use super::breakers::{read_breaker, read_breakers, release_held, write_breaker};
use super::tx::Tx;
use jadpo_core::rules::breaker::{self, BreakerRow, Pause};
use jadpo_core::store::columns::pause_action_of;
use jadpo_core::store::{BreakerAction, PauseAction, ResumeReport};
use rusqlite::{Connection, named_params};

/// Keep an operator's action on a connection.
fn record_action(
    tx: &Tx<'_>,
    connection: &str,
    action: PauseAction,
    by: &str,
    reason: Option<&str>,
    until_ms: Option<i64>,
    now_ms: i64,
) -> Result<(), Error> {
    tx.prepare_cached(
        "INSERT INTO jadpo_breaker_actions (connection, action, at, by, reason, until) \
         VALUES (:connection, :action, :at, :by, :reason, :until)",
    )?
    .execute(named_params! {
        ":connection": connection, ":action": action.as_str(), ":at": now_ms, ":by": by,
        ":reason": reason, ":until": until_ms,
    })?;
    Ok(())
}

pub(super) fn pause(conn: &mut Connection, connection: &str, pause: &Pause) -> Result<BreakerRow, Error> {
    let tx = Tx::immediate(conn)?;
    let current = read_breaker(&tx, connection)?;
    let next = breaker::pause(&current.clone().unwrap_or_default(), pause.clone());
    if !write_breaker(&tx, connection, current.as_ref(), &next, pause.at_ms)? {
        return Err(StoreError::Corrupt(format!("the breaker of `{connection}` changed under its pause")).into());
    }
    record_action(
        &tx,
        connection,
        PauseAction::Pause,
        &pause.by,
        pause.reason.as_deref(),
        pause.until_ms,
        pause.at_ms,
    )?;
    tx.commit()?;
    Ok(next)
}

pub(super) fn resume(
    conn: &mut Connection,
    connection: &str,
    by: &str,
    reason: Option<&str>,
    now_ms: i64,
) -> Result<ResumeReport, Error> {
    let tx = Tx::immediate(conn)?;
    let Some(current) = read_breaker(&tx, connection)? else {
        return Ok(ResumeReport { was: None, released: 0 });
    };
    let next = breaker::resume(&current);
    if !write_breaker(&tx, connection, Some(&current), &next, now_ms)? {
        return Err(StoreError::Corrupt(format!("the breaker of `{connection}` changed under its resume")).into());
    }
    let released = release_held(&tx, connection, None, now_ms)?;
    record_action(&tx, connection, PauseAction::Resume, by, reason, None, now_ms)?;
    tx.commit()?;
    Ok(ResumeReport { was: Some(current), released })
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

/// End every pause whose time has come at `now_ms`, each by one conditional
/// statement; what the closed breakers held is then released by the sweep.
pub(super) fn end_pauses(tx: &Tx<'_>, now_ms: i64) -> Result<(), Error> {
    for view in read_breakers(tx, super::breakers::PAUSED)? {
        if let Some(next) = breaker::pause_ended(&view.row, now_ms)
            && write_breaker(tx, &view.connection, Some(&view.row), &next, now_ms)?
        {
            let by = view.row.pause.as_ref().map_or("", |p| p.by.as_str());
            record_action(tx, &view.connection, PauseAction::Ended, by, None, None, now_ms)?;
        }
    }
    Ok(())
}
