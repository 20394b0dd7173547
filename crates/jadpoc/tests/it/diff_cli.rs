//! `jadpoc diff` as a user runs it: exit statuses, the JSON and SARIF documents,
//! `--against git:REF` in a repository, and programs that do not check.

use std::path::Path;
use std::process::Command;

const OLD: &str = "event PaymentReceived {\n    payment_id: string\n    amount_cents: int\n}\n\nconnection ledger {\n    url: \"https://ledger.internal/jadpo\"\n}\n\naction record_payment(payment_id: string, amount_cents: int) {\n    via: ledger\n}\n\nsubscriber record_payment_hook {\n    on: PaymentReceived\n    run: record_payment(event.payment_id, event.amount_cents)\n}\n\nsubscriber audit {\n    on: PaymentReceived\n    run: record_payment(event.payment_id, 0)\n}\n";

/// `OLD` with `audit` removed (breaking) and the other subscriber renamed.
fn new_breaking() -> String {
    OLD.replace("subscriber audit {\n    on: PaymentReceived\n    run: record_payment(event.payment_id, 0)\n}\n", "")
        .replace(
            "subscriber record_payment_hook {\n",
            "subscriber record_payment_webhook {\n    was: record_payment_hook\n",
        )
        .trim_end()
        .to_string()
        + "\n"
}

/// `OLD` with a renamed subscriber alone: a warning.
fn new_warning() -> String {
    OLD.replace(
        "subscriber record_payment_hook {\n",
        "subscriber record_payment_webhook {\n    was: record_payment_hook\n",
    )
}

use crate::common::{jadpoc_in as jadpoc, project, text};

#[test]
fn diff_exit_statuses_follow_the_most_serious_finding() {
    let new_b = new_breaking();
    let new_w = new_warning();
    let dir =
        project(&[("old.jadpo", OLD), ("same.jadpo", OLD), ("breaking.jadpo", &new_b), ("warning.jadpo", &new_w)]);
    let same = jadpoc(dir.path(), &["diff", "old.jadpo", "same.jadpo"]);
    assert_eq!(same.status.code(), Some(0), "{}", text(&same.stderr));
    assert_eq!(text(&same.stdout), "0 breaking, 0 warnings\n");
    let warning = jadpoc(dir.path(), &["diff", "old.jadpo", "warning.jadpo"]);
    assert_eq!(warning.status.code(), Some(0), "{}", text(&warning.stderr));
    let out = text(&warning.stdout);
    assert!(out.contains("subscriber.renamed"), "{out}");
    assert!(out.contains("warning.jadpo:14:12"), "{out}");
    assert!(out.ends_with("0 breaking, 1 warning\n"), "{out}");
    let breaking = jadpoc(dir.path(), &["diff", "old.jadpo", "breaking.jadpo"]);
    assert_eq!(breaking.status.code(), Some(1), "{}", text(&breaking.stderr));
    let out = text(&breaking.stdout);
    assert!(out.contains("subscriber.removed"), "{out}");
    assert!(out.contains("the subscriber `audit` is removed"), "{out}");
    assert!(out.ends_with("1 breaking, 1 warning\n"), "{out}");
    let one = jadpoc(dir.path(), &["diff", "old.jadpo"]);
    assert_eq!(one.status.code(), Some(2));
    assert!(text(&one.stderr).contains("takes OLD and NEW"), "{}", text(&one.stderr));
}

