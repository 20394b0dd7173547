//! The SQLite store: WAL, versioned migrations, conditional claims, and waits and
//! retries on a busy database so that no write is lost.
//!
//! By job: `schema` (tables, migrations, the check that a file is ours),
//! `busy` (waiting on a lock; errors told apart), `claims`, `outcomes`
//! (emits, attempts' outcomes, operator retries), `breakers`, `reads` (what
//! the listing commands show), `schedules` and `events` (SQL-written events'
//! expansion, listings, replays).
//!
//! Every write runs in one `BEGIN IMMEDIATE` transaction, which SQLite serializes
//! with every other writer on the file; each change to a shared row is still one
//! statement conditional on the row being as it was read, so the same steps are
//! correct where nothing serializes them (see ARCHITECTURE.md).

mod breakers;
mod builtin;
mod busy;
mod claims;
mod console;
mod events;
mod outcomes;
mod pauses;
mod reads;
mod retention;
mod rows;
mod schedules;
mod schema;
mod sharing;
mod tx;
mod versions;

pub use schema::APPLICATION_ID;

use jadpo_core::rules::Failure;
use jadpo_core::store::columns::{Count, RowOf, count_of, failure_of, not_a_count, state_of};
use jadpo_core::store::{
    Access, AttemptRate, BreakerAction, BreakerView, ClaimAt, ClaimCandidate, ClaimReport, ClaimVerdict,
    ClaimedSchedule, DeliveryDetail, DeliveryFilter, DeliveryView, EventCounts, EventDetail, EventFilter, EventView,
    NewEvent, OpenOptions, PruneCounts, PrunePlan, Raise, Recorded, RecordedThenClaimed, ScheduleSpec, StatusView,
    Store, StoreError, Views,
};
use jadpo_core::version::{BacklogRow, OrphanRow, ProcessRow, ProgramVersion, VersionView};
use rusqlite::types::{ToSql, ValueRef};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tx::Tx;

/// Statements each connection keeps prepared. The store has about fifty
/// distinct ones (a claim alone is four); rusqlite's default of 16 evicted them
/// in turn, so that a run prepared again, parsing its SQL, most statements it ran.
const STATEMENT_CACHE: usize = 128;

/// The page size of a store in memory, in bytes (SQLite's smallest).
const IN_MEMORY_PAGE_SIZE: i64 = 512;

/// A store in one SQLite database file (or in memory).
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: String,
    lock_wait: Duration,
    /// The file's schema version: [`schema::VERSION`] once migrated; older only on
    /// a read-only handle, which reads what that version has.
    version: i64,
    /// The write-ahead log's size past which the next commit starts it over
    /// ([`WAL_LIMIT`], and twice the log's size after a checkpoint that could not).
    log_limit: AtomicU64,
    /// The write-ahead log's file (`PATH-wal`); none in memory, which has no log.
    log: Option<PathBuf>,
    /// What SQLite's WAL hook tells of this connection's commits (the hook
    /// stands in for SQLite's own checkpoint after a commit: see
    /// [`CHECKPOINT_FRAMES`]).
    commits: Arc<Commits>,
    /// The frames past which the next commit checkpoints ([`CHECKPOINT_FRAMES`],
    /// or [`CHECKPOINT_RETRY_FRAMES`] past the log's length after a checkpoint
    /// that could not finish).
    checkpoint_at: AtomicU32,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").field("path", &self.path).finish()
    }
}

/// A failure inside the store: SQLite's own, or one of the store's errors. Each
/// is a [`StoreError`] at the store's edge ([`busy::explain`] tells a lock, a full
/// disk and a read-only file apart), so no `rusqlite` type leaves this crate.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// SQLite's error.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// One of the store's own.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<Error> for StoreError {
    fn from(e: Error) -> StoreError {
        match e {
            Error::Store(e) => e,
            Error::Sqlite(rusqlite::Error::SqliteFailure(f, message))
                if f.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                StoreError::Constraint { message: message.unwrap_or_else(|| f.to_string()) }
            }
            Error::Sqlite(e) => StoreError::Database { message: e.to_string(), source: Some(Box::new(e)) },
        }
    }
}

