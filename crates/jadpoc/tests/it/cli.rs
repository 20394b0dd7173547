//! The command line as a user meets it: arguments named alike in every subcommand,
//! payloads, `--ndjson` input, `explain`, `test --filter`, SARIF's size, and the
//! listing filters of `deliveries`.

use crate::common::{self, Env};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Two events, two subscribers on the first one and one on the second, and a test.
fn program(dir: &Path) -> PathBuf {
    let path = dir.join("shop.jadpo");
    std::fs::write(
        &path,
        r#"event Paid {
    id: string
    cents: int
}

event Refunded { id: string }

connection c { url: "http://127.0.0.1:9/x" }

action record(id: string) { via: c }

subscriber book { on: Paid  run: record(event.id) }
subscriber mail { on: Paid  run: record(event.id) }
subscriber undo { on: Refunded  run: record(event.id) }

test "paid is booked" {
    fake c: [ok]
    emit Paid { id: "p1", cents: 5 }
    wait 0s
    expect book { state: succeeded }
}
"#,
    )
    .expect("write program");
    path
}

fn env() -> Env {
    Env::new("outbox.db", program)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn count(e: &Env) -> usize {
    if !e.db.exists() {
        return 0;
    }
    e.deliveries().len()
}

#[test]
fn a_payload_that_is_not_an_object_is_refused_as_a_payload() {
    let e = env();
    for payload in ["5", "null", "true", "false", "[1]", "\"text\""] {
        let out = e.jadpoc(&["emit", e.prog(), "Paid", payload, "--db", e.db()]);
        assert_eq!(out.status.code(), Some(1), "`{payload}`: {}", stderr(&out));
        assert!(stderr(&out).contains("the payload must be a JSON object"), "`{payload}`: {}", stderr(&out));
        assert_eq!(count(&e), 0, "`{payload}` stored nothing");
    }
    // The program's files may be left out (`.`), and an object is stored.
    let out = e.jadpoc(&["emit", "Refunded", r#"{"id": "r1"}"#, "--db", e.db()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(count(&e), 1);
}

#[test]
fn ndjson_refuses_a_line_that_is_not_utf8_and_stores_the_rest() {
    let e = env();
    let nd = e.dir.join("in.ndjson");
    let mut bytes = Vec::new();
    bytes.extend_from_slice(b"{\"id\": \"a\", \"cents\": 1}\n");
    bytes.extend_from_slice(b"{\"id\": \"\xff\xfe\", \"cents\": 2}\n");
    bytes.extend_from_slice(b"{\"id\": \"c\", \"cents\": 3}\n");
    bytes.extend_from_slice(b"{\"id\": \"d\"}\n");
    bytes.extend_from_slice(b"{\"id\": \"e\", \"cents\": 5}\r\n");
    std::fs::write(&nd, bytes).expect("write ndjson");
    let out = e.jadpoc(&["emit", e.prog(), "Paid", "--ndjson", nd.to_str().expect("path"), "--db", e.db()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("line 2: refused: the line is not UTF-8 text (invalid byte at column 9)"), "{err}");
    assert!(err.contains("line 4: refused: field `cents` of `Paid` is required"), "{err}");
    assert!(err.contains("emitted 3 `Paid` events, refused 2 lines"), "{err}");
    // Two subscribers on `Paid`: two deliveries for each of the three events stored.
    let ids: Vec<String> = e.deliveries().iter().map(|d| d["event_id"].to_string()).collect();
    assert_eq!(ids.len(), 6, "{ids:?}");
}

#[test]
fn ndjson_takes_no_payload_argument() {
    let e = env();
    let out = e.jadpoc(&["emit", e.prog(), "Paid", "{}", "--ndjson", "-", "--db", e.db()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`--ndjson` reads the payloads"), "{}", stderr(&out));
}

#[test]
fn every_subcommand_names_the_program_paths_alike() {
    for sub in ["check", "run", "test", "plan", "emit"] {
        let out = std::process::Command::new(common::JADPOC).args([sub, "--help"]).output().expect("help");
        let help = stdout(&out);
        let usage = help.lines().find(|l| l.starts_with("Usage:")).unwrap_or_default();
        assert!(usage.contains("[PATHS]..."), "`{sub}`: {usage}");
    }
}

#[test]
fn format_takes_text_and_human_everywhere() {
    let e = env();
    e.jadpoc(&["emit", e.prog(), "Paid", r#"{"id": "a", "cents": 1}"#, "--db", e.db()]);
    for format in ["text", "human"] {
        for args in [
            vec!["check", e.prog()],
            vec!["plan", e.prog()],
            vec!["status", "--db", e.db()],
            vec!["breakers", "--db", e.db()],
            vec!["deliveries", "--db", e.db()],
            vec!["deliveries", "show", "1", "--db", e.db()],
        ] {
            let mut all = args.clone();
            all.extend(["--format", format]);
            let out = e.jadpoc(&all);
            assert_eq!(out.status.code(), Some(0), "{all:?}: {}", stderr(&out));
            assert!(!stdout(&out).trim_start().starts_with(['{', '[']), "{all:?} prints text: {}", stdout(&out));
        }
    }
    let out = e.jadpoc(&["check", e.prog(), "--format", "yaml"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn plan_reads_the_current_folder_like_check_run_and_test() {
    let e = env();
    for sub in ["plan", "check", "test"] {
        let out = e.jadpoc(&[sub]);
        assert_eq!(out.status.code(), Some(0), "`{sub}` alone: {}", stderr(&out));
    }
    let out = e.jadpoc(&["plan"]);
    assert!(stdout(&out).starts_with("book: 10 attempts (default)"), "{}", stdout(&out));
}

#[test]
fn a_test_filter_that_matches_nothing_fails() {
    let e = env();
    let out = e.jadpoc(&["test", "--filter", "payd"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("no test matches `payd`"), "{}", stderr(&out));
    let out = e.jadpoc(&["test", "--filter", "paid"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).ends_with("1 passed, 0 failed\n"), "{}", stdout(&out));
}

#[test]
fn explain_lists_every_code_and_finds_a_code_by_its_last_part() {
    let out = std::process::Command::new(common::JADPOC).arg("explain").output().expect("explain");
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    for code in jadpo_check::Code::ALL {
        let line = text.lines().find(|l| l.split_whitespace().next() == Some(code.as_str()));
        let line = line.unwrap_or_else(|| panic!("`{code}` is listed: {text}"));
        assert!(line.ends_with(code.summary()), "{line}");
    }
    for code in jadpo_core::codes::RuntimeCode::ALL {
        let line = text.lines().find(|l| l.split_whitespace().next() == Some(code.as_str()));
        let line = line.unwrap_or_else(|| panic!("`{}` is listed: {text}", code.as_str()));
        assert!(line.ends_with(code.summary()), "{line}");
    }
    let out = std::process::Command::new(common::JADPOC).args(["explain", "retry_invalid"]).output().expect("explain");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`subscriber.retry_invalid`"), "{}", stderr(&out));
}

#[test]
fn explain_answers_for_the_runtimes_codes() {
    let explain =
        |code: &str| std::process::Command::new(common::JADPOC).args(["explain", code]).output().expect("explain");
    let out = explain("transport.refused");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("# transport.refused (unavailable)\n"), "{}", stdout(&out));
    // A member of a family is explained by the family's entry.
    let out = explain("http.503");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("# http.NNN "), "{}", stdout(&out));
    let out = explain("ingest.missing_field");
    assert!(stdout(&out).starts_with("# ingest.missing_field (HTTP 422)"), "{}", stdout(&out));
    let out = explain("refused");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("did you mean `transport.refused`?"), "{}", stderr(&out));
}

#[test]
fn sarif_lists_only_the_rules_its_results_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("two.jadpo");
    std::fs::write(&file, "event E { a: strin }\nevent E { b: int }\n").expect("write");
    let out = std::process::Command::new(common::JADPOC)
        .args(["check", "--format", "sarif", file.to_str().expect("path")])
        .output()
        .expect("check");
    assert!(out.stdout.len() < 8 * 1024, "{} bytes", out.stdout.len());
    let doc: Value = serde_json::from_slice(&out.stdout).expect("sarif");
    let run = &doc["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().expect("rules");
    let mut ids: Vec<&str> = rules.iter().filter_map(|r| r["id"].as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["event.type_unknown", "event.unused", "name.duplicate"]);
    for r in rules {
        assert!(r["shortDescription"]["text"].as_str().is_some_and(|t| !t.is_empty()), "{r}");
        let help = r["help"]["text"].as_str().unwrap_or_default();
        assert!(help.contains("jadpoc explain") && !help.contains("### Example"), "{help}");
    }
    for result in run["results"].as_array().expect("results") {
        let index = result["ruleIndex"].as_u64().expect("ruleIndex") as usize;
        assert_eq!(rules[index]["id"], result["ruleId"]);
    }
}

#[test]
fn deliveries_filter_by_state_and_subscriber() {
    let e = env();
    e.jadpoc(&["emit", e.prog(), "Paid", r#"{"id": "a", "cents": 1}"#, "--db", e.db()]);
    e.jadpoc(&["emit", e.prog(), "Refunded", r#"{"id": "a"}"#, "--db", e.db()]);
    // The connection answers `rejected`: all three deliveries fail at once.
    let (_, _) = e.run_until_with(&["--fake", "c=rejected"], &[], |list| {
        list.iter().filter(|d| common::state(d) == "failed").count() == 3
    });
    let subscribers = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["deliveries"];
        all.extend_from_slice(args);
        let list = e.json(&all);
        let mut names: Vec<String> =
            list.as_array().expect("list").iter().map(|d| d["subscriber"].as_str().unwrap_or("").to_string()).collect();
        names.sort();
        names
    };
    assert_eq!(subscribers(&["--subscriber", "mail"]), ["mail"]);
    assert_eq!(subscribers(&["--state", "failed"]), ["book", "mail", "undo"]);
    assert_eq!(subscribers(&["--state", "failed", "--subscriber", "undo"]), ["undo"]);
    assert!(subscribers(&["--state", "pending"]).is_empty());
    assert!(subscribers(&["--subscriber", "nobody"]).is_empty());
    let out = e.jadpoc(&["deliveries", "--state", "lost", "--db", e.db()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`--state lost` is not a state"), "{}", stderr(&out));
    let out = e.jadpoc(&["deliveries", "--state", "failed", "--subscriber", "mail", "--db", e.db()]);
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("failed") && text.contains("mail"), "{text}");
}

#[test]
fn deliveries_show_says_why_a_delivery_ended_and_each_attempts_reason() {
    // One attempt, on a port where nothing listens: the attempt fails
    // `transport.refused` with the system's error as its reason, and the delivery
    // ends with its attempts used.
    let e = Env::new("outbox.db", |dir| {
        let path = dir.join("one.jadpo");
        std::fs::write(
            &path,
            "event Paid { id: string }\n\
             connection c { url: \"http://127.0.0.1:9/x\" }\n\
             action record(id: string) { via: c }\n\
             subscriber book { on: Paid  run: record(event.id)  retry: { attempts: 1 } }\n",
        )
        .expect("write program");
        path
    });
    e.jadpoc(&["emit", e.prog(), "Paid", r#"{"id": "a"}"#, "--db", e.db()]);
    let (list, _) = e.run_until_with(&[], &[], |list| list.iter().all(|d| common::state(d) == "failed"));
    let id = list[0]["id"].as_i64().expect("id");
    let shown = e.show(id);
    assert_eq!(shown["end_reason"], "attempts_used", "{shown:#}");
    let attempt = &shown["history"][0];
    assert_eq!(attempt["code"], "transport.refused", "{shown:#}");
    let reason = attempt["reason"].as_str().unwrap_or_default();
    assert!(!reason.is_empty(), "{shown:#}");
    assert_eq!(shown["last_failure"]["reason"], reason, "{shown:#}");
    let out = e.jadpoc(&["deliveries", "show", &id.to_string(), "--db", e.db()]);
    let text = stdout(&out);
    assert!(text.contains("ended       attempts_used"), "{text}");
    assert!(text.contains(&format!("unavailable (transport.refused): {reason}\n")), "{text}");
}

#[test]
fn the_store_is_taken_from_jadpo_database_url_when_db_is_not_given() {
    let e = env();
    let from_env = e.dir.join("from-env/outbox.db");
    let from_env = from_env.to_str().expect("utf-8 path");
    let out = e.cmd(&["emit", e.prog(), "Refunded", r#"{"id": "r1"}"#]).env("JADPO_DATABASE_URL", from_env).output();
    let out = out.expect("emit");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(Path::new(from_env).exists(), "the store is where the variable says");
    assert!(!e.dir.join(".jadpo").exists(), "and not at the default path");
    let out = e.cmd(&["deliveries", "--format", "json"]).env("JADPO_DATABASE_URL", from_env).output().expect("list");
    let list: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(list.as_array().map(Vec::len), Some(1));
    // `--db` wins over the variable.
    let out = e.cmd(&["status", "--db", e.db()]).env("JADPO_DATABASE_URL", from_env).output().expect("status");
    assert_eq!(out.status.code(), Some(2), "no store at --db yet");
    assert!(stderr(&out).contains(e.db()), "{}", stderr(&out));
}
