//! `jadpoc run` with the HTTP driver against a provider on 127.0.0.1, end to end:
//! emit, run, then read `deliveries --format json`.

use crate::http_server;

use http_server::{Provider, Reply, refused_url};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::common;

use common::{Env, state};

/// One event `Paid`, connection `c` at `url` with `conn` added, action `record` with
/// `action` added, subscriber `rec`.
fn write_program(dir: &Path, url: &str, conn: &str, action: &str) -> PathBuf {
    let path = dir.join("p.jadpo");
    let text = http_server::program_text(url, conn, action, "5s");
    std::fs::write(&path, text).expect("write program");
    path
}

fn env(url: &str, conn: &str, action: &str) -> Env {
    Env::new("outbox.db", |dir| write_program(dir, url, conn, action))
}

/// What these tests add to the shared harness.
impl Env {
    fn emit_paid(&self, n: usize) {
        let lines: String = (0..n).map(|i| format!("{{\"id\": \"p{i}\", \"cents\": {i}}}\n")).collect();
        let file = self.dir.join("events.ndjson");
        std::fs::write(&file, lines).expect("write events");
        let out = self.jadpoc(&[
            "emit",
            self.prog(),
            "Paid",
            "--ndjson",
            file.to_str().expect("utf-8 path"),
            "--db",
            self.db(),
        ]);
        assert!(out.status.success(), "emit failed: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn history(&self, d: &Value) -> Vec<Value> {
        let id = d["id"].as_i64().expect("id").to_string();
        self.json(&["deliveries", "show", &id])["history"].as_array().cloned().expect("history")
    }
}

fn first_is(st: &'static str) -> impl Fn(&[Value]) -> bool {
    move |l: &[Value]| l.first().is_some_and(|d| state(d) == st)
}

fn failure(d: &Value) -> (&str, &str) {
    (d["last_failure"]["kind"].as_str().unwrap_or(""), d["last_failure"]["code"].as_str().unwrap_or(""))
}

fn rfc3339_ms(v: &Value) -> i64 {
    jadpo_core::clock::parse_rfc3339_ms(v.as_str().expect("a time")).expect("rfc 3339")
}

fn now_ms() -> i64 {
    let d = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).expect("after 1970");
    i64::try_from(d.as_millis()).expect("ms")
}

#[test]
fn http_e2e_run_calls_the_provider_and_records_the_status() {
    let p = Provider::always(Reply::status(200));
    let e = env(&p.url(), "", "");
    e.emit_paid(1);
    let (list, _) = e.run_until_with(&[], &[], first_is("succeeded"));
    let d = &list[0];
    assert_eq!(d["attempts"], 1);
    assert_eq!(d["last_failure"], Value::Null);
    let h = e.history(d);
    assert_eq!(h.len(), 1);
    assert_eq!((h[0]["outcome"].as_str(), &h[0]["http_status"]), (Some("succeeded"), &Value::from(200)));
    let got = p.received();
    assert_eq!(got.len(), 1);
    let id = d["id"].as_i64().expect("id");
    assert_eq!(got[0].header("idempotency-key"), Some(id.to_string().as_str()));
    let body = got[0].json();
    assert_eq!(body["delivery"], id);
    assert_eq!(body["attempt"], 1);
    assert_eq!(body["args"], serde_json::json!({"id": "p0", "cents": 0}));
    assert_eq!(body["event"]["name"], "Paid");
    assert_eq!(body["event"]["id"], d["event_id"]);
}

#[test]
fn http_e2e_a_declared_failure_fails_with_its_status_code_and_kind_never_the_body() {
    let p = Provider::always(Reply::json(
        422,
        r#"{"failure": {"code": "ledger.closed", "kind": "rejected"}, "detail": "SECRET-BODY"}"#,
    ));
    let e = env(&p.url(), "", "");
    e.emit_paid(1);
    let (list, log) = e.run_until_with(&[], &[], first_is("failed"));
    assert_eq!(failure(&list[0]), ("rejected", "ledger.closed"));
    assert_eq!(list[0]["attempts"], 1);
    let h = e.history(&list[0]);
    assert_eq!(h[0]["http_status"], 422);
    assert_eq!((h[0]["kind"].as_str(), h[0]["code"].as_str()), (Some("rejected"), Some("ledger.closed")));
    assert!(!log.contains("SECRET-BODY"));
    let shown = e.jadpoc(&["deliveries", "show", &list[0]["id"].to_string(), "--db", e.db()]);
    assert!(!String::from_utf8_lossy(&shown.stdout).contains("SECRET-BODY"));
}

