//! The stores the console's tests run on: a SQLite file in a folder of its own,
//! and a PostgreSQL database of its own (skipped outside CI when no server
//! answers).

use jadpo_core::store::{OpenOptions, Store};
use jadpo_store_postgres::PgStore;
use jadpo_store_sqlite::SqliteStore;
use jadpo_test_support::PgDatabase;
use std::sync::Arc;

/// A store and what keeps it alive.
pub struct Fixture {
    pub store: Arc<dyn Store>,
    _dir: Option<tempfile::TempDir>,
    _db: Option<PgDatabase>,
}

pub fn sqlite() -> Option<Box<Fixture>> {
    let dir = tempfile::tempdir().expect("a folder");
    let store = SqliteStore::open(&dir.path().join("outbox.db")).expect("a SQLite store");
    Some(Box::new(Fixture { store: Arc::new(store), _dir: Some(dir), _db: None }))
}

pub fn postgres() -> Option<Box<Fixture>> {
    let db = PgDatabase::new("jadpo_console")?;
    let store = PgStore::open(&db.url, OpenOptions::read_write()).expect("a PostgreSQL store");
    Some(Box::new(Fixture { store: Arc::new(store), _dir: None, _db: Some(db) }))
}
