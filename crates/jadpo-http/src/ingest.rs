//! `jadpoc run --listen`: events over HTTP. `POST /events/NAME` with a JSON object
//! answers 202 `{"id": N}` once the event is durably stored; every refusal answers a
//! JSON body `{"error": {"code", "field", "message"}}`.
//!
//! The server is hyper's HTTP/1.1 server (keep-alive, chunked bodies, `Expect:
//! 100-continue`, header limits and the header read timeout come from it rather than
//! from hand-written parsing), in the accept loop the metrics share
//! (`crate::server`: the connection cap, no descriptor left, the drain at a stop).
//! What the ingest adds: the routes and answers, a body time limit, and **group
//! commit**: requests arriving together are stored in one transaction by one
//! committer task, and each is answered only after that transaction committed, so
//! an acknowledged event is never lost and the store's single writer commits many
//! events per sync. With `--metrics` too, it also serves the metrics at `GET
//! /metrics`.

use crate::metrics::{METRICS_PATH, MetricsSource};
use crate::signing::{Refusal, Verifier};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body as _, Incoming};
use hyper::header::{ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue, RETRY_AFTER, TRANSFER_ENCODING};
use hyper::server::conn::http1;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioTimer;
use jadpo_check::program::Program;
use jadpo_core::clock::Clock;
use jadpo_core::codes::RuntimeCode;
use jadpo_core::payload::{PayloadError, new_event};
use jadpo_core::store::{NewEvent, Store};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc, oneshot, watch};

/// The largest body accepted (413 above it).
pub const MAX_BODY: usize = 1024 * 1024;
/// The largest request head, request line and headers together (431 above it).
pub const MAX_HEAD: usize = 16 * 1024;
/// The most headers one request may carry (431 above it).
pub const MAX_HEADERS: usize = 100;
pub use crate::server::HEAD_TIMEOUT;
/// How long a client has to send a request's body once its head arrived (408).
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// The open connections served at once unless `--max-connections` says otherwise.
/// Further clients wait in the kernel's accept queue until one closes.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 512;
/// The most events stored in one transaction by the committer.
pub const MAX_COMMIT_BATCH: usize = 1024;
/// How long a `503` asks the client to wait before it sends again (`Retry-After`):
/// a store busy past its lock wait, or a process stopping to start again, takes
/// seconds.
pub const RETRY_AFTER_S: u64 = 5;
/// What a request refused by a stop is told.
const STOPPING: &str = "the ingest is stopping; send it again";

/// The ingest's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngestLimits {
    /// Open connections served at once.
    pub max_connections: u32,
    /// How long a client has to send a request's head (and an idle connection is kept).
    pub head_timeout: Duration,
    /// How long a client has to send a request's body.
    pub body_timeout: Duration,
}

impl Default for IngestLimits {
    fn default() -> IngestLimits {
        IngestLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            head_timeout: HEAD_TIMEOUT,
            body_timeout: BODY_TIMEOUT,
        }
    }
}

/// What the ingest endpoint needs.
#[derive(Clone)]
pub struct Ingest {
    /// The checked program.
    pub program: Arc<Program>,
    /// Where events go.
    pub store: Arc<dyn Store>,
    /// The time events are stamped with.
    pub clock: Arc<dyn Clock>,
    /// Woken after each stored batch, so workers start at once.
    pub wake: Arc<Notify>,
    /// Its limits.
    pub limits: IngestLimits,
    /// The run's metrics, served at `GET /metrics` too.
    pub metrics: Option<MetricsSource>,
    /// `--verify-secret`: only requests signed with one of its secrets are taken.
    pub verifier: Option<Arc<Verifier>>,
}

/// One event waiting for the committer, and where its id goes.
struct Pending {
    event: NewEvent,
    done: oneshot::Sender<Result<i64, String>>,
}

/// What a request handler shares: the program, the committer's queue, the stop.
struct Shared {
    program: Arc<Program>,
    commits: mpsc::Sender<Pending>,
    limits: IngestLimits,
    metrics: Option<MetricsSource>,
    verifier: Option<Arc<Verifier>>,
    clock: Arc<dyn Clock>,
    stop: watch::Receiver<bool>,
}

