//! The store every store-using command opens: where it is by default and how a
//! failure to open it is reported.

use jadpo_runtime::store::{self, Location, OpenOptions, Store};
use std::path::PathBuf;
use std::process::ExitCode;

/// The store used when `--db` is not given.
pub const DEFAULT_DB: &str = ".jadpo/outbox.db";

/// `--db`, shared by every command that reads or writes the store.
#[derive(clap::Args, Debug, Clone)]
pub struct DbArg {
    /// The store (created with its folder when a command writes and it is missing).
    #[arg(long, value_name = "PATH", default_value = DEFAULT_DB, global = true)]
    pub db: PathBuf,
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

/// Opens the store at `db` as `how` says; a one-line message and exit 2 when it
/// cannot be.
pub fn open_store(db: &std::path::Path, how: Open) -> Result<Box<dyn Store>, ExitCode> {
    let location = Location::parse(&db.to_string_lossy());
    if how == Open::Existing && matches!(location, Location::Sqlite(_)) && !db.exists() {
        eprintln!("jadpoc: no store at `{}` (`jadpoc emit` or `jadpoc run` creates one)", db.display());
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
