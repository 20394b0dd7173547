//! A run one of whose tasks panics (a driver's call, a store call): the panic is
//! logged as `runtime.internal_fault` with its message, the run stops of itself
//! with the fault as its result, and what it committed stays committed. On both
//! stores.

use crate::common::fixture::Fixture;
use crate::common::{ClaimHook, Hooked};
use jadpo_check::program::{DeliveryState, FailureKind, Program};
use jadpo_core::clock::{BoxFuture, Clock, SystemClock};
use jadpo_core::config::RuntimeConfig;
use jadpo_core::drivers::{CallRequest, Driver};
use jadpo_core::events::{LogSink, RunEvent, RunLog};
use jadpo_core::payload::new_event;
use jadpo_core::rng::RandomSource;
use jadpo_core::rules::Outcome;
use jadpo_core::steps::Runtime;
use jadpo_core::store::{DeliveryFilter, DeliveryView, Store};
use jadpo_runtime::live::Live;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PROGRAM: &str = r#"
event Paid { id: string }

connection c { url: "http://127.0.0.1:9/x" }

action record(id: string) { via: c }

subscriber rec {
    on: Paid
    run: record(event.id)
    timeout: 5s
}
"#;

fn program() -> Arc<Program> {
    jadpo_test_support::program(PROGRAM)
}

/// A driver that answers every call `ok`, except a call for the event `boom`,
/// where it panics.
struct BreaksOnBoom;

impl Driver for BreaksOnBoom {
    fn call(&self, request: CallRequest) -> BoxFuture<'_, Outcome> {
        if request.args["id"] == "boom" {
            panic!("the driver broke on `boom`");
        }
        Box::pin(async { Outcome::ok() })
    }
}

/// Claims that panic once armed.
struct Armed(AtomicBool);

impl ClaimHook for Armed {
    fn starting(&self) {
        if self.0.load(Ordering::SeqCst) {
            panic!("the store broke claiming");
        }
    }
}

/// The run's log as its events' names and messages.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<(String, String)>>>);

