//! 1,000 scenarios in virtual time, each running a 20-attempt, 3-day budget to its
//! end (every call `unavailable`, so all 20 attempts run and the delivery fails),
//! each on its own runtime: a fresh in-memory store, virtual clock and seed.
//!
//! `cargo bench -p jadpo-runtime --bench scenarios [-- SCENARIOS]` prints the total
//! time; the goal is under 5 seconds for 1,000.

use jadpo_check::program::Program;
use jadpo_check::{Lower, SourceFile, check};
use jadpo_runtime::scenario::run_test;
use std::sync::Arc;
use std::time::Instant;

const PROGRAM: &str = r#"
event Order { id: string }
connection ledger { url: "http://127.0.0.1:9/ledger" }
action record(id: string) { via: ledger }
subscriber long_budget {
    on: Order
    run: record(event.id)
    retry: { attempts: 20  within: 3d }
}
test "a 20-attempt, 3-day budget to its end" {
    fake ledger: [unavailable]
    emit Order { id: "o1" }
    wait 4d
    expect long_budget { state: failed, attempts: 20, last_failure: unavailable }
}
"#;

fn main() {
    let scenarios: u64 = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(1_000);
    let checked = check(&[SourceFile { name: "bench.jadpo".into(), text: PROGRAM.into() }], Lower::Yes);
    let Some(program) = checked.program else {
        eprintln!("the bench's program does not check: {:?}", checked.diagnostics);
        std::process::exit(2);
    };
    let program: Arc<Program> = Arc::new(program);
    let test = &program.tests[0];
    let start = Instant::now();
    let mut failed = 0u64;
    for seed in 0..scenarios {
        if run_test(&program, test, seed).is_err() {
            failed += 1;
        }
    }
    let elapsed = start.elapsed();
    println!(
        "{scenarios} scenarios (20 attempts within 3d each, run to the end) in {:.3}s: {:.1}us a scenario, {failed} failed",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / scenarios.max(1) as f64
    );
    if failed > 0 {
        std::process::exit(1);
    }
}
