//! The HTTP driver: an action's call as a `POST` to its connection's provider.
//!
//! One [`HttpClient`] (a keep-alive pool over http and https, rustls with the ring
//! provider, no system OpenSSL) is shared by every connection's [`HttpDriver`]. A
//! driver sends the call, maps the answer to an [`Outcome`] as runtime.md's table
//! says ([`map_answer`]), bounds each send by the connection's `timeout:`, re-sends
//! within one attempt as the connection's `retry:` allows, and holds at most
//! `max_in_flight:` sends in flight, so one slow provider cannot take every worker
//! (a call waits for its slot only until the run's time limit, which counts the
//! wait).
//! Redirects are never followed: a 3xx is an answer like any other.
//!
//! Each failure to send is named (`transport.dns`, `transport.refused`,
//! `transport.connect_timeout`, `transport.tls`, `transport.no_answer`) with the
//! underlying error's text as its reason. A connection with a `tls:` block gets a
//! client of its own (`tls.rs`). The connector under the client (`track.rs`) tells a
//! call the provider never read, because it closed the pooled connection while
//! idle, from one it may have; the first is sent once more on a fresh connection.

mod tls;
mod track;

pub use crate::setup::HttpSetupError;
use crate::signing::{self, Signer};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER, USER_AGENT};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, HttpConnector, capture_connection};
use hyper_util::rt::TokioExecutor;
use jadpo_check::budget;
use jadpo_check::program::{self, FailureKind, Program};
use jadpo_core::clock::BoxFuture;
use jadpo_core::codes::RuntimeCode;
use jadpo_core::drivers::{CallRequest, Driver, SendMark};
use jadpo_core::rng::RandomSource;
use jadpo_core::rules::{CallFailure, Outcome};
use rand::RngExt;
use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::Semaphore;
pub use track::{ConnectFailure, WatchSnapshot};
use track::{Watched, WatchingConnector};

/// A call that never left: the provider's host name did not resolve.
pub const CODE_DNS: &str = RuntimeCode::TransportDns.as_str();
/// A call that never left: the connection was refused (or the host could not be
/// reached at all).
pub const CODE_REFUSED: &str = RuntimeCode::TransportRefused.as_str();
/// A call that never left: no connection within the connection's `timeout:`.
pub const CODE_CONNECT_TIMEOUT: &str = RuntimeCode::TransportConnectTimeout.as_str();
/// A call that never left: the TLS handshake failed (a certificate not trusted, a
/// client certificate refused, no common protocol).
pub const CODE_TLS: &str = RuntimeCode::TransportTls.as_str();
/// The code of a call that was sent and got no answer (a timeout or a reset).
pub const CODE_NO_ANSWER: &str = RuntimeCode::TransportNoAnswer.as_str();
/// The code of an answer that is not HTTP, or whose body was cut short.
pub const CODE_INVALID_ANSWER: &str = RuntimeCode::HttpInvalidAnswer.as_str();
/// The `User-Agent` sent unless the connection's `headers:` set one.
pub const USER_AGENT_VALUE: &str = concat!("jadpo/", env!("CARGO_PKG_VERSION"));
/// The first wait before a connection-level re-send; it doubles after each.
pub const RESEND_BASE_MS: u64 = 100;
/// The longest wait before a connection-level re-send.
pub const RESEND_CAP_MS: u64 = 2_000;
/// The most of an answer's body read to look for a `{"failure": ...}`; a longer
/// body is not a failure body and the status alone decides.
pub const MAX_ANSWER_BODY: usize = 64 * 1024;
/// The longest failure code kept from a provider's body (codes are short and
/// stable; a record never keeps a provider's free text).
pub const MAX_CODE_LEN: usize = 64;
/// Kept free between the end of a re-send and the run's time limit: for the
/// attempt's own end and, when the caller told no limit and the driver counts the
/// program's from the call, for the time between the claim and the call.
const RUN_LIMIT_MARGIN_MS: u64 = 50;

/// The body type the client sends.
type Body = Full<Bytes>;

/// The client type over the watching connector.
type Inner = Client<HttpsConnector<WatchingConnector>, Body>;

