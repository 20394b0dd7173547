//! `jadpoc check` and `jadpoc explain` as a user runs them: rendered output, JSON,
//! SARIF and exit statuses.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn jadpoc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jadpoc"))
        .args(args)
        .current_dir(root())
        .env("NO_COLOR", "1")
        .output()
        .expect("jadpoc runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The human rendering (no colour) of a representative set of corpus cases.
#[test]
fn human_rendering() {
    for case in [
        "cascade_broken_declarations",
        "subscriber_retry_invalid",
        "subscriber_retry_unreachable",
        "subscriber_unknown_event",
        "run_type_mismatch",
        "run_unknown_field",
        "decl_unknown_key",
        "syntax_unexpected_eof",
        "syntax_invalid_escape",
        "multibyte_columns",
        "test_invalid_answer",
        "event_unused",
    ] {
        let path = format!("tests/check/{case}.jadpo");
        let out = jadpoc(&["check", &path]);
        insta::assert_snapshot!(case, stdout(&out));
    }
    let out = jadpoc(&["check", "tests/check/multi_duplicate"]);
    insta::assert_snapshot!("multi_duplicate", stdout(&out));
}

#[test]
fn json_output_has_the_documented_shape() {
    let out = jadpoc(&["check", "--format", "json", "tests/check/subscriber_retry_invalid.jadpo"]);
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["version"], 1);
    let d = &doc["diagnostics"][0];
    assert_eq!(d["code"], "subscriber.retry_invalid");
    assert_eq!(d["severity"], "error");
    assert_eq!(d["file"], "tests/check/subscriber_retry_invalid.jadpo");
    for key in ["message", "help", "start", "end", "labels"] {
        assert!(d.get(key).is_some(), "a diagnostic has `{key}`: {d}");
    }
    for key in ["line", "column", "offset"] {
        assert!(d["start"][key].is_u64() && d["end"][key].is_u64(), "positions have `{key}`");
    }
    let n = doc["diagnostics"].as_array().map_or(0, Vec::len) as u64;
    assert_eq!(doc["summary"]["errors"].as_u64(), Some(n));
    assert_eq!(doc["summary"]["warnings"], 0);
    assert_eq!(doc["summary"]["files"], 1);
}

#[test]
fn json_positions_count_characters_and_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("m.jadpo");
    // `é` is two bytes and one character: the column counts characters, the offset bytes.
    std::fs::write(&file, "// é\nevent E { a: strin }\n").expect("write");
    let out = jadpoc(&["check", "--format", "json", file.to_str().expect("utf-8 path")]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let all = doc["diagnostics"].as_array().expect("diagnostics");
    let d = all.iter().find(|d| d["code"] == "event.type_unknown").expect("event.type_unknown");
    assert_eq!(d["start"], serde_json::json!({"line": 2, "column": 14, "offset": 19}));
    assert_eq!(d["end"], serde_json::json!({"line": 2, "column": 19, "offset": 24}));
    assert_eq!(d["help"], "did you mean `string`?");
}

#[test]
fn sarif_output_has_one_rule_per_code_used() {
    let out = jadpoc(&["check", "--format", "sarif", "tests/check/several_codes.jadpo"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("sarif");
    assert_eq!(doc["version"], "2.1.0");
    let run = &doc["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().expect("rules");
    let results = run["results"].as_array().expect("results");
    let mut used: Vec<&str> = results.iter().filter_map(|r| r["ruleId"].as_str()).collect();
    used.sort_unstable();
    used.dedup();
    assert_eq!(rules.len(), used.len());
    assert!(!results.is_empty());
    for r in results {
        let index = r["ruleIndex"].as_u64().expect("ruleIndex") as usize;
        assert_eq!(rules[index]["id"], r["ruleId"]);
        assert!(r["locations"][0]["physicalLocation"]["region"]["startLine"].is_u64());
    }
}

#[test]
fn exit_statuses() {
    assert_eq!(jadpoc(&["check", "--deny-warnings", "examples"]).status.code(), Some(0));
    assert_eq!(jadpoc(&["check", "tests/check/event_unused.jadpo"]).status.code(), Some(0));
    assert_eq!(jadpoc(&["check", "--deny-warnings", "tests/check/event_unused.jadpo"]).status.code(), Some(1));
    assert_eq!(jadpoc(&["check", "tests/check/several_codes.jadpo"]).status.code(), Some(1));
    let missing = jadpoc(&["check", "no/such/file.jadpo"]);
    assert_eq!(missing.status.code(), Some(2));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no/such/file.jadpo"), "{err}");
    assert_eq!(jadpoc(&["check", "--format", "yaml", "examples"]).status.code(), Some(2));
}

#[test]
fn a_file_that_is_not_utf8_gets_a_clear_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("bad.jadpo");
    std::fs::write(&file, b"event E {\n  a: \xff\xfe }\n").expect("write");
    let out = jadpoc(&["check", file.to_str().expect("utf-8 path")]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not UTF-8 text: invalid byte at line 2, column 6"), "{err}");
}

#[test]
fn directories_are_searched_recursively_and_form_one_program() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("a/b")).expect("mkdir");
    std::fs::write(dir.path().join("a/events.jadpo"), "event E { id: string }\n").expect("write");
    std::fs::write(
        dir.path().join("a/b/rest.jadpo"),
        "connection c { url: \"http://x\" }\naction f(id: string) { via: c }\nsubscriber s { on: E run: f(event.id) }\n",
    )
    .expect("write");
    std::fs::write(dir.path().join("a/notes.txt"), "not a program").expect("write");
    let out = jadpoc(&["check", dir.path().to_str().expect("utf-8 path")]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).ends_with("0 errors, 0 warnings in 2 files\n"), "{}", stdout(&out));
}

#[test]
fn explain_prints_a_codes_documentation() {
    let out = jadpoc(&["explain", "subscriber.retry_invalid"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.starts_with("# subscriber.retry_invalid (error)"), "{text}");
    assert!(text.contains("### Example") && text.contains("### Fix"), "{text}");
    let out = jadpoc(&["explain", "subscriber.retry_invalud"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean `subscriber.retry_invalid`?"));
}
