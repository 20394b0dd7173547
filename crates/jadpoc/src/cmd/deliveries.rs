//! `jadpoc deliveries` (not built yet).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct DeliveriesArgs {}

pub fn run(_args: DeliveriesArgs) -> ExitCode {
    eprintln!("jadpoc: `deliveries` is not built yet");
    ExitCode::from(2)
}
