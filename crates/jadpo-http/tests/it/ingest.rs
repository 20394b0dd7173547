//! The `--listen` ingest on a real socket: every answer it gives, keep-alive and
//! chunked bodies, its limits, the connection cap, and group commit (every id
//! answered is stored, once).

use jadpo_check::program::Program;
use jadpo_check::program::Signing;
use jadpo_core::clock::Clock;
use jadpo_core::clock::SystemClock;
use jadpo_core::store::{DeliveryFilter, Views};
use jadpo_http::ingest::{Ingest, IngestLimits, MAX_BODY, serve};
use jadpo_http::signing::{Signer, TOLERANCE_S, Verifier};
use jadpo_store_sqlite::SqliteStore;
use serde_json::Value;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Notify, watch};

const PROGRAM: &str = r#"
event Paid {
    id: string
    cents: int
}

connection c { url: "http://127.0.0.1:9" }

action record(id: string, cents: int) { via: c }

subscriber rec {
    on: Paid
    run: record(event.id, event.cents)
}
"#;

const PAID: &str = r#"{"id": "p1", "cents": 5}"#;

fn program() -> Arc<Program> {
    jadpo_test_support::program(PROGRAM)
}

/// A running ingest on 127.0.0.1; dropping `stop` does not stop it, sending `true` does.
struct Server {
    addr: SocketAddr,
    store: Arc<SqliteStore>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

async fn start(limits: IngestLimits) -> Server {
    start_verifying(limits, None).await
}

async fn start_verifying(limits: IngestLimits, verifier: Option<Arc<Verifier>>) -> Server {
    let store = Arc::new(SqliteStore::open_in_memory().expect("store"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let ingest = Ingest {
        program: program(),
        store: store.clone(),
        clock: Arc::new(SystemClock),
        wake: Arc::new(Notify::new()),
        limits,
        metrics: None,
        verifier,
    };
    let (stop, rx) = watch::channel(false);
    let task = tokio::spawn(serve(listener, ingest, rx));
    Server { addr, store, stop, task }
}

/// One answer as read off the wire.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// The head's lines after the status line, names lowercased.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| panic!("a JSON body: {:?}", self))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn code(&self) -> String {
        self.json()["error"]["code"].as_str().unwrap_or_default().to_string()
    }
}

/// A raw client on one connection: writes bytes, reads whole answers.
struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    async fn connect(addr: SocketAddr) -> Client {
        Client { stream: TcpStream::connect(addr).await.expect("connect"), buf: Vec::new() }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    /// The next answer; `head_only` for an answer to HEAD (a length, no body).
    async fn read(&mut self, head_only: bool) -> Option<Answer> {
        let end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if !self.fill().await {
                return None;
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        self.buf.drain(..end);
        let mut lines = head.split("\r\n");
        let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let len: usize = if head_only || status == 100 {
            0
        } else {
            headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok())?
        };
        while self.buf.len() < len {
            if !self.fill().await {
                return None;
            }
        }
        let body = self.buf.drain(..len).collect();
        Some(Answer { status, headers, body })
    }

    async fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 8192];
        match self.stream.read(&mut chunk).await {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    /// Sends `head` (request line and headers, no blank line) and `body` as is.
    async fn request(&mut self, head: &str, body: &[u8]) -> Answer {
        self.send(format!("{head}\r\n\r\n").as_bytes()).await;
        self.send(body).await;
        self.read(head.starts_with("HEAD")).await.unwrap_or_else(|| panic!("no answer to {head}"))
    }

    async fn post(&mut self, path: &str, body: &str) -> Answer {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}",
            body.len()
        );
        self.request(&head, body.as_bytes()).await
    }
}

/// The ids of every stored event, one per delivery (each event has one).
fn stored_ids(store: &SqliteStore) -> Vec<i64> {
    let all = store.deliveries(&DeliveryFilter::default()).expect("deliveries");
    all.iter().map(|d| d.event_id).collect()
}

