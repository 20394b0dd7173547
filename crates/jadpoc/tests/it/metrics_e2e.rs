//! `jadpoc run --metrics` end to end: events posted to `--listen`, attempts run by
//! fake drivers, and `GET /metrics` read by a Prometheus text parser, on SQLite and
//! on PostgreSQL.

use crate::common;
use crate::common::PgDb;

use common::{Env, Running};
use prometheus_parse::{Scrape, Value};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Two events, each with its subscriber calling through its own connection.
fn program(dir: &Path) -> PathBuf {
    let path = dir.join("p.jadpo");
    let text = r#"event Paid {
    id: string
}

event Refunded {
    id: string
}

connection c {
    url: "http://127.0.0.1:9/c"
}

connection d {
    url: "http://127.0.0.1:9/d"
}

action record(id: string) {
    via: c
}

action refund(id: string) {
    via: d
}

subscriber rec {
    on: Paid
    run: record(event.id)
}

subscriber ref {
    on: Refunded
    run: refund(event.id)
}
"#;
    std::fs::write(&path, text).expect("write program");
    path
}

/// The address a log line `PREFIX ADDR/...` names, waited for (60s at most).
fn wait_for_addr(run: &Running, prefix: &str) -> String {
    let log = run.wait_for_log(prefix, |l| l.contains(prefix));
    let rest = log.split(prefix).nth(1).unwrap_or_default();
    rest.split('/').next().unwrap_or_default().to_string()
}

/// One HTTP/1.1 request; returns the status line, the head and the body.
fn request(addr: &str, method: &str, path: &str, body: &str) -> (String, String, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head.lines().next().unwrap_or_default().to_string();
    (status, head.to_string(), body.to_string())
}

fn post(addr: &str, event: &str, id: &str) {
    let (status, _, body) = request(addr, "POST", &format!("/events/{event}"), &format!(r#"{{"id": "{id}"}}"#));
    assert!(status.starts_with("HTTP/1.1 202"), "{status}: {body}");
}

/// `GET /metrics` at `addr`, parsed by a Prometheus text parser.
fn scrape(addr: &str) -> Scrape {
    let (status, head, body) = request(addr, "GET", "/metrics", "");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}: {body}");
    assert!(head.to_ascii_lowercase().contains("content-type: application/openmetrics-text"), "{head}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("parse")
}

/// The value of the sample `name` with exactly these labels (0 when it has none).
fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found = s.samples.iter().find(|x| {
        x.metric == name && x.labels.len() == labels.len() && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v))
    });
    match found.map(|x| &x.value) {
        Some(Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v)) => *v,
        Some(Value::Histogram(b)) => b.iter().find(|b| b.less_than.is_infinite()).map_or(0.0, |b| b.count),
        Some(Value::Summary(_)) | None => 0.0,
    }
}

fn settled(s: &Scrape) -> bool {
    let state = |st: &str| value(s, "jadpo_deliveries", &[("state", st)]);
    let attempts: f64 =
        s.samples.iter().filter(|x| x.metric == "jadpo_attempts_total").map(|x| value(s, &x.metric, &labels(x))).sum();
    state("succeeded") == 4.0 && state("failed") == 1.0 && attempts == 5.0
}

