//! The `Runtime`'s steps on an in-memory store (on PostgreSQL where only it lets
//! two steps interleave) under a virtual clock: what they record and report.

use crate::common;
use crate::common::{ClaimHook, Hooked};
use jadpo_check::program::{DeliveryState, FailureKind, Program};
use jadpo_core::clock::{BoxFuture, Clock, SystemClock, VirtualClock};
use jadpo_core::config::RuntimeConfig;
use jadpo_core::drivers::{CallRequest, Driver, FakeDriver, parse_answers};
use jadpo_core::rng::RandomSource;
use jadpo_core::rules::{self, Outcome};
use jadpo_core::steps::{RunSummary, Runtime};
use jadpo_core::store::{DeliveryDetail, DeliveryFilter, NewDelivery, NewEvent, OpenOptions, Store, Views};
use jadpo_runtime::live::Live;
use jadpo_store_postgres::PgStore;
use jadpo_store_sqlite::SqliteStore;
use std::sync::Arc;
use std::time::{Duration, Instant};

const T0: i64 = 1_700_000_000_000;

const PROGRAM: &str = r#"
event Paid { id: string }

connection c { url: "http://127.0.0.1:9/x" }

action record(id: string) { via: c }

subscriber rec {
    on: Paid
    run: record(event.id)
    timeout: 1s
}
"#;

fn program() -> Arc<Program> {
    jadpo_test_support::program(PROGRAM)
}

fn runtime(drivers: Vec<Arc<dyn Driver>>) -> (Runtime, Arc<SqliteStore>, Arc<VirtualClock>) {
    let store = Arc::new(SqliteStore::open_in_memory().expect("store"));
    let clock = Arc::new(VirtualClock::new(T0));
    let random = RandomSource::from_seed(1);
    let config = RuntimeConfig::default();
    let rt = Runtime::new(program(), store.clone(), clock.clone(), drivers, random, config);
    (rt, store, clock)
}

fn emit(store: &SqliteStore) {
    let event = NewEvent {
        name: "Paid".into(),
        payload: r#"{"id":"p1"}"#.into(),
        deliveries: vec![NewDelivery { subscriber: "rec".into(), connection: "c".into(), order_key: None }],
    };
    store.emit(&[event], T0).expect("emit");
}

#[test]
fn only_outcomes_still_owned_are_recorded_and_counted() {
    let (rt, store, clock) = runtime(vec![Arc::new(FakeDriver::new(Vec::new()))]);
    emit(&store);
    let lost = rt.claim_due(T0, 10).expect("claim").report.run.remove(0);
    // Its worker is lost: past the lease, another claim takes the delivery.
    let lease_end = rules::lease_until_ms(T0, 1_000);
    clock.advance_to(lease_end);
    let current = rt.claim_due(lease_end, 10).expect("claim").report.run.remove(0);
    assert_eq!(current.attempt, 2);
    let late = rt.conclude(&lost, Outcome::ok(), lease_end + 1);
    let done = rt.conclude(&current, Outcome::ok(), lease_end + 2);
    assert_eq!(rt.record_outcomes(&[late, done]).expect("record"), 1);
    let DeliveryDetail { delivery: d, attempts: history } =
        store.delivery(current.id).expect("read").expect("a delivery");
    assert_eq!((d.state, d.attempts), (DeliveryState::Succeeded, 2));
    assert_eq!(history.len(), 2, "the lost attempt as `lease_expired`, then the success");
}

#[test]
fn a_connection_without_a_driver_ends_its_calls_as_a_defect() {
    let (rt, store, _clock) = runtime(Vec::new());
    emit(&store);
    let c = rt.claim_due(T0, 10).expect("claim").report.run.remove(0);
    let Err(defect) = rt.prepare_call(&c) else {
        panic!("a call was prepared with no driver");
    };
    assert_eq!(
        defect.failure().map(|f| (f.kind, f.code)),
        Some((FailureKind::InternalFault, "runtime.no_driver".into()))
    );
}

