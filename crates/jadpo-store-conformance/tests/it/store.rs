//! The store suite: every test is a function over a [`Fixture`], run on each
//! store (SQLite files here; PostgreSQL where a server answers), and the tests
//! only SQLite's files have (foreign files, locks, read-only files, a full disk).

use crate::common;
use jadpo_core::store::{Actions, DeliveryDetail, Views};

use common::fixture::{self, Fixture, SqliteFile};
use common::{T0, TIMEOUT_MS, claim, claim_with, event, try_claim};
use jadpo_check::program::{Budget, DeliveryState, FailureKind};
use jadpo_core::rules::breaker;
use jadpo_core::rules::{self, ClaimDecision, Decision, Outcome};
use jadpo_core::store::{
    ClaimAt, DeliveryFilter, NewEvent, NoRaise, OpenOptions, Recorded, RetryResult, ScheduleSpec, SkipResult, Store,
    StoreError,
};
use jadpo_store_postgres::PgStore;
use jadpo_store_sqlite::SqliteStore;
use std::collections::HashSet;
use std::sync::{Barrier, Mutex};
use std::time::Duration;

fn ok_record(id: i64, attempt: u32, started: i64, ended: i64) -> Recorded {
    Recorded {
        id,
        connection: "c".into(),
        attempt,
        started_at_ms: started,
        ended_at_ms: ended,
        outcome: Outcome::ok(),
        decision: Decision::Succeeded,
    }
}

fn temp_db() -> (tempfile::TempDir, std::path::PathBuf) {
    let f = SqliteFile::new();
    let path = f.path.clone();
    (f.into_dir(), path)
}

/// `order_by:`: one key's deliveries run one at a time in event order, a failed
/// one holding the rest back (listed as waiting on it) while other keys go on,
/// until it ends; an operator's skip lets the key go on.
fn one_keys_deliveries_run_one_at_a_time_in_event_order(f: &dyn Fixture) {
    use common::keyed_event;
    let store = f.open();
    let ids = store
        .emit(&[keyed_event(1, "a"), keyed_event(2, "a"), keyed_event(3, "b"), keyed_event(4, "a"), event(5)], T0)
        .unwrap();
    let delivery_of = |event: i64| {
        let all = store.deliveries(&DeliveryFilter::default()).unwrap();
        all.into_iter().find(|d| d.event_id == event).unwrap()
    };
    let (a1, a2, b1, a3, free) =
        (delivery_of(ids[0]), delivery_of(ids[1]), delivery_of(ids[2]), delivery_of(ids[3]), delivery_of(ids[4]));
    assert_eq!(a2.order_key.as_deref(), Some("a"));
    assert_eq!(a2.waiting_on, Some(a1.id), "listed as waiting on the head of its key");
    assert_eq!(a3.waiting_on, Some(a1.id));
    assert_eq!((b1.waiting_on, free.waiting_on, free.order_key.as_deref()), (None, None, None));
    // Only the head of each key, and the unordered one, are claimed.
    let first = claim(&*store, T0, 10);
    let mut run: Vec<i64> = first.run.iter().map(|c| c.id).collect();
    run.sort_unstable();
    assert_eq!(run, vec![a1.id, b1.id, free.id]);
    assert_eq!(store.next_due_ms().unwrap(), Some(rules::lease_until_ms(T0, TIMEOUT_MS)), "a waiting one is not due");
    store.record(&[ok_record(b1.id, 1, T0, T0 + 5), ok_record(free.id, 1, T0, T0 + 5)], &[], &NoRaise).unwrap();
    // The head fails and is due again later: its key still waits on it.
    let c = first.run.iter().find(|c| c.id == a1.id).unwrap();
    let retry_at = T0 + 60_000;
    let outcome = Outcome::fail(FailureKind::Unavailable, "fake.unavailable");
    let decision = Decision::Retry { due_at_ms: retry_at, failure: outcome.failure().unwrap() };
    let failed = Recorded {
        id: c.id,
        connection: "c".into(),
        attempt: 1,
        started_at_ms: T0,
        ended_at_ms: T0 + 10,
        outcome,
        decision,
    };
    assert_eq!(store.record(&[failed], &[], &NoRaise).unwrap(), vec![0]);
    assert!(claim(&*store, T0 + 20, 10).run.is_empty(), "the key waits on its failed head");
    assert_eq!(delivery_of(ids[1]).waiting_on, Some(a1.id));
    // It succeeds on its retry; then the next of its key, and only it, runs.
    let again = claim(&*store, retry_at, 10);
    assert_eq!(again.run.iter().map(|c| c.id).collect::<Vec<_>>(), vec![a1.id]);
    assert_eq!(again.run[0].attempt, 2);
    store.record(&[ok_record(a1.id, 2, retry_at, retry_at + 5)], &[], &NoRaise).unwrap();
    let next = claim(&*store, retry_at + 10, 10);
    assert_eq!(next.run.iter().map(|c| c.id).collect::<Vec<_>>(), vec![a2.id]);
    assert_eq!(next.run[0].record.budget_start_ms, retry_at + 10, "its window starts at its first claim");
    assert_eq!(delivery_of(ids[3]).waiting_on, Some(a2.id));
    // A running delivery cannot be skipped; a waiting one can, and is then ended.
    assert_eq!(
        store.skip(&[a2.id, a3.id, 9_999], retry_at + 20).unwrap(),
        vec![SkipResult::NotSkippable(DeliveryState::Running), SkipResult::Skipped, SkipResult::NotFound]
    );
    let skipped = delivery_of(ids[3]);
    assert_eq!(
        (skipped.state, skipped.waiting_on, skipped.end_reason.as_deref()),
        (DeliveryState::Skipped, None, Some("skipped"))
    );
    // A skipped delivery can be retried: it runs once its key is free.
    assert_eq!(store.retry(&[a3.id], retry_at + 30).unwrap(), vec![RetryResult::Retried]);
    assert!(claim(&*store, retry_at + 40, 10).run.is_empty(), "it waits on the running one again");
    store.record(&[ok_record(a2.id, 1, retry_at + 10, retry_at + 50)], &[], &NoRaise).unwrap();
    let last = claim(&*store, retry_at + 60, 10);
    assert_eq!(last.run.iter().map(|c| c.id).collect::<Vec<_>>(), vec![a3.id]);
}

/// A program whose connection `c` has `rate` (a connection key, or nothing).
fn rated_program(rate: &str) -> std::sync::Arc<jadpo_check::program::Program> {
    jadpo_test_support::program(&format!(
        r#"
event Paid {{ id: string }}
connection c {{ url: "http://127.0.0.1:9/x" {rate} }}
action record(id: string) {{ via: c }}
subscriber rec {{ on: Paid  run: record(event.id)  timeout: 1s }}
"#
    ))
}

