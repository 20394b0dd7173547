//! What `jadpoc check --format json` and `jadpoc plan` print, as values and text:
//! the diagnostics' JSON document (language.md) and each subscriber's plan of
//! attempts (testing.md). No IO; the CLI and the browser playground
//! (`crates/jadpo-wasm`) print the same thing from here.

use crate::budget::{PlanRow, attempts_that_fit, plan};
use crate::diagnostic::{LineIndex, Position, SourceFile};
use crate::program::{Budget, Program, Rate};
use crate::{Checked, format_duration_spaced};
use serde::Serialize;
use std::fmt::Write as _;

/// The JSON document of `jadpoc check --format json`.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub version: u32,
    pub diagnostics: Vec<DiagnosticReport>,
    pub summary: Summary,
}

/// One diagnostic, its places as lines, columns and byte offsets.
#[derive(Debug, Clone, Serialize)]
pub struct DiagnosticReport {
    pub code: &'static str,
    pub severity: &'static str,
    pub message: String,
    pub help: Option<String>,
    pub file: String,
    pub start: Position,
    pub end: Position,
    pub labels: Vec<LabelReport>,
}

/// A secondary place of a diagnostic.
#[derive(Debug, Clone, Serialize)]
pub struct LabelReport {
    pub message: String,
    pub file: String,
    pub start: Position,
    pub end: Position,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub errors: usize,
    pub warnings: usize,
    pub files: usize,
}

/// The diagnostics of `checked` (a check of `files`) as `jadpoc check --format
/// json` gives them.
pub fn check_report(files: &[SourceFile], checked: &Checked) -> CheckReport {
    let index: Vec<LineIndex> = files.iter().map(|f| LineIndex::new(&f.text)).collect();
    let name = |file: usize| files.get(file).map(|f| f.name.clone()).unwrap_or_default();
    let at = |file: usize, offset: u32| match index.get(file) {
        Some(li) => li.position(offset),
        None => Position { line: 1, column: 1, offset },
    };
    let diagnostics = checked
        .diagnostics
        .iter()
        .map(|d| DiagnosticReport {
            code: d.code.as_str(),
            severity: d.severity().as_str(),
            message: d.message.clone(),
            help: d.help.clone(),
            file: name(d.file),
            start: at(d.file, d.span.start),
            end: at(d.file, d.span.end),
            labels: d
                .labels
                .iter()
                .map(|l| LabelReport {
                    message: l.message.clone(),
                    file: name(l.file),
                    start: at(l.file, l.span.start),
                    end: at(l.file, l.span.end),
                })
                .collect(),
        })
        .collect();
    CheckReport {
        version: 1,
        diagnostics,
        summary: Summary { errors: checked.errors(), warnings: checked.warnings(), files: files.len() },
    }
}

/// The backlog `plan` says a connection's rate drains.
pub const PLAN_BACKLOG: u64 = 10_000;

