//! Store tests on real SQLite files.

use crate::common;

use common::{T0, TIMEOUT_MS, claim, claim_with, event};
use jadpo_check::program::{Budget, DeliveryState, FailureKind};
use jadpo_runtime::rules::{self, ClaimDecision, Decision, Outcome};
use jadpo_runtime::store::{
    DeliveryFilter, NewEvent, Recorded, RetryResult, ScheduleSpec, SqliteStore, Store, StoreError,
};
use std::collections::HashSet;
use std::sync::{Arc, Barrier, Mutex};
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
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("outbox.db");
    (dir, path)
}

#[test]
fn emit_claim_and_record_a_success() {
    let (_dir, path) = temp_db();
    let store = SqliteStore::open(&path).unwrap();
    let ids = store.emit(&[event(1), event(2)], T0).unwrap();
    assert_eq!(ids.len(), 2);
    let all = store.deliveries(&DeliveryFilter::default()).unwrap();
    assert_eq!(all.len(), 2);
    assert!(all.iter().all(|d| d.state == DeliveryState::Pending && d.due_at_ms == Some(T0)));

    // Not due before emitted_at.
    assert!(claim(&store, T0 - 1, 10).run.is_empty());
    let r = claim(&store, T0, 10);
    assert_eq!(r.run.len(), 2);
    assert!(r.run.iter().all(|c| c.attempt == 1 && c.event == "Paid"));
    // A second claim finds nothing: both are running under a lease.
    assert!(claim(&store, T0 + 5, 10).run.is_empty());

    let c = &r.run[0];
    assert_eq!(store.record(&[ok_record(c.id, 1, c.claimed_at_ms, T0 + 7)]).unwrap(), vec![0]);
    let (d, history) = store.delivery(c.id).unwrap().unwrap();
    assert_eq!(d.state, DeliveryState::Succeeded);
    assert_eq!(d.attempts, 1);
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].outcome, "succeeded");
    assert_eq!(history[0].duration_ms, 7);
    // Recording the same attempt again changes nothing (it is no longer running).
    assert!(store.record(&[ok_record(c.id, 1, c.claimed_at_ms, T0 + 8)]).unwrap().is_empty());
}

#[test]
fn a_retryable_failure_is_pending_again_with_its_failure_kept() {
    let store = SqliteStore::open_in_memory().unwrap();
    store.emit(&[event(1)], T0).unwrap();
    let c = claim(&store, T0, 10).run.remove(0);
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
    assert_eq!(store.record(&[rec]).unwrap(), vec![0]);
    let (d, h) = store.delivery(c.id).unwrap().unwrap();
    assert_eq!(d.state, DeliveryState::Pending);
    assert_eq!(d.due_at_ms, Some(T0 + 5_000));
    assert_eq!(d.last_failure.unwrap().kind, FailureKind::Unavailable);
    assert_eq!(h[0].kind.as_deref(), Some("unavailable"));
    assert_eq!(store.next_due_ms().unwrap(), Some(T0 + 5_000));
    assert!(claim(&store, T0 + 4_999, 10).run.is_empty());
    let again = claim(&store, T0 + 5_000, 10).run;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempt, 2);
}

#[test]
fn an_expired_lease_is_taken_back_as_lease_expired_and_the_lost_worker_loses() {
    let (_dir, path) = temp_db();
    let store = SqliteStore::open(&path).unwrap();
    store.emit(&[event(1)], T0).unwrap();
    let first = claim(&store, T0, 10).run.remove(0);
    let lease_end = T0 + TIMEOUT_MS as i64 + rules::LEASE_GRACE_MS as i64;
    assert_eq!(first.record.lease_until_ms, Some(lease_end));
    assert_eq!(store.next_due_ms().unwrap(), Some(lease_end));
    assert!(claim(&store, lease_end - 1, 10).run.is_empty());

    let second = claim(&store, lease_end, 10).run.remove(0);
    assert_eq!(second.attempt, 2);
    let (d, h) = store.delivery(first.id).unwrap().unwrap();
    assert_eq!(d.state, DeliveryState::Running);
    assert_eq!(d.last_failure.unwrap().kind, FailureKind::LeaseExpired);
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].attempt, 1);
    assert_eq!(h[0].kind.as_deref(), Some("lease_expired"));

    // The lost worker's late answer is not written: the new claim owns it. Of a
    // batch holding both, only the new claim's is reported written.
    let late = ok_record(first.id, 1, first.claimed_at_ms, lease_end + 1);
    let current = ok_record(second.id, 2, second.claimed_at_ms, lease_end + 2);
    assert_eq!(store.record(&[late, current]).unwrap(), vec![1]);
    let (d, h) = store.delivery(first.id).unwrap().unwrap();
    assert_eq!(d.state, DeliveryState::Succeeded);
    assert_eq!(h.len(), 2);
}

#[test]
fn an_expired_lease_on_the_last_attempt_fails_at_the_claim() {
    let store = SqliteStore::open_in_memory().unwrap();
    store.emit(&[event(1)], T0).unwrap();
    let budget = Budget { attempts: 1, ..Budget::default() };
    let c = claim_with(&store, T0, 10, budget).run.remove(0);
    let r = claim_with(&store, T0 + 3_600_000, 10, budget);
    assert!(r.run.is_empty());
    assert_eq!(r.ended.len(), 1);
    assert!(matches!(r.ended[0].2, ClaimDecision::GiveUp { .. }));
    let (d, h) = store.delivery(c.id).unwrap().unwrap();
    assert_eq!(d.state, DeliveryState::Failed);
    assert_eq!(d.last_failure.unwrap().kind, FailureKind::LeaseExpired);
    assert_eq!(h.len(), 1);
}

