//! `jadpoc status` (not built yet).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct StatusArgs {}

pub fn run(_args: StatusArgs) -> ExitCode {
    eprintln!("jadpoc: `status` is not built yet");
    ExitCode::from(2)
}