/// One subscriber's plan as `jadpoc plan --format json` gives it (testing.md),
/// times in whole seconds from the event.
#[derive(Debug, Clone, Serialize)]
pub struct SubscriberPlan {
    pub subscriber: String,
    pub attempts: u32,
    pub within_s: u64,
    pub default_attempts: bool,
    pub default_within: bool,
    /// How many attempts start within the window on average.
    pub fits: u32,
    pub rows: Vec<PlanRowReport>,
    pub rate: Option<RateReport>,
    pub order_by: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanRowReport {
    pub attempt: u32,
    pub ceiling_s: u64,
    pub earliest_s: u64,
    pub average_s: u64,
    pub latest_s: u64,
}

/// The subscriber's connection's rate and how long it takes to drain
/// [`PLAN_BACKLOG`] calls.
#[derive(Debug, Clone, Serialize)]
pub struct RateReport {
    pub rate: String,
    pub burst: u32,
    pub drain_10000_s: f64,
}

fn secs(ms: u64) -> u64 {
    ms / 1000
}

/// The rate of a subscriber's connection, if it has one.
fn connection_rate(program: &Program, subscriber: usize) -> Option<Rate> {
    let action = program.actions.get(program.subscribers.get(subscriber)?.call.action)?;
    program.connections.get(action.connection)?.rate
}

/// The subscribers a plan is of: every one, or the one named (`Err` says there
/// is none by that name, with the closest name there is).
pub fn planned_subscribers(program: &Program, name: Option<&str>) -> Result<Vec<usize>, String> {
    match name {
        None => Ok((0..program.subscribers.len()).collect()),
        Some(name) => match program.subscriber(name) {
            Some(i) => Ok(vec![i]),
            None => {
                let names = program.subscribers.iter().map(|s| s.name.as_str());
                let hint =
                    crate::suggest::closest(name, names).map(|c| format!("; did you mean `{c}`?")).unwrap_or_default();
                Err(format!("no subscriber is named `{name}`{hint}"))
            }
        },
    }
}

/// The plan of subscriber `i` of `program` (None when there is no such subscriber).
pub fn subscriber_plan(program: &Program, i: usize) -> Option<SubscriberPlan> {
    let s = program.subscribers.get(i)?;
    let mut plan = budget_plan(&s.name, s.budget);
    plan.rate = connection_rate(program, i).map(|r| RateReport {
        rate: r.written(),
        burst: r.burst,
        drain_10000_s: r.drain_ms(PLAN_BACKLOG) as f64 / 1000.0,
    });
    plan.order_by = s.order_by.clone();
    Some(plan)
}

/// The plan of a subscriber named `name` with `budget`, its connection's rate and
/// its ordering left out (an editor shows this much while the program has errors).
pub fn budget_plan(name: &str, b: Budget) -> SubscriberPlan {
    let rows = plan(b.attempts, b.within_ms)
        .iter()
        .map(|r| PlanRowReport {
            attempt: r.attempt,
            ceiling_s: secs(r.ceiling_ms),
            earliest_s: secs(r.earliest_ms),
            average_s: secs(r.average_ms),
            latest_s: secs(r.latest_ms),
        })
        .collect();
    SubscriberPlan {
        subscriber: name.to_string(),
        attempts: b.attempts,
        within_s: secs(b.within_ms),
        default_attempts: b.default_attempts,
        default_within: b.default_within,
        fits: attempts_that_fit(b.attempts, b.within_ms),
        rows,
        rate: None,
        order_by: None,
    }
}

/// The plan of subscriber `i` of `program` as `jadpoc plan` prints it for people:
/// the budget, a table of attempts and where the budget ends it (empty when there
/// is no such subscriber).
pub fn subscriber_plan_text(program: &Program, i: usize) -> String {
    let Some(s) = program.subscribers.get(i) else { return String::new() };
    let mut out = budget_plan_text(&s.name, s.budget);
    if let Some(rate) = connection_rate(program, i) {
        let _ = writeln!(out, "its connection's rate: {}", rate.backlog_words(PLAN_BACKLOG));
    }
    if let Some(key) = &s.order_by {
        let _ = writeln!(out, "one `{key}` at a time: a delivery waits while an earlier one of its key has not ended");
    }
    out
}

/// The budget's part of [`subscriber_plan_text`], for a subscriber named `name`.
pub fn budget_plan_text(name: &str, b: Budget) -> String {
    let default = |d: bool| if d { " (default)" } else { "" };
    let mut out = format!(
        "{}: {} attempts{} within {}{}\n\n",
        name,
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
    match (rows.last(), rows.get(fits as usize)) {
        (Some(last), _) if fits == b.attempts => {
            let _ = writeln!(
                out,
                "gives up after attempt {}, which starts at the latest {} after the event",
                b.attempts,
                cell(last.latest_ms)
            );
        }
        (_, Some(next)) => {
            let _ = writeln!(
                out,
                "the window ends it first: on average only {fits} of {} attempts start within {}; attempt {} would start {} after the event",
                b.attempts,
                cell(b.within_ms),
                fits + 1,
                cell(next.average_ms)
            );
        }
        _ => {}
    }
    out
}
