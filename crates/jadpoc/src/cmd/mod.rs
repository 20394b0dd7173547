//! One module per subcommand: its clap arguments and its `run`.

pub mod breakers;
pub mod check;
pub mod console;
pub mod deliveries;
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
