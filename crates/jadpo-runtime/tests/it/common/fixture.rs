//! The stores the store suite runs on: each test gets a fresh store, and may open
//! more handles on it as other processes would.

use jadpo_runtime::store::{SqliteStore, Store};
use std::path::PathBuf;

/// A fresh store for one test.
pub trait Fixture: Send + Sync {
    /// A new handle on the test's store, as another process would open it.
    fn open(&self) -> Box<dyn Store>;
    /// Close a connection's breaker behind the store's back, as another process
    /// whose release ran before this one's holds were written.
    fn close_breaker_behind(&self, connection: &str);
}

/// A SQLite store in a file of its own.
pub struct SqliteFile {
    _dir: tempfile::TempDir,
    /// The store's file.
    pub path: PathBuf,
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
}

/// The SQLite fixture (always available).
pub fn sqlite() -> Option<Box<dyn Fixture>> {
    Some(Box::new(SqliteFile::new()))
}