/// One HTTP client shared by every connection: one keep-alive pool for the run,
/// and a client that never reuses a connection, for the one re-send of a call a
/// provider never read because it closed the pooled connection. A connection
/// with a `tls:` block gets a client of its own (its roots and certificate).
#[derive(Clone)]
pub struct HttpClient {
    inner: Inner,
    fresh: Inner,
    /// Where the re-sends' jitter is drawn from: the run's one source.
    random: RandomSource,
    /// The system's roots, read once.
    roots: Arc<rustls::RootCertStore>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpClient")
    }
}

impl HttpClient {
    /// The same client, drawing its re-sends' jitter from `random` (the run's
    /// source, seeded or not).
    pub fn with_random(mut self, random: RandomSource) -> HttpClient {
        self.random = random;
        self
    }

    /// A client over http and https, with the process's environment (see
    /// [`HttpClient::with_env`]).
    pub fn new() -> Result<HttpClient, HttpSetupError> {
        HttpClient::with_env(&|name| std::env::var_os(name))
    }

    /// A client over http and https. TLS uses rustls with the ring provider and the
    /// system's root certificates (`SSL_CERT_FILE`/`SSL_CERT_DIR`, read through
    /// `env`, when set; a bad one refuses), or Mozilla's bundled roots when the
    /// system has none.
    pub fn with_env(env: &dyn Fn(&str) -> Option<OsString>) -> Result<HttpClient, HttpSetupError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = Arc::new(tls::system_roots(env)?);
        let config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| HttpSetupError::Tls(e.to_string()))?
            .with_root_certificates(roots.as_ref().clone())
            .with_no_client_auth();
        let (inner, fresh) = clients(config);
        Ok(HttpClient { inner, fresh, random: RandomSource::from_system(), roots, provider })
    }

    /// A client of its own for a connection with a `tls:` block: its files read
    /// and parsed now.
    fn for_tls(
        &self,
        connection: &str,
        settings: &program::Tls,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<HttpClient, HttpSetupError> {
        let config = tls::client_config(connection, settings, &self.roots, &self.provider, env)?;
        let (inner, fresh) = clients(config);
        Ok(HttpClient { inner, fresh, ..self.clone() })
    }
}

/// The pooled and the fresh client over one TLS configuration.
fn clients(config: rustls::ClientConfig) -> (Inner, Inner) {
    let mut http = HttpConnector::new();
    // The https connector wraps this one, so it must take `https:` URLs too.
    http.enforce_http(false);
    // Calls are small request/answer pairs: Nagle's delay would only add latency.
    http.set_nodelay(true);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .wrap_connector(WatchingConnector::new(http));
    let inner = Client::builder(TokioExecutor::new()).build(https.clone());
    let fresh = Client::builder(TokioExecutor::new()).pool_max_idle_per_host(0).build(https);
    (inner, fresh)
}

/// Where one action's calls go.
#[derive(Debug, Clone)]
struct Route {
    uri: Uri,
    idempotent: bool,
    /// The shortest run time limit among the subscribers and schedules calling the
    /// action, counted from the call when its caller tells none
    /// ([`SendMark::deadline`]).
    run_limit_ms: u64,
}

/// The HTTP driver of one connection.
pub struct HttpDriver {
    client: HttpClient,
    connection: String,
    routes: HashMap<String, Route>,
    /// The connection's `headers:`, `env("NAME")` already read; marked sensitive.
    headers: Vec<(HeaderName, HeaderValue)>,
    timeout: Duration,
    attempts: u32,
    in_flight: Arc<Semaphore>,
    /// See [`HttpDriver::resent_on_fresh_connection`].
    fresh_resends: std::sync::atomic::AtomicU64,
    /// The connection's `signing:`, its secrets or key read.
    signer: Option<Signer>,
}

impl std::fmt::Debug for HttpDriver {
    // Header values are secrets: only their names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("HttpDriver")
            .field("connection", &self.connection)
            .field("routes", &self.routes)
            .field("headers", &names)
            .field("timeout", &self.timeout)
            .field("attempts", &self.attempts)
            .field("max_in_flight", &self.in_flight.available_permits())
            .field("signer", &self.signer)
            .finish()
    }
}

