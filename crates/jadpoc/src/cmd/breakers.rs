//! `jadpoc breakers` (not built yet).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct BreakersArgs {}

pub fn run(_args: BreakersArgs) -> ExitCode {
    eprintln!("jadpoc: `breakers` is not built yet");
    ExitCode::from(2)
}
