//! The HTTP driver against a real provider on 127.0.0.1: the request it sends, the
//! answer mapping table row by row, Retry-After, transport failures, the
//! connection's own re-sends, the in-flight limit and keep-alive.

use crate::http_server;

use http_server::{Provider, Received, Reply, refused_url};
use jadpo_check::program::{FailureKind, Program};
use jadpo_core::drivers::{CallRequest, Driver, SendMark};
use jadpo_core::rng::RandomSource;
use jadpo_core::rules::{CallFailure, Outcome};
use jadpo_http::client::{HttpClient, HttpDriver, HttpSetupError};
use rand::RngExt;
use serde_json::json;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// A checked program: connection `c` at `url` with `conn` added to its block,
/// action `record` (with `action` added) and a subscriber whose run limit is
/// `run_timeout`.
fn program(url: &str, conn: &str, action: &str, run_timeout: &str) -> Arc<Program> {
    let text = http_server::program_text(url, conn, action, run_timeout);
    jadpo_test_support::program(&text)
}

fn no_env(_: &str) -> Option<OsString> {
    None
}

fn driver_for(p: &Program) -> HttpDriver {
    HttpDriver::new(p, 0, HttpClient::new().expect("client"), &no_env).expect("driver")
}

/// A driver for `url` with the connection's `conn` keys and the action's `action` keys.
fn driver(url: &str, conn: &str, action: &str) -> HttpDriver {
    driver_for(&program(url, conn, action, "30s"))
}

fn request(delivery: i64, attempt: u32) -> CallRequest {
    CallRequest {
        action: "record".into(),
        args: json!({"id": "p1", "cents": 250}),
        event_id: Some(7),
        event: "Paid".into(),
        delivery: Some(delivery),
        attempt,
    }
}

/// A call's outcome, its failure's reason left out (see [`call_sent`]).
async fn call(d: &HttpDriver) -> Outcome {
    call_sent(d).await.0
}

/// A call's outcome without its failure's reason, and the reason.
async fn call_sent(d: &HttpDriver) -> (Outcome, String) {
    match d.call(request(42, 1)).await {
        Outcome::Failed(mut f) => {
            let reason = f.reason.take().unwrap_or_default();
            (Outcome::Failed(f), reason)
        }
        ok => (ok, String::new()),
    }
}

fn failed(kind: FailureKind, code: &str, status: Option<u16>, retry_after_ms: Option<u64>) -> Outcome {
    Outcome::Failed(CallFailure { kind, code: code.into(), http_status: status, retry_after_ms, reason: None })
}

/// One answer from a provider that always gives `reply`.
async fn answer_to(reply: Reply) -> (Outcome, Provider) {
    let p = Provider::always(reply);
    let o = call(&driver(&p.url(), "", "")).await;
    (o, p)
}

#[tokio::test]
async fn http_sends_the_call_as_documented() {
    let p = Provider::always(Reply::status(200));
    let prog = program(
        &format!("{}/jadpo/", p.url()),
        r#"headers: { "Authorization": env("TOKEN"), "X-Team": "ops" }"#,
        "",
        "30s",
    );
    let env = |name: &str| (name == "TOKEN").then(|| OsString::from("Bearer s3cret"));
    let d = HttpDriver::new(&prog, 0, HttpClient::new().expect("client"), &env).expect("driver");
    assert_eq!(d.call(request(42, 3)).await, Outcome::Succeeded { http_status: Some(200) });
    let got = p.received();
    assert_eq!(got.len(), 1);
    let r: &Received = &got[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/jadpo/record");
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("idempotency-key"), Some("42"));
    assert_eq!(r.header("authorization"), Some("Bearer s3cret"));
    assert_eq!(r.header("x-team"), Some("ops"));
    assert_eq!(
        r.json(),
        json!({
            "action": "record",
            "args": {"id": "p1", "cents": 250},
            "event": {"id": 7, "name": "Paid"},
            "delivery": 42,
            "attempt": 3
        })
    );
    // Secrets stay out of debug output.
    assert!(!format!("{d:?}").contains("s3cret"));
}

