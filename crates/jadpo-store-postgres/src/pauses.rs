//! Operators' pauses of connections: the pause on the breaker's row (the core's
//! rules say what it holds), every pause and resume kept with who, when and why,
//! and the end of a pause whose time has come. Each change to the row is the
//! guarded statement of `write_breaker`, read again when another process changed
//! the row first.

use super::breakers::{PAUSED, read_breaker, read_breakers, release_held, write_breaker};
use super::{StoreError, col, pg_error, q};
use jadpo_core::rules::breaker::{self, BreakerRow, Pause};
use jadpo_core::store::columns::pause_action_of;
use jadpo_core::store::{BreakerAction, PauseAction, ResumeReport};
use postgres::{Client, Transaction};

/// How many times an operator's change is tried against a row other processes
/// keep changing before it gives up.
const TRIES: usize = 16;

/// An operator's action on a connection, as kept.
struct Action<'a> {
    connection: &'a str,
    action: PauseAction,
    by: &'a str,
    reason: Option<&'a str>,
    until_ms: Option<i64>,
    at_ms: i64,
}

/// Keep an operator's action on a connection.
fn record_action(tx: &mut Transaction<'_>, s: &str, a: &Action<'_>) -> Result<(), StoreError> {
    tx.execute(
        &q(
            "INSERT INTO {s}.breaker_actions (connection, action, at, by, reason, until) \
             VALUES ($1, $2, $3, $4, $5, $6)",
            s,
        ),
        &[&a.connection, &a.action.as_str(), &a.at_ms, &a.by, &a.reason, &a.until_ms],
    )
    .map_err(pg_error)?;
    Ok(())
}

fn changed_under(connection: &str, what: &str) -> StoreError {
    StoreError::Database { message: format!("the breaker of `{connection}` kept changing under its {what}") }
}

pub(super) fn pause(client: &mut Client, s: &str, connection: &str, pause: &Pause) -> Result<BreakerRow, StoreError> {
    let mut tx = client.transaction().map_err(pg_error)?;
    for _ in 0..TRIES {
        let current = read_breaker(&mut tx, s, connection)?;
        let next = breaker::pause(&current.clone().unwrap_or_default(), pause.clone());
        if write_breaker(&mut tx, s, connection, current.as_ref(), &next, pause.at_ms)? {
            let action = Action {
                connection,
                action: PauseAction::Pause,
                by: &pause.by,
                reason: pause.reason.as_deref(),
                until_ms: pause.until_ms,
                at_ms: pause.at_ms,
            };
            record_action(&mut tx, s, &action)?;
            tx.commit().map_err(pg_error)?;
            return Ok(next);
        }
    }
    Err(changed_under(connection, "pause"))
}

pub(super) fn resume(
    client: &mut Client,
    s: &str,
    connection: &str,
    by: &str,
    reason: Option<&str>,
    now_ms: i64,
) -> Result<ResumeReport, StoreError> {
    let mut tx = client.transaction().map_err(pg_error)?;
    for _ in 0..TRIES {
        let Some(current) = read_breaker(&mut tx, s, connection)? else {
            return Ok(ResumeReport { was: None, released: 0 });
        };
        let next = breaker::resume(&current);
        if write_breaker(&mut tx, s, connection, Some(&current), &next, now_ms)? {
            let released = release_held(&mut tx, s, connection, None, now_ms)?;
            let action = Action { connection, action: PauseAction::Resume, by, reason, until_ms: None, at_ms: now_ms };
            record_action(&mut tx, s, &action)?;
            tx.commit().map_err(pg_error)?;
            return Ok(ResumeReport { was: Some(current), released });
        }
    }
    Err(changed_under(connection, "resume"))
}

pub(super) fn knows_connection(client: &mut Client, s: &str, connection: &str) -> Result<bool, StoreError> {
    let row = client
        .query_one(
            &q(
                "SELECT EXISTS (SELECT 1 FROM {s}.circuit_breakers WHERE connection = $1) \
                 OR EXISTS (SELECT 1 FROM {s}.deliveries WHERE connection = $1) AS known",
                s,
            ),
            &[&connection],
        )
        .map_err(pg_error)?;
    col(&row, "known")
}

/// End every pause whose time has come at `now_ms`, each by one guarded
/// statement (of processes sweeping at once, one ends it and keeps the action);
/// what the closed breakers held is then released by the sweep.
pub(super) fn end_pauses(tx: &mut Transaction<'_>, s: &str, now_ms: i64) -> Result<(), StoreError> {
    for view in read_breakers(tx, s, PAUSED)? {
        if let Some(next) = breaker::pause_ended(&view.row, now_ms)
            && write_breaker(tx, s, &view.connection, Some(&view.row), &next, now_ms)?
        {
            let by = view.row.pause.as_ref().map_or("", |p| p.by.as_str());
            let action = Action {
                connection: &view.connection,
                action: PauseAction::Ended,
                by,
                reason: None,
                until_ms: None,
                at_ms: now_ms,
            };
            record_action(tx, s, &action)?;
        }
    }
    Ok(())
}

pub(super) fn history(c: &mut Client, s: &str, connection: Option<&str>) -> Result<Vec<BreakerAction>, StoreError> {
    let rows = c
        .query(
            &q(
                "SELECT connection, action, at, by, reason, until FROM {s}.breaker_actions \
                 WHERE $1::text IS NULL OR connection = $1 ORDER BY id",
                s,
            ),
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
