//! The store every store-using command opens: which one (`--db`, else
//! `JADPO_DATABASE_URL`, else the runtime's default file), how it is opened, and how
//! a failure to open it is reported.

use jadpo_core::clock::{AnchoredClock, Clock, HostClock, TEST_CLOCK_OFFSET_ENV};
use jadpo_core::store::{OpenOptions, Store, Views};
use jadpo_core::version::ProgramVersion;
use jadpo_runtime::store::{self, DATABASE_URL_ENV, Location};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// `--db`, shared by every command that reads or writes the store.
#[derive(clap::Args, Debug, Clone)]
pub struct DbArg {
    /// The store: a SQLite file (created with its folder by `emit` and `run`), or a
    /// `postgres://` URL. When not given: `$JADPO_DATABASE_URL` if set, else
    /// `.jadpo/outbox.db`.
    #[arg(long, value_name = "PATH|URL", global = true)]
    pub db: Option<String>,
    /// The PostgreSQL schema holding jadpo's tables (`jadpo` when not given), as
    /// the URL's `?schema=NAME` says; this flag wins over the URL's.
    #[arg(long, value_name = "NAME", global = true)]
    pub schema: Option<String>,
}

impl DbArg {
    /// The store this command uses (`--schema` put in a PostgreSQL URL; on a
    /// SQLite store it is refused when the store is opened).
    pub fn location(&self) -> Location {
        let env = std::env::var(DATABASE_URL_ENV).ok();
        match (Location::choose(self.db.as_deref(), env.as_deref()), &self.schema) {
            (Location::Postgres(url), Some(schema)) => Location::Postgres(with_schema(&url, schema)),
            (location, _) => location,
        }
    }

    /// The store this command uses; a one-line message and exit 2 when `--schema`
    /// is given for a SQLite store (which has no schemas).
    pub fn checked_location(&self) -> Result<Location, ExitCode> {
        let location = self.location();
        if let (Location::Sqlite(path), Some(schema)) = (&location, &self.schema) {
            eprintln!(
                "jadpoc: `--schema {schema}` names a PostgreSQL schema, and the store `{}` is a SQLite file",
                path.display()
            );
            return Err(ExitCode::from(2));
        }
        Ok(location)
    }
}

/// `url` with its `schema=` parameter (if any) replaced by `schema`.
fn with_schema(url: &str, schema: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut pairs: Vec<&str> = query.split('&').filter(|p| !p.is_empty() && !p.starts_with("schema=")).collect();
    let ours = format!("schema={schema}");
    pairs.push(&ours);
    format!("{base}?{}", pairs.join("&"))
}

/// The clock a command hands the store: the store's own (the database's, on
/// PostgreSQL, so that every host writes and compares times alike), else the
/// host's. A store whose clock cannot be read now falls back to the host's: the
/// command's own store call will report what is wrong.
pub fn clock_for(store: &dyn Views) -> Arc<dyn Clock> {
    let before = Instant::now();
    match store.db_now_ms() {
        Ok(Some(db)) => Arc::new(AnchoredClock::new(db, before + before.elapsed() / 2)),
        _ => Arc::new(host_clock()),
    }
}

/// The host's clock, moved by `$JADPO_TEST_CLOCK_OFFSET_MS` when a test sets it
/// (to play hosts whose clocks disagree).
pub fn host_clock() -> HostClock {
    let offset = std::env::var(TEST_CLOCK_OFFSET_ENV).ok().and_then(|v| v.trim().parse::<i64>().ok()).unwrap_or(0);
    HostClock::with_offset(offset)
}

/// How a command uses the store.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Open {
    /// `emit` and `run` create the store (and its folder) when it is missing.
    CreateIfMissing,
    /// Commands that change existing deliveries need an existing store.
    Existing,
    /// Listings only read: no migration, no write lock, a read-only file is fine.
    ReadOnly,
}

/// The store as messages show it: a file's path, or a URL without its password.
pub fn shown(location: &Location) -> String {
    match location {
        Location::Sqlite(path) => path.display().to_string(),
        Location::Postgres(url) => without_password(url),
    }
}

/// `postgres://user:secret@host/db` as `postgres://user:***@host/db`.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let (authority, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// Opens the store named by `db` to read alone (no migration, no write lock, a
/// read-only file is fine); a one-line message and exit 2 when it cannot be.
pub fn open_views(db: &DbArg) -> Result<Box<dyn Views>, ExitCode> {
    let location = db.checked_location()?;
    store::open_views(&location, OpenOptions::read_only().lock_wait).map_err(|e| {
        eprintln!("jadpoc: {e}");
        ExitCode::from(2)
    })
}

/// Opens the store named by `db` as `how` says; a one-line message and exit 2 when
/// it cannot be.
pub fn open_store(db: &DbArg, how: Open) -> Result<Box<dyn Store>, ExitCode> {
    let location = db.checked_location()?;
    if how == Open::Existing
        && let Location::Sqlite(path) = &location
        && !path.exists()
    {
        eprintln!("jadpoc: no store at `{}` (`jadpoc emit` or `jadpoc run` creates one)", path.display());
        return Err(ExitCode::from(2));
    }
    let options = match how {
        Open::CreateIfMissing | Open::Existing => OpenOptions::read_write(),
        Open::ReadOnly => OpenOptions::read_only(),
    };
    store::open(&location, options).map_err(|e| {
        eprintln!("jadpoc: {e}");
        ExitCode::from(2)
    })
}

/// The store a command that stores events opens (creating it if missing), with
/// the version of the program it stores them for kept and written beside them.
pub fn open_writer(db: &DbArg, version: &ProgramVersion) -> Result<Box<dyn Store>, ExitCode> {
    let store = open_store(db, Open::CreateIfMissing)?;
    let now = clock_for(&*store).now_ms();
    store.record_version(version, now, false).map_err(|e| {
        eprintln!("jadpoc: {e}");
        ExitCode::from(2)
    })?;
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::{with_schema, without_password};

    #[test]
    fn schema_replaces_the_urls_schema() {
        assert_eq!(with_schema("postgres://db/app", "ops"), "postgres://db/app?schema=ops");
        assert_eq!(
            with_schema("postgres://db/app?schema=a&sslmode=disable", "b"),
            "postgres://db/app?sslmode=disable&schema=b"
        );
    }

    #[test]
    fn a_url_is_shown_without_its_password() {
        assert_eq!(without_password("postgres://app:s3cr@t@db:5432/jadpo"), "postgres://app:***@db:5432/jadpo");
        assert_eq!(
            without_password("postgresql://app@db/jadpo?sslmode=require"),
            "postgresql://app@db/jadpo?sslmode=require"
        );
        assert_eq!(without_password("postgres://db/jadpo"), "postgres://db/jadpo");
    }
}
