//! The operator's console: a web console of a running outbox, served from the
//! binary (`jadpoc run --console ADDR`, `jadpoc console --db ...`).
//!
//! - Pages, rendered on the server so that they read without JavaScript
//!   (`pages`): the overview (deliveries by state and subscriber, attempts per
//!   minute over the last hour, breakers), deliveries with filters and keyset
//!   paging, one delivery with its history and its event's payload, events, one
//!   event, breakers. A little script (`assets/console.js`) refreshes the
//!   overview (polling with ETags) and asks before an action.
//! - Actions (`--console-actions`): retry one delivery, or every one a filter
//!   selects (a confirmation page names how many first); replay an event; pause
//!   and resume a connection. Each is a POST form guarded as `security` says.
//! - The JSON API under `/api/`: the very shapes of the commands' `--format
//!   json` ([`views`], which `jadpoc` prints too).
//!
//! The store is synchronous; every call runs on tokio's blocking threads. The
//! HTTP side is `jadpo-http`'s accept loop.

mod assets;
mod html;
mod pages;
pub mod query;
pub mod replay;
pub mod security;
pub mod views;

use bytes::Bytes;
use html::Markup;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE, ETAG, HeaderValue, IF_NONE_MATCH, LOCATION, SET_COOKIE};
use hyper::server::conn::http1;
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use hyper_util::rt::TokioTimer;
use jadpo_check::program::{DeliveryState, Program};
use jadpo_core::clock::Clock;
use jadpo_core::rng::RandomSource;
use jadpo_core::rules::breaker::Pause;
use jadpo_core::store::{Actions, DeliveryDetail, EventDetail, status_now};
use jadpo_core::store::{
    AttemptRate, DeliveryFilter, EventFilter, EventView, RATE_MINUTE_MS, Replay, RetryResult, Store, StoreError,
    retry_subject,
};
use query::{Deliveries, Events, Fields};
use security::{Access, CSRF_COOKIE, CSRF_FIELD, TOKEN_COOKIE};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use security::check_listen;

/// Where the console listens when not told.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7400";
/// Most connections the console serves at once; more wait to be accepted.
pub const MAX_CONNECTIONS: usize = 64;
/// The largest form body taken.
pub const MAX_FORM_BYTES: usize = 64 * 1024;
/// The window of the overview's rates.
pub const RATES_WINDOW_MS: i64 = 60 * RATE_MINUTE_MS;
/// How long the rates read from the store are kept before they are read again
/// (counting an hour of attempts is the overview's dearest read).
pub const RATES_REFRESH_MS: i64 = 5_000;
/// How often the overview's script asks for a fresh overview.
pub const LIVE_POLL_MS: u64 = 2_000;
/// Deliveries read per page while a bulk retry selects them.
pub const BULK_PAGE: usize = 500;
/// Most deliveries one bulk retry takes (the confirmation says when a filter
/// selects more).
pub const BULK_MAX: usize = 10_000;
/// Who an operator's pause or resume from the console is kept as, when the
/// form names no one.
pub const CONSOLE_OPERATOR: &str = "console";

/// A page the console serves (as HTML, on GET): see [`PAGES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    /// The overview: counts, rates, program versions, breakers.
    Overview,
    /// The overview's part that refreshes itself.
    OverviewLive,
    /// Deliveries, with filters and paging.
    Deliveries,
    /// The confirmation of a bulk retry.
    BulkRetry,
    /// One delivery.
    Delivery,
    /// Events, with filters and paging.
    Events,
    /// The confirmation of a replay by filter.
    BulkReplay,
    /// One event.
    Event,
    /// Every connection's breaker, pauses and resumes.
    Breakers,
    /// The login form of a console with a token.
    Login,
}

/// What stands for an id in a path of [`PAGES`].
pub const ID: &str = "{id}";

/// Every page the console serves, by its path (its segments, [`ID`] standing
/// for an id), the first that matches winning: the router finds a page here,
/// so a page is served only through this table (beside it: the assets, the
/// JSON API under `/api/`, and the actions POSTed).
pub const PAGES: [(&str, Page); 10] = [
    ("/", Page::Overview),
    ("/overview/live", Page::OverviewLive),
    ("/deliveries", Page::Deliveries),
    ("/deliveries/retry", Page::BulkRetry),
    ("/deliveries/{id}", Page::Delivery),
    ("/events", Page::Events),
    ("/events/replay", Page::BulkReplay),
    ("/events/{id}", Page::Event),
    ("/breakers", Page::Breakers),
    ("/login", Page::Login),
];

/// The page at a path's `segments`, with the segment that stands for its id
/// (when its path has one).
fn find_page<'a>(segments: &[&'a str]) -> Option<(Page, Option<&'a str>)> {
    PAGES.iter().find_map(|(pattern, page)| {
        let wanted: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
        if wanted.len() != segments.len() {
            return None;
        }
        let mut id = None;
        for (w, s) in wanted.iter().zip(segments) {
            if *w == ID {
                id = Some(*s);
            } else if w != s {
                return None;
            }
        }
        Some((*page, id))
    })
}