/// Claims at each next due time on the virtual clock, each call answered at
/// once with `answer`, until nothing is due: when each call started.
fn call_times(rt: &jadpo_core::steps::Runtime, store: &dyn Store, answer: impl Fn(usize) -> Outcome) -> Vec<i64> {
    let mut starts = Vec::new();
    let mut now = T0;
    for _ in 0..100_000 {
        let due = rt.claim_due(now, 20).unwrap();
        let done: Vec<_> = due
            .report
            .run
            .iter()
            .map(|c| {
                starts.push(c.claimed_at_ms);
                rt.conclude(c, answer(starts.len() - 1), now)
            })
            .collect();
        rt.record_outcomes(&done).unwrap();
        match store.next_due_ms().unwrap() {
            Some(t) => now = now.max(t),
            None => return starts,
        }
    }
    panic!("still due after 100,000 claims");
}

fn runtime_on(
    store: std::sync::Arc<dyn Store>,
    program: std::sync::Arc<jadpo_check::program::Program>,
) -> jadpo_core::steps::Runtime {
    use jadpo_core::{clock::VirtualClock, config::RuntimeConfig, drivers::FakeDriver, rng::RandomSource};
    let clock = std::sync::Arc::new(VirtualClock::new(T0));
    let driver: std::sync::Arc<dyn jadpo_core::drivers::Driver> = std::sync::Arc::new(FakeDriver::new(Vec::new()));
    jadpo_core::steps::Runtime::new(
        program,
        store,
        clock,
        vec![driver],
        RandomSource::from_seed(1),
        RuntimeConfig::default(),
    )
}

