//! `jadpoc events` through the binary, on SQLite and PostgreSQL: listing,
//! showing, replays (dry runs, one subscriber, new deliveries with new
//! Idempotency-Keys), and on PostgreSQL events written by `jadpo.emit` in the
//! application's own transaction, expanded once by two runs.

use crate::common;
use crate::http_server::{Provider, Reply};

use common::{Env, PgDb, state};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `Paid` with two subscribers, `rec` and `audit`, calling `url`.
fn program_at(dir: &Path, url: &str) -> PathBuf {
    let path = dir.join("p.jadpo");
    let text = format!(
        r#"event Paid {{
    id: string
    cents: int
}}

connection c {{
    url: "{url}"
}}

action record(id: string, cents: int) {{
    via: c
}}

subscriber rec {{
    on: Paid
    run: record(event.id, event.cents)
}}

subscriber audit {{
    on: Paid
    run: record(event.id, event.cents)
}}
"#
    );
    std::fs::write(&path, text).expect("write program");
    path
}

/// Waits (60s at most) until `done` holds for the deliveries; returns them.
fn wait_deliveries(e: &Env, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list = e.deliveries();
        if done(&list) {
            return list;
        }
        assert!(Instant::now() < deadline, "{what}: not in time: {list:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn all_succeeded(n: usize) -> impl Fn(&[Value]) -> bool {
    move |l: &[Value]| l.len() == n && l.iter().all(|d| state(d) == "succeeded")
}

fn events(e: &Env, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["events"];
    all.extend_from_slice(args);
    e.json(&all).as_array().cloned().expect("an array")
}

fn id(v: &Value) -> i64 {
    v["id"].as_i64().expect("an id")
}

#[test]
fn events_cli_list_show_and_replay_on_sqlite() {
    let provider = Provider::always(Reply::status(200));
    let e = Env::new("outbox.db", |dir| program_at(dir, &provider.url()));
    for i in 0..2 {
        let out = e.jadpoc(&["emit", e.prog(), "Paid", &format!(r#"{{"id": "p{i}", "cents": {i}}}"#), "--db", e.db()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let run = e.start_run(&[], &[]);
    wait_deliveries(&e, "the first four", all_succeeded(4));

    let listed = events(&e, &[]);
    assert_eq!(listed.len(), 2);
    assert!(id(&listed[0]) > id(&listed[1]), "newest first");
    assert_eq!(listed[0]["delivery_states"], serde_json::json!({"succeeded": 2}));
    assert_eq!(listed[0]["payload"], serde_json::json!({"id": "p1", "cents": 1}));
    assert_eq!(events(&e, &["--limit", "1"]).len(), 1);
    assert_eq!(events(&e, &["--name", "Refunded"]).len(), 0);
    assert_eq!(events(&e, &["--since", "1h"]).len(), 2);
    assert_eq!(events(&e, &["--until", "1h"]).len(), 0);
    let first = id(&listed[1]);

    let shown = e.json(&["events", "show", &first.to_string()]);
    assert_eq!(shown["deliveries"].as_array().map(Vec::len), Some(2));
    let out = e.jadpoc(&["events", "show", &first.to_string(), "--db", e.db()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(r#"  payload     {"id":"p0","cents":0}"#), "{text}");
    assert!(text.contains("succeeded") && text.contains("rec") && text.contains("audit"), "{text}");

    // A dry run says what it would make and makes nothing.
    let dry =
        e.json(&["events", "replay", &first.to_string(), "--subscriber", "rec", "--dry-run", "--program", e.prog()]);
    assert_eq!(dry[0]["subscribers"], serde_json::json!(["rec"]));
    assert_eq!(dry[0]["replay_id"], Value::Null);
    assert_eq!(e.deliveries().len(), 4);
    assert_eq!(events(&e, &[]).len(), 2);

    let done = e.json(&["events", "replay", &first.to_string(), "--subscriber", "rec", "--program", e.prog()]);
    let replay_id = done[0]["replay_id"].as_i64().expect("a replay's id");
    let list = wait_deliveries(&e, "the replay", all_succeeded(5));
    // A row written in SQL beside the run (as an application sharing the file
    // would) is expanded by the run: its deliveries made, or kept invalid.
    let raw = rusqlite::Connection::open(&e.db).expect("open the store");
    raw.busy_timeout(Duration::from_secs(60)).expect("busy timeout");
    raw.execute_batch(
        r#"INSERT INTO jadpo_events (name, payload, emitted_at, expanded) VALUES ('Paid', '{"id": "s1", "cents": 3}', 0, 0);
           INSERT INTO jadpo_events (name, payload, emitted_at, expanded) VALUES ('Paid', '{"id": "s2"}', 0, 0);"#,
    )
    .expect("events written in SQL");
    drop(raw);
    wait_deliveries(&e, "the event written in SQL", all_succeeded(7));
    common::stop(run);
    let invalid = events(&e, &["--limit", "1"]);
    assert_eq!(invalid[0]["invalid"]["code"], "ingest.missing_field", "{invalid:#?}");
    assert_eq!(invalid[0]["delivery_states"], serde_json::json!({}));
    assert_eq!(e.status()["invalid_events"], 1);

    let replay = e.json(&["events", "show", &replay_id.to_string()]);
    assert_eq!(replay["replay_of"], first);
    let made = replay["deliveries"].as_array().cloned().expect("deliveries");
    assert_eq!(made.len(), 1);
    assert_eq!((made[0]["subscriber"].as_str(), made[0]["attempts"].as_i64()), (Some("rec"), Some(1)));
    // Every delivery was called once, each with a key of its own: the replay's
    // is not the original's.
    let mut keys = BTreeMap::new();
    for r in provider.received() {
        *keys.entry(r.header("idempotency-key").unwrap_or_default().to_string()).or_insert(0) += 1;
    }
    assert_eq!(keys.len(), 7, "{keys:?}");
    assert!(keys.values().all(|n| *n == 1), "{keys:?}");
    let ids: Vec<String> = list.iter().map(|d| id(d).to_string()).collect();
    assert!(ids.iter().all(|i| keys.contains_key(i)), "{keys:?} {ids:?}");

    // By time: the original events, not the replay, to every subscriber.
    let by_time = e.json(&["events", "replay", "--since", "1h", "--name", "Paid", "--dry-run", "--program", e.prog()]);
    let by_time = by_time.as_array().cloned().expect("an array");
    assert_eq!(by_time.len(), 2, "{by_time:#?}");
    assert!(by_time.iter().all(|r| r["subscribers"] == serde_json::json!(["rec", "audit"])), "{by_time:#?}");
    assert!(by_time.iter().all(|r| r["event_id"] != replay_id));

    let out = e.jadpoc(&["events", "replay", "9999", "--program", e.prog(), "--db", e.db()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no event 9999"));
    let out = e.jadpoc(&["events", "replay", "1", "--subscriber", "nobody", "--program", e.prog(), "--db", e.db()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no subscriber `nobody`"));
    let out = e.jadpoc(&["events", "--since", "yesterday", "--db", e.db()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`--since yesterday` is not a time"));
}

#[test]
fn events_cli_sql_emit_in_the_applications_transaction_on_postgres() {
    let Some(pg) = PgDb::new() else { return };
    let mut e = Env::new("unused.db", |dir| program_at(dir, "http://127.0.0.1:9/x"));
    e.db = PathBuf::from(&pg.url);
    let out = e.jadpoc(&["migrate", "--db", e.db()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let mut app = postgres::Client::connect(&pg.url, postgres::NoTls).expect("connect");
    app.batch_execute("CREATE TABLE orders (id bigint PRIMARY KEY, state text)").expect("the application's table");
    // Committed with the application's change: delivered.
    let mut tx = app.transaction().expect("begin");
    tx.execute("INSERT INTO orders VALUES (42, 'paid')", &[]).expect("order");
    let kept: i64 =
        tx.query_one("SELECT jadpo.emit('Paid', '{\"id\": \"p42\", \"cents\": 1250}')", &[]).expect("emit").get(0);
    tx.commit().expect("commit");
    // Rolled back with it: never delivered, never seen.
    let mut tx = app.transaction().expect("begin");
    tx.execute("INSERT INTO orders VALUES (43, 'paid')", &[]).expect("order");
    let lost: i64 =
        tx.query_one("SELECT jadpo.emit('Paid', '{\"id\": \"p43\", \"cents\": 1}')", &[]).expect("emit").get(0);
    tx.rollback().expect("rollback");
    // Committed but not matching the program: kept invalid, delivered to no one.
    let wrong: i64 =
        app.query_one("SELECT jadpo.emit('Paid', '{\"id\": \"p44\", \"cents\": \"12\"}')", &[]).expect("emit").get(0);
    let unknown: i64 = app.query_one("SELECT jadpo.emit('Payed', '{}')", &[]).expect("emit").get(0);
    assert_eq!(e.status()["unexpanded_events"], 3);

    let runs: Vec<_> = (0..2).map(|_| e.start_run(&["--fake", "c=ok", "--batch", "7"], &[])).collect();
    wait_deliveries(&e, "the committed event", all_succeeded(2));
    // More events while both runs expand: each is expanded once.
    for chunk in 0..4 {
        let mut tx = app.transaction().expect("begin");
        for i in 0..50 {
            let payload = format!(r#"{{"id": "q{chunk}_{i}", "cents": {i}}}"#);
            tx.execute("SELECT jadpo.emit('Paid', $1::text::jsonb)", &[&payload]).expect("emit");
        }
        tx.commit().expect("commit");
    }
    let list = wait_deliveries(&e, "every committed event", all_succeeded(2 + 400));
    let replay = e.json(&["events", "replay", &kept.to_string(), "--subscriber", "audit", "--program", e.prog()]);
    assert!(replay[0]["replay_id"].as_i64().is_some(), "{replay:#?}");
    wait_deliveries(&e, "the replay", all_succeeded(2 + 400 + 1));
    for run in runs {
        common::stop(run);
    }
    let mut per_event: BTreeMap<i64, usize> = BTreeMap::new();
    for d in &list {
        *per_event.entry(d["event_id"].as_i64().expect("event id")).or_insert(0) += 1;
        assert_eq!(d["attempts"], 1, "a delivery ran twice: {d:#?}");
    }
    assert_eq!(per_event.len(), 201);
    assert!(per_event.values().all(|n| *n == 2), "an event expanded twice: {per_event:?}");
    assert!(!per_event.contains_key(&lost) && !per_event.contains_key(&wrong) && !per_event.contains_key(&unknown));

    let shown = e.json(&["events", "show", &wrong.to_string()]);
    assert_eq!(shown["invalid"]["code"], "ingest.wrong_type");
    assert_eq!(shown["invalid"]["reason"], "field `cents` must be an integer");
    assert_eq!(shown["deliveries"], serde_json::json!([]));
    let shown = e.json(&["events", "show", &unknown.to_string()]);
    assert_eq!(shown["invalid"]["code"], "ingest.unknown_event");
    let out = e.jadpoc(&["events", "show", &lost.to_string(), "--db", e.db()]);
    assert_eq!(out.status.code(), Some(1), "a rolled-back event is not there");
    let status = e.status();
    assert_eq!((status["invalid_events"].as_i64(), status["unexpanded_events"].as_i64()), (Some(2), Some(0)));
    // An invalid event is not replayed while its payload does not validate.
    let out = e.jadpoc(&["events", "replay", &wrong.to_string(), "--program", e.prog(), "--db", e.db()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not validate now"), "{out:?}");
    let listed = events(&e, &["--name", "Paid", "--limit", "500"]);
    assert_eq!(listed.len(), 203, "201 delivered, one invalid, one replay");
}
