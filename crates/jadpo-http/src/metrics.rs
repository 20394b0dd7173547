//! `jadpoc run --metrics`: the run's metrics in Prometheus' text format (its
//! OpenMetrics form), served at `GET /metrics`.
//!
//! [`Metrics`] holds the registry. The steps record into it as they go (an event
//! stored by the ingest, a delivery claimed, an attempt recorded); what only the
//! store knows (deliveries by state, the breakers, the oldest pending delivery) is
//! read from the store when a scrape finds it older than [`METRICS_REFRESH_MS`], so
//! frequent scrapes cost the store one read per period.
//!
//! Every label value is a name the program declares (subscriber, event,
//! connection) or a word of the runtime's own (state, outcome, kind): no id or
//! payload value becomes a label, so the number of series is bounded by the
//! program.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioTimer;
use jadpo_check::program::{BreakerState, DeliveryState, Program};
use jadpo_core::clock::Clock;
use jadpo_core::config::{METRICS_MAX_CONNECTIONS, METRICS_REFRESH_MS};
use jadpo_core::events;
use jadpo_core::rules::Outcome;
use jadpo_core::steps::Observer;
use jadpo_core::store::{Claimed, Recorded, Store, StoreError, WaitingAtClaim};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The path the metrics are served at.
pub const METRICS_PATH: &str = "/metrics";

/// The content type of the answer: the OpenMetrics text format, which Prometheus
/// asks for and reads.
pub const CONTENT_TYPE_OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds (seconds) of the attempt duration's buckets: from a local
/// provider's few milliseconds to a slow action's minutes.
const DURATION_BUCKETS: [f64; 15] =
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];

/// Upper bounds (seconds) of the claim lag's buckets: from a claim on the heels of
/// its due time to a backlog of an hour.
const LAG_BUCKETS: [f64; 15] =
    [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0];

