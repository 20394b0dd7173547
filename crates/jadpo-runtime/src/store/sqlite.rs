//! The SQLite store: WAL, versioned migrations, conditional claims, and waits and
//! retries on a busy database so that no write is lost.

use super::{
    AttemptView, BreakerAlert, BreakerSweep, BreakerView, ClaimCandidate, ClaimReport, ClaimVerdict, Claimed,
    ClaimedSchedule, DeliveryFilter, DeliveryView, NewEvent, Recorded, RetryResult, ScheduleSpec, StatusView, Store,
    StoreError,
};
use crate::rules::breaker::{self, AfterAttempt, BreakerRow};
use crate::rules::{self, ClaimDecision, Failure, Outcome, Record};
use jadpo_check::program::{BreakerState, DeliveryState, FailureKind};
use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// `PRAGMA application_id` of a jadpo store: "JADP" in ASCII.
pub const APPLICATION_ID: i64 = 0x4A41_4450;

/// The migrations, in order; `PRAGMA user_version` counts those applied.
const MIGRATIONS: &[&str] = &[r#"
CREATE TABLE jadpo_events (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    payload TEXT NOT NULL,
    emitted_at INTEGER NOT NULL
);
CREATE TABLE jadpo_deliveries (
    id INTEGER PRIMARY KEY,
    event_id INTEGER NOT NULL,
    subscriber TEXT NOT NULL,
    connection TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    -- When the row is next claimable: a pending delivery's due time, a running
    -- one's lease end; NULL otherwise. One index then serves both claims.
    due_at INTEGER,
    lease_until INTEGER,
    claimed_at INTEGER,
    budget_start INTEGER NOT NULL,
    held_ms INTEGER NOT NULL DEFAULT 0,
    held_since INTEGER,
    held_connection TEXT,
    last_code TEXT,
    last_kind TEXT,
    created_at INTEGER NOT NULL
);
CREATE INDEX jadpo_deliveries_due ON jadpo_deliveries (state, due_at);
-- An operator's retry numbers attempts from 1 again, so the history is keyed by
-- its own id and both runs' attempts are kept.
CREATE TABLE jadpo_attempts (
    id INTEGER PRIMARY KEY,
    delivery_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    code TEXT,
    kind TEXT,
    http_status INTEGER
);
CREATE INDEX jadpo_attempts_delivery ON jadpo_attempts (delivery_id);
CREATE TABLE jadpo_handled (
    delivery_id INTEGER PRIMARY KEY,
    handled_at INTEGER NOT NULL
);
CREATE TABLE jadpo_schedules (
    name TEXT PRIMARY KEY,
    every_ms INTEGER NOT NULL,
    first_seen INTEGER NOT NULL,
    due_at INTEGER NOT NULL,
    runs INTEGER NOT NULL DEFAULT 0,
    last_claimed_at INTEGER,
    last_ended_at INTEGER,
    last_code TEXT,
    last_kind TEXT
);
CREATE TABLE jadpo_circuit_breakers (
    connection TEXT PRIMARY KEY,
    state TEXT NOT NULL DEFAULT 'closed',
    failures_in_a_row INTEGER NOT NULL DEFAULT 0,
    opened_at INTEGER,
    pause_ms INTEGER NOT NULL DEFAULT 0,
    alerts INTEGER NOT NULL DEFAULT 0,
    alerted_at INTEGER,
    probe_delivery INTEGER,
    probe_lease_until INTEGER,
    updated_at INTEGER
);
"#];

/// How long a busy database is waited on, in all, before an operation fails.
const BUSY_GIVE_UP: Duration = Duration::from_secs(60);

/// A store in one SQLite database file (or in memory).
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: String,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").field("path", &self.path).finish()
    }
}

fn open_error(path: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Open { path: path.to_string(), message: e.to_string() }
}

fn is_busy(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Sqlite(rusqlite::Error::SqliteFailure(f, _))
            if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

fn is_not_a_database(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::NotADatabase)
}

