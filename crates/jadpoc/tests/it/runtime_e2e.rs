//! End-to-end tests of the outbox runtime through the `jadpoc` binary: emit, run with
//! fakes, then read `deliveries --format json`.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common;

use common::{Env, Running, fakes, state, stop};

/// A program with one event, connection `c` and subscriber `rec`, plus whatever
/// `extra` adds.
fn program(dir: &Path, extra: &str) -> PathBuf {
    let path = dir.join("p.jadpo");
    let text = format!(
        r#"event Paid {{
    id: string
    cents: int
    note: string?
}}

connection c {{
    url: "http://127.0.0.1:9/x"
}}

action record(id: string, cents: int) {{
    via: c
}}

subscriber rec {{
    on: Paid
    run: record(event.id, event.cents)
    timeout: 1s
}}
{extra}"#
    );
    std::fs::write(&path, text).expect("write program");
    path
}

fn env(extra: &str) -> Env {
    Env::new("store/outbox.db", |dir| program(dir, extra))
}

/// What these tests add to the shared harness: their own event, and fakes by script.
impl Env {
    fn emit(&self, json: &str) -> i64 {
        let out = self.jadpoc(&["emit", self.prog(), "Paid", json, "--db", self.db()]);
        assert!(out.status.success(), "emit failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().parse().expect("an event id")
    }

    fn start(&self, scripts: &[&str], extra: &[&str]) -> Running {
        let mut args = fakes(scripts);
        args.extend_from_slice(extra);
        self.start_run(&args, &[])
    }

    /// Run with the fakes until `done` holds for the deliveries, then stop.
    fn run_until(&self, scripts: &[&str], done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        self.run_until_with(&fakes(scripts), &[], done).0
    }
}

fn ended(list: &[Value]) -> bool {
    !list.is_empty() && list.iter().all(|d| !matches!(state(d), "pending" | "running"))
}

#[test]
fn runtime_ok_succeeds_in_one_attempt() {
    let e = env("");
    e.emit(r#"{"id": "p1", "cents": 100}"#);
    let list = e.run_until(&["c=ok"], ended);
    assert_eq!(list.len(), 1);
    let d = &list[0];
    assert_eq!(state(d), "succeeded");
    assert_eq!(d["attempts"], 1);
    assert_eq!(d["subscriber"], "rec");
    assert_eq!(d["event"], "Paid");
    assert_eq!(d["connection"], "c");
    assert_eq!(d["last_failure"], Value::Null);
    assert_eq!(d["due_at"], Value::Null);
    for key in ["id", "event_id", "held_since"] {
        assert!(d.get(key).is_some(), "{key}");
    }
}

#[test]
fn runtime_rejected_fails_in_one_attempt_with_its_kind() {
    let e = env("");
    e.emit(r#"{"id": "p1", "cents": 100}"#);
    let list = e.run_until(&["c=rejected"], ended);
    let d = &list[0];
    assert_eq!(state(d), "failed");
    assert_eq!(d["attempts"], 1);
    assert_eq!(d["last_failure"]["kind"], "rejected");
    assert_eq!(d["last_failure"]["code"], "fake.rejected");
}

#[test]
fn runtime_outcome_unknown_parks() {
    let e = env("");
    e.emit(r#"{"id": "p1", "cents": 100}"#);
    let list = e.run_until(&["c=outcome_unknown"], ended);
    assert_eq!(state(&list[0]), "parked");
    assert_eq!(list[0]["attempts"], 1);
    assert_eq!(list[0]["last_failure"]["kind"], "outcome_unknown");
}

fn rfc3339_ms(v: &Value) -> i64 {
    let s = v.as_str().expect("a time");
    jadpo_core::clock::parse_rfc3339_ms(s).expect("rfc 3339")
}

#[test]
fn runtime_unavailable_is_pending_with_one_attempt_due_1s_to_30s_ahead() {
    let e = env("");
    e.emit(r#"{"id": "p1", "cents": 100}"#);
    let list =
        e.run_until(&["c=unavailable"], |l| l.first().is_some_and(|d| d["attempts"] == 1 && state(d) == "pending"));
    let d = &list[0];
    assert_eq!(d["last_failure"]["kind"], "unavailable");
    let id = d["id"].as_i64().expect("id");
    let shown = e.show(id);
    let history = shown["history"].as_array().expect("history");
    assert_eq!(history.len(), 1);
    let ended_at = rfc3339_ms(&history[0]["started_at"]) + history[0]["duration_ms"].as_i64().expect("ms");
    let wait = rfc3339_ms(&d["due_at"]) - ended_at;
    assert!((1_000..=30_000).contains(&wait), "wait {wait}ms");
    assert_eq!(history[0]["kind"], "unavailable");
    assert_eq!(history[0]["outcome"], "failed");
    assert!(history[0].get("http_status").is_some());
}

#[test]
fn runtime_deliveries_that_came_during_a_retry_after_run_once_it_has_passed() {
    // The first two calls are answered `rate_limited` with a Retry-After of 2s.
    // The claims of those two seconds leave the other deliveries waiting for the
    // connection's turn, one claim of one at a time; once it comes, they run.
    let e = env("");
    for i in 0..12 {
        e.emit(&format!(r#"{{"id": "p{i}", "cents": {i}}}"#));
    }
    let mut args = fakes(&["c=rate_limited(2s)*2,ok"]);
    args.extend_from_slice(&["--workers", "1", "--batch", "2"]);
    let succeeded = |l: &[Value]| l.iter().filter(|d| state(d) == "succeeded").count();
    let (list, _) = e.run_until_with(&args, &[], |l| succeeded(l) >= 10);
    assert_eq!(list.len(), 12);
    assert!(list.iter().all(|d| d["attempts"].as_i64() >= Some(1)), "{list:#?}");
}

#[test]
fn runtime_operator_retry_runs_again_with_a_fresh_budget_keeping_history() {
    let e = env("");
    e.emit(r#"{"id": "p1", "cents": 100}"#);
    let list = e.run_until(&["c=rejected"], ended);
    let id = list[0]["id"].as_i64().expect("id");
    let first_budget = rfc3339_ms(&list[0]["budget_start"]);

    // A running delivery cannot be retried; an unknown id is refused.
    let out = e.jadpoc(&["deliveries", "retry", "999", "--db", e.db()]);
    assert_eq!(out.status.code(), Some(1));

    let out = e.jadpoc(&["deliveries", "retry", &id.to_string(), "--db", e.db()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let d = &e.deliveries()[0];
    assert_eq!(state(d), "pending");
    assert_eq!(d["attempts"], 0);
    assert!(rfc3339_ms(&d["budget_start"]) > first_budget);

    let list = e.run_until(&["c=ok"], ended);
    assert_eq!(state(&list[0]), "succeeded");
    assert_eq!(list[0]["attempts"], 1);
    let history = e.show(id)["history"].as_array().cloned().expect("history");
    assert_eq!(history.len(), 2, "{history:#?}");
    assert_eq!(history[0]["kind"], "rejected");
    assert_eq!(history[1]["outcome"], "succeeded");
}

#[test]
fn runtime_emit_refuses_bad_payloads_naming_the_field() {
    let e = env("");
    let out = e.jadpoc(&["emit", e.prog(), "Paid", r#"{"id": "p1"}"#, "--db", e.db()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`cents`"));
    let out = e.jadpoc(&["emit", e.prog(), "Paid", r#"{"id": "p1", "cents": 1, "x": 2}"#, "--db", e.db()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`x`"));
    let out = e.jadpoc(&["emit", e.prog(), "Nope", "{}", "--db", e.db()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`Nope`"));

    let nd = e.dir.join("in.ndjson");
    std::fs::write(
        &nd,
        "{\"id\": \"a\", \"cents\": 1}\n\n{\"id\": \"b\"}\n{\"id\": \"c\", \"cents\": 3, \"note\": null}\n",
    )
    .expect("write");
    let out = e.jadpoc(&["emit", e.prog(), "Paid", "--ndjson", nd.to_str().expect("path"), "--db", e.db()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("line 3"), "{err}");
    assert_eq!(e.deliveries().len(), 2);
}

#[test]
fn runtime_run_refuses_a_connection_without_a_driver_and_a_foreign_store() {
    let e = env("");
    // Every connection has a driver now (the HTTP driver unless `--fake`); an unset
    // `env("NAME")` refusing to start is in http_e2e.rs.
    let out = e.jadpoc(&["run", e.prog(), "--db", e.db(), "--fake", "nope=ok"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no connection `nope`"));
    let out = e.jadpoc(&["run", e.prog(), "--db", e.db(), "--fake", "c=maybe"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`maybe` is not an answer"));
    // A test's `fake` refuses it too: a run's time limit is `hang`'s to reach.
    let out = e.jadpoc(&["run", e.prog(), "--db", e.db(), "--fake", "c=deadline_exceeded"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`deadline_exceeded` is not an answer"));

    let foreign = e.dir.join("notes.txt");
    std::fs::write(&foreign, "not a database, certainly not a jadpo store\n".repeat(100)).expect("write");
    let before = std::fs::read(&foreign).expect("read");
    let out = e.jadpoc(&["status", "--db", foreign.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a jadpo store"));
    let out =
        e.jadpoc(&["emit", e.prog(), "Paid", r#"{"id": "p", "cents": 1}"#, "--db", foreign.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read(&foreign).expect("read"), before);
}

/// A tiny HTTP client: one request, the status and body back.
fn post(addr: &str, path: &str, body: &[u8]) -> (u16, Value) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).expect("write");
    let _ = s.write_all(body);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("null");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

#[test]
fn runtime_listen_takes_events_over_http() {
    let e = env("");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let child = e.start(&["c=ok"], &["--listen", &addr]);
    let start = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(start.elapsed() < Duration::from_secs(20), "never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, body) = post(&addr, "/events/Paid", br#"{"id": "p1", "cents": 5}"#);
    assert_eq!(status, 202, "{body}");
    assert!(body["id"].is_i64());
    let (status, _) = post(&addr, "/events/Nope", b"{}");
    assert_eq!(status, 404);
    let (status, body) = post(&addr, "/events/Paid", br#"{"id": "p1", "cents": "5"}"#);
    assert_eq!(status, 422);
    assert_eq!(body["error"]["field"], "cents");
    let (status, body) = post(&addr, "/events/Paid", b"{not json");
    assert_eq!(status, 422, "{body}");
    let (status, _) = post(&addr, "/events/Paid", &vec![b' '; 1024 * 1024 + 1]);
    assert_eq!(status, 413);
    let t = Instant::now();
    while !ended(&e.deliveries()) {
        assert!(t.elapsed() < Duration::from_secs(10), "not delivered");
        std::thread::sleep(Duration::from_millis(20));
    }
    stop(child);
    let list = e.deliveries();
    assert_eq!(list.len(), 1);
    assert_eq!(state(&list[0]), "succeeded");
}

#[test]
fn runtime_schedules_run_and_are_logged() {
    let e = env(r#"
action sync() {
    via: c
}

schedule every_second {
    every: 1s
    run: sync()
}
"#);
    let child = e.start(&["c=ok"], &[]);
    let is_run = |l: &str| l.contains("\"schedule.run\"") && l.contains("every_second") && l.contains("succeeded");
    child.wait_for_log("schedule run", |log| log.lines().filter(|l| is_run(l)).count() >= 2);
    let log = stop(child);
    let runs: Vec<Value> =
        log.lines().filter(|l| is_run(l)).map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(runs[0]["run"], 1, "{log}");
    assert_eq!(runs[1]["run"], 2, "{log}");
}

/// A provider that answers every call `200` after `delay`; returns its port and
/// the count of requests it has read.
fn slow_provider(delay: Duration) -> (u16, Arc<AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let received = Arc::new(AtomicUsize::new(0));
    let count = received.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let count = count.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                let _ = conn.read(&mut buf);
                count.fetch_add(1, Ordering::SeqCst);
                // The provider's own delay: the call is in flight meanwhile.
                std::thread::sleep(delay);
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            });
        }
    });
    (port, received)
}

#[test]
fn runtime_a_stop_waits_for_a_running_schedule_run() {
    let (port, received) = slow_provider(Duration::from_secs(2));
    let e = env(&format!(
        r#"
connection slow {{
    url: "http://127.0.0.1:{port}"
}}

action sync() {{
    via: slow
}}

schedule every_second {{
    every: 1s
    run: sync()
}}
"#
    ));
    // The stop comes while the provider holds the run's call (it answers 2s after
    // reading it); the grace (10s) lets the run end and be logged.
    let child = e.start(&["c=ok"], &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while received.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the schedule's run never called: {}", child.log());
        std::thread::sleep(Duration::from_millis(10));
    }
    let log = stop(child);
    let run = log.lines().find(|l| l.contains("\"schedule.run\"")).unwrap_or_else(|| panic!("no run logged: {log}"));
    assert!(run.contains("succeeded"), "{run}");
}

#[test]
fn runtime_listings_into_a_closed_pipe_exit_0() {
    let e = env("");
    for i in 0..3 {
        e.emit(&format!(r#"{{"id": "p{i}", "cents": 1}}"#));
    }
    for args in [
        vec!["deliveries"],
        vec!["deliveries", "--format", "json"],
        vec!["deliveries", "show", "1"],
        vec!["status"],
        vec!["status", "--format", "json"],
        vec!["breakers"],
    ] {
        // The reader is gone before jadpoc writes, as with `| head -0`.
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let mut full = args.clone();
        full.extend(["--db", e.db()]);
        let out = e.cmd(&full).stdout(Stdio::from(writer)).output().expect("run jadpoc");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = e
        .cmd(&["emit", e.prog(), "Paid", r#"{"id": "p9", "cents": 1}"#, "--db", e.db()])
        .stdout(Stdio::from(writer))
        .output()
        .expect("run jadpoc");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(e.deliveries().len(), 4, "the event is stored all the same");
}

/// Emit 20,000 events, run, SIGKILL mid-way, run again: every delivery ends
/// `succeeded`, none lost and none twice; the deliveries running at the kill come
/// back after their lease (20s timeout + 30s) with `lease_expired` recorded. The
/// slow ones' calls never answer, so they are running for the first 20s, a
/// generous window for the kill (a shorter one can pass before a busy machine
/// has looked, and their deadlines would open the breaker); every wait is on a
/// condition with a generous deadline.
#[test]
fn runtime_crash_mid_way_loses_nothing_and_leases_come_back() {
    let e = env(r#"
event Slow {
    n: int
}

connection h {
    url: "http://127.0.0.1:9/h"
}

action slow_call(n: int) {
    via: h
}

subscriber slow {
    on: Slow
    run: slow_call(event.n)
    timeout: 20s
}
"#);
    // The slow ones first, so the first claim takes them.
    for n in 0..3 {
        let out = e.jadpoc(&["emit", e.prog(), "Slow", &format!(r#"{{"n": {n}}}"#), "--db", e.db()]);
        assert!(out.status.success());
    }
    let nd = e.dir.join("paid.ndjson");
    let lines: String = (0..20_000).map(|i| format!("{{\"id\": \"p{i}\", \"cents\": {i}}}\n")).collect();
    std::fs::write(&nd, lines).expect("write");
    let out = e.jadpoc(&["emit", e.prog(), "Paid", "--ndjson", nd.to_str().expect("path"), "--db", e.db()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let Running { mut child, .. } = e.start(&["c=ok", "h=hang"], &[]);
    let start = Instant::now();
    loop {
        let s = e.status();
        let slow_running = s["subscribers"]["slow"]["running"].as_u64().unwrap_or(0);
        let done = s["subscribers"]["rec"]["succeeded"].as_u64().unwrap_or(0);
        if slow_running == 3 && done > 0 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "never got going: {s}");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let after_kill = e.status();
    assert_eq!(after_kill["subscribers"]["slow"]["running"], 3, "{after_kill}");

    let child = e.start(&["c=ok", "h=ok"], &[]);
    let start = Instant::now();
    loop {
        let s = e.status();
        if s["states"]["succeeded"] == 20_003 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(240), "not all succeeded: {s}");
        std::thread::sleep(Duration::from_millis(250));
    }
    stop(child);
    let list = e.deliveries();
    assert_eq!(list.len(), 20_003, "none lost, none duplicated");
    let mut events: Vec<i64> = list.iter().map(|d| d["event_id"].as_i64().expect("id")).collect();
    events.sort_unstable();
    events.dedup();
    assert_eq!(events.len(), 20_003, "one delivery per event");
    for d in list.iter().filter(|d| d["subscriber"] == "slow") {
        let h = e.show(d["id"].as_i64().expect("id"));
        let history = h["history"].as_array().expect("history");
        assert_eq!(history.first().map(|a| &a["kind"]), Some(&Value::from("lease_expired")), "{h:#}");
        assert_eq!(history.last().map(|a| &a["outcome"]), Some(&Value::from("succeeded")), "{h:#}");
        assert_eq!(h["attempts"], 2);
    }
}

/// A schedule on a healthy connection: its runs show that the tick has run.
const HEARTBEAT: &str = r#"
connection tock {
    url: "http://127.0.0.1:9/tock"
}

action beat() {
    via: tock
}

schedule heartbeat {
    every: 1s
    run: beat()
}
"#;

#[test]
fn runtime_breaker_opens_after_five_attempts_holds_the_rest_and_alerts_once() {
    let e = env(HEARTBEAT);
    let lines: String = (0..50).map(|i| format!("{{\"id\": \"p{i}\", \"cents\": {i}}}\n")).collect();
    let ndjson = e.dir.join("events.ndjson");
    std::fs::write(&ndjson, lines).expect("write events");
    let out = e.jadpoc(&["emit", e.prog(), "Paid", "--ndjson", ndjson.to_str().expect("utf-8"), "--db", e.db()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // The default workers and batch: one claim could take all 50. The process sees
    // each failure at once, and a connection that has not answered gets at most its
    // `max_in_flight` (4) attempts in flight.
    let run = e.start(&["c=unavailable", "tock=ok"], &[]);
    let alert = |log: &str| log.contains("\"delivery.alert\"");
    run.wait_for_log("alert", alert);
    let log = stop(run);
    let held = |list: &[Value]| list.iter().filter(|d| state(d) == "held").count();
    let list = e.deliveries();
    assert_eq!(list.len(), 50);
    let attempts: u64 = list.iter().map(|d| d["attempts"].as_u64().unwrap_or(0)).sum();
    // Five attempts open it; those already in flight on the connection may finish.
    assert!((5..=5 + 4).contains(&attempts), "{attempts} attempts: {list:#?}");
    for d in &list {
        match state(d) {
            "held" => {
                // Held at its claim: the claim's attempt is given back.
                assert!(d["attempts"].as_u64().is_some_and(|n| n <= 1), "{d}");
                assert!(d["held_since"].is_string(), "{d}");
                assert_eq!(d["due_at"], Value::Null);
            }
            "pending" => assert!(d["attempts"].as_u64().is_some_and(|n| n >= 1), "{d}"),
            other => panic!("unexpected state `{other}`: {d}"),
        }
    }
    let untouched = list.iter().filter(|d| state(d) == "held" && d["attempts"] == 0).count();
    assert!(untouched >= 41, "held with budgets untouched: {untouched}: {list:#?}");

    let alerts: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "delivery.alert")
        .collect();
    assert_eq!(alerts.len(), 1, "one alert per outage: {log}");
    assert_eq!(alerts[0]["alert"], "connection_unavailable");
    assert_eq!(alerts[0]["connection"], "c");
    assert!(alerts[0]["since"].is_string());
    assert!(alerts[0]["held"].as_u64().is_some());

    let out = e.jadpoc(&["breakers", "--format", "json", "--db", e.db()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let breakers: Value = serde_json::from_slice(&out.stdout).expect("json");
    let b = &breakers[0];
    assert_eq!(breakers.as_array().map(Vec::len), Some(1));
    assert_eq!(b["connection"], "c");
    assert_eq!(b["state"], "open");
    assert_eq!(b["pause_s"], 60);
    assert_eq!(b["alerts"], 1);
    assert_eq!(b["held"].as_u64(), Some(held(&list) as u64));
    assert!(b["failures_in_a_row"].as_u64().is_some_and(|n| n >= 5));
    assert!(b["opened_at"].is_string());
    assert_eq!(e.status()["breakers_open"], 1);
    assert_eq!(e.status()["states"]["held"].as_u64(), Some(held(&list) as u64));

    // A restart does not raise the outage's alert again: the heartbeat's second
    // run is logged by the restart's second tick at the earliest, after a sweep
    // that would have raised it.
    let run = e.start(&["c=unavailable", "tock=ok"], &[]);
    let beat = |log: &str| log.lines().filter(|l| l.contains("\"schedule.run\"")).count() >= 2;
    run.wait_for_log("heartbeat", beat);
    let log = stop(run);
    assert!(!alert(&log), "{log}");
}

#[test]
fn runtime_breakers_lists_nothing_before_a_failure() {
    let e = env("");
    e.emit(r#"{"id": "p1", "cents": 100}"#);
    let out = e.jadpoc(&["breakers", "--db", e.db()]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "no breakers: no connection has failed yet\n");
    let out = e.jadpoc(&["breakers", "--format", "json", "--db", e.db()]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
}

/// The default log format is one human line per event, on stderr.
#[test]
fn runtime_logs_text_lines_by_default() {
    let e = env("");
    e.emit(r#"{"id": "p1", "cents": 100}"#);
    let mut args = vec!["run", e.prog(), "--db", e.db()];
    args.extend(fakes(&["c=ok"]));
    let log = e.dir.join("text.log");
    let file = std::fs::File::create(&log).expect("log file");
    let child = e.cmd(&args).stdout(Stdio::null()).stderr(Stdio::from(file)).spawn().expect("start jadpoc run");
    let run = Running { child, log };
    let text = run.wait_for_log("attempt line", |l| l.contains(" delivery 1 rec attempt 1: "));
    stop(run);
    let line = text.lines().find(|l| l.contains(" delivery 1 rec attempt 1: ")).expect("the line");
    let (at, rest) = line.split_once(' ').expect("a time first");
    assert!(jadpo_core::clock::parse_rfc3339_ms(at).is_some(), "{line}");
    assert_eq!(rest, "delivery 1 rec attempt 1: succeeded -> succeeded");
}