/// `rate: 10/s`: a backlog of 1,000 calls takes 99.9 s from the first call to the
/// last, never two within 100 ms, and waiting spends no attempt; with a burst,
/// that many go at once first.
fn a_connections_rate_spaces_its_calls_exactly(f: &dyn Fixture) {
    let store: std::sync::Arc<dyn Store> = std::sync::Arc::from(f.open());
    let program = rated_program("rate: 10/s");
    let rt = runtime_on(store.clone(), program.clone());
    let events: Vec<NewEvent> = (0..1000)
        .map(|i| jadpo_core::payload::new_event(&program, "Paid", &format!(r#"{{"id":"p{i}"}}"#)).unwrap())
        .collect();
    store.emit(&events, T0).unwrap();
    let starts = call_times(&rt, &*store, |_| Outcome::ok());
    assert_eq!(starts.len(), 1000);
    assert_eq!((starts[0], starts[999]), (T0, T0 + 99_900));
    assert!(starts.windows(2).all(|w| w[1] - w[0] >= 100), "two calls within 100 ms");
    let all = store.deliveries(&DeliveryFilter::default()).unwrap();
    assert!(all.iter().all(|d| d.state == DeliveryState::Succeeded && d.attempts == 1));
    let last = all.iter().max_by_key(|d| d.held_ms).unwrap();
    assert!(last.held_ms >= 99_000, "the wait is time held, not window spent: {}", last.held_ms);

    // A burst of 5 at 10/s: five at once, then one every 100 ms.
    let store: std::sync::Arc<dyn Store> = std::sync::Arc::from(f.open());
    let program = rated_program("rate: 10/s  burst: 5");
    let rt = runtime_on(store.clone(), program.clone());
    let events: Vec<NewEvent> = (0..8)
        .map(|i| jadpo_core::payload::new_event(&program, "Paid", &format!(r#"{{"id":"q{i}"}}"#)).unwrap())
        .collect();
    store.emit(&events, T0 + 1_000_000).unwrap();
    let starts = call_times(&rt, &*store, |_| Outcome::ok());
    let base = starts[0];
    let offsets: Vec<i64> = starts.iter().map(|t| t - base).collect();
    assert_eq!(offsets[..5], [0, 0, 0, 0, 0]);
    // The bucket refills at the rate: the sixth call one interval after the burst.
    assert_eq!(offsets[5..], [100, 200, 300]);
}

/// A `429` with `Retry-After` slows its connection: no other delivery of it
/// starts before that time, whether or not the connection has a rate.
fn a_retry_after_holds_back_the_whole_connection(f: &dyn Fixture) {
    let store: std::sync::Arc<dyn Store> = std::sync::Arc::from(f.open());
    let program = rated_program("");
    let rt = runtime_on(store.clone(), program.clone());
    let events: Vec<NewEvent> = (0..3)
        .map(|i| jadpo_core::payload::new_event(&program, "Paid", &format!(r#"{{"id":"p{i}"}}"#)).unwrap())
        .collect();
    store.emit(&events, T0).unwrap();
    let limited = || {
        Outcome::Failed(jadpo_core::rules::CallFailure {
            retry_after_ms: Some(30_000),
            ..jadpo_core::rules::CallFailure::new(FailureKind::RateLimited, "http.429")
        })
    };
    // One claim takes a single call (the others of the claim run too: the
    // provider has not answered yet); its 429 then holds back what follows.
    let first = rt.claim_due(T0, 1).unwrap().report.run;
    assert_eq!(first.len(), 1);
    rt.record_outcomes(&[rt.conclude(&first[0], limited(), T0 + 10)]).unwrap();
    assert!(rt.claim_due(T0 + 20, 10).unwrap().report.run.is_empty(), "held back until Retry-After");
    let others: Vec<_> = store
        .deliveries(&DeliveryFilter::default())
        .unwrap()
        .into_iter()
        .filter(|d| d.id != first[0].id)
        .map(|d| (d.state, d.attempts, d.due_at_ms))
        .collect();
    assert_eq!(
        others,
        vec![(DeliveryState::Pending, 0, Some(T0 + 30_010)); 2],
        "due at the Retry-After, no attempt spent"
    );
    let later = rt.claim_due(T0 + 30_010, 10).unwrap().report.run;
    assert!(later.iter().any(|c| c.id != first[0].id && c.attempt == 1), "the connection goes on: {later:?}");
}

fn emit_claim_and_record_a_success(f: &dyn Fixture) {
    let store = f.open();
    let ids = store.emit(&[event(1), event(2)], T0).unwrap();
    assert_eq!(ids.len(), 2);
    let all = store.deliveries(&DeliveryFilter::default()).unwrap();
    assert_eq!(all.len(), 2);
    assert!(all.iter().all(|d| d.state == DeliveryState::Pending && d.due_at_ms == Some(T0)));

    // Not due before emitted_at.
    assert!(claim(&*store, T0 - 1, 10).run.is_empty());
    let r = claim(&*store, T0, 10);
    assert_eq!(r.run.len(), 2);
    assert!(r.run.iter().all(|c| c.attempt == 1 && c.event == "Paid"));
    // A second claim finds nothing: both are running under a lease.
    assert!(claim(&*store, T0 + 5, 10).run.is_empty());

    let c = &r.run[0];
    assert_eq!(store.record(&[ok_record(c.id, 1, c.claimed_at_ms, T0 + 7)], &[], &NoRaise).unwrap(), vec![0]);
    let DeliveryDetail { delivery: d, attempts: history } = store.delivery(c.id).unwrap().unwrap();
    assert_eq!(d.state, DeliveryState::Succeeded);
    assert_eq!(d.attempts, 1);
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].outcome, "succeeded");
    assert_eq!(history[0].duration_ms, 7);
    // Recording the same attempt again changes nothing (it is no longer running).
    assert!(store.record(&[ok_record(c.id, 1, c.claimed_at_ms, T0 + 8)], &[], &NoRaise).unwrap().is_empty());
}

fn a_retryable_failure_is_pending_again_with_its_failure_kept(f: &dyn Fixture) {
    let store = f.open();
    store.emit(&[event(1)], T0).unwrap();
    let c = claim(&*store, T0, 10).run.remove(0);
    let outcome = Outcome::fail(FailureKind::Unavailable, "fake.unavailable");
    let decision = Decision::Retry { due_at_ms: T0 + 5_000, failure: outcome.failure().unwrap() };
    let rec = Recorded {
        id: c.id,
        connection: c.connection.clone(),
        attempt: 1,
        started_at_ms: c.claimed_at_ms,
        ended_at_ms: T0 + 1,
        outcome,
        decision,
    };
    assert_eq!(store.record(&[rec], &[], &NoRaise).unwrap(), vec![0]);
    let DeliveryDetail { delivery: d, attempts: h } = store.delivery(c.id).unwrap().unwrap();
    assert_eq!(d.state, DeliveryState::Pending);
    assert_eq!(d.due_at_ms, Some(T0 + 5_000));
    assert_eq!(d.last_failure.unwrap().kind, FailureKind::Unavailable);
    assert_eq!(h[0].kind.as_deref(), Some("unavailable"));
    assert_eq!(store.next_due_ms().unwrap(), Some(T0 + 5_000));
    assert!(claim(&*store, T0 + 4_999, 10).run.is_empty());
    let again = claim(&*store, T0 + 5_000, 10).run;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempt, 2);
}

fn an_expired_lease_is_taken_back_as_lease_expired_and_the_lost_worker_loses(f: &dyn Fixture) {
    let store = f.open();
    store.emit(&[event(1)], T0).unwrap();
    let first = claim(&*store, T0, 10).run.remove(0);
    let lease_end = T0 + TIMEOUT_MS as i64 + rules::LEASE_GRACE_MS as i64;
    assert_eq!(first.record.lease_until_ms, Some(lease_end));
    assert_eq!(store.next_due_ms().unwrap(), Some(lease_end));
    assert!(claim(&*store, lease_end - 1, 10).run.is_empty());

    let second = claim(&*store, lease_end, 10).run.remove(0);
    assert_eq!(second.attempt, 2);
    let DeliveryDetail { delivery: d, attempts: h } = store.delivery(first.id).unwrap().unwrap();
    assert_eq!(d.state, DeliveryState::Running);
    assert_eq!(d.last_failure.unwrap().kind, FailureKind::LeaseExpired);
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].attempt, 1);
    assert_eq!(h[0].kind.as_deref(), Some("lease_expired"));

    // The lost worker's late answer is not written: the new claim owns it. Of a
    // batch holding both, only the new claim's is reported written.
    let late = ok_record(first.id, 1, first.claimed_at_ms, lease_end + 1);
    let current = ok_record(second.id, 2, second.claimed_at_ms, lease_end + 2);
    assert_eq!(store.record(&[late, current], &[], &NoRaise).unwrap(), vec![1]);
    let DeliveryDetail { delivery: d, attempts: h } = store.delivery(first.id).unwrap().unwrap();
    assert_eq!(d.state, DeliveryState::Succeeded);
    assert_eq!(h.len(), 2);
}

fn an_expired_lease_on_the_last_attempt_fails_at_the_claim(f: &dyn Fixture) {
    let store = f.open();
    store.emit(&[event(1)], T0).unwrap();
    let budget = Budget { attempts: 1, ..Budget::default() };
    let c = claim_with(&*store, T0, 10, budget).run.remove(0);
    let r = claim_with(&*store, T0 + 3_600_000, 10, budget);
    assert!(r.run.is_empty());
    assert_eq!(r.ended.len(), 1);
    assert!(matches!(r.ended[0].decision, ClaimDecision::GiveUp { .. }));
    let DeliveryDetail { delivery: d, attempts: h } = store.delivery(c.id).unwrap().unwrap();
    assert_eq!(d.state, DeliveryState::Failed);
    assert_eq!(d.last_failure.unwrap().kind, FailureKind::LeaseExpired);
    assert_eq!(h.len(), 1);
}

fn a_claim_after_the_window_gives_up_deadline_exceeded(f: &dyn Fixture) {
    let store = f.open();
    store.emit(&[event(1)], T0).unwrap();
    let budget = Budget { within_ms: 60_000, ..Budget::default() };
    let r = claim_with(&*store, T0 + 60_001, 10, budget);
    assert_eq!(r.ended.len(), 1);
    let d = &store.deliveries(&DeliveryFilter::default()).unwrap()[0];
    assert_eq!(d.state, DeliveryState::Failed);
    assert_eq!(d.attempts, 0);
    assert_eq!(d.last_failure.as_ref().unwrap().kind, FailureKind::DeadlineExceeded);
}

fn operator_retry_gives_a_fresh_budget_and_keeps_history(f: &dyn Fixture) {
    let store = f.open();
    store.emit(&[event(1)], T0).unwrap();
    let c = claim(&*store, T0, 10).run.remove(0);
    let outcome = Outcome::fail(FailureKind::Rejected, "fake.rejected");
    let failure = outcome.failure().unwrap();
    store
        .record(
            &[Recorded {
                id: c.id,
                connection: c.connection.clone(),
                attempt: 1,
                started_at_ms: T0,
                ended_at_ms: T0 + 1,
                outcome,
                decision: Decision::Failed { failure, because: rules::FailedBecause::NotRetryable },
            }],
            &[],
            &NoRaise,
        )
        .unwrap();
    let later = T0 + 86_400_000 * 3;
    assert_eq!(store.retry(&[c.id, 999], later).unwrap(), vec![RetryResult::Retried, RetryResult::NotFound]);
    assert_eq!(store.retry(&[c.id], later).unwrap(), vec![RetryResult::NotRetryable(DeliveryState::Pending)]);
    let d = &store.deliveries(&DeliveryFilter::default()).unwrap()[0];
    assert_eq!((d.state, d.attempts, d.due_at_ms, d.budget_start_ms), (DeliveryState::Pending, 0, Some(later), later));
    let again = claim(&*store, later, 10).run.remove(0);
    assert_eq!(again.attempt, 1);
    store.record(&[ok_record(c.id, 1, again.claimed_at_ms, later + 1)], &[], &NoRaise).unwrap();
    let DeliveryDetail { delivery: d, attempts: h } = store.delivery(c.id).unwrap().unwrap();
    assert_eq!(d.state, DeliveryState::Succeeded);
    assert_eq!(h.len(), 2, "both runs' attempts are kept");
    assert_eq!(h[0].outcome, "failed");
    assert_eq!(h[1].outcome, "succeeded");
}

fn two_handles_never_claim_one_delivery_twice(f: &dyn Fixture) {
    let setup = f.open();
    let events: Vec<NewEvent> = (0..3_000).map(event).collect();
    setup.emit(&events, T0).unwrap();

    let seen = Mutex::new(Vec::<i64>::new());
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let store = f.open();
                barrier.wait();
                loop {
                    let r = claim(&*store, T0 + 10, 37);
                    if r.run.is_empty() {
                        break;
                    }
                    let recs: Vec<Recorded> =
                        r.run.iter().map(|c| ok_record(c.id, c.attempt, c.claimed_at_ms, T0 + 11)).collect();
                    assert_eq!(store.record(&recs, &[], &NoRaise).unwrap(), (0..recs.len()).collect::<Vec<_>>());
                    seen.lock().unwrap().extend(r.run.iter().map(|c| c.id));
                }
            });
        }
    });
    let seen = seen.into_inner().unwrap();
    let unique: HashSet<_> = seen.iter().collect();
    assert_eq!(seen.len(), 3_000, "every delivery claimed");
    assert_eq!(unique.len(), 3_000, "none claimed twice");
    let s = setup.status(T0).unwrap();
    assert!(s.states.contains(&(DeliveryState::Succeeded, 3_000)));
}