impl SqliteStore {
    /// Open the store at `path`, creating it if the file is missing or empty and
    /// applying migrations. A file that is not a jadpo store is refused untouched.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let shown = path.display().to_string();
        if path.is_dir() {
            return Err(open_error(&shown, "it is a directory"));
        }
        let conn = Connection::open(path).map_err(|e| open_error(&shown, e))?;
        let store = SqliteStore { conn: Mutex::new(conn), path: shown };
        store.prepare(true)?;
        Ok(store)
    }

    /// An in-memory store (for the virtual-time runner and tests).
    pub fn open_in_memory() -> Result<SqliteStore, StoreError> {
        let conn = Connection::open_in_memory().map_err(|e| open_error(":memory:", e))?;
        let store = SqliteStore { conn: Mutex::new(conn), path: ":memory:".into() };
        store.prepare(false)?;
        Ok(store)
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves no half-done transaction behind
        // (it rolls back on drop), so the connection is still usable.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Check the file is ours (or empty), then set it up and migrate it.
    fn prepare(&self, wal: bool) -> Result<(), StoreError> {
        let foreign = || StoreError::Foreign { path: self.path.clone() };
        let mut conn = self.lock();
        conn.busy_timeout(Duration::from_secs(5))?;
        // A stable plan per statement: without it SQLite re-prepares a cached
        // statement whenever a bound value (`now`, a state) changes, which was most
        // of the cost of a claim.
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
        // Read before writing anything: a foreign file must stay as it was.
        let app_id: i64 = match conn.pragma_query_value(None, "application_id", |r| r.get(0)) {
            Ok(v) => v,
            Err(e) if is_not_a_database(&e) => return Err(foreign()),
            Err(e) => return Err(open_error(&self.path, e)),
        };
        let objects: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(|e| if is_not_a_database(&e) { foreign() } else { open_error(&self.path, e) })?;
        if app_id != APPLICATION_ID && !(app_id == 0 && objects == 0) {
            return Err(foreign());
        }
        if wal {
            let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(open_error(&self.path, format!("cannot use write-ahead logging (journal mode `{mode}`)")));
            }
        }
        // Every commit reaches the disk before it returns: an emitted event is kept.
        conn.pragma_update(None, "synchronous", "FULL")?;
        let start = Instant::now();
        loop {
            match migrate(&mut conn, &self.path) {
                Err(e) if is_busy(&e) && start.elapsed() < BUSY_GIVE_UP => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                other => return other,
            }
        }
    }

    /// Run `f` in a retry loop: a busy or locked database is waited on and the
    /// whole transaction run again, so nothing is lost to a lock.
    fn with_retry<T>(&self, mut f: impl FnMut(&mut Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let start = Instant::now();
        let mut conn = self.lock();
        let mut pause = 2u64;
        loop {
            match f(&mut conn) {
                Err(e) if is_busy(&e) => {
                    if start.elapsed() >= BUSY_GIVE_UP {
                        return Err(StoreError::Busy { waited_s: start.elapsed().as_secs() });
                    }
                    std::thread::sleep(Duration::from_millis(pause));
                    pause = (pause * 2).min(100);
                }
                other => return other,
            }
        }
    }
}

fn migrate(conn: &mut Connection, path: &str) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let known = MIGRATIONS.len() as i64;
    if version > known {
        return Err(StoreError::TooNew { path: path.to_string(), found: version, known });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version.max(0) as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
    }
    tx.pragma_update(None, "application_id", APPLICATION_ID)?;
    tx.commit()?;
    Ok(())
}

fn state_of(s: &str) -> Result<DeliveryState, StoreError> {
    DeliveryState::parse(s).ok_or_else(|| StoreError::Corrupt(format!("unknown state `{s}`")))
}

fn failure_of(code: Option<String>, kind: Option<String>) -> Result<Option<Failure>, StoreError> {
    match (code, kind) {
        (Some(code), Some(kind)) => {
            let kind = FailureKind::parse(&kind)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown failure kind `{kind}`")))?;
            Ok(Some(Failure::new(code, kind)))
        }
        _ => Ok(None),
    }
}