/// How the console is run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Whether actions are on (`--console-actions`); else every POST but the
    /// login is refused with 403.
    pub actions: bool,
    /// The token every request must carry, if one is given (`--token env:NAME`).
    pub token: Option<String>,
    /// The address listened on (the Host check reads whether it is loopback).
    pub listen: SocketAddr,
}

/// A console over one store.
pub struct Console {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    program: Option<Arc<Program>>,
    settings: Settings,
    csrf: String,
    rates: Mutex<Option<(i64, Vec<AttemptRate>)>>,
}

/// What a request asked for as an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wants {
    Html,
    Json,
}

fn wants(path: &str, headers: &HeaderMap) -> Wants {
    let accept = headers.get(ACCEPT).and_then(|a| a.to_str().ok()).unwrap_or("");
    if path.starts_with("/api/") || (accept.contains("application/json") && !accept.contains("text/html")) {
        Wants::Json
    } else {
        Wants::Html
    }
}

type Answer = Response<Full<Bytes>>;

fn respond(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Answer {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    h.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
        ),
    );
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn json_answer(status: StatusCode, value: &Value) -> Answer {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".to_string());
    text.push('\n');
    respond(status, "application/json", text)
}

fn redirect(location: &str) -> Answer {
    let mut r = respond(StatusCode::SEE_OTHER, "text/plain; charset=utf-8", format!("see {location}\n"));
    if let Ok(v) = HeaderValue::from_str(location) {
        r.headers_mut().insert(LOCATION, v);
    }
    r
}

