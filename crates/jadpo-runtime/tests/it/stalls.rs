//! Random programs and provider scripts, run in virtual time: whatever the
//! providers answer (failures, Retry-After, hangs), with rates, in-flight
//! limits, ordering keys, a schedule and subscribers of jadpo's own events
//! (a failed delivery, an outage), the runtime never leaves a due delivery that no
//! claim takes, nor counts a run in flight that never started. The
//! virtual-time driver checks both as it goes (docs/testing.md, "How it
//! works"); no step here expects anything, so any failure is one of them, or
//! a store error (an operator's retry of a delivery that cannot be retried
//! ends a test as the step's own failure, and is let be). And when the
//! providers end up answering well, every delivery ends. Both hold on SQLite
//! and on PostgreSQL, whose claims read on from a cursor.

use jadpo_check::program::{DeliveryState, Program};
use jadpo_check::{Lower, SourceFile, check};
use jadpo_core::rules::breaker::Pause;
use jadpo_core::scenario::{FailureDetail, Scenario, TracedRun, run_test_traced_with};
use jadpo_core::store::Actions;
use jadpo_core::store::{OpenOptions, Store, StoreError};
use jadpo_store_postgres::PgStore;
use jadpo_store_sqlite::SqliteStore;
use jadpo_test_support::PgDatabase;
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One provider answer, as a test's `fake` step writes it.
fn answer() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just("ok".to_string()),
        3 => Just("unavailable".to_string()),
        1 => Just("rejected".to_string()),
        1 => Just("outcome_unknown".to_string()),
        1 => Just("hang".to_string()),
        2 => (1u32..=120).prop_map(|s| format!("rate_limited({s}s)")),
        1 => (1u32..=90).prop_map(|m| format!("unavailable({m}m)")),
        1 => (2u32..=6).prop_map(|n| format!("unavailable * {n}")),
    ]
}

/// An answer a provider may give on its way to answering well: no hang, no
/// `outcome_unknown` (which parks its delivery, and an ordered one's key with
/// it, until an operator acts).
fn recoverable_answer() -> impl Strategy<Value = String> {
    answer().prop_filter("ends on its own", |a| a != "hang" && a != "outcome_unknown")
}

/// A connection's settings: a rate (or none), its in-flight limit.
fn connection() -> impl Strategy<Value = String> {
    (prop::option::of((1u32..=30, prop::sample::select(vec!["s", "m"]), 1u32..=3)), 1u32..=4).prop_map(
        |(rate, in_flight)| {
            let rate = rate.map(|(n, unit, burst)| format!("rate: {n}/{unit}  burst: {burst}")).unwrap_or_default();
            format!("{rate}  max_in_flight: {in_flight}")
        },
    )
}

/// A step of the test: events emitted (`n` of them, with `key` their ordering
/// key), time passing, or an operator's action: a retry or a skip of a
/// subscriber's latest delivery, a connection paused (for so many minutes, or
/// until resumed) or resumed. Pauses, resumes and skips have no step in the
/// test's language: the run makes them beside the test's own steps, as
/// `jadpoc breakers` and `jadpoc deliveries` do beside a run.
#[derive(Debug, Clone)]
enum Step {
    Emit { n: u32, key: u32 },
    Wait(String),
    Retry(String),
    Skip(String),
    Pause { connection: String, minutes: Option<i64> },
    Resume(String),
}

fn step() -> impl Strategy<Value = Step> {
    let subscriber = || prop::sample::select(vec!["short_budget", "in_order", "default_budget"]);
    let connection = || prop::sample::select(vec!["a", "b"]);
    prop_oneof![
        8 => (1u32..=6, 0u32..3).prop_map(|(n, key)| Step::Emit { n, key }),
        8 => prop::sample::select(vec!["0s", "1s", "5s", "30s", "2m", "10m", "1h", "1d"])
            .prop_map(|w| Step::Wait(w.to_string())),
        2 => subscriber().prop_map(|s| Step::Retry(s.to_string())),
        1 => subscriber().prop_map(|s| Step::Skip(s.to_string())),
        1 => (connection(), prop::option::of(1i64..=180))
            .prop_map(|(c, minutes)| Step::Pause { connection: c.to_string(), minutes }),
        1 => connection().prop_map(|c| Step::Resume(c.to_string())),
    ]
}

