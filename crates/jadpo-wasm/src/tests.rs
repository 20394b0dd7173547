//! The playground's answers, natively: the same codes and places as `jadpoc
//! check`, the formatter's text, the plan's rows, hover's subscriber and each
//! test's attempts.

use super::*;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// payments.jadpo with its tests, one buffer (as the playground's example is).
fn payments() -> String {
    read("examples/payments.jadpo") + "\n" + &read("examples/payments_test.jadpo")
}

fn offset_of(text: &str, needle: &str) -> u32 {
    text.find(needle).unwrap_or_else(|| panic!("`{needle}` is in the text")) as u32
}

#[test]
fn check_gives_the_corpus_codes_at_the_corpus_places() {
    // Every single-file case of tests/check: the playground's buffer is one file.
    let mut cases = 0;
    let mut entries: Vec<PathBuf> = std::fs::read_dir(repo().join("tests/check"))
        .expect("tests/check exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jadpo"))
        .collect();
    entries.sort();
    for path in entries {
        let text = std::fs::read_to_string(&path).expect("a corpus file reads");
        let expected = std::fs::read_to_string(path.with_extension("expected")).expect("its .expected reads");
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let expected: Vec<String> =
            expected.lines().filter(|l| !l.trim().is_empty()).map(|l| l.replacen(&name, FILE_NAME, 1)).collect();
        let report = check(&text);
        let actual: Vec<String> = report
            .diagnostics
            .iter()
            .map(|d| format!("{}:{}:{} {}", d.file, d.start.line, d.start.column, d.code))
            .collect();
        assert_eq!(actual, expected, "{name}");
        cases += 1;
    }
    assert!(cases > 50, "the corpus has {cases} single-file cases");
}

#[test]
fn check_reports_a_mistake_with_its_code_help_and_byte_span() {
    let text = read("tests/check/run_unknown_field.jadpo");
    let report = check(&text);
    assert_eq!(report.summary.errors, 2);
    let d = &report.diagnostics[0];
    assert_eq!(d.code, "run.unknown_field");
    assert_eq!(d.severity, "error");
    assert_eq!(d.help.as_deref(), Some("did you mean `payment_id`?"));
    assert_eq!((d.start.line, d.start.column), (16, 31));
    let start = offset_of(&text, "paymentid");
    assert_eq!((d.start.offset, d.end.offset), (start, start + "paymentid".len() as u32));
    // The same JSON document as `jadpoc check --format json`.
    let json: serde_json::Value = serde_json::from_str(&wasm::check(&text)).expect("JSON");
    assert_eq!(json["version"], 1);
    assert_eq!(json["diagnostics"][0]["start"]["offset"], start);
    assert_eq!(json["summary"]["files"], 1);
}

#[test]
fn a_clean_program_has_no_diagnostics() {
    let report = check(&payments());
    assert_eq!(report.diagnostics.len(), 0, "{:?}", report.diagnostics);
}

#[test]
fn format_gives_the_canonical_layout_or_says_why_not() {
    let messy = "event E {\nid: string\n}\n\n\n\nconnection c { url: \"https://x.example\" }\n";
    let out = format(messy);
    assert!(out.ok);
    assert!(out.changed);
    assert_eq!(
        out.text.as_deref(),
        Some("event E {\n    id: string\n}\n\nconnection c {\n    url: \"https://x.example\"\n}\n")
    );
    let again = format(out.text.as_deref().unwrap_or_default());
    assert!(again.ok && !again.changed, "formatting is idempotent");
    let broken = format("event E {\n    id: string\n");
    assert!(!broken.ok);
    assert_eq!(broken.text, None);
    assert_eq!(broken.message.as_deref(), Some("1 syntax error: the text was not formatted"));
}

#[test]
fn plan_gives_jadpoc_plans_rows_and_text() {
    let plans = plan(&payments(), Some("record_payment_webhook"));
    assert!(plans.ok, "{:?}", plans.message);
    let [p] = &plans.plans[..] else { panic!("one plan: {plans:?}") };
    assert_eq!((p.plan.attempts, p.plan.within_s, p.plan.fits), (20, 3 * 86_400, 20));
    assert_eq!(p.plan.rows.len(), 20);
    assert_eq!((p.plan.rows[1].ceiling_s, p.plan.rows[1].average_s, p.plan.rows[1].latest_s), (30, 15, 30));
    assert!(p.text.starts_with("record_payment_webhook: 20 attempts within 3d\n"), "{}", p.text);
    assert!(p.text.contains("gives up after attempt 20"), "{}", p.text);
    let all = plan(&payments(), None);
    assert_eq!(all.plans.len(), 2);
    let unknown = plan(&payments(), Some("record_payment_webhok"));
    assert!(!unknown.ok);
    assert_eq!(
        unknown.message.as_deref(),
        Some("no subscriber is named `record_payment_webhok`; did you mean `record_payment_webhook`?")
    );
}

#[test]
fn plan_of_a_program_with_errors_says_so() {
    let plans = plan(&read("tests/check/run_unknown_field.jadpo"), None);
    assert!(!plans.ok);
    assert_eq!(plans.message.as_deref(), Some("the program has 2 errors: fix them first"));
}

