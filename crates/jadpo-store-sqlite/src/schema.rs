//! The store's schema and its migrations, and the check that a file is ours before
//! anything is written to it.
//!
//! Creating a store is safe when many processes do it at once: whether the file is
//! ours is read in one statement (one snapshot), and the migrations run in one
//! `BEGIN IMMEDIATE` transaction that looks again before it writes, so a store
//! another process is creating is waited on, never taken for a foreign file.

use super::Error;
use jadpo_core::store::StoreError;
use rusqlite::{Connection, ErrorCode, TransactionBehavior};

/// `PRAGMA application_id` of a jadpo store: "JADP" in ASCII.
pub const APPLICATION_ID: i64 = 0x4A41_4450;

/// The migrations, in order; `PRAGMA user_version` counts those applied.
pub(super) const MIGRATIONS: &[&str] = &[
    r#"
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
"#,
    // Why a delivery ended, and each failure's short human reason.
    r#"
ALTER TABLE jadpo_deliveries ADD COLUMN end_reason TEXT;
ALTER TABLE jadpo_deliveries ADD COLUMN last_reason TEXT;
ALTER TABLE jadpo_attempts ADD COLUMN reason TEXT;
"#,
    // An operator's pause of a connection, on its breaker's row; every pause and
    // resume kept with who, when and why.
    r#"
ALTER TABLE jadpo_circuit_breakers ADD COLUMN paused_at INTEGER;
ALTER TABLE jadpo_circuit_breakers ADD COLUMN paused_until INTEGER;
ALTER TABLE jadpo_circuit_breakers ADD COLUMN paused_by TEXT;
ALTER TABLE jadpo_circuit_breakers ADD COLUMN pause_reason TEXT;
CREATE TABLE jadpo_breaker_actions (
    id INTEGER PRIMARY KEY,
    connection TEXT NOT NULL,
    action TEXT NOT NULL,
    at INTEGER NOT NULL,
    by TEXT NOT NULL,
    reason TEXT,
    until INTEGER
);
-- Retention deletes an event once no delivery of it is left.
CREATE INDEX jadpo_deliveries_event ON jadpo_deliveries (event_id);
"#,
    // Events written by SQL wait to be expanded by a running process (every event
    // stored before, and every one `emit` stores, is expanded at once: the
    // default); one whose payload does not match the program is kept, invalid;
    // a replay is an event of its own naming the event it replays.
    r#"
ALTER TABLE jadpo_events ADD COLUMN expanded INTEGER NOT NULL DEFAULT 1;
ALTER TABLE jadpo_events ADD COLUMN invalid_code TEXT;
ALTER TABLE jadpo_events ADD COLUMN invalid_reason TEXT;
ALTER TABLE jadpo_events ADD COLUMN replay_of INTEGER;
CREATE INDEX jadpo_events_unexpanded ON jadpo_events (id) WHERE expanded = 0;
CREATE INDEX jadpo_events_invalid ON jadpo_events (id) WHERE invalid_code IS NOT NULL;
CREATE INDEX jadpo_events_name ON jadpo_events (name, id);
"#,
    // Ordering by key: a delivery's `order_by:` value, and the index a claim looks
    // up its key's earlier deliveries by. A connection's rate: the theoretical
    // arrival time of its next call (GCRA), in microseconds, on its breaker's row.
    r#"
ALTER TABLE jadpo_deliveries ADD COLUMN order_key TEXT;
CREATE INDEX jadpo_deliveries_key ON jadpo_deliveries (subscriber, order_key, event_id) WHERE order_key IS NOT NULL;
ALTER TABLE jadpo_circuit_breakers ADD COLUMN rate_tat_us INTEGER;
"#,
    // The console's reads: a page of failed or parked deliveries (the states an
    // operator acts on; few, and final, so their entries are written once, when
    // a delivery ends so) and the attempts of the last hour counted per minute.
    r#"
-- The state leads each, so that the planner, reading an equality on it, takes
-- the index that gives the page's order over the claims' (state, due_at) and a sort.
CREATE INDEX jadpo_deliveries_failed ON jadpo_deliveries (state, id) WHERE state = 'failed';
CREATE INDEX jadpo_deliveries_parked ON jadpo_deliveries (state, id) WHERE state = 'parked';
CREATE INDEX jadpo_attempts_started ON jadpo_attempts (started_at);
"#,
    // A delivery's handled record is a column of its row, as on PostgreSQL: the
    // outcome's own statement writes it and a claim reads it from the row, instead
    // of a table of its own with an insert per outcome and a lookup per claimed
    // row. Every record is kept (one of a delivery pruned since has none to go to).
    r#"
ALTER TABLE jadpo_deliveries ADD COLUMN handled_at INTEGER;
UPDATE jadpo_deliveries SET handled_at = (SELECT h.handled_at FROM jadpo_handled h WHERE h.delivery_id = jadpo_deliveries.id)
    WHERE id IN (SELECT delivery_id FROM jadpo_handled);
DROP TABLE jadpo_handled;
"#,
    // The claims' index holds only the deliveries a claim may take, those with a
    // due time (pending, or running under a lease): a delivery that ends leaves
    // it instead of moving to an entry of its final state, so that an outcome
    // changes one entry fewer and the index stays as small as the work left.
    // Held deliveries, which it held under `held`, have an index of their own
    // for the sweep's and the breakers' reads.
    r#"
DROP INDEX jadpo_deliveries_due;
CREATE INDEX jadpo_deliveries_due ON jadpo_deliveries (state, due_at) WHERE due_at IS NOT NULL;
CREATE INDEX jadpo_deliveries_held ON jadpo_deliveries (held_connection, held_since, id) WHERE state = 'held';
"#,
    // Program versions: each checked program that wrote to the store, kept once
    // with its files and subscribers; the processes running one, seen at their
    // heartbeats; the version beside each event (its deliveries are of it). A
    // delivery whose subscriber no running process's program has is
    // `orphaned`, found by its subscriber when a process that has it starts.
    r#"
CREATE TABLE jadpo_versions (
    id INTEGER PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    sources TEXT NOT NULL,
    subscribers TEXT NOT NULL,
    accepted TEXT NOT NULL DEFAULT '[]',
    created_at INTEGER NOT NULL,
    -- When a run last started with it (none: only emitted with).
    started_at INTEGER
);
CREATE TABLE jadpo_processes (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    version TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    seen_at INTEGER NOT NULL
);
ALTER TABLE jadpo_events ADD COLUMN version INTEGER;
CREATE INDEX jadpo_deliveries_orphaned ON jadpo_deliveries (subscriber, id) WHERE state = 'orphaned';
"#,
];

