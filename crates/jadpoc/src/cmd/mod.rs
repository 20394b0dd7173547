//! One module per subcommand: its clap arguments and its `run`.

pub mod breakers;
pub mod check;
pub mod console;
pub mod deliveries;
pub mod diff;
pub mod emit;
pub mod events;
pub mod explain;
pub mod fmt;
pub mod lsp;
pub mod migrate;
pub mod plan;
pub mod prune;
pub mod run;
pub mod status;
pub mod test;

/// The async runtime of a command that serves or runs (`run`, `console`), or
/// the exit code after saying why there is none.
pub(crate) fn async_runtime() -> Result<tokio::runtime::Runtime, std::process::ExitCode> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| {
        eprintln!("jadpoc: cannot start the async runtime: {e}");
        std::process::ExitCode::from(2)
    })
}
