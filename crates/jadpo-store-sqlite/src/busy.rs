//! Waiting on a locked database, and SQLite's failures told apart for people: a
//! lock that outlasts the wait, a full disk, a read-only file.

use super::Error;
use jadpo_core::store::StoreError;
use rusqlite::{Connection, ErrorCode};
use std::time::Duration;
// std's `Instant` panics on wasm32-unknown-unknown; web-time's is the browser's clock.
#[cfg(not(all(target_family = "wasm", target_os = "unknown")))]
use std::time::Instant;
#[cfg(all(target_family = "wasm", target_os = "unknown"))]
use web_time::Instant;

/// The longest SQLite's own busy handler waits inside one statement; past it the
/// whole transaction is run again, until the store's lock wait is spent.
const BUSY_HANDLER_MAX: Duration = Duration::from_secs(5);

/// The busy handler's first pause; each next one is twice as long, up to
/// [`BUSY_PAUSE_MAX`].
const BUSY_PAUSE_MIN: Duration = Duration::from_micros(50);

/// The busy handler's longest pause. A write transaction holds the lock for a
/// few milliseconds; SQLite's own handler (`busy_timeout`) sleeps 1, 2, 5, 10,
/// then up to 100 ms between looks, so that with several processes on one
/// file the lock stood free while they all slept. Looks too close together
/// cost the other way: a run's claims follow each other a tenth of a
/// millisecond apart, and a process that looks often takes the lock in such a
/// gap, between two claims of another. Each hand-over costs the process that
/// takes the lock its cache of the file's pages (another process wrote) and
/// the one that lost it a wait. Four processes on one file handed the lock
/// over 41 to 74 times in a run of 100,000 with looks at most 4 ms apart and
/// 14 to 37 times with looks 16 ms apart (median rates of eight runs of each,
/// before the store checkpointed its own log: 109,250 and 122,023
/// deliveries/s); with 32 ms, 115,350, the lock standing free while a process
/// that had work slept.
const BUSY_PAUSE_MAX: Duration = Duration::from_millis(16);

/// The busy handler's wait for a store whose lock wait is `lock_wait`.
fn busy_timeout(lock_wait: Duration) -> Duration {
    lock_wait.min(BUSY_HANDLER_MAX)
}

/// The busy handler's pause before its look number `attempt` + 2.
fn busy_pause(attempt: i32) -> Duration {
    let doublings = u32::try_from(attempt).unwrap_or(0).min(16);
    BUSY_PAUSE_MIN.saturating_mul(1 << doublings).min(BUSY_PAUSE_MAX)
}

/// Make `conn` wait on a lock another connection holds: it looks again after
/// a short pause, growing to [`BUSY_PAUSE_MAX`], for up to
/// [`busy_timeout`]`(lock_wait)` in one statement (then [`with_retry`] runs
/// the whole transaction again).
pub(super) fn wait_on_locks(conn: &mut Connection, lock_wait: Duration) -> Result<(), Error> {
    wait_for(conn, busy_timeout(lock_wait))
}

/// How long a checkpoint that truncates an overgrown write-ahead log waits for
/// the transactions of other connections to end: they take milliseconds, and
/// a reader that keeps one open longer (a shell, a backup) must not hold up
/// every commit after it for the whole lock wait.
pub(super) const CHECKPOINT_WAIT: Duration = Duration::from_millis(25);

/// How long the checkpoint after a commit that filled the log to
/// [`CHECKPOINT_FRAMES`](super::CHECKPOINT_FRAMES) waits for the lock and for
/// readers: not at all. Another writer that holds the lock meanwhile
/// checkpoints after its own commit, and a reader of an older snapshot
/// (`jadpoc status` counting a large store) reads longer than a commit is
/// worth holding up: waiting a millisecond for such readers at each try made a
/// run with `status` asked ten times a second a tenth slower. The checkpoint
/// then copies what no reader needs and is tried again a little later (see
/// [`CHECKPOINT_RETRY_FRAMES`](super::CHECKPOINT_RETRY_FRAMES)).
pub(super) const RESTART_WAIT: Duration = Duration::ZERO;