/// Read the connection's headers, `env("NAME")` through `env`.
fn resolve_headers(
    c: &program::Connection,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Vec<(HeaderName, HeaderValue)>, HttpSetupError> {
    let mut out = Vec::with_capacity(c.headers.len());
    for (name, value) in &c.headers {
        let bad_header = || HttpSetupError::BadHeader { connection: c.name.clone(), header: name.clone() };
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad_header())?;
        let mut value = match value {
            program::HeaderValue::Literal(s) => HeaderValue::from_str(s).map_err(|_| bad_header())?,
            program::HeaderValue::Env(var) => {
                let missing = || HttpSetupError::MissingEnv {
                    connection: c.name.clone(),
                    header: name.clone(),
                    name: var.clone(),
                };
                let bad =
                    || HttpSetupError::BadEnv { connection: c.name.clone(), header: name.clone(), name: var.clone() };
                let raw = env(var).ok_or_else(missing)?;
                let s = raw.into_string().map_err(|_| bad())?;
                HeaderValue::from_str(&s).map_err(|_| bad())?
            }
        };
        // Kept out of any debug output or HPACK table: these are credentials.
        value.set_sensitive(true);
        out.push((header, value));
    }
    Ok(out)
}

impl HttpDriver {
    /// The driver of connection `connection` of `program`, its `env("NAME")`
    /// headers read now through `env` (`std::env::var_os` in `jadpoc run`).
    pub fn new(
        program: &Program,
        connection: usize,
        client: HttpClient,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<HttpDriver, HttpSetupError> {
        let Some(c) = program.connections.get(connection) else {
            return Err(HttpSetupError::NoConnection { index: connection });
        };
        let headers = resolve_headers(c, env)?;
        let signer = c.signing.as_ref().map(|signing| Signer::new(&c.name, signing, env)).transpose()?;
        let client = match &c.tls {
            Some(settings) => client.for_tls(&c.name, settings, env)?,
            None => client,
        };
        let mut routes = HashMap::new();
        for (ai, a) in program.actions.iter().enumerate().filter(|(_, a)| a.connection == connection) {
            let joined = join_url(&c.url, &a.path);
            let uri: Uri = joined
                .parse()
                .ok()
                .filter(|u: &Uri| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some())
                .ok_or_else(|| HttpSetupError::BadUrl { action: a.name.clone(), url: joined.clone() })?;
            let run_limit_ms = program
                .subscribers
                .iter()
                .filter(|s| s.call.action == ai)
                .map(|s| s.timeout_ms)
                .chain(program.schedules.iter().filter(|s| s.call.action == ai).map(|s| s.timeout_ms))
                .min()
                .unwrap_or(budget::DEFAULT_RUN_TIMEOUT_MS);
            routes.insert(a.name.clone(), Route { uri, idempotent: a.idempotent, run_limit_ms });
        }
        let permits = usize::try_from(c.max_in_flight.max(1)).unwrap_or(1);
        Ok(HttpDriver {
            client,
            connection: c.name.clone(),
            routes,
            headers,
            timeout: Duration::from_millis(c.timeout_ms.max(1)),
            attempts: c.attempts.max(1),
            in_flight: Arc::new(Semaphore::new(permits)),
            fresh_resends: std::sync::atomic::AtomicU64::new(0),
            signer,
        })
    }

    /// Build one send's request.
    fn request(&self, route: &Route, msg: &Message, call: &CallRequest) -> Result<Request<Body>, hyper::http::Error> {
        let mut b = Request::builder()
            .method(Method::POST)
            .uri(route.uri.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE));
        if let Some(id) = call.delivery {
            b = b.header("idempotency-key", id);
        }
        let mut req = b.body(Full::new(msg.body.clone()))?;
        // The connection's own headers come next and win over ours of the same name.
        for (n, v) in &self.headers {
            req.headers_mut().insert(n.clone(), v.clone());
        }
        // The signature, signed at this send's time, last: nothing overrides it.
        if let Some(signer) = &self.signer {
            let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
            let timestamp = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
            let headers = req.headers_mut();
            headers.insert(signing::WEBHOOK_ID, HeaderValue::from_str(&msg.id)?);
            headers.insert(signing::WEBHOOK_TIMESTAMP, HeaderValue::from(timestamp));
            headers.insert(
                signing::WEBHOOK_SIGNATURE,
                HeaderValue::from_str(&signer.signature(&msg.id, timestamp, &msg.body))?,
            );
        }
        Ok(req)
    }

