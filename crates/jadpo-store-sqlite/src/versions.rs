//! Program versions and the processes running them: each version kept once with
//! its files, each process's heartbeat, and the orphaned deliveries a process
//! whose program has their subscriber takes back.

use super::tx::Tx;
use super::{Error, state_of};
use jadpo_check::program::DeliveryState;
use jadpo_core::rules::held_when_adopted;
use jadpo_core::store::columns::{from_stored, to_stored};
use jadpo_core::version::{BacklogRow, OrphanRow, ProcessRow, ProcessView, ProgramVersion, SourceText, VersionView};
use rusqlite::{Connection, OptionalExtension, named_params, params};

/// The one-row table, private to this connection, naming the version its
/// events are stored with (read by every event's insert).
pub(super) const WRITER_TABLE: &str = "CREATE TEMP TABLE IF NOT EXISTS jadpo_writer (version INTEGER); \
     INSERT INTO temp.jadpo_writer (version) SELECT NULL WHERE NOT EXISTS (SELECT 1 FROM temp.jadpo_writer);";

pub(super) fn record(conn: &mut Connection, v: &ProgramVersion, now_ms: i64, run: bool) -> Result<i64, Error> {
    let (sources, subscribers, accepted) = (to_stored(&v.sources), to_stored(&v.subscribers), to_stored(&v.accepted));
    let tx = Tx::immediate(conn)?;
    let id: i64 = tx.query_row(
        "INSERT INTO jadpo_versions (hash, sources, subscribers, accepted, created_at, started_at) \
         VALUES (:hash, :sources, :subscribers, :accepted, :now, :started) \
         ON CONFLICT (hash) DO UPDATE SET started_at = COALESCE(:started, started_at), \
         accepted = CASE WHEN :started IS NULL THEN accepted ELSE :accepted END RETURNING id",
        named_params! {":hash": v.hash, ":sources": sources, ":subscribers": subscribers,
        ":accepted": accepted, ":now": now_ms, ":started": run.then_some(now_ms)},
        |r| r.get(0),
    )?;
    tx.execute("UPDATE temp.jadpo_writer SET version = ?1", [id])?;
    tx.commit()?;
    Ok(id)
}

pub(super) fn latest(conn: &mut Connection) -> Result<Option<ProgramVersion>, Error> {
    let row = conn
        .query_row(
            "SELECT hash, sources, subscribers, accepted, created_at FROM jadpo_versions \
             ORDER BY started_at IS NULL, started_at DESC, created_at DESC, rowid DESC LIMIT 1",
            [],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                ))
            },
        )
        .optional()?;
    let Some((hash, sources, subscribers, accepted, created_at_ms)) = row else { return Ok(None) };
    Ok(Some(ProgramVersion {
        hash,
        sources: from_stored::<Vec<SourceText>>(&sources, "files")?,
        subscribers: from_stored(&subscribers, "subscribers")?,
        accepted: from_stored(&accepted, "accepted findings")?,
        created_at_ms,
    }))
}

pub(super) fn heartbeat(
    conn: &mut Connection,
    p: &ProcessRow,
    now_ms: i64,
    live_since_ms: i64,
) -> Result<Vec<String>, Error> {
    let tx = Tx::immediate(conn)?;
    tx.execute(
        "INSERT INTO jadpo_processes (id, host, pid, version, started_at, seen_at) \
         VALUES (:id, :host, :pid, :version, :started, :now) \
         ON CONFLICT (id) DO UPDATE SET seen_at = :now, version = :version",
        named_params! {":id": p.id, ":host": p.host, ":pid": p.pid, ":version": p.version,
        ":started": p.started_at_ms, ":now": now_ms},
    )?;
    // A process not seen for long is gone (killed): its row goes.
    tx.execute("DELETE FROM jadpo_processes WHERE seen_at < ?1", [live_since_ms])?;
    let mut known = Vec::new();
    {
        let mut stmt = tx.prepare_cached(
            "SELECT DISTINCT v.subscribers FROM jadpo_processes p JOIN jadpo_versions v ON v.hash = p.version",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let list: Vec<String> = from_stored(&r.get::<_, String>(0)?, "subscribers")?;
            known.extend(list);
        }
    }
    tx.commit()?;
    Ok(known)
}

pub(super) fn stopped(conn: &mut Connection, id: &str) -> Result<(), Error> {
    conn.execute("DELETE FROM jadpo_processes WHERE id = ?1", [id])?;
    Ok(())
}

pub(super) fn orphans(conn: &mut Connection, subscribers: &[String], limit: usize) -> Result<Vec<OrphanRow>, Error> {
    let tx = Tx::deferred(conn)?;
    let mut out = Vec::new();
    {
        let mut stmt = tx.prepare_cached(
            "SELECT id, held_ms, held_since FROM jadpo_deliveries \
             WHERE state = ?1 AND subscriber = ?2 ORDER BY id LIMIT ?3",
        )?;
        for s in subscribers {
            let left = limit.saturating_sub(out.len());
            if left == 0 {
                break;
            }
            let mut rows = stmt.query(params![DeliveryState::Orphaned.as_str(), s, left as i64])?;
            while let Some(r) = rows.next()? {
                out.push(OrphanRow {
                    id: r.get(0)?,
                    subscriber: s.clone(),
                    held_ms: r.get(1)?,
                    orphaned_at_ms: r.get(2)?,
                });
            }
        }
    }
    tx.commit()?;
    Ok(out)
}