#[test]
fn http_e2e_connection_resends_count_as_one_attempt() {
    let p = Provider::start(|n, _| if n < 2 { Reply::status(503) } else { Reply::status(200) });
    let e = env(&p.url(), "retry: { attempts: 3 }", "");
    e.emit_paid(1);
    let (list, _) = e.run_until_with(&[], &[], first_is("succeeded"));
    assert_eq!(list[0]["attempts"], 1);
    let h = e.history(&list[0]);
    assert_eq!(h.len(), 1);
    assert_eq!(h[0]["http_status"], 200);
    assert_eq!(p.count(), 3);
}

#[test]
fn http_e2e_a_retry_after_in_seconds_raises_the_wait() {
    let p = Provider::always(Reply::with_header(503, "Retry-After", "3600"));
    let e = env(&p.url(), "", "");
    e.emit_paid(1);
    let (list, _) =
        e.run_until_with(&[], &[], |l| l.first().is_some_and(|d| d["attempts"] == 1 && state(d) == "pending"));
    let d = &list[0];
    assert_eq!(failure(d), ("unavailable", "http.503"));
    let h = e.history(d);
    assert_eq!(h[0]["http_status"], 503);
    let ended = rfc3339_ms(&h[0]["started_at"]) + h[0]["duration_ms"].as_i64().expect("ms");
    let wait = rfc3339_ms(&d["due_at"]) - ended;
    assert!((3_600_000..3_601_000).contains(&wait), "wait {wait}ms");
}

#[test]
fn http_e2e_a_retry_after_as_an_http_date_raises_the_wait() {
    let at = SystemTime::now() + Duration::from_secs(7200);
    let p = Provider::always(Reply::with_header(429, "Retry-After", &httpdate::fmt_http_date(at)));
    let e = env(&p.url(), "", "");
    e.emit_paid(1);
    let (list, _) =
        e.run_until_with(&[], &[], |l| l.first().is_some_and(|d| d["attempts"] == 1 && state(d) == "pending"));
    assert_eq!(failure(&list[0]), ("rate_limited", "http.429"));
    let asked = i64::try_from(at.duration_since(SystemTime::UNIX_EPOCH).expect("after 1970").as_secs()).expect("s");
    let due = rfc3339_ms(&list[0]["due_at"]);
    // The date has whole seconds.
    assert!((asked * 1000 - 1000..=asked * 1000 + 1000).contains(&due), "due {due}, asked {asked}s");
}

#[test]
fn http_e2e_a_retry_after_past_the_window_fails_at_once() {
    // 25 hours, past the default 24h window.
    let p = Provider::always(Reply::with_header(503, "Retry-After", "90000"));
    let e = env(&p.url(), "", "");
    e.emit_paid(1);
    let (list, _) = e.run_until_with(&[], &[], first_is("failed"));
    assert_eq!(list[0]["attempts"], 1);
    assert_eq!(failure(&list[0]), ("unavailable", "http.503"));
    assert_eq!(p.count(), 1);
}

#[test]
fn http_e2e_no_answer_parks_a_non_idempotent_delivery() {
    let p = Provider::always(Reply::Hang);
    let e = env(&p.url(), "timeout: 300ms", "");
    e.emit_paid(1);
    let (list, _) = e.run_until_with(&[], &[], first_is("parked"));
    assert_eq!(list[0]["attempts"], 1);
    assert_eq!(failure(&list[0]), ("outcome_unknown", "transport.no_answer"));
    assert_eq!(e.history(&list[0])[0]["http_status"], Value::Null);
}