fn open_error(path: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Open { path: path.to_string(), message: e.to_string() }
}

impl SqliteStore {
    /// Open the store at `path` read-write, creating it if the file is missing or
    /// empty and applying migrations. A file that is not a jadpo store is refused
    /// untouched.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, OpenOptions::read_write())
    }

    /// Open the store at `path` as `options` say. Read-only opens an existing
    /// store without writing to it (no migration, no journal change, no write
    /// lock), so it works on a read-only file and beside a writer.
    pub fn open_with(path: &Path, options: OpenOptions) -> Result<SqliteStore, StoreError> {
        let shown = path.display().to_string();
        if path.is_dir() {
            return Err(open_error(&shown, "it is a directory"));
        }
        let flags = match options.access {
            Access::ReadWrite => OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
            Access::ReadOnly => OpenFlags::SQLITE_OPEN_READ_ONLY,
        } | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| open_error(&shown, e))?;
        let mut store = SqliteStore {
            conn: Mutex::new(conn),
            path: shown,
            lock_wait: options.lock_wait,
            version: 0,
            log_limit: AtomicU64::new(WAL_LIMIT),
            log: Some({
                let mut log = path.as_os_str().to_owned();
                log.push("-wal");
                PathBuf::from(log)
            }),
            commits: Arc::default(),
            checkpoint_at: AtomicU32::new(CHECKPOINT_FRAMES),
        };
        match store.prepare(true, options.access) {
            Ok(version) => store.version = version,
            // SQLite reads a store in WAL mode through its log (`-wal`) and the
            // log's index (`-shm`), which it makes beside the file when they are
            // missing; in a folder this process cannot write to it cannot, and
            // refuses the store as read-only (or as a file it cannot open).
            Err(e)
                if options.access == Access::ReadOnly
                    && (busy::cannot_open(&e) || matches!(e, Error::Store(StoreError::ReadOnly { .. }))) =>
            {
                store.conn = Mutex::new(open_as_on_disk(path, flags, &store.path)?);
                store.version = store.prepare(true, options.access)?;
            }
            Err(e) if busy::cannot_open(&e) && read_only_place(path) => {
                return Err(StoreError::ReadOnly { path: store.path.clone() });
            }
            Err(e) => return Err(e.into()),
        }
        Ok(store)
    }

    /// Every migration's SQL, in order, as `jadpoc migrate --print` shows it.
    pub fn migrations_sql() -> String {
        let mut out = String::new();
        for (i, m) in schema::MIGRATIONS.iter().enumerate() {
            out.push_str(&format!("-- version {}\n{}PRAGMA user_version = {};\n", i + 1, m.trim_start(), i + 1));
        }
        out.push_str(&format!("PRAGMA application_id = {APPLICATION_ID};\n"));
        out
    }

    /// An in-memory store (for the virtual-time runner and tests).
    pub fn open_in_memory() -> Result<SqliteStore, StoreError> {
        let conn = Connection::open_in_memory().map_err(|e| open_error(":memory:", e))?;
        // Small pages: a test's tables hold a few rows, and each page a
        // transaction changes is first copied whole to the rollback journal,
        // which with SQLite's 4 KiB pages was a tenth of a test's instructions.
        conn.pragma_update(None, "page_size", IN_MEMORY_PAGE_SIZE).map_err(|e| open_error(":memory:", e))?;
        let mut store = SqliteStore {
            conn: Mutex::new(conn),
            path: ":memory:".into(),
            lock_wait: jadpo_core::store::DEFAULT_LOCK_WAIT,
            version: 0,
            log_limit: AtomicU64::new(WAL_LIMIT),
            log: None,
            commits: Arc::default(),
            checkpoint_at: AtomicU32::new(CHECKPOINT_FRAMES),
        };
        store.version = store.prepare(false, Access::ReadWrite)?;
        Ok(store)
    }

    /// Empty an in-memory store, so that it is again as [`open_in_memory`]
    /// made it: every table without a row, the ids counted from 1. A run of
    /// `jadpoc test` reuses one store this way from test to test instead of
    /// migrating a new one for each (most of a short test's cost), keeping
    /// its prepared statements. A store in a file is refused, untouched.
    ///
    /// [`open_in_memory`]: SqliteStore::open_in_memory
    pub fn clear_in_memory(&self) -> Result<(), StoreError> {
        if self.path != ":memory:" {
            return Err(open_error(&self.path, "only a store in memory can be cleared"));
        }
        self.with_retry(|conn| {
            let tx = Tx::deferred(conn)?;
            // Every table the migrations made (read from the schema, so that a
            // table added later is emptied too). No table counts its ids with
            // AUTOINCREMENT, so an emptied one numbers its rows from 1 again.
            let tables: Vec<String> = tx
                .prepare_cached(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'jadpo\\_%' ESCAPE '\\'",
                )?
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            for table in tables {
                tx.execute(&format!("DELETE FROM \"{table}\""), [])?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves no half-done transaction behind
        // (it rolls back on drop), so the connection is still usable.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Check the file is ours (or empty), then, read-write, set it up and migrate
    /// it. Returns the schema version it has now.
    fn prepare(&self, wal: bool, access: Access) -> Result<i64, Error> {
        let path = self.path.clone();
        let mut conn = self.lock();
        busy::wait_on_locks(&mut conn, self.lock_wait)?;
        // The commits' checkpoints are the store's own (see `keep_log_short`).
        let commits = self.commits.clone();
        conn.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, pages: std::ffi::c_int| {
            commits.frames.store(u32::try_from(pages).unwrap_or(0), Ordering::Relaxed);
            commits.new.store(true, Ordering::Relaxed);
            Ok(())
        }))?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        // A stable plan per statement: without it SQLite re-prepares a cached
        // statement whenever a bound value (`now`, a state) changes, which was most
        // of the cost of a claim.
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
        // Read before writing anything: a foreign file must stay as it was.
        let version = busy::with_retry(&mut conn, &path, self.lock_wait, |c| schema::check(c, &path))?;
        if access == Access::ReadOnly {
            return Ok(version);
        }
        // The version this connection stores its events with (none until
        // `record_version`): a table of its own, in the connection's temporary
        // database, which no write lock of the store's file guards.
        conn.execute_batch(versions::WRITER_TABLE)?;
        let journal: String = busy::with_retry(&mut conn, &path, self.lock_wait, |c| {
            Ok(c.pragma_query_value(None, "journal_mode", |r| r.get(0))?)
        })?;
        let wal_set = !wal || journal.eq_ignore_ascii_case("wal");
        if version == schema::VERSION && wal_set {
            // Nothing to change: no write lock is taken, so opening does not wait
            // on another process's write.
            conn.pragma_update(None, "synchronous", "FULL")?;
            return Ok(version);
        }
        busy::with_retry(&mut conn, &path, self.lock_wait, |c| {
            if wal {
                let mode: String = c.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
                if !mode.eq_ignore_ascii_case("wal") {
                    return Err(
                        open_error(&path, format!("cannot use write-ahead logging (journal mode `{mode}`)")).into()
                    );
                }
            }
            // Every commit reaches the disk before it returns: an emitted event is kept.
            c.pragma_update(None, "synchronous", "FULL")?;
            schema::migrate(c, &path)
        })?;
        Ok(schema::VERSION)
    }

    /// Run `f` on the connection, waiting on a locked database (see
    /// [`busy::with_retry`]); after a commit of `f`'s the write-ahead log is
    /// kept short (see [`keep_log_short`](Self::keep_log_short)).
    fn with_retry<T>(&self, f: impl FnMut(&mut Connection) -> Result<T, Error>) -> Result<T, StoreError> {
        let mut conn = self.lock();
        let out = busy::with_retry(&mut conn, &self.path, self.lock_wait, f);
        self.keep_log_short(&mut conn);
        Ok(out?)
    }

    /// After a commit, in place of SQLite's own checkpoint (which the WAL hook
    /// turns off): once the log holds [`CHECKPOINT_FRAMES`], fold it into the
    /// file holding the write lock, so that the next writer starts it over (not
    /// waiting for the lock or for readers: [`busy::RESTART_WAIT`]; one that
    /// cannot finish is tried again [`CHECKPOINT_RETRY_FRAMES`] later); and if
    /// the log's file has grown past its limit all the same (readers kept the
    /// log from starting over), truncate it, waiting at most
    /// [`busy::CHECKPOINT_WAIT`] and, if that cannot finish (a reader keeps an
    /// older snapshot open), trying again once the log is twice as long, so
    /// that such a reader costs the commits after it little: each try holds
    /// the write lock while it waits. After a read there is nothing to do. The
    /// commit before stands either way.
    fn keep_log_short(&self, conn: &mut Connection) {
        if !self.commits.new.swap(false, Ordering::Relaxed) {
            // No commit since the last look: the frames seen then may be
            // another process's checkpoint out of date.
            return;
        }
        let frames = self.commits.frames.load(Ordering::Relaxed);
        if frames < CHECKPOINT_FRAMES {
            // The log started over (after this connection's checkpoint or another's).
            self.checkpoint_at.store(CHECKPOINT_FRAMES, Ordering::Relaxed);
        } else if frames >= self.checkpoint_at.load(Ordering::Relaxed) {
            // The pragma's first column says whether it could not finish.
            let done = busy::waiting_at_most(conn, busy::RESTART_WAIT, self.lock_wait, |c| {
                c.query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get::<_, i64>(0))
            });
            let next = if matches!(done, Ok(Ok(0))) {
                CHECKPOINT_FRAMES
            } else {
                frames.saturating_add(CHECKPOINT_RETRY_FRAMES)
            };
            self.checkpoint_at.store(next, Ordering::Relaxed);
        }
        let Some(Ok(size)) = self.log.as_ref().map(|log| std::fs::metadata(log).map(|m| m.len())) else {
            return;
        };
        if size <= self.log_limit.load(Ordering::Relaxed) {
            return;
        }
        // The pragma's first column says whether it could not finish.
        let done = busy::waiting_at_most(conn, busy::CHECKPOINT_WAIT, self.lock_wait, |c| {
            c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0))
        });
        let next = if matches!(done, Ok(Ok(0))) { WAL_LIMIT } else { size.saturating_mul(2) };
        self.log_limit.store(next, Ordering::Relaxed);
    }

    /// Whether the file has the pauses' columns (a read-only handle on an older
    /// store reads every connection as unpaused).
    fn has_pauses(&self) -> bool {
        self.version >= schema::VERSION_WITH_PAUSES
    }

    /// Whether the file's events know whether they are expanded, invalid or a
    /// replay (a read-only handle on an older store reads them as expanded).
    fn has_event_states(&self) -> bool {
        self.version >= schema::VERSION_WITH_EVENT_STATES
    }
}

