//! `jadpoc`: the jadpo toolchain's command line.

mod args;
mod cmd;
mod load;
mod logging;
mod render;
mod store;
mod views;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// mimalloc rather than the system allocator: `jadpoc run` allocates and frees a
/// delivery's strings, rows and task on many threads at a high rate, and glibc's
/// per-thread arenas gave much of that time back to the kernel (memory trimmed,
/// then faulted in again). Without transparent huge pages (`no_thp`): each new
/// thread's first allocation would fault in a 2 MiB page the kernel zeroes whole,
/// and a process starting its threads and connections spent most of its first
/// few hundred milliseconds doing that. The `system-allocator` feature leaves it
/// out, for heap profilers that watch the system's `malloc`.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Gives the memory the allocator holds free back to the system now. mimalloc
/// returns freed pages only when it next allocates on that thread, so a process
/// that frees a lot and then waits (the language server after checking a large
/// program) would otherwise keep its peak.
pub(crate) fn release_free_memory() {
    // SAFETY: `mi_collect` takes no pointer and only walks mimalloc's own
    // structures; it may be called from any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

/// mimalloc's `mi_option_purge_delay`, by its place in `mi_option_e`
/// (mimalloc.h); the bindings name no constant for it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// From now on, memory freed is given back to the system at once rather than
/// after mimalloc's delay (a second). For a short process whose peak comes after
/// it has freed much (`jadpoc check`, after the parse's stacks and lists): that
/// memory would otherwise still count in its peak. So for the language server,
/// whose checks come faster than the delay while a user types.
pub(crate) fn purge_freed_memory_at_once() {
    // SAFETY: `mi_option_set` takes no pointer and only sets one of mimalloc's
    // options, which it reads atomically; it may be called at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) }
}

/// The jadpo toolchain: check programs, run them on the outbox runtime, test them in
/// virtual time.
#[derive(Parser)]
#[command(name = "jadpoc", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check a program and report every problem found.
    Check(cmd::check::CheckArgs),
    /// Print what a code means, or list every code.
    Explain(cmd::explain::ExplainArgs),
    /// Compare two programs: what the new one does to what the old one left.
    Diff(cmd::diff::DiffArgs),
    /// Run a checked program on the outbox runtime.
    Run(cmd::run::RunArgs),
    /// Store an event and its deliveries.
    Emit(cmd::emit::EmitArgs),
    /// List, show and retry deliveries.
    Deliveries(cmd::deliveries::DeliveriesArgs),
    /// List and show events, and replay them to today's subscribers.
    Events(cmd::events::EventsArgs),
    /// Count deliveries by state and subscriber.
    Status(cmd::status::StatusArgs),
    /// List the circuit breakers, one per connection.
    Breakers(cmd::breakers::BreakersArgs),
    /// Serve the operator's web console on a store.
    Console(cmd::console::ConsoleArgs),
    /// Delete final deliveries older than a cut, with their history.
    Prune(cmd::prune::PruneArgs),
    /// Run the program's `test` blocks in virtual time.
    Test(cmd::test::TestArgs),
    /// Show when each attempt of each subscriber's budget starts.
    Plan(cmd::plan::PlanArgs),
    /// Rewrite files in the canonical layout, keeping every comment.
    Fmt(cmd::fmt::FmtArgs),
    /// Run the language server over stdin and stdout, for editors.
    Lsp(cmd::lsp::LspArgs),
    /// Apply the store's migrations now, or print their SQL.
    Migrate(cmd::migrate::MigrateArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Check(args) => cmd::check::run(args),
        Command::Explain(args) => cmd::explain::run(args),
        Command::Diff(args) => cmd::diff::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Emit(args) => cmd::emit::run(args),
        Command::Deliveries(args) => cmd::deliveries::run(args),
        Command::Events(args) => cmd::events::run(args),
        Command::Status(args) => cmd::status::run(args),
        Command::Breakers(args) => cmd::breakers::run(args),
        Command::Console(args) => cmd::console::run(args),
        Command::Prune(args) => cmd::prune::run(args),
        Command::Test(args) => cmd::test::run(args),
        Command::Plan(args) => cmd::plan::run(args),
        Command::Fmt(args) => cmd::fmt::run(args),
        Command::Lsp(args) => cmd::lsp::run(args),
        Command::Migrate(args) => cmd::migrate::run(args),
    }
}

/// Writes a command's output; a closed pipe (`jadpoc check | head`) is not an error.
pub(crate) fn print_stdout(s: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes()).and_then(|()| out.flush());
}

/// Writes a JSON document for people to read as well as programs.
pub(crate) fn print_json(v: &serde_json::Value) {
    print_stdout(&format!("{}\n", serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())));
}

/// Writes one line per item, or `empty` when there is none.
pub(crate) fn print_lines<T>(items: &[T], empty: &str, line: impl Fn(&T) -> String) {
    let mut out = String::new();
    if items.is_empty() {
        out.push_str(empty);
        out.push('\n');
    }
    for item in items {
        out.push_str(&line(item));
        out.push('\n');
    }
    print_stdout(&out);
}
