//! A transport failure's reason (the resolver's or the OS's words, a time limit)
//! is in the run's log line for its attempt, in both formats, word for word as
//! `deliveries show` gives it.

use crate::common::{Env, state, stop};
use crate::http_server::{program_text, refused_url};
use serde_json::Value;
use std::time::{Duration, Instant};

/// A listener whose accept queue is full: the kernel no longer answers SYNs, so a
/// connect gets no connection in time. The sockets are held for as long as the
/// returned value lives.
fn no_connection_in_time() -> (String, Vec<socket2::Socket>) {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
    socket.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into()).expect("bind");
    socket.listen(0).expect("listen");
    let addr = socket.local_addr().expect("addr").as_socket().expect("inet");
    let mut held = vec![];
    for _ in 0..4 {
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
        s.set_nonblocking(true).expect("nonblocking");
        let _ = s.connect(&addr.into());
        held.push(s);
    }
    held.push(socket);
    (format!("http://{addr}"), held)
}

/// Runs one delivery of `Paid` to `url` with one attempt allowed, in log `format`,
/// until it has failed; its `deliveries show` JSON and the run's log.
fn fail_once(url: &str, format: &str) -> (Value, String) {
    let env = Env::new("outbox.db", |dir| {
        let path = dir.join("p.jadpo");
        let text = program_text(url, "timeout: 300ms", "", "5s")
            .replace("    timeout: 5s\n", "    timeout: 5s\n    retry: { attempts: 1 }\n");
        std::fs::write(&path, text).expect("write program");
        path
    });
    let out = env.jadpoc(&["emit", env.prog(), "Paid", r#"{"id": "p1", "cents": 1}"#, "--db", env.db()]);
    assert!(out.status.success(), "emit: {}", String::from_utf8_lossy(&out.stderr));
    let run = env.start_run_logging(format, &[], &[]);
    let start = Instant::now();
    while env.deliveries().first().is_none_or(|d| state(d) != "failed") {
        assert!(start.elapsed() < Duration::from_secs(30), "not failed in time:\n{}", run.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = stop(run);
    (env.show(1), log)
}

fn check_reason(url: &str, code: &str) {
    for format in ["text", "json"] {
        let (shown, log) = fail_once(url, format);
        let failure = &shown["history"][0];
        assert_eq!(failure["code"], code, "{shown:#}");
        let reason = failure["reason"].as_str().unwrap_or_else(|| panic!("no reason: {shown:#}"));
        assert!(!reason.is_empty());
        let line = log
            .lines()
            .find(|l| l.contains("attempt 1") || l.contains(r#""event":"delivery.attempt""#))
            .unwrap_or_else(|| panic!("no attempt line:\n{log}"));
        match format {
            "text" => assert!(
                line.contains(&format!("failed unavailable ({code}): {reason} -> failed")),
                "the text line lacks the reason `{reason}`: {line}"
            ),
            _ => {
                let v: Value = serde_json::from_str(line).expect("a JSON line");
                assert_eq!((v["code"].as_str(), v["reason"].as_str()), (Some(code), Some(reason)), "{line}");
            }
        }
    }
}

#[test]
fn run_log_gives_the_reason_of_a_refused_connection() {
    check_reason(&refused_url(), "transport.refused");
}

#[test]
fn run_log_gives_the_reason_of_a_name_that_does_not_resolve() {
    check_reason("http://no-such-host.invalid", "transport.dns");
}

#[test]
fn run_log_gives_the_reason_of_no_connection_in_time() {
    let (url, _held) = no_connection_in_time();
    check_reason(&url, "transport.connect_timeout");
    let (shown, _) = fail_once(&url, "json");
    assert_eq!(shown["history"][0]["reason"], "no connection within 300 ms");
}
