//! `jadpoc status`: deliveries counted by state and subscriber, and the events
//! kept invalid. Works while a `jadpoc run` holds the store.

use crate::args::{Format, FormatArg};
use crate::store::{DbArg, open_views};
use crate::views;
use jadpo_core::store::status_now;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    format: FormatArg,
    #[command(flatten)]
    db: DbArg,
}

pub fn run(args: StatusArgs) -> ExitCode {
    let store = match open_views(&args.db) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let status = status_now(&*store, crate::store::clock_for(&*store).now_ms());
    match status {
        Ok(s) => {
            match args.format.format {
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