#[test]
fn a_foreign_file_is_refused_untouched() {
    let (dir, _) = temp_db();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, b"hello, this is not a database at all, just some words\n".repeat(200)).unwrap();
    let before = std::fs::read(&text).unwrap();
    let err = SqliteStore::open(&text).unwrap_err();
    assert!(matches!(err, StoreError::Foreign { .. }), "{err}");
    assert!(err.to_string().contains("is not a jadpo store"));
    assert_eq!(std::fs::read(&text).unwrap(), before);

    let other = dir.path().join("other.db");
    {
        let c = rusqlite::Connection::open(&other).unwrap();
        c.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);").unwrap();
    }
    let before = std::fs::read(&other).unwrap();
    let err = SqliteStore::open(&other).unwrap_err();
    assert!(matches!(err, StoreError::Foreign { .. }), "{err}");
    assert_eq!(std::fs::read(&other).unwrap(), before);
    let c = rusqlite::Connection::open(&other).unwrap();
    let mode: String = c.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "delete", "its journal mode was not changed");
}

#[test]
fn an_empty_file_becomes_a_store_and_a_newer_one_is_refused() {
    let (_dir, path) = temp_db();
    std::fs::write(&path, b"").unwrap();
    let store = SqliteStore::open(&path).unwrap();
    store.emit(&[event(1)], T0).unwrap();
    drop(store);
    // Reopened, the data is still there.
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.deliveries(&DeliveryFilter::default()).unwrap().len(), 1);
    drop(store);
    let c = rusqlite::Connection::open(&path).unwrap();
    let app: i64 = c.query_row("PRAGMA application_id", [], |r| r.get(0)).unwrap();
    assert_eq!(app, jadpo_store_sqlite::APPLICATION_ID);
    c.execute_batch("PRAGMA user_version = 99").unwrap();
    drop(c);
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err}");
}

#[test]
fn a_locked_store_is_waited_on_and_nothing_is_lost() {
    let (_dir, path) = temp_db();
    let store = SqliteStore::open(&path).unwrap();
    let locker = rusqlite::Connection::open(&path).unwrap();
    locker.execute_batch("BEGIN IMMEDIATE;").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = std::thread::spawn(move || {
        let ids = store.emit(&[event(1)], T0);
        tx.send(()).unwrap();
        (ids, store)
    });
    // Another connection holds the write lock: the emit waits (busy timeout, then
    // whole-transaction retries) instead of failing or losing the event.
    std::thread::sleep(Duration::from_millis(300));
    assert!(rx.try_recv().is_err(), "the emit waited for the lock");
    locker.execute_batch("COMMIT").unwrap();
    let (ids, store) = writer.join().unwrap();
    assert_eq!(ids.unwrap().len(), 1);
    assert_eq!(store.deliveries(&DeliveryFilter::default()).unwrap().len(), 1);
}

fn schedules_are_due_every_period_and_catch_up_once(f: &dyn Fixture) {
    let store = f.open();
    let specs = vec![ScheduleSpec { name: "nightly".into(), every_ms: 60_000, timeout_ms: 30_000 }];
    store.sync_schedules(&specs, T0).unwrap();
    assert_eq!(store.next_schedule_due_ms().unwrap(), Some(T0 + 60_000));
    assert!(store.claim_schedules(&specs, T0 + 59_999).unwrap().is_empty());
    let c = store.claim_schedules(&specs, T0 + 60_000).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].run, 1);
    assert!(store.claim_schedules(&specs, T0 + 60_000).unwrap().is_empty());
    // A restart does not reset it.
    drop(store);
    let store = f.open();
    store.sync_schedules(&specs, T0 + 70_000).unwrap();
    assert_eq!(store.next_schedule_due_ms().unwrap(), Some(T0 + 120_000));
    // Down for ten periods: one run, then the next on its grid.
    let c = store.claim_schedules(&specs, T0 + 10 * 60_000 + 5).unwrap();
    assert_eq!(c.len(), 1);
    assert!(store.claim_schedules(&specs, T0 + 10 * 60_000 + 6).unwrap().is_empty());
    assert_eq!(store.next_schedule_due_ms().unwrap(), Some(T0 + 11 * 60_000));
    // Run 1's late end is not the latest run's: nothing is written.
    let failure = jadpo_core::rules::Failure::new("fake.unavailable", FailureKind::Unavailable);
    assert!(!store.record_schedule("nightly", 1, T0 + 10 * 60_000 + 9, Some(&failure)).unwrap());
    assert!(store.record_schedule("nightly", 2, T0 + 10 * 60_000 + 9, Some(&failure)).unwrap());
}