/// Serve until `stop` turns true; then drain: accept no more, answer every
/// request whose head was read before the stop (`202` once committed), refuse
/// those read after it (`503` `stopping`), and return once each is answered.
pub async fn serve(listener: TcpListener, ingest: Ingest, stop: watch::Receiver<bool>) {
    let (commits, queue) = mpsc::channel(MAX_COMMIT_BATCH * 4);
    let committer = tokio::spawn(commit_loop(queue, ingest.store.clone(), ingest.clock.clone(), ingest.wake.clone()));
    let limits = ingest.limits;
    let shared = Arc::new(Shared {
        program: ingest.program,
        commits,
        limits,
        metrics: ingest.metrics,
        verifier: ingest.verifier,
        clock: ingest.clock,
        stop: stop.clone(),
    });
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.head_timeout)
        .max_header_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        // A head that has not ended within twice the limit is refused before
        // more of it is buffered.
        .max_buf_size(2 * MAX_HEAD);
    let max_connections = usize::try_from(limits.max_connections).unwrap_or(usize::MAX);
    let handler = move |req| {
        let shared = shared.clone();
        async move { handle(req, &shared).await }
    };
    crate::server::serve(listener, max_connections, http, stop, handler).await;
    // Every connection is closed, and with the last the committer's queue: it
    // ends once it has answered what was queued.
    let _ = committer.await;
}

