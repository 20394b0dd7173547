//! `jadpoc plan`: the budget's table matches the formulas of the language reference.

use std::process::{Command, Output};

const PROGRAM: &str = r#"
event PaymentReceived { payment_id: string }
connection ledger { url: "http://127.0.0.1:8080/jadpo" }
action record_payment(payment_id: string) { via: ledger }
subscriber by_default {
    on: PaymentReceived
    run: record_payment(event.payment_id)
}
subscriber too_short {
    on: PaymentReceived
    run: record_payment(event.payment_id)
    retry: { attempts: 20  within: 1h }
}
"#;

fn plan(args: &[&str]) -> (tempfile::TempDir, Output) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("app.jadpo");
    std::fs::write(&file, PROGRAM).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_jadpoc"))
        .arg("plan")
        .arg(&file)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("jadpoc runs");
    (dir, out)
}

#[test]
fn the_default_budget_matches_the_formulas() {
    let (_dir, out) = plan(&["--format", "json", "--subscriber", "by_default"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let p = &doc[0];
    assert_eq!(p["subscriber"], "by_default");
    assert_eq!(p["attempts"], 10);
    assert_eq!(p["within_s"], 86_400);
    assert_eq!(p["default_attempts"], true);
    assert_eq!(p["default_within"], true);
    assert_eq!(p["fits"], 10);
    let rows = p["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 10);
    assert_eq!(
        rows[0],
        serde_json::json!({"attempt": 1, "ceiling_s": 0, "earliest_s": 0, "average_s": 0, "latest_s": 0})
    );
    assert_eq!(
        rows[9],
        serde_json::json!({"attempt": 10, "ceiling_s": 7680, "earliest_s": 9, "average_s": 7665, "latest_s": 15330})
    );
}

#[test]
fn a_window_too_short_says_how_many_fit() {
    let (_dir, out) = plan(&["--format", "json", "--subscriber", "too_short"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc[0]["fits"], 8);
    assert_eq!(doc[0]["default_attempts"], false);
    assert_eq!(doc[0]["rows"][19]["latest_s"], 3600);
    let (_dir, out) = plan(&["--subscriber", "too_short"]);
    insta::assert_snapshot!("too_short", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn the_default_budget_gives_up_after_attempt_ten() {
    let (_dir, out) = plan(&["--subscriber", "by_default"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("by_default: 10 attempts (default) within 1d (default)"), "{text}");
    assert!(
        text.ends_with("gives up after attempt 10, which starts at the latest 4h 15m 30s after the event\n"),
        "{text}"
    );
}

#[test]
fn an_unknown_subscriber_is_refused_with_a_suggestion() {
    let (_dir, out) = plan(&["--subscriber", "by_defualt"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean `by_default`?"));
}
