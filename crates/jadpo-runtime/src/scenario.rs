//! `jadpoc test`'s runs: the core's virtual-time driver
//! ([`jadpo_core::scenario`]) on the SQLite store in memory, an empty one for each
//! test.
//!
//! Each thread keeps one in-memory store and empties it before each test
//! ([`SqliteStore::clear_in_memory`]): a test starts on a store with no row and
//! ids from 1, as on a new one, without migrating a new one each time (which
//! was about half of a short test's cost) and with its statements still
//! prepared.

use jadpo_check::program::{Program, Test};
use jadpo_core::scenario::{self, TestFailure};
use jadpo_core::store::{Store, StoreError};
use jadpo_store_sqlite::SqliteStore;
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    /// This thread's store, between two tests.
    static STORE: RefCell<Option<Arc<SqliteStore>>> = const { RefCell::new(None) };
}

/// An empty in-memory store: this thread's, emptied, or a new one.
fn empty_store() -> Result<Arc<SqliteStore>, StoreError> {
    if let Some(store) = STORE.with(|s| s.borrow_mut().take())
        && store.clear_in_memory().is_ok()
    {
        return Ok(store);
    }
    Ok(Arc::new(SqliteStore::open_in_memory()?))
}

/// Run `test` against `program` on an empty in-memory store, the random source
/// seeded by `seed`.
pub fn run_test(program: &Arc<Program>, test: &Test, seed: u64) -> Result<(), TestFailure> {
    let store = empty_store().map_err(TestFailure::at_start)?;
    let shared: Arc<dyn Store> = store.clone();
    let result = scenario::run_test(program, test, seed, shared);
    STORE.with(|s| *s.borrow_mut() = Some(store));
    result
}
