//! `jadpoc test`'s runs: the core's virtual-time driver
//! ([`jadpo_core::scenario`]) on the SQLite store in memory, a fresh one for each
//! test.

use jadpo_check::program::{Program, Test};
use jadpo_core::scenario::{self, TestFailure};
use jadpo_core::store::Store;
use jadpo_store_sqlite::SqliteStore;
use std::sync::Arc;

/// Run `test` against `program` on a new in-memory store, the random source
/// seeded by `seed`.
pub fn run_test(program: &Arc<Program>, test: &Test, seed: u64) -> Result<(), TestFailure> {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open_in_memory().map_err(TestFailure::at_start)?);
    scenario::run_test(program, test, seed, store)
}
