//! `jadpoc plan`: when each attempt of each subscriber's budget starts, counted from
//! its event, with no Retry-After and no breaker.

use crate::args::{Format, FormatArg, ProgramPaths};
use jadpo_check::budget::{PlanRow, attempts_that_fit, plan};
use jadpo_check::{Program, format_duration_spaced};
use serde_json::json;
use std::fmt::Write as _;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct PlanArgs {
    #[command(flatten)]
    program: ProgramPaths,
    /// Only this subscriber.
    #[arg(long, value_name = "NAME")]
    subscriber: Option<String>,
    #[command(flatten)]
    format: FormatArg,
}

pub fn run(args: PlanArgs) -> ExitCode {
    let program = match crate::load::program_for_run(&args.program.paths) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let chosen: Vec<usize> = match &args.subscriber {
        None => (0..program.subscribers.len()).collect(),
        Some(name) => match program.subscriber(name) {
            Some(i) => vec![i],
            None => {
                let names = program.subscribers.iter().map(|s| s.name.as_str());
                let hint = jadpo_check::suggest::closest(name, names)
                    .map(|c| format!("; did you mean `{c}`?"))
                    .unwrap_or_default();
                eprintln!("jadpoc: no subscriber is named `{name}`{hint}");
                return ExitCode::from(2);
            }
        },
    };
    let out = match args.format.format {
        Format::Text => chosen.iter().map(|&i| human(&program, i)).collect::<Vec<_>>().join("\n"),
        Format::Json => {
            serde_json::Value::Array(chosen.iter().map(|&i| json_plan(&program, i)).collect()).to_string() + "\n"
        }
    };
    crate::print_stdout(&out);
    ExitCode::SUCCESS
}

fn secs(ms: u64) -> u64 {
    ms / 1000
}

fn json_plan(program: &Program, i: usize) -> serde_json::Value {
    let s = &program.subscribers[i];
    let b = s.budget;
    let rows: Vec<_> = plan(b.attempts, b.within_ms)
        .iter()
        .map(|r| {
            json!({"attempt": r.attempt, "ceiling_s": secs(r.ceiling_ms), "earliest_s": secs(r.earliest_ms),
                   "average_s": secs(r.average_ms), "latest_s": secs(r.latest_ms)})
        })
        .collect();
    json!({
        "subscriber": s.name,
        "attempts": b.attempts,
        "within_s": secs(b.within_ms),
        "default_attempts": b.default_attempts,
        "default_within": b.default_within,
        "fits": attempts_that_fit(b.attempts, b.within_ms),
        "rows": rows,
        "rate": connection_rate(program, i).map(|r| json!({
            "rate": r.written(),
            "burst": r.burst,
            "drain_10000_s": r.drain_ms(BACKLOG) as f64 / 1000.0,
        })),
        "order_by": s.order_by,
    })
}

fn human(program: &Program, i: usize) -> String {
    let s = &program.subscribers[i];
    let b = s.budget;
    let default = |d: bool| if d { " (default)" } else { "" };
    let mut out = format!(
        "{}: {} attempts{} within {}{}\n\n",
        s.name,
        b.attempts,
        default(b.default_attempts),
        format_duration_spaced(b.within_ms),
        default(b.default_within)
    );
    let rows = plan(b.attempts, b.within_ms);
    let cell = |ms: u64| format_duration_spaced(ms);
    let table: Vec<[String; 5]> = rows
        .iter()
        .map(|r: &PlanRow| {
            let ceiling = if r.attempt == 1 { "-".to_string() } else { cell(r.ceiling_ms) };
            [r.attempt.to_string(), ceiling, cell(r.earliest_ms), cell(r.average_ms), cell(r.latest_ms)]
        })
        .collect();
    let header = ["attempt", "wait up to", "earliest", "average", "latest"];
    let widths: Vec<usize> =
        (0..5).map(|c| table.iter().map(|r| r[c].len()).chain([header[c].len()]).max().unwrap_or(0)).collect();
    let line = |cells: &[&str]| {
        let mut l = String::from(" ");
        for (c, text) in cells.iter().enumerate() {
            let _ = write!(l, "  {text:>w$}", w = widths[c]);
        }
        l.trim_end().to_string() + "\n"
    };
    out.push_str(&line(&header));
    let fits = attempts_that_fit(b.attempts, b.within_ms);
    for (r, cells) in rows.iter().zip(&table) {
        let mut l = line(&cells.iter().map(String::as_str).collect::<Vec<_>>());
        if r.average_ms > b.within_ms {
            l.pop();
            l.push_str("   past the window on average\n");
        }
        out.push_str(&l);
    }
    out.push('\n');
    let last = rows[rows.len() - 1];
    if fits == b.attempts {
        let _ = writeln!(
            out,
            "gives up after attempt {}, which starts at the latest {} after the event",
            b.attempts,
            cell(last.latest_ms)
        );
    } else {
        let _ = writeln!(
            out,
            "the window ends it first: on average only {fits} of {} attempts start within {}; attempt {} would start {} after the event",
            b.attempts,
            cell(b.within_ms),
            fits + 1,
            cell(rows[fits as usize].average_ms)
        );
    }
    if let Some(rate) = connection_rate(program, i) {
        let _ = writeln!(out, "its connection's rate: {}", rate.backlog_words(BACKLOG));
    }
    if let Some(key) = &s.order_by {
        let _ = writeln!(out, "one `{key}` at a time: a delivery waits while an earlier one of its key has not ended");
    }
    out
}

/// The backlog `plan` says a connection's rate drains.
const BACKLOG: u64 = 10_000;

/// The rate of a subscriber's connection, if it has one.
fn connection_rate(program: &Program, subscriber: usize) -> Option<jadpo_check::program::Rate> {
    program.connections.get(program.subscriber_connection(subscriber))?.rate
}