/// The program's text, and its operator's steps, each with the index of the
/// test's step it comes before.
fn program(
    a: &str,
    b: &str,
    answers_a: &[String],
    answers_b: &[String],
    steps: &[Step],
) -> (String, Vec<(usize, Step)>) {
    let mut text = format!(
        r#"event Paid {{
    id: string
    customer: string
}}
connection a {{ url: "http://127.0.0.1:9/a"  {a} }}
connection b {{ url: "http://127.0.0.1:9/b"  {b} }}
action record(id: string) {{ via: a }}
action mail(id: string) {{ via: b }}
subscriber short_budget {{
    on: Paid
    run: record(event.id)
    retry: {{ attempts: 4  within: 1h }}
}}
subscriber in_order {{
    on: Paid
    run: mail(event.id)
    order_by: event.customer
}}
subscriber default_budget {{
    on: Paid
    run: record(event.id)
}}
action page(who: string, attempts: int) {{ via: b }}
subscriber on_failure {{
    on: jadpo.delivery_failed
    run: page(event.subscriber, event.attempts)
}}
action alert(name: string) {{ via: a }}
subscriber on_outage {{
    on: jadpo.connection_unavailable
    run: alert(event.connection)
}}
action sync(scope: string) {{ via: a }}
schedule hourly {{
    every: 1h
    run: sync("all")
}}
test "random" {{
    fake a: [{}]
    fake b: [{}]
"#,
        answers_a.join(", "),
        answers_b.join(", ")
    );
    let mut id = 0;
    // The test's steps after its two `fake` steps, one a line.
    let mut lines = Vec::new();
    let mut operator = Vec::new();
    for s in steps {
        match s {
            Step::Emit { n, key } => {
                for _ in 0..*n {
                    id += 1;
                    lines.push(format!("    emit Paid {{ id: \"p{id}\", customer: \"c{key}\" }}\n"));
                }
            }
            Step::Wait(w) => lines.push(format!("    wait {w}\n")),
            Step::Retry(subscriber) => lines.push(format!("    retry {subscriber}\n")),
            Step::Skip(_) | Step::Pause { .. } | Step::Resume(_) => operator.push((2 + lines.len(), s.clone())),
        }
    }
    text.push_str(&lines.concat());
    // Long enough for every budget's window and the breakers' probes.
    text.push_str("    wait 3d\n}\n");
    (text, operator)
}

/// The random program `text`, checked (every one generated must check).
fn checked(text: &str) -> Result<Arc<Program>, TestCaseError> {
    let checked = check(&[SourceFile { name: "random.jadpo".into(), text: text.to_string() }], Lower::Yes);
    checked
        .program
        .map(Arc::new)
        .ok_or_else(|| TestCaseError::fail(format!("does not check: {:?}\n{text}", checked.diagnostics)))
}

/// A random program: its text, the operator's steps its text leaves out (each
/// with the index of the test's step it comes before), the seed to run it
/// under.
#[derive(Debug, Clone)]
struct Case {
    text: String,
    operator: Vec<(usize, Step)>,
    seed: u64,
}

prop_compose! {
    /// A random program, its providers' scripts drawn from `answers`.
    fn case(answers: BoxedStrategy<Vec<String>>)(
        a in connection(),
        b in connection(),
        answers_a in answers.clone(),
        answers_b in answers,
        steps in prop::collection::vec(step(), 1..10),
        seed in any::<u64>(),
    ) -> Case {
        let (text, operator) = program(&a, &b, &answers_a, &answers_b, &steps);
        Case { text, operator, seed }
    }
}