#[test]
fn hover_gives_the_plan_of_the_subscriber_under_the_cursor() {
    let text = payments();
    // On its name.
    let at = offset_of(&text, "record_payment_webhook {") + 3;
    let h = hover(&text, at).expect("a hover on the subscriber's name");
    assert_eq!(h.subscriber, "record_payment_webhook");
    let name = offset_of(&text, "record_payment_webhook {");
    assert_eq!((h.start, h.end), (name, name + "record_payment_webhook".len() as u32));
    assert_eq!(h.plan.plan.attempts, 20);
    // On its `retry:` key.
    let retry = offset_of(&text, "retry: { attempts: 20");
    let h = hover(&text, retry + 1).expect("a hover on retry:");
    assert_eq!(h.subscriber, "record_payment_webhook");
    // On a test's reference to it.
    let expect = offset_of(&text, "expect record_payment_webhook") + "expect ".len() as u32;
    let h = hover(&text, expect + 2).expect("a hover on a test's expect");
    assert_eq!((h.subscriber.as_str(), h.start), ("record_payment_webhook", expect));
    // On an event's declaration: nothing.
    assert!(hover(&text, offset_of(&text, "event PaymentReceived") + 8).is_none());
    assert!(h.checked);
    // While the program has an error elsewhere: the budget its `retry:` writes.
    let broken = text.replacen("event.payment_id", "event.paymentid", 1);
    let h = hover(&broken, at).expect("a hover while the program has errors");
    assert!(!h.checked);
    assert_eq!(
        (h.subscriber.as_str(), h.plan.plan.attempts, h.plan.plan.rows.len()),
        ("record_payment_webhook", 20, 20)
    );
    assert_eq!(h.plan.text, plan(&text, Some("record_payment_webhook")).plans[0].text);
    // A `retry:` that is not valid has no plan.
    let invalid = broken.replacen("attempts: 20", "attempts: 0", 1);
    assert!(hover(&invalid, at).is_none());
    assert_eq!(wasm::hover(&invalid, at), "null");
}

#[test]
fn run_tests_gives_each_test_and_each_attempt() {
    let report = run_tests(&payments(), 0);
    assert!(report.ok, "{:?}", report.message);
    assert_eq!((report.passed, report.failed), (3, 0));
    assert_eq!(report.summary, "3 passed, 0 failed");
    let t = &report.tests[0];
    assert_eq!(t.name, "ledger down for five attempts, then back");
    assert!(t.passed);
    assert_eq!(t.end_ms, 3 * 86_400_000);
    assert_eq!(t.end, "+3d");
    let [d] = &t.deliveries[..] else { panic!("one delivery: {:?}", t.deliveries) };
    assert_eq!(
        (d.subscriber.as_str(), d.connection.as_str(), d.state.as_str()),
        ("record_payment_webhook", "ledger", "succeeded")
    );
    assert_eq!(d.attempts.len(), 6);
    assert_eq!(d.attempts_used, 6);
    for (i, a) in d.attempts.iter().enumerate() {
        assert_eq!(a.attempt as usize, i + 1);
        let want = if i < 5 { ("failed", Some("unavailable")) } else { ("succeeded", None) };
        assert_eq!((a.outcome.as_str(), a.kind.as_deref()), want, "attempt {}", i + 1);
    }
    assert_eq!(d.attempts[0].started_at_ms, 0);
    assert_eq!(d.attempts[0].at, "+0s");
    assert!(d.attempts.windows(2).all(|w| w[0].started_at_ms < w[1].started_at_ms));
    // The rejected payment: one attempt, then the operator's retry's.
    let t = &report.tests[1];
    assert_eq!(t.deliveries[0].attempts.len(), 2);
    assert_eq!(t.deliveries[0].attempts[0].kind.as_deref(), Some("rejected"));
}

#[test]
fn a_failing_expectation_names_its_step_and_keeps_the_timeline() {
    let text = payments().replacen("state: succeeded, attempts: 6", "state: succeeded, attempts: 5", 1);
    let report = run_tests(&text, 0);
    assert_eq!((report.passed, report.failed), (2, 1));
    let t = &report.tests[0];
    assert!(!t.passed);
    let f = t.failure.as_ref().expect("a failure");
    assert_eq!((f.step, f.step_text.as_str()), (4, "expect record_payment_webhook"));
    assert!(f.text.contains("expected  state: succeeded, attempts: 5"), "{}", f.text);
    assert!(f.text.contains("found     state: succeeded, attempts: 6"), "{}", f.text);
    assert_eq!(t.deliveries[0].attempts.len(), 6);
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let a = run_tests(&payments(), 7);
    let b = run_tests(&payments(), 7);
    assert_eq!(a.tests, b.tests);
}

#[test]
fn run_tests_of_a_program_with_errors_or_no_tests_says_so() {
    let report = run_tests(&read("tests/check/run_unknown_field.jadpo"), 0);
    assert!(!report.ok);
    assert_eq!(report.message.as_deref(), Some("the program has 2 errors: fix them first"));
    let report = run_tests(&read("examples/payments.jadpo"), 0);
    assert!(report.ok);
    assert_eq!(report.message.as_deref(), Some("the program has no `test` blocks"));
    assert_eq!(report.summary, "0 passed, 0 failed");
}

#[test]
fn any_text_gets_an_answer() {
    // Cut the example at every 7th byte boundary: no answer panics.
    let text = payments();
    for end in (0..text.len()).step_by(7).filter(|&i| text.is_char_boundary(i)) {
        let t = &text[..end];
        let _ = check(t);
        let _ = format(t);
        let _ = hover(t, end as u32 / 2);
    }
}
