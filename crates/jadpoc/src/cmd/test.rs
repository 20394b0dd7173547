//! `jadpoc test`: run the program's `test` blocks in virtual time (testing.md).
//!
//! Each test runs on a fresh runtime (an empty in-memory store, virtual clock,
//! seeded random source) from [`jadpo_runtime::scenario`]; this module picks the
//! tests and seeds, runs them across the machine's cores and prints the results
//! in the program's order. The output depends on the program and the seeds alone,
//! so the same seed prints the same bytes.

use crate::args::ProgramPaths;
use jadpo_core::scenario::TestFailure;
use jadpo_runtime::scenario::run_test;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};

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

/// The seeds a test runs under: `--seeds` of them counted from `--seed`,
/// wrapping past `u64::MAX`, so every test runs under exactly `--seeds` seeds
/// wherever they start.
fn seed_of(args: &TestArgs, i: u64) -> u64 {
    args.seed.wrapping_add(i)
}

/// One test's result so far: how many of its seeds have run, and the seeds
/// that failed with their failures.
#[derive(Default)]
struct Tally {
    ran: u64,
    failures: Vec<(u64, TestFailure)>,
}

/// Run every test under every seed, on as many threads as the machine has
/// cores (one with `--log-format`, so that the log reads in order), and hand
/// each test's failures (the seeds that failed, first seed first) to `report`
/// in the program's order as soon as it and every test before it are done.
/// The runs are independent (each on its own store, clock and seeded random
/// source), so the results, and what is printed, do not depend on the threads.
fn run_all(
    program: &Arc<jadpo_check::Program>,
    tests: &[&jadpo_check::program::Test],
    args: &TestArgs,
    mut report: impl FnMut(&jadpo_check::program::Test, Vec<(u64, TestFailure)>),
) {
    let seeds = args.seeds;
    let jobs = tests.len() as u64 * seeds;
    let threads = if args.log_format.is_some() {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get() as u64).clamp(1, jobs.max(1))
    };
    let next = AtomicU64::new(0);
    let mut tallies: Vec<Tally> = tests.iter().map(|_| Tally::default()).collect();
    let mut reported = 0usize;
    std::thread::scope(|scope| {
        let (sent, results) = mpsc::channel::<(usize, u64, Result<(), TestFailure>)>();
        for _ in 0..threads {
            let (sent, next) = (sent.clone(), &next);
            scope.spawn(move || {
                loop {
                    let job = next.fetch_add(1, Ordering::Relaxed);
                    if job >= jobs {
                        break;
                    }
                    let (t, seed) = ((job / seeds) as usize, seed_of(args, job % seeds));
                    if sent.send((t, seed, run_test(program, tests[t], seed))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(sent);
        for (t, seed, result) in results {
            let tally = &mut tallies[t];
            tally.ran += 1;
            if let Err(f) = result {
                tally.failures.push((seed, f));
            }
            while reported < tests.len() && tallies[reported].ran == seeds {
                let mut tally = std::mem::take(&mut tallies[reported]);
                // The first failure named is the first seed's, as a run in order gives.
                tally.failures.sort_by_key(|(s, _)| s.wrapping_sub(args.seed));
                report(tests[reported], tally.failures);
                reported += 1;
            }
        }
    });
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
    run_all(&program, &tests, &args, |test, failures| {
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
    });
    crate::print_stdout(&format!("{passed} passed, {failed} failed\n"));
    if failed > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS }
}
