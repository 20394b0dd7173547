//! `jadpoc run --listen` as a process: what a stop does to the requests in flight,
//! and what a client gets when the process has no file descriptor left. On SQLite
//! and on PostgreSQL.

use crate::common;
use crate::common::PgDb;

use common::{Env, Running};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn program(dir: &Path) -> PathBuf {
    crate::common::paid_program(dir)
}

/// The ingest's address, from the run's start line.
fn ingest_addr(run: &Running) -> String {
    let prefix = "taking events at http://";
    let log = run.wait_for_log(prefix, |l| l.contains(prefix));
    log.split(prefix).nth(1).unwrap_or_default().split('/').next().unwrap_or_default().to_string()
}

fn head(body: &str) -> String {
    format!(
        "POST /events/Paid HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
}

/// Sends the head of a request for `body` asking to continue, and waits (30s at
/// most) for the `100 Continue` that says the ingest has read the head and is
/// reading the body: the request is in flight.
fn start_request(addr: &str, body: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    let head = head(body).replace("\r\n\r\n", "\r\nExpect: 100-continue\r\n\r\n");
    s.write_all(head.as_bytes()).expect("write");
    s.set_read_timeout(Some(Duration::from_secs(30))).expect("read timeout");
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).expect("an interim answer");
        got.push(byte[0]);
    }
    assert!(got.starts_with(b"HTTP/1.1 100"), "{}", String::from_utf8_lossy(&got));
    s
}

/// What a client got for its request.
#[derive(Debug, PartialEq)]
enum Got {
    /// An answer: its status, whether it carried `Retry-After`, and the id of a
    /// `202`.
    Answer { status: u16, retry_after: bool, id: Option<i64> },
    /// The connection was closed (or reset) with no answer.
    Closed,
    /// Nothing came before the deadline.
    Nothing,
}

/// Reads one answer off `s`, waiting `wait` at most.
fn read_answer(s: &mut TcpStream, wait: Duration) -> Got {
    s.set_read_timeout(Some(wait)).expect("read timeout");
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) && out.is_empty() => {
                return Got::Nothing;
            }
            Err(_) => break,
        }
        let text = String::from_utf8_lossy(&out);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                .and_then(|v| v.parse::<usize>().ok());
            if len.is_some_and(|n| body.len() >= n) {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&out);
    let Some((head, body)) = text.split_once("\r\n\r\n") else { return Got::Closed };
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let retry_after = head.lines().any(|l| l.to_ascii_lowercase().starts_with("retry-after:"));
    let id = serde_json::from_str::<serde_json::Value>(body).ok().and_then(|v| v["id"].as_i64());
    Got::Answer { status, retry_after, id }
}

/// What holds the store's writes back for a while, as a busy store or a slow
/// disk would: the write lock of SQLite, the events' table lock on PostgreSQL.
enum Held {
    Sqlite(rusqlite::Connection),
    Postgres(postgres::Client),
}

impl Held {
    fn take(e: &Env, pg: Option<&PgDb>) -> Held {
        match pg {
            None => {
                let c = rusqlite::Connection::open(&e.db).expect("open the store");
                c.execute_batch("BEGIN IMMEDIATE").expect("take the write lock");
                Held::Sqlite(c)
            }
            Some(pg) => {
                let mut c = postgres::Client::connect(&pg.url, postgres::NoTls).expect("connect");
                c.batch_execute("BEGIN; LOCK TABLE jadpo.events IN EXCLUSIVE MODE").expect("lock the events");
                Held::Postgres(c)
            }
        }
    }

    fn release(self) {
        match self {
            Held::Sqlite(c) => c.execute_batch("ROLLBACK").expect("release"),
            Held::Postgres(mut c) => c.batch_execute("ROLLBACK").expect("release"),
        }
    }
}