/// The `ETag` of `body`: the first half of its SHA-256, quoted.
fn etag(body: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, body);
    let hex: String = digest.as_ref()[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// `answer` with its ETag, or `304 Not Modified` when the request's
/// `If-None-Match` names it already.
fn with_etag(headers: &HeaderMap, mut answer: Answer, body: &[u8]) -> Answer {
    let tag = etag(body);
    let matches =
        headers.get(IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| v.split(',').any(|t| t.trim() == tag));
    if matches {
        let mut r = respond(StatusCode::NOT_MODIFIED, "text/plain; charset=utf-8", Bytes::new());
        r.headers_mut().remove(CONTENT_TYPE);
        answer = r;
    }
    // Revalidated at every request, never stored stale.
    answer.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(&tag) {
        answer.headers_mut().insert(ETAG, v);
    }
    answer
}

/// Whether an operator can retry a delivery in `state` (the core's rule, asked
/// of a fresh record in that state).
pub fn retryable(state: DeliveryState) -> bool {
    jadpo_core::rules::operator_retry(&retry_subject(state, 0, 0), 0).is_some()
}

/// The states an operator can retry, in the store's order.
pub fn retryable_states() -> Vec<DeliveryState> {
    DeliveryState::ALL.into_iter().filter(|s| retryable(*s)).collect()
}

/// Why a request failed, as the answer says it.
struct Failure {
    status: StatusCode,
    message: String,
}

impl Failure {
    fn new(status: StatusCode, message: impl Into<String>) -> Failure {
        Failure { status, message: message.into() }
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        Failure::new(StatusCode::SERVICE_UNAVAILABLE, format!("the store could not be read or written: {e}"))
    }
}

impl From<query::Invalid> for Failure {
    fn from(e: query::Invalid) -> Failure {
        Failure::new(StatusCode::BAD_REQUEST, e.0)
    }
}

/// The words of a read-only console's refusal.
pub const READ_ONLY: &str = "this console is read-only: it was started without `--console-actions`, so it retries, \
                             replays, pauses and resumes nothing. Restart it with `--console-actions` to act.";

impl Console {
    /// A console over `store`, reading time from `clock`; `program` (when known)
    /// lets it replay events and pause connections that have no breaker yet.
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        program: Option<Arc<Program>>,
        settings: Settings,
    ) -> Console {
        let csrf = security::csrf_token(&RandomSource::from_system());
        Console { store, clock, program, settings, csrf, rates: Mutex::new(None) }
    }

    /// The connections the program declares (none without the program).
    fn declared_connections(&self) -> Vec<String> {
        self.program.as_ref().map(|p| p.connections.iter().map(|c| c.name.clone()).collect()).unwrap_or_default()
    }

    /// The process's CSRF token (what a page's forms carry).
    pub fn csrf(&self) -> &str {
        &self.csrf
    }

    /// Run `f` on the store on a blocking thread.
    async fn with_store<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, Failure> {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || f(&*store)).await {
            Ok(r) => r.map_err(Failure::from),
            Err(e) => Err(Failure::new(StatusCode::INTERNAL_SERVER_ERROR, format!("the store's call failed: {e}"))),
        }
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The attempts of the last hour per minute, read again at most every
    /// [`RATES_REFRESH_MS`].
    async fn rates(&self, now_ms: i64) -> Result<Vec<AttemptRate>, Failure> {
        if let Ok(cached) = self.rates.lock()
            && let Some((at, rates)) = cached.as_ref()
            && now_ms - at < RATES_REFRESH_MS
            && now_ms >= *at
        {
            return Ok(rates.clone());
        }
        let since = (now_ms - RATES_WINDOW_MS).div_euclid(RATE_MINUTE_MS) * RATE_MINUTE_MS;
        let rates = self.with_store(move |s| s.attempt_rates(since)).await?;
        if let Ok(mut cached) = self.rates.lock() {
            *cached = Some((now_ms, rates.clone()));
        }
        Ok(rates)
    }

    /// Answer one request whose body has been read.
    pub async fn answer(self: &Arc<Self>, req: Request<Bytes>) -> Answer {
        let (parts, body) = req.into_parts();
        let path = parts.uri.path().to_string();
        let fields = Fields::parse(parts.uri.query().unwrap_or(""));
        let wants = wants(&path, &parts.headers);
        let mut answer = match self.route(&parts.method, &path, &fields, &parts.headers, &body, wants).await {
            Ok(a) => a,
            Err(f) => self.failure(&f, wants),
        };
        if answer.headers().get(CONTENT_TYPE).is_some_and(|c| c.as_bytes().starts_with(b"text/html")) {
            let cookie = format!("{CSRF_COOKIE}={}; Path=/; SameSite=Strict; HttpOnly", self.csrf);
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                answer.headers_mut().append(SET_COOKIE, v);
            }
        }
        answer
    }

    fn failure(&self, f: &Failure, wants: Wants) -> Answer {
        match wants {
            Wants::Json => json_answer(f.status, &json!({"error": f.message})),
            Wants::Html => {
                let title = f.status.canonical_reason().unwrap_or("Error");
                let body = maud::html! {
                    p class="error" role="alert" { (f.message) }
                    p { a href="/" { "Back to the overview" } }
                };
                self.page(f.status, title, "", body, None)
            }
        }
    }

    fn page(&self, status: StatusCode, title: &str, nav: &str, body: Markup, notice: Option<Markup>) -> Answer {
        let logout = self
            .settings
            .token
            .as_ref()
            .map(|_| html::action_form("/logout", &self.csrf, maud::html! {}, "Log out", None));
        let doc = html::document(&html::Layout { title, nav, body, actions: self.settings.actions, notice, logout });
        respond(status, "text/html; charset=utf-8", doc.into_string())
    }

    async fn route(
        self: &Arc<Self>,
        method: &Method,
        path: &str,
        fields: &Fields,
        headers: &HeaderMap,
        body: &Bytes,
        wants: Wants,
    ) -> Result<Answer, Failure> {
        if let Some(why) = security::host_refused(headers, &self.settings.listen) {
            return Err(Failure::new(StatusCode::MISDIRECTED_REQUEST, why));
        }
        let segments: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
        let page = if *method == Method::GET || *method == Method::HEAD { find_page(&segments) } else { None };
        // The assets and the login page are for everyone who reaches the console.
        match (method, segments.as_slice(), page) {
            (&Method::GET, ["assets", name], _) => return assets::answer(name, headers),
            (_, _, Some((Page::Login, _))) => return Ok(self.login_page(fields, None)),
            (&Method::POST, ["login"], _) => return Ok(self.login(headers, body)),
            _ => {}
        }
        let access = security::access(headers, self.settings.token.as_deref());
        if access == Access::Refused {
            return Ok(match wants {
                Wants::Json => json_answer(
                    StatusCode::UNAUTHORIZED,
                    &json!({"error": "this console needs its token: `Authorization: Bearer TOKEN`"}),
                ),
                Wants::Html if *method == Method::GET => {
                    redirect(&format!("/login?{}", query::encode(&[("next", path.to_string())])))
                }
                Wants::Html => self.failure(
                    &Failure::new(StatusCode::UNAUTHORIZED, "this console needs its token: log in first"),
                    wants,
                ),
            });
        }
        if *method == Method::POST {
            return self.act(access, &segments, headers, body, wants).await;
        }
        if *method != Method::GET && *method != Method::HEAD {
            return Err(Failure::new(StatusCode::METHOD_NOT_ALLOWED, format!("{method} is not served here")));
        }
        let now = self.now_ms();
        let id = page.and_then(|(_, id)| id).unwrap_or_default();
        match (page.map(|(p, _)| p), segments.as_slice()) {
            (Some(Page::Overview), _) => self.overview(now, false, headers).await,
            (Some(Page::OverviewLive), _) => self.overview(now, true, headers).await,
            (Some(Page::Deliveries), _) => self.deliveries(fields, now).await,
            (Some(Page::BulkRetry), _) => self.bulk_confirm(fields, now).await,
            (Some(Page::Delivery), _) => self.delivery(parse_id(id)?, fields).await,
            (Some(Page::Events), _) => self.events(fields, now).await,
            (Some(Page::BulkReplay), _) => self.bulk_replay_confirm(fields, now).await,
            (Some(Page::Event), _) => self.event(parse_id(id)?, fields).await,
            (Some(Page::Breakers), _) => self.breakers_page(fields, now).await,
            (Some(Page::Login), _) => Ok(self.login_page(fields, None)),
            (None, ["api", rest @ ..]) => self.api(rest, fields, now, headers).await,
            (None, _) => Err(Failure::new(StatusCode::NOT_FOUND, format!("no page at `{path}`"))),
        }
    }

    fn login_page(&self, fields: &Fields, error: Option<&str>) -> Answer {
        let next = fields.get("next").filter(|n| local_path(n)).unwrap_or("/");
        let body = pages::login(&self.csrf, next, error);
        let status = if error.is_some() { StatusCode::UNAUTHORIZED } else { StatusCode::OK };
        self.page(status, "Log in", "", body, None)
    }

    fn login(&self, headers: &HeaderMap, body: &Bytes) -> Answer {
        let form = Fields::parse(&String::from_utf8_lossy(body));
        if let Err(f) = self.csrf_check(headers, &form) {
            return self.failure(&f, Wants::Html);
        }
        let Some(token) = self.settings.token.as_deref() else { return redirect("/") };
        if !form.get("token").is_some_and(|t| security::same(t, token)) {
            return self.login_page(&form, Some("that is not this console's token"));
        }
        let next = form.get("next").filter(|n| local_path(n)).unwrap_or("/");
        let mut r = redirect(next);
        let cookie = format!("{TOKEN_COOKIE}={token}; Path=/; SameSite=Strict; HttpOnly");
        if let Ok(v) = HeaderValue::from_str(&cookie) {
            r.headers_mut().append(SET_COOKIE, v);
        }
        r
    }

    /// The CSRF check of a form: the cookie and the field are the process's
    /// token, and no other site sent it.
    fn csrf_check(&self, headers: &HeaderMap, form: &Fields) -> Result<(), Failure> {
        if let Some(why) = security::cross_site(headers) {
            return Err(Failure::new(StatusCode::FORBIDDEN, format!("refused (CSRF check): {why}")));
        }
        let cookie_ok = security::cookie(headers, CSRF_COOKIE).is_some_and(|c| security::same(c, &self.csrf));
        let field_ok = form.get(CSRF_FIELD).is_some_and(|c| security::same(c, &self.csrf));
        if cookie_ok && field_ok {
            Ok(())
        } else {
            Err(Failure::new(
                StatusCode::FORBIDDEN,
                "refused (CSRF check): the form's token is missing or is not this console's; reload the page and \
                 send it again",
            ))
        }
    }

    async fn act(
        self: &Arc<Self>,
        access: Access,
        segments: &[&str],
        headers: &HeaderMap,
        body: &Bytes,
        wants: Wants,
    ) -> Result<Answer, Failure> {
        if matches!(segments, ["logout"]) {
            let mut r = redirect("/login");
            let gone = format!("{TOKEN_COOKIE}=; Path=/; SameSite=Strict; HttpOnly; Max-Age=0");
            if let Ok(v) = HeaderValue::from_str(&gone) {
                r.headers_mut().append(SET_COOKIE, v);
            }
            return Ok(r);
        }
        if !self.settings.actions {
            return Err(Failure::new(StatusCode::FORBIDDEN, READ_ONLY));
        }
        let form = Fields::parse(&String::from_utf8_lossy(body));
        if access != Access::Bearer {
            self.csrf_check(headers, &form)?;
        }
        let now = self.now_ms();
        match segments {
            ["deliveries", "retry"] => self.bulk_retry(&form, now, wants).await,
            ["deliveries", id, "retry"] => self.retry_one(parse_id(id)?, now, wants).await,
            ["events", "replay"] => self.bulk_replay(&form, now, wants).await,
            ["events", id, "replay"] => self.replay(parse_id(id)?, &form, now, wants).await,
            ["breakers", connection, "pause"] => self.pause(connection, &form, now, wants).await,
            ["breakers", connection, "resume"] => self.resume(connection, &form, now, wants).await,
            _ => Err(Failure::new(StatusCode::NOT_FOUND, "no action here")),
        }
    }

    async fn overview(&self, now: i64, live: bool, headers: &HeaderMap) -> Result<Answer, Failure> {
        let (status, breakers) = self.with_store(move |s| Ok((status_now(s, now)?, s.breakers()?))).await?;
        let breakers = pages::every_breaker(breakers, &self.declared_connections());
        let rates = self.rates(now).await?;
        let inner = pages::overview_live(&status, &rates, &breakers, now);
        if live {
            let inner = inner.into_string();
            let answer = respond(StatusCode::OK, "text/html; charset=utf-8", inner.clone());
            return Ok(with_etag(headers, answer, inner.as_bytes()));
        }
        let body = pages::overview(inner);
        Ok(self.page(StatusCode::OK, "Overview", "/", body, None))
    }

    async fn deliveries(&self, fields: &Fields, now: i64) -> Result<Answer, Failure> {
        let selection = match Deliveries::read(fields, now) {
            Ok(s) => s,
            Err(e) => {
                let body = pages::delivery_filters(fields);
                let notice = maud::html! { span class="error" { (e.0) } };
                return Ok(self.page(StatusCode::BAD_REQUEST, "Deliveries", "/deliveries", body, Some(notice)));
            }
        };
        let filter = selection.page_filter();
        let mut list = self.with_store(move |s| s.deliveries(&filter)).await?;
        let more = list.len() > selection.limit;
        list.truncate(selection.limit);
        let retryable = retryable_states();
        let body = pages::deliveries(fields, &selection, &list, more, self.settings.actions, &retryable);
        Ok(self.page(StatusCode::OK, "Deliveries", "/deliveries", body, notice(fields)))
    }

    /// The ids a bulk retry takes: the filter's deliveries in a retryable state
    /// (the filter's, or each retryable one when it names none), newest first,
    /// at most [`BULK_MAX`], read [`BULK_PAGE`] at a time by their keyset.
    /// `through` (when given) leaves out deliveries newer than the confirmed
    /// selection. Returns the ids and whether the filter selects more.
    async fn select_for_retry(
        &self,
        filter: &DeliveryFilter,
        through: Option<i64>,
    ) -> Result<(Vec<i64>, bool), Failure> {
        let states = match filter.state {
            Some(s) if retryable(s) => vec![s],
            Some(_) => Vec::new(),
            None => retryable_states(),
        };
        let base = filter.clone();
        self.with_store(move |store| {
            let mut ids = Vec::new();
            let mut more = false;
            for state in states {
                let mut before = through.map(|t| t.saturating_add(1));
                loop {
                    let page = DeliveryFilter {
                        state: Some(state),
                        limit: Some(BULK_PAGE),
                        before_id: before,
                        ..base.clone()
                    };
                    let rows = store.deliveries(&page)?;
                    for d in &rows {
                        if ids.len() == BULK_MAX {
                            more = true;
                            break;
                        }
                        ids.push(d.id);
                    }
                    if more || rows.len() < BULK_PAGE {
                        break;
                    }
                    before = rows.last().map(|d| d.id);
                }
                if more {
                    break;
                }
            }
            ids.sort_unstable_by(|a, b| b.cmp(a));
            Ok((ids, more))
        })
        .await
    }

    async fn bulk_confirm(&self, fields: &Fields, now: i64) -> Result<Answer, Failure> {
        let selection = Deliveries::read(fields, now)?;
        let (ids, more) = self.select_for_retry(&selection.filter, None).await?;
        let body = pages::bulk_confirm(&self.csrf, &selection.filter, &ids, more, self.settings.actions);
        let title = if ids.is_empty() { "Nothing to retry".to_string() } else { retry_count_title(ids.len(), more) };
        Ok(self.page(StatusCode::OK, &title, "/deliveries", body, None))
    }

    async fn bulk_retry(&self, form: &Fields, now: i64, wants: Wants) -> Result<Answer, Failure> {
        let selection = Deliveries::read(form, now)?;
        let through = form
            .get("through")
            .map(|t| t.parse::<i64>().map_err(|_| Failure::new(StatusCode::BAD_REQUEST, "`through` must be an id")))
            .transpose()?;
        let (ids, _) = self.select_for_retry(&selection.filter, through).await?;
        let retried_ids = ids.clone();
        let results = self
            .with_store(move |s| {
                let mut out = Vec::with_capacity(retried_ids.len());
                for chunk in retried_ids.chunks(BULK_PAGE) {
                    out.extend(s.retry(chunk, now)?);
                }
                Ok(out)
            })
            .await?;
        let retried = results.iter().filter(|r| **r == RetryResult::Retried).count();
        match wants {
            Wants::Json => Ok(json_answer(
                StatusCode::OK,
                &Value::Array(ids.iter().zip(&results).map(|(id, r)| views::retry_result_json(*id, r)).collect()),
            )),
            Wants::Html => {
                let mut back = query::delivery_query(&selection.filter);
                back.push(("done", "bulk".to_string()));
                back.push(("n", retried.to_string()));
                back.push(("of", ids.len().to_string()));
                Ok(redirect(&format!("/deliveries?{}", query::encode(&back))))
            }
        }
    }

    async fn retry_one(&self, id: i64, now: i64, wants: Wants) -> Result<Answer, Failure> {
        let results = self.with_store(move |s| s.retry(&[id], now)).await?;
        let result = results.first().cloned().unwrap_or(RetryResult::NotFound);
        match (wants, &result) {
            (Wants::Json, r) => {
                let status = if *r == RetryResult::NotFound { StatusCode::NOT_FOUND } else { StatusCode::OK };
                Ok(json_answer(status, &Value::Array(vec![views::retry_result_json(id, r)])))
            }
            (Wants::Html, RetryResult::NotFound) => {
                Err(Failure::new(StatusCode::NOT_FOUND, format!("no delivery {id}")))
            }
            (Wants::Html, RetryResult::NotRetryable(s)) => Err(Failure::new(
                StatusCode::CONFLICT,
                format!("delivery {id} is {s}; only failed or parked deliveries can be retried"),
            )),
            (Wants::Html, RetryResult::Retried) => Ok(redirect(&format!("/deliveries/{id}?done=retried"))),
        }
    }

    async fn delivery(&self, id: i64, fields: &Fields) -> Result<Answer, Failure> {
        let found = self
            .with_store(move |s| {
                let Some(DeliveryDetail { delivery: d, attempts: history }) = s.delivery(id)? else { return Ok(None) };
                let event = s.event(d.event_id)?.map(|e| e.event);
                Ok(Some((d, history, event)))
            })
            .await?;
        let Some((d, history, event)) = found else {
            return Err(Failure::new(StatusCode::NOT_FOUND, format!("no delivery {id}")));
        };
        let body =
            pages::delivery(&self.csrf, &d, &history, event.as_ref(), self.settings.actions && retryable(d.state));
        Ok(self.page(StatusCode::OK, &format!("Delivery {id}"), "/deliveries", body, notice(fields)))
    }

    async fn events(&self, fields: &Fields, now: i64) -> Result<Answer, Failure> {
        let selection = Events::read(fields, now)?;
        let filter = selection.page_filter();
        let mut list = self.with_store(move |s| s.events(&filter)).await?;
        if let Some(before) = selection.before {
            list.retain(|e| e.id < before);
        }
        let more = list.len() > selection.limit;
        list.truncate(selection.limit);
        let replays = self.settings.actions && self.program.is_some();
        let body = pages::events(&selection, &list, more, replays);
        Ok(self.page(StatusCode::OK, "Events", "/events", body, notice(fields)))
    }

    async fn event(&self, id: i64, fields: &Fields) -> Result<Answer, Failure> {
        let Some(EventDetail { event: e, deliveries }) = self.with_store(move |s| s.event(id)).await? else {
            return Err(Failure::new(StatusCode::NOT_FOUND, format!("no event {id}")));
        };
        let replay = match (&self.program, self.settings.actions) {
            (Some(p), true) => match replay::plan(p, &e, None) {
                Ok(plan) => {
                    pages::Replayable::Yes(plan.event.deliveries.iter().map(|d| d.subscriber.clone()).collect())
                }
                Err(why) => pages::Replayable::Refused(why),
            },
            (None, true) => pages::Replayable::NoProgram,
            (_, false) => pages::Replayable::ReadOnly,
        };
        let body = pages::event(&self.csrf, &e, &deliveries, &replay);
        Ok(self.page(StatusCode::OK, &format!("Event {id}"), "/events", body, notice(fields)))
    }

    async fn replay(&self, id: i64, form: &Fields, now: i64, wants: Wants) -> Result<Answer, Failure> {
        let Some(program) = self.program.clone() else {
            return Err(Failure::new(
                StatusCode::CONFLICT,
                "this console was started without the program, which a replay is checked against: give \
                 `jadpoc console` the program's files (`--program PATH`)",
            ));
        };
        let only = form.text("subscriber");
        let Some(EventDetail { event, .. }) = self.with_store(move |s| s.event(id)).await? else {
            return Err(Failure::new(StatusCode::NOT_FOUND, format!("no event {id}")));
        };
        let plan =
            replay::plan(&program, &event, only.as_deref()).map_err(|m| Failure::new(StatusCode::CONFLICT, m))?;
        let subscribers: Vec<String> = plan.event.deliveries.iter().map(|d| d.subscriber.clone()).collect();
        let ids = self.with_store(move |s| s.replay(&[plan], now)).await?;
        let new_id = ids.first().copied();
        match wants {
            Wants::Json => Ok(json_answer(
                StatusCode::OK,
                &Value::Array(vec![views::replay_json(id, Some(&event.name), &subscribers, new_id, None)]),
            )),
            Wants::Html => Ok(redirect(&match new_id {
                Some(n) => format!("/events/{n}?done=replay&of={id}"),
                None => format!("/events/{id}"),
            })),
        }
    }

    /// The events a replay by filter takes: those the filter selects that are
    /// not replays themselves (as `jadpoc events replay --since` takes them), at
    /// most [`BULK_MAX`], none newer than `through`; oldest first.
    async fn select_for_replay(
        &self,
        selection: &Events,
        through: Option<i64>,
    ) -> Result<(Vec<EventView>, bool), Failure> {
        let filter = EventFilter { limit: Some(BULK_MAX + 1), ..selection.filter.clone() };
        let mut found = self.with_store(move |s| s.events(&filter)).await?;
        found.retain(|e| e.replay_of.is_none() && through.is_none_or(|t| e.id <= t));
        let more = found.len() > BULK_MAX;
        found.truncate(BULK_MAX);
        found.reverse();
        Ok((found, more))
    }

    fn program_for_replay(&self) -> Result<Arc<Program>, Failure> {
        self.program.clone().ok_or_else(|| {
            Failure::new(
                StatusCode::CONFLICT,
                "this console was started without the program, which a replay is checked against: give \
                 `jadpoc console` the program's files (`--program PATH`)",
            )
        })
    }

    async fn bulk_replay_confirm(&self, fields: &Fields, now: i64) -> Result<Answer, Failure> {
        let selection = Events::read(fields, now)?;
        let program = self.program_for_replay()?;
        let (events, more) = self.select_for_replay(&selection, None).await?;
        let planned: Vec<(i64, Result<usize, String>)> =
            events.iter().map(|e| (e.id, replay::plan(&program, e, None).map(|r| r.event.deliveries.len()))).collect();
        let n = planned.iter().filter(|(_, p)| p.is_ok()).count();
        let title = match n {
            0 => "Nothing to replay".to_string(),
            1 => "Replay 1 event?".to_string(),
            n => format!("Replay {n} events?"),
        };
        let body = pages::bulk_replay_confirm(&self.csrf, &selection, &planned, more, self.settings.actions);
        Ok(self.page(StatusCode::OK, &title, "/events", body, None))
    }

    async fn bulk_replay(&self, form: &Fields, now: i64, wants: Wants) -> Result<Answer, Failure> {
        let selection = Events::read(form, now)?;
        let program = self.program_for_replay()?;
        let through = form
            .get("through")
            .map(|t| t.parse::<i64>().map_err(|_| Failure::new(StatusCode::BAD_REQUEST, "`through` must be an id")))
            .transpose()?;
        let (events, _) = self.select_for_replay(&selection, through).await?;
        let planned: Vec<(EventView, Result<Replay, String>)> = events
            .into_iter()
            .map(|e| {
                let p = replay::plan(&program, &e, None);
                (e, p)
            })
            .collect();
        let replays: Vec<Replay> = planned.iter().filter_map(|(_, p)| p.as_ref().ok().cloned()).collect();
        let count = replays.len();
        let ids =
            if replays.is_empty() { Vec::new() } else { self.with_store(move |s| s.replay(&replays, now)).await? };
        match wants {
            Wants::Json => {
                let mut new_ids = ids.iter();
                let out = planned
                    .iter()
                    .map(|(e, p)| match p {
                        Ok(r) => {
                            let subscribers: Vec<String> =
                                r.event.deliveries.iter().map(|d| d.subscriber.clone()).collect();
                            views::replay_json(e.id, Some(&e.name), &subscribers, new_ids.next().copied(), None)
                        }
                        Err(m) => views::replay_json(e.id, Some(&e.name), &[], None, Some(m)),
                    })
                    .collect();
                Ok(json_answer(StatusCode::OK, &Value::Array(out)))
            }
            Wants::Html => {
                let mut back = selection.query();
                back.push(("done", "replayed".to_string()));
                back.push(("n", count.to_string()));
                Ok(redirect(&format!("/events?{}", query::encode(&back))))
            }
        }
    }

    async fn breakers_page(&self, fields: &Fields, now: i64) -> Result<Answer, Failure> {
        let (breakers, history) = self.with_store(|s| Ok((s.breakers()?, s.breaker_history(None)?))).await?;
        let breakers = pages::every_breaker(breakers, &self.declared_connections());
        let body = pages::breakers(&self.csrf, &breakers, &history, self.settings.actions, now);
        Ok(self.page(StatusCode::OK, "Breakers", "/breakers", body, notice(fields)))
    }

    async fn pause(&self, connection: &str, form: &Fields, now: i64, wants: Wants) -> Result<Answer, Failure> {
        let connection = decode_segment(connection);
        let for_ms = match form.get("for") {
            None => None,
            Some(d) => match jadpo_check::parse_duration(d) {
                Ok(ms) if ms > 0 => Some(ms),
                Ok(_) => {
                    return Err(Failure::new(
                        StatusCode::BAD_REQUEST,
                        format!("`for={d}` must be longer than nothing"),
                    ));
                }
                Err(why) => {
                    return Err(Failure::new(
                        StatusCode::BAD_REQUEST,
                        format!("`for={d}` is not a duration such as `30m` or `2h`: {why}"),
                    ));
                }
            },
        };
        let declared = self.program.as_ref().is_some_and(|p| p.connection(&connection).is_some());
        let name = connection.clone();
        let known = self.with_store(move |s| s.knows_connection(&name)).await?;
        if !known && !declared {
            return Err(Failure::new(
                StatusCode::NOT_FOUND,
                format!(
                    "no delivery or breaker names the connection `{connection}`, and the program does not declare it"
                ),
            ));
        }
        let pause = Pause {
            at_ms: now,
            until_ms: for_ms.map(|ms| now.saturating_add(jadpo_core::rules::ms_i64(ms))),
            by: form.text("by").unwrap_or_else(|| CONSOLE_OPERATOR.to_string()),
            reason: form.text("reason"),
        };
        let (name, p) = (connection.clone(), pause.clone());
        self.with_store(move |s| s.pause_connection(&name, &p)).await?;
        match wants {
            Wants::Json => Ok(json_answer(StatusCode::OK, &views::paused_json(&connection, &pause))),
            Wants::Html => Ok(redirect("/breakers?done=paused")),
        }
    }

    async fn resume(&self, connection: &str, form: &Fields, now: i64, wants: Wants) -> Result<Answer, Failure> {
        let connection = decode_segment(connection);
        let by = form.text("by").unwrap_or_else(|| CONSOLE_OPERATOR.to_string());
        let reason = form.text("reason");
        let name = connection.clone();
        let report = self.with_store(move |s| s.resume_connection(&name, &by, reason.as_deref(), now)).await?;
        let Some(was) = report.was else {
            return Err(Failure::new(
                StatusCode::NOT_FOUND,
                format!("no breaker for the connection `{connection}`: it was never paused and never failed"),
            ));
        };
        match wants {
            Wants::Json => Ok(json_answer(StatusCode::OK, &views::resumed_json(&connection, &was, report.released))),
            Wants::Html => Ok(redirect("/breakers?done=resumed")),
        }
    }

    async fn api(&self, rest: &[&str], fields: &Fields, now: i64, headers: &HeaderMap) -> Result<Answer, Failure> {
        let value = match rest {
            ["status"] => views::status_json(&self.with_store(move |s| status_now(s, now)).await?),
            ["rates"] => views::rates_json(&self.rates(now).await?),
            ["deliveries"] => {
                let selection = Deliveries::read(fields, now)?;
                let filter = selection.page_filter();
                let mut list = self.with_store(move |s| s.deliveries(&filter)).await?;
                let more = list.len() > selection.limit;
                list.truncate(selection.limit);
                let next = if more { list.last().map(|d| d.id) } else { None };
                json!({"deliveries": list.iter().map(views::delivery_json).collect::<Vec<_>>(), "next_before": next})
            }
            ["deliveries", id] => {
                let id = parse_id(id)?;
                match self.with_store(move |s| s.delivery(id)).await? {
                    Some(DeliveryDetail { delivery: d, attempts: h }) => views::delivery_with_history_json(&d, &h),
                    None => return Err(Failure::new(StatusCode::NOT_FOUND, format!("no delivery {id}"))),
                }
            }
            ["events"] => {
                let selection = Events::read(fields, now)?;
                let filter = selection.page_filter();
                let mut list = self.with_store(move |s| s.events(&filter)).await?;
                if let Some(before) = selection.before {
                    list.retain(|e| e.id < before);
                }
                list.truncate(selection.limit);
                Value::Array(list.iter().map(views::event_json).collect())
            }
            ["events", id] => {
                let id = parse_id(id)?;
                match self.with_store(move |s| s.event(id)).await? {
                    Some(EventDetail { event: e, deliveries: d }) => views::event_with_deliveries_json(&e, &d),
                    None => return Err(Failure::new(StatusCode::NOT_FOUND, format!("no event {id}"))),
                }
            }
            ["breakers"] => {
                Value::Array(self.with_store(|s| s.breakers()).await?.iter().map(views::breaker_json).collect())
            }
            ["breakers", "history"] => Value::Array(
                self.with_store(|s| s.breaker_history(None)).await?.iter().map(views::breaker_action_json).collect(),
            ),
            _ => return Err(Failure::new(StatusCode::NOT_FOUND, "no such API")),
        };
        let answer = json_answer(StatusCode::OK, &value);
        let body = serde_json::to_vec(&value).unwrap_or_default();
        Ok(with_etag(headers, answer, &body))
    }
}

