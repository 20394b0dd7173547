//! One clock and wake-ups: what a SQLite store's processes share is one host, so
//! they read its clock, and find each other's events by polling.

use jadpo_core::store::{StoreError, Waker};

/// A SQLite store has no clock of its own: its processes run on one host and
/// read that host's clock.
pub(super) fn db_now_ms() -> Result<Option<i64>, StoreError> {
    Ok(None)
}

/// A SQLite store cannot tell other processes of an event: they poll.
pub(super) fn listen(_wake: Waker) -> Result<bool, StoreError> {
    Ok(false)
}
