//! The PostgreSQL store's schema: versioned migrations in one schema (`jadpo` by
//! default), applied under an advisory lock so that many processes starting at
//! once apply each one once.

use super::pg_error;
use jadpo_core::store::StoreError;
use postgres::Client;

/// The migrations, in order; `{s}` stands for the quoted schema. Times are
/// milliseconds since the Unix epoch, as the runtime's rules count them.
///
/// Unlike the store's statements, which name its tables unqualified and reach
/// them by their connection's search path, the migrations name the schema in
/// every name they make or change, for two reasons. The functions and triggers
/// they make (`emit`, the events table's notification, the claims' turn) run
/// in whatever session calls them, an application's own among them, with that
/// session's search path: their bodies must reach the store's tables and
/// functions by schema-qualified names. And `jadpoc migrate --print` shows
/// these texts as a script for review, which must do the same thing run from
/// any session (`psql` with its default search path, say).
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE {s}.events (
    id bigserial PRIMARY KEY,
    name text NOT NULL,
    payload text NOT NULL,
    emitted_at bigint NOT NULL
);
CREATE TABLE {s}.deliveries (
    id bigserial PRIMARY KEY,
    event_id bigint NOT NULL REFERENCES {s}.events (id),
    subscriber text NOT NULL,
    connection text NOT NULL,
    state text NOT NULL,
    attempts bigint NOT NULL DEFAULT 0,
    -- When the row is next claimable: a pending delivery's due time, a running
    -- one's lease end; NULL otherwise.
    due_at bigint,
    lease_until bigint,
    claimed_at bigint,
    budget_start bigint NOT NULL,
    held_ms bigint NOT NULL DEFAULT 0,
    held_since bigint,
    held_connection text,
    last_code text,
    last_kind text,
    last_reason text,
    end_reason text,
    created_at bigint NOT NULL
);
-- A claim walks these in due order under its LIMIT, whatever the table's size.
CREATE INDEX deliveries_pending_due ON {s}.deliveries (due_at, id) WHERE state = 'pending';
CREATE INDEX deliveries_running_due ON {s}.deliveries (due_at, id) WHERE state = 'running';
CREATE INDEX deliveries_held ON {s}.deliveries (held_connection, held_since, id) WHERE state = 'held';
CREATE INDEX deliveries_subscriber ON {s}.deliveries (subscriber, state);
CREATE TABLE {s}.attempts (
    id bigserial PRIMARY KEY,
    delivery_id bigint NOT NULL,
    attempt bigint NOT NULL,
    started_at bigint NOT NULL,
    duration_ms bigint NOT NULL,
    outcome text NOT NULL,
    code text,
    kind text,
    http_status bigint,
    reason text
);
CREATE INDEX attempts_delivery ON {s}.attempts (delivery_id);
CREATE TABLE {s}.handled (
    delivery_id bigint PRIMARY KEY,
    handled_at bigint NOT NULL
);
CREATE TABLE {s}.schedules (
    name text PRIMARY KEY,
    every_ms bigint NOT NULL,
    first_seen bigint NOT NULL,
    due_at bigint NOT NULL,
    runs bigint NOT NULL DEFAULT 0,
    last_claimed_at bigint,
    last_ended_at bigint,
    last_code text,
    last_kind text
);
CREATE TABLE {s}.circuit_breakers (
    connection text PRIMARY KEY,
    state text NOT NULL DEFAULT 'closed',
    failures_in_a_row bigint NOT NULL DEFAULT 0,
    opened_at bigint,
    pause_ms bigint NOT NULL DEFAULT 0,
    alerts bigint NOT NULL DEFAULT 0,
    alerted_at bigint,
    probe_delivery bigint,
    probe_lease_until bigint,
    updated_at bigint
);
"#,
    // An operator's pause of a connection, on its breaker's row; every pause and
    // resume kept with who, when and why.
    r#"