pub(super) fn adopt(conn: &mut Connection, rows: &[OrphanRow], now_ms: i64) -> Result<usize, Error> {
    let tx = Tx::immediate(conn)?;
    let mut adopted = 0;
    {
        let mut stmt = tx.prepare_cached(
            "UPDATE jadpo_deliveries SET state = :pending, due_at = :now, held_ms = :held, \
             held_since = NULL, held_connection = NULL \
             WHERE id = :id AND state = :orphaned AND held_ms = :seen_held AND held_since IS :since",
        )?;
        for o in rows {
            adopted += stmt.execute(named_params! {
                ":pending": DeliveryState::Pending.as_str(),
                ":orphaned": DeliveryState::Orphaned.as_str(),
                ":now": now_ms,
                ":held": held_when_adopted(o.held_ms, o.orphaned_at_ms.unwrap_or(now_ms), now_ms),
                ":id": o.id,
                ":seen_held": o.held_ms,
                ":since": o.orphaned_at_ms,
            })?;
        }
    }
    tx.commit()?;
    Ok(adopted)
}

pub(super) fn backlog(conn: &mut Connection) -> Result<Vec<BacklogRow>, Error> {
    let mut stmt = conn.prepare_cached(
        "SELECT subscriber, connection, state, count(*), min(created_at) FROM jadpo_deliveries \
         WHERE state IN ('pending', 'running', 'held', 'parked', 'orphaned') \
         GROUP BY subscriber, connection, state ORDER BY subscriber, connection, state",
    )?;
    let mut rows = stmt.query([])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(BacklogRow {
            subscriber: r.get(0)?,
            connection: r.get(1)?,
            state: state_of(&r.get::<_, String>(2)?)?,
            count: u64::try_from(r.get::<_, i64>(3)?).unwrap_or(0),
            oldest_created_ms: r.get(4)?,
        });
    }
    Ok(out)
}

pub(super) fn past_budget(conn: &mut Connection, subscriber: &str, attempts: u32, cut_ms: i64) -> Result<u64, Error> {
    let n: i64 = conn.query_row(
        "SELECT count(*) FROM jadpo_deliveries WHERE subscriber = ?1 AND state IN ('pending', 'held') \
         AND (attempts >= ?2 OR budget_start + held_ms < ?3)",
        params![subscriber, attempts, cut_ms],
        |r| r.get(0),
    )?;
    Ok(u64::try_from(n).unwrap_or(0))
}

pub(super) fn versions(conn: &mut Connection, live_since_ms: i64) -> Result<Vec<VersionView>, Error> {
    let tx = Tx::deferred(conn)?;
    let mut out: Vec<VersionView> = Vec::new();
    {
        let mut stmt = tx.prepare_cached(
            "SELECT id, hash, created_at, accepted FROM jadpo_versions \
             ORDER BY started_at IS NULL, started_at DESC, created_at DESC, rowid DESC",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            out.push(VersionView {
                id: r.get(0)?,
                hash: r.get(1)?,
                created_at_ms: r.get(2)?,
                accepted: from_stored(&r.get::<_, String>(3)?, "accepted findings")?,
                processes: Vec::new(),
                in_flight: 0,
            });
        }
    }
    {
        let mut stmt = tx.prepare_cached(
            "SELECT id, host, pid, started_at, seen_at, version FROM jadpo_processes \
             WHERE seen_at >= ?1 ORDER BY started_at, id",
        )?;
        let mut rows = stmt.query([live_since_ms])?;
        while let Some(r) = rows.next()? {
            let version: String = r.get(5)?;
            let process = ProcessView {
                id: r.get(0)?,
                host: r.get(1)?,
                pid: r.get(2)?,
                started_at_ms: r.get(3)?,
                seen_at_ms: r.get(4)?,
            };
            if let Some(v) = out.iter_mut().find(|v| v.hash == version) {
                v.processes.push(process);
            }
        }
    }
    {
        // Deliveries not ended, by their event's version: the claims' index
        // (pending and running), then the other states' own.
        let mut stmt = tx.prepare_cached(
            "SELECT e.version, count(*) FROM jadpo_deliveries d JOIN jadpo_events e ON e.id = d.event_id \
             WHERE d.state IN ('pending', 'running', 'held', 'parked', 'orphaned') AND e.version IS NOT NULL \
             GROUP BY e.version",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let version: i64 = r.get(0)?;
            if let Some(v) = out.iter_mut().find(|v| v.id == version) {
                v.in_flight = u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0);
            }
        }
    }
    tx.commit()?;
    Ok(out)
}
