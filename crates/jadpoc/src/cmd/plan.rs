//! `jadpoc plan` (not built yet).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct PlanArgs {}

pub fn run(_args: PlanArgs) -> ExitCode {
    eprintln!("jadpoc: `plan` is not built yet");
    ExitCode::from(2)
}