/// The size of the write-ahead log (`-wal`) past which a commit folds the log
/// into the file and starts it over (`wal_checkpoint(TRUNCATE)`, which waits
/// for the readers of older snapshots to end). SQLite's own checkpoint after a
/// commit (every 1,000 pages) copies what no reader still needs, but the log
/// starts over only at a moment no transaction reads it; with several
/// processes on one file (or `jadpoc status` asked while a run works) there
/// was seldom such a moment, and 300,000 deliveries by four processes grew the
/// log to 59 MiB (133 MiB with `status` asked ten times a second), beside a
/// 74 MiB store.
const WAL_LIMIT: u64 = 16 << 20;

/// What SQLite's WAL hook tells of a connection's commits.
#[derive(Default)]
struct Commits {
    /// The frames in the write-ahead log after the last commit.
    frames: AtomicU32,
    /// Whether a commit came since the store last looked.
    new: AtomicBool,
}

/// The frames (pages written) in the write-ahead log at which the commit that
/// wrote them folds the log into the file (SQLite's own default). SQLite's
/// checkpoint after a commit runs once the commit has let go of the write
/// lock: with several processes on one file, another wrote during it, so the
/// log could not start over, and every commit after it checkpointed again
/// (each syncing the file) until one ended with no other writing: four
/// processes spent 107 ms of a run of 100,000 in such commits, one 45 ms. The
/// store's checkpoint (`RESTART`) holds the write lock, and the next writer
/// starts the log over.
const CHECKPOINT_FRAMES: u32 = 1000;