/// The newest schema version this build knows.
pub(super) const VERSION: i64 = MIGRATIONS.len() as i64;

/// The first version with `end_reason` and the failures' reasons; a read-only
/// handle on an older store reads them as missing.
pub(super) const VERSION_WITH_REASONS: i64 = 2;

/// The first version with operators' pauses; a read-only handle on an older
/// store reads every connection as not paused.
pub(super) const VERSION_WITH_PAUSES: i64 = 3;

/// The first version whose events know whether they are expanded, invalid or a
/// replay; a read-only handle on an older store reads every event as expanded
/// and valid.
pub(super) const VERSION_WITH_EVENT_STATES: i64 = 4;

/// The first version with ordering keys and rates; a read-only handle on an
/// older store reads every delivery as unordered.
pub(super) const VERSION_WITH_KEYS: i64 = 5;

/// The first version whose deliveries hold their handled record
/// (`handled_at`); a read-only handle on an older store reads the table it had.
pub(super) const VERSION_WITH_HANDLED_AT: i64 = 7;

/// The first version that keeps program versions and processes; a read-only
/// handle on an older store reads none.
pub(super) const VERSION_WITH_VERSIONS: i64 = 9;

/// What a file holds, read in one statement so that the three values are of one
/// moment (another process may be creating the store meanwhile).
struct Found {
    application_id: i64,
    objects: i64,
    version: i64,
}

fn is_not_a_database(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::NotADatabase)
}

fn look(conn: &Connection, path: &str) -> Result<Found, Error> {
    let found = conn.query_row(
        "SELECT (SELECT application_id FROM pragma_application_id()), \
         (SELECT count(*) FROM sqlite_master), (SELECT user_version FROM pragma_user_version())",
        [],
        |r| Ok(Found { application_id: r.get(0)?, objects: r.get(1)?, version: r.get(2)? }),
    );
    match found {
        Ok(found) => Ok(found),
        Err(e) if is_not_a_database(&e) => Err(StoreError::Foreign { path: path.to_string() }.into()),
        Err(e) => Err(e.into()),
    }
}

/// Whether the file is a jadpo store (`Some(version)`), empty (`Some(0)`), or
/// foreign (an error); a store newer than this build is refused.
pub(super) fn check(conn: &Connection, path: &str) -> Result<i64, Error> {
    let found = look(conn, path)?;
    let empty = found.application_id == 0 && found.objects == 0;
    if found.application_id != APPLICATION_ID && !empty {
        return Err(StoreError::Foreign { path: path.to_string() }.into());
    }
    if found.version > VERSION {
        return Err(StoreError::TooNew { path: path.to_string(), found: found.version, known: VERSION }.into());
    }
    Ok(if empty { 0 } else { found.version })
}

/// Apply the migrations this file lacks, in one write transaction that checks the
/// file again first: whatever another process did before it took the lock is seen.
pub(super) fn migrate(conn: &mut Connection, path: &str) -> Result<(), Error> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version = check(&tx, path)?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(usize::try_from(version).unwrap_or(0)) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
    }
    if version < VERSION {
        tx.pragma_update(None, "application_id", APPLICATION_ID)?;
    }
    tx.commit()?;
    Ok(())
}
