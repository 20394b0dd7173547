//! `jadpoc status`: deliveries counted by state and subscriber. Works while a
//! `jadpoc run` holds the store.

use super::deliveries::Format;
use super::run::{DEFAULT_DB, open_store};
use jadpo_runtime::clock::{Clock, SystemClock};
use jadpo_runtime::views;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct StatusArgs {
    /// `text` for people, `json` for programs.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// The store.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_DB)]
    db: PathBuf,
}

pub fn run(args: StatusArgs) -> ExitCode {
    let store = match open_store(&args.db, false) {
        Ok(s) => s,
        Err(code) => return code,
    };
    match store.status(SystemClock.now_ms()) {
        Ok(s) => {
            match args.format {
                Format::Json => crate::print_json(&views::status_json(&s)),
                Format::Text => crate::print_stdout(&views::status_text(&s)),
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("jadpoc: {e}");
            ExitCode::from(2)
        }
    }
}