/// The frames more after which a checkpoint that could not finish (a reader of
/// an older snapshot, or another writer, held it up) is tried again: a few
/// commits. Each try copies what no reader needs and syncs the file, as
/// SQLite's own checkpoint did at every commit then; trying again only once
/// the log had doubled let `jadpoc status`, asked ten times a second through a
/// run, grow the log to 32 MiB (12 MiB before the store's own checkpoint, 11
/// to 13 MiB with this).
const CHECKPOINT_RETRY_FRAMES: u32 = CHECKPOINT_FRAMES / 4;

/// A read-only connection to the store at `path` for a process that cannot make
/// the store's log or its index: the file read as it is on disk
/// (`immutable=1`), which is all of the store when no log is beside it. A
/// process with the store open keeps its log there (the last one to close folds
/// the log into the file and removes it), so with none there nothing is being
/// written. A log left beside the file (a copy taken while a process had the
/// store open) may hold commits the file lacks, and is refused, saying what
/// reads it: its index can only be made where the folder can be written to.
fn open_as_on_disk(path: &Path, flags: OpenFlags, shown: &str) -> Result<Connection, StoreError> {
    let mut log = path.as_os_str().to_owned();
    log.push("-wal");
    if std::fs::metadata(&log).is_ok_and(|m| m.len() > 0) {
        let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let file = path.file_name().unwrap_or_default().to_string_lossy();
        return Err(open_error(
            shown,
            format!(
                "its write-ahead log `{shown}-wal` may hold changes the file lacks, and it is read through an index \
                 (`{shown}-shm`) that cannot be made in the folder `{}`; read the store where its folder can be \
                 written to (copy `{file}` with `{file}-wal`), or as a user who may write to the folder",
                folder.display(),
            ),
        ));
    }
    let uri = format!("file:{}?immutable=1", uri_path(path));
    Connection::open_with_flags(&uri, flags | OpenFlags::SQLITE_OPEN_URI).map_err(|e| open_error(shown, e))
}

