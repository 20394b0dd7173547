//! Arguments that several subcommands share, written once so that every subcommand
//! names and documents them the same way.

use std::path::PathBuf;

/// The program a command reads: its files and folders.
#[derive(clap::Args, Debug, Clone)]
pub struct ProgramPaths {
    /// The program's files and folders (folders are searched recursively for
    /// `*.jadpo`); all of them form one program.
    #[arg(value_name = "PATHS", default_value = ".")]
    pub paths: Vec<PathBuf>,
}

/// How a command prints its results: `text` for people (`human` is accepted as
/// another name for it), `json` for programs.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Format {
    /// For people.
    #[value(alias = "human")]
    Text,
    /// For programs.
    Json,
}

/// The formats of a command whose results are findings in files (`check`,
/// `diff`): those of every command, and SARIF for code scanning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    #[value(alias = "human")]
    Text,
    Json,
    Sarif,
}

/// `--format`, shared by every command that prints results.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct FormatArg {
    /// `text` for people (or `human`), `json` for programs.
    #[arg(long, value_enum, default_value_t = Format::Text, global = true)]
    pub format: Format,
}

/// Counts in messages, written once in the checker for every crate.
pub use jadpo_check::plural;