/// docs/runtime.md's "Codes" section is the registry's current rendering.
#[test]
fn codes_reference_in_runtime_md_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/runtime.md");
    let text = std::fs::read_to_string(&path).expect("read docs/runtime.md");
    let (start, end) = ("<!-- codes:start -->\n", "<!-- codes:end -->");
    let (Some(a), Some(b)) = (text.find(start), text.find(end)) else {
        panic!("docs/runtime.md lacks its codes markers");
    };
    let want = jadpo_core::codes::markdown();
    let found = &text[a + start.len()..b];
    if found != want && std::env::var_os("JADPO_BLESS").is_some() {
        let fresh = format!("{}{want}{}", &text[..a + start.len()], &text[b..]);
        std::fs::write(&path, fresh).expect("write docs/runtime.md");
        return;
    }
    assert!(
        found == want,
        "docs/runtime.md's codes are out of date: run `JADPO_BLESS=1 cargo test -p jadpo-runtime --test it codes`"
    );
}

const TWO_CONNECTIONS: &str = r#"
event Paid { id: string }

connection down { url: "http://127.0.0.1:9/down"  max_in_flight: 4 }
connection up { url: "http://127.0.0.1:9/up" }

action pay(id: string) { via: down }
action note(id: string) { via: up }

subscriber charge {
    on: Paid
    run: pay(event.id)
}

subscriber audit {
    on: Paid
    run: note(event.id)
}
"#;

