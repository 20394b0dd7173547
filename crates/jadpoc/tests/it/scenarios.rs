//! `jadpoc test` end to end: the scenario suite in `tests/scenarios/` passes, and
//! the runner itself can fail, says what differed, is deterministic per seed, and
//! finds with `--seeds` an expectation that holds only by luck of the jitter.

use std::path::PathBuf;
use std::process::{Command, Output};

const JADPOC: &str = env!("CARGO_BIN_EXE_jadpoc");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn jadpoc_test(args: &[&str]) -> Output {
    Command::new(JADPOC).current_dir(root()).arg("test").args(args).output().expect("run jadpoc test")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// How many `test` blocks the files of a folder hold.
fn count_tests(dir: &str) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(root().join(dir)).expect("read the folder") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "jadpo") {
            let text = std::fs::read_to_string(&path).expect("read a scenario");
            n += text.lines().filter(|l| l.starts_with("test \"")).count();
        }
    }
    n
}

#[test]
fn the_scenario_suite_passes() {
    let out = jadpoc_test(&["tests/scenarios/"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let n = count_tests("tests/scenarios");
    assert!(n >= 20, "the suite has {n} tests");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), n + 1, "{text}");
    assert!(lines[..n].iter().all(|l| l.starts_with("ok   ")), "{text}");
    assert_eq!(lines[n], format!("{n} passed, 0 failed"));
}

