//! `jadpoc breakers`: the circuit breakers, one per connection that has failed.
//! Works while a `jadpoc run` holds the store.

use super::deliveries::Format;
use super::run::{DEFAULT_DB, open_store};
use jadpo_runtime::views;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct BreakersArgs {
    /// `text` for people, `json` for programs.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// The store.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_DB)]
    db: PathBuf,
}

pub fn run(args: BreakersArgs) -> ExitCode {
    let store = match open_store(&args.db, false) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let list = match store.breakers() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("jadpoc: {e}");
            return ExitCode::from(2);
        }
    };
    match args.format {
        Format::Json => crate::print_json(&serde_json::Value::Array(list.iter().map(views::breaker_json).collect())),
        Format::Text => crate::print_lines(&list, "no breakers: no connection has failed yet", views::breaker_line),
    }
    ExitCode::SUCCESS
}