/// Requests in flight when SIGINT arrives (their heads read): three whose bodies
/// are only half sent, three complete ones whose commit is held. Each must get its answer, a `202`
/// whose id is stored or a `503` with `Retry-After`, and none a connection
/// closed on it; then the run exits 0.
fn a_stop_answers_every_request_in_flight(e: &Env, pg: Option<&PgDb>) {
    let run = e.start_run(&["--listen", "0", "--fake", "c=ok"], &[]);
    let addr = ingest_addr(&run);
    let mut first = TcpStream::connect(&addr).expect("connect");
    first.write_all(format!("{}{}", head(r#"{"id": "p0"}"#), r#"{"id": "p0"}"#).as_bytes()).expect("write");
    let Got::Answer { status: 202, id: Some(_), .. } = read_answer(&mut first, Duration::from_secs(30)) else {
        panic!("the ingest does not take events: {}", run.log());
    };
    let held = Held::take(e, pg);
    let mut complete = Vec::new();
    for i in 0..3 {
        let body = format!(r#"{{"id": "held{i}"}}"#);
        let mut s = start_request(&addr, &body);
        s.write_all(body.as_bytes()).expect("write");
        complete.push(s);
    }
    let mut halves = Vec::new();
    for i in 0..3 {
        let body = format!(r#"{{"id": "slow{i}"}}"#);
        let (sent, rest) = body.split_at(body.len() / 2);
        let mut s = start_request(&addr, &body);
        s.write_all(sent.as_bytes()).expect("write");
        halves.push((s, rest.to_string()));
    }
    let _ = Command::new("kill").args(["-INT", &run.child.id().to_string()]).status();
    run.wait_for_log("the stop", |l| l.contains("jadpoc: stopping"));
    held.release();
    let mut got = Vec::new();
    for (mut s, rest) in halves {
        // A write the process refuses shows in the answer read next.
        let _ = s.write_all(rest.as_bytes());
        got.push(read_answer(&mut s, Duration::from_secs(30)));
    }
    for mut s in complete {
        got.push(read_answer(&mut s, Duration::from_secs(30)));
    }
    let log = common::stop(run);
    let mut acknowledged = Vec::new();
    for g in &got {
        match g {
            Got::Answer { status: 202, id: Some(id), .. } => acknowledged.push(*id),
            Got::Answer { status: 503, retry_after: true, .. } => {}
            other => panic!("a request in flight got {other:?}; all got {got:?}\n{log}"),
        }
    }
    let stored: Vec<i64> = e.deliveries().iter().filter_map(|d| d["event_id"].as_i64()).collect();
    for id in acknowledged {
        assert!(stored.contains(&id), "event {id} was acknowledged and is not stored: {stored:?}");
    }
}

#[test]
fn listen_a_stop_answers_every_request_in_flight_on_sqlite() {
    let e = Env::new("outbox.db", program);
    a_stop_answers_every_request_in_flight(&e, None);
}

#[test]
fn listen_a_stop_answers_every_request_in_flight_on_postgres() {
    let Some(pg) = PgDb::new() else { return };
    let mut e = Env::new("unused.db", program);
    e.db = PathBuf::from(&pg.url);
    a_stop_answers_every_request_in_flight(&e, Some(&pg));
}

/// The file descriptors `jadpoc run` may open in the next test.
const DESCRIPTORS: u32 = 256;

/// `jadpoc run --listen` allowed [`DESCRIPTORS`] file descriptors; 300 idle
/// clients take them all. A valid POST must then get an answer, or see its
/// connection closed, at once: never be left waiting for an idle client to time
/// out.
fn no_descriptor_left_answers_or_refuses_at_once(e: &Env) {
    let mut args = vec!["run", e.prog(), "--db", e.db(), "--log-format", "json", "--listen", "0", "--fake", "c=ok"];
    let limit = format!("ulimit -n {DESCRIPTORS} && exec \"$@\"");
    args.insert(0, common::JADPOC);
    let log = e.dir.join("run.log");
    let file = std::fs::File::create(&log).expect("log file");
    let child = Command::new("sh")
        .args(["-c", &limit, "sh"])
        .args(&args)
        .current_dir(&e.dir)
        .stdout(Stdio::null())
        .stderr(Stdio::from(file))
        .spawn()
        .expect("start jadpoc run");
    let run = Running { child, log };
    let addr = ingest_addr(&run);
    let idle: Vec<TcpStream> = (0..300).map(|_| TcpStream::connect(&addr).expect("connect")).collect();
    let body = r#"{"id": "p1"}"#;
    let start = Instant::now();
    let got = match TcpStream::connect(&addr) {
        Ok(mut s) => {
            let _ = s.write_all(format!("{}{body}", head(body)).as_bytes());
            read_answer(&mut s, Duration::from_secs(5))
        }
        Err(_) => Got::Closed,
    };
    let waited = start.elapsed();
    match got {
        Got::Closed | Got::Answer { status: 202 | 503, .. } => {}
        Got::Answer { .. } | Got::Nothing => {
            panic!("the POST got {got:?} after {waited:?} with no descriptor left:\n{}", run.log())
        }
    }
    assert!(waited < Duration::from_secs(5), "answered only after {waited:?}");
    drop(idle);
    common::stop(run);
}

#[test]
fn listen_with_no_descriptor_left_answers_or_refuses_at_once_on_sqlite() {
    let e = Env::new("outbox.db", program);
    no_descriptor_left_answers_or_refuses_at_once(&e);
}

#[test]
fn listen_with_no_descriptor_left_answers_or_refuses_at_once_on_postgres() {
    let Some(pg) = PgDb::new() else { return };
    let mut e = Env::new("unused.db", program);
    e.db = PathBuf::from(&pg.url);
    no_descriptor_left_answers_or_refuses_at_once(&e);
}