    /// One send, bounded by the connection's `timeout:`, once one of the
    /// connection's `max_in_flight:` slots is free: a call still waiting for one
    /// at the run's time limit (`limit`) ends there, never sent. A call the
    /// provider surely never received because it had closed the pooled connection
    /// is sent once more, on a fresh connection.
    async fn send(&self, route: &Route, msg: &Message, call: &CallRequest, mark: &SendMark, limit: Instant) -> Outcome {
        let _permit = match tokio::time::timeout_at(limit.into(), self.in_flight.acquire()).await {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => return fail_with(FailureKind::InternalFault, RuntimeCode::HttpDriverClosed.as_str(), None),
            // Nothing is in flight: `deadline_exceeded`.
            Err(_) => return mark.at_time_limit(),
        };
        let deadline = tokio::time::Instant::now() + self.timeout;
        let first = self.send_on(&self.client.inner, route, msg, call, deadline, mark).await;
        match first {
            Attempted::NeverReceived(_) => {
                self.fresh_resends.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                match self.send_on(&self.client.fresh, route, msg, call, deadline, mark).await {
                    Attempted::Done(sent) => sent,
                    // Twice refused unread: the provider is closing every connection.
                    Attempted::NeverReceived(reason) => fail_with(FailureKind::Unavailable, CODE_REFUSED, Some(reason)),
                }
            }
            Attempted::Done(sent) => sent,
        }
    }

    /// One send through `client`, bounded by `deadline`.
    async fn send_on(
        &self,
        client: &Inner,
        route: &Route,
        msg: &Message,
        call: &CallRequest,
        deadline: tokio::time::Instant,
        mark: &SendMark,
    ) -> Attempted {
        let attempted = self.send_on_marked(client, route, msg, call, deadline, mark).await;
        mark.settled();
        attempted
    }

    /// [`HttpDriver::send_on`], before the mark is settled.
    async fn send_on_marked(
        &self,
        client: &Inner,
        route: &Route,
        msg: &Message,
        call: &CallRequest,
        deadline: tokio::time::Instant,
        mark: &SendMark,
    ) -> Attempted {
        let mut req = match self.request(route, msg, call) {
            Ok(r) => r,
            Err(_) => {
                return Attempted::Done(fail_with(
                    FailureKind::InternalFault,
                    RuntimeCode::HttpBadRequest.as_str(),
                    None,
                ));
            }
        };
        // Tells a timeout before a connection was had (the call never left) from
        // one after the request went out, and what the connection saw.
        let captured = Arc::new(capture_connection(&mut req));
        // The request is written as soon as hyper has a connection for it.
        let probe = captured.clone();
        mark.sending(route.idempotent, move || probe.connection_metadata().is_some());
        let answer = match tokio::time::timeout_at(deadline, client.request(req)).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                let watch = captured.connection_metadata().as_ref().and_then(watch_of);
                if let Some(w) = watch
                    && w.never_received()
                {
                    return Attempted::NeverReceived(deepest_text(&e));
                }
                return Attempted::Done(transport_failure(&e, route.idempotent));
            }
            Err(_) if captured.connection_metadata().is_none() => {
                let reason = format!("no connection within {} ms", self.timeout.as_millis());
                return Attempted::Done(fail_with(FailureKind::Unavailable, CODE_CONNECT_TIMEOUT, Some(reason)));
            }
            Err(_) => {
                let reason = format!("no answer within {} ms", self.timeout.as_millis());
                return Attempted::Done(no_answer(route.idempotent, reason));
            }
        };
        let (parts, incoming) = answer.into_parts();
        let body = match tokio::time::timeout_at(deadline, Limited::new(incoming, MAX_ANSWER_BODY).collect()).await {
            Ok(Ok(collected)) => Some(collected.to_bytes()),
            // Longer than what is read of a body: the status decides.
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => None,
            // The body ended before its length or its last chunk: whatever it held
            // (a failure body wins on any status) is unknown. A defect of the
            // provider, as an answer that is not HTTP.
            Ok(Err(e)) => {
                let reason =
                    format!("the body of a {} answer was cut short: {}", parts.status.as_u16(), deepest_text(&*e));
                let mut f = CallFailure::new(FailureKind::InternalFault, CODE_INVALID_ANSWER).with_reason(reason);
                f.http_status = Some(parts.status.as_u16());
                return Attempted::Done(Outcome::Failed(f));
            }
            // A body that does not come in time: the status decides.
            Err(_) => None,
        };
        Attempted::Done(map_answer(parts.status, &parts.headers, body.as_deref(), SystemTime::now()))
    }
}

