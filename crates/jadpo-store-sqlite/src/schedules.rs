//! Schedules: one row each, claimed once per due time, their runs' ends recorded
//! only by the run that is still the latest.

use super::tx::Tx;
use super::{Error, by_name};
use jadpo_core::rules::{self, Failure};
use jadpo_core::store::{ClaimedSchedule, ScheduleSpec};
use rusqlite::{Connection, named_params};

pub(super) fn sync(conn: &mut Connection, schedules: &[ScheduleSpec], now_ms: i64) -> Result<(), Error> {
    // A program without schedules writes nothing: no write lock is taken (with
    // several processes starting on one file, each would wait its turn for it).
    if schedules.is_empty() {
        return Ok(());
    }
    let tx = Tx::immediate(conn)?;
    for s in schedules {
        let every = rules::ms_i64(s.every_ms);
        tx.prepare_cached(
            "INSERT INTO jadpo_schedules (name, every_ms, first_seen, due_at) VALUES (:name, :every, :now, :due) \
             ON CONFLICT (name) DO UPDATE SET every_ms = excluded.every_ms",
        )?
        .execute(
            named_params! {":name": s.name, ":every": every, ":now": now_ms, ":due": now_ms.saturating_add(every)},
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// Take the schedule's run due at `seen_due_at` (as read), moving its due time to
/// `next_due_at`; only if it is still due then. Returns whether it did.
pub(super) fn take_run(
    tx: &Tx<'_>,
    name: &str,
    seen_due_at: i64,
    next_due_at: i64,
    now_ms: i64,
) -> Result<bool, Error> {
    let n = by_name!().execute(
        &mut tx.prepare_cached(
            "UPDATE jadpo_schedules SET due_at = :next, runs = runs + 1, last_claimed_at = :now \
             WHERE name = :name AND due_at = :seen_due_at",
        )?,
        named_params! {":name": name, ":seen_due_at": seen_due_at, ":next": next_due_at, ":now": now_ms},
    )?;
    Ok(n == 1)
}

pub(super) fn claim(
    conn: &mut Connection,
    schedules: &[ScheduleSpec],
    now_ms: i64,
) -> Result<Vec<ClaimedSchedule>, Error> {
    let tx = Tx::immediate(conn)?;
    let mut claimed = Vec::new();
    for s in schedules {
        let row: Option<(i64, i64)> = {
            let mut stmt =
                tx.prepare_cached("SELECT due_at, runs FROM jadpo_schedules WHERE name = :name AND due_at <= :now")?;
            by_name!().bind(&mut stmt, named_params! {":name": s.name, ":now": now_ms})?;
            let mut rows = stmt.raw_query();
            match rows.next()? {
                Some(r) => Some((r.get(0)?, r.get(1)?)),
                None => None,
            }
        };
        let Some((due_at, runs)) = row else { continue };
        let next = rules::schedule_next_due_ms(due_at, s.every_ms, now_ms);
        if take_run(&tx, &s.name, due_at, next, now_ms)? {
            claimed.push(ClaimedSchedule { name: s.name.clone(), run: u64::try_from(runs + 1).unwrap_or(0) });
        }
    }
    tx.commit()?;
    Ok(claimed)
}

/// Record how run `run` ended, only while it is the schedule's latest run.
pub(super) fn record(
    conn: &mut Connection,
    name: &str,
    run: u64,
    ended_at_ms: i64,
    failure: Option<&Failure>,
) -> Result<bool, Error> {
    let n = by_name!().execute(
        &mut conn.prepare_cached(
            "UPDATE jadpo_schedules SET last_ended_at = :ended, last_code = :code, last_kind = :kind \
             WHERE name = :name AND runs = :run",
        )?,
        named_params! {
            ":name": name,
            ":run": i64::try_from(run).unwrap_or(i64::MAX),
            ":ended": ended_at_ms,
            ":code": failure.map(|f| f.code.as_str()),
            ":kind": failure.map(|f| f.kind.as_str()),
        },
    )?;
    Ok(n == 1)
}

pub(super) fn next_due_ms(conn: &mut Connection) -> Result<Option<i64>, Error> {
    Ok(conn.prepare_cached("SELECT min(due_at) FROM jadpo_schedules")?.query_row([], |r| r.get(0))?)
}
