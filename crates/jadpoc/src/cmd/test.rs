//! `jadpoc test`: run the program's `test` blocks in virtual time (testing.md).
//!
//! Each test runs on a fresh runtime (in-memory store, virtual clock, seeded random
//! source) from [`jadpo_runtime::scenario`]; this module only picks the tests and
//! seeds and prints the results. The output depends on the program and the seeds
//! alone, so the same seed prints the same bytes.

use crate::args::ProgramPaths;
use jadpo_core::scenario::TestFailure;
use jadpo_runtime::scenario::run_test;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct TestArgs {
    #[command(flatten)]
    program: ProgramPaths,
    /// Only the tests whose name contains this text.
    #[arg(long, value_name = "TEXT")]
    filter: Option<String>,
    /// The random source's seed (the first one with `--seeds`).
    #[arg(long, value_name = "N", default_value_t = 0)]
    seed: u64,
    /// Run each test under this many seeds, from `--seed` on, and name those that
    /// fail.
    #[arg(long, value_name = "K", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    seeds: u64,
    /// Also print each run's log to stderr (`text` or `json`; times are virtual).
    #[arg(long, value_enum, value_name = "FORMAT")]
    log_format: Option<crate::logging::LogFormat>,
}

/// One test's result over its seeds: the seeds that failed, with the first
/// failure's details.
fn run_seeds(
    program: &Arc<jadpo_check::Program>,
    test: &jadpo_check::program::Test,
    args: &TestArgs,
) -> Vec<(u64, TestFailure)> {
    let mut failed = Vec::new();
    // Counted from `--seed`, wrapping past `u64::MAX`, so every test runs under
    // exactly `--seeds` seeds wherever they start.
    for seed in (0..args.seeds).map(|i| args.seed.wrapping_add(i)) {
        if let Err(f) = run_test(program, test, seed) {
            failed.push((seed, f));
        }
    }
    failed
}

pub fn run(args: TestArgs) -> ExitCode {
    // Without a sink the runtime's events go nowhere: the results alone are printed.
    if let Some(format) = args.log_format {
        crate::logging::install(format);
    }
    let program = match crate::load::program_for_run(&args.program.paths) {
        Ok(p) => Arc::new(p),
        Err(code) => return code,
    };
    let tests: Vec<_> =
        program.tests.iter().filter(|t| args.filter.as_deref().is_none_or(|f| t.name.contains(f))).collect();
    if tests.is_empty() {
        // A filter that matches nothing is a mistake (a typo would otherwise pass
        // CI); a program without tests is not.
        return match &args.filter {
            Some(f) => {
                eprintln!("jadpoc: no test matches `{f}` (a test runs when its name contains the filter's text)");
                ExitCode::from(1)
            }
            None => {
                crate::print_stdout("the program has no `test` blocks\n0 passed, 0 failed\n");
                ExitCode::SUCCESS
            }
        };
    }
    let (mut passed, mut failed) = (0usize, 0usize);
    for test in tests {
        let failures = run_seeds(&program, test, &args);
        let mut out = String::new();
        match failures.first() {
            None => {
                passed += 1;
                let _ = writeln!(out, "ok   {}", test.name);
            }
            Some((seed, first)) => {
                failed += 1;
                let _ = writeln!(out, "FAILED {}", test.name);
                let _ = writeln!(out, "    at {}:{}", test.file, test.line);
                if args.seeds > 1 {
                    let seeds: Vec<String> = failures.iter().map(|(s, _)| s.to_string()).collect();
                    let _ = writeln!(
                        out,
                        "    failed under {} of {} seeds: {}",
                        failures.len(),
                        args.seeds,
                        seeds.join(", ")
                    );
                }
                let _ = writeln!(out, "    with seed {seed}:");
                out.push_str(&first.render());
            }
        }
        crate::print_stdout(&out);
    }
    crate::print_stdout(&format!("{passed} passed, {failed} failed\n"));
    if failed > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS }
}
