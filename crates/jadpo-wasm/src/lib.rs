//! The browser playground's side of jadpo (docs/playground.md): the checker, the
//! formatter, `jadpoc plan` and `jadpoc test`'s virtual-time runner as plain
//! functions of one buffer's text, each answer a value that serializes to the
//! JSON the page reads. The CLI's own types are reused (the check's JSON document,
//! the plan's rows), so the page shows what `jadpoc check`, `plan` and `test` print.
//!
//! Offsets are UTF-8 byte offsets into the text, as the checker's spans are; the
//! page converts them to and from its editor's positions. Everything here is
//! tested natively; [`wasm`] is the thin `#[wasm_bindgen]` layer over it.

pub mod wasm;

use jadpo_check::program::Program;
use jadpo_check::report::{
    CheckReport, SubscriberPlan, budget_plan, budget_plan_text, check_report, subscriber_plan, subscriber_plan_text,
};
use jadpo_check::{Checked, Lower, SourceFile, SymbolKind, plural};
use jadpo_core::clock::format_offset;
use jadpo_core::scenario::{START_MS, TracedRun, run_test_traced};
use jadpo_core::store::{AttemptView, DeliveryView, Store};
use jadpo_store_sqlite::SqliteStore;
use jadpo_syntax::ast::DeclKind;
use serde::Serialize;
use std::sync::Arc;

/// The name the playground's one buffer has in diagnostics and test locations.
pub const FILE_NAME: &str = "playground.jadpo";

fn sources(text: &str) -> Vec<SourceFile> {
    vec![SourceFile { name: FILE_NAME.to_string(), text: text.to_string() }]
}

/// `jadpoc check --format json` of the buffer.
pub fn check(text: &str) -> CheckReport {
    let files = sources(text);
    let checked = jadpo_check::check(&files, Lower::DiagnosticsOnly);
    check_report(&files, &checked)
}

/// The formatter's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Formatted {
    /// Whether the text could be formatted (it has no syntax errors).
    pub ok: bool,
    /// The text in the canonical layout, when it could be formatted.
    pub text: Option<String>,
    /// Whether formatting changes the text.
    pub changed: bool,
    /// Why it was not formatted.
    pub message: Option<String>,
}

/// `jadpoc fmt -` of the buffer.
pub fn format(text: &str) -> Formatted {
    match jadpo_fmt::format(text) {
        Ok(out) => Formatted { ok: true, changed: out != text, text: Some(out), message: None },
        Err(e) => Formatted { ok: false, text: None, changed: false, message: Some(e.to_string()) },
    }
}

/// The checked program, or why there is none.
fn program(text: &str) -> Result<(Checked, Program), String> {
    let mut checked = jadpo_check::check(&sources(text), Lower::Yes);
    match checked.program.take() {
        Some(p) => Ok((checked, p)),
        None => Err(format!(
            "the program has {}: fix {} first",
            plural(checked.errors() as u64, "error"),
            if checked.errors() == 1 { "it" } else { "them" }
        )),
    }
}

/// One subscriber's plan: `jadpoc plan --format json`'s object and the text
/// `jadpoc plan` prints for it.
#[derive(Debug, Clone, Serialize)]
pub struct PlanView {
    pub plan: SubscriberPlan,
    pub text: String,
}

fn plan_view(program: &Program, i: usize) -> Option<PlanView> {
    Some(PlanView { plan: subscriber_plan(program, i)?, text: subscriber_plan_text(program, i) })
}

/// `jadpoc plan`'s answer.
#[derive(Debug, Clone, Serialize)]
pub struct Plans {
    pub ok: bool,
    pub message: Option<String>,
    pub plans: Vec<PlanView>,
}