#[test]
fn diff_json_lists_findings_with_typed_subjects() {
    let new_b = new_breaking();
    let dir = project(&[("old/a.jadpo", OLD), ("new/a.jadpo", &new_b)]);
    let out = jadpoc(dir.path(), &["diff", "old", "new", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["breaking"], 1);
    assert_eq!(doc["warnings"], 1);
    let findings = doc["findings"].as_array().expect("a list");
    let codes: Vec<&str> = findings.iter().filter_map(|f| f["code"].as_str()).collect();
    assert_eq!(codes, ["subscriber.removed", "subscriber.renamed"]);
    let removed = &findings[0];
    assert_eq!(removed["severity"], "breaking");
    assert_eq!(removed["category"], "subscriber");
    assert_eq!(removed["subject"], serde_json::json!({"kind": "subscriber", "name": "audit"}));
    assert_eq!(removed["new_at"], serde_json::Value::Null);
    assert_eq!(removed["old_at"]["path"], "old/a.jadpo");
    assert_eq!((removed["old_at"]["line"].as_u64(), removed["old_at"]["column"].as_u64()), (Some(19), Some(12)));
    let renamed = &findings[1];
    assert_eq!(renamed["subject"]["name"], "record_payment_hook");
    assert_eq!(renamed["new_at"]["path"], "new/a.jadpo");
    assert_eq!(renamed["new_at"]["line"], 14);
}

#[test]
fn diff_sarif_has_a_rule_per_code_used() {
    let new_b = new_breaking();
    let dir = project(&[("old.jadpo", OLD), ("new.jadpo", &new_b)]);
    let out = jadpoc(dir.path(), &["diff", "old.jadpo", "new.jadpo", "--format", "sarif"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["version"], "2.1.0");
    let run = &doc["runs"][0];
    let rules: Vec<&str> =
        run["tool"]["driver"]["rules"].as_array().expect("rules").iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(rules, ["subscriber.removed", "subscriber.renamed"]);
    let results = run["results"].as_array().expect("results");
    assert_eq!(results[0]["ruleId"], "subscriber.removed");
    assert_eq!(results[0]["level"], "error");
    assert_eq!(results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], "old.jadpo");
    assert_eq!(results[0]["locations"][0]["physicalLocation"]["region"]["startLine"], 19);
    assert_eq!(results[1]["level"], "warning");
    assert_eq!(results[1]["relatedLocations"][0]["physicalLocation"]["artifactLocation"]["uri"], "old.jadpo");
}

#[test]
fn diff_refuses_a_program_with_errors() {
    let broken = OLD.replace("run: record_payment(event.payment_id, 0)", "run: record_payment(event.paymentid, 0)");
    let dir = project(&[("old.jadpo", OLD), ("new.jadpo", &broken)]);
    let out = jadpoc(dir.path(), &["diff", "old.jadpo", "new.jadpo"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("run.unknown_field"), "{err}");
    assert!(err.contains("new.jadpo:21:31"), "{err}");
    assert!(text(&out.stdout).is_empty());
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=jadpo", "-c", "user.email=jadpo@example.invalid", "-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
}

#[test]
fn diff_against_a_git_revision() {
    let dir = project(&[("examples/pay.jadpo", OLD), ("examples/.hidden/x.jadpo", "not jadpo {")]);
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "one"]);
    std::fs::write(dir.path().join("examples/pay.jadpo"), new_breaking()).expect("write");
    git(dir.path(), &["commit", "-q", "-am", "two"]);
    let out = jadpoc(dir.path(), &["diff", "--against", "git:HEAD~1", "examples", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["findings"][0]["code"], "subscriber.removed");
    assert_eq!(doc["findings"][0]["old_at"]["path"], "HEAD~1:examples/pay.jadpo");
    assert_eq!(doc["findings"][1]["new_at"]["path"], "examples/pay.jadpo");
    let same = jadpoc(dir.path(), &["diff", "--against", "git:HEAD", "examples"]);
    assert_eq!(same.status.code(), Some(0), "{}", text(&same.stderr));
    let bad = jadpoc(dir.path(), &["diff", "--against", "git:no-such-ref", "examples"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("no-such-ref"), "{}", text(&bad.stderr));
    let wrong = jadpoc(dir.path(), &["diff", "--against", "HEAD", "examples"]);
    assert_eq!(wrong.status.code(), Some(2));
    assert!(text(&wrong.stderr).contains("`--against` takes `git:REF`"), "{}", text(&wrong.stderr));
}

#[test]
fn explain_knows_the_diff_codes() {
    let dir = project(&[]);
    let out = jadpoc(dir.path(), &["explain", "connection.signing_rotated"]);
    assert_eq!(out.status.code(), Some(0));
    let doc = text(&out.stdout);
    assert!(doc.starts_with("# connection.signing_rotated (breaking, `jadpoc diff`)"), "{doc}");
    assert!(doc.contains("### What to do"), "{doc}");
    let list = text(&jadpoc(dir.path(), &["explain"]).stdout);
    assert!(list.contains("Findings of `jadpoc diff`"), "{list}");
    assert!(list.contains("subscriber.order_by_changed"), "{list}");
}

/// `--db`: what a store holds for each finding, read only, with the store's last
/// program as OLD when one path is given; on PostgreSQL and SQLite alike.
fn diff_counts_what_the_store_holds(db: &str) {
    let tightened = OLD.replace(
        "    run: record_payment(event.payment_id, event.amount_cents)\n}",
        "    run: record_payment(event.payment_id, event.amount_cents)\n    retry: { attempts: 1  within: 1h }\n}",
    );
    let dir = project(&[("old.jadpo", OLD), ("new.jadpo", &new_breaking()), ("tight.jadpo", &tightened)]);
    for id in ["p1", "p2"] {
        let payload = format!(r#"{{"payment_id": "{id}", "amount_cents": 5}}"#);
        let out = jadpoc(dir.path(), &["emit", "old.jadpo", "PaymentReceived", &payload, "--db", db]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let out = jadpoc(dir.path(), &["diff", "new.jadpo", "--db", db]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("in the store: 2 deliveries of `audit` not ended (2 pending); the oldest is"), "{stdout}");
    // JSON: the line is each finding's `extra`.
    let out = jadpoc(dir.path(), &["diff", "old.jadpo", "tight.jadpo", "--db", db, "--format", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let tightened = report["findings"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["code"] == "subscriber.budget_tightened"))
        .cloned()
        .expect("the budget's finding");
    let extra = tightened["extra"].as_str().unwrap_or_default();
    assert!(extra.contains("2 deliveries of `record_payment_hook` not ended (2 pending)"), "{extra}");
    assert!(!extra.contains("past"), "none has used an attempt yet: {extra}");
}

#[test]
fn diff_db_counts_what_a_sqlite_store_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    diff_counts_what_the_store_holds(dir.path().join("outbox.db").to_str().expect("utf-8"));
}

#[test]
fn diff_db_counts_what_a_postgres_store_holds() {
    let Some(db) = jadpo_test_support::PgDatabase::new("jadpoc_diff") else { return };
    diff_counts_what_the_store_holds(&db.url);
}

#[test]
fn diff_db_names_a_foreign_file_and_leaves_it_as_it_was() {
    let dir = project(&[("old.jadpo", OLD), ("new.jadpo", &new_breaking()), ("notes.db", "not a store")]);
    let out = jadpoc(dir.path(), &["diff", "new.jadpo", "--db", "notes.db"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("is not a jadpo store"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("notes.db")).expect("read"), "not a store");
    // A store with no version kept: OLD and NEW must be given.
    let empty = project(&[("new.jadpo", &new_breaking())]);
    let db = empty.path().join("outbox.db");
    let out = jadpoc(empty.path(), &["status", "--db", db.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2), "no store yet: {}", text(&out.stdout));
}