/// How one send through one client ended.
enum Attempted {
    /// The provider surely never received it (the text of the failure).
    NeverReceived(String),
    /// It ended this way.
    Done(Outcome),
}

/// A failure with a short reason: the underlying error's text, never a header
/// value or a body.
fn fail_with(kind: FailureKind, code: &str, reason: Option<String>) -> Outcome {
    let mut f = CallFailure::new(kind, code);
    f.reason = reason;
    Outcome::Failed(f)
}

/// What the watching connector saw of the connection a request went to.
fn watch_of(connected: &Connected) -> Option<WatchSnapshot> {
    let mut ext = hyper::http::Extensions::new();
    connected.get_extras(&mut ext);
    ext.get::<Watched>().map(Watched::snapshot)
}

/// The text of the innermost error of a chain: the cause in its own words
/// ("Connection refused (os error 111)"), without hyper's wrappers.
pub(crate) fn deepest_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last = e;
    while let Some(next) = last.source() {
        last = next;
    }
    let text = last.to_string();
    // A reason is a few words for a log line: an error's text is cut at 200
    // characters.
    text.chars().take(200).collect()
}

/// The url and the action's path, joined by exactly one `/`.
pub fn join_url(url: &str, path: &str) -> String {
    format!("{}/{}", url.trim_end_matches('/'), path.trim_start_matches('/'))
}

/// A call that was sent and got no answer.
fn no_answer(idempotent: bool, reason: String) -> Outcome {
    let kind = if idempotent { FailureKind::Unavailable } else { FailureKind::OutcomeUnknown };
    fail_with(kind, CODE_NO_ANSWER, Some(reason))
}

/// The TLS error in an error's chain, if any (also inside an `io::Error`).
fn tls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(t) = err.downcast_ref::<rustls::Error>() {
            return Some(t);
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && let Some(t) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>())
        {
            return Some(t);
        }
        cur = err.source();
    }
    None
}

/// Whether a TLS error is the handshake's: a certificate or protocol refused by
/// either side. In TLS 1.3 a server refuses the client's certificate after the
/// client has finished its side of the handshake, so the refusal arrives as an
/// alert when the answer is read; the server never took the request.
fn is_handshake_failure(e: &rustls::Error) -> bool {
    use rustls::AlertDescription as A;
    match e {
        rustls::Error::AlertReceived(a) => matches!(
            a,
            A::HandshakeFailure
                | A::BadCertificate
                | A::UnsupportedCertificate
                | A::CertificateRevoked
                | A::CertificateExpired
                | A::CertificateUnknown
                | A::UnknownCA
                | A::AccessDenied
                | A::CertificateRequired
                | A::ProtocolVersion
                | A::InsufficientSecurity
                | A::IllegalParameter
                | A::DecryptError
        ),
        _ => true,
    }
}

/// A client error: before the request left, or after.
fn transport_failure(e: &hyper_util::client::legacy::Error, idempotent: bool) -> Outcome {
    let reason = deepest_text(e);
    if let Some(t) = tls_error(e)
        && (e.is_connect() || is_handshake_failure(t))
    {
        return fail_with(FailureKind::Unavailable, CODE_TLS, Some(t.to_string()));
    }
    if e.is_connect() {
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(err) = cur {
            if let Some(named) = err.downcast_ref::<ConnectFailure>() {
                return fail_with(FailureKind::Unavailable, named.code, Some(named.reason.clone()));
            }
            cur = err.source();
        }
        // The TCP connection was made (its failures are named above): what failed
        // is the TLS layer over it, such as a handshake the server ended.
        return fail_with(FailureKind::Unavailable, CODE_TLS, Some(reason));
    }
    let hyper_err = std::error::Error::source(e).and_then(|s| s.downcast_ref::<hyper::Error>());
    if hyper_err.is_some_and(|h| h.is_canceled()) {
        // The pool's connection closed before the request was written.
        return fail_with(FailureKind::Unavailable, CODE_REFUSED, Some(reason));
    }
    if hyper_err.is_some_and(|h| h.is_parse() || h.is_parse_status()) {
        return fail_with(FailureKind::InternalFault, CODE_INVALID_ANSWER, Some(reason));
    }
    no_answer(idempotent, reason)
}