/// 50 events through a connection that answers `unavailable` while a second
/// subscriber's connection is healthy; outcomes reach the store a claim late, as
/// the committer's batches do. The breaker opens in this process as soon as the
/// fifth failure is known: at most five attempts plus those in flight on the
/// connection (its `max_in_flight`) start before the rest are held.
#[test]
fn a_failing_connection_gets_five_attempts_plus_those_in_flight_before_the_rest_are_held() {
    let program = jadpo_test_support::program(TWO_CONNECTIONS);
    let store = Arc::new(SqliteStore::open_in_memory().expect("store"));
    let clock = Arc::new(VirtualClock::new(T0));
    let drivers: Vec<Arc<dyn Driver>> =
        vec![Arc::new(FakeDriver::new(Vec::new())), Arc::new(FakeDriver::new(Vec::new()))];
    let rt = Runtime::new(program, store.clone(), clock, drivers, RandomSource::from_seed(1), RuntimeConfig::default());
    let events: Vec<NewEvent> = (0..50)
        .map(|i| NewEvent {
            name: "Paid".into(),
            payload: format!(r#"{{"id":"p{i}"}}"#),
            deliveries: vec![
                NewDelivery { subscriber: "charge".into(), connection: "down".into(), order_key: None },
                NewDelivery { subscriber: "audit".into(), connection: "up".into(), order_key: None },
            ],
        })
        .collect();
    store.emit(&events, T0).expect("emit");

    let mut charged = 0;
    let mut unrecorded = Vec::new();
    let mut now = T0;
    for _ in 0..200 {
        let claim = rt.claim_due(now, 256).expect("claim");
        // What the last round concluded reaches the store only now, after the claim.
        rt.record_outcomes(&std::mem::take(&mut unrecorded)).expect("record");
        if claim.report.changed() == 0 && claim.waiting == 0 {
            break;
        }
        now += 10;
        for c in claim.report.run {
            let outcome = if c.connection == "down" {
                charged += 1;
                Outcome::fail(FailureKind::Unavailable, "http.503")
            } else {
                Outcome::ok()
            };
            unrecorded.push(rt.conclude(&c, outcome, now));
        }
    }
    rt.record_outcomes(&unrecorded).expect("record");
    assert!(
        (5..=5 + 4).contains(&charged),
        "{charged} attempts on the failing connection; at most 5 plus its 4 in flight may start"
    );
    let states = |subscriber: &str| {
        let filter = DeliveryFilter { subscriber: Some(subscriber.into()), ..Default::default() };
        store.deliveries(&filter).expect("read").into_iter().map(|d| d.state).collect::<Vec<_>>()
    };
    let charge = states("charge");
    assert_eq!(charge.iter().filter(|s| **s == DeliveryState::Held).count(), 50 - charged);
    assert!(states("audit").iter().all(|s| *s == DeliveryState::Succeeded), "the healthy connection delivered all");
    let row = store.breakers().expect("breakers").into_iter().find(|b| b.connection == "down").expect("a row");
    assert_eq!(row.row.state, jadpo_check::program::BreakerState::Open);
}

const HANGING: &str = r#"
event Paid { id: string }

connection c { url: "http://127.0.0.1:9/x" }

action record(id: string) { via: c }

subscriber rec {
    on: Paid
    run: record(event.id)
    timeout: 1m
}
"#;

/// A live run on a tokio runtime of its own, until [`LiveRun::stop`].
struct LiveRun {
    tokio: tokio::runtime::Runtime,
    stop: tokio::sync::watch::Sender<bool>,
    run: tokio::task::JoinHandle<Result<RunSummary, jadpo_runtime::live::InternalFault>>,
}

impl LiveRun {
    fn start(rt: &Arc<Live>) -> LiveRun {
        let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let run = tokio.spawn(rt.clone().run(stopped));
        LiveRun { tokio, stop, run }
    }

    /// Stop the run and wait for it to end.
    fn stop(self) -> RunSummary {
        self.stop.send(true).expect("stop");
        self.tokio.block_on(self.run).expect("the run's task").expect("the run")
    }
}

/// Wait up to `secs` seconds for `done`, looking every 10 ms; past them the
/// test fails saying `what`.
fn wait_until(secs: u64, done: impl Fn() -> bool, what: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "{}", what());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How many of `store`'s deliveries (up to 1,000) are in `state`.
fn in_state(store: &dyn Store, state: DeliveryState) -> usize {
    let filter = DeliveryFilter { state: Some(state), limit: Some(1_000), ..Default::default() };
    store.deliveries(&filter).expect("read").len()
}

/// Event `i`: a `Paid` with one delivery to `rec` through `c`.
fn paid(i: usize) -> NewEvent {
    NewEvent {
        name: "Paid".into(),
        payload: format!(r#"{{"id":"p{i}"}}"#),
        deliveries: vec![NewDelivery { subscriber: "rec".into(), connection: "c".into(), order_key: None }],
    }
}

/// A stop lets running attempts finish for the grace period; those still running
/// then (a call that never answers) are cut off and counted `abandoned`. Nothing is
/// recorded for them: they stay `running`, their attempt counted, and a claim after
/// their lease takes them back, recording `lease_expired`.
#[test]
fn a_stop_cuts_off_attempts_still_running_after_the_grace_period() {
    let program = jadpo_test_support::program(HANGING);
    let store = Arc::new(SqliteStore::open_in_memory().expect("store"));
    let events: Vec<NewEvent> = (0..2).map(paid).collect();
    let clock = Arc::new(SystemClock);
    store.emit(&events, clock.now_ms()).expect("emit");
    let hang = parse_answers("hang").expect("a script");
    let drivers: Vec<Arc<dyn Driver>> = vec![Arc::new(FakeDriver::new(hang))];
    let config = RuntimeConfig { stop_grace_ms: 200, poll_ms: 10, ..RuntimeConfig::default() };
    let rt = Arc::new(Live::new(
        Runtime::new(program, store.clone(), clock, drivers, RandomSource::from_seed(1), config),
        None,
    ));

    let run = LiveRun::start(&rt);
    let running = || {
        let filter = DeliveryFilter { state: Some(DeliveryState::Running), ..Default::default() };
        store.deliveries(&filter).expect("read")
    };
    wait_until(30, || running().len() >= 2, || "the attempts never started".to_string());
    let summary = run.stop();
    assert_eq!(summary, RunSummary { recorded: 0, abandoned: 2 });

    let cut_off = running();
    assert_eq!(cut_off.len(), 2, "cut off, still running");
    let lease_end = cut_off.iter().filter_map(|d| d.lease_until_ms).max().expect("leased");
    assert!(cut_off.iter().all(|d| d.attempts == 1));
    let again = rt.claim_due(lease_end + 1, 10).expect("claim").report.run;
    assert_eq!(again.iter().map(|c| c.attempt).collect::<Vec<_>>(), [2, 2]);
    for c in again {
        let DeliveryDetail { attempts: history, .. } = store.delivery(c.id).expect("read").expect("a delivery");
        assert_eq!(history.iter().map(|a| a.kind.as_deref()).collect::<Vec<_>>(), [Some("lease_expired")]);
    }
}

/// A live run delivers every delivery once and counts every outcome it wrote,
/// on SQLite (whose claims write the outcomes waiting) and on PostgreSQL
/// (whose committer writes them beside the claims): with small claims, so that
/// many claims carry outcomes.
fn a_run_writes_and_counts_each_outcome_once(store: Arc<dyn Store>) {
    let events: Vec<NewEvent> = (0..300).map(paid).collect();
    let clock = Arc::new(SystemClock);
    store.emit(&events, clock.now_ms()).expect("emit");
    let ok = parse_answers("ok").expect("a script");
    let drivers: Vec<Arc<dyn Driver>> = vec![Arc::new(FakeDriver::new(ok))];
    let config = RuntimeConfig { workers: 2, batch: 8, poll_ms: 10, ..RuntimeConfig::default() };
    let rt = Arc::new(Live::new(
        Runtime::new(program(), store.clone(), clock, drivers, RandomSource::from_seed(1), config),
        None,
    ));
    let run = LiveRun::start(&rt);
    let succeeded = || in_state(&*store, DeliveryState::Succeeded);
    wait_until(60, || succeeded() >= 300, || format!("{} of 300 succeeded", succeeded()));
    let summary = run.stop();
    assert_eq!(summary, RunSummary { recorded: 300, abandoned: 0 });
    let all = store.deliveries(&DeliveryFilter { limit: Some(1_000), ..Default::default() }).expect("read");
    for d in all {
        let DeliveryDetail { attempts, .. } = store.delivery(d.id).expect("read").expect("a delivery");
        assert_eq!(attempts.len(), 1, "delivery {} ran once", d.id);
    }
}

#[test]
fn a_run_on_sqlite_writes_and_counts_each_outcome_once() {
    let store = Arc::new(SqliteStore::open_in_memory().expect("store"));
    assert!(store.one_writer(), "its claims write the outcomes");
    a_run_writes_and_counts_each_outcome_once(store);
}

#[test]
fn a_run_on_postgres_writes_and_counts_each_outcome_once() {
    let Some(db) = common::fixture::pg_database() else { return };
    let store = Arc::new(PgStore::open(&db.url, OpenOptions::read_write()).expect("open the store"));
    assert!(!store.one_writer(), "its committer writes the outcomes");
    a_run_writes_and_counts_each_outcome_once(store);
}

/// A run whose future is dropped while it delivers (its task aborted) ends
/// there, on SQLite too, whose claims run on a thread of their own: that thread
/// is let go, not waited for on the async thread (where waiting panics).
#[test]
fn a_run_dropped_while_it_delivers_ends_without_a_panic() {
    let store = Arc::new(SqliteStore::open_in_memory().expect("store"));
    let clock = Arc::new(SystemClock);
    store.emit(&(0..20).map(paid).collect::<Vec<_>>(), clock.now_ms()).expect("emit");
    let hang = parse_answers("hang").expect("a script");
    let drivers: Vec<Arc<dyn Driver>> = vec![Arc::new(FakeDriver::new(hang))];
    let config = RuntimeConfig { batch: 2, workers: 1, poll_ms: 10, ..RuntimeConfig::default() };
    let rt = Arc::new(Live::new(
        Runtime::new(
            jadpo_test_support::program(HANGING),
            store.clone(),
            clock,
            drivers,
            RandomSource::from_seed(1),
            config,
        ),
        None,
    ));
    let run = LiveRun::start(&rt);
    wait_until(30, || in_state(&*store, DeliveryState::Running) >= 2, || "the attempts never started".to_string());
    run.run.abort();
    let ended = run.tokio.block_on(run.run).expect_err("aborted");
    assert!(ended.is_cancelled(), "the run's future was dropped, not panicking: {ended:?}");
}

/// A store whose clock cannot be read the first `down` times; it counts the
/// claims that start before a reading succeeded.
struct ClockDown {
    down: std::sync::atomic::AtomicUsize,
    read: std::sync::atomic::AtomicBool,
    claims_before: std::sync::atomic::AtomicUsize,
}

impl ClaimHook for ClockDown {
    fn starting(&self) {
        if !self.read.load(std::sync::atomic::Ordering::SeqCst) {
            self.claims_before.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
    fn db_now_ms(&self, _: &dyn Views) -> Result<Option<i64>, jadpo_core::store::StoreError> {
        let left = self.down.load(std::sync::atomic::Ordering::SeqCst);
        if left > 0 {
            self.down.store(left - 1, std::sync::atomic::Ordering::SeqCst);
            return Err(jadpo_core::store::StoreError::Corrupt("the server is restarting".into()));
        }
        self.read.store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(Some(SystemClock.now_ms()))
    }
}

/// A run whose store's clock cannot be read as it starts (a database
/// restarting) claims nothing until a reading succeeds: a host's own clock may
/// be minutes off the others'. Then it delivers.
#[test]
fn a_run_claims_nothing_before_it_has_read_the_stores_clock() {
    let inner = Arc::new(SqliteStore::open_in_memory().expect("store"));
    inner.emit(&[paid(0)], SystemClock.now_ms()).expect("emit");
    let hook = ClockDown {
        down: std::sync::atomic::AtomicUsize::new(2),
        read: std::sync::atomic::AtomicBool::new(false),
        claims_before: std::sync::atomic::AtomicUsize::new(0),
    };
    let store = Arc::new(Hooked { inner: inner.clone(), hook });
    let ok = parse_answers("ok").expect("a script");
    let drivers: Vec<Arc<dyn Driver>> = vec![Arc::new(FakeDriver::new(ok))];
    let config = RuntimeConfig { poll_ms: 10, ..RuntimeConfig::default() };
    let rt = Arc::new(Live::new(
        Runtime::new(program(), store.clone(), Arc::new(SystemClock), drivers, RandomSource::from_seed(1), config),
        None,
    ));
    let run = LiveRun::start(&rt);
    wait_until(60, || in_state(&*inner, DeliveryState::Succeeded) >= 1, || "never delivered".to_string());
    run.stop();
    assert_eq!(store.hook.claims_before.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(store.hook.down.load(std::sync::atomic::Ordering::SeqCst), 0, "both failed readings were tried");
}

/// `run --retain`: the run prunes final deliveries older than the cut in the
/// background, at its start and then every few minutes; a delivery still running
/// is kept.
#[test]
fn a_run_with_retain_prunes_final_deliveries_in_the_background() {
    let program = jadpo_test_support::program(HANGING);
    let store = Arc::new(SqliteStore::open_in_memory().expect("store"));
    let clock = Arc::new(SystemClock);
    let hang = parse_answers("hang").expect("a script");
    let drivers: Vec<Arc<dyn Driver>> = vec![Arc::new(FakeDriver::new(hang))];
    let config = RuntimeConfig { stop_grace_ms: 200, poll_ms: 10, retain_ms: Some(0), ..RuntimeConfig::default() };
    let rt = Arc::new(Live::new(
        Runtime::new(program, store.clone(), clock.clone(), drivers, RandomSource::from_seed(1), config),
        None,
    ));
    // Two deliveries succeeded a second ago; a third is still to run.
    let before = clock.now_ms() - 1_000;
    store.emit(&[paid(0), paid(1)], before).expect("emit");
    let claimed = rt.claim_due(before, 10).expect("claim").report.run;
    let done: Vec<_> = claimed.iter().map(|c| rt.conclude(c, Outcome::ok(), before)).collect();
    assert_eq!(rt.record_outcomes(&done).expect("record"), 2);
    store.emit(&[paid(2)], before).expect("emit");

    let run = LiveRun::start(&rt);
    let all = || store.deliveries(&DeliveryFilter::default()).expect("read");
    wait_until(60, || all().len() <= 1, || format!("never pruned: {:?}", all()));
    run.stop();
    let left = all();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].event_id, 3, "the delivery not final is kept");
    assert!(matches!(left[0].state, DeliveryState::Pending | DeliveryState::Running), "{left:?}");
}

/// Runs its function once, at the first decision of a claim after it was set:
/// another task's write landing in the middle of a claim.
#[derive(Default)]
struct Interleave(std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>);

impl ClaimHook for Interleave {
    fn deciding(&self) {
        if let Some(hook) = self.0.lock().unwrap_or_else(|e| e.into_inner()).take() {
            hook();
        }
    }
}

/// The process's own failures hold its claims however their writes and its
/// claims interleave: the fifth failure, written while a claim runs (after the
/// claim read the breaker's row without it), still holds that claim's
/// deliveries. Only PostgreSQL lets a write land inside a claim (on SQLite the
/// claim's transaction keeps the write waiting), so the test runs there.
#[test]
fn a_failure_written_during_a_claim_still_holds_that_claim_on_postgres() {
    let Some(db) = common::fixture::pg_database() else { return };
    let pg = PgStore::open(&db.url, OpenOptions::read_write()).expect("open the store");
    let store = Arc::new(Hooked { inner: Arc::new(pg), hook: Interleave::default() });
    let clock = Arc::new(VirtualClock::new(T0));
    let drivers: Vec<Arc<dyn Driver>> = vec![Arc::new(FakeDriver::new(Vec::new()))];
    let config = RuntimeConfig::default();
    let rt = Arc::new(Live::new(
        Runtime::new(program(), store.clone(), clock, drivers, RandomSource::from_seed(1), config),
        None,
    ));
    let events: Vec<NewEvent> = (0..10)
        .map(|i| NewEvent {
            name: "Paid".into(),
            payload: format!(r#"{{"id":"p{i}"}}"#),
            deliveries: vec![NewDelivery { subscriber: "rec".into(), connection: "c".into(), order_key: None }],
        })
        .collect();
    store.emit(&events, T0).expect("emit");
    let unavailable = Outcome::fail(FailureKind::Unavailable, "http.503");

    // Four calls fail and are written (the store's row counts four); a fifth
    // fails, which opens the breaker in this process before it is written.
    let first = rt.claim_due(T0, 10).expect("claim").report.run;
    assert_eq!(first.len(), 4, "the connection's `max_in_flight` attempts");
    let done: Vec<_> = first.iter().map(|c| rt.conclude(c, unavailable.clone(), T0 + 1)).collect();
    assert_eq!(rt.record_outcomes(&done).expect("record"), 4);
    let fifth = rt.claim_due(T0 + 2, 1).expect("claim").report.run;
    assert_eq!(fifth.len(), 1);
    let fifth = rt.conclude(&fifth[0], unavailable, T0 + 3);

    // The committer writes the fifth while the next claim runs.
    let committer = rt.clone();
    *store.hook.0.lock().expect("hook") = Some(Box::new(move || {
        assert_eq!(committer.record_outcomes(&[fifth]).expect("record"), 1);
    }));
    let r = rt.claim_due(T0 + 4, 10).expect("claim").report;
    assert_eq!((r.run.len(), r.held.len()), (0, 5), "the five left are held: {r:?}");
    let row = store.breakers().expect("breakers").into_iter().find(|b| b.connection == "c").expect("a row");
    assert_eq!((row.row.state, row.held), (jadpo_check::program::BreakerState::Open, 5));
}

/// The system clock moved on by what `offset_ms` adds (a claim that took that
/// long, as far as the run's clock goes).
#[derive(Default)]
struct JumpingClock {
    offset_ms: std::sync::atomic::AtomicI64,
}

impl Clock for JumpingClock {
    fn now_ms(&self) -> i64 {
        SystemClock.now_ms() + self.offset_ms.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A driver that counts the calls it makes and answers each at once.
#[derive(Default)]
struct CountingDriver {
    calls: std::sync::atomic::AtomicUsize,
}

impl Driver for CountingDriver {
    fn call(&self, _request: CallRequest) -> BoxFuture<'_, Outcome> {
        Box::pin(async move {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Outcome::ok()
        })
    }
}

const EIGHT_AT_ONCE: &str = r#"
event Paid { id: string }

connection c { url: "http://127.0.0.1:9/x"  max_in_flight: 8 }

action record(id: string) { via: c  idempotent: true }

subscriber rec {
    on: Paid
    run: record(event.id)
    timeout: 1s
}
"#;

/// An attempt's time limit counts from its claim; one whose limit passed while
/// its claim was being written (the store slow, the machine loaded) ends
/// `deadline_exceeded` without calling: a call made then would reach the
/// provider, be cut at once, and be made again by the retry.
#[test]
fn an_attempt_whose_time_limit_passed_during_its_claim_makes_no_call() {
    let program = jadpo_test_support::program(EIGHT_AT_ONCE);
    let clock = Arc::new(JumpingClock::default());
    let sqlite = Arc::new(SqliteStore::open_in_memory().expect("store"));
    let store = Arc::new(Hooked { inner: sqlite, hook: Interleave::default() });
    let events: Vec<NewEvent> = (0..8)
        .map(|i| NewEvent {
            name: "Paid".into(),
            payload: format!(r#"{{"id":"p{i}"}}"#),
            deliveries: vec![NewDelivery { subscriber: "rec".into(), connection: "c".into(), order_key: None }],
        })
        .collect();
    store.emit(&events, clock.now_ms()).expect("emit");
    // The claim takes two seconds of the run's clock: the one-second limit of
    // every attempt it claims has passed when it ends.
    let jump = clock.clone();
    *store.hook.0.lock().expect("hook") = Some(Box::new(move || {
        jump.offset_ms.store(2_000, std::sync::atomic::Ordering::SeqCst);
    }));
    let driver = Arc::new(CountingDriver::default());
    let drivers: Vec<Arc<dyn Driver>> = vec![driver.clone()];
    let config = RuntimeConfig { stop_grace_ms: 200, poll_ms: 10, ..RuntimeConfig::default() };
    let rt = Arc::new(Live::new(
        Runtime::new(program, store.clone(), clock, drivers, RandomSource::from_seed(1), config),
        None,
    ));

    let run = LiveRun::start(&rt);
    let tried = || {
        let all = store.deliveries(&DeliveryFilter::default()).expect("read");
        all.iter().filter(|d| d.attempts == 1 && d.state != DeliveryState::Running).count()
    };
    wait_until(30, || tried() >= 8, || "the attempts never ended".to_string());
    run.stop();

    assert_eq!(driver.calls.load(std::sync::atomic::Ordering::SeqCst), 0, "a call was made past its time limit");
    for d in store.deliveries(&DeliveryFilter::default()).expect("read") {
        let DeliveryDetail { attempts: history, .. } = store.delivery(d.id).expect("read").expect("a delivery");
        let codes: Vec<_> = history.iter().map(|a| a.code.as_deref()).collect();
        assert_eq!(codes, [Some("deadline_exceeded")], "delivery {}", d.id);
    }
}