/// The states a breaker gauge has a series for, each `1` while the breaker is in
/// it and `0` otherwise.
const BREAKER_STATES: [BreakerState; 3] = [BreakerState::Closed, BreakerState::Open, BreakerState::Probing];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    event: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptLabels {
    subscriber: String,
    outcome: &'static str,
    /// The failure's kind; empty (no label, to Prometheus) for a success.
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConnectionLabels {
    connection: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SubscriberLabels {
    subscriber: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    /// A program version's short hash, as `jadpoc status` shows it.
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BreakerLabels {
    connection: String,
    state: &'static str,
}

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

fn lag_histogram() -> Histogram {
    Histogram::new(LAG_BUCKETS)
}

/// The run's metrics.
pub struct Metrics {
    registry: Registry,
    connections: Vec<String>,
    events_stored: Family<EventLabels, Gauge>,
    /// The program's events: the only names the events' gauge shows.
    events: Vec<String>,
    attempts: Family<AttemptLabels, Counter>,
    attempt_duration: Family<ConnectionLabels, Histogram, fn() -> Histogram>,
    claim_lag: Family<SubscriberLabels, Histogram, fn() -> Histogram>,
    deliveries: Family<StateLabels, Gauge>,
    breaker_state: Family<BreakerLabels, Gauge>,
    rate_waits: Family<ConnectionLabels, Counter>,
    oldest_pending: Gauge,
    version_processes: Family<VersionLabels, Gauge>,
    version_in_flight: Family<VersionLabels, Gauge>,
    /// The versions given series so far (each set again, to zero once it has
    /// neither processes nor deliveries in flight).
    versions_seen: Mutex<Vec<String>>,
    /// When the store's figures were last read (ms), if ever.
    refreshed_at: Mutex<Option<i64>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// Seconds from milliseconds, for the histograms.
fn seconds(ms: i64) -> f64 {
    // Durations fit f64's integers exactly far past any run's length.
    #[allow(clippy::cast_precision_loss)]
    let ms = ms.max(0) as f64;
    ms / 1000.0
}

impl Metrics {
    /// The metrics of a run of `program`: every declared event, delivery state and
    /// connection's breaker has its series from the start (at zero), so a rate or
    /// an alert sees it before its first change.
    pub fn new(program: &Program) -> Metrics {
        let mut registry = Registry::with_prefix("jadpo");
        let events_stored = Family::<EventLabels, Gauge>::default();
        registry.register(
            "events_stored",
            "Events in the store, by event name, whoever stored them (`emit`, `--listen`, SQL, jadpo's own)",
            events_stored.clone(),
        );
        let attempts = Family::<AttemptLabels, Counter>::default();
        registry.register(
            "attempts",
            "Delivery attempts recorded, by subscriber, outcome (`succeeded`, `failed`) and failure kind",
            attempts.clone(),
        );
        let attempt_duration =
            Family::<ConnectionLabels, Histogram, fn() -> Histogram>::new_with_constructor(duration_histogram);
        registry.register_with_unit(
            "attempt_duration",
            "How long recorded delivery attempts took, from their claim to their outcome, by connection",
            Unit::Seconds,
            attempt_duration.clone(),
        );
        let claim_lag = Family::<SubscriberLabels, Histogram, fn() -> Histogram>::new_with_constructor(lag_histogram);
        registry.register_with_unit(
            "claim_lag",
            "How late deliveries were claimed to run, from their due time (or their lease's end) to the claim, by subscriber",
            Unit::Seconds,
            claim_lag.clone(),
        );
        let deliveries = Family::<StateLabels, Gauge>::default();
        registry.register("deliveries", "Deliveries in the store, by state", deliveries.clone());
        let breaker_state = Family::<BreakerLabels, Gauge>::default();
        registry.register(
            "breaker_state",
            "Each connection's circuit breaker: 1 for the state it is in, 0 for the others",
            breaker_state.clone(),
        );
        let rate_waits = Family::<ConnectionLabels, Counter>::default();
        registry.register(
            "rate_waits",
            "Deliveries a claim left waiting for their connection's rate (or a provider's Retry-After), by connection",
            rate_waits.clone(),
        );
        let oldest_pending = Gauge::default();
        registry.register_with_unit(
            "oldest_pending_age",
            "Age of the oldest pending delivery, from its creation (0 when none is pending)",
            Unit::Seconds,
            oldest_pending.clone(),
        );
        let version_processes = Family::<VersionLabels, Gauge>::default();
        registry.register(
            "program_version_processes",
            "Processes running each program version now (versions running or with deliveries in flight)",
            version_processes.clone(),
        );
        let version_in_flight = Family::<VersionLabels, Gauge>::default();
        registry.register(
            "program_version_in_flight",
            "Deliveries not ended of each program version's events",
            version_in_flight.clone(),
        );
        let events: Vec<String> = program.events.iter().map(|e| e.name.clone()).collect();
        for e in &events {
            let _ = events_stored.get_or_create(&EventLabels { event: e.clone() });
        }
        for s in DeliveryState::ALL {
            let _ = deliveries.get_or_create(&StateLabels { state: s.as_str() });
        }
        let connections: Vec<String> = program.connections.iter().map(|c| c.name.clone()).collect();
        for c in &connections {
            let _ = rate_waits.get_or_create(&ConnectionLabels { connection: c.clone() });
            for s in BREAKER_STATES {
                let closed = i64::from(s == BreakerState::Closed);
                breaker_state.get_or_create(&BreakerLabels { connection: c.clone(), state: s.as_str() }).set(closed);
            }
        }
        Metrics {
            registry,
            connections,
            events_stored,
            events,
            attempts,
            attempt_duration,
            claim_lag,
            deliveries,
            breaker_state,
            rate_waits,
            oldest_pending,
            version_processes,
            version_in_flight,
            versions_seen: Mutex::new(Vec::new()),
            refreshed_at: Mutex::new(None),
        }
    }

    /// A delivery of `subscriber` due at `due_ms` was claimed to run at `now_ms`.
    fn record_claim(&self, subscriber: &str, due_ms: i64, now_ms: i64) {
        let labels = SubscriberLabels { subscriber: subscriber.to_string() };
        self.claim_lag.get_or_create(&labels).observe(seconds(now_ms.saturating_sub(due_ms)));
    }

    /// An attempt of `subscriber` through `connection` was recorded, having taken
    /// `duration_ms`.
    fn record_attempt(&self, subscriber: &str, connection: &str, outcome: &Outcome, duration_ms: i64) {
        let kind = match outcome {
            Outcome::Succeeded { .. } => "",
            Outcome::Failed(f) => f.kind.as_str(),
        };
        let labels = AttemptLabels { subscriber: subscriber.to_string(), outcome: events::outcome_word(outcome), kind };
        self.attempts.get_or_create(&labels).inc();
        let labels = ConnectionLabels { connection: connection.to_string() };
        self.attempt_duration.get_or_create(&labels).observe(seconds(duration_ms));
    }

    /// Whether the store's figures are due to be read at `now_ms`; if so, the
    /// period starts now, so that scrapes arriving meanwhile do not read again.
    fn take_refresh(&self, now_ms: i64) -> bool {
        let Ok(mut at) = self.refreshed_at.lock() else {
            return false;
        };
        if at.is_some_and(|t| now_ms.saturating_sub(t) < jadpo_core::rules::ms_i64(METRICS_REFRESH_MS)) {
            return false;
        }
        *at = Some(now_ms);
        true
    }

    /// Read the store's figures at `now_ms`: events by name (only the program's:
    /// a name written in SQL that the program does not declare is not a label),
    /// deliveries by state, the oldest pending delivery, the breakers.
    pub fn refresh(&self, store: &dyn Store, now_ms: i64) -> Result<(), StoreError> {
        let counts = store.event_counts()?;
        for e in &self.events {
            let n = counts.by_name.iter().find(|(name, _)| name == e).map_or(0, |(_, n)| *n);
            self.events_stored
                .get_or_create(&EventLabels { event: e.clone() })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        let status = store.status(now_ms)?;
        for (state, n) in status.states {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            self.deliveries.get_or_create(&StateLabels { state: state.as_str() }).set(n);
        }
        self.oldest_pending.set(status.oldest_pending_s.unwrap_or(0));
        let live_since = now_ms.saturating_sub(jadpo_core::rules::ms_i64(jadpo_core::version::PROCESS_LIVE_MS));
        let versions = store.versions(live_since)?;
        if let Ok(mut seen) = self.versions_seen.lock() {
            for v in versions.iter().filter(|v| !v.processes.is_empty() || v.in_flight > 0) {
                let short = jadpo_core::version::short(&v.hash).to_string();
                if !seen.contains(&short) {
                    seen.push(short);
                }
            }
            for short in seen.iter() {
                let v = versions.iter().find(|v| jadpo_core::version::short(&v.hash) == short);
                let labels = VersionLabels { version: short.clone() };
                let processes = v.map_or(0, |v| v.processes.len());
                self.version_processes.get_or_create(&labels).set(i64::try_from(processes).unwrap_or(i64::MAX));
                let in_flight = v.map_or(0, |v| v.in_flight);
                self.version_in_flight.get_or_create(&labels).set(i64::try_from(in_flight).unwrap_or(i64::MAX));
            }
        }
        let rows = store.breakers()?;
        for c in &self.connections {
            // A connection without a row is closed and has never failed.
            let state = rows.iter().find(|b| &b.connection == c).map_or(BreakerState::Closed, |b| b.row.state);
            for s in BREAKER_STATES {
                let labels = BreakerLabels { connection: c.clone(), state: s.as_str() };
                self.breaker_state.get_or_create(&labels).set(i64::from(s == state));
            }
        }
        Ok(())
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// What serving the metrics needs: the metrics, and the store and clock their
/// The runtime's steps record into the metrics as they go: the live driver
/// attaches them ([`jadpo_core::steps::Runtime::with_observer`]).
impl Observer for Metrics {
    fn claimed(&self, claimed: &Claimed, now_ms: i64) {
        self.record_claim(&claimed.subscriber, claimed.due_at_ms, now_ms);
    }

    fn waiting(&self, waiting: &WaitingAtClaim) {
        // Only the program's connections have series: the label set stays bounded.
        if self.connections.contains(&waiting.connection) {
            self.rate_waits.get_or_create(&ConnectionLabels { connection: waiting.connection.clone() }).inc();
        }
    }

    fn attempt(&self, recorded: &Recorded, subscriber: &str) {
        let duration_ms = recorded.ended_at_ms - recorded.started_at_ms;
        self.record_attempt(subscriber, &recorded.connection, &recorded.outcome, duration_ms);
    }
}

/// refresh reads.
#[derive(Clone)]
pub struct MetricsSource {
    /// The run's metrics (the same the runtime records into).
    pub metrics: Arc<Metrics>,
    /// The store the figures are read from.
    pub store: Arc<dyn Store>,
    /// The time of a refresh.
    pub clock: Arc<dyn Clock>,
}

impl MetricsSource {
    /// The metrics as a scrape sees them, the store's figures read first when they
    /// are older than [`METRICS_REFRESH_MS`]. A failed read is logged and the last
    /// figures are served.
    pub async fn render(&self) -> String {
        let now = self.clock.now_ms();
        if self.metrics.take_refresh(now) {
            let (metrics, store) = (self.metrics.clone(), self.store.clone());
            match tokio::task::spawn_blocking(move || metrics.refresh(&*store, now)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => events::log(events::RunEvent::Error { at_ms: now, message: &e }),
                Err(e) => events::log(events::RunEvent::Error { at_ms: now, message: &e }),
            }
        }
        self.metrics.encode()
    }

    /// The answer to a request for [`METRICS_PATH`]: the metrics for `GET`, 405
    /// otherwise.
    pub async fn answer(&self, method: &Method) -> Response<Full<Bytes>> {
        if method != Method::GET {
            let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "metrics are read with `GET`\n");
            r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET"));
            return r;
        }
        let mut r = Response::new(Full::new(Bytes::from(self.render().await)));
        r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE_OPENMETRICS));
        r
    }
}

/// A short text answer.
fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

async fn handle(req: Request<hyper::body::Incoming>, source: &MetricsSource) -> Response<Full<Bytes>> {
    if req.uri().path() == METRICS_PATH {
        source.answer(req.method()).await
    } else {
        plain(StatusCode::NOT_FOUND, "not found; the metrics are at `/metrics`\n")
    }
}

/// Serve the metrics at `GET /metrics` until `stop` turns true, at most
/// [`METRICS_MAX_CONNECTIONS`] connections at once (more wait to be accepted);
/// then drain as the ingest does (`crate::server`).
pub async fn serve(listener: TcpListener, source: MetricsSource, stop: watch::Receiver<bool>) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(crate::server::HEAD_TIMEOUT);
    let handler = move |req| {
        let source = source.clone();
        async move { handle(req, &source).await }
    };
    crate::server::serve(listener, METRICS_MAX_CONNECTIONS, http, stop, handler).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refresh_is_taken_once_a_period() {
        let program = Program::default();
        let m = Metrics::new(&program);
        let period = jadpo_core::rules::ms_i64(METRICS_REFRESH_MS);
        assert!(m.take_refresh(1_000));
        assert!(!m.take_refresh(1_000));
        assert!(!m.take_refresh(1_000 + period - 1));
        assert!(m.take_refresh(1_000 + period));
    }

    #[test]
    fn names_follow_prometheus_conventions() {
        let m = Metrics::new(&Program::default());
        m.record_attempt("s", "c", &Outcome::ok(), 1500);
        m.record_claim("s", 0, 250);
        let text = m.encode();
        for line in [
            "jadpo_attempts_total{subscriber=\"s\",outcome=\"succeeded\",kind=\"\"} 1",
            "jadpo_attempt_duration_seconds_sum{connection=\"c\"} 1.5",
            "jadpo_claim_lag_seconds_count{subscriber=\"s\"} 1",
            "# TYPE jadpo_oldest_pending_age_seconds gauge",
            "jadpo_deliveries{state=\"parked\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
        let helps = text.lines().filter(|l| l.starts_with("# HELP ")).count();
        let types = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
        // Every family but the breakers' and the events', which have no series in
        // a program without connections or events (a family without series is
        // left out).
        assert_eq!((helps, types), (5, 5), "{text}");
    }
}