ALTER TABLE {s}.circuit_breakers ADD COLUMN paused_at bigint;
ALTER TABLE {s}.circuit_breakers ADD COLUMN paused_until bigint;
ALTER TABLE {s}.circuit_breakers ADD COLUMN paused_by text;
ALTER TABLE {s}.circuit_breakers ADD COLUMN pause_reason text;
CREATE TABLE {s}.breaker_actions (
    id bigserial PRIMARY KEY,
    connection text NOT NULL,
    action text NOT NULL,
    at bigint NOT NULL,
    by text NOT NULL,
    reason text,
    until bigint
);
-- Retention deletes an event once no delivery of it is left.
CREATE INDEX deliveries_event ON {s}.deliveries (event_id);
"#,
    // Events written by SQL in the application's own transaction (`emit` below)
    // wait, not expanded, for a running process to make their deliveries; every
    // other event is expanded as it is stored (the column's default). One whose
    // payload does not match the program is kept, invalid; a replay is an event
    // of its own naming the event it replays.
    r#"
ALTER TABLE {s}.events ADD COLUMN expanded boolean NOT NULL DEFAULT true;
ALTER TABLE {s}.events ADD COLUMN invalid_code text;
ALTER TABLE {s}.events ADD COLUMN invalid_reason text;
ALTER TABLE {s}.events ADD COLUMN replay_of bigint;
CREATE INDEX events_unexpanded ON {s}.events (id) WHERE NOT expanded;
CREATE INDEX events_invalid ON {s}.events (id) WHERE invalid_code IS NOT NULL;
CREATE INDEX events_name ON {s}.events (name, id);
CREATE FUNCTION {s}.emit(name text, payload jsonb) RETURNS bigint
LANGUAGE sql VOLATILE AS $emit$
    INSERT INTO {s}.events (name, payload, emitted_at, expanded)
    VALUES ($1, $2::text, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint, false)
    RETURNING id
$emit$;
"#,
    r#"
-- Any insert into the events table (jadpoc's, or the application's own in SQL)
-- wakes the running processes listening on the channel `SCHEMA.events`; a
-- notification is sent when its transaction commits, and never if it rolls back.
CREATE FUNCTION {s}.notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_TABLE_SCHEMA || '.events', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER events_notify AFTER INSERT ON {s}.events
    FOR EACH STATEMENT EXECUTE FUNCTION {s}.notify_events();
"#,
    r#"
-- A delivery's state changes twice in its life at least (claimed, then ended),
-- and each change writes an entry into every index of the table: the index by
-- subscriber and state cost every delivery two entries for what only listings
-- read (`deliveries --subscriber`, `status`), which scan the table instead.
DROP INDEX {s}.deliveries_subscriber;
"#,
    r#"
-- Fewer writes per delivery. Its handled record is a column of its row, written
-- by the outcome's guarded update that ends it (the only writer of the record
-- here), not a row of its own with a key of its own. Attempts are keyed by their
-- delivery, the one way they are read, not by an id of their own besides. An
-- event names its deliveries (their ids, written with it or with its
-- expansion), so that listing them, and retention finding an event left with
-- none, reach them by their key: the index by event (and the foreign key it
-- served) took an entry at every change of every delivery for what only those
-- read.
ALTER TABLE {s}.deliveries ADD COLUMN handled_at bigint;
UPDATE {s}.deliveries d SET handled_at = h.handled_at FROM {s}.handled h WHERE h.delivery_id = d.id;
DROP TABLE {s}.handled;
ALTER TABLE {s}.attempts DROP CONSTRAINT attempts_pkey;
DROP INDEX {s}.attempts_delivery;
ALTER TABLE {s}.attempts ADD PRIMARY KEY (delivery_id, id);
ALTER TABLE {s}.events ADD COLUMN delivery_ids bigint[] NOT NULL DEFAULT '{}';
UPDATE {s}.events e SET delivery_ids = d.ids
    FROM (SELECT event_id, array_agg(id ORDER BY id) AS ids FROM {s}.deliveries GROUP BY event_id) d
    WHERE d.event_id = e.id;
ALTER TABLE {s}.deliveries DROP CONSTRAINT deliveries_event_id_fkey;
DROP INDEX {s}.deliveries_event;
"#,
    r#"
-- Ordering by key: a delivery's `order_by:` value, and the index a claim looks up
-- its key's earlier deliveries by (only ordered deliveries are in it). A
-- connection's rate: the theoretical arrival time of its next call (GCRA), in
-- microseconds, on its breaker's row.
ALTER TABLE {s}.deliveries ADD COLUMN order_key text;
CREATE INDEX deliveries_key ON {s}.deliveries (subscriber, order_key, event_id) WHERE order_key IS NOT NULL;
ALTER TABLE {s}.circuit_breakers ADD COLUMN rate_tat_us bigint;
"#,
    r#"
