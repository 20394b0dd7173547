//! `jadpoc test` (not built yet).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct TestArgs {}

pub fn run(_args: TestArgs) -> ExitCode {
    eprintln!("jadpoc: `test` is not built yet");
    ExitCode::from(2)
}