/// Store queued events in batches: take one, then every other already waiting (up
/// to [`MAX_COMMIT_BATCH`]), commit them in one transaction, answer each.
async fn commit_loop(
    mut queue: mpsc::Receiver<Pending>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    wake: Arc<Notify>,
) {
    let mut batch = Vec::with_capacity(MAX_COMMIT_BATCH);
    while queue.recv_many(&mut batch, MAX_COMMIT_BATCH).await > 0 {
        let (events, waiting): (Vec<NewEvent>, Vec<_>) = batch.drain(..).map(|p| (p.event, p.done)).unzip();
        let store = store.clone();
        let now = clock.now_ms();
        let stored = tokio::task::spawn_blocking(move || store.emit(&events, now)).await;
        let ids = match stored {
            Ok(Ok(ids)) if ids.len() == waiting.len() => Ok(ids),
            Ok(Ok(_)) => Err("the store returned fewer ids than events".to_string()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match ids {
            Ok(ids) => {
                wake.notify_waiters();
                for (done, id) in waiting.into_iter().zip(ids) {
                    let _ = done.send(Ok(id));
                }
            }
            Err(e) => {
                for done in waiting {
                    let _ = done.send(Err(e.clone()));
                }
            }
        }
    }
}

/// An answer with a JSON body.
fn answer(status: StatusCode, body: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// The HTTP status of an ingest code.
fn status_of(code: RuntimeCode) -> StatusCode {
    code.status().and_then(|s| StatusCode::from_u16(s).ok()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// A refusal: `{"error": {"code", "field": null, "message"}}`, with the code's
/// status; a `503` asks the client to send again after [`RETRY_AFTER_S`].
fn refuse(code: RuntimeCode, message: impl Into<String>) -> Response<Full<Bytes>> {
    let status = status_of(code);
    let mut r = answer(status, &json!({"error": {"code": code.wire(), "field": null, "message": message.into()}}));
    if status == StatusCode::SERVICE_UNAVAILABLE {
        r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
    }
    r
}

/// A refusal of the payload, naming its field.
fn refuse_payload(e: &PayloadError) -> Response<Full<Bytes>> {
    answer(status_of(e.registered()), &e.to_json())
}

/// Whether a `Content-Type` names JSON: `application/json` or `application/*+json`,
/// parameters such as `charset` allowed.
fn is_json(content_type: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(content_type) else { return false };
    let media = text.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    media == "application/json" || (media.starts_with("application/") && media.ends_with("+json"))
}

async fn handle(req: Request<Incoming>, shared: &Shared) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    if let Some(source) = shared.metrics.as_ref().filter(|_| parts.uri.path() == METRICS_PATH) {
        return source.answer(&parts.method).await;
    }
    let name = match check_head(&parts, shared) {
        Ok(name) => name,
        Err(refusal) => {
            // Read (and drop) a body that was sent anyway, so the connection can
            // take the client's next request; hyper closes a connection whose
            // request body was left unread.
            let upper = body.size_hint().upper();
            if upper.is_some_and(|n| usize::try_from(n).is_ok_and(|n| n <= MAX_BODY)) {
                let _ = tokio::time::timeout(shared.limits.body_timeout, Limited::new(body, MAX_BODY).collect()).await;
            }
            return *refusal;
        }
    };
    if usize::try_from(body.size_hint().lower()).map_or(true, |n| n > MAX_BODY) {
        return too_large();
    }
    let bytes = match tokio::time::timeout(shared.limits.body_timeout, Limited::new(body, MAX_BODY).collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return too_large(),
        Ok(Err(e)) => {
            return refuse(RuntimeCode::IngestBadRequest, format!("the body could not be read: {e}"));
        }
        Err(_) => {
            let secs = shared.limits.body_timeout.as_secs_f64();
            return refuse(RuntimeCode::IngestTimeout, format!("the body did not arrive within {secs}s"));
        }
    };
    if let Some(verifier) = &shared.verifier {
        let now_s = shared.clock.now_ms().div_euclid(1000);
        match verifier.verify(&parts.headers, &bytes, now_s) {
            Ok(()) => {}
            Err(refusal @ Refusal::Stale { .. }) => {
                return refuse(RuntimeCode::IngestSignatureStale, refusal.to_string());
            }
            Err(refusal) => return refuse(RuntimeCode::IngestSignatureInvalid, refusal.to_string()),
        }
    }
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return refuse_payload(&PayloadError::NotJson("the body is not UTF-8".into()));
    };
    let event = match new_event(&shared.program, name, text) {
        Ok(e) => e,
        Err(e) => return refuse_payload(&e),
    };
    let (done, stored) = oneshot::channel();
    if shared.commits.send(Pending { event, done }).await.is_err() {
        return refuse(RuntimeCode::IngestStopping, STOPPING);
    }
    match stored.await {
        Ok(Ok(id)) => answer(StatusCode::ACCEPTED, &json!({"id": id})),
        Ok(Err(e)) => refuse(RuntimeCode::IngestStoreUnavailable, e),
        Err(_) => refuse(RuntimeCode::IngestStopping, STOPPING),
    }
}

/// 413; the rest of the body is not read, so the connection closes after it.
fn too_large() -> Response<Full<Bytes>> {
    let mut r = refuse(RuntimeCode::IngestTooLarge, "the body is over 1 MiB");
    r.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    r
}

/// Everything decided from the request's head: the event's name, or the refusal.
fn check_head<'a>(
    parts: &'a hyper::http::request::Parts,
    shared: &Shared,
) -> Result<&'a str, Box<Response<Full<Bytes>>>> {
    // A request whose head arrives after the stop is not taken: the run is
    // finishing what it took before.
    if *shared.stop.borrow() {
        let mut r = refuse(RuntimeCode::IngestStopping, STOPPING);
        r.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
        return Err(Box::new(r));
    }
    // The path alone routes: a query string is ignored.
    let path = parts.uri.path();
    let Some(name) = path.strip_prefix("/events/").filter(|n| !n.is_empty() && !n.contains('/')) else {
        return Err(Box::new(refuse(
            RuntimeCode::IngestNotFound,
            format!("no route `{path}`; post to `/events/NAME`"),
        )));
    };
    if parts.method != Method::POST {
        let mut r = refuse(RuntimeCode::IngestMethodNotAllowed, "events are taken by `POST`");
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("POST"));
        return Err(Box::new(r));
    }
    if shared.program.event(name).is_none() {
        return Err(Box::new(refuse_payload(&PayloadError::UnknownEvent(name.to_string()))));
    }
    let headers = &parts.headers;
    if let Some(ct) = headers.get(CONTENT_TYPE)
        && !is_json(ct.as_bytes())
    {
        let shown = String::from_utf8_lossy(ct.as_bytes()).into_owned();
        return Err(Box::new(refuse(
            RuntimeCode::IngestUnsupportedMediaType,
            format!("the body's `Content-Type` is `{shown}`; send `application/json`"),
        )));
    }
    if !headers.contains_key(CONTENT_LENGTH) && !headers.contains_key(TRANSFER_ENCODING) {
        return Err(Box::new(refuse(
            RuntimeCode::IngestLengthRequired,
            "send the body with a `Content-Length` or `Transfer-Encoding: chunked`",
        )));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types() {
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/cloudevents+json",
            " application/json ",
        ] {
            assert!(is_json(ok.as_bytes()), "{ok}");
        }
        for bad in ["text/plain", "application/x-www-form-urlencoded", "application/jsonx", "json", ""] {
            assert!(!is_json(bad.as_bytes()), "{bad}");
        }
    }
}