/// Run `case` on `store`, each operator's step before the test's step it was
/// drawn before. With `resume_at_end`, every connection paused with no end is
/// resumed before the last wait.
fn drive(case: &Case, program: &Arc<Program>, store: Arc<dyn Store>, resume_at_end: bool) -> TracedRun {
    let test = &program.tests[0];
    let last = test.steps.len() - 1;
    run_test_traced_with(program, test, case.seed, store, |scenario, i| {
        for (_, step) in case.operator.iter().filter(|(at, _)| *at == i) {
            operator(scenario, step)?;
        }
        if resume_at_end && i == last {
            for connection in ["a", "b"] {
                if scenario.breaker(connection)?.pause.is_some_and(|p| p.until_ms.is_none()) {
                    operator(scenario, &Step::Resume(connection.to_string()))?;
                }
            }
        }
        Ok(())
    })
}

/// The operator's action of `step` (a pause, a resume, a skip).
fn operator(scenario: &mut Scenario, step: &Step) -> Result<(), StoreError> {
    match step {
        Step::Pause { connection, minutes } => {
            scenario.operator(|store, now| {
                let until_ms = minutes.map(|m| now + m * 60_000);
                store.pause_connection(connection, &Pause { at_ms: now, until_ms, by: "ops".into(), reason: None })
            })?;
        }
        Step::Resume(connection) => {
            scenario.operator(|store, now| store.resume_connection(connection, "ops", None, now))?;
        }
        Step::Skip(subscriber) => {
            if let Some((d, _)) = scenario.latest(subscriber)? {
                // One that is running or has ended stays as it is.
                scenario.operator(|store, now| store.skip(&[d.id], now))?;
            }
        }
        Step::Emit { .. } | Step::Wait(_) | Step::Retry(_) => {}
    }
    Ok(())
}

/// Where a case runs: a SQLite store in memory, or a schema of its own in
/// one PostgreSQL database (created by the store as it opens, dropped after).
enum On {
    Sqlite,
    Postgres(PgCases),
}

/// The PostgreSQL database the cases of a property share, a schema a case.
struct PgCases {
    db: PgDatabase,
    next: AtomicUsize,
}

impl On {
    /// PostgreSQL, or `None` where no server answers (outside CI: see
    /// [`PgDatabase::new`]).
    fn postgres() -> Option<On> {
        let db = PgDatabase::new("jadpo_stalls")?;
        // What is looked for is what the claims decide, not what survives a
        // crash: commits need not wait for the server's log to reach the disk.
        db.client()
            .batch_execute(&format!("ALTER DATABASE {} SET synchronous_commit = off", db.name()))
            .expect("commits without waiting for the disk");
        Some(On::Postgres(PgCases { db, next: AtomicUsize::new(0) }))
    }

    /// The first property on this store: the driver's checks never fire.
    fn no_stall(&self, case: &Case) -> Result<(), TestCaseError> {
        let (seed, text) = (case.seed, &case.text);
        let run = self.drive(case, false)?;
        // A retry of a delivery that is neither failed nor parked ends the
        // test there, as the step's own failure: not what is looked for.
        let stalled = run.result.as_ref().err().filter(|f| !matches!(f.detail, FailureDetail::Step(_)));
        prop_assert!(stalled.is_none(), "seed {seed}: {stalled:?}\n{:?}\n{text}", case.operator);
        Ok(())
    }

    /// The second property on this store: three days after the providers
    /// answer well and every pause has ended, every delivery has ended.
    fn every_delivery_ends(&self, case: &Case) -> Result<(), TestCaseError> {
        let (seed, text) = (case.seed, &case.text);
        let run = self.drive(case, true)?;
        if run.result.as_ref().is_err_and(|f| matches!(f.detail, FailureDetail::Step(_))) {
            // A retry that could not be made ended the test before its last wait.
            return Ok(());
        }
        prop_assert!(run.result.is_ok(), "seed {seed}: {:?}\n{:?}\n{text}", run.result.err(), case.operator);
        let deliveries = run.deliveries.map_err(|e| TestCaseError::fail(e.to_string()))?;
        let open: Vec<_> = deliveries
            .iter()
            .filter(|(d, _)| {
                !matches!(d.state, DeliveryState::Succeeded | DeliveryState::Failed | DeliveryState::Skipped)
            })
            .map(|(d, attempts)| format!("{} {} {:?} after {} attempts", d.id, d.subscriber, d.state, attempts.len()))
            .collect();
        prop_assert!(open.is_empty(), "seed {seed}: not ended: {open:?}\n{:?}\n{text}", case.operator);
        Ok(())
    }

