//! `jadpoc check [PATHS...]`: every problem in a program, for people, editors and CI.

use crate::args::ProgramPaths;
use crate::args::ReportFormat;
use crate::load::{find_files, read_sources};
use crate::render;
use jadpo_check::{Lower, check_parsed};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    program: ProgramPaths,
    /// `text` for people (or `human`), `json` for editors, `sarif` for code scanning.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    format: ReportFormat,
    /// Treat warnings as errors for the exit status.
    #[arg(long)]
    deny_warnings: bool,
}

pub fn run(args: CheckArgs) -> ExitCode {
    let sources = match find_files(&args.program.paths).and_then(|f| read_sources(&f)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("jadpoc: {e}");
            return ExitCode::from(2);
        }
    };
    // What the parse frees before the check goes back to the system at once.
    crate::purge_freed_memory_at_once();
    let trees: Vec<_> = sources.iter().map(|f| jadpo_syntax::parse(&f.text)).collect();
    let checked = check_parsed(&sources, &trees.iter().collect::<Vec<_>>(), Lower::DiagnosticsOnly);
    // The process exits once the report is out: freeing a large program's tree
    // node by node, on one thread after the work, is not worth it; the system
    // takes the memory back at the exit.
    std::mem::forget(trees);
    let out = match args.format {
        ReportFormat::Text => render::human(&sources, &checked, render::use_color(&std::io::stdout())),
        ReportFormat::Json => render::json(&sources, &checked).to_string() + "\n",
        ReportFormat::Sarif => render::sarif(&sources, &checked).to_string() + "\n",
    };
    crate::print_stdout(&out);
    if checked.errors() > 0 || (args.deny_warnings && checked.warnings() > 0) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