#[test]
fn the_scenario_suite_passes_under_many_seeds() {
    // Every expectation of the suite holds whatever the jitter draws.
    let out = jadpoc_test(&["tests/scenarios/", "--seeds", "20"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let n = count_tests("tests/scenarios");
    assert!(text.ends_with(&format!("{n} passed, 0 failed\n")), "{text}");
}

#[test]
fn the_builtin_event_scenarios_pass() {
    let out = jadpoc_test(&["tests/scenarios_builtin/", "--seeds", "5"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let n = count_tests("tests/scenarios_builtin");
    assert!(n >= 7, "the suite has {n} tests");
    assert!(text.ends_with(&format!("{n} passed, 0 failed\n")), "{text}");
}

#[test]
fn the_examples_tests_pass() {
    for path in ["examples/", "tests/check/clean_tests.jadpo"] {
        let out = jadpoc_test(&[path]);
        assert_eq!(out.status.code(), Some(0), "{path}: {}", stdout(&out));
        assert!(stdout(&out).contains(" passed, 0 failed\n"), "{path}: {}", stdout(&out));
    }
}

const WRONG: &str = "\
FAILED four attempts are not five
    at tests/scenarios_failing/wrong_expectation.jadpo:17
    with seed 0:
    step 4 (`expect record_paid`) at +1h
    expected  state: succeeded, attempts: 5
    found     state: failed, attempts: 4
    delivery 1 of `record_paid`: failed, 4 attempts used
      +0s attempt 1 unavailable (fake.unavailable)
      +21s272ms attempt 2 unavailable (fake.unavailable)
      +49s227ms attempt 3 rate_limited (fake.rate_limited)
      +2m13s124ms attempt 4 not_found (fake.not_found)
ok   this one passes
FAILED no delivery was made
    at tests/scenarios_failing/wrong_expectation.jadpo:31
    with seed 0:
    step 3 (`expect record_paid`) at +1s
    expected  state: succeeded
    found     delivery: none (no event it subscribes to was emitted)
FAILED a succeeded delivery cannot be retried
    at tests/scenarios_failing/wrong_expectation.jadpo:37
    with seed 0:
    step 4 (`retry record_paid`) at +0s
    `record_paid`'s latest delivery is succeeded; only a failed or parked delivery can be retried
FAILED the breaker stays closed
    at tests/scenarios_failing/wrong_expectation.jadpo:44
    with seed 0:
    step 4 (`expect breaker ledger`) at +0s
    expected  state: open, alerts: 1
    found     state: closed, alerts: 0
1 passed, 4 failed
";

#[test]
fn a_wrong_expectation_fails_saying_what_differed_with_the_attempts() {
    let out = jadpoc_test(&["tests/scenarios_failing/wrong_expectation.jadpo"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), WRONG);
}

#[test]
fn the_same_seed_prints_the_same_bytes() {
    let args = ["tests/scenarios_failing/wrong_expectation.jadpo", "--seed", "7"];
    let a = jadpoc_test(&args);
    let b = jadpoc_test(&args);
    assert_eq!(a.status.code(), Some(1));
    assert_eq!(a.stdout, b.stdout);
    assert_eq!(stdout(&a).matches("with seed 7:").count(), 4, "{}", stdout(&a));
    // Another seed draws other waits: the history's times differ.
    let c = jadpoc_test(&["tests/scenarios_failing/wrong_expectation.jadpo", "--seed", "8"]);
    assert_ne!(a.stdout, c.stdout);
}

#[test]
fn seeds_find_an_expectation_that_holds_only_by_luck() {
    let path = "tests/scenarios_failing/lucky_jitter.jadpo";
    let out = jadpoc_test(&[path]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out), "ok   attempts that fit a minute\n1 passed, 0 failed\n");

    let out = jadpoc_test(&[path, "--seeds", "50"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let line = text.lines().find(|l| l.contains("failed under")).expect("the failing seeds are named");
    let (count, seeds) =
        line.trim().strip_prefix("failed under ").and_then(|r| r.split_once(" of 50 seeds: ")).expect(line);
    let seeds: Vec<u64> = seeds.split(", ").map(|s| s.parse().expect("a seed")).collect();
    assert_eq!(seeds.len().to_string(), count);
    assert!(!seeds.is_empty() && seeds.len() < 50, "{line}");
    assert!(!seeds.contains(&0), "seed 0 passes: {line}");
    assert!(text.ends_with("0 passed, 1 failed\n"), "{text}");
    // The first failing seed, run alone, fails the same way.
    let first = seeds[0].to_string();
    let alone = jadpoc_test(&[path, "--seed", &first]);
    assert_eq!(alone.status.code(), Some(1));
    assert!(stdout(&alone).contains(&format!("with seed {first}:")));
}

#[test]
fn seeds_near_the_top_wrap_and_every_one_runs() {
    // Three seeds from `u64::MAX - 1` are that, `u64::MAX` and 0; none is skipped,
    // so a test failing under all of them cannot pass for want of seeds.
    let path = "tests/scenarios_failing/wrong_expectation.jadpo";
    let out = jadpoc_test(&[path, "--filter", "four attempts", "--seed", "18446744073709551614", "--seeds", "3"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("failed under 3 of 3 seeds: 18446744073709551614, 18446744073709551615, 0\n"), "{text}");
    assert!(text.ends_with("0 passed, 1 failed\n"), "{text}");
}

#[test]
fn filter_runs_only_the_tests_whose_name_contains_it() {
    let out = jadpoc_test(&["tests/scenarios/", "--filter", "Retry-After"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout(&out),
        "ok   a Retry-After delays the next attempt to what it asks\n\
         ok   a Retry-After on unavailable delays too\n\
         ok   a Retry-After past the window fails at once\n\
         ok   deliveries that came during a Retry-After run once it has passed\n\
         4 passed, 0 failed\n"
    );
    // A filter that matches nothing fails, so that a typo cannot pass CI.
    let out = jadpoc_test(&["tests/scenarios/", "--filter", "no such test"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no test matches `no such test`"));
}

#[test]
fn a_program_with_errors_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.jadpo");
    std::fs::write(&path, "test \"x\" { wait 1s\n expect nobody { state: failed } }\n").expect("write");
    let out = jadpoc_test(&[path.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("test.unknown_subscriber"));
}

/// A program whose one test emits `events` events to a connection of `rate`,
/// then waits `first` and expects the latest delivery `state_then`, then waits
/// `second` more and expects it succeeded.
fn rate_program(events: usize, rate: &str, first: &str, state_then: &str, second: &str) -> String {
    let mut text = format!(
        "event Paid {{ id: string }}\nconnection ledger {{ url: \"https://ledger.example.com\" rate: {rate} }}\n\
         action record(id: string) {{ via: ledger }}\n\
         subscriber book {{ on: Paid run: record(event.id) retry: {{ attempts: 3 within: 1h }} }}\n\
         test \"the rate holds\" {{\n    fake ledger: [ok]\n"
    );
    for i in 0..events {
        text.push_str(&format!("    emit Paid {{ id: \"p{i}\" }}\n"));
    }
    text.push_str(&format!(
        "    wait {first}\n    expect book {{ state: {state_then} }}\n    wait {second}\n    expect book {{ state: succeeded, attempts: 1 }}\n}}\n"
    ));
    text
}

#[test]
fn a_thousand_events_at_ten_a_second_take_a_hundred_virtual_seconds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rate.jadpo");
    // The first call goes at 0 and each next one 100 ms later: the thousandth at
    // 99.9 s, not a millisecond before.
    std::fs::write(&path, rate_program(1000, "10/s", "99s899ms", "pending", "1ms")).expect("write");
    let out = jadpoc_test(&[path.to_str().expect("utf-8")]);
    assert_eq!(stdout(&out), "ok   the rate holds\n1 passed, 0 failed\n", "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0));
    // And the runner would have said so had the rate let it go earlier.
    std::fs::write(&path, rate_program(1000, "10/s", "99s899ms", "succeeded", "1ms")).expect("write");
    let out = jadpoc_test(&[path.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("expected  state: succeeded\n    found     state: pending"), "{}", stdout(&out));
}