fn u32_of(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

/// The columns a claim reads, in order.
const CLAIM_COLUMNS: &str = "d.id, d.subscriber, d.connection, d.state, d.attempts, d.due_at, \
     d.lease_until, d.budget_start, d.held_ms, d.last_code, d.last_kind, d.claimed_at, \
     EXISTS (SELECT 1 FROM jadpo_handled h WHERE h.delivery_id = d.id), \
     e.id, e.name, e.payload";

struct ClaimRow {
    candidate: ClaimCandidate,
    claimed_at: Option<i64>,
    event_id: i64,
    event: String,
    payload: String,
}

type RawClaimRow = (
    (i64, String, String, String, i64, Option<i64>, Option<i64>),
    (i64, i64, Option<String>, Option<String>, Option<i64>, bool),
    (i64, String, String),
);

fn read_claim_rows(
    tx: &rusqlite::Transaction<'_>,
    state: &str,
    now_ms: i64,
    limit: usize,
) -> Result<Vec<ClaimRow>, StoreError> {
    let sql = format!(
        "SELECT {CLAIM_COLUMNS} FROM jadpo_deliveries d JOIN jadpo_events e ON e.id = d.event_id \
         WHERE d.state = ?1 AND d.due_at <= ?2 ORDER BY d.due_at, d.id LIMIT ?3"
    );
    let mut stmt = tx.prepare_cached(&sql)?;
    let raw: Vec<RawClaimRow> = stmt
        .query_map(params![state, now_ms, limit as i64], |r| {
            Ok((
                (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?),
                (r.get(7)?, r.get(8)?, r.get(9)?, r.get(10)?, r.get(11)?, r.get(12)?),
                (r.get(13)?, r.get(14)?, r.get(15)?),
            ))
        })?
        .collect::<Result<_, _>>()?;
    let mut rows = Vec::with_capacity(raw.len());
    for (
        (id, subscriber, connection, st, attempts, due_at, lease_until),
        (budget_start, held_ms, code, kind, claimed_at, handled),
        (event_id, event, payload),
    ) in raw
    {
        let state = state_of(&st)?;
        let record = Record {
            state,
            attempts: u32_of(attempts),
            due_at_ms: if state == DeliveryState::Pending { due_at } else { None },
            lease_until_ms: lease_until,
            budget_start_ms: budget_start,
            held_ms,
            last_failure: failure_of(code, kind)?,
        };
        rows.push(ClaimRow {
            candidate: ClaimCandidate { id, subscriber, connection, record, handled, breaker: BreakerRow::default() },
            claimed_at,
            event_id,
            event,
            payload,
        });
    }
    Ok(rows)
}

/// Record the attempt a lost worker had counted, as `lease_expired`.
fn insert_lease_expired_attempt(tx: &rusqlite::Transaction<'_>, row: &ClaimRow, now_ms: i64) -> Result<(), StoreError> {
    let started = row.claimed_at.unwrap_or(now_ms);
    let f = Failure::lease_expired();
    tx.prepare_cached(
        "INSERT INTO jadpo_attempts \
         (delivery_id, attempt, started_at, duration_ms, outcome, code, kind, http_status) \
         VALUES (?1, ?2, ?3, ?4, 'failed', ?5, ?6, NULL)",
    )?
    .execute(params![
        row.candidate.id,
        row.candidate.record.attempts,
        started,
        (now_ms - started).max(0),
        f.code,
        f.kind.as_str()
    ])?;
    Ok(())
}

/// A connection's breaker row, if it has one.
fn read_breaker(tx: &rusqlite::Transaction<'_>, connection: &str) -> Result<Option<BreakerRow>, StoreError> {
    let sql = format!("{BREAKER_ALONE} WHERE connection = ?1");
    let raw = tx.prepare_cached(&sql)?.query_row([connection], raw_breaker).optional()?;
    Ok(match raw {
        Some(raw) => Some(breaker_of(raw)?.row),
        None => None,
    })
}

/// Write a breaker's next row in one conditional statement: only if the row is
/// still as it was read (`old`; `None` = no row yet), so that of processes
/// sharing the store exactly one makes each change. Returns whether it did.
fn write_breaker(
    tx: &rusqlite::Transaction<'_>,
    connection: &str,
    old: Option<&BreakerRow>,
    next: &BreakerRow,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let alerted_at = |r: &BreakerRow| if r.alerted { Some(r.opened_at_ms.unwrap_or(now_ms)) } else { None };
    let n = match old {
        None => tx
            .prepare_cached(
                "INSERT INTO jadpo_circuit_breakers (connection, state, failures_in_a_row, opened_at, \
                 pause_ms, alerts, alerted_at, probe_delivery, probe_lease_until, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (connection) DO NOTHING",
            )?
            .execute(params![
                connection,
                next.state.as_str(),
                next.failures_in_a_row,
                next.opened_at_ms,
                rules::ms_i64(next.pause_ms),
                next.alerts,
                alerted_at(next),
                next.probe,
                next.probe_lease_until_ms,
                now_ms
            ])?,
        Some(old) => tx
            .prepare_cached(
                "UPDATE jadpo_circuit_breakers SET state = ?2, failures_in_a_row = ?3, opened_at = ?4, \
                 pause_ms = ?5, alerts = ?6, \
                 alerted_at = CASE WHEN ?7 THEN COALESCE(alerted_at, ?10) ELSE NULL END, \
                 probe_delivery = ?8, probe_lease_until = ?9, updated_at = ?10 \
                 WHERE connection = ?1 AND state = ?11 AND failures_in_a_row = ?12 \
                 AND opened_at IS ?13 AND probe_delivery IS ?14 AND alerts = ?15",
            )?
            .execute(params![
                connection,
                next.state.as_str(),
                next.failures_in_a_row,
                next.opened_at_ms,
                rules::ms_i64(next.pause_ms),
                next.alerts,
                next.alerted,
                next.probe,
                next.probe_lease_until_ms,
                now_ms,
                old.state.as_str(),
                old.failures_in_a_row,
                old.opened_at_ms,
                old.probe,
                old.alerts
            ])?,
    };
    Ok(n == 1)
}

/// Release held deliveries at `?1` (now): pending, due at once, and the time each
/// was held added to `held_ms`, which moves its window on. The one place the
/// held-time rule is written; the `WHERE` says which deliveries.
const RELEASE_HELD: &str = "UPDATE jadpo_deliveries SET state = 'pending', due_at = ?1, \
     held_ms = held_ms + MAX(0, ?1 - held_since), held_since = NULL, held_connection = NULL";

/// Held deliveries whose connection has no breaker that is not closed: a release
/// racing a hold can leave these behind, and the tick's sweep releases them.
const HELD_WITHOUT_OPEN_BREAKER: &str = "state = 'held' AND NOT EXISTS (SELECT 1 FROM \
     jadpo_circuit_breakers b WHERE b.connection = held_connection AND b.state <> 'closed')";

/// Release the connection's held deliveries (or only `one`), due at `now_ms`.
fn release_held(
    tx: &rusqlite::Transaction<'_>,
    connection: &str,
    one: Option<i64>,
    now_ms: i64,
) -> Result<usize, StoreError> {
    let sql = format!("{RELEASE_HELD} WHERE state = 'held' AND held_connection = ?2 AND (?3 IS NULL OR id = ?3)");
    Ok(tx.prepare_cached(&sql)?.execute(params![now_ms, connection, one])?)
}

fn claim_tx(
    conn: &mut Connection,
    now_ms: i64,
    limit: usize,
    decide: &mut dyn FnMut(&ClaimCandidate) -> ClaimVerdict,
) -> Result<ClaimReport, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Ended leases first (rare), then due pending deliveries in due order; two
    // queries so each walks the (state, due_at) index in order under its LIMIT.
    let mut rows = read_claim_rows(&tx, "running", now_ms, limit)?;
    let left = limit.saturating_sub(rows.len());
    if left > 0 {
        rows.extend(read_claim_rows(&tx, "pending", now_ms, left)?);
    }
    // Each connection's breaker as this claim leaves it (a probe taken earlier in
    // the batch holds the rest).
    let mut breakers: HashMap<String, Option<BreakerRow>> = HashMap::new();
    let mut report = ClaimReport::default();
    for mut row in rows {
        if !breakers.contains_key(&row.candidate.connection) {
            let found = read_breaker(&tx, &row.candidate.connection)?;
            breakers.insert(row.candidate.connection.clone(), found);
        }
        let current = breakers.get(&row.candidate.connection).cloned().flatten();
        row.candidate.breaker = current.clone().unwrap_or_default();
        let c = &row.candidate;
        let (mut decision, next_breaker) = decide(c);
        if let Some(next) = next_breaker {
            // This claim is the probe; if another process changed the breaker
            // since it was read, the delivery is held instead.
            if write_breaker(&tx, &c.connection, current.as_ref(), &next, now_ms)? {
                breakers.insert(c.connection.clone(), Some(next));
            } else {
                decision = decision.held();
            }
        }
        let old_state = c.record.state.as_str();
        let old_attempts = c.record.attempts;
        match &decision {
            ClaimDecision::Skip => continue,
            ClaimDecision::Hold { lease_expired, failure } => {
                if *lease_expired {
                    insert_lease_expired_attempt(&tx, &row, now_ms)?;
                }
                // Not due and no attempt counted: the claim's attempt is given back.
                let n = tx
                    .prepare_cached(
                        "UPDATE jadpo_deliveries SET state = 'held', due_at = NULL, lease_until = NULL, \
                         held_since = ?4, held_connection = ?5, last_code = ?6, last_kind = ?7 \
                         WHERE id = ?1 AND state = ?2 AND attempts = ?3",
                    )?
                    .execute(params![
                        c.id,
                        old_state,
                        old_attempts,
                        now_ms,
                        c.connection,
                        failure.as_ref().map(|f| f.code.as_str()),
                        failure.as_ref().map(|f| f.kind.as_str()),
                    ])?;
                if n == 1 {
                    report.held.push((c.id, c.connection.clone()));
                }
            }
            ClaimDecision::Handled => {
                let n = tx
                    .prepare_cached(
                        "UPDATE jadpo_deliveries SET state = 'succeeded', due_at = NULL, \
                         lease_until = NULL WHERE id = ?1 AND state = ?2 AND attempts = ?3",
                    )?
                    .execute(params![c.id, old_state, old_attempts])?;
                if n == 1 {
                    report.ended.push((c.id, c.subscriber.clone(), decision));
                }
            }
            ClaimDecision::Run { attempt, lease_until_ms, lease_expired, failure } => {
                if *lease_expired {
                    insert_lease_expired_attempt(&tx, &row, now_ms)?;
                }
                let n = tx
                    .prepare_cached(
                        "UPDATE jadpo_deliveries SET state = 'running', attempts = ?4, \
                         due_at = ?5, lease_until = ?5, claimed_at = ?6, last_code = ?7, \
                         last_kind = ?8 WHERE id = ?1 AND state = ?2 AND attempts = ?3",
                    )?
                    .execute(params![
                        c.id,
                        old_state,
                        old_attempts,
                        attempt,
                        lease_until_ms,
                        now_ms,
                        failure.as_ref().map(|f| f.code.as_str()),
                        failure.as_ref().map(|f| f.kind.as_str()),
                    ])?;
                if n == 1 {
                    let record = Record {
                        state: DeliveryState::Running,
                        attempts: *attempt,
                        due_at_ms: None,
                        lease_until_ms: Some(*lease_until_ms),
                        budget_start_ms: c.record.budget_start_ms,
                        held_ms: c.record.held_ms,
                        last_failure: failure.clone(),
                    };
                    report.run.push(Claimed {
                        id: c.id,
                        event_id: row.event_id,
                        event: row.event.clone(),
                        payload: row.payload.clone(),
                        subscriber: c.subscriber.clone(),
                        connection: c.connection.clone(),
                        attempt: *attempt,
                        claimed_at_ms: now_ms,
                        record,
                    });
                }
            }
            ClaimDecision::GiveUp { failure, lease_expired, .. } => {
                if *lease_expired {
                    insert_lease_expired_attempt(&tx, &row, now_ms)?;
                }
                let n = tx
                    .prepare_cached(
                        "UPDATE jadpo_deliveries SET state = 'failed', due_at = NULL, \
                         lease_until = NULL, last_code = ?4, last_kind = ?5 \
                         WHERE id = ?1 AND state = ?2 AND attempts = ?3",
                    )?
                    .execute(params![c.id, old_state, old_attempts, failure.code, failure.kind.as_str()])?;
                if n == 1 {
                    report.ended.push((c.id, c.subscriber.clone(), decision));
                }
            }
        }
    }
    tx.commit()?;
    Ok(report)
}