fn a_delivery_keeps_why_it_ended(f: &dyn Fixture) {
    let store = f.open();
    store.emit(&(0..4).map(event).collect::<Vec<_>>(), T0).unwrap();
    let run = claim(&*store, T0, 3).run;
    let fail = |kind, code: &str| {
        let o = Outcome::fail(kind, code);
        let failure = o.failure().unwrap();
        (o, failure)
    };
    let (rejected, rejected_f) = fail(FailureKind::Rejected, "fake.rejected");
    let (unknown, unknown_f) = fail(FailureKind::OutcomeUnknown, "fake.outcome_unknown");
    let rec = |c: &jadpo_core::store::Claimed, outcome: Outcome, decision: Decision| Recorded {
        id: c.id,
        connection: c.connection.clone(),
        attempt: c.attempt,
        started_at_ms: c.claimed_at_ms,
        ended_at_ms: T0 + 1,
        outcome,
        decision,
    };
    store
        .record(
            &[
                rec(&run[0], Outcome::ok(), Decision::Succeeded),
                rec(
                    &run[1],
                    rejected,
                    Decision::Failed { failure: rejected_f, because: rules::FailedBecause::NotRetryable },
                ),
                rec(&run[2], unknown, Decision::Parked { failure: unknown_f }),
            ],
            &[],
            &NoRaise,
        )
        .unwrap();
    // The fourth is never tried within a one-minute window: given up at its claim.
    let budget = Budget { within_ms: 60_000, ..Budget::default() };
    assert_eq!(claim_with(&*store, T0 + 60_001, 10, budget).ended.len(), 1);
    let reasons: Vec<(DeliveryState, Option<String>)> =
        store.deliveries(&DeliveryFilter::default()).unwrap().into_iter().map(|d| (d.state, d.end_reason)).collect();
    assert_eq!(
        reasons,
        vec![
            (DeliveryState::Succeeded, Some("succeeded".into())),
            (DeliveryState::Failed, Some("not_retryable".into())),
            (DeliveryState::Parked, Some("outcome_unknown".into())),
            (DeliveryState::Failed, Some("past_window".into())),
        ]
    );
    // An operator's retry starts it over: no end yet.
    let parked = store.deliveries(&DeliveryFilter::default()).unwrap()[2].id;
    assert_eq!(store.retry(&[parked], T0 + 70_000).unwrap(), vec![RetryResult::Retried]);
    assert_eq!(store.delivery(parked).unwrap().unwrap().delivery.end_reason, None);
}

fn an_expired_lease_on_the_last_attempt_ends_attempts_used(f: &dyn Fixture) {
    let store = f.open();
    store.emit(&[event(1)], T0).unwrap();
    let budget = Budget { attempts: 1, ..Budget::default() };
    let c = claim_with(&*store, T0, 10, budget).run.remove(0);
    claim_with(&*store, T0 + 3_600_000, 10, budget);
    let DeliveryDetail { delivery: d, attempts: h } = store.delivery(c.id).unwrap().unwrap();
    assert_eq!(d.end_reason.as_deref(), Some("attempts_used"));
    assert_eq!(h.len(), 1, "the lost attempt is recorded once");
}

fn each_attempt_keeps_its_failure_reason(f: &dyn Fixture) {
    let store = f.open();
    store.emit(&[event(1)], T0).unwrap();
    let c = claim(&*store, T0, 10).run.remove(0);
    let outcome = match Outcome::fail(FailureKind::Unavailable, "transport.connect") {
        Outcome::Failed(call) => Outcome::Failed(call.with_reason("connection refused")),
        other => other,
    };
    let failure = outcome.failure().unwrap();
    assert_eq!(failure.reason.as_deref(), Some("connection refused"));
    let rec = Recorded {
        id: c.id,
        connection: c.connection.clone(),
        attempt: 1,
        started_at_ms: c.claimed_at_ms,
        ended_at_ms: T0 + 1,
        outcome,
        decision: Decision::Retry { due_at_ms: T0 + 5_000, failure },
    };
    store.record(&[rec], &[], &NoRaise).unwrap();
    let DeliveryDetail { delivery: d, attempts: h } = store.delivery(c.id).unwrap().unwrap();
    assert_eq!(h[0].reason.as_deref(), Some("connection refused"));
    assert_eq!(d.last_failure.unwrap().reason.as_deref(), Some("connection refused"));
    // The next claim keeps it on the record the core sees.
    let again = claim(&*store, T0 + 5_000, 10).run.remove(0);
    assert_eq!(again.record.last_failure.unwrap().reason.as_deref(), Some("connection refused"));
}

fn a_batch_is_claimed_in_due_order_and_recorded_row_by_row(f: &dyn Fixture) {
    let store = f.open();
    let events: Vec<NewEvent> = (0..300).map(event).collect();
    let ids = store.emit(&events, T0).unwrap();
    assert_eq!(ids.len(), 300);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "event ids follow the emit order");
    let first = claim(&*store, T0, 200).run;
    assert_eq!(first.len(), 200);
    let delivered: Vec<i64> = first.iter().map(|c| c.event_id).collect();
    assert_eq!(delivered, ids[..200], "the oldest due deliveries first, in order");
    let rest = claim(&*store, T0, 500).run;
    assert_eq!(rest.len(), 100);
    assert!(claim(&*store, T0, 500).run.is_empty());

    // One batch in reverse order, every third outcome naming an attempt its
    // delivery is not running: only the others are written, with their history.
    let batch: Vec<Recorded> = first
        .iter()
        .rev()
        .enumerate()
        .map(|(i, c)| {
            let attempt = if i % 3 == 0 { c.attempt + 1 } else { c.attempt };
            ok_record(c.id, attempt, c.claimed_at_ms, T0 + 10)
        })
        .collect();
    let expected: Vec<usize> = (0..batch.len()).filter(|i| i % 3 != 0).collect();
    assert_eq!(store.record(&batch, &[], &NoRaise).unwrap(), expected);
    for (i, r) in batch.iter().enumerate() {
        let DeliveryDetail { delivery: d, attempts: h } = store.delivery(r.id).unwrap().unwrap();
        if i % 3 == 0 {
            assert_eq!(d.state, DeliveryState::Running);
            assert!(h.is_empty());
        } else {
            assert_eq!(d.state, DeliveryState::Succeeded);
            assert_eq!(d.end_reason.as_deref(), Some("succeeded"));
            assert_eq!(h.len(), 1);
            assert_eq!(h[0].outcome, "succeeded");
        }
    }
    // Written again, the same batch changes nothing.
    assert!(store.record(&batch, &[], &NoRaise).unwrap().is_empty());
}

