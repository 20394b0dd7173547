//! jadpo's own events through `jadpoc run`, on SQLite and PostgreSQL: a
//! subscriber of `jadpo.delivery_failed` gets exactly one delivery per failed
//! delivery, with the fields the language declares, however many runs share the
//! store; and no producer can emit one.

use crate::common;
use crate::common::PgDb;

use common::{Env, state};
use serde_json::{Value, json};
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

connection pager {
    url: "http://127.0.0.1:9/pager"
}

action record(id: string) {
    via: c
}

action page(delivery: string, about: string, code: string?) {
    via: pager
}

subscriber rec {
    on: Paid
    run: record(event.id)
}

subscriber page_on_failure {
    on: jadpo.delivery_failed
    run: page(event.delivery, event.event, event.code)
}
"#;
    std::fs::write(&path, text).expect("write program");
    path
}

const EVENTS: usize = 6;

/// Emits [`EVENTS`] events, runs `runs` processes with `c` refusing every call
/// until each has failed and its page succeeded, and returns the deliveries.
fn fail_and_page(e: &Env, runs: usize) -> Vec<Value> {
    for i in 0..EVENTS {
        let out = e.jadpoc(&["emit", e.prog(), "Paid", &format!(r#"{{"id": "p{i}"}}"#), "--db", e.db()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let running: Vec<_> =
        (0..runs).map(|_| e.start_run(&["--fake", "c=rejected", "--fake", "pager=ok", "--batch", "2"], &[])).collect();
    let done = |l: &[Value]| {
        let pages = l.iter().filter(|d| d["subscriber"] == "page_on_failure").count();
        pages >= EVENTS && l.iter().all(|d| matches!(state(d), "failed" | "succeeded"))
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut list = e.deliveries();
    while !done(&list) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        list = e.deliveries();
    }
    // A little longer, so that a second alert raised for one failure would show.
    std::thread::sleep(Duration::from_millis(300));
    list = e.deliveries();
    for run in running {
        common::stop(run);
    }
    assert!(done(&list), "not done in time: {list:#?}");
    list
}

/// Each failed `rec` delivery has exactly one page, whose event's payload names it.
fn assert_one_page_each(list: &[Value], payloads: &[(i64, Value)]) {
    let failed: Vec<&Value> = list.iter().filter(|d| d["subscriber"] == "rec").collect();
    assert_eq!(failed.len(), EVENTS);
    assert!(failed.iter().all(|d| state(d) == "failed" && d["attempts"] == 1), "{failed:#?}");
    let pages: Vec<&Value> = list.iter().filter(|d| d["subscriber"] == "page_on_failure").collect();
    assert_eq!(pages.len(), EVENTS, "one page per failed delivery: {list:#?}");
    assert!(pages.iter().all(|d| state(d) == "succeeded" && d["event"] == "jadpo.delivery_failed"), "{pages:#?}");
    assert_eq!(payloads.len(), EVENTS, "one event per failed delivery");
    for d in failed {
        let expected = json!({
            "delivery": d["id"].as_i64().expect("an id").to_string(),
            "event": d["event_id"].as_i64().expect("an event id").to_string(),
            "subscriber": "rec",
            "kind": "rejected",
            "code": "fake.rejected",
            "attempts": 1,
        });
        let found: Vec<&Value> =
            payloads.iter().map(|(_, p)| p).filter(|p| p["delivery"] == expected["delivery"]).collect();
        assert_eq!(found, vec![&expected]);
    }
    // Every page is a delivery of one of those events.
    let ids: Vec<i64> = payloads.iter().map(|(id, _)| *id).collect();
    assert!(pages.iter().all(|d| ids.contains(&d["event_id"].as_i64().unwrap_or(-1))), "{pages:#?}");
}

#[test]
fn builtin_each_failed_delivery_pages_once_on_sqlite() {
    let e = Env::new("outbox.db", program);
    let list = fail_and_page(&e, 1);
    let raw = rusqlite::Connection::open(&e.db).expect("open");
    let mut stmt =
        raw.prepare("SELECT id, payload FROM jadpo_events WHERE name = 'jadpo.delivery_failed'").expect("query");
    let payloads: Vec<(i64, Value)> = stmt
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
        .expect("rows")
        .map(|r| {
            let (id, p) = r.expect("a row");
            (id, serde_json::from_str(&p).expect("a JSON payload"))
        })
        .collect();
    assert_one_page_each(&list, &payloads);
}

#[test]
fn builtin_each_failed_delivery_pages_once_with_two_runs_on_postgres() {
    let Some(pg) = PgDb::new() else { return };
    let mut e = Env::new("unused.db", program);
    e.db = PathBuf::from(&pg.url);
    let list = fail_and_page(&e, 2);
    let mut raw = postgres::Client::connect(&pg.url, postgres::NoTls).expect("connect");
    let payloads: Vec<(i64, Value)> = raw
        .query("SELECT id, payload FROM jadpo.events WHERE name = 'jadpo.delivery_failed'", &[])
        .expect("query")
        .iter()
        .map(|r| {
            let payload: String = r.get(1);
            (r.get(0), serde_json::from_str(&payload).expect("a JSON payload"))
        })
        .collect();
    assert_one_page_each(&list, &payloads);
}

#[test]
fn builtin_events_cannot_be_emitted_by_a_producer() {
    let e = Env::new("outbox.db", program);
    let payload = r#"{"delivery": "1", "event": "1", "subscriber": "rec", "kind": "rejected", "attempts": 1}"#;
    let out = e.jadpoc(&["emit", e.prog(), "jadpo.delivery_failed", payload, "--db", e.db()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`jadpo.delivery_failed` is one of jadpo's own events: only the runtime raises it"), "{err}");
}