#[test]
fn a_claim_after_the_window_gives_up_deadline_exceeded() {
    let store = SqliteStore::open_in_memory().unwrap();
    store.emit(&[event(1)], T0).unwrap();
    let budget = Budget { within_ms: 60_000, ..Budget::default() };
    let r = claim_with(&store, T0 + 60_001, 10, budget);
    assert_eq!(r.ended.len(), 1);
    let d = &store.deliveries(&DeliveryFilter::default()).unwrap()[0];
    assert_eq!(d.state, DeliveryState::Failed);
    assert_eq!(d.attempts, 0);
    assert_eq!(d.last_failure.as_ref().unwrap().kind, FailureKind::DeadlineExceeded);
}

#[test]
fn operator_retry_gives_a_fresh_budget_and_keeps_history() {
    let store = SqliteStore::open_in_memory().unwrap();
    store.emit(&[event(1)], T0).unwrap();
    let c = claim(&store, T0, 10).run.remove(0);
    let outcome = Outcome::fail(FailureKind::Rejected, "fake.rejected");
    let failure = outcome.failure().unwrap();
    store
        .record(&[Recorded {
            id: c.id,
            connection: c.connection.clone(),
            attempt: 1,
            started_at_ms: T0,
            ended_at_ms: T0 + 1,
            outcome,
            decision: Decision::Failed { failure, because: rules::FailedBecause::NotRetryable },
        }])
        .unwrap();
    let later = T0 + 86_400_000 * 3;
    assert_eq!(store.retry(&[c.id, 999], later).unwrap(), vec![RetryResult::Retried, RetryResult::NotFound]);
    assert_eq!(store.retry(&[c.id], later).unwrap(), vec![RetryResult::NotRetryable(DeliveryState::Pending)]);
    let d = &store.deliveries(&DeliveryFilter::default()).unwrap()[0];
    assert_eq!((d.state, d.attempts, d.due_at_ms, d.budget_start_ms), (DeliveryState::Pending, 0, Some(later), later));
    let again = claim(&store, later, 10).run.remove(0);
    assert_eq!(again.attempt, 1);
    store.record(&[ok_record(c.id, 1, again.claimed_at_ms, later + 1)]).unwrap();
    let (d, h) = store.delivery(c.id).unwrap().unwrap();
    assert_eq!(d.state, DeliveryState::Succeeded);
    assert_eq!(h.len(), 2, "both runs' attempts are kept");
    assert_eq!(h[0].outcome, "failed");
    assert_eq!(h[1].outcome, "succeeded");
}

#[test]
fn two_stores_on_one_file_never_claim_one_delivery_twice() {
    let (_dir, path) = temp_db();
    let setup = SqliteStore::open(&path).unwrap();
    let events: Vec<NewEvent> = (0..3_000).map(event).collect();
    setup.emit(&events, T0).unwrap();
    drop(setup);

    let seen = Arc::new(Mutex::new(Vec::<i64>::new()));
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (path, seen, barrier) = (path.clone(), seen.clone(), barrier.clone());
            std::thread::spawn(move || {
                let store = SqliteStore::open(&path).unwrap();
                barrier.wait();
                loop {
                    let r = claim(&store, T0 + 10, 37);
                    if r.run.is_empty() {
                        break;
                    }
                    let recs: Vec<Recorded> =
                        r.run.iter().map(|c| ok_record(c.id, c.attempt, c.claimed_at_ms, T0 + 11)).collect();
                    assert_eq!(store.record(&recs).unwrap(), (0..recs.len()).collect::<Vec<_>>());
                    seen.lock().unwrap().extend(r.run.iter().map(|c| c.id));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let seen = seen.lock().unwrap();
    let unique: HashSet<_> = seen.iter().collect();
    assert_eq!(seen.len(), 3_000, "every delivery claimed");
    assert_eq!(unique.len(), 3_000, "none claimed twice");
    let store = SqliteStore::open(&path).unwrap();
    let s = store.status(T0).unwrap();
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
    assert_eq!(app, jadpo_runtime::store::APPLICATION_ID);
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
    locker.execute_batch("BEGIN IMMEDIATE; INSERT INTO jadpo_handled VALUES (-1, 0);").unwrap();
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

#[test]
fn schedules_are_due_every_period_and_catch_up_once() {
    let (_dir, path) = temp_db();
    let store = SqliteStore::open(&path).unwrap();
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
    let store = SqliteStore::open(&path).unwrap();
    store.sync_schedules(&specs, T0 + 70_000).unwrap();
    assert_eq!(store.next_schedule_due_ms().unwrap(), Some(T0 + 120_000));
    // Down for ten periods: one run, then the next on its grid.
    let c = store.claim_schedules(&specs, T0 + 10 * 60_000 + 5).unwrap();
    assert_eq!(c.len(), 1);
    assert!(store.claim_schedules(&specs, T0 + 10 * 60_000 + 6).unwrap().is_empty());
    assert_eq!(store.next_schedule_due_ms().unwrap(), Some(T0 + 11 * 60_000));
    let f = jadpo_runtime::rules::Failure::new("fake.unavailable", FailureKind::Unavailable);
    store.record_schedule("nightly", T0 + 10 * 60_000 + 9, Some(&f)).unwrap();
}