#[tokio::test]
async fn http_an_actions_path_is_appended_to_the_url() {
    let p = Provider::always(Reply::status(204));
    let d = driver(&format!("{}/v2", p.url()), "", r#"path: "/payments""#);
    assert_eq!(call(&d).await, Outcome::Succeeded { http_status: Some(204) });
    assert_eq!(p.received()[0].path, "/v2/payments");
}

#[test]
fn http_an_unset_env_secret_refuses_the_driver_naming_it() {
    let prog = program("http://127.0.0.1:9", r#"headers: { "Authorization": env("LEDGER_TOKEN") }"#, "", "30s");
    let e = HttpDriver::new(&prog, 0, HttpClient::new().expect("client"), &no_env).expect_err("refused");
    assert_eq!(
        e,
        HttpSetupError::MissingEnv {
            connection: "c".into(),
            header: "Authorization".into(),
            name: "LEDGER_TOKEN".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "connection `c` needs the environment variable `LEDGER_TOKEN` (header `Authorization`), which is not set"
    );
    let bad = |_: &str| Some(OsString::from("line\nbreak"));
    let e = HttpDriver::new(&prog, 0, HttpClient::new().expect("client"), &bad).expect_err("refused");
    assert!(matches!(e, HttpSetupError::BadEnv { .. }), "{e}");
    assert!(!e.to_string().contains("break"), "the value is never shown: {e}");
}

#[test]
fn http_a_connection_the_program_does_not_have_is_refused_as_such() {
    let prog = program("http://127.0.0.1:9", "", "", "30s");
    let e = HttpDriver::new(&prog, 5, HttpClient::new().expect("client"), &no_env).expect_err("refused");
    assert_eq!(e, HttpSetupError::NoConnection { index: 5 });
    assert_eq!(e.to_string(), "the program has no connection #5");
}

#[tokio::test]
async fn http_2xx_succeeds() {
    assert_eq!(answer_to(Reply::status(200)).await.0, Outcome::Succeeded { http_status: Some(200) });
    assert_eq!(answer_to(Reply::status(201)).await.0, Outcome::Succeeded { http_status: Some(201) });
}

#[tokio::test]
async fn http_a_failure_body_wins_on_any_status() {
    let body = r#"{"failure": {"code": "ledger.closed", "kind": "conflict"}}"#;
    let (o, _) = answer_to(Reply::json(200, body)).await;
    assert_eq!(o, failed(FailureKind::Conflict, "ledger.closed", Some(200), None));
    let (o, _) = answer_to(Reply::json(503, body)).await;
    assert_eq!(o, failed(FailureKind::Conflict, "ledger.closed", Some(503), None));
    let body = r#"{"failure": {"code": "ledger.slow", "kind": "unavailable"}}"#;
    let (o, _) = answer_to(Reply::json(400, body)).await;
    assert_eq!(o, failed(FailureKind::Unavailable, "ledger.slow", Some(400), None));
}

#[tokio::test]
async fn http_a_failure_body_with_an_unknown_kind_is_internal_fault() {
    let body = r#"{"failure": {"code": "ledger.odd", "kind": "on_fire"}}"#;
    let (o, _) = answer_to(Reply::json(422, body)).await;
    assert_eq!(o, failed(FailureKind::InternalFault, "ledger.odd", Some(422), None));
}

#[tokio::test]
async fn http_429_is_rate_limited() {
    let (o, _) = answer_to(Reply::status(429)).await;
    assert_eq!(o, failed(FailureKind::RateLimited, "http.429", Some(429), None));
}

#[tokio::test]
async fn http_408_and_5xx_are_unavailable() {
    for s in [408, 500, 502, 503, 504] {
        let (o, _) = answer_to(Reply::status(s)).await;
        assert_eq!(o, failed(FailureKind::Unavailable, &format!("http.{s}"), Some(s), None), "{s}");
    }
}

#[tokio::test]
async fn http_404_is_not_found() {
    let (o, _) = answer_to(Reply::status(404)).await;
    assert_eq!(o, failed(FailureKind::NotFound, "http.404", Some(404), None));
}

#[tokio::test]
async fn http_409_is_conflict() {
    let (o, _) = answer_to(Reply::status(409)).await;
    assert_eq!(o, failed(FailureKind::Conflict, "http.409", Some(409), None));
}

#[tokio::test]
async fn http_401_403_other_4xx_and_3xx_are_rejected() {
    for s in [401, 403, 400, 410, 422, 300, 304] {
        let (o, _) = answer_to(Reply::status(s)).await;
        assert_eq!(o, failed(FailureKind::Rejected, &format!("http.{s}"), Some(s), None), "{s}");
    }
}

#[tokio::test]
async fn http_redirects_are_not_followed() {
    let p = Provider::start(|_, r| {
        if r.path == "/record" { Reply::with_header(307, "Location", "/elsewhere") } else { Reply::status(200) }
    });
    let o = call(&driver(&p.url(), "", "")).await;
    assert_eq!(o, failed(FailureKind::Rejected, "http.307", Some(307), None));
    let paths: Vec<String> = p.received().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, vec!["/record"]);
}

#[tokio::test]
async fn http_retry_after_in_delta_seconds_is_kept() {
    let (o, _) = answer_to(Reply::with_header(503, "Retry-After", "120")).await;
    assert_eq!(o, failed(FailureKind::Unavailable, "http.503", Some(503), Some(120_000)));
}

#[tokio::test]
async fn http_retry_after_as_an_http_date_is_kept() {
    let at = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(300));
    let (o, _) = answer_to(Reply::with_header(429, "Retry-After", &at)).await;
    let Outcome::Failed(f) = o else { panic!("a failure: {o:?}") };
    assert_eq!((f.kind, f.code.as_str(), f.http_status), (FailureKind::RateLimited, "http.429", Some(429)));
    let ms = f.retry_after_ms.expect("a retry-after");
    // The date has whole seconds: up to 1s less, plus the time the call took.
    assert!((298_000..=300_000).contains(&ms), "{ms}");
}

#[tokio::test]
async fn http_retry_after_on_a_non_retryable_answer_is_ignored() {
    let (o, _) = answer_to(Reply::with_header(409, "Retry-After", "120")).await;
    assert_eq!(o, failed(FailureKind::Conflict, "http.409", Some(409), None));
}

#[tokio::test]
async fn http_a_refused_connection_is_unavailable_transport_refused() {
    let (o, reason) = call_sent(&driver(&refused_url(), "", "")).await;
    assert_eq!(o, failed(FailureKind::Unavailable, "transport.refused", None, None));
    assert!(reason.to_lowercase().contains("refused"), "{reason}");
}

#[tokio::test]
async fn http_a_name_that_does_not_resolve_is_unavailable_transport_dns() {
    let (o, reason) = call_sent(&driver("http://no-such-host.invalid", "", "")).await;
    assert_eq!(o, failed(FailureKind::Unavailable, "transport.dns", None, None));
    assert!(!reason.is_empty() && reason != "dns error", "{reason}");
}

#[tokio::test]
async fn http_no_connection_in_time_is_unavailable_transport_connect_timeout() {
    // A listener whose accept queue is full: the kernel no longer answers SYNs.
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
    let d = driver(&format!("http://{addr}"), "timeout: 300ms", "");
    let (o, reason) = call_sent(&d).await;
    assert_eq!(o, failed(FailureKind::Unavailable, "transport.connect_timeout", None, None));
    assert_eq!(reason, "no connection within 300 ms");
}

#[tokio::test]
async fn http_a_tls_failure_is_unavailable_transport_tls() {
    // An https call to a plain-HTTP provider fails its handshake before sending.
    let p = Provider::always(Reply::status(200));
    let (o, reason) = call_sent(&driver(&p.url().replace("http://", "https://"), "", "")).await;
    assert_eq!(o, failed(FailureKind::Unavailable, "transport.tls", None, None));
    assert!(!reason.is_empty(), "a reason");
    assert_eq!(p.count(), 0);
}

#[tokio::test]
async fn http_an_answer_that_is_not_http_is_internal_fault() {
    let (o, _) = answer_to(Reply::Raw("HELLO THERE\r\n\r\n".into())).await;
    assert_eq!(o, failed(FailureKind::InternalFault, "http.invalid_answer", None, None));
}

#[tokio::test]
async fn http_a_body_cut_short_is_internal_fault_whatever_the_status() {
    let cut = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"ok\": ";
    let p = Provider::always(Reply::Raw(cut.into()));
    let (o, reason) = call_sent(&driver(&p.url(), "", "")).await;
    assert_eq!(o, failed(FailureKind::InternalFault, "http.invalid_answer", Some(200), None));
    assert!(reason.contains("cut short"), "{reason}");
    // A chunked body that stops before its last chunk.
    let cut = "HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n";
    let (o, _) = answer_to(Reply::Raw(cut.into())).await;
    assert_eq!(o, failed(FailureKind::InternalFault, "http.invalid_answer", Some(503), None));
    // Neither is re-sent by the connection's retry: a defect is not retried.
    let p = Provider::always(Reply::Raw("HTTP/1.1 503 Busy\r\nContent-Length: 9\r\n\r\nab".into()));
    let d = driver(&p.url(), "retry: { attempts: 3 }", "");
    assert_eq!(call(&d).await, failed(FailureKind::InternalFault, "http.invalid_answer", Some(503), None));
    assert_eq!(p.count(), 1);
}

#[tokio::test]
async fn http_a_user_agent_is_sent_unless_the_connection_sets_one() {
    let p = Provider::always(Reply::status(200));
    call(&driver(&p.url(), "", "")).await;
    let ua = format!("jadpo/{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(p.received()[0].header("user-agent"), Some(ua.as_str()));
    let p = Provider::always(Reply::status(200));
    call(&driver(&p.url(), r#"headers: { "User-Agent": "shop/2" }"#, "")).await;
    assert_eq!(p.received()[0].header("user-agent"), Some("shop/2"));
}

#[tokio::test]
async fn http_the_url_and_the_path_join_with_one_slash_and_the_path_keeps_its_query() {
    for (base, path, want) in [
        ("/v2/", "/payments", "/v2/payments"),
        ("/v2", "/payments", "/v2/payments"),
        ("/v2//", "/payments", "/v2/payments"),
        ("", "/payments?mode=fast", "/payments?mode=fast"),
        ("/", "/payments?mode=fast", "/payments?mode=fast"),
        ("/v2/", "/pay?a=1&b=2", "/v2/pay?a=1&b=2"),
    ] {
        let p = Provider::always(Reply::status(204));
        let d = driver(&format!("{}{base}", p.url()), "", &format!("path: \"{path}\""));
        assert_eq!(call(&d).await, Outcome::Succeeded { http_status: Some(204) }, "{base} {path}");
        assert_eq!(p.received()[0].path, want, "{base} + {path}");
    }
}

#[tokio::test]
async fn http_a_call_the_provider_read_and_left_unanswered_on_a_reused_connection_is_not_resent() {
    let p = Provider::start(|n, _| if n == 0 { Reply::status(200) } else { Reply::Close });
    let d = driver(&p.url(), "", "");
    assert_eq!(call(&d).await, Outcome::Succeeded { http_status: Some(200) });
    let (o, _) = call_sent(&d).await;
    assert_eq!(o, failed(FailureKind::OutcomeUnknown, "transport.no_answer", None, None));
    // Received once, on the reused connection; never sent again.
    assert_eq!(p.count(), 2);
    assert_eq!(p.connections(), 1);
    assert_eq!(d.resent_on_fresh_connection(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_calls_racing_a_provider_closing_idle_connections_are_never_parked() {
    // 500 calls, 50 at a time, each caller pausing about the provider's idle
    // timeout (200ms) between its calls, so that pooled connections are often
    // reused just as the provider closes them.
    let p = Provider::closing_idle(Duration::from_millis(200), |_, _| Reply::status(200));
    let d = Arc::new(driver(&p.url(), "max_in_flight: 64", ""));
    let mut tasks = Vec::new();
    for t in 0..50i64 {
        let d = d.clone();
        tasks.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for n in 0..10i64 {
                // 185..215ms, different for each caller and call.
                tokio::time::sleep(Duration::from_millis(185 + ((t * 7 + n * 13) % 31) as u64)).await;
                outcomes.push(d.call(request(t * 100 + n, 1)).await);
            }
            outcomes
        }));
    }
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.extend(t.await.expect("caller"));
    }
    let not_ok: Vec<&Outcome> = outcomes.iter().filter(|o| !matches!(o, Outcome::Succeeded { .. })).collect();
    assert!(not_ok.is_empty(), "{} of 500 did not succeed: {:?}", not_ok.len(), &not_ok[..not_ok.len().min(5)]);
    // Every key reached the provider exactly once.
    let mut keys: Vec<String> =
        p.received().iter().map(|r| r.header("idempotency-key").unwrap_or_default().to_string()).collect();
    keys.sort();
    let before = keys.len();
    keys.dedup();
    assert_eq!((before, keys.len()), (500, 500));
    assert!(p.idle_closes() > 0, "the provider never closed an idle connection");
}

/// 500 calls of an action that is not idempotent, 10 callers at a time, each
/// pausing a random 0 to 10ms before each of its calls, through a provider that
/// closes connections idle for a random 1 to 6ms: the outcomes by key, the keys
/// the provider received with how many times each, and its idle closes.
async fn race_random_closes(seed: u64) -> (Vec<(String, Outcome)>, BTreeMap<String, usize>, usize) {
    let idle = Duration::from_millis(1)..=Duration::from_millis(6);
    let p = Provider::closing_at_random(seed, idle, |_, _| Reply::status(200));
    let d = Arc::new(driver(&p.url(), "max_in_flight: 32", ""));
    let random = RandomSource::from_seed(seed);
    let tasks: Vec<_> = (0..10i64)
        .map(|t| {
            let pauses: Vec<u64> = random.with(|r| (0..50).map(|_| r.random_range(0..=10)).collect());
            let d = d.clone();
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                for (n, pause) in (0i64..).zip(pauses) {
                    // The load's shape: calls land at every moment of the provider's closes.
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                    let delivery = t * 100 + n;
                    outcomes.push((delivery.to_string(), d.call(request(delivery, 1)).await));
                }
                outcomes
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.extend(t.await.expect("caller"));
    }
    let mut received = BTreeMap::new();
    for r in p.received() {
        *received.entry(r.header("idempotency-key").unwrap_or_default().to_string()).or_insert(0) += 1;
    }
    (outcomes, received, p.idle_closes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_a_provider_closing_idle_connections_at_random_moments_gets_every_call_once() {
    for seed in [1, 2] {
        let (outcomes, received, closes) = race_random_closes(seed).await;
        assert_eq!(outcomes.len(), 500);
        assert!(closes >= 20, "seed {seed}: the provider closed only {closes} idle connections");
        let unknown = |o: &Outcome| o.failure().is_some_and(|f| f.kind == FailureKind::OutcomeUnknown);
        let parked_unread: Vec<&(String, Outcome)> =
            outcomes.iter().filter(|(key, o)| unknown(o) && !received.contains_key(key)).collect();
        assert!(parked_unread.is_empty(), "seed {seed}: outcome_unknown though never received: {parked_unread:?}");
        let twice: Vec<(&String, &usize)> = received.iter().filter(|(_, n)| **n > 1).collect();
        assert!(twice.is_empty(), "seed {seed}: received more than once: {twice:?}");
        // The provider answers every request it reads: every call succeeds.
        let not_ok: Vec<&(String, Outcome)> =
            outcomes.iter().filter(|(_, o)| !matches!(o, Outcome::Succeeded { .. })).collect();
        assert!(not_ok.is_empty(), "seed {seed}: {} of 500 did not succeed: {not_ok:?}", not_ok.len());
        assert_eq!(received.len(), 500);
    }
}

#[tokio::test]
async fn http_no_answer_is_outcome_unknown_for_a_non_idempotent_action() {
    let p = Provider::always(Reply::Hang);
    let d = driver(&p.url(), "timeout: 300ms\n retry: { attempts: 3 }", "");
    let t = Instant::now();
    assert_eq!(call(&d).await, failed(FailureKind::OutcomeUnknown, "transport.no_answer", None, None));
    // The connection's timeout bounded the send, and outcome_unknown is never re-sent.
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(p.count(), 1);
}

#[tokio::test]
async fn http_no_answer_is_unavailable_for_an_idempotent_action() {
    let p = Provider::always(Reply::Hang);
    let d = driver(&p.url(), "timeout: 300ms", "idempotent: true");
    assert_eq!(call(&d).await, failed(FailureKind::Unavailable, "transport.no_answer", None, None));
}

#[tokio::test]
async fn http_a_reset_after_sending_is_outcome_unknown_or_unavailable_when_idempotent() {
    let p = Provider::always(Reply::Close);
    assert_eq!(
        call(&driver(&p.url(), "", "")).await,
        failed(FailureKind::OutcomeUnknown, "transport.no_answer", None, None)
    );
    assert_eq!(
        call(&driver(&p.url(), "", "idempotent: true")).await,
        failed(FailureKind::Unavailable, "transport.no_answer", None, None)
    );
}

#[tokio::test]
async fn http_connection_resends_count_as_one_call_ending_by_the_last_send() {
    let p = Provider::start(|n, _| if n < 2 { Reply::status(503) } else { Reply::status(200) });
    let d = driver(&p.url(), "retry: { attempts: 3 }", "");
    let t = Instant::now();
    assert_eq!(call(&d).await, Outcome::Succeeded { http_status: Some(200) });
    assert_eq!(p.count(), 3);
    // Waits of 50..100ms then 100..200ms.
    assert!(t.elapsed() >= Duration::from_millis(150), "{:?}", t.elapsed());
    // Every send carries the same attempt number and key.
    assert!(p.received().iter().all(|r| r.json()["attempt"] == 1 && r.header("idempotency-key") == Some("42")));

    let p = Provider::start(|n, _| if n == 0 { Reply::status(429) } else { Reply::status(502) });
    let d = driver(&p.url(), "retry: { attempts: 3 }", "");
    assert_eq!(call(&d).await, failed(FailureKind::Unavailable, "http.502", Some(502), None));
    assert_eq!(p.count(), 3);
}

#[tokio::test]
async fn http_no_connection_resend_without_retry_or_on_a_declared_failure() {
    let p = Provider::always(Reply::status(503));
    assert_eq!(call(&driver(&p.url(), "", "")).await, failed(FailureKind::Unavailable, "http.503", Some(503), None));
    assert_eq!(p.count(), 1);
    let p = Provider::always(Reply::status(404));
    let d = driver(&p.url(), "retry: { attempts: 5 }", "");
    assert_eq!(call(&d).await, failed(FailureKind::NotFound, "http.404", Some(404), None));
    assert_eq!(p.count(), 1);
}

#[tokio::test]
async fn http_a_short_retry_after_is_honoured_between_resends() {
    let p =
        Provider::start(|n, _| if n == 0 { Reply::with_header(503, "Retry-After", "1") } else { Reply::status(200) });
    let d = driver(&p.url(), "retry: { attempts: 2 }", "");
    let t = Instant::now();
    assert_eq!(call(&d).await, Outcome::Succeeded { http_status: Some(200) });
    assert!(t.elapsed() >= Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(p.count(), 2);
}

#[tokio::test]
async fn http_a_retry_after_past_the_run_limit_ends_the_call_for_the_core() {
    let p = Provider::always(Reply::with_header(503, "Retry-After", "60"));
    let d = driver(&p.url(), "retry: { attempts: 5 }", "");
    let t = Instant::now();
    assert_eq!(call(&d).await, failed(FailureKind::Unavailable, "http.503", Some(503), Some(60_000)));
    assert_eq!(p.count(), 1);
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn http_resends_stop_when_the_run_limit_cannot_hold_another_send() {
    // Run limit 2s, each send takes 700ms: after the first (700ms) a wait of at most
    // 100ms and another 700ms send fit; after the second (at least 1450ms) a wait of
    // at least 100ms and a third 700ms send do not.
    let p = Provider::start(|_, _| Reply::After(Duration::from_millis(700), Box::new(Reply::status(503))));
    let d = driver_for(&program(&p.url(), "timeout: 1s\n retry: { attempts: 10 }", "", "2s"));
    let t = Instant::now();
    assert_eq!(call(&d).await, failed(FailureKind::Unavailable, "http.503", Some(503), None));
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(p.count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_the_in_flight_limit_holds_under_50_concurrent_calls() {
    let p = Provider::always(Reply::After(Duration::from_millis(20), Box::new(Reply::status(200))));
    let d = Arc::new(driver(&p.url(), "max_in_flight: 3", ""));
    let mut tasks = Vec::new();
    for i in 0..50 {
        let d = d.clone();
        tasks.push(tokio::spawn(async move { d.call(request(i, 1)).await }));
    }
    for t in tasks {
        assert_eq!(t.await.expect("task"), Outcome::Succeeded { http_status: Some(200) });
    }
    assert_eq!(p.count(), 50);
    assert_eq!(p.max_concurrent(), 3);
    assert!(p.connections() <= 3, "{} connections", p.connections());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_a_call_that_waits_for_its_slot_past_the_run_limit_is_deadline_exceeded_never_sent() {
    // One call at a time, each answered after 3s; the run's limit is 1s.
    let p = Provider::always(Reply::After(Duration::from_millis(3_000), Box::new(Reply::status(200))));
    let d = Arc::new(driver_for(&program(&p.url(), "timeout: 10s\n max_in_flight: 1", "", "1s")));
    let first = tokio::spawn({
        let d = d.clone();
        async move { d.call(request(1, 1)).await }
    });
    let start = Instant::now();
    while p.count() == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "the first call never reached the provider");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The second waits for the slot the first holds past its own limit: it ends
    // at its limit as `deadline_exceeded`, never sent.
    let exceeded = failed(FailureKind::DeadlineExceeded, "deadline_exceeded", None, None);
    let t = Instant::now();
    assert_eq!(d.call(request(2, 1)).await, exceeded);
    assert!((Duration::from_millis(1_000)..Duration::from_millis(1_900)).contains(&t.elapsed()), "{:?}", t.elapsed());
    // A caller that tells the limit (as the run does, counted from the claim)
    // has the wait end there.
    let t = Instant::now();
    assert_eq!(d.call_marked(request(3, 1), SendMark::with_time_left(300)).await, exceeded);
    assert!(t.elapsed() < Duration::from_millis(900), "{:?}", t.elapsed());
    assert_eq!(first.await.expect("first call"), Outcome::Succeeded { http_status: Some(200) });
    let keys: Vec<String> =
        p.received().iter().map(|r| r.header("idempotency-key").unwrap_or_default().into()).collect();
    assert_eq!(keys, vec!["1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_the_default_in_flight_limit_is_4() {
    let p = Provider::always(Reply::After(Duration::from_millis(20), Box::new(Reply::status(200))));
    let d = Arc::new(driver(&p.url(), "", ""));
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let d = d.clone();
            tokio::spawn(async move { d.call(request(i, 1)).await })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.expect("task"), Outcome::Succeeded { http_status: Some(200) });
    }
    assert_eq!(p.max_concurrent(), 4);
}

#[tokio::test]
async fn http_connections_are_kept_alive_and_reused() {
    let p = Provider::always(Reply::status(200));
    let d = driver(&p.url(), "", "");
    for i in 0..20 {
        assert_eq!(d.call(request(i, 1)).await, Outcome::Succeeded { http_status: Some(200) });
    }
    assert_eq!(p.count(), 20);
    assert_eq!(p.connections(), 1);
}
