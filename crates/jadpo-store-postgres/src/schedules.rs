//! Schedules: one run per due time across every process; a run's end recorded
//! only by the run that is still the latest.

use super::{StoreError, col, pg_error};
use jadpo_core::rules::{self, Failure};
use jadpo_core::store::{ClaimedSchedule, ScheduleSpec};
use postgres::Client;

pub(super) fn sync(c: &mut Client, schedules: &[ScheduleSpec], now_ms: i64) -> Result<(), StoreError> {
    let mut tx = c.transaction().map_err(pg_error)?;
    for spec in schedules {
        let every = rules::ms_i64(spec.every_ms);
        tx.execute(
            "INSERT INTO schedules (name, every_ms, first_seen, due_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (name) DO UPDATE SET every_ms = excluded.every_ms",
            &[&spec.name, &every, &now_ms, &now_ms.saturating_add(every)],
        )
        .map_err(pg_error)?;
    }
    tx.commit().map_err(pg_error)
}

pub(super) fn claim(
    c: &mut Client,
    schedules: &[ScheduleSpec],
    now_ms: i64,
) -> Result<Vec<ClaimedSchedule>, StoreError> {
    let mut tx = c.transaction().map_err(pg_error)?;
    let mut claimed = Vec::new();
    for spec in schedules {
        let row = tx
            .query_opt("SELECT due_at, runs FROM schedules WHERE name = $1 AND due_at <= $2", &[&spec.name, &now_ms])
            .map_err(pg_error)?;
        let Some(row) = row else { continue };
        let (due_at, runs): (i64, i64) = (col(&row, "due_at")?, col(&row, "runs")?);
        let next = rules::schedule_next_due_ms(due_at, spec.every_ms, now_ms);
        // Taken only if still due then: of processes racing, one takes the run.
        let n = tx
            .execute(
                "UPDATE schedules SET due_at = $3, runs = runs + 1, last_claimed_at = $4 \
                     WHERE name = $1 AND due_at = $2",
                &[&spec.name, &due_at, &next, &now_ms],
            )
            .map_err(pg_error)?;
        if n == 1 {
            claimed.push(ClaimedSchedule { name: spec.name.clone(), run: u64::try_from(runs + 1).unwrap_or(0) });
        }
    }
    tx.commit().map_err(pg_error)?;
    Ok(claimed)
}

pub(super) fn record(
    c: &mut Client,
    name: &str,
    run: u64,
    ended_at_ms: i64,
    failure: Option<&Failure>,
) -> Result<bool, StoreError> {
    let n = c
        .execute(
            "UPDATE schedules SET last_ended_at = $3, last_code = $4, last_kind = $5 \
                 WHERE name = $1 AND runs = $2",
            &[
                &name,
                &i64::try_from(run).unwrap_or(i64::MAX),
                &ended_at_ms,
                &failure.map(|f| f.code.as_str()),
                &failure.map(|f| f.kind.as_str()),
            ],
        )
        .map_err(pg_error)?;
    Ok(n == 1)
}

pub(super) fn next_due_ms(c: &mut Client) -> Result<Option<i64>, StoreError> {
    let row = c.query_one("SELECT min(due_at) AS t FROM schedules", &[]).map_err(pg_error)?;
    col(&row, "t")
}