-- The console's reads. A page of failed or parked deliveries (the states an
-- operator acts on) reads a partial index of that state, whose entries are
-- written once, when a delivery ends so. The attempts of the last hour,
-- counted per minute, read a block range index on their start: attempts are
-- written in about the order they start, so it stays small and costs an
-- insert next to nothing.
CREATE INDEX deliveries_failed ON {s}.deliveries (id) WHERE state = 'failed';
CREATE INDEX deliveries_parked ON {s}.deliveries (id) WHERE state = 'parked';
CREATE INDEX attempts_started ON {s}.attempts USING brin (started_at);
"#,
    r#"
-- The processes' claims of due deliveries take turns to read, each reading on
-- after the rows the one before it locked rather than stepping over them. A turn
-- is a session advisory lock held only while a claim reads, tried for at most
-- `wait_ms` (then the claim reads without it) and given back once the claim
-- has decided its rows; where the last full read that left no row waiting
-- stopped, its (due time, id), is kept in two sequences, which change at once
-- rather than at commit, so the next turn reads on from there while those rows
-- are still being claimed. The cursor only moves forward. The lock is tried
-- rather than waited for under a `lock_timeout`: a wait that times out as the
-- lock is let go can be granted it all the same, leaving it held.
CREATE SEQUENCE {s}.claim_cursor_due MINVALUE -9223372036854775808 START WITH -9223372036854775808;
CREATE SEQUENCE {s}.claim_cursor_id MINVALUE -9223372036854775808 START WITH -9223372036854775808;
CREATE FUNCTION {s}.claim_turn_key() RETURNS bigint LANGUAGE sql IMMUTABLE
    AS $$ SELECT hashtextextended('jadpo.claim_turn.{s}', 0) $$;