    /// `case` run on a fresh store of this kind.
    fn drive(&self, case: &Case, resume_at_end: bool) -> Result<TracedRun, TestCaseError> {
        let program = checked(&case.text)?;
        let fail = |e: StoreError| TestCaseError::fail(e.to_string());
        match self {
            On::Sqlite => {
                let store = SqliteStore::open_in_memory().map_err(fail)?;
                Ok(drive(case, &program, Arc::new(store), resume_at_end))
            }
            On::Postgres(cases) => {
                let schema = format!("case{}", cases.next.fetch_add(1, Ordering::Relaxed));
                let url = format!("{}?schema={schema}", cases.db.url);
                let store = PgStore::open(&url, OpenOptions::read_write()).map_err(fail)?;
                let run = drive(case, &program, Arc::new(store), resume_at_end);
                // The store is closed with the run; its schema goes, so that the
                // database stays small over the cases.
                let dropped = cases.db.client().batch_execute(&format!("DROP SCHEMA {schema} CASCADE"));
                prop_assert!(dropped.is_ok(), "drop {schema}: {dropped:?}");
                Ok(run)
            }
        }
    }
}

/// A random program's provider scripts for the first property: any answers.
fn any_answers() -> BoxedStrategy<Vec<String>> {
    prop::collection::vec(answer(), 1..6).boxed()
}

/// Scripts for the second property: answers a provider recovers from, then
/// `ok` (the last answer repeats).
fn answers_ending_ok() -> BoxedStrategy<Vec<String>> {
    prop::collection::vec(recoverable_answer(), 0..5)
        .prop_map(|mut answers| {
            answers.push("ok".to_string());
            answers
        })
        .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn no_due_delivery_is_left_and_no_slot_is_kept(case in case(any_answers())) {
        On::Sqlite.no_stall(&case)?;
    }

    /// Providers that fail for a while and then answer `ok` (the last answer
    /// repeats): three days on, every delivery has ended, succeeded or failed
    /// with its budget spent; none is left pending, running or held.
    #[test]
    fn every_delivery_ends_once_the_providers_answer_well(case in case(answers_ending_ok())) {
        On::Sqlite.every_delivery_ends(&case)?;
    }
}

// The same properties on PostgreSQL, whose claims read on from a cursor and
// take the processes' turns: fewer cases, since each of a case's store calls
// is a round trip to the server (a case of three busy days makes thousands),
// in one database a property, a schema a case.

/// The cases a property runs on PostgreSQL.
const PG_CASES: u32 = 24;

/// `property` over PG_CASES random programs whose providers answer from
/// `answers`, each on a fresh PostgreSQL schema.
fn on_postgres(property: fn(&On, &Case) -> Result<(), TestCaseError>, answers: BoxedStrategy<Vec<String>>) {
    let Some(on) = On::postgres() else { return };
    let config = ProptestConfig { cases: PG_CASES, source_file: Some(file!()), ..ProptestConfig::default() };
    let result = TestRunner::new(config).run(&case(answers), |case| property(&on, &case));
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn on_postgres_no_due_delivery_is_left_and_no_slot_is_kept() {
    on_postgres(On::no_stall, any_answers());
}

#[test]
fn on_postgres_every_delivery_ends_once_the_providers_answer_well() {
    on_postgres(On::every_delivery_ends, answers_ending_ok());
}
