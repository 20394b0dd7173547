//! `jadpoc console` and `jadpoc run --console`: the loopback rule at start, and
//! the console's JSON API answering with the very shapes the commands print.

use crate::common::{Env, Running, fakes, paid_program, state, stop};
use serde_json::Value;
use std::io::{Read, Write};

/// One HTTP/1.1 GET or POST on loopback; the status line and the body.
fn request(addr: &str, method: &str, path: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    let head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    s.write_all(head.as_bytes()).expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (head.lines().next().unwrap_or_default().to_string(), body.to_string())
}

fn console_addr(run: &Running) -> String {
    let prefix = "serving the console at http://";
    let log = run.wait_for_log("the console's address", |l| l.contains(prefix));
    log.split(prefix).nth(1).unwrap_or_default().split('/').next().unwrap_or_default().to_string()
}

#[test]
fn a_console_off_loopback_without_a_token_is_refused_at_start() {
    let env = Env::new("outbox.db", paid_program);
    let refused = "refusing to serve the console on `0.0.0.0:0` without a token";
    for args in [
        vec!["console", "--db", env.db(), "--listen", "0.0.0.0:0"],
        vec!["run", env.prog(), "--db", env.db(), "--console", "0.0.0.0:0"],
    ] {
        let out = env.jadpoc(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(refused), "{args:?}: {err}");
    }
    // Nothing was started, so no store was made.
    assert!(!env.db.exists());
    let out =
        env.jadpoc(&["console", "--db", env.db(), "--listen", "0.0.0.0:0", "--token", "env:JADPO_TEST_NO_SUCH_TOKEN"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "`--token env:JADPO_TEST_NO_SUCH_TOKEN`: the environment variable `JADPO_TEST_NO_SUCH_TOKEN` is not set"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_consoles_api_answers_with_the_commands_json() {
    let env = Env::new("outbox.db", paid_program);
    assert!(env.jadpoc(&["emit", env.prog(), "Paid", r#"{"id": "p1"}"#, "--db", env.db()]).status.success());
    let mut args = vec!["--console", "127.0.0.1:0"];
    args.extend(fakes(&["c=rejected"]));
    let run = env.start_run_logging("text", &args, &[]);
    let addr = console_addr(&run);
    let start = std::time::Instant::now();
    while state(&env.show(1)) != "failed" {
        assert!(start.elapsed() < std::time::Duration::from_secs(30), "delivery 1 did not fail");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (status, body) = request(&addr, "GET", "/api/deliveries/1");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).expect("json"), env.show(1));
    let (_, body) = request(&addr, "GET", "/api/status");
    let mut api: Value = serde_json::from_str(&body).expect("json");
    let mut cli = env.status();
    // The oldest pending delivery's age moves with the clock; nothing is pending.
    api["oldest_pending_s"] = Value::Null;
    cli["oldest_pending_s"] = Value::Null;
    assert_eq!(api, cli);
    let (status, body) = request(&addr, "GET", "/");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("<h1>Overview</h1>"), "{body}");
    // Without --console-actions, no action is taken.
    let (status, body) = request(&addr, "POST", "/deliveries/1/retry");
    assert_eq!(status, "HTTP/1.1 403 Forbidden", "{body}");
    assert!(body.contains("this console is read-only"), "{body}");
    assert_eq!(state(&env.show(1)), "failed");
    stop(run);
}
