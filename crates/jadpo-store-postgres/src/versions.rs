//! Program versions and the processes running them: each version kept once with
//! its files, each process's heartbeat, and the orphaned deliveries a process
//! whose program has their subscriber takes back.

use super::{StoreError, col, pg_error, state_of};
use jadpo_check::program::DeliveryState;
use jadpo_core::rules::held_when_adopted;
use jadpo_core::store::columns::{from_stored, to_stored};
use jadpo_core::version::{BacklogRow, OrphanRow, ProcessRow, ProcessView, ProgramVersion, SourceText, VersionView};
use postgres::Client;

/// The setting, on each of the store's connections, naming the version its
/// events are stored with (set by [`set_writer`] when it changes).
const WRITER_SETTING: &str = "jadpo.version";

/// The value an event's insert (or expansion) writes in its `version` column:
/// the connection's [`WRITER_SETTING`], none when unset.
pub(super) const WRITER_VERSION: &str = "NULLIF(current_setting('jadpo.version', true), '')::bigint";

/// Name `version` as the one this connection stores its events with.
pub(super) fn set_writer(client: &mut Client, version: &str) -> Result<(), StoreError> {
    client.execute("SELECT set_config($1, $2, false)", &[&WRITER_SETTING, &version]).map_err(pg_error)?;
    Ok(())
}

pub(super) fn record(client: &mut Client, v: &ProgramVersion, now_ms: i64, run: bool) -> Result<i64, StoreError> {
    let row = client
        .query_one(
            "INSERT INTO versions (hash, sources, subscribers, accepted, created_at, started_at) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (hash) DO UPDATE SET \
                 started_at = COALESCE($6, versions.started_at), \
                 accepted = CASE WHEN $6::bigint IS NULL THEN versions.accepted ELSE $4 END RETURNING id",
            &[
                &v.hash,
                &to_stored(&v.sources),
                &to_stored(&v.subscribers),
                &to_stored(&v.accepted),
                &now_ms,
                &run.then_some(now_ms),
            ],
        )
        .map_err(pg_error)?;
    col(&row, "id")
}

pub(super) fn latest(client: &mut Client) -> Result<Option<ProgramVersion>, StoreError> {
    let rows = client
        .query(
            "SELECT hash, sources, subscribers, accepted, created_at FROM versions \
                 ORDER BY started_at DESC NULLS LAST, created_at DESC LIMIT 1",
            &[],
        )
        .map_err(pg_error)?;
    let Some(r) = rows.first() else { return Ok(None) };
    Ok(Some(ProgramVersion {
        hash: col(r, "hash")?,
        sources: from_stored::<Vec<SourceText>>(&col::<String>(r, "sources")?, "files")?,
        subscribers: from_stored(&col::<String>(r, "subscribers")?, "subscribers")?,
        accepted: from_stored(&col::<String>(r, "accepted")?, "accepted findings")?,
        created_at_ms: col(r, "created_at")?,
    }))
}

pub(super) fn heartbeat(
    client: &mut Client,
    p: &ProcessRow,
    now_ms: i64,
    live_since_ms: i64,
) -> Result<Vec<String>, StoreError> {
    let mut tx = client.transaction().map_err(pg_error)?;
    tx.execute(
        "INSERT INTO processes (id, host, pid, version, started_at, seen_at) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (id) DO UPDATE SET seen_at = $6, version = $4",
        &[&p.id, &p.host, &i64::from(p.pid), &p.version, &p.started_at_ms, &now_ms],
    )
    .map_err(pg_error)?;
    // A process not seen for long is gone (killed): its row goes.
    tx.execute("DELETE FROM processes WHERE seen_at < $1", &[&live_since_ms]).map_err(pg_error)?;
    let rows = tx
        .query("SELECT DISTINCT v.subscribers FROM processes p JOIN versions v ON v.hash = p.version", &[])
        .map_err(pg_error)?;
    let mut known = Vec::new();
    for r in &rows {
        known.extend(from_stored::<Vec<String>>(&col::<String>(r, "subscribers")?, "subscribers")?);
    }
    tx.commit().map_err(pg_error)?;
    Ok(known)
}

pub(super) fn stopped(client: &mut Client, id: &str) -> Result<(), StoreError> {
    client.execute("DELETE FROM processes WHERE id = $1", &[&id]).map_err(pg_error)?;
    Ok(())
}

pub(super) fn orphans(client: &mut Client, subscribers: &[String], limit: usize) -> Result<Vec<OrphanRow>, StoreError> {
    let rows = client
        .query(
            "SELECT id, subscriber, held_ms, held_since FROM deliveries \
                 WHERE state = 'orphaned' AND subscriber = ANY($1) ORDER BY id LIMIT $2",
            &[&subscribers, &(limit as i64)],
        )
        .map_err(pg_error)?;
    rows.iter()
        .map(|r| {
            Ok(OrphanRow {
                id: col(r, "id")?,
                subscriber: col(r, "subscriber")?,
                held_ms: col(r, "held_ms")?,
                orphaned_at_ms: col(r, "held_since")?,
            })
        })
        .collect()
}

