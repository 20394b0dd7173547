//! `jadpoc breakers`: the circuit breakers, one per connection that has failed.
//! Works while a `jadpoc run` holds the store.

use crate::args::{Format, FormatArg};
use crate::store::{DbArg, Open, open_store};
use jadpo_runtime::views;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct BreakersArgs {
    #[command(flatten)]
    format: FormatArg,
    #[command(flatten)]
    db: DbArg,
}

pub fn run(args: BreakersArgs) -> ExitCode {
    let store = match open_store(&args.db, Open::ReadOnly) {
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
    match args.format.format {
        Format::Json => crate::print_json(&serde_json::Value::Array(list.iter().map(views::breaker_json).collect())),
        Format::Text => crate::print_lines(&list, "no breakers: no connection has failed yet", views::breaker_line),
    }
    ExitCode::SUCCESS
}
