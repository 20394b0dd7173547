//! `jadpoc breakers`: the circuit breakers, one per connection that has failed
//! or been paused; `pause` and `resume`, an operator's hand on a connection, and
//! `history`, every such action kept. Listings work while a `jadpoc run` holds
//! the store.

use crate::args::{Format, FormatArg};
use crate::store::{DbArg, Open, open_store, open_views};
use crate::views;
use jadpo_core::rules::breaker::Pause;
use jadpo_core::store::{Actions, Store};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct BreakersArgs {
    #[command(subcommand)]
    command: Option<BreakersCommand>,
    #[command(flatten)]
    format: FormatArg,
    #[command(flatten)]
    db: DbArg,
}

#[derive(clap::Subcommand)]
enum BreakersCommand {
    /// Hold every delivery of a connection, as an open breaker does, until it is
    /// resumed (or for a while): budgets are untouched and no probe is sent.
    Pause {
        /// The connection.
        connection: String,
        /// End the pause by itself after this long (`30m`, `2h`); without it the
        /// pause lasts until `jadpoc breakers resume`.
        #[arg(long = "for", value_name = "DURATION")]
        for_: Option<String>,
        /// Why, kept with the pause.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        /// Who, kept with the pause (default: the OS user).
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
        /// The program's files or folders: a connection it declares can be paused
        /// before any delivery names it.
        #[arg(long = "program", value_name = "PATHS")]
        program: Vec<PathBuf>,
    },
    /// Every pause, resume and end of a pause kept, oldest first, with who, when
    /// and why.
    History {
        /// Only this connection's.
        connection: Option<String>,
    },
    /// Close a paused or open breaker now and release what it holds, due at once.
    Resume {
        /// The connection.
        connection: String,
        /// Why, kept with the resume.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        /// Who, kept with the resume (default: the OS user).
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
}

/// Who an operator is when `--by` is not given: the OS user.
fn operator(by: Option<String>) -> String {
    by.filter(|b| !b.trim().is_empty())
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .or_else(|| std::env::var("LOGNAME").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "unknown".to_string())
}

fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("jadpoc: {e}");
    ExitCode::from(2)
}

pub fn run(args: BreakersArgs) -> ExitCode {
    match args.command {
        None => list(&args.db, args.format.format),
        Some(BreakersCommand::Pause { connection, for_, reason, by, program }) => {
            pause(&args.db, args.format.format, &connection, for_.as_deref(), reason, operator(by), &program)
        }
        Some(BreakersCommand::History { connection }) => history(&args.db, args.format.format, connection.as_deref()),
        Some(BreakersCommand::Resume { connection, reason, by }) => {
            resume(&args.db, args.format.format, &connection, reason.as_deref(), &operator(by))
        }
    }
}

fn history(db: &DbArg, format: Format, connection: Option<&str>) -> ExitCode {
    let store = match open_views(db) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let actions = match store.breaker_history(connection) {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    match format {
        Format::Json => {
            crate::print_json(&serde_json::Value::Array(actions.iter().map(views::breaker_action_json).collect()))
        }
        Format::Text => {
            let empty = match connection {
                Some(c) => format!("no pause or resume of `{c}` yet"),
                None => "no pause or resume yet".to_string(),
            };
            crate::print_lines(&actions, &empty, views::breaker_action_line)
        }
    }
    ExitCode::SUCCESS
}

fn list(db: &DbArg, format: Format) -> ExitCode {
    let store = match open_views(db) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let list = match store.breakers() {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    match format {
        Format::Json => crate::print_json(&serde_json::Value::Array(list.iter().map(views::breaker_json).collect())),
        Format::Text => crate::print_lines(&list, "no breakers: no connection has failed yet", views::breaker_line),
    }
    ExitCode::SUCCESS
}

/// Whether `connection` may be paused: the store knows it (a delivery or a
/// breaker names it), or the program given with `--program` declares it.
fn known(store: &dyn Store, connection: &str, program: &[PathBuf]) -> Result<(), ExitCode> {
    match store.knows_connection(connection) {
        Ok(true) => return Ok(()),
        Ok(false) => {}
        Err(e) => return Err(fail(e)),
    }
    if program.is_empty() {
        return Err(fail(format!(
            "no delivery or breaker names the connection `{connection}`; to pause a connection before its \
             first delivery, name the program that declares it with `--program PATH`"
        )));
    }
    let program = crate::load::program_for_run(program)?;
    if program.connection(connection).is_some() {
        return Ok(());
    }
    let declared: Vec<String> = program.connections.iter().map(|c| format!("`{}`", c.name)).collect();
    Err(fail(format!(
        "no connection `{connection}` in the store or the program (declared: {})",
        if declared.is_empty() { "none".to_string() } else { declared.join(", ") }
    )))
}

fn pause(
    db: &DbArg,
    format: Format,
    connection: &str,
    for_: Option<&str>,
    reason: Option<String>,
    by: String,
    program: &[PathBuf],
) -> ExitCode {
    let for_ms = match for_.map(|d| (d, jadpo_check::parse_duration(d))) {
        None => None,
        Some((_, Ok(ms))) if ms > 0 => Some(ms),
        Some((d, Ok(_))) => return fail(format!("`--for {d}` must be longer than nothing")),
        Some((d, Err(why))) => return fail(format!("`--for {d}` is not a duration such as `30m` or `2h`: {why}")),
    };
    let store = match open_store(db, Open::CreateIfMissing) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if let Err(code) = known(store.as_ref(), connection, program) {
        return code;
    }
    let now = crate::store::clock_for(&*store).now_ms();
    let until_ms = for_ms.map(|ms| now.saturating_add(jadpo_core::rules::ms_i64(ms)));
    let pause = Pause { at_ms: now, until_ms, by, reason: reason.filter(|r| !r.trim().is_empty()) };
    match store.pause_connection(connection, &pause) {
        Ok(_) => {
            match format {
                Format::Json => crate::print_json(&views::paused_json(connection, &pause)),
                Format::Text => crate::print_stdout(&format!("`{connection}` {}\n", views::pause_text(&pause))),
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn resume(db: &DbArg, format: Format, connection: &str, reason: Option<&str>, by: &str) -> ExitCode {
    let store = match open_store(db, Open::Existing) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let reason = reason.filter(|r| !r.trim().is_empty());
    let report = match store.resume_connection(connection, by, reason, crate::store::clock_for(&*store).now_ms()) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let Some(was) = report.was else {
        return fail(format!("no breaker for the connection `{connection}`: it was never paused and never failed"));
    };
    match format {
        Format::Json => crate::print_json(&views::resumed_json(connection, &was, report.released)),
        Format::Text => crate::print_stdout(&format!(
            "`{connection}` resumed (was {}{}): closed, {} held {} released\n",
            was.state.as_str(),
            if was.pause.is_some() { " and paused" } else { "" },
            report.released,
            if report.released == 1 { "delivery" } else { "deliveries" }
        )),
    }
    ExitCode::SUCCESS
}