impl Log {
    fn lines(&self) -> Vec<(String, String)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Keeps each event's name, and its message for an error or a fault.
impl RunLog for Log {
    fn line(&self, event: &RunEvent<'_>) {
        let message = match event {
            RunEvent::Error { message, .. } => message.to_string(),
            RunEvent::InternalFault { message, .. } => message.to_string(),
            _ => String::new(),
        };
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push((event.name().to_string(), message));
    }
    fn lines(&self, events: &[RunEvent<'_>]) {
        events.iter().for_each(|e| self.line(e));
    }
}

/// A store call off the async threads (the PostgreSQL client blocks).
async fn off_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("the store call's thread")
}

fn emit(store: &Arc<dyn Store>, id: &str) -> impl Future<Output = ()> + use<> {
    let (store, event) = (store.clone(), new_event(&program(), "Paid", &format!(r#"{{"id":"{id}"}}"#)));
    off_thread(move || {
        store.emit(&[event.expect("a valid event")], SystemClock.now_ms()).expect("emit");
    })
}

async fn deliveries(store: &Arc<dyn Store>) -> Vec<DeliveryView> {
    let store = store.clone();
    let mut all = off_thread(move || store.deliveries(&DeliveryFilter::default()).expect("deliveries")).await;
    all.sort_by_key(|d| d.id);
    all
}

/// Waits (30s at most) until every delivery is `succeeded`, `n` of them.
async fn wait_succeeded(store: &Arc<dyn Store>, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let all = deliveries(store).await;
        if all.len() == n && all.iter().all(|d| d.state == DeliveryState::Succeeded) {
            return;
        }
        assert!(Instant::now() < deadline, "not delivered in time: {all:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs `store` with `driver` on one thread, the run's log captured: `act` does
/// what makes a task panic once the run has delivered `p1`. The run must stop of
/// itself within 30s; returns its result as text (`Err` for a fault) and the log.
fn run_until_it_stops<F: Future<Output = ()>>(
    store: Arc<dyn Store>,
    driver: Arc<dyn Driver>,
    act: impl FnOnce() -> F,
) -> (Result<String, String>, Vec<(String, String)>) {
    let log = Log::default();
    let _capture = tracing::subscriber::set_default(LogSink::new(log.clone()));
    // One thread: every event the run's tasks log is captured on it.
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio");
    let config = RuntimeConfig { stop_grace_ms: 5_000, poll_ms: 10, ..RuntimeConfig::default() };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let rt = Arc::new(Live::new(
        Runtime::new(program(), store.clone(), clock, vec![driver], RandomSource::from_seed(1), config),
        None,
    ));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let result = tokio.block_on(async {
        let run = tokio::spawn(rt.clone().run(stopped));
        emit(&store, "p1").await;
        wait_succeeded(&store, 1).await;
        act().await;
        match tokio::time::timeout(Duration::from_secs(30), run).await {
            Ok(ended) => ended.expect("the run's task").map(|s| format!("{s:?}")).map_err(|e| e.to_string()),
            Err(_) => {
                let _ = stop.send(true);
                panic!("the run went on after its task panicked: {:?}", log.lines())
            }
        }
    });
    (result, log.lines())
}

/// The message of the log's `runtime.internal_fault` lines.
fn faults(log: &[(String, String)]) -> Vec<&str> {
    log.iter().filter(|(name, _)| name == "runtime.internal_fault").map(|(_, m)| m.as_str()).collect()
}

fn a_panicking_call_stops_the_run_as_an_internal_fault(f: &dyn Fixture) {
    let store: Arc<dyn Store> = Arc::from(f.open());
    let (result, log) = run_until_it_stops(store.clone(), Arc::new(BreaksOnBoom), || emit(&store, "boom"));
    let Err(fault) = result else { panic!("the run ended well: {result:?}") };
    assert!(fault.contains("runtime.internal_fault") && fault.contains("the driver broke on `boom`"), "{fault}");
    let logged = faults(&log);
    assert_eq!(logged.len(), 1, "{log:?}");
    assert!(logged[0].contains("the driver broke on `boom`"), "{log:?}");
    assert!(!log.iter().any(|(name, _)| name == "runtime.error"), "{log:?}");
    // The delivery delivered before stays so; the one whose call panicked is
    // recorded as the defect it is.
    let all = tokio::runtime::Builder::new_current_thread().build().expect("tokio").block_on(deliveries(&store));
    assert_eq!(all.len(), 2);
    assert_eq!((all[0].state, all[0].attempts), (DeliveryState::Succeeded, 1));
    assert_eq!((all[1].state, all[1].attempts), (DeliveryState::Failed, 1));
    let failure = all[1].last_failure.as_ref().expect("a failure");
    assert_eq!((failure.kind, failure.code.as_str()), (FailureKind::InternalFault, "runtime.internal_fault"));
}

fn a_panicking_store_call_stops_the_run_as_an_internal_fault(f: &dyn Fixture) {
    let breaking = Arc::new(Hooked { inner: Arc::from(f.open()), hook: Armed(AtomicBool::new(false)) });
    let store: Arc<dyn Store> = breaking.clone();
    let (result, log) = run_until_it_stops(store.clone(), Arc::new(BreaksOnBoom), || {
        breaking.hook.0.store(true, Ordering::SeqCst);
        emit(&store, "p2")
    });
    let Err(fault) = result else { panic!("the run ended well: {result:?}") };
    assert!(fault.contains("runtime.internal_fault") && fault.contains("the store broke claiming"), "{fault}");
    let logged = faults(&log);
    assert!(!logged.is_empty() && logged.iter().all(|m| m.contains("the store broke claiming")), "{log:?}");
    // A panic is not a store error to wait out and try again.
    assert!(!log.iter().any(|(name, _)| name == "runtime.error"), "{log:?}");
    breaking.hook.0.store(false, Ordering::SeqCst);
    let all = tokio::runtime::Builder::new_current_thread().build().expect("tokio").block_on(deliveries(&store));
    assert_eq!(all.len(), 2);
    assert_eq!((all[0].state, all[0].attempts), (DeliveryState::Succeeded, 1));
    assert_eq!((all[1].state, all[1].attempts), (DeliveryState::Pending, 0), "kept for the next run");
}

jadpo_test_support::on_every_store!(
    crate::common::fixture;
    a_panicking_call_stops_the_run_as_an_internal_fault,
    a_panicking_store_call_stops_the_run_as_an_internal_fault,
);