fn record_tx(conn: &mut Connection, outcomes: &[Recorded]) -> Result<Vec<usize>, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut written = Vec::with_capacity(outcomes.len());
    {
        let mut update = tx.prepare_cached(
            "UPDATE jadpo_deliveries SET state = ?3, due_at = ?4, lease_until = NULL, \
             last_code = COALESCE(?5, last_code), last_kind = COALESCE(?6, last_kind) \
             WHERE id = ?1 AND state = 'running' AND attempts = ?2 AND claimed_at = ?7",
        )?;
        let mut attempt = tx.prepare_cached(
            "INSERT INTO jadpo_attempts \
             (delivery_id, attempt, started_at, duration_ms, outcome, code, kind, http_status) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        let mut handled =
            tx.prepare_cached("INSERT OR IGNORE INTO jadpo_handled (delivery_id, handled_at) VALUES (?1, ?2)")?;
        for (i, r) in outcomes.iter().enumerate() {
            let failure = r.decision.failure();
            let n = update.execute(params![
                r.id,
                r.attempt,
                r.decision.state().as_str(),
                r.decision.due_at_ms(),
                failure.map(|f| f.code.as_str()),
                failure.map(|f| f.kind.as_str()),
                r.started_at_ms,
            ])?;
            if n == 0 {
                // Its lease ended and another claim took it: that claim owns it now.
                continue;
            }
            written.push(i);
            let (word, code, kind) = match &r.outcome {
                Outcome::Succeeded { .. } => ("succeeded", None, None),
                Outcome::Failed(f) => ("failed", Some(f.code.as_str()), Some(f.kind.as_str())),
            };
            attempt.execute(params![
                r.id,
                r.attempt,
                r.started_at_ms,
                (r.ended_at_ms - r.started_at_ms).max(0),
                word,
                code,
                kind,
                r.outcome.http_status(),
            ])?;
            if matches!(r.decision, rules::Decision::Succeeded) {
                handled.execute(params![r.id, r.ended_at_ms])?;
            }
        }
    }
    // Count each written outcome for its connection's breaker, in order.
    let mut breakers: HashMap<&str, Option<BreakerRow>> = HashMap::new();
    for r in written.iter().map(|&i| &outcomes[i]) {
        let current = match breakers.get(r.connection.as_str()) {
            Some(row) => row.clone(),
            None => read_breaker(&tx, &r.connection)?,
        };
        let old = current.clone().unwrap_or_default();
        let (next, what) = breaker::after_attempt(&old, r.id, &r.outcome, r.ended_at_ms);
        if next != old && write_breaker(&tx, &r.connection, current.as_ref(), &next, r.ended_at_ms)? {
            if what == AfterAttempt::Closed {
                release_held(&tx, &r.connection, None, r.ended_at_ms)?;
            }
            breakers.insert(&r.connection, Some(next));
        } else {
            breakers.insert(&r.connection, current);
        }
    }
    tx.commit()?;
    Ok(written)
}