// Each test above, on every store.
fn a_count_that_cannot_be_read_is_an_error_naming_its_row_and_changes_nothing(f: &dyn Fixture) {
    let store = f.open();
    store.emit(&[event(1), event(2)], T0).unwrap();
    let first = store.deliveries(&DeliveryFilter::default()).unwrap()[0].id;
    for bad in [-1, i64::from(u32::MAX) + 1] {
        f.set_attempts_behind(first, bad);
        let expected = format!(
            "corrupt store row: delivery {first} has `{bad}` in `attempts`, which holds a count from 0 to 4294967295"
        );
        let claimed = try_claim(&*store, T0, 10, Budget::default()).map(|r| r.changed());
        assert_eq!(claimed.map_err(|e| e.to_string()), Err(expected.clone()), "a budget read as fresh");
        let listed = store.deliveries(&DeliveryFilter::default()).map(|l| l.len());
        assert_eq!(listed.map_err(|e| e.to_string()), Err(expected.clone()));
        let shown = store.delivery(first).map(|d| d.is_some());
        assert_eq!(shown.map_err(|e| e.to_string()), Err(expected.clone()));
        let retried = store.retry(&[first], T0).map(|r| r.len());
        assert_eq!(retried.map_err(|e| e.to_string()), Err(expected));
        assert_eq!(f.delivery_behind(first), ("pending".to_string(), bad), "left as it is");
        assert_eq!(f.delivery_behind(first + 1), ("pending".to_string(), 0), "the failed claim changed nothing");
    }
}

/// The claim a test makes with [`Store::record_then_claim`].
fn record_then_claim(store: &dyn Store, outcomes: &[Recorded], now: i64) -> Result<(Vec<usize>, Vec<i64>), StoreError> {
    let raised = vec![Vec::new(); outcomes.len()];
    let done = store.record_then_claim(
        outcomes,
        &raised,
        ClaimAt { now_ms: now, limit: 10 },
        &mut |c| {
            let d = rules::decide_at_claim(&c.record, &Budget::default(), now, c.handled, TIMEOUT_MS);
            breaker::decide_at_claim(d, &c.breaker, c.id, now)
        },
        &NoRaise,
    )?;
    Ok((done.written, done.claimed.run.iter().map(|c| c.id).collect()))
}

/// Outcomes written with the next claim: that claim finds what they freed (the
/// next delivery of a key whose head succeeded), and an outcome written once is
/// not written again.
fn outcomes_written_with_a_claim_free_their_key_for_it(f: &dyn Fixture) {
    use common::keyed_event;
    let store = f.open();
    store.emit(&[keyed_event(1, "a"), keyed_event(2, "a")], T0).unwrap();
    let head = claim(&*store, T0, 10);
    assert_eq!(head.run.len(), 1, "only the head of the key");
    let first = head.run[0].id;
    let done = ok_record(first, 1, T0, T0 + 5);
    let (written, run) = record_then_claim(&*store, std::slice::from_ref(&done), T0 + 10).unwrap();
    assert_eq!((written, run), (vec![0], vec![first + 1]), "written, and the key's next claimed");
    assert_eq!(f.delivery_behind(first), ("succeeded".to_string(), 1));
    let (written, run) = record_then_claim(&*store, &[done], T0 + 20).unwrap();
    assert_eq!((written, run), (vec![], vec![]), "the outcome is written once; the next runs");
    let DeliveryDetail { attempts, .. } = store.delivery(first).unwrap().unwrap();
    assert_eq!(attempts.len(), 1);
}

/// On SQLite the outcomes and the claim are one transaction: a claim that fails
/// (a row it reads is corrupt) leaves the outcomes unwritten, to be written again.
#[test]
fn on_sqlite_outcomes_and_the_claim_they_ride_with_commit_or_fail_together() {
    let f = SqliteFile::new();
    let store = f.open();
    assert!(store.one_writer());
    store.emit(&[event(1), event(2)], T0).unwrap();
    let first = claim(&*store, T0, 1).run[0].id;
    f.set_attempts_behind(first + 1, -1);
    let done = ok_record(first, 1, T0, T0 + 5);
    let failed = record_then_claim(&*store, std::slice::from_ref(&done), T0 + 10).map(|_| ());
    assert_eq!(
        failed.map_err(|e| e.to_string()),
        Err(format!(
            "corrupt store row: delivery {} has `-1` in `attempts`, which holds a count from 0 to 4294967295",
            first + 1
        ))
    );
    assert_eq!(f.delivery_behind(first), ("running".to_string(), 1), "the outcome was not written");
    assert_eq!(store.delivery(first).unwrap().unwrap().attempts.len(), 0, "nor its attempt");
    f.set_attempts_behind(first + 1, 0);
    let (written, run) = record_then_claim(&*store, &[done], T0 + 20).unwrap();
    assert_eq!((written, run), (vec![0], vec![first + 1]));
}

/// `status` counts every delivery by state, and by subscriber then state, each
/// in the order of its name.
fn status_counts_by_state_and_by_subscriber_in_name_order(f: &dyn Fixture) {
    use jadpo_core::store::NewDelivery;
    let store = f.open();
    let to = |sub: &str| NewDelivery { subscriber: sub.into(), connection: "c".into(), order_key: None };
    let events: Vec<NewEvent> =
        (0..3).map(|n| NewEvent { deliveries: vec![to("rec"), to("audit")], ..event(n) }).collect();
    store.emit(&events, T0).unwrap();
    let first = claim(&*store, T0, 2);
    let recs: Vec<_> = first.run.iter().map(|c| (c.id, c.subscriber.clone())).collect();
    assert_eq!(recs.len(), 2);
    store.record(&[ok_record(recs[0].0, 1, T0, T0 + 5)], &[], &NoRaise).unwrap();
    let s = store.status(T0 + 10).unwrap();
    let count = |state| s.states.iter().find(|(st, _)| *st == state).map(|(_, n)| *n);
    assert_eq!(
        (count(DeliveryState::Pending), count(DeliveryState::Running), count(DeliveryState::Succeeded)),
        (Some(4), Some(1), Some(1))
    );
    assert_eq!(count(DeliveryState::Failed), Some(0), "every state is listed");
    let (succeeded_sub, running_sub) = (recs[0].1.as_str(), recs[1].1.as_str());
    let of = |sub: &str| -> Vec<(DeliveryState, u64)> {
        let mut states = vec![(DeliveryState::Pending, 2)];
        if sub == running_sub {
            states.push((DeliveryState::Running, 1));
        }
        if sub == succeeded_sub {
            states.push((DeliveryState::Succeeded, 1));
        }
        states
    };
    assert_eq!(s.subscribers, vec![("audit".to_string(), of("audit")), ("rec".to_string(), of("rec"))]);
}