/// `jadpoc plan [--subscriber NAME]` of the buffer.
pub fn plan(text: &str, subscriber: Option<&str>) -> Plans {
    let failed = |message: String| Plans { ok: false, message: Some(message), plans: Vec::new() };
    let (_, program) = match program(text) {
        Ok(p) => p,
        Err(m) => return failed(m),
    };
    let chosen = match jadpo_check::report::planned_subscribers(&program, subscriber) {
        Ok(c) => c,
        Err(m) => return failed(m),
    };
    Plans { ok: true, message: None, plans: chosen.iter().filter_map(|&i| plan_view(&program, i)).collect() }
}

/// What to show over a place: a subscriber's budget and the plan of its attempts.
#[derive(Debug, Clone, Serialize)]
pub struct Hover {
    /// The byte span the hover is about (the name under the cursor, or the
    /// cursor's place inside a subscriber's declaration).
    pub start: u32,
    pub end: u32,
    pub subscriber: String,
    pub plan: PlanView,
    /// Whether the program checks. When it does not, the plan is the budget its
    /// subscriber's `retry:` writes, without its connection's rate or ordering.
    pub checked: bool,
}

/// The plan of the subscriber under byte offset `offset`: on its name, on a
/// reference to it (a test's `expect` or `retry`), or anywhere else in its
/// declaration that names nothing else. None elsewhere, and when its `retry:` is
/// not valid.
pub fn hover(text: &str, offset: u32) -> Option<Hover> {
    let files = sources(text);
    let mut checked = jadpo_check::check(&files, Lower::Yes);
    // The symbol index is built by every check, errors or not.
    let index = &checked.index;
    let (def, start, end) = match index.symbol_at(0, offset) {
        Some(id) => {
            let def = index.def(id);
            if def.kind != SymbolKind::Subscriber {
                return None;
            }
            let span = index.ref_at(0, offset).map_or(def.name_span, |r| r.span);
            (def, span.start, span.end)
        }
        None => {
            let def = index
                .defs()
                .iter()
                .find(|d| d.kind == SymbolKind::Subscriber && d.span.start <= offset && offset < d.span.end)?;
            (def, offset, offset)
        }
    };
    let subscriber = def.name.to_string();
    let name_span = def.name_span;
    let (plan, checked) = match checked.program.take() {
        Some(program) => (plan_view(&program, program.subscriber(&subscriber)?)?, true),
        None => {
            let parsed = jadpo_syntax::parse(text);
            let decl = parsed.file.decls.iter().find(|d| d.kind == DeclKind::Subscriber && d.name.span == name_span)?;
            let budget = jadpo_check::budget::declared(decl)?;
            let view = PlanView { plan: budget_plan(&subscriber, budget), text: budget_plan_text(&subscriber, budget) };
            (view, false)
        }
    };
    Some(Hover { start, end, subscriber, plan, checked })
}

/// One attempt on a test's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptReport {
    pub attempt: u32,
    /// Virtual time from the test's start.
    pub started_at_ms: i64,
    pub duration_ms: i64,
    /// `succeeded` or `failed`.
    pub outcome: String,
    /// The failure's kind and code, if it failed.
    pub kind: Option<String>,
    pub code: Option<String>,
    /// `started_at_ms` as `jadpoc test` prints it (`+1m 30s`).
    pub at: String,
}

/// One delivery of a test's run and its attempts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeliveryReport {
    pub id: i64,
    pub event: String,
    pub subscriber: String,
    pub connection: String,
    pub state: String,
    /// Attempts used.
    pub attempts_used: u32,
    /// When its event was emitted, from the test's start.
    pub created_at_ms: i64,
    pub end_reason: Option<String>,
    pub attempts: Vec<AttemptReport>,
}

/// Where a failed test stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailureReport {
    pub step: usize,
    pub step_text: String,
    pub at_ms: i64,
    /// What differed, as `jadpoc test` prints it.
    pub text: String,
}