#[tokio::test]
async fn ingest_accepts_events_on_one_keep_alive_connection() {
    let s = start(IngestLimits::default()).await;
    let mut c = Client::connect(s.addr).await;
    let first = c.post("/events/Paid", PAID).await;
    assert_eq!(first.status, 202, "{first:?}");
    assert_eq!(first.header("content-type"), Some("application/json"));
    assert_ne!(first.header("connection"), Some("close"));
    // The same connection takes the next request, and a query string is ignored.
    let second = c.post("/events/Paid?source=shop", r#"{"id": "p2", "cents": 6}"#).await;
    assert_eq!(second.status, 202, "{second:?}");
    let (a, b) = (first.json()["id"].as_i64().expect("id"), second.json()["id"].as_i64().expect("id"));
    assert_ne!(a, b);
    let mut ids = stored_ids(&s.store);
    ids.sort_unstable();
    assert_eq!(ids, vec![a.min(b), a.max(b)]);
}

#[tokio::test]
async fn ingest_takes_chunked_bodies_and_expect_continue() {
    let s = start(IngestLimits::default()).await;
    let mut c = Client::connect(s.addr).await;
    let chunked =
        "POST /events/Paid HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked";
    let body = format!("{:x}\r\n{PAID}\r\n0\r\n\r\n", PAID.len());
    let a = c.request(chunked, body.as_bytes()).await;
    assert_eq!(a.status, 202, "{a:?}");
    let head = format!(
        "POST /events/Paid HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        PAID.len()
    );
    c.send(head.as_bytes()).await;
    // The 100 comes before the body is sent; then the body's answer.
    let cont = c.read(false).await.expect("an interim answer");
    assert_eq!(cont.status, 100);
    c.send(PAID.as_bytes()).await;
    assert_eq!(c.read(false).await.expect("an answer").status, 202);
    assert_eq!(stored_ids(&s.store).len(), 2);
}

#[tokio::test]
async fn ingest_answers_every_refusal_with_its_status_and_code() {
    let s = start(IngestLimits::default()).await;
    let mut c = Client::connect(s.addr).await;
    let a = c.post("/nowhere", PAID).await;
    assert_eq!((a.status, a.code().as_str()), (404, "not_found"));
    let a = c.post("/events/Nope", PAID).await;
    assert_eq!((a.status, a.code().as_str()), (404, "unknown_event"));
    let a = c.request("GET /events/Paid HTTP/1.1\r\nHost: x", b"").await;
    assert_eq!((a.status, a.code().as_str()), (405, "method_not_allowed"));
    assert_eq!(a.header("allow"), Some("POST"));
    // HEAD: the same answer, without a body.
    let a = c.request("HEAD /events/Paid HTTP/1.1\r\nHost: x", b"").await;
    assert_eq!(a.status, 405);
    assert!(a.body.is_empty());
    let a = c.post("/events/Paid", r#"{"id": "p1", "cents": "5"}"#).await;
    assert_eq!((a.status, a.code().as_str()), (422, "wrong_type"));
    assert_eq!(a.json()["error"]["field"], "cents");
    let a = c.post("/events/Paid", "{not json").await;
    assert_eq!((a.status, a.code().as_str()), (422, "not_json"));
    let a = c.post("/events/Paid", "[1]").await;
    assert_eq!((a.status, a.code().as_str()), (422, "not_an_object"));
    let head =
        format!("POST /events/Paid HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: {}", PAID.len());
    let a = c.request(&head, PAID.as_bytes()).await;
    assert_eq!((a.status, a.code().as_str()), (415, "unsupported_media_type"));
    let head = format!(
        "POST /events/Paid HTTP/1.1\r\nHost: x\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}",
        PAID.len()
    );
    assert_eq!(c.request(&head, PAID.as_bytes()).await.status, 202);
    // No Content-Type at all is taken as JSON.
    let head = format!("POST /events/Paid HTTP/1.1\r\nHost: x\r\nContent-Length: {}", PAID.len());
    assert_eq!(c.request(&head, PAID.as_bytes()).await.status, 202);
    let a = c.request("POST /events/Paid HTTP/1.1\r\nHost: x\r\nContent-Type: application/json", b"").await;
    assert_eq!((a.status, a.code().as_str()), (411, "length_required"));
    // Two stored so far; nothing refused was stored.
    assert_eq!(stored_ids(&s.store).len(), 2);
}

#[tokio::test]
async fn ingest_refuses_bodies_over_one_mib_however_sent() {
    let s = start(IngestLimits::default()).await;
    let mut c = Client::connect(s.addr).await;
    let head = format!("POST /events/Paid HTTP/1.1\r\nHost: x\r\nContent-Length: {}", MAX_BODY + 1);
    let a = c.request(&head, b"").await;
    assert_eq!((a.status, a.code().as_str()), (413, "too_large"));
    let mut c = Client::connect(s.addr).await;
    let chunk = vec![b' '; 64 * 1024];
    let mut body = Vec::new();
    for _ in 0..17 {
        body.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        body.extend_from_slice(&chunk);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"0\r\n\r\n");
    let a = c.request("POST /events/Paid HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked", &body).await;
    assert_eq!((a.status, a.code().as_str()), (413, "too_large"));
    // Exactly 1 MiB is read (and refused only as a payload).
    let mut c = Client::connect(s.addr).await;
    let padded = format!("{PAID}{}", " ".repeat(MAX_BODY - PAID.len()));
    assert_eq!(c.post("/events/Paid", &padded).await.status, 202);
}

#[tokio::test]
async fn ingest_refuses_malformed_and_oversized_heads() {
    let s = start(IngestLimits::default()).await;
    // Two different lengths: refused before any route. (The same length twice is
    // taken as one, as RFC 9112 allows: both readings of it agree.)
    let mut c = Client::connect(s.addr).await;
    let head = format!("POST /events/Paid HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nContent-Length: 3", PAID.len());
    assert_eq!(c.request(&head, PAID.as_bytes()).await.status, 400);
    // A length that is not a number.
    let mut c = Client::connect(s.addr).await;
    assert_eq!(c.request("POST /events/Paid HTTP/1.1\r\nHost: x\r\nContent-Length: 1x", b"").await.status, 400);
    // Not HTTP.
    let mut c = Client::connect(s.addr).await;
    c.send(b"HELLO THERE\r\n\r\n").await;
    assert_eq!(c.read(false).await.map(|a| a.status), Some(400));
    // A head of just under 16 KiB is taken; one over it is 431.
    let mut c = Client::connect(s.addr).await;
    let head = format!(
        "POST /events/Paid HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\nContent-Length: {}",
        "a".repeat(15 * 1024),
        PAID.len()
    );
    assert_eq!(c.request(&head, PAID.as_bytes()).await.status, 202);
    let mut c = Client::connect(s.addr).await;
    let head = format!(
        "POST /events/Paid HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\nContent-Length: {}",
        "a".repeat(16 * 1024 + 1),
        PAID.len()
    );
    assert_eq!(c.request(&head, PAID.as_bytes()).await.status, 431);
    // A head that never ends is cut off at twice the limit, not buffered on.
    let mut c = Client::connect(s.addr).await;
    c.send(format!("POST /events/Paid HTTP/1.1\r\nX-Pad: {}", "a".repeat(40 * 1024)).as_bytes()).await;
    assert_eq!(c.read(false).await.map(|a| a.status), Some(431));
    assert_eq!(stored_ids(&s.store).len(), 1);
}

#[tokio::test]
async fn ingest_cuts_off_slow_clients() {
    let limits = IngestLimits {
        head_timeout: Duration::from_millis(300),
        body_timeout: Duration::from_millis(300),
        ..IngestLimits::default()
    };
    let s = start(limits).await;
    // A body that stops halfway: 408.
    let mut c = Client::connect(s.addr).await;
    let head = format!("POST /events/Paid HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n", PAID.len());
    c.send(head.as_bytes()).await;
    c.send(&PAID.as_bytes()[..5]).await;
    let a = tokio::time::timeout(Duration::from_secs(20), c.read(false)).await.expect("answered").expect("an answer");
    assert_eq!((a.status, a.code().as_str()), (408, "timeout"));
    // A head that stops halfway: the connection is closed.
    let mut c = Client::connect(s.addr).await;
    c.send(b"POST /events/Paid HTTP/1.1\r\nHost").await;
    let closed = tokio::time::timeout(Duration::from_secs(20), c.read(false)).await.expect("closed in time");
    assert!(closed.as_ref().is_none_or(|a| a.status == 408), "{closed:?}");
    // An idle keep-alive connection is closed too.
    let mut c = Client::connect(s.addr).await;
    assert_eq!(c.post("/events/Paid", PAID).await.status, 202);
    let closed = tokio::time::timeout(Duration::from_secs(20), c.read(false)).await.expect("closed in time");
    assert!(closed.is_none(), "{closed:?}");
}

#[tokio::test]
async fn ingest_serves_at_most_max_connections_and_the_rest_wait() {
    let s = start(IngestLimits { max_connections: 1, ..IngestLimits::default() }).await;
    let mut first = Client::connect(s.addr).await;
    assert_eq!(first.post("/events/Paid", PAID).await.status, 202);
    // The second connection is not served while the first stays open...
    let mut second = Client::connect(s.addr).await;
    let head = format!("POST /events/Paid HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{PAID}", PAID.len());
    second.send(head.as_bytes()).await;
    let waited = tokio::time::timeout(Duration::from_millis(300), second.read(false)).await;
    assert!(waited.is_err(), "served past the cap: {waited:?}");
    // ...and is, as soon as it closes.
    drop(first);
    let a = tokio::time::timeout(Duration::from_secs(20), second.read(false)).await.expect("served").expect("answer");
    assert_eq!(a.status, 202);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_commits_concurrent_requests_and_answers_each_stored_id_once() {
    let s = start(IngestLimits::default()).await;
    let mut tasks = Vec::new();
    for conn in 0..16 {
        let addr = s.addr;
        tasks.push(tokio::spawn(async move {
            let mut c = Client::connect(addr).await;
            let mut ids = Vec::new();
            for n in 0..25 {
                let a = c.post("/events/Paid", &format!(r#"{{"id": "c{conn}n{n}", "cents": {n}}}"#)).await;
                assert_eq!(a.status, 202, "{a:?}");
                ids.push(a.json()["id"].as_i64().expect("id"));
            }
            ids
        }));
    }
    let mut answered = Vec::new();
    for t in tasks {
        answered.extend(t.await.expect("client"));
    }
    let unique: HashSet<i64> = answered.iter().copied().collect();
    assert_eq!(unique.len(), 400, "an id answered twice");
    let stored: HashSet<i64> = stored_ids(&s.store).into_iter().collect();
    assert_eq!(stored, unique);
}

#[tokio::test]
async fn ingest_stops_accepting_and_returns_when_told() {
    let s = start(IngestLimits::default()).await;
    let mut c = Client::connect(s.addr).await;
    assert_eq!(c.post("/events/Paid", PAID).await.status, 202);
    s.stop.send(true).expect("stop");
    // The open connection is closed once idle, and the server returns.
    tokio::time::timeout(Duration::from_secs(20), s.task).await.expect("stopped in time").expect("no panic");
    assert!(c.read(false).await.is_none());
}

#[tokio::test]
async fn ingest_answers_what_it_read_at_a_stop_and_refuses_what_comes_after() {
    let s = start(IngestLimits { max_connections: 2, ..IngestLimits::default() }).await;
    // A request whose body is half sent when the stop comes...
    let mut slow = Client::connect(s.addr).await;
    let (sent, rest) = PAID.split_at(PAID.len() / 2);
    // `100 Continue` says the ingest has read the head and is reading the body:
    // without it, a loaded machine may not have read the head by the stop.
    slow.send(
        format!(
            "POST /events/Paid HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
            PAID.len()
        )
        .as_bytes(),
    )
    .await;
    assert_eq!(slow.read(false).await.expect("100 Continue").status, 100);
    slow.send(sent.as_bytes()).await;
    // ...an idle keep-alive connection...
    let mut idle = Client::connect(s.addr).await;
    assert_eq!(idle.post("/events/Paid", PAID).await.status, 202);
    // ...and a request waiting in the accept queue, both slots taken.
    let mut queued = Client::connect(s.addr).await;
    queued
        .send(
            format!("POST /events/Paid HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{PAID}", PAID.len()).as_bytes(),
        )
        .await;
    s.stop.send(true).expect("stop");
    // The listener closes, and the idle connection.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(s.addr).await.is_ok() {
        assert!(tokio::time::Instant::now() < deadline, "the listener stayed open");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(idle.read(false).await.is_none(), "the idle connection stayed open");
    // The request read before the stop is taken and answered...
    slow.send(rest.as_bytes()).await;
    let a = slow.read(false).await.expect("an answer");
    assert_eq!(a.status, 202, "{a:?}");
    assert_eq!(a.header("connection"), Some("close"));
    // ...and the one read after it is refused, to be sent again.
    let a = queued.read(false).await.expect("an answer");
    assert_eq!((a.status, a.code().as_str()), (503, "stopping"));
    assert_eq!(a.header("retry-after"), Some(jadpo_http::ingest::RETRY_AFTER_S.to_string().as_str()));
    assert_eq!(a.header("connection"), Some("close"));
    tokio::time::timeout(Duration::from_secs(20), s.task).await.expect("stopped in time").expect("no panic");
    assert_eq!(stored_ids(&s.store).len(), 2);
}

/// A `POST /events/Paid` of `body` with the Standard Webhooks headers, signed by
/// `secret` at `timestamp` (none at all when `secret` is `None`).
fn signed_post(secret: Option<&str>, id: &str, timestamp: i64, body: &str) -> String {
    let mut head = format!(
        "POST /events/Paid HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}",
        body.len()
    );
    if let Some(secret) = secret {
        let env = |_: &str| Some(std::ffi::OsString::from(secret));
        let signer = Signer::new("c", &Signing::Secrets(vec!["S".into()]), &env).expect("a signer");
        let signature = signer.signature(id, timestamp, body.as_bytes());
        head.push_str(&format!(
            "\r\nwebhook-id: {id}\r\nwebhook-timestamp: {timestamp}\r\nwebhook-signature: {signature}"
        ));
    }
    head
}

#[tokio::test]
async fn ingest_with_a_secret_takes_only_events_signed_with_it_and_stores_nothing_else() {
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const OTHER: &str = "whsec_c2VjcmV0LW9mLWFub3RoZXItcHJvdmlkZXIhIQ==";
    let verifier = Verifier::new(&[SECRET.to_string()]).expect("a verifier");
    let s = start_verifying(IngestLimits::default(), Some(Arc::new(verifier))).await;
    let now = SystemClock.now_ms() / 1000;
    let mut c = Client::connect(s.addr).await;
    for (secret, timestamp, code) in [
        (Some(OTHER), now, "signature_invalid"),
        (None, now, "signature_invalid"),
        (Some(SECRET), now - TOLERANCE_S - 60, "signature_stale"),
        (Some(SECRET), now + TOLERANCE_S + 60, "signature_stale"),
    ] {
        let a = c.request(&signed_post(secret, "msg_1", timestamp, PAID), PAID.as_bytes()).await;
        assert_eq!((a.status, a.code().as_str()), (401, code), "{secret:?} at {timestamp}: {a:?}");
    }
    assert!(stored_ids(&s.store).is_empty(), "a refused event was stored");
    // A body changed on the way no longer matches its signature.
    let head = signed_post(Some(SECRET), "msg_2", now, r#"{"id": "p1", "cents": 6}"#);
    let a = c.request(&head, br#"{"id": "p1", "cents": 7}"#).await;
    assert_eq!((a.status, a.code().as_str()), (401, "signature_invalid"), "{a:?}");
    let a = c.request(&signed_post(Some(SECRET), "msg_3", now, PAID), PAID.as_bytes()).await;
    assert_eq!(a.status, 202, "{a:?}");
    assert_eq!(stored_ids(&s.store).len(), 1);
}