/// Whether the store's file or folder cannot be written to (opening a file for
/// writing changes nothing in it).
fn read_only_place(path: &Path) -> bool {
    let file = std::fs::OpenOptions::new().write(true).open(path);
    let folder_ro = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .and_then(|p| std::fs::metadata(p).ok())
        .is_some_and(|m| m.permissions().readonly());
    folder_ro
        || file.is_err_and(|e| {
            matches!(e.kind(), std::io::ErrorKind::ReadOnlyFilesystem | std::io::ErrorKind::PermissionDenied)
        })
}

/// Where each parameter of one call site's statement finds its value in the
/// list of named values the site binds, looked up by name the first time and
/// kept: rusqlite's binding by name looks each name up through a cache of C
/// strings, and a lookup of each name by SQLite's own list of names cost about
/// as much; either was half of the cost of writing a breaker's row (23
/// values). Each call site has its own ([`by_name!`]), binding one statement
/// with one list of names in one order.
pub(crate) struct ByName(std::sync::OnceLock<Vec<usize>>);

impl ByName {
    pub(crate) const fn new() -> ByName {
        ByName(std::sync::OnceLock::new())
    }

    /// Bind `values`, each a parameter's name with its value, to `stmt`: each
    /// of the statement's parameters takes the value of its name. A parameter
    /// with no value is an error, as it is for rusqlite.
    pub(crate) fn bind(
        &self,
        stmt: &mut rusqlite::CachedStatement<'_>,
        values: &[(&str, &dyn ToSql)],
    ) -> Result<(), Error> {
        let order = match self.0.get() {
            Some(order) => order,
            None => {
                let mut order = Vec::with_capacity(stmt.parameter_count());
                for i in 1..=stmt.parameter_count() {
                    let name = stmt.parameter_name(i).unwrap_or_default();
                    match values.iter().position(|(n, _)| *n == name) {
                        Some(k) => order.push(k),
                        None => return Err(rusqlite::Error::InvalidParameterName(name.to_string()).into()),
                    }
                }
                self.0.get_or_init(|| order)
            }
        };
        for (i, &k) in order.iter().enumerate() {
            let Some((_, value)) = values.get(k) else {
                return Err(rusqlite::Error::InvalidParameterCount(values.len(), order.len()).into());
            };
            stmt.raw_bind_parameter(i + 1, value)?;
        }
        Ok(())
    }

