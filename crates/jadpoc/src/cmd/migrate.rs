//! `jadpoc migrate`: apply the store's migrations now, or (`--print`) show their
//! SQL for a review of the database's changes. `run` and `emit` apply them on
//! first use too; this is for teams whose schema changes go through review.

use crate::store::DbArg;
use jadpo_core::store::OpenOptions;
use jadpo_runtime::store::{self, Location};
use jadpo_store_postgres::connect::{DEFAULT_SCHEMA, PgLocation};
use jadpo_store_postgres::schema;
use jadpo_store_sqlite::SqliteStore;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    db: DbArg,
    /// Print the migrations' SQL instead of applying them.
    #[arg(long)]
    print: bool,
}

pub fn run(args: MigrateArgs) -> ExitCode {
    let location = match args.db.checked_location() {
        Ok(l) => l,
        Err(code) => return code,
    };
    if args.print {
        let sql = match &location {
            Location::Postgres(url) => match PgLocation::parse(url, None) {
                Ok(l) => schema::sql(&l.schema),
                Err(e) => {
                    eprintln!("jadpoc: {e}");
                    return ExitCode::from(2);
                }
            },
            Location::Sqlite(_) => SqliteStore::migrations_sql(),
        };
        crate::print_stdout(&sql);
        return ExitCode::SUCCESS;
    }
    match store::open(&location, OpenOptions::read_write()) {
        Ok(_) => {
            let shown = match &location {
                Location::Postgres(url) => match PgLocation::parse(url, None) {
                    Ok(l) => format!("`{}` (schema `{}`)", l.shown, l.schema),
                    Err(_) => format!("schema `{DEFAULT_SCHEMA}`"),
                },
                Location::Sqlite(path) => format!("`{}`", path.display()),
            };
            crate::print_stdout(&format!("{shown} is up to date\n"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("jadpoc: {e}");
            ExitCode::from(2)
        }
    }
}
