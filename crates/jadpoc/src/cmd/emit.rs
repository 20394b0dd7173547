//! `jadpoc emit` (not built yet).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct EmitArgs {}

pub fn run(_args: EmitArgs) -> ExitCode {
    eprintln!("jadpoc: `emit` is not built yet");
    ExitCode::from(2)
}