/// Run `f` with `conn` waiting on locks for at most `wait`, then as for
/// `lock_wait` again.
pub(super) fn waiting_at_most<T>(
    conn: &mut Connection,
    wait: Duration,
    lock_wait: Duration,
    f: impl FnOnce(&Connection) -> T,
) -> Result<T, Error> {
    wait_for(conn, wait)?;
    let out = f(conn);
    wait_on_locks(conn, lock_wait)?;
    Ok(out)
}

/// Make `conn`'s busy handler wait up to `limit` in one wait.
fn wait_for(conn: &mut Connection, limit: Duration) -> Result<(), Error> {
    let mut since = Instant::now();
    conn.busy_handler(Some(move |attempt: i32| {
        // SQLite counts the looks of one wait from 0.
        if attempt == 0 {
            since = Instant::now();
        }
        if since.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(busy_pause(attempt));
        true
    }))?;
    Ok(())
}

fn sqlite_code(e: &Error) -> Option<ErrorCode> {
    match e {
        Error::Sqlite(rusqlite::Error::SqliteFailure(f, _)) => Some(f.code),
        _ => None,
    }
}

/// Whether the database was locked by another connection.
pub(super) fn is_busy(e: &Error) -> bool {
    matches!(sqlite_code(e), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

/// Whether the file could not be opened (as a read-only handle finds a store in a
/// folder it cannot write to, whose log index it cannot make).
pub(super) fn cannot_open(e: &Error) -> bool {
    matches!(sqlite_code(e), Some(ErrorCode::CannotOpen))
}

/// The error a person is shown for `e`: a full disk and a read-only store by
/// name, not as SQLite's "disk I/O error" or "attempt to write a readonly
/// database". `errno` is the operating system's error behind it, if any.
pub(super) fn explain(e: Error, path: &str, errno: i32) -> Error {
    // A full disk shows up as SQLITE_FULL, or as an I/O error whose cause is
    // ENOSPC (growing the write-ahead log or its index fails that way).
    const ENOSPC: i32 = 28;
    const EROFS: i32 = 30;
    match sqlite_code(&e) {
        Some(ErrorCode::DiskFull) => StoreError::Full { path: path.to_string() }.into(),
        Some(ErrorCode::SystemIoFailure) if errno == ENOSPC => StoreError::Full { path: path.to_string() }.into(),
        Some(ErrorCode::ReadOnly) => StoreError::ReadOnly { path: path.to_string() }.into(),
        Some(ErrorCode::SystemIoFailure | ErrorCode::CannotOpen) if errno == EROFS => {
            StoreError::ReadOnly { path: path.to_string() }.into()
        }
        _ => e,
    }
}

/// The operating system's error behind the connection's last failure.
pub(super) fn system_errno(conn: &Connection) -> i32 {
    // SAFETY: the handle is the live connection's own, used on this thread while
    // the caller holds it; `sqlite3_system_errno` only reads a field of it.
    unsafe { rusqlite::ffi::sqlite3_system_errno(conn.handle()) }
}

/// Run `f` until it is not refused by a lock: a busy or locked database is waited
/// on (SQLite's busy handler, then the whole transaction run again with a growing
/// pause) for up to `lock_wait`, after which the operation fails having changed
/// nothing. Other failures are explained (see [`explain`]).
pub(super) fn with_retry<T>(
    conn: &mut Connection,
    path: &str,
    lock_wait: Duration,
    mut f: impl FnMut(&mut Connection) -> Result<T, Error>,
) -> Result<T, Error> {
    let start = Instant::now();
    let mut pause = 2u64;
    loop {
        match f(conn) {
            Ok(v) => return Ok(v),
            Err(e) if is_busy(&e) => {
                let waited = start.elapsed();
                if waited >= lock_wait {
                    return Err(StoreError::Busy { waited_s: waited.as_secs_f64().round() as u64 }.into());
                }
                let left = lock_wait - waited;
                std::thread::sleep(Duration::from_millis(pause).min(left));
                pause = (pause * 2).min(100);
            }
            Err(e) => return Err(explain(e, path, system_errno(conn))),
        }
    }
}