const VIEW_COLUMNS: &str = "d.id, d.event_id, e.name, d.subscriber, d.connection, d.state, \
     d.attempts, d.due_at, d.lease_until, d.held_since, d.held_ms, d.budget_start, \
     d.created_at, d.last_code, d.last_kind";

type RawView = (
    (i64, i64, String, String, String, String, i64),
    (Option<i64>, Option<i64>, Option<i64>, i64, i64, i64),
    (Option<String>, Option<String>),
);

fn view_of(raw: RawView) -> Result<DeliveryView, StoreError> {
    let (
        (id, event_id, event, subscriber, connection, state, attempts),
        (due_at, lease_until, held_since, held_ms, budget_start, created_at),
        (code, kind),
    ) = raw;
    let state = state_of(&state)?;
    Ok(DeliveryView {
        id,
        event_id,
        event,
        subscriber,
        connection,
        state,
        attempts: u32_of(attempts),
        due_at_ms: if state == DeliveryState::Pending { due_at } else { None },
        lease_until_ms: if state == DeliveryState::Running { lease_until } else { None },
        held_since_ms: held_since,
        held_ms,
        budget_start_ms: budget_start,
        created_at_ms: created_at,
        last_failure: failure_of(code, kind)?,
    })
}

fn raw_view(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawView> {
    Ok((
        (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?),
        (r.get(7)?, r.get(8)?, r.get(9)?, r.get(10)?, r.get(11)?, r.get(12)?),
        (r.get(13)?, r.get(14)?),
    ))
}

/// The columns of a breaker's row, in the order [`breaker_of`] reads them (a
/// macro so that the queries below can be `concat!`ed as constants).
macro_rules! breaker_columns {
    () => {
        "connection, state, failures_in_a_row, opened_at, pause_ms, alerts, alerted_at, probe_delivery, \
         probe_lease_until"
    };
}

/// A breaker's row with no held count (a claim reads it per connection, and the
/// count would cost a walk of the held deliveries).
const BREAKER_ALONE: &str = concat!("SELECT ", breaker_columns!(), ", 0 FROM jadpo_circuit_breakers");

/// Every breaker's row with the count of deliveries held for it; a `WHERE` may follow.
const BREAKERS_WITH_HELD: &str = concat!(
    "SELECT ",
    breaker_columns!(),
    ", (SELECT count(*) FROM jadpo_deliveries d WHERE d.state = 'held' AND d.held_connection = b.connection) \
     FROM jadpo_circuit_breakers b"
);

/// A breaker's columns, then the count of deliveries held for it.
type RawBreaker = (String, String, i64, Option<i64>, i64, i64, Option<i64>, Option<i64>, Option<i64>, i64);

fn raw_breaker(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawBreaker> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?))
}

