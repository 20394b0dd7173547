//! `jadpoc run` (not built yet).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct RunArgs {}

pub fn run(_args: RunArgs) -> ExitCode {
    eprintln!("jadpoc: `run` is not built yet");
    ExitCode::from(2)
}