/// One test's run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TestReport {
    pub name: String,
    /// 1-based line of its `test` keyword.
    pub line: u32,
    pub passed: bool,
    pub failure: Option<FailureReport>,
    /// Virtual time when the run stopped, and as `jadpoc test` prints it.
    pub end_ms: i64,
    pub end: String,
    pub deliveries: Vec<DeliveryReport>,
    /// Why the timeline is missing, if the store could not list it.
    pub trace_error: Option<String>,
}

/// `jadpoc test`'s answer.
#[derive(Debug, Clone, Serialize)]
pub struct TestsReport {
    pub ok: bool,
    pub message: Option<String>,
    pub seed: u64,
    pub tests: Vec<TestReport>,
    pub passed: usize,
    pub failed: usize,
    /// `N passed, M failed`, as `jadpoc test` ends.
    pub summary: String,
}

fn attempt_report(a: &AttemptView) -> AttemptReport {
    AttemptReport {
        attempt: a.attempt,
        started_at_ms: a.started_at_ms - START_MS,
        duration_ms: a.duration_ms,
        outcome: a.outcome.clone(),
        kind: a.kind.clone(),
        code: a.code.clone(),
        at: format_offset(a.started_at_ms - START_MS),
    }
}

fn delivery_report(d: &DeliveryView, attempts: &[AttemptView]) -> DeliveryReport {
    DeliveryReport {
        id: d.id,
        event: d.event.clone(),
        subscriber: d.subscriber.clone(),
        connection: d.connection.clone(),
        state: d.state.to_string(),
        attempts_used: d.attempts,
        created_at_ms: d.created_at_ms - START_MS,
        end_reason: d.end_reason.clone(),
        attempts: attempts.iter().map(attempt_report).collect(),
    }
}

fn test_report(test: &jadpo_check::program::Test, run: TracedRun) -> TestReport {
    let (deliveries, trace_error) = match run.deliveries {
        Ok(list) => (list.iter().map(|(d, a)| delivery_report(d, a)).collect(), None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let failure = run.result.err().map(|f| FailureReport {
        step: f.step,
        step_text: f.step_text.clone(),
        at_ms: f.at_ms - START_MS,
        text: f.render(),
    });
    TestReport {
        name: test.name.clone(),
        line: test.line,
        passed: failure.is_none(),
        failure,
        end_ms: run.end_ms - START_MS,
        end: format_offset(run.end_ms - START_MS),
        deliveries,
        trace_error,
    }
}

/// `jadpoc test --seed SEED` of the buffer: each test on a fresh in-memory SQLite
/// store, as `jadpoc test` runs it, with every delivery's attempts.
pub fn run_tests(text: &str, seed: u64) -> TestsReport {
    let failed = |message: String| TestsReport {
        ok: false,
        message: Some(message),
        seed,
        tests: Vec::new(),
        passed: 0,
        failed: 0,
        summary: String::new(),
    };
    let program = match program(text) {
        Ok((_, p)) => Arc::new(p),
        Err(m) => return failed(m),
    };
    if program.tests.is_empty() {
        return TestsReport {
            ok: true,
            message: Some("the program has no `test` blocks".into()),
            seed,
            tests: Vec::new(),
            passed: 0,
            failed: 0,
            summary: "0 passed, 0 failed".into(),
        };
    }
    let mut tests = Vec::new();
    for test in &program.tests {
        let run = match SqliteStore::open_in_memory() {
            Ok(store) => run_test_traced(&program, test, seed, Arc::new(store) as Arc<dyn Store>),
            Err(e) => {
                return failed(format!("the in-memory store could not be opened: {e}"));
            }
        };
        tests.push(test_report(test, run));
    }
    let passed = tests.iter().filter(|t| t.passed).count();
    let failed_count = tests.len() - passed;
    TestsReport {
        ok: true,
        message: None,
        seed,
        summary: format!("{passed} passed, {failed_count} failed"),
        tests,
        passed,
        failed: failed_count,
    }
}

#[cfg(test)]
mod tests;