fn breaker_of(raw: RawBreaker) -> Result<BreakerView, StoreError> {
    let (connection, state, failures, opened_at, pause_ms, alerts, alerted_at, probe, probe_lease_until, held) = raw;
    let state =
        BreakerState::parse(&state).ok_or_else(|| StoreError::Corrupt(format!("unknown breaker state `{state}`")))?;
    Ok(BreakerView {
        connection,
        row: BreakerRow {
            state,
            failures_in_a_row: u32_of(failures),
            opened_at_ms: opened_at,
            pause_ms: u64::try_from(pause_ms).unwrap_or(0),
            alerts: u32_of(alerts),
            alerted: alerted_at.is_some(),
            probe,
            probe_lease_until_ms: probe_lease_until,
        },
        held: u64::try_from(held).unwrap_or(0),
    })
}

impl Store for SqliteStore {
    fn emit(&self, events: &[NewEvent], now_ms: i64) -> Result<Vec<i64>, StoreError> {
        self.with_retry(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut ids = Vec::with_capacity(events.len());
            {
                let mut ev =
                    tx.prepare_cached("INSERT INTO jadpo_events (name, payload, emitted_at) VALUES (?1, ?2, ?3)")?;
                let mut del = tx.prepare_cached(
                    "INSERT INTO jadpo_deliveries (event_id, subscriber, connection, state, \
                     attempts, due_at, budget_start, held_ms, created_at) \
                     VALUES (?1, ?2, ?3, 'pending', 0, ?4, ?4, 0, ?4)",
                )?;
                for e in events {
                    ev.execute(params![e.name, e.payload, now_ms])?;
                    let id = tx.last_insert_rowid();
                    for d in &e.deliveries {
                        del.execute(params![id, d.subscriber, d.connection, now_ms])?;
                    }
                    ids.push(id);
                }
            }
            tx.commit()?;
            Ok(ids)
        })
    }

    fn claim(
        &self,
        now_ms: i64,
        limit: usize,
        decide: &mut dyn FnMut(&ClaimCandidate) -> ClaimVerdict,
    ) -> Result<ClaimReport, StoreError> {
        self.with_retry(|conn| claim_tx(conn, now_ms, limit, decide))
    }

    fn record(&self, outcomes: &[Recorded]) -> Result<Vec<usize>, StoreError> {
        if outcomes.is_empty() {
            return Ok(Vec::new());
        }
        self.with_retry(|conn| record_tx(conn, outcomes))
    }

    fn next_due_ms(&self) -> Result<Option<i64>, StoreError> {
        self.with_retry(|conn| {
            let mut stmt = conn
                .prepare_cached("SELECT min(due_at) FROM jadpo_deliveries WHERE state = ?1 AND due_at IS NOT NULL")?;
            let p: Option<i64> = stmt.query_row(["pending"], |r| r.get(0))?;
            let l: Option<i64> = stmt.query_row(["running"], |r| r.get(0))?;
            Ok(match (p, l) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            })
        })
    }

    fn deliveries(&self, filter: &DeliveryFilter) -> Result<Vec<DeliveryView>, StoreError> {
        self.with_retry(|conn| {
            let sql = format!(
                "SELECT {VIEW_COLUMNS} FROM jadpo_deliveries d \
                 JOIN jadpo_events e ON e.id = d.event_id \
                 WHERE (?1 IS NULL OR d.state = ?1) AND (?2 IS NULL OR d.subscriber = ?2) \
                 ORDER BY d.id {} LIMIT ?3",
                // With a limit, the newest come first (the latest delivery is one row).
                if filter.limit.is_some() { "DESC" } else { "ASC" }
            );
            let mut stmt = conn.prepare_cached(&sql)?;
            let limit = filter.limit.map_or(-1, |l| l as i64);
            let raw: Vec<RawView> = stmt
                .query_map(params![filter.state.map(|s| s.as_str()), filter.subscriber.as_deref(), limit], raw_view)?
                .collect::<Result<_, _>>()?;
            raw.into_iter().map(view_of).collect()
        })
    }

    fn delivery(&self, id: i64) -> Result<Option<(DeliveryView, Vec<AttemptView>)>, StoreError> {
        self.with_retry(|conn| {
            let tx = conn.transaction()?;
            let sql = format!(
                "SELECT {VIEW_COLUMNS} FROM jadpo_deliveries d \
                 JOIN jadpo_events e ON e.id = d.event_id WHERE d.id = ?1"
            );
            let raw = tx.query_row(&sql, [id], raw_view).optional()?;
            let Some(raw) = raw else {
                return Ok(None);
            };
            let view = view_of(raw)?;
            let mut stmt = tx.prepare(
                "SELECT attempt, started_at, duration_ms, outcome, code, kind, http_status \
                 FROM jadpo_attempts WHERE delivery_id = ?1 ORDER BY id",
            )?;
            let history = stmt
                .query_map([id], |r| {
                    Ok(AttemptView {
                        attempt: u32_of(r.get(0)?),
                        started_at_ms: r.get(1)?,
                        duration_ms: r.get(2)?,
                        outcome: r.get(3)?,
                        code: r.get(4)?,
                        kind: r.get(5)?,
                        http_status: r.get::<_, Option<i64>>(6)?.and_then(|s| u16::try_from(s).ok()),
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Some((view, history)))
        })
    }

    fn retry(&self, ids: &[i64], now_ms: i64) -> Result<Vec<RetryResult>, StoreError> {
        self.with_retry(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut results = Vec::with_capacity(ids.len());
            for &id in ids {
                let row: Option<(String, i64)> = tx
                    .query_row("SELECT state, attempts FROM jadpo_deliveries WHERE id = ?1", [id], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })
                    .optional()?;
                let Some((state, attempts)) = row else {
                    results.push(RetryResult::NotFound);
                    continue;
                };
                let state = state_of(&state)?;
                let record = Record {
                    state,
                    attempts: u32_of(attempts),
                    due_at_ms: None,
                    lease_until_ms: None,
                    budget_start_ms: now_ms,
                    held_ms: 0,
                    last_failure: None,
                };
                let Some(fresh) = rules::operator_retry(&record, now_ms) else {
                    results.push(RetryResult::NotRetryable(state));
                    continue;
                };
                let n = tx.execute(
                    "UPDATE jadpo_deliveries SET state = ?3, attempts = ?4, due_at = ?5, \
                     lease_until = NULL, budget_start = ?6, held_ms = ?7, held_since = NULL, \
                     held_connection = NULL, last_code = NULL, last_kind = NULL \
                     WHERE id = ?1 AND state = ?2",
                    params![
                        id,
                        state.as_str(),
                        fresh.state.as_str(),
                        fresh.attempts,
                        fresh.due_at_ms,
                        fresh.budget_start_ms,
                        fresh.held_ms
                    ],
                )?;
                // The history keeps the earlier attempts: it is keyed by its own id.
                results.push(if n == 1 { RetryResult::Retried } else { RetryResult::NotRetryable(state) });
            }
            tx.commit()?;
            Ok(results)
        })
    }

    fn status(&self, now_ms: i64) -> Result<StatusView, StoreError> {
        self.with_retry(|conn| {
            let tx = conn.transaction()?;
            let mut stmt = tx.prepare(
                "SELECT subscriber, state, count(*) FROM jadpo_deliveries \
                 GROUP BY subscriber, state ORDER BY subscriber, state",
            )?;
            let rows: Vec<(String, String, i64)> =
                stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?;
            let mut view =
                StatusView { states: DeliveryState::ALL.iter().map(|s| (*s, 0)).collect(), ..StatusView::default() };
            for (sub, state, n) in rows {
                let state = state_of(&state)?;
                let n = u64::try_from(n).unwrap_or(0);
                if let Some(slot) = view.states.iter_mut().find(|(s, _)| *s == state) {
                    slot.1 += n;
                }
                match view.subscribers.last_mut() {
                    Some((name, counts)) if *name == sub => counts.push((state, n)),
                    _ => view.subscribers.push((sub, vec![(state, n)])),
                }
            }
            view.breakers_open =
                tx.query_row("SELECT count(*) FROM jadpo_circuit_breakers WHERE state <> 'closed'", [], |r| {
                    r.get::<_, i64>(0)
                })? as u64;
            let oldest: Option<i64> =
                tx.query_row("SELECT min(created_at) FROM jadpo_deliveries WHERE state = 'pending'", [], |r| r.get(0))?;
            view.oldest_pending_s = oldest.map(|t| ((now_ms - t) / 1000).max(0));
            Ok(view)
        })
    }

    fn sync_schedules(&self, schedules: &[ScheduleSpec], now_ms: i64) -> Result<(), StoreError> {
        self.with_retry(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            for s in schedules {
                let every = rules::ms_i64(s.every_ms);
                tx.execute(
                    "INSERT INTO jadpo_schedules (name, every_ms, first_seen, due_at) \
                     VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (name) DO UPDATE SET every_ms = excluded.every_ms",
                    params![s.name, every, now_ms, now_ms.saturating_add(every)],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    fn claim_schedules(&self, schedules: &[ScheduleSpec], now_ms: i64) -> Result<Vec<ClaimedSchedule>, StoreError> {
        self.with_retry(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut claimed = Vec::new();
            for s in schedules {
                let row: Option<(i64, i64)> = tx
                    .query_row(
                        "SELECT due_at, runs FROM jadpo_schedules WHERE name = ?1 AND due_at <= ?2",
                        params![s.name, now_ms],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()?;
                let Some((due_at, runs)) = row else { continue };
                let next = rules::schedule_next_due_ms(due_at, s.every_ms, now_ms);
                let n = tx.execute(
                    "UPDATE jadpo_schedules SET due_at = ?3, runs = runs + 1, \
                     last_claimed_at = ?4 WHERE name = ?1 AND due_at = ?2",
                    params![s.name, due_at, next, now_ms],
                )?;
                if n == 1 {
                    claimed.push(ClaimedSchedule { name: s.name.clone(), run: u64::try_from(runs + 1).unwrap_or(0) });
                }
            }
            tx.commit()?;
            Ok(claimed)
        })
    }

    fn record_schedule(&self, name: &str, ended_at_ms: i64, failure: Option<&Failure>) -> Result<(), StoreError> {
        self.with_retry(|conn| {
            conn.execute(
                "UPDATE jadpo_schedules SET last_ended_at = ?2, last_code = ?3, last_kind = ?4 \
                 WHERE name = ?1",
                params![name, ended_at_ms, failure.map(|f| f.code.as_str()), failure.map(|f| f.kind.as_str())],
            )?;
            Ok(())
        })
    }

    fn next_schedule_due_ms(&self) -> Result<Option<i64>, StoreError> {
        self.with_retry(|conn| Ok(conn.query_row("SELECT min(due_at) FROM jadpo_schedules", [], |r| r.get(0))?))
    }

    fn breakers(&self) -> Result<Vec<BreakerView>, StoreError> {
        self.with_retry(|conn| {
            let mut stmt = conn.prepare_cached(&format!("{BREAKERS_WITH_HELD} ORDER BY connection"))?;
            let raw: Vec<RawBreaker> = stmt.query_map([], raw_breaker)?.collect::<Result<_, _>>()?;
            raw.into_iter().map(breaker_of).collect()
        })
    }

    fn sweep_breakers(&self, now_ms: i64, lease_until: &dyn Fn(&str) -> i64) -> Result<BreakerSweep, StoreError> {
        self.with_retry(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let released = tx
                .prepare_cached(&format!("{RELEASE_HELD} WHERE {HELD_WITHOUT_OPEN_BREAKER}"))?
                .execute([now_ms])? as u64;
            let mut sweep = BreakerSweep { released, ..BreakerSweep::default() };
            let sql = format!("{BREAKERS_WITH_HELD} WHERE state <> 'closed' ORDER BY connection");
            let raw: Vec<RawBreaker> =
                tx.prepare_cached(&sql)?.query_map([], raw_breaker)?.collect::<Result<_, _>>()?;
            for view in raw.into_iter().map(breaker_of) {
                let BreakerView { connection, row, held } = view?;
                let mut row = row;
                if breaker::alert_due(&row) {
                    let raised = breaker::alert_raised(&row);
                    if write_breaker(&tx, &connection, Some(&row), &raised, now_ms)? {
                        sweep.alerts.push(BreakerAlert {
                            connection: connection.clone(),
                            since_ms: row.opened_at_ms.unwrap_or(now_ms),
                            held,
                        });
                        row = raised;
                    }
                }
                if held == 0 {
                    continue;
                }
                let longest: Option<(i64, String)> = tx
                    .prepare_cached(
                        "SELECT id, subscriber FROM jadpo_deliveries WHERE state = 'held' \
                         AND held_connection = ?1 ORDER BY held_since, id LIMIT 1",
                    )?
                    .query_row([&connection], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?;
                let Some((id, subscriber)) = longest else { continue };
                if let Some(next) = breaker::tick_wake(&row, now_ms, id, lease_until(&subscriber))
                    && write_breaker(&tx, &connection, Some(&row), &next, now_ms)?
                {
                    release_held(&tx, &connection, Some(id), now_ms)?;
                    sweep.woken.push(id);
                }
            }
            tx.commit()?;
            Ok(sweep)
        })
    }

    fn next_sweep_ms(&self, now_ms: i64) -> Result<Option<i64>, StoreError> {
        self.with_retry(|conn| {
            let orphans: bool = conn
                .prepare_cached(&format!(
                    "SELECT EXISTS (SELECT 1 FROM jadpo_deliveries WHERE {HELD_WITHOUT_OPEN_BREAKER})"
                ))?
                .query_row([], |r| r.get(0))?;
            let mut next = orphans.then_some(now_ms);
            let sql = format!("{BREAKERS_WITH_HELD} WHERE state <> 'closed'");
            let raw: Vec<RawBreaker> =
                conn.prepare_cached(&sql)?.query_map([], raw_breaker)?.collect::<Result<_, _>>()?;
            for view in raw.into_iter().map(breaker_of) {
                let view = view?;
                if let Some(t) = breaker::next_work_ms(&view.row, view.held > 0, now_ms) {
                    next = Some(next.map_or(t, |n: i64| n.min(t)));
                }
            }
            Ok(next)
        })
    }
}
