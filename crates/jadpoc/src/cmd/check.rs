//! `jadpoc check [PATHS...]`: every problem in a program, for people, editors and CI.

use crate::load::{find_files, read_sources};
use crate::render;
use jadpo_check::{Lower, check};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct CheckArgs {
    /// Files and directories (searched recursively for `*.jadpo`); all of them form
    /// one program.
    #[arg(default_value = ".")]
    paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Treat warnings as errors for the exit status.
    #[arg(long)]
    deny_warnings: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    Human,
    Json,
    Sarif,
}

pub fn run(args: CheckArgs) -> ExitCode {
    let sources = match find_files(&args.paths).and_then(|f| read_sources(&f)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("jadpoc: {e}");
            return ExitCode::from(2);
        }
    };
    let checked = check(&sources, Lower::No);
    let out = match args.format {
        Format::Human => render::human(&sources, &checked, render::use_color(&std::io::stdout())),
        Format::Json => render::json(&sources, &checked).to_string() + "\n",
        Format::Sarif => render::sarif(&sources, &checked).to_string() + "\n",
    };
    crate::print_stdout(&out);
    if checked.errors() > 0 || (args.deny_warnings && checked.warnings() > 0) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