    /// Run `stmt` with `values` bound as [`ByName::bind`] binds them; returns
    /// the rows changed.
    pub(crate) fn execute(
        &self,
        stmt: &mut rusqlite::CachedStatement<'_>,
        values: &[(&str, &dyn ToSql)],
    ) -> Result<usize, Error> {
        self.bind(stmt, values)?;
        Ok(stmt.raw_execute()?)
    }
}

/// This call site's [`ByName`]: a site binds one statement's text with one list
/// of names in one order (a site choosing between two statements takes one
/// each).
macro_rules! by_name {
    () => {{
        static AT: $crate::ByName = $crate::ByName::new();
        &AT
    }};
}
pub(crate) use by_name;

/// The position of the column `name` in `list`, a statement's result columns as
/// its SQL lists them (`d.id, e.name AS event, ...`): each one's name is the
/// word after its last space or dot. Evaluated when compiled, so that a
/// statement's column list is the one place its positions are written, and a
/// name it lacks fails the build.
pub(crate) const fn column_at(list: &str, name: &str) -> usize {
    let (list, name) = (list.as_bytes(), name.as_bytes());
    let (mut at, mut start, mut i) = (0, 0, 0);
    while i <= list.len() {
        if i == list.len() || list[i] == b',' {
            // The item is list[start..i]; its name starts after its last space or dot.
            let mut end = i;
            while end > start && list[end - 1] == b' ' {
                end -= 1;
            }
            let mut word = end;
            while word > start && list[word - 1] != b' ' && list[word - 1] != b'.' {
                word -= 1;
            }
            if end - word == name.len() {
                let mut k = 0;
                while k < name.len() && list[word + k] == name[k] {
                    k += 1;
                }
                if k == name.len() {
                    return at;
                }
            }
            at += 1;
            start = i + 1;
        }
        i += 1;
    }
    panic!("no such column in the list")
}

/// The count in `column` of a row read from `row` (see [`count_of`]); SQLite
/// keeps a value of any type in any column, and one that is not an integer is
/// as corrupt as a negative count.
fn count_at<T: Count>(r: &rusqlite::Row<'_>, column: &str, row: RowOf<'_>) -> Result<T, Error> {
    count_in(r.get_ref(column)?, column, row)
}

/// The count `value`, read from `column` of `row` (see [`count_at`]).
fn count_in<T: Count>(value: ValueRef<'_>, column: &str, row: RowOf<'_>) -> Result<T, Error> {
    let found = match value {
        ValueRef::Integer(v) => return Ok(count_of(v, row, column)?),
        ValueRef::Null => "no value".to_string(),
        ValueRef::Real(v) => format!("`{v}`"),
        ValueRef::Text(t) => format!("the text `{}`", String::from_utf8_lossy(t)),
        ValueRef::Blob(b) => format!("a blob of {} bytes", b.len()),
    };
    Err(not_a_count(row, column, &found, T::MAX).into())
}