CREATE FUNCTION {s}.claim_turn(wait_ms bigint, OUT turn boolean, OUT due bigint, OUT id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    until timestamptz := clock_timestamp() + wait_ms * interval '1 millisecond';
BEGIN
    LOOP
        turn := pg_try_advisory_lock({s}.claim_turn_key());
        EXIT WHEN turn OR clock_timestamp() >= until;
        PERFORM pg_sleep(0.001);
    END LOOP;
    SELECT last_value INTO due FROM {s}.claim_cursor_due;
    SELECT last_value INTO id FROM {s}.claim_cursor_id;
END
$$;
CREATE FUNCTION {s}.end_claim_turn(due bigint, id bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF due IS NOT NULL AND (due, id) > ((SELECT last_value FROM {s}.claim_cursor_due),
                                        (SELECT last_value FROM {s}.claim_cursor_id)) THEN
        PERFORM setval('{s}.claim_cursor_due', due);
        PERFORM setval('{s}.claim_cursor_id', id);
    END IF;
    PERFORM pg_advisory_unlock({s}.claim_turn_key());
END
$$;
"#,
    r#"
-- Program versions: each checked program that wrote to the store, kept once
-- with its files and subscribers; the processes running one, seen at their
-- heartbeats; the version beside each event (its deliveries are of it). A
-- delivery whose subscriber no running process's program has is `orphaned`,
-- found by its subscriber when a process that has it starts.
CREATE TABLE {s}.versions (
    id bigserial PRIMARY KEY,
    hash text NOT NULL UNIQUE,
    sources text NOT NULL,
    subscribers text NOT NULL,
    accepted text NOT NULL DEFAULT '[]',
    created_at bigint NOT NULL,
    -- When a run last started with it (none: only emitted with).
    started_at bigint
);
CREATE TABLE {s}.processes (
    id text PRIMARY KEY,
    host text NOT NULL,
    pid bigint NOT NULL,
    version text NOT NULL,
    started_at bigint NOT NULL,
    seen_at bigint NOT NULL
);
ALTER TABLE {s}.events ADD COLUMN version bigint;
CREATE INDEX deliveries_orphaned ON {s}.deliveries (subscriber, id) WHERE state = 'orphaned';
"#,
];

/// The first schema version that keeps program versions and processes; a handle
/// that only reads an older one reads none.
pub const VERSION_WITH_VERSIONS: i64 = 10;

/// The oldest schema version a handle that only reads knows every column of:
/// version 7 gave deliveries their ordering key, which the listings read.
pub const READS_NEED: i64 = 7;

/// The newest schema version this build knows.
pub const VERSION: i64 = MIGRATIONS.len() as i64;

/// The table that counts the migrations applied.
const LEDGER: &str = "CREATE TABLE IF NOT EXISTS {s}.schema_migrations (\n    \
     version bigint PRIMARY KEY,\n    applied_at timestamptz NOT NULL DEFAULT now()\n);";

/// `name` quoted as an identifier (it is checked to be letters, digits and `_`).
pub fn quoted(schema: &str) -> String {
    format!("\"{schema}\"")
}

/// Every migration's SQL for `schema`, in order, as `jadpoc migrate --print`
/// shows it (what a review of the database's changes reads).
pub fn sql(schema: &str) -> String {
    let s = quoted(schema);
    let mut out = format!("CREATE SCHEMA IF NOT EXISTS {s};\n{}\n", LEDGER.replace("{s}", &s));
    for (i, m) in MIGRATIONS.iter().enumerate() {
        out.push_str(&format!("\n-- version {}\n{}", i + 1, m.trim_start().replace("{s}", &s)));
        out.push_str(&format!("INSERT INTO {s}.schema_migrations (version) VALUES ({});\n", i + 1));
    }
    out
}

/// Apply the migrations the schema lacks, in one transaction holding an advisory
/// lock named after the schema: a process that comes second waits, then finds
/// them applied. Returns the version now in place.
pub fn migrate(client: &mut Client, schema: &str, shown: &str) -> Result<i64, StoreError> {
    migrate_to(client, schema, shown, VERSION)
}

/// Apply the migrations the schema lacks up to version `target` (a test brings a
/// schema to an older version to fill it as that version had it).
pub(super) fn migrate_to(client: &mut Client, schema: &str, shown: &str, target: i64) -> Result<i64, StoreError> {
    let s = quoted(schema);
    let mut tx = client.transaction().map_err(pg_error)?;
    tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&format!("jadpo.migrate.{schema}")])
        .map_err(pg_error)?;
    tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {s};\n{}", LEDGER.replace("{s}", &s))).map_err(pg_error)?;
    let version = applied(&mut tx, &s)?;
    if version > VERSION {
        return Err(StoreError::TooNew { path: shown.to_string(), found: version, known: VERSION });
    }
    let target = usize::try_from(target).unwrap_or(0);
    for (i, m) in MIGRATIONS.iter().enumerate().take(target).skip(usize::try_from(version).unwrap_or(0)) {
        tx.batch_execute(&m.replace("{s}", &s)).map_err(pg_error)?;
        tx.execute(&format!("INSERT INTO {s}.schema_migrations (version) VALUES ($1)"), &[&((i + 1) as i64)])
            .map_err(pg_error)?;
    }
    tx.commit().map_err(pg_error)?;
    Ok(version.max(target as i64))
}

fn applied(tx: &mut postgres::Transaction<'_>, s: &str) -> Result<i64, StoreError> {
    let row = tx
        .query_one(&format!("SELECT COALESCE(max(version), 0) AS v FROM {s}.schema_migrations"), &[])
        .map_err(pg_error)?;
    row.try_get("v").map_err(pg_error)
}

/// The version in place, for a handle that only reads: nothing is created; a
/// missing schema is a missing store, a newer one refused, and one older than
/// [`READS_NEED`] refused with what brings it up to date.
pub fn check(client: &mut Client, schema: &str, shown: &str) -> Result<i64, StoreError> {
    let s = quoted(schema);
    let row = client
        .query_one("SELECT to_regclass($1) IS NOT NULL AS present", &[&format!("{s}.schema_migrations")])
        .map_err(pg_error)?;
    let present: bool = row.try_get("present").map_err(pg_error)?;
    if !present {
        return Err(StoreError::Missing { path: format!("{shown} (schema `{schema}`)") });
    }
    let mut tx = client.transaction().map_err(pg_error)?;
    let version = applied(&mut tx, &s)?;
    tx.commit().map_err(pg_error)?;
    if version > VERSION {
        return Err(StoreError::TooNew { path: shown.to_string(), found: version, known: VERSION });
    }
    if version < READS_NEED {
        return Err(StoreError::TooOld { path: shown.to_string(), found: version, needs: READS_NEED, known: VERSION });
    }
    Ok(version)
}