/// Map a provider's answer to an outcome, as runtime.md's table says: a
/// `{"failure": {"code", "kind"}}` body wins on any status; then 2xx succeeds, 429
/// is `rate_limited`, 408 and 5xx `unavailable`, 404 `not_found`, 409 `conflict`,
/// any other 4xx or 3xx `rejected`. A `Retry-After` (delta-seconds or HTTP-date,
/// read against `now`) is kept on a retryable failure.
pub fn map_answer(status: StatusCode, headers: &HeaderMap, body: Option<&[u8]>, now: SystemTime) -> Outcome {
    let code = status.as_u16();
    let http_status = Some(code);
    let declared = body.and_then(failure_body);
    let (kind, code) = match declared {
        Some((kind, c)) => (kind, c),
        None => {
            let kind = match code {
                200..=299 => return Outcome::Succeeded { http_status },
                429 => FailureKind::RateLimited,
                408 | 500..=599 => FailureKind::Unavailable,
                404 => FailureKind::NotFound,
                409 => FailureKind::Conflict,
                300..=499 => FailureKind::Rejected,
                // 1xx never reach here (hyper handles them); 600 and up are no
                // HTTP answer at all: a defect of the provider.
                _ => FailureKind::InternalFault,
            };
            (kind, jadpo_core::codes::http_status_code(code))
        }
    };
    let retry_after_ms = if matches!(kind, FailureKind::Unavailable | FailureKind::RateLimited) {
        headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(|v| parse_retry_after_ms(v, now))
    } else {
        None
    };
    Outcome::Failed(CallFailure { kind, code, http_status, retry_after_ms, reason: None })
}

/// `{"failure": {"code": C, "kind": K}}`: K's kind (a word that is not a kind an
/// attempt can end with is `internal_fault`) and C, cut to [`MAX_CODE_LEN`].
fn failure_body(body: &[u8]) -> Option<(FailureKind, String)> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let f = v.get("failure")?;
    let code = f.get("code")?.as_str()?;
    let kind = f.get("kind")?.as_str()?;
    let kind = match FailureKind::parse(kind) {
        // A lease is the runtime's own affair, never a provider's answer.
        Some(FailureKind::LeaseExpired) | None => FailureKind::InternalFault,
        Some(k) => k,
    };
    let mut end = code.len().min(MAX_CODE_LEN);
    while !code.is_char_boundary(end) {
        end -= 1;
    }
    Some((kind, code[..end].to_string()))
}

/// A `Retry-After` value in milliseconds from `now`: delta-seconds, or an
/// HTTP-date (one in the past asks for no wait). Anything else is ignored.
pub fn parse_retry_after_ms(value: &str, now: SystemTime) -> Option<u64> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        // Too many digits for a u64 still asks for a very long wait.
        return Some(v.parse::<u64>().map(|s| s.saturating_mul(budget::SECOND_MS)).unwrap_or(u64::MAX));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    let ms = at.duration_since(now).map(|d| d.as_millis()).unwrap_or(0);
    Some(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// The wait before re-send `n` (1 for the first): 100ms doubling, at most 2s,
/// drawn evenly from its upper half so that re-sends of many calls spread out.
pub fn resend_wait_ms<R: rand::Rng + ?Sized>(n: u32, rng: &mut R) -> u64 {
    let ceiling = RESEND_BASE_MS.saturating_mul(1u64 << n.saturating_sub(1).min(16)).min(RESEND_CAP_MS);
    rng.random_range(ceiling / 2..=ceiling)
}

/// Whether a connection-level re-send may follow this outcome.
fn resendable(o: &Outcome) -> bool {
    matches!(o, Outcome::Failed(f) if matches!(f.kind, FailureKind::Unavailable | FailureKind::RateLimited))
}

/// One call's request body, and the id its signature names (`webhook-id`).
struct Message {
    body: Bytes,
    id: String,
}

/// A call's message id, as `webhook-id` sends it: a delivery's is the same on
/// every attempt and re-send (`msg_` and its id, as its `Idempotency-Key`); a
/// schedule's run's names the schedule and when the run started.
fn message_id(call: &CallRequest, started: SystemTime) -> String {
    match call.delivery {
        Some(id) => format!("msg_{id}"),
        None => {
            let ms = started.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_millis();
            format!("msg_{}_{ms}", call.event)
        }
    }
}

/// The request's JSON body, serialized straight from the call (no `Value` tree
/// built per call).
#[derive(serde::Serialize)]
struct WireBody<'a> {
    action: &'a str,
    args: &'a serde_json::Value,
    event: WireEvent<'a>,
    delivery: Option<i64>,
    attempt: u32,
}

