//! The store every store-using command opens: which one (`--db`, else
//! `JADPO_DATABASE_URL`, else the runtime's default file), how it is opened, and how
//! a failure to open it is reported.

use jadpo_runtime::store::{self, DATABASE_URL_ENV, Location, OpenOptions, Store};
use std::process::ExitCode;

/// `--db`, shared by every command that reads or writes the store.
#[derive(clap::Args, Debug, Clone)]
pub struct DbArg {
    /// The store: a SQLite file (created with its folder by `emit` and `run`), or a
    /// `postgres://` URL. When not given: `$JADPO_DATABASE_URL` if set, else
    /// `.jadpo/outbox.db`.
    #[arg(long, value_name = "PATH|URL", global = true)]
    pub db: Option<String>,
}

impl DbArg {
    /// The store this command uses.
    pub fn location(&self) -> Location {
        let env = std::env::var(DATABASE_URL_ENV).ok();
        Location::choose(self.db.as_deref(), env.as_deref())
    }
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

/// Opens the store named by `db` as `how` says; a one-line message and exit 2 when
/// it cannot be.
pub fn open_store(db: &DbArg, how: Open) -> Result<Box<dyn Store>, ExitCode> {
    let location = db.location();
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

#[cfg(test)]
mod tests {
    use super::without_password;

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