jadpo_test_support::on_every_store!(
    crate::common::fixture;
    status_counts_by_state_and_by_subscriber_in_name_order,
    outcomes_written_with_a_claim_free_their_key_for_it,
    a_count_that_cannot_be_read_is_an_error_naming_its_row_and_changes_nothing,
    emit_claim_and_record_a_success,
    a_retryable_failure_is_pending_again_with_its_failure_kept,
    an_expired_lease_is_taken_back_as_lease_expired_and_the_lost_worker_loses,
    an_expired_lease_on_the_last_attempt_fails_at_the_claim,
    an_expired_lease_on_the_last_attempt_ends_attempts_used,
    a_claim_after_the_window_gives_up_deadline_exceeded,
    operator_retry_gives_a_fresh_budget_and_keeps_history,
    two_handles_never_claim_one_delivery_twice,
    schedules_are_due_every_period_and_catch_up_once,
    a_delivery_keeps_why_it_ended,
    each_attempt_keeps_its_failure_reason,
    a_batch_is_claimed_in_due_order_and_recorded_row_by_row,
    one_keys_deliveries_run_one_at_a_time_in_event_order,
    a_connections_rate_spaces_its_calls_exactly,
    a_retry_after_holds_back_the_whole_connection,
);

#[test]
fn a_count_stored_as_another_type_is_an_error_naming_its_row() {
    let (_dir, path) = temp_db();
    let store = SqliteStore::open(&path).unwrap();
    store.emit(&[event(1)], T0).unwrap();
    // SQLite keeps a value of any type in any column.
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute("UPDATE jadpo_deliveries SET attempts = 'many' WHERE id = 1", []).unwrap();
    let err = store.deliveries(&DeliveryFilter::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "corrupt store row: delivery 1 has the text `many` in `attempts`, which holds a count from 0 to 4294967295"
    );
}

/// A folder made read-only for real: a small filesystem remounted read-only when
/// running as root (who ignores permissions), else permissions taken away.
/// `None` (with a message) when neither can be done here.
struct ReadOnlyDir {
    dir: tempfile::TempDir,
    mounted: bool,
}

impl ReadOnlyDir {
    /// A folder with a store of one event in it, then made read-only.
    fn with_store() -> Option<(ReadOnlyDir, std::path::PathBuf)> {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::process::Command::new("id").arg("-u").output().ok().is_some_and(|o| o.stdout == b"0\n");
        let mounted = root && mount(dir.path(), "size=4m");
        if root && !mounted {
            eprintln!("skipped: cannot mount a filesystem to make read-only here");
            return None;
        }
        let path = dir.path().join("outbox.db");
        let store = SqliteStore::open(&path).unwrap();
        store.emit(&[event(1)], T0).unwrap();
        drop(store);
        if mounted {
            assert!(remount(dir.path(), "remount,ro"), "remount read-only");
        } else {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
        }
        Some((ReadOnlyDir { dir, mounted }, path))
    }
}

