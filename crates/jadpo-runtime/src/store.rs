//! Opening a store from where it is: a path is SQLite, a `postgres://` URL is
//! PostgreSQL.

use jadpo_core::store::{Access, OpenOptions, Store, StoreError, Views};
use jadpo_store_postgres::PgStore;
use jadpo_store_sqlite::SqliteStore;
use std::path::Path;

/// The environment variable naming the store when `--db` is not given.
pub const DATABASE_URL_ENV: &str = "JADPO_DATABASE_URL";

/// The store used when neither `--db` nor [`DATABASE_URL_ENV`] names one.
pub const DEFAULT_SQLITE_PATH: &str = ".jadpo/outbox.db";

/// Where a store is: a SQLite file, or a PostgreSQL database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A SQLite file's path.
    Sqlite(std::path::PathBuf),
    /// A `postgres://` or `postgresql://` URL.
    Postgres(String),
}

impl Location {
    /// Read a `--db` value: a `postgres://` or `postgresql://` URL, else a path.
    pub fn parse(db: &str) -> Location {
        let lower = db.get(..13).unwrap_or(db).to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            Location::Postgres(db.to_string())
        } else {
            Location::Sqlite(db.into())
        }
    }

    /// The store named by `--db` if given, else by [`DATABASE_URL_ENV`] if set and
    /// not empty, else [`DEFAULT_SQLITE_PATH`].
    pub fn choose(db: Option<&str>, env: Option<&str>) -> Location {
        match db.or(env.filter(|e| !e.trim().is_empty())) {
            Some(db) => Location::parse(db),
            None => Location::Sqlite(DEFAULT_SQLITE_PATH.into()),
        }
    }
}

/// Open the store at `location` to read alone: nothing is created, migrated or
/// locked for writing, a missing SQLite file is refused, and what is returned
/// can only read.
pub fn open_views(location: &Location, lock_wait: std::time::Duration) -> Result<Box<dyn Views>, StoreError> {
    let options = OpenOptions { access: Access::ReadOnly, lock_wait };
    match location {
        Location::Sqlite(path) => open_sqlite(path, options).map(|s| Box::new(s) as Box<dyn Views>),
        Location::Postgres(url) => PgStore::open(url, options).map(|s| Box::new(s) as Box<dyn Views>),
    }
}

/// Open the store at `location`: SQLite for a path, PostgreSQL for a URL. Read-write
/// creates a missing SQLite file with its folder; read-only refuses a missing one
/// (a command that only reads opens [`open_views`]).
pub fn open(location: &Location, options: OpenOptions) -> Result<Box<dyn Store>, StoreError> {
    match location {
        Location::Sqlite(path) => open_sqlite(path, options).map(|s| Box::new(s) as Box<dyn Store>),
        Location::Postgres(url) => PgStore::open(url, options).map(|s| Box::new(s) as Box<dyn Store>),
    }
}

fn open_sqlite(path: &Path, options: OpenOptions) -> Result<SqliteStore, StoreError> {
    let shown = path.display().to_string();
    match options.access {
        Access::ReadOnly if !path.exists() => Err(StoreError::Missing { path: shown }),
        Access::ReadOnly => SqliteStore::open_with(path, options),
        Access::ReadWrite => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
                && let Err(e) = std::fs::create_dir_all(parent)
            {
                return Err(StoreError::Open {
                    path: shown,
                    message: format!("cannot create its folder `{}`: {e}", parent.display()),
                });
            }
            SqliteStore::open_with(path, options)
        }
    }
}
