//! The store every store-using command opens: where it is by default and how a
//! failure to open it is reported.

use jadpo_runtime::store::SqliteStore;
use std::path::{Path, PathBuf};
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

/// Whether a command may create the store or needs one that exists.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Open {
    /// `emit` and `run` create the store (and its folder) when it is missing.
    CreateIfMissing,
    /// Commands that read or change existing deliveries need an existing store.
    Existing,
}

/// Opens (or creates, with its folder) the store at `db`; a one-line message and
/// exit 2 when it cannot be.
pub fn open_store(db: &Path, how: Open) -> Result<SqliteStore, ExitCode> {
    if how == Open::Existing && !db.exists() {
        eprintln!("jadpoc: no store at `{}` (`jadpoc emit` or `jadpoc run` creates one)", db.display());
        return Err(ExitCode::from(2));
    }
    if let Some(parent) = db.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.exists()
        && let Err(e) = std::fs::create_dir_all(parent)
    {
        eprintln!("jadpoc: cannot create `{}`: {e}", parent.display());
        return Err(ExitCode::from(2));
    }
    SqliteStore::open(db).map_err(|e| {
        eprintln!("jadpoc: {e}");
        ExitCode::from(2)
    })
}