fn mount(at: &std::path::Path, options: &str) -> bool {
    std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", options, "tmpfs"])
        .arg(at)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn remount(at: &std::path::Path, options: &str) -> bool {
    std::process::Command::new("mount").args(["-o", options]).arg(at).status().is_ok_and(|s| s.success())
}

impl Drop for ReadOnlyDir {
    fn drop(&mut self) {
        if self.mounted {
            let _ = std::process::Command::new("umount").arg(self.dir.path()).status();
        } else {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(self.dir.path(), std::fs::Permissions::from_mode(0o755));
        }
    }
}

#[test]
fn a_read_only_store_can_be_listed_and_refuses_writes_clearly() {
    let Some((_ro, path)) = ReadOnlyDir::with_store() else { return };
    let store = SqliteStore::open_with(&path, OpenOptions::read_only()).unwrap();
    assert_eq!(store.deliveries(&DeliveryFilter::default()).unwrap().len(), 1);
    assert_eq!(store.status(T0).unwrap().states[0], (DeliveryState::Pending, 1));
    assert!(store.breakers().unwrap().is_empty());
    let id = store.deliveries(&DeliveryFilter::default()).unwrap()[0].id;
    assert!(store.delivery(id).unwrap().is_some());
    // Writing is refused by name, not as an I/O error.
    let err = SqliteStore::open(&path).map(|_| ()).unwrap_err();
    assert_eq!(err.to_string(), format!("the store `{}` is read-only; no change was made", path.display()));
}

#[test]
fn a_reader_does_not_wait_on_a_writer_and_a_writer_past_the_wait_says_so() {
    let (_dir, path) = temp_db();
    SqliteStore::open(&path).unwrap().emit(&[event(1)], T0).unwrap();
    let locker = rusqlite::Connection::open(&path).unwrap();
    locker.execute_batch("BEGIN IMMEDIATE;").unwrap();
    let wait = Duration::from_secs(1);
    // A read-only handle opens and reads beside the writer, without waiting.
    let reader = SqliteStore::open_with(&path, OpenOptions { lock_wait: wait, ..OpenOptions::read_only() }).unwrap();
    assert_eq!(reader.deliveries(&DeliveryFilter::default()).unwrap().len(), 1);
    assert_eq!(reader.status(T0).unwrap().states[0], (DeliveryState::Pending, 1));
    // A writer waits, then gives up saying how long, having changed nothing.
    let writer = SqliteStore::open_with(&path, OpenOptions { lock_wait: wait, ..OpenOptions::read_write() }).unwrap();
    let err = writer.emit(&[event(2)], T0).unwrap_err();
    assert!(matches!(err, StoreError::Busy { waited_s: 1 }), "{err:?}");
    assert_eq!(err.to_string(), "the store stayed locked for 1s; no change was made");
    locker.execute_batch("ROLLBACK").unwrap();
    assert_eq!(reader.deliveries(&DeliveryFilter::default()).unwrap().len(), 1);
}

#[test]
fn opening_a_locked_new_store_past_the_wait_says_so() {
    let (_dir, path) = temp_db();
    // Another process is creating the store and holds its write lock.
    let locker = rusqlite::Connection::open(&path).unwrap();
    locker.execute_batch("PRAGMA journal_mode = WAL; BEGIN IMMEDIATE; CREATE TABLE half_made (x);").unwrap();
    let options = OpenOptions { lock_wait: Duration::from_secs(1), ..OpenOptions::read_write() };
    let err = SqliteStore::open_with(&path, options).unwrap_err();
    assert!(matches!(err, StoreError::Busy { .. }), "not taken for a foreign file: {err:?}");
    locker.execute_batch("ROLLBACK").unwrap();
    drop(locker);
    SqliteStore::open(&path).unwrap();
}

#[test]
fn ten_handles_creating_one_store_at_once_all_succeed() {
    let (_dir, path) = temp_db();
    let barrier = Barrier::new(10);
    let results: Vec<Result<Vec<i64>, StoreError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..10)
            .map(|i| {
                let (path, barrier) = (&path, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    SqliteStore::open(path)?.emit(&[event(i)], T0)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &results {
        assert!(r.is_ok(), "{r:?}");
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.deliveries(&DeliveryFilter::default()).unwrap().len(), 10);
}

#[test]
fn a_full_disk_is_reported_as_a_full_disk() {
    let dir = tempfile::tempdir().unwrap();
    if !mount(dir.path(), "size=256k") {
        eprintln!("skipped: cannot mount a small filesystem here (needs root)");
        return;
    }
    struct Unmount<'a>(&'a std::path::Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(dir.path());
    let store = SqliteStore::open(&dir.path().join("outbox.db")).unwrap();
    let big = NewEvent { payload: format!(r#"{{"pad":"{}"}}"#, "x".repeat(16 * 1024)), ..event(0) };
    let mut stored = 0;
    let err = loop {
        match store.emit(std::slice::from_ref(&big), T0) {
            Ok(_) => stored += 1,
            Err(e) => break e,
        }
        assert!(stored < 1_000, "the disk never filled");
    };
    assert!(matches!(err, StoreError::Full { .. }), "{err:?}");
    let path = dir.path().join("outbox.db");
    assert_eq!(err.to_string(), format!("the disk holding the store `{}` is full; no change was made", path.display()));
    // What was stored before is still there.
    assert_eq!(store.deliveries(&DeliveryFilter::default()).unwrap().len(), stored);
}

#[test]
fn postgres_ten_processes_starting_at_once_apply_each_migration_once() {
    let Some(db) = fixture::pg_database() else { return };
    let barrier = Barrier::new(10);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..10)
            .map(|i| {
                let (db, barrier) = (&db, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    PgStore::open(&db.url, OpenOptions::read_write())?.emit(&[event(i)], T0)
                })
            })
            .collect();
        for h in handles {
            let r = h.join().unwrap();
            assert!(r.is_ok(), "{r:?}");
        }
    });
    let mut c = ::postgres::Client::connect(&db.url, ::postgres::NoTls).unwrap();
    let applied: Vec<i64> = c
        .query("SELECT version FROM jadpo.schema_migrations ORDER BY version", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(applied, (1..=jadpo_store_postgres::schema::VERSION).collect::<Vec<_>>());
    assert_eq!(db.open().deliveries(&DeliveryFilter::default()).unwrap().len(), 10);
}

#[test]
fn postgres_a_newer_schema_is_refused_and_a_missing_one_is_not_created_by_a_reader() {
    let Some(db) = fixture::pg_database() else { return };
    let reader = PgStore::open(&db.url, OpenOptions::read_only()).map(|_| ()).unwrap_err();
    assert!(matches!(reader, StoreError::Missing { .. }), "{reader:?}");
    let mut c = ::postgres::Client::connect(&db.url, ::postgres::NoTls).unwrap();
    let schemas: i64 = c.query_one("SELECT count(*) FROM pg_namespace WHERE nspname = 'jadpo'", &[]).unwrap().get(0);
    assert_eq!(schemas, 0, "a reader creates nothing");
    drop(PgStore::open(&db.url, OpenOptions::read_write()).unwrap());
    c.execute("INSERT INTO jadpo.schema_migrations (version) VALUES (99)", &[]).unwrap();
    for options in [OpenOptions::read_write(), OpenOptions::read_only()] {
        let err = PgStore::open(&db.url, options).map(|_| ()).unwrap_err();
        assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err:?}");
    }
}

#[test]
fn postgres_a_read_only_database_is_read_and_refuses_writes_as_a_read_only_file_does() {
    let Some(db) = fixture::pg_database() else { return };
    db.open().emit(&[event(1)], T0).unwrap();
    let mut c = ::postgres::Client::connect(&db.url, ::postgres::NoTls).unwrap();
    c.batch_execute(
        "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_read_only = on', \
         current_database()); END $$",
    )
    .unwrap();
    let reader = PgStore::open(&db.url, OpenOptions::read_only()).unwrap();
    assert_eq!(reader.deliveries(&DeliveryFilter::default()).unwrap().len(), 1);
    assert_eq!(reader.status(T0).unwrap().states[0], (DeliveryState::Pending, 1));
    assert!(reader.breakers().unwrap().is_empty());
    let read_only = format!("the store `{}` is read-only; no change was made", db.url);
    let err = reader.emit(&[event(2)], T0).unwrap_err();
    assert!(matches!(err, StoreError::ReadOnly { .. }), "{err:?}");
    assert_eq!(err.to_string(), read_only);
    let err = PgStore::open(&db.url, OpenOptions::read_write()).map(|_| ()).unwrap_err();
    assert_eq!(err.to_string(), read_only, "opening to write, which migrates first");
}

#[test]
fn postgres_a_full_disk_is_reported_as_a_full_disk() {
    let Some(db) = fixture::pg_database() else { return };
    let store = db.open();
    store.emit(&[event(1)], T0).unwrap();
    // A disk cannot be filled here: a trigger answers as the server does when it
    // cannot extend a table's file (SQLSTATE 53100, `disk_full`).
    let mut c = ::postgres::Client::connect(&db.url, ::postgres::NoTls).unwrap();
    c.batch_execute(
        "CREATE FUNCTION jadpo.no_space() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
         RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$; \
         CREATE TRIGGER no_space BEFORE INSERT ON jadpo.deliveries \
         FOR EACH ROW EXECUTE FUNCTION jadpo.no_space();",
    )
    .unwrap();
    let err = store.emit(&[event(2)], T0).unwrap_err();
    assert!(matches!(err, StoreError::Full { .. }), "{err:?}");
    assert_eq!(err.to_string(), format!("the disk holding the store `{}` is full; no change was made", db.url));
    // No change was made: the event went with its delivery.
    assert_eq!(store.events(&Default::default()).unwrap().len(), 1);
}

#[test]
fn postgres_stores_in_two_schemas_of_one_database_are_apart() {
    let Some(db) = fixture::pg_database() else { return };
    let a = PgStore::open(&format!("{}?schema=team_a", db.url), OpenOptions::read_write()).unwrap();
    let b = PgStore::open(&format!("{}?schema=team_b", db.url), OpenOptions::read_write()).unwrap();
    a.emit(&[event(1), event(2)], T0).unwrap();
    b.emit(&[event(3)], T0).unwrap();
    assert_eq!(a.deliveries(&DeliveryFilter::default()).unwrap().len(), 2);
    assert_eq!(b.deliveries(&DeliveryFilter::default()).unwrap().len(), 1);
}

#[test]
fn postgres_an_unreachable_server_is_named_without_its_password() {
    let err = PgStore::open(
        "postgres://jadpo:s3cret@127.0.0.1:9/nothing?connect_timeout=1&sslmode=disable",
        OpenOptions { lock_wait: Duration::from_secs(1), ..OpenOptions::read_only() },
    )
    .map(|_| ())
    .unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("cannot reach the database `postgres://jadpo:***@127.0.0.1:9/nothing"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}