#[test]
fn http_e2e_no_answer_is_retried_for_an_idempotent_action() {
    // Without the connection's re-sends the delivery waits for its next attempt...
    let p = Provider::always(Reply::Hang);
    let e = env(&p.url(), "timeout: 300ms", "idempotent: true");
    e.emit_paid(1);
    let (list, _) =
        e.run_until_with(&[], &[], |l| l.first().is_some_and(|d| d["attempts"] == 1 && state(d) == "pending"));
    assert_eq!(failure(&list[0]), ("unavailable", "transport.no_answer"));
    // ...and with them the call is sent again within the attempt.
    let p = Provider::start(|n, _| if n == 0 { Reply::Hang } else { Reply::status(200) });
    let e = env(&p.url(), "timeout: 300ms\n    retry: { attempts: 2 }", "idempotent: true");
    e.emit_paid(1);
    let (list, _) = e.run_until_with(&[], &[], first_is("succeeded"));
    assert_eq!(list[0]["attempts"], 1);
    assert_eq!(p.count(), 2);
}

#[test]
fn http_e2e_a_refused_connection_is_unavailable_and_retried_later() {
    let e = env(&refused_url(), "", "");
    e.emit_paid(1);
    let (list, log) =
        e.run_until_with(&[], &[], |l| l.first().is_some_and(|d| d["attempts"] == 1 && state(d) == "pending"));
    assert_eq!(failure(&list[0]), ("unavailable", "transport.refused"));
    // The reason is the system's own words, in the log.
    assert!(log.to_lowercase().contains("connection refused"), "{log}");
    assert_eq!(e.history(&list[0])[0]["http_status"], Value::Null);
}

