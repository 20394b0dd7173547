//! An operator's commands through the binary, on both stores: pausing and
//! resuming a connection while `jadpoc run` runs, and pruning final deliveries.

use crate::common;

use common::{Env, PgDb, state};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn program(dir: &Path) -> PathBuf {
    let path = dir.join("p.jadpo");
    let text = r#"event Paid {
    id: string
}

connection c {
    url: "http://127.0.0.1:9/x"
}

connection spare {
    url: "http://127.0.0.1:9/y"
}

action record(id: string) {
    via: c
}

action copy(id: string) {
    via: spare
}

subscriber rec {
    on: Paid
    run: record(event.id)
}
"#;
    std::fs::write(&path, text).expect("write program");
    path
}

/// Runs `f` on a SQLite store, then on a PostgreSQL one when a server answers.
fn on_both_stores(f: impl Fn(&Env)) {
    f(&Env::new("outbox.db", program));
    if let Some(pg) = PgDb::new() {
        let mut e = Env::new("unused.db", program);
        e.db = PathBuf::from(&pg.url);
        f(&e);
    }
}

fn ok(out: &std::process::Output) -> String {
    assert!(out.status.success(), "exited {}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn emit(e: &Env, n: usize) {
    for i in 0..n {
        ok(&e.jadpoc(&["emit", e.prog(), "Paid", &format!(r#"{{"id": "p{i}"}}"#), "--db", e.db()]));
    }
}

/// Polls the deliveries until `done` holds (60 s at most).
fn wait_for(e: &Env, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list = e.deliveries();
        if done(&list) {
            return list;
        }
        assert!(Instant::now() < deadline, "not {what} in time: {list:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn operator_a_paused_connection_is_never_called_until_resumed() {
    on_both_stores(|e| {
        emit(e, 3);
        let paused = e.json(&["breakers", "pause", "c", "--reason", "provider maintenance", "--by", "alice"]);
        assert_eq!(paused["paused"]["by"], "alice");
        assert_eq!(paused["paused"]["until"], Value::Null);
        let listed = e.json(&["breakers"]);
        assert_eq!(listed[0]["connection"], "c");
        assert_eq!(listed[0]["paused"]["reason"], "provider maintenance");
        assert_eq!(e.status()["breakers_paused"], 1);

        // A run holds every delivery: none is called, none spends an attempt.
        let run = e.start_run(&["--fake", "c=ok"], &[]);
        let held = wait_for(e, "held", |l| l.len() == 3 && l.iter().all(|d| state(d) == "held"));
        assert!(held.iter().all(|d| d["attempts"] == 0), "{held:#?}");
        let text = ok(&e.jadpoc(&["breakers", "--db", e.db()]));
        assert!(text.contains("paused by alice at") && text.contains("until resumed: provider maintenance"), "{text}");

        let resumed = e.json(&["breakers", "resume", "c", "--by", "alice", "--reason", "done"]);
        assert_eq!((resumed["was_paused"].clone(), resumed["released"].clone()), (Value::Bool(true), 3.into()));
        let done = wait_for(e, "succeeded", |l| l.iter().all(|d| state(d) == "succeeded"));
        assert!(done.iter().all(|d| d["attempts"] == 1), "each called once, after the resume: {done:#?}");
        common::stop(run);
        assert_eq!(e.json(&["breakers"])[0]["paused"], Value::Null);
        assert_eq!(e.status()["breakers_paused"], 0);
    });
}

#[test]
fn operator_an_unknown_connection_is_refused_and_a_declared_one_can_be_paused_before_use() {
    on_both_stores(|e| {
        emit(e, 1);
        let out = e.jadpoc(&["breakers", "pause", "nope", "--db", e.db()]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("--program"), "{out:?}");
        let out = e.jadpoc(&["breakers", "pause", "nope", "--program", e.prog(), "--db", e.db()]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no connection `nope`") && err.contains("`spare`"), "{err}");
        assert!(e.json(&["breakers"]).as_array().is_some_and(|b| b.is_empty()), "nothing was paused");
        // `spare` has no delivery yet; its program declares it.
        let paused = e.json(&["breakers", "pause", "spare", "--program", e.prog(), "--for", "2h"]);
        assert!(paused["paused"]["until"].is_string(), "{paused}");
        let out = e.jadpoc(&["breakers", "resume", "nope", "--db", e.db()]);
        assert_eq!(out.status.code(), Some(2));
        let out = e.jadpoc(&["breakers", "pause", "c", "--for", "soon", "--db", e.db()]);
        assert_eq!(out.status.code(), Some(2));
    });
}

#[test]
fn operator_breakers_history_lists_every_pause_and_resume_in_text_and_json() {
    on_both_stores(|e| {
        emit(e, 1);
        let text = |args: &[&str]| {
            let mut all = vec!["breakers", "history"];
            all.extend_from_slice(args);
            all.extend_from_slice(&["--db", e.db()]);
            ok(&e.jadpoc(&all))
        };
        assert_eq!(text(&[]), "no pause or resume yet\n");
        e.json(&["breakers", "pause", "c", "--for", "2h", "--reason", "provider maintenance", "--by", "alice"]);
        e.json(&["breakers", "resume", "c", "--reason", "done early", "--by", "bob"]);
        e.json(&["breakers", "pause", "spare", "--program", e.prog(), "--by", "carol"]);

        let all = e.json(&["breakers", "history"]);
        let rows = all.as_array().expect("an array");
        let fields = |r: &Value| (r["connection"].clone(), r["action"].clone(), r["by"].clone(), r["reason"].clone());
        assert_eq!(
            rows.iter().map(fields).collect::<Vec<_>>(),
            vec![
                ("c".into(), "pause".into(), "alice".into(), "provider maintenance".into()),
                ("c".into(), "resume".into(), "bob".into(), "done early".into()),
                ("spare".into(), "pause".into(), "carol".into(), Value::Null),
            ],
            "{all}"
        );
        assert!(rows[0]["until"].is_string() && rows[1]["until"].is_null() && rows[2]["until"].is_null(), "{all}");
        let at = |i: usize| rows[i]["at"].as_str().expect("a time").to_string();
        let until = rows[0]["until"].as_str().expect("a time");
        assert_eq!(
            text(&["c"]),
            format!(
                "{}  c  paused by alice until {until}: provider maintenance\n{}  c  resumed by bob: done early\n",
                at(0),
                at(1)
            )
        );
        assert_eq!(e.json(&["breakers", "history", "spare"]).as_array().map(Vec::len), Some(1));
        assert_eq!(text(&["nope"]), "no pause or resume of `nope` yet\n");
    });
}

#[test]
fn operator_prune_deletes_final_deliveries_and_keeps_the_rest() {
    on_both_stores(|e| {
        emit(e, 3);
        let (list, _) = e.run_until_with(&["--fake", "c=ok"], &[], |l| l.iter().all(|d| state(d) == "succeeded"));
        assert_eq!(list.len(), 3);
        emit(e, 1);
        // Make sure the run's claims are in the past of the cut.
        std::thread::sleep(Duration::from_millis(5));

        let preview = e.json(&["prune", "--older-than", "0s", "--dry-run"]);
        assert_eq!(
            (preview["deliveries"].clone(), preview["handled"].clone(), preview["events"].clone()),
            (3.into(), 3.into(), 3.into()),
            "{preview}"
        );
        assert_eq!(e.deliveries().len(), 4, "a dry run deletes nothing");
        let week = e.json(&["prune", "--older-than", "7d"]);
        assert_eq!(week["deliveries"], 0, "nothing is a week old");
        let text = ok(&e.jadpoc(&["prune", "--older-than", "0s", "--db", e.db()]));
        assert!(text.starts_with("pruned 3 deliveries, 3 attempts, 3 handled records, 3 events"), "{text}");
        let left = e.deliveries();
        assert_eq!(left.len(), 1);
        assert_eq!(state(&left[0]), "pending", "a delivery not final is kept");
        let out = e.jadpoc(&["prune", "--older-than", "a week", "--db", e.db()]);
        assert_eq!(out.status.code(), Some(2));
    });
}