/// The body's `event`: its id (null for a schedule's run) and name.
#[derive(serde::Serialize)]
struct WireEvent<'a> {
    id: Option<i64>,
    name: &'a str,
}

impl HttpDriver {
    /// Make the call: the connection's sends of it, as [`Driver::call`] says.
    async fn call_sends(&self, request: CallRequest, mark: SendMark) -> Outcome {
        let started = Instant::now();
        let Some(route) = self.routes.get(&request.action) else {
            return fail_with(FailureKind::InternalFault, RuntimeCode::HttpUnknownAction.as_str(), None);
        };
        let limit = mark.deadline().unwrap_or_else(|| started + Duration::from_millis(route.run_limit_ms));
        let body = WireBody {
            action: &request.action,
            args: &request.args,
            event: WireEvent { id: request.event_id, name: &request.event },
            delivery: request.delivery,
            attempt: request.attempt,
        };
        let body = match serde_json::to_vec(&body) {
            Ok(b) => Bytes::from(b),
            Err(_) => return fail_with(FailureKind::InternalFault, RuntimeCode::HttpBadBody.as_str(), None),
        };
        let message = Message { body, id: message_id(&request, SystemTime::now()) };
        let mut sends = 1;
        loop {
            let sent_at = Instant::now();
            let sent = self.send(route, &message, &request, &mark, limit).await;
            if sends >= self.attempts || !resendable(&sent) {
                return sent;
            }
            let asked = match &sent {
                Outcome::Failed(f) => f.retry_after_ms.unwrap_or(0),
                Outcome::Succeeded { .. } => 0,
            };
            let wait = self.client.random.with(|r| resend_wait_ms(sends, r)).max(asked);
            // Re-send only when the wait, and a send as long as the last one,
            // fit in what is left of the run's time limit: never sleep past the
            // limit, and give the re-send a fair chance to end by itself. A
            // Retry-After too long for that is left to the core, which honours
            // it between attempts.
            let needed =
                Duration::from_millis(wait.saturating_add(RUN_LIMIT_MARGIN_MS)).saturating_add(sent_at.elapsed());
            if Instant::now().checked_add(needed).is_none_or(|end| end > limit) {
                return sent;
            }
            tokio::time::sleep(Duration::from_millis(wait)).await;
            sends += 1;
        }
    }