pub(super) fn adopt(client: &mut Client, rows: &[OrphanRow], now_ms: i64) -> Result<usize, StoreError> {
    let mut tx = client.transaction().map_err(pg_error)?;
    let statement = tx
        .prepare(
            "UPDATE deliveries SET state = $1, due_at = $2, held_ms = $3, held_since = NULL, \
             held_connection = NULL \
             WHERE id = $4 AND state = $5 AND held_ms = $6 AND held_since IS NOT DISTINCT FROM $7",
        )
        .map_err(pg_error)?;
    let mut adopted = 0;
    for o in rows {
        let held = held_when_adopted(o.held_ms, o.orphaned_at_ms.unwrap_or(now_ms), now_ms);
        adopted += tx
            .execute(
                &statement,
                &[
                    &DeliveryState::Pending.as_str(),
                    &now_ms,
                    &held,
                    &o.id,
                    &DeliveryState::Orphaned.as_str(),
                    &o.held_ms,
                    &o.orphaned_at_ms,
                ],
            )
            .map_err(pg_error)?;
    }
    tx.commit().map_err(pg_error)?;
    Ok(usize::try_from(adopted).unwrap_or(usize::MAX))
}

pub(super) fn backlog(client: &mut Client) -> Result<Vec<BacklogRow>, StoreError> {
    let rows = client
        .query(
            "SELECT subscriber, connection, state, count(*) AS n, min(created_at) AS oldest FROM deliveries \
                 WHERE state IN ('pending', 'running', 'held', 'parked', 'orphaned') \
                 GROUP BY subscriber, connection, state ORDER BY subscriber, connection, state",
            &[],
        )
        .map_err(pg_error)?;
    rows.iter()
        .map(|r| {
            Ok(BacklogRow {
                subscriber: col(r, "subscriber")?,
                connection: col(r, "connection")?,
                state: state_of(&col::<String>(r, "state")?)?,
                count: u64::try_from(col::<i64>(r, "n")?).unwrap_or(0),
                oldest_created_ms: col(r, "oldest")?,
            })
        })
        .collect()
}

pub(super) fn past_budget(
    client: &mut Client,
    subscriber: &str,
    attempts: u32,
    cut_ms: i64,
) -> Result<u64, StoreError> {
    let row = client
        .query_one(
            "SELECT count(*) AS n FROM deliveries WHERE subscriber = $1 AND state IN ('pending', 'held') \
                 AND (attempts >= $2 OR budget_start + held_ms < $3)",
            &[&subscriber, &i64::from(attempts), &cut_ms],
        )
        .map_err(pg_error)?;
    Ok(u64::try_from(col::<i64>(&row, "n")?).unwrap_or(0))
}

pub(super) fn versions(client: &mut Client, live_since_ms: i64) -> Result<Vec<VersionView>, StoreError> {
    let mut tx = client.build_transaction().read_only(true).start().map_err(pg_error)?;
    let mut out = Vec::new();
    for r in &tx
        .query(
            "SELECT id, hash, created_at, accepted FROM versions \
                 ORDER BY started_at DESC NULLS LAST, created_at DESC",
            &[],
        )
        .map_err(pg_error)?
    {
        out.push(VersionView {
            id: col(r, "id")?,
            hash: col(r, "hash")?,
            created_at_ms: col(r, "created_at")?,
            accepted: from_stored(&col::<String>(r, "accepted")?, "accepted findings")?,
            processes: Vec::new(),
            in_flight: 0,
        });
    }
    let processes = tx
        .query(
            "SELECT id, host, pid, started_at, seen_at, version FROM processes \
                 WHERE seen_at >= $1 ORDER BY started_at, id",
            &[&live_since_ms],
        )
        .map_err(pg_error)?;
    for r in &processes {
        let version: String = col(r, "version")?;
        let process = ProcessView {
            id: col(r, "id")?,
            host: col(r, "host")?,
            pid: u32::try_from(col::<i64>(r, "pid")?).unwrap_or(0),
            started_at_ms: col(r, "started_at")?,
            seen_at_ms: col(r, "seen_at")?,
        };
        if let Some(v) = out.iter_mut().find(|v: &&mut VersionView| v.hash == version) {
            v.processes.push(process);
        }
    }
    let counts = tx
        .query(
            "SELECT e.version, count(*) AS n FROM deliveries d JOIN events e ON e.id = d.event_id \
                 WHERE d.state IN ('pending', 'running', 'held', 'parked', 'orphaned') AND e.version IS NOT NULL \
                 GROUP BY e.version",
            &[],
        )
        .map_err(pg_error)?;
    for r in &counts {
        let version: i64 = col(r, "version")?;
        if let Some(v) = out.iter_mut().find(|v: &&mut VersionView| v.id == version) {
            v.in_flight = u64::try_from(col::<i64>(r, "n")?).unwrap_or(0);
        }
    }
    tx.commit().map_err(pg_error)?;
    Ok(out)
}