fn retry_count_title(n: usize, more: bool) -> String {
    let noun = if n == 1 { "delivery" } else { "deliveries" };
    if more { format!("Retry the newest {n} {noun}?") } else { format!("Retry {n} {noun}?") }
}

/// What an action that brought the operator here did, from the query a
/// redirect named (fixed words and numbers only: no text of the request's is
/// shown as a notice).
fn notice(fields: &Fields) -> Option<Markup> {
    notice_words(fields).map(|words| maud::html! { (words) })
}

/// The words of [`notice`].
fn notice_words(fields: &Fields) -> Option<String> {
    let number = |k: &str| fields.get(k).and_then(|n| n.parse::<u64>().ok());
    match fields.get("done")? {
        "retried" => Some("Retried with a fresh budget: it is pending, due now.".to_string()),
        "bulk" => {
            let (n, of) = (number("n")?, number("of")?);
            let noun = if n == 1 { "delivery" } else { "deliveries" };
            let skipped = of.saturating_sub(n);
            let rest =
                if skipped > 0 { format!(" ({skipped} had changed meanwhile and were left)") } else { String::new() };
            Some(format!("Retried {n} {noun} with a fresh budget{rest}."))
        }
        "replay" => Some(format!("This event replays event #{}.", number("of")?)),
        "replayed" => {
            let n = number("n")?;
            Some(format!("Replayed {n} event{} as new events.", if n == 1 { "" } else { "s" }))
        }
        "paused" => Some("Paused.".to_string()),
        "resumed" => Some("Resumed: its breaker is closed and what it held is due now.".to_string()),
        _ => None,
    }
}

