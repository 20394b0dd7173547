//! `jadpoc prune`: retention. Final deliveries whose last activity is older than
//! the cut go, with their attempts and handled records, and the events left with
//! no delivery; in small transactions, so a running `jadpoc run` is never kept
//! waiting long.

use crate::args::{Format, FormatArg};
use crate::store::{DbArg, Open, open_store};
use crate::views;
use jadpo_core::retention;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct PruneArgs {
    /// Prune deliveries last active longer ago than this (`7d`, `12h`).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    older_than: u64,
    /// Also prune `failed` and `parked` deliveries (kept by default, for an
    /// operator to look at or retry).
    #[arg(long)]
    include_failed: bool,
    /// Count what would be pruned, and delete nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    format: FormatArg,
    #[command(flatten)]
    db: DbArg,
}

/// A `--older-than` or `--retain` value: a duration such as `7d` or `12h`.
pub fn duration(s: &str) -> Result<u64, String> {
    jadpo_check::parse_duration(s).map_err(|why| format!("not a duration such as `7d` or `12h`: {why}"))
}

pub fn run(args: PruneArgs) -> ExitCode {
    let how = if args.dry_run { Open::ReadOnly } else { Open::Existing };
    let store = match open_store(&args.db, how) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let plan = retention::plan(crate::store::clock_for(&*store).now_ms(), args.older_than, args.include_failed);
    let counts = if args.dry_run { store.prune_preview(&plan) } else { retention::prune(store.as_ref(), &plan) };
    match counts {
        Ok(counts) => {
            match args.format.format {
                Format::Json => crate::print_json(&views::prune_json(&counts, plan.cut_ms, args.dry_run)),
                Format::Text => crate::print_stdout(&views::prune_text(&counts, plan.cut_ms, args.dry_run)),
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("jadpoc: {e}");
            ExitCode::from(2)
        }
    }
}