/// `path` for a `file:` URI: `%`, `?` and `#` escaped.
fn uri_path(path: &Path) -> String {
    let mut out = String::new();
    for ch in path.to_string_lossy().chars() {
        match ch {
            '%' => out.push_str("%25"),
            '?' => out.push_str("%3f"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    out
}

impl Views for SqliteStore {
    fn latest_version(&self) -> Result<Option<ProgramVersion>, StoreError> {
        if self.version < schema::VERSION_WITH_VERSIONS {
            return Ok(None);
        }
        self.with_retry(versions::latest)
    }

    fn versions(&self, live_since_ms: i64) -> Result<Vec<VersionView>, StoreError> {
        if self.version < schema::VERSION_WITH_VERSIONS {
            return Ok(Vec::new());
        }
        self.with_retry(|conn| versions::versions(conn, live_since_ms))
    }

    fn backlog(&self) -> Result<Vec<BacklogRow>, StoreError> {
        self.with_retry(versions::backlog)
    }

    fn past_budget(&self, subscriber: &str, attempts: u32, window_cut_ms: i64) -> Result<u64, StoreError> {
        self.with_retry(|conn| versions::past_budget(conn, subscriber, attempts, window_cut_ms))
    }

    fn deliveries(&self, filter: &DeliveryFilter) -> Result<Vec<DeliveryView>, StoreError> {
        let version = self.version;
        self.with_retry(|conn| console::deliveries(conn, filter, version))
    }

    fn delivery(&self, id: i64) -> Result<Option<DeliveryDetail>, StoreError> {
        let version = self.version;
        let found = self.with_retry(|conn| reads::delivery(conn, id, version))?;
        Ok(found.map(|(delivery, attempts)| DeliveryDetail { delivery, attempts }))
    }

    fn status(&self, now_ms: i64) -> Result<StatusView, StoreError> {
        let version = self.version;
        self.with_retry(|conn| reads::status(conn, now_ms, version))
    }

    fn breakers(&self) -> Result<Vec<BreakerView>, StoreError> {
        let version = self.version;
        self.with_retry(|conn| reads::breakers(conn, version))
    }

    fn knows_connection(&self, connection: &str) -> Result<bool, StoreError> {
        self.with_retry(|conn| pauses::knows_connection(conn, connection))
    }

    fn breaker_history(&self, connection: Option<&str>) -> Result<Vec<BreakerAction>, StoreError> {
        if !self.has_pauses() {
            return Ok(Vec::new());
        }
        self.with_retry(|conn| pauses::history(conn, connection))
    }

    fn prune_preview(&self, plan: &PrunePlan) -> Result<PruneCounts, StoreError> {
        let version = self.version;
        self.with_retry(|conn| retention::prune_preview(conn, plan, version))
    }

    fn events(&self, filter: &EventFilter) -> Result<Vec<EventView>, StoreError> {
        let (states, version) = (self.has_event_states(), self.version);
        self.with_retry(|conn| events::list(conn, filter, states, version))
    }

    fn event(&self, id: i64) -> Result<Option<EventDetail>, StoreError> {
        let (states, version) = (self.has_event_states(), self.version);
        let found = self.with_retry(|conn| events::one(conn, id, states, version))?;
        Ok(found.map(|(event, deliveries)| EventDetail { event, deliveries }))
    }

    fn event_counts(&self) -> Result<EventCounts, StoreError> {
        let states = self.has_event_states();
        self.with_retry(|conn| events::counts(conn, states))
    }

    fn attempt_rates(&self, since_ms: i64) -> Result<Vec<AttemptRate>, StoreError> {
        self.with_retry(|conn| console::attempt_rates(conn, since_ms))
    }
    fn db_now_ms(&self) -> Result<Option<i64>, StoreError> {
        sharing::db_now_ms()
    }
}

impl Store for SqliteStore {
    fn record_version(&self, version: &ProgramVersion, now_ms: i64, run: bool) -> Result<i64, StoreError> {
        self.with_retry(|conn| versions::record(conn, version, now_ms, run))
    }

    fn heartbeat(&self, process: &ProcessRow, now_ms: i64, live_since_ms: i64) -> Result<Vec<String>, StoreError> {
        self.with_retry(|conn| versions::heartbeat(conn, process, now_ms, live_since_ms))
    }

    fn process_stopped(&self, id: &str) -> Result<(), StoreError> {
        self.with_retry(|conn| versions::stopped(conn, id))
    }

    fn orphans(&self, subscribers: &[String], limit: usize) -> Result<Vec<OrphanRow>, StoreError> {
        self.with_retry(|conn| versions::orphans(conn, subscribers, limit))
    }

    fn adopt(&self, rows: &[OrphanRow], now_ms: i64) -> Result<usize, StoreError> {
        self.with_retry(|conn| versions::adopt(conn, rows, now_ms))
    }

    fn emit(&self, events: &[NewEvent], now_ms: i64) -> Result<Vec<i64>, StoreError> {
        self.with_retry(|conn| outcomes::emit(conn, events, now_ms))
    }

    fn next_due_ms(&self) -> Result<Option<i64>, StoreError> {
        let keys = self.version >= schema::VERSION_WITH_KEYS;
        self.with_retry(|conn| reads::next_due_ms(conn, keys))
    }

    fn sync_schedules(&self, schedules: &[ScheduleSpec], now_ms: i64) -> Result<(), StoreError> {
        self.with_retry(|conn| schedules::sync(conn, schedules, now_ms))
    }

    fn claim_schedules(&self, schedules: &[ScheduleSpec], now_ms: i64) -> Result<Vec<ClaimedSchedule>, StoreError> {
        self.with_retry(|conn| schedules::claim(conn, schedules, now_ms))
    }

    fn record_schedule(
        &self,
        name: &str,
        run: u64,
        ended_at_ms: i64,
        failure: Option<&Failure>,
    ) -> Result<bool, StoreError> {
        self.with_retry(|conn| schedules::record(conn, name, run, ended_at_ms, failure))
    }

    fn next_schedule_due_ms(&self) -> Result<Option<i64>, StoreError> {
        self.with_retry(schedules::next_due_ms)
    }

    fn next_sweep_ms(&self, now_ms: i64) -> Result<Option<i64>, StoreError> {
        self.with_retry(|conn| reads::next_sweep_ms(conn, now_ms))
    }

    fn listen(&self, wake: jadpo_core::store::Waker) -> Result<bool, StoreError> {
        sharing::listen(wake)
    }

    fn claim(
        &self,
        now_ms: i64,
        limit: usize,
        decide: &mut dyn FnMut(&ClaimCandidate) -> ClaimVerdict,
        raise: &dyn Raise,
    ) -> Result<ClaimReport, StoreError> {
        self.with_retry(|conn| claims::claim(conn, now_ms, limit, decide, raise))
    }

    fn record(
        &self,
        outcomes: &[Recorded],
        raised: &[Vec<NewEvent>],
        raise: &dyn Raise,
    ) -> Result<Vec<usize>, StoreError> {
        if outcomes.is_empty() {
            return Ok(Vec::new());
        }
        self.with_retry(|conn| outcomes::record(conn, outcomes, raised, raise))
    }

    fn record_then_claim(
        &self,
        outcomes: &[Recorded],
        raised: &[Vec<NewEvent>],
        claim: ClaimAt,
        decide: &mut dyn FnMut(&ClaimCandidate) -> ClaimVerdict,
        raise: &dyn Raise,
    ) -> Result<RecordedThenClaimed, StoreError> {
        self.with_retry(|conn| {
            let tx = Tx::immediate(conn)?;
            // The outcomes first: a claim then reads their breakers' counts, and
            // the keys their deliveries held free.
            let written = outcomes::record_in(&tx, outcomes, raised, raise)?;
            let claimed = claims::claim_in(&tx, claim.now_ms, claim.limit, decide, raise)?;
            tx.commit()?;
            Ok(RecordedThenClaimed { written, claimed })
        })
    }

    fn one_writer(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