fn labels(x: &prometheus_parse::Sample) -> Vec<(&str, &str)> {
    x.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// Scrapes `addr` until the run has settled (60s at most); returns the last scrape.
fn scrape_until_settled(addr: &str, run: &Running) -> Scrape {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = scrape(addr);
        if settled(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "the metrics never settled: {:#?}\n{}", s.samples, run.log());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Two `Paid` and two `Refunded` posted to `--listen`, and one `Paid` stored by
/// another process (`jadpoc emit`); `c` rejects its first call, so one delivery
/// fails and four succeed: the metrics count exactly that, whoever stored what.
fn post_and_check(e: &Env) {
    let run =
        e.start_run(&["--listen", "0", "--metrics", "127.0.0.1:0", "--fake", "c=rejected,ok", "--fake", "d=ok"], &[]);
    let metrics = wait_for_addr(&run, "serving metrics at http://");
    let ingest = wait_for_addr(&run, "taking events at http://");
    assert_ne!(metrics, ingest);
    for i in 0..2 {
        post(&ingest, "Paid", &format!("p{i}"));
    }
    let out = e.jadpoc(&["emit", e.prog(), "Paid", r#"{"id": "p2"}"#, "--db", e.db()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for i in 0..2 {
        post(&ingest, "Refunded", &format!("r{i}"));
    }
    let s = scrape_until_settled(&metrics, &run);

    assert_eq!(value(&s, "jadpo_events_stored", &[("event", "Paid")]), 3.0);
    assert_eq!(value(&s, "jadpo_events_stored", &[("event", "Refunded")]), 2.0);
    let attempts = |sub: &str, outcome: &str, kind: &str| {
        value(&s, "jadpo_attempts_total", &[("subscriber", sub), ("outcome", outcome), ("kind", kind)])
    };
    assert_eq!(attempts("rec", "succeeded", ""), 2.0);
    assert_eq!(attempts("rec", "failed", "rejected"), 1.0);
    assert_eq!(attempts("ref", "succeeded", ""), 2.0);
    for st in ["pending", "running", "held", "parked", "orphaned"] {
        assert_eq!(value(&s, "jadpo_deliveries", &[("state", st)]), 0.0, "{st}");
    }
    assert_eq!(value(&s, "jadpo_oldest_pending_age_seconds", &[]), 0.0);
    // The program's version (`jadpoc emit` and the run kept the same one) with
    // the run's process, its deliveries all ended.
    let status = e.json(&["status"]);
    let hash = status["versions"][0]["hash"].as_str().unwrap_or_default();
    let version = &hash[..12.min(hash.len())];
    assert_eq!(value(&s, "jadpo_program_version_processes", &[("version", version)]), 1.0);
    assert_eq!(value(&s, "jadpo_program_version_in_flight", &[("version", version)]), 0.0);
    for (conn, n) in [("c", 3.0), ("d", 2.0)] {
        assert_eq!(value(&s, "jadpo_attempt_duration_seconds", &[("connection", conn)]), n, "{conn}");
        assert_eq!(value(&s, "jadpo_attempt_duration_seconds_count", &[("connection", conn)]), n, "{conn}");
        assert_eq!(value(&s, "jadpo_breaker_state", &[("connection", conn), ("state", "closed")]), 1.0);
        assert_eq!(value(&s, "jadpo_breaker_state", &[("connection", conn), ("state", "open")]), 0.0);
        assert_eq!(value(&s, "jadpo_breaker_state", &[("connection", conn), ("state", "probing")]), 0.0);
    }
    for (sub, n) in [("rec", 3.0), ("ref", 2.0)] {
        assert_eq!(value(&s, "jadpo_claim_lag_seconds", &[("subscriber", sub)]), n, "{sub}");
    }

    // Every family has its help; every label is a name of the program or a word
    // of the runtime's: no id, no payload value.
    for family in [
        "jadpo_events_stored",
        "jadpo_attempts",
        "jadpo_attempt_duration_seconds",
        "jadpo_claim_lag_seconds",
        "jadpo_deliveries",
        "jadpo_breaker_state",
        "jadpo_oldest_pending_age_seconds",
        "jadpo_rate_waits",
        "jadpo_program_version_processes",
        "jadpo_program_version_in_flight",
    ] {
        assert!(s.docs.get(family).is_some_and(|d| !d.is_empty()), "no HELP for {family}");
    }
    let words: BTreeSet<&str> = [
        "Paid",
        "Refunded",
        "rec",
        "ref",
        "c",
        "d",
        "succeeded",
        "failed",
        "rejected",
        "",
        "pending",
        "running",
        "held",
        "parked",
        "skipped",
        "orphaned",
        version,
        "closed",
        "open",
        "probing",
    ]
    .into();
    for x in &s.samples {
        for (k, v) in x.labels.iter() {
            let builtin = k == "event" && v.starts_with("jadpo.");
            assert!(words.contains(v.as_str()) || builtin, "label {k}={v} of {} is no name of the program", x.metric);
        }
    }
    let series = s.samples.len();
    assert!(series < 40, "{series} series for a program of two subscribers: {:#?}", s.samples);

    // The ingest serves the same metrics.
    let again = scrape(&ingest);
    assert_eq!(
        value(&again, "jadpo_attempts_total", &[("subscriber", "rec"), ("outcome", "succeeded"), ("kind", "")]),
        2.0
    );
    assert_eq!(value(&again, "jadpo_events_stored", &[("event", "Paid")]), 3.0);
    let (status, head, _) = request(&metrics, "POST", "/metrics", "");
    assert!(status.starts_with("HTTP/1.1 405") && head.contains("allow: GET"), "{status}\n{head}");
    let (status, _, _) = request(&metrics, "GET", "/other", "");
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");
    common::stop(run);
}

#[test]
fn metrics_count_attempts_events_and_deliveries_on_sqlite() {
    let e = Env::new("outbox.db", program);
    post_and_check(&e);
}

#[test]
fn metrics_count_attempts_events_and_deliveries_on_postgres() {
    let Some(pg) = PgDb::new() else { return };
    let mut e = Env::new("unused.db", program);
    e.db = PathBuf::from(&pg.url);
    post_and_check(&e);
}

#[test]
fn metrics_on_an_address_in_use_stop_the_start_with_exit_2() {
    let e = Env::new("outbox.db", program);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let out = e.jadpoc(&["run", e.prog(), "--db", e.db(), "--fake", "c=ok", "--fake", "d=ok", "--metrics", &addr]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("cannot serve metrics on `{addr}`")), "{err}");
    let out = e.jadpoc(&["run", e.prog(), "--db", e.db(), "--fake", "c=ok", "--fake", "d=ok", "--metrics", "nowhere"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`--metrics nowhere` is not an address"), "{err}");
}
