//! The stores the store suite runs on: each test gets a fresh store, and may open
//! more handles on it as other processes would.

use jadpo_core::store::Store;
use jadpo_store_sqlite::SqliteStore;
use std::path::PathBuf;

/// A fresh store for one test.
pub trait Fixture: Send + Sync {
    /// A new handle on the test's store, as another process would open it.
    fn open(&self) -> Box<dyn Store>;
    /// Close a connection's breaker behind the store's back, as another process
    /// whose release ran before this one's holds were written.
    fn close_breaker_behind(&self, connection: &str);
    /// Write a handled record for a delivery behind the store's back (a call
    /// that succeeded, its delivery not yet final).
    fn add_handled_behind(&self, delivery: i64, at_ms: i64);
    /// Store an event as an application writing SQL does, with no deliveries and
    /// not yet expanded (`emit` of the schema on PostgreSQL; a plain row on
    /// SQLite), each in a transaction of its own. Returns their ids.
    fn emit_in_sql(&self, events: &[(&str, &str)]) -> Vec<i64>;
    /// Write a delivery's `attempts` behind the store's back (as a damaged or
    /// hand-edited store holds it).
    fn set_attempts_behind(&self, delivery: i64, attempts: i64);
    /// A delivery's state and `attempts` as stored, read behind the store's back.
    fn delivery_behind(&self, delivery: i64) -> (String, i64);
}

/// A SQLite store in a file of its own.
pub struct SqliteFile {
    _dir: tempfile::TempDir,
    /// The store's file.
    pub path: PathBuf,
}

impl Default for SqliteFile {
    fn default() -> SqliteFile {
        SqliteFile::new()
    }
}

impl SqliteFile {
    /// A new file in a temporary folder (created by the first open).
    pub fn new() -> SqliteFile {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("outbox.db");
        SqliteFile { _dir: dir, path }
    }

    /// The temporary folder, which removes itself when dropped.
    pub fn into_dir(self) -> tempfile::TempDir {
        self._dir
    }
}

impl Fixture for SqliteFile {
    fn open(&self) -> Box<dyn Store> {
        Box::new(SqliteStore::open(&self.path).expect("open the store"))
    }

    fn close_breaker_behind(&self, connection: &str) {
        let raw = rusqlite::Connection::open(&self.path).expect("open raw");
        raw.execute(
            "UPDATE jadpo_circuit_breakers SET state = 'closed', failures_in_a_row = 0 WHERE connection = ?1",
            [connection],
        )
        .expect("close");
    }

    fn add_handled_behind(&self, delivery: i64, at_ms: i64) {
        let raw = rusqlite::Connection::open(&self.path).expect("open raw");
        raw.execute("UPDATE jadpo_deliveries SET handled_at = ?2 WHERE id = ?1", [delivery, at_ms]).expect("handled");
    }

    fn emit_in_sql(&self, events: &[(&str, &str)]) -> Vec<i64> {
        let raw = rusqlite::Connection::open(&self.path).expect("open raw");
        raw.busy_timeout(std::time::Duration::from_secs(60)).expect("busy timeout");
        let mut ids = Vec::new();
        for (name, payload) in events {
            raw.execute(
                "INSERT INTO jadpo_events (name, payload, emitted_at, expanded) VALUES (?1, ?2, 0, 0)",
                [name, payload],
            )
            .expect("insert");
            ids.push(raw.last_insert_rowid());
        }
        ids
    }

    fn set_attempts_behind(&self, delivery: i64, attempts: i64) {
        let raw = rusqlite::Connection::open(&self.path).expect("open raw");
        raw.execute("UPDATE jadpo_deliveries SET attempts = ?2 WHERE id = ?1", [delivery, attempts]).expect("attempts");
    }

    fn delivery_behind(&self, delivery: i64) -> (String, i64) {
        let raw = rusqlite::Connection::open(&self.path).expect("open raw");
        raw.query_row("SELECT state, attempts FROM jadpo_deliveries WHERE id = ?1", [delivery], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .expect("the delivery")
    }
}

/// The SQLite fixture (always available).
pub fn sqlite() -> Option<Box<dyn Fixture>> {
    Some(Box::new(SqliteFile::new()))
}

/// A PostgreSQL store in a database of its own, dropped after the test.
pub use jadpo_test_support::PgDatabase;

impl Fixture for PgDatabase {
    fn open(&self) -> Box<dyn Store> {
        Box::new(
            jadpo_store_postgres::PgStore::open(&self.url, jadpo_core::store::OpenOptions::read_write())
                .expect("open the store"),
        )
    }

    fn close_breaker_behind(&self, connection: &str) {
        let mut c = postgres::Client::connect(&self.url, postgres::NoTls).expect("connect");
        c.execute(
            "UPDATE jadpo.circuit_breakers SET state = 'closed', failures_in_a_row = 0 WHERE connection = $1",
            &[&connection],
        )
        .expect("close");
    }

    fn add_handled_behind(&self, delivery: i64, at_ms: i64) {
        let mut c = postgres::Client::connect(&self.url, postgres::NoTls).expect("connect");
        c.execute("UPDATE jadpo.deliveries SET handled_at = $2 WHERE id = $1", &[&delivery, &at_ms]).expect("handled");
    }

    fn emit_in_sql(&self, events: &[(&str, &str)]) -> Vec<i64> {
        let mut c = postgres::Client::connect(&self.url, postgres::NoTls).expect("connect");
        events
            .iter()
            .map(|(name, payload)| {
                c.query_one("SELECT jadpo.emit($1, $2::text::jsonb)", &[name, payload]).expect("emit").get(0)
            })
            .collect()
    }

    fn set_attempts_behind(&self, delivery: i64, attempts: i64) {
        let mut c = postgres::Client::connect(&self.url, postgres::NoTls).expect("connect");
        c.execute("UPDATE jadpo.deliveries SET attempts = $2 WHERE id = $1", &[&delivery, &attempts])
            .expect("attempts");
    }

    fn delivery_behind(&self, delivery: i64) -> (String, i64) {
        let mut c = postgres::Client::connect(&self.url, postgres::NoTls).expect("connect");
        let row = c.query_one("SELECT state, attempts FROM jadpo.deliveries WHERE id = $1", &[&delivery]).expect("row");
        (row.get(0), row.get(1))
    }
}

/// A fresh database on the test server, or `None` when no server answers and
/// this is not CI (`CI=true`), where the suite must run and fails instead.
pub fn postgres() -> Option<Box<dyn Fixture>> {
    pg_database().map(|db| Box::new(db) as Box<dyn Fixture>)
}

/// As [`postgres()`], the database itself.
pub fn pg_database() -> Option<PgDatabase> {
    PgDatabase::new("jadpo_t")
}