#[test]
fn http_e2e_env_secrets_are_sent_never_logged_and_an_unset_one_refuses_to_start() {
    let p = Provider::always(Reply::status(200));
    let e = env(&p.url(), r#"headers: { "Authorization": env("LEDGER_TOKEN"), "X-Team": "ops" }"#, "");
    let out = e.jadpoc(&["run", e.prog(), "--db", e.db()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim_end(),
        "jadpoc: connection `c` needs the environment variable `LEDGER_TOKEN` (header `Authorization`), which is not set"
    );
    e.emit_paid(1);
    let (_, log) = e.run_until_with(&[], &[("LEDGER_TOKEN", "Bearer t0ps3cret")], first_is("succeeded"));
    let got = p.received();
    assert_eq!(got[0].header("authorization"), Some("Bearer t0ps3cret"));
    assert_eq!(got[0].header("x-team"), Some("ops"));
    assert!(!log.contains("t0ps3cret"), "{log}");
}

#[test]
fn http_e2e_a_fake_still_overrides_the_connection() {
    let p = Provider::always(Reply::status(500));
    let e = env(&p.url(), r#"headers: { "Authorization": env("LEDGER_TOKEN") }"#, "");
    e.emit_paid(1);
    // A faked connection needs none of its secrets.
    let (list, _) = e.run_until_with(&["--fake", "c=ok"], &[], first_is("succeeded"));
    assert_eq!(list[0]["attempts"], 1);
    assert_eq!(p.count(), 0);
}

#[test]
fn http_e2e_the_in_flight_limit_holds_under_50_concurrent_deliveries() {
    let p = Provider::always(Reply::After(Duration::from_millis(30), Box::new(Reply::status(200))));
    let e = env(&p.url(), "max_in_flight: 2", "");
    e.emit_paid(50);
    let t = now_ms();
    let (list, _) =
        e.run_until_with(&["--workers", "16"], &[], |l| l.len() == 50 && l.iter().all(|d| state(d) == "succeeded"));
    assert!(list.iter().all(|d| d["attempts"] == 1));
    assert_eq!(p.count(), 50);
    assert_eq!(p.max_concurrent(), 2);
    // 50 calls of 30ms two at a time take at least 750ms.
    assert!(now_ms() - t >= 750);
    assert!(p.connections() <= 2, "{} connections", p.connections());
}

/// Like [`env`], with the subscriber's run time limit `run_timeout`.
fn env_limited(url: &str, conn: &str, action: &str, run_timeout: &str) -> Env {
    Env::new("outbox.db", |dir| {
        let path = dir.join("p.jadpo");
        std::fs::write(&path, http_server::program_text(url, conn, action, run_timeout)).expect("write program");
        path
    })
}

/// The `Idempotency-Key`s a provider received, each with how many times.
fn keys(p: &Provider) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for r in p.received() {
        *counts.entry(r.header("idempotency-key").unwrap_or_default().to_string()).or_insert(0) += 1;
    }
    counts
}

#[test]
fn http_e2e_the_run_time_limit_parks_a_non_idempotent_call_in_flight() {
    // The connection would wait 10s; the run's limit of 1s passes while the
    // provider holds the call: it may have happened, so it is never sent again.
    let p = Provider::always(Reply::After(Duration::from_millis(1_500), Box::new(Reply::status(200))));
    let e = env_limited(&p.url(), "timeout: 10s", "", "1s");
    e.emit_paid(1);
    let (list, log) = e.run_until_with(&[], &[], first_is("parked"));
    assert_eq!(failure(&list[0]), ("outcome_unknown", "transport.no_answer"));
    assert_eq!(list[0]["attempts"], 1);
    assert!(log.contains("time limit"), "the reason is logged: {log}");
    assert_eq!(keys(&p).into_values().collect::<Vec<_>>(), vec![1]);
}

#[test]
fn http_e2e_the_run_time_limit_is_deadline_exceeded_for_an_idempotent_call() {
    let p = Provider::always(Reply::After(Duration::from_millis(1_500), Box::new(Reply::status(200))));
    let e = env_limited(&p.url(), "timeout: 10s", "idempotent: true", "1s");
    e.emit_paid(1);
    let (list, _) =
        e.run_until_with(&[], &[], |l| l.first().is_some_and(|d| d["attempts"] == 1 && state(d) == "pending"));
    assert_eq!(failure(&list[0]), ("deadline_exceeded", "deadline_exceeded"));
}

#[test]
fn http_e2e_a_delivery_waiting_for_its_slot_past_the_run_limit_is_deadline_exceeded_never_sent() {
    // One call at a time, each answered after 700ms, and a run limit of 1s: of 4
    // deliveries the first runs alone (the connection has not answered yet), then
    // the others are claimed together, and the last of them waits for its slot
    // until its limit passes.
    let p = Provider::always(Reply::After(Duration::from_millis(700), Box::new(Reply::status(200))));
    let e = env_limited(&p.url(), "timeout: 10s\n    max_in_flight: 1", "", "1s");
    e.emit_paid(4);
    let (list, _) = e.run_until_with(&[], &[], |l| {
        l.len() == 4 && l.iter().all(|d| d["attempts"].as_i64() >= Some(1) && state(d) != "running")
    });
    let received = keys(&p);
    let mut exceeded = 0;
    for d in &list {
        let first = &e.history(d)[0];
        let key = d["id"].to_string();
        match (first["outcome"].as_str(), first["kind"].as_str()) {
            (Some("succeeded"), _) => {
                let ms = first["duration_ms"].as_i64().expect("ms");
                assert!(ms <= 1_000, "delivery {key} succeeded after {ms}ms, past its limit");
            }
            (_, Some("deadline_exceeded")) => {
                exceeded += 1;
                assert_eq!(state(d), "pending", "retried: {d:#?}");
                assert!(!received.contains_key(&key), "delivery {key} ended `deadline_exceeded` but was sent");
            }
            // Sent when its slot came, and in flight at its limit.
            (_, Some("outcome_unknown")) => assert_eq!(received.get(&key), Some(&1)),
            other => panic!("delivery {key}: {other:?}"),
        }
    }
    assert!(exceeded >= 1, "no delivery waited past its limit: {list:#?}");
}

#[test]
fn http_e2e_the_run_time_limit_is_deadline_exceeded_when_nothing_was_sent() {
    // A listener whose accept queue is full: no connection is made, so the call
    // never left when the run's limit passes.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    socket.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into()).expect("bind");
    socket.listen(0).expect("listen");
    let addr = socket.local_addr().expect("addr").as_socket().expect("inet");
    let mut held = Vec::new();
    for _ in 0..4 {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
        s.set_nonblocking(true).expect("nonblocking");
        let _ = s.connect(&addr.into());
        held.push(s);
    }
    let e = env_limited(&format!("http://{addr}"), "timeout: 10s", "", "1s");
    e.emit_paid(1);
    let (list, _) =
        e.run_until_with(&[], &[], |l| l.first().is_some_and(|d| d["attempts"] == 1 && state(d) == "pending"));
    assert_eq!(failure(&list[0]), ("deadline_exceeded", "deadline_exceeded"));
}

#[test]
fn http_e2e_a_provider_closing_idle_connections_gets_every_call_once_and_none_is_parked() {
    // 500 deliveries in 20 bursts of 25, each burst about the provider's idle
    // timeout (200ms) after the last, so that the 25 pooled connections are
    // reused just as the provider closes them.
    let p = Provider::closing_idle(Duration::from_millis(200), |_, _| Reply::status(200));
    let e = env(&p.url(), "max_in_flight: 25", "");
    let run = e.start_run(&["--listen", "0"], &[]);
    let addr = wait_for_listen(&run.log);
    let mut sent = 0;
    for burst in 0..20u64 {
        let pace = Duration::from_millis(185 + (burst * 7) % 31);
        // The burst's pace is the load's shape, not a wait for a condition.
        std::thread::sleep(pace);
        for _ in 0..25 {
            post_paid(&addr, sent);
            sent += 1;
        }
    }
    expect_each_delivered_once(&e, run, &p, 500);
}

#[test]
fn http_e2e_a_provider_closing_idle_connections_at_random_moments_gets_every_call_once() {
    // 500 deliveries, each posted a random 0 to 8ms after the last, through a
    // provider closing connections idle for a random 1 to 6ms: calls are made at
    // every moment of its closes.
    let p =
        Provider::closing_at_random(3, Duration::from_millis(1)..=Duration::from_millis(6), |_, _| Reply::status(200));
    let e = env(&p.url(), "", "");
    let run = e.start_run(&["--listen", "0"], &[]);
    let addr = wait_for_listen(&run.log);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for n in 0..500 {
        // The load's shape, not a wait for a condition.
        std::thread::sleep(Duration::from_millis(rng.random_range(0..=8)));
        post_paid(&addr, n);
    }
    expect_each_delivered_once(&e, run, &p, 500);
}

/// Waits for `n` deliveries to succeed, none parked meanwhile, then stops the run:
/// the provider received each once, and closed idle connections.
fn expect_each_delivered_once(e: &Env, run: common::Running, p: &Provider, n: usize) {
    let start = std::time::Instant::now();
    let mut list = e.deliveries();
    while list.iter().filter(|d| state(d) == "succeeded").count() < n {
        let parked: Vec<(&Value, bool)> = list
            .iter()
            .filter(|d| state(d) == "parked")
            .map(|d| (&d["id"], keys(p).contains_key(&d["id"].to_string())))
            .collect();
        assert!(parked.is_empty(), "parked (id, whether the provider received it): {parked:?}");
        assert!(start.elapsed() < Duration::from_secs(60), "not all delivered");
        std::thread::sleep(Duration::from_millis(100));
        list = e.deliveries();
    }
    common::stop(run);
    let counts = keys(p);
    assert_eq!(counts.len(), n);
    assert!(counts.values().all(|n| *n == 1), "a key was received twice");
    assert!(p.idle_closes() > 0, "the provider never closed an idle connection");
}

/// The ingest's address, from the run's log line `taking events at http://ADDR/...`.
fn wait_for_listen(log: &Path) -> String {
    let start = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(rest) = text.split("taking events at http://").nth(1) {
            return rest.split('/').next().unwrap_or_default().to_string();
        }
        assert!(start.elapsed() < Duration::from_secs(30), "never listened: {text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Posts `Paid` number `n` to the ingest; it must be accepted.
fn post_paid(addr: &str, n: usize) {
    use std::io::{Read, Write};
    let body = format!("{{\"id\": \"p{n}\", \"cents\": {n}}}");
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    let head = format!(
        "POST /events/Paid HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).expect("write");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 202"), "{out}");
}

#[test]
fn http_e2e_a_bad_ssl_cert_file_or_tls_file_refuses_the_start_naming_it() {
    let e = env("https://127.0.0.1:9", "", "");
    let missing = e.dir.join("roots.pem");
    let out = e
        .cmd(&["run", e.prog(), "--db", e.db()])
        .env("SSL_CERT_FILE", &missing)
        .env_remove("SSL_CERT_DIR")
        .output()
        .expect("run jadpoc");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`SSL_CERT_FILE`: cannot read") && err.contains("roots.pem"), "{err}");

    let e = env("https://127.0.0.1:9", r#"tls: { ca: "certs/ca.pem" }"#, "");
    let out = e.cmd(&["run", e.prog(), "--db", e.db()]).env_remove("SSL_CERT_FILE").output().expect("run jadpoc");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("connection `c`: the tls `ca` file") && err.contains("ca.pem"), "{err}");
    assert!(err.contains("cannot be read"), "{err}");
}