    /// Calls sent a second time on a fresh connection because the provider had
    /// closed the pooled one before reading them.
    pub fn resent_on_fresh_connection(&self) -> u64 {
        self.fresh_resends.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Driver for HttpDriver {
    fn call(&self, request: CallRequest) -> BoxFuture<'_, Outcome> {
        Box::pin(self.call_sends(request, SendMark::new()))
    }

    fn call_marked(&self, request: CallRequest, sent: SendMark) -> BoxFuture<'_, Outcome> {
        Box::pin(self.call_sends(request, sent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn map(status: u16, body: Option<&str>, retry_after: Option<&str>) -> Outcome {
        let mut h = HeaderMap::new();
        if let Some(r) = retry_after {
            h.insert(RETRY_AFTER, HeaderValue::from_str(r).unwrap());
        }
        map_answer(StatusCode::from_u16(status).unwrap(), &h, body.map(str::as_bytes), SystemTime::UNIX_EPOCH)
    }

    fn failed(kind: FailureKind, code: &str, status: u16, retry_after_ms: Option<u64>) -> Outcome {
        Outcome::Failed(CallFailure {
            kind,
            code: code.into(),
            http_status: Some(status),
            retry_after_ms,
            reason: None,
        })
    }

    #[test]
    fn statuses_map_as_the_table_says() {
        use FailureKind::*;
        assert_eq!(map(200, None, None), Outcome::Succeeded { http_status: Some(200) });
        assert_eq!(map(204, None, None), Outcome::Succeeded { http_status: Some(204) });
        for (s, kind) in [
            (429, RateLimited),
            (408, Unavailable),
            (500, Unavailable),
            (503, Unavailable),
            (599, Unavailable),
            (404, NotFound),
            (409, Conflict),
            (401, Rejected),
            (403, Rejected),
            (400, Rejected),
            (422, Rejected),
            (301, Rejected),
            (302, Rejected),
            (600, InternalFault),
        ] {
            assert_eq!(map(s, None, None), failed(kind, &format!("http.{s}"), s, None), "{s}");
        }
    }

    #[test]
    fn a_failure_body_wins_on_any_status() {
        let b = r#"{"failure": {"code": "ledger.closed", "kind": "rejected"}}"#;
        assert_eq!(map(200, Some(b), None), failed(FailureKind::Rejected, "ledger.closed", 200, None));
        assert_eq!(map(503, Some(b), None), failed(FailureKind::Rejected, "ledger.closed", 503, None));
        let b = r#"{"failure": {"code": "x", "kind": "exploded"}}"#;
        assert_eq!(map(400, Some(b), None), failed(FailureKind::InternalFault, "x", 400, None));
        let b = r#"{"failure": {"code": "x", "kind": "lease_expired"}}"#;
        assert_eq!(map(400, Some(b), None), failed(FailureKind::InternalFault, "x", 400, None));
        // Not the shape: the status decides.
        assert_eq!(map(200, Some(r#"{"failure": "no"}"#), None), Outcome::Succeeded { http_status: Some(200) });
        assert_eq!(map(200, Some("not json"), None), Outcome::Succeeded { http_status: Some(200) });
        let long = format!(r#"{{"failure": {{"code": "{}", "kind": "conflict"}}}}"#, "é".repeat(100));
        let Outcome::Failed(f) = map(409, Some(&long), None) else { panic!("a failure") };
        assert!(f.code.len() <= MAX_CODE_LEN && f.code.starts_with('é'));
    }

    #[test]
    fn retry_after_is_read_in_both_forms_on_retryable_answers_only() {
        assert_eq!(map(503, None, Some("120")), failed(FailureKind::Unavailable, "http.503", 503, Some(120_000)));
        // UNIX_EPOCH is `now` in these tests: one minute after it.
        let date = "Thu, 01 Jan 1970 00:01:00 GMT";
        assert_eq!(map(429, None, Some(date)), failed(FailureKind::RateLimited, "http.429", 429, Some(60_000)));
        assert_eq!(map(404, None, Some("120")), failed(FailureKind::NotFound, "http.404", 404, None));
        assert_eq!(map(503, None, Some("soon")), failed(FailureKind::Unavailable, "http.503", 503, None));
        let later = SystemTime::UNIX_EPOCH + Duration::from_secs(3600);
        assert_eq!(parse_retry_after_ms(date, later), Some(0));
        assert_eq!(parse_retry_after_ms("99999999999999999999999", later), Some(u64::MAX));
    }

    #[test]
    fn resend_waits_double_from_100ms_to_2s_jittered() {
        let mut rng = StdRng::seed_from_u64(7);
        for (n, ceiling) in [(1, 100), (2, 200), (3, 400), (4, 800), (5, 1600), (6, 2000), (10, 2000), (99, 2000)] {
            for _ in 0..50 {
                let w = resend_wait_ms(n, &mut rng);
                assert!((ceiling / 2..=ceiling).contains(&w), "re-send {n}: {w}");
            }
        }
    }
}