fn parse_id(text: &str) -> Result<i64, Failure> {
    text.parse::<i64>().map_err(|_| Failure::new(StatusCode::NOT_FOUND, format!("`{text}` is not an id")))
}

/// A path segment percent-decoded (a connection's name in a URL).
fn decode_segment(segment: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", segment.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// Whether `next` is a path on this console (never another site's address).
fn local_path(next: &str) -> bool {
    next.starts_with('/') && !next.starts_with("//") && !next.contains('\\')
}

/// Serve `console` on `listener` until `stop` turns true, then drain (as the
/// ingest and the metrics do).
pub async fn serve(listener: TcpListener, console: Arc<Console>, stop: watch::Receiver<bool>) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(jadpo_http::server::HEAD_TIMEOUT);
    let handler = move |req: Request<Incoming>| {
        let console = console.clone();
        async move {
            let (parts, body) = req.into_parts();
            match Limited::new(body, MAX_FORM_BYTES).collect().await {
                Ok(b) => console.answer(Request::from_parts(parts, b.to_bytes())).await,
                Err(_) => respond(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "text/plain; charset=utf-8",
                    format!("a form is at most {MAX_FORM_BYTES} bytes\n"),
                ),
            }
        }
    };
    jadpo_http::server::serve(listener, MAX_CONNECTIONS, http, stop, handler).await;
}
