//! Operators' pauses in the store suite: a paused connection's deliveries are
//! held at their claims with their budgets untouched, no probe goes, another
//! handle (another process) sees the pause at its next claim, and a resume or the
//! pause's end releases them due at once. Run on every store.

use crate::common;
use common::fixture::{self, Fixture};
use jadpo_core::store::{Actions, NoRaise};

use common::{T0, TIMEOUT_MS, claim, event, record_all};
use jadpo_check::program::{BreakerState, Budget, DeliveryState, FailureKind};
use jadpo_core::rules::breaker::Pause;
use jadpo_core::rules::{self, Outcome};
use jadpo_core::store::{BreakerAction, ClaimReport, DeliveryFilter, DeliveryView, PauseAction, Store};

const HOUR: i64 = 3_600_000;

fn all(store: &dyn Store) -> Vec<DeliveryView> {
    store.deliveries(&DeliveryFilter::default()).expect("list")
}

fn lease(now: i64) -> impl Fn(&str) -> i64 {
    move |_| rules::lease_until_ms(now, TIMEOUT_MS)
}

fn by_ops(at_ms: i64, until_ms: Option<i64>) -> Pause {
    Pause { at_ms, until_ms, by: "ops".into(), reason: Some("provider maintenance".into()) }
}

/// Paused for an hour, every delivery (those retrying, those never tried) is
/// held at its claim, keeps its attempts, and the sweep wakes no probe; the
/// resume releases them due at once, each window moved on by the time held.
fn a_paused_connection_holds_everything_until_resumed(f: &dyn Fixture) {
    let store = f.open();
    let store = &*store;
    store.emit(&(0..6).map(event).collect::<Vec<_>>(), T0).expect("emit");
    let r = claim(store, T0, 2);
    record_all(store, &r, &Outcome::fail(FailureKind::Unavailable, "fake.unavailable"), T0 + 10);

    let paused = store.pause_connection("c", &by_ops(T0 + 20, None)).expect("pause");
    assert_eq!(paused.state, BreakerState::Closed, "the breaker's own state is kept");
    // Another process sees the pause at its next claim.
    let other = f.open();
    let at = T0 + HOUR / 2;
    let r = claim(&*other, at, 10);
    assert_eq!((r.run.len(), r.held.len()), (0, 6), "every due delivery is held: {r:?}");
    let held = all(store);
    assert!(held.iter().all(|d| d.state == DeliveryState::Held && d.held_since_ms == Some(at)), "{held:?}");
    let attempts: Vec<u32> = held.iter().map(|d| d.attempts).collect();
    assert_eq!(attempts, vec![1, 1, 0, 0, 0, 0], "holding spends no attempt");
    // No probe, however long it lasts.
    let sweep = store.sweep_breakers(at + 10 * HOUR, &lease(at + 10 * HOUR), &NoRaise).expect("sweep");
    assert_eq!((sweep.woken.len(), sweep.released), (0, 0));
    assert_eq!(store.next_sweep_ms(at).expect("next"), None, "nothing to do before a resume");
    let listed = store.breakers().expect("breakers");
    assert_eq!(listed[0].row.pause.as_ref().map(|p| p.by.as_str()), Some("ops"));
    assert_eq!(listed[0].held, 6);
    assert_eq!(store.status(at).expect("status").breakers_paused, 1);

    let resumed_at = at + HOUR;
    let report = store.resume_connection("c", "ops", Some("done"), resumed_at).expect("resume");
    assert_eq!(report.released, 6);
    assert!(report.was.and_then(|w| w.pause).is_some());
    let released = all(store);
    assert!(
        released.iter().all(|d| d.state == DeliveryState::Pending
            && d.due_at_ms == Some(resumed_at)
            && d.held_ms == HOUR
            && d.budget_start_ms == T0),
        "due at once, the hour held moving each window on: {released:?}"
    );
    assert_eq!(store.breakers().expect("breakers")[0].row.pause, None);
    assert_eq!(store.status(resumed_at).expect("status").breakers_paused, 0);
    // They run now, each with its next attempt.
    let r = claim(store, resumed_at, 10);
    let mut next: Vec<u32> = r.run.iter().map(|c| c.attempt).collect();
    next.sort_unstable();
    assert_eq!(next, vec![1, 1, 1, 1, 2, 2]);
}

/// Deliveries held at different times, some held before: one resume releases
/// each with its own time held added to what it had.
fn a_resume_counts_each_delivery_its_own_time_held(f: &dyn Fixture) {
    let store = f.open();
    let store = &*store;
    store.emit(&(0..6).map(event).collect::<Vec<_>>(), T0).expect("emit");
    store.pause_connection("c", &by_ops(T0, None)).expect("pause");
    assert_eq!(claim(store, T0 + 1_000, 2).held.len(), 2);
    assert_eq!(claim(store, T0 + 5_000, 10).held.len(), 4);
    store.resume_connection("c", "ops", None, T0 + 10_000).expect("resume");
    // Two of them held once more, from a later time, and released again.
    store.pause_connection("c", &by_ops(T0 + 20_000, None)).expect("pause");
    assert_eq!(claim(store, T0 + 20_000, 2).held.len(), 2);
    let report = store.resume_connection("c", "ops", None, T0 + 20_500).expect("resume");
    assert_eq!(report.released, 2);
    let rows = all(store);
    assert!(rows.iter().all(|d| d.state == DeliveryState::Pending));
    let mut held: Vec<i64> = rows.iter().map(|d| d.held_ms).collect();
    held.sort_unstable();
    assert_eq!(
        held,
        vec![5_000, 5_000, 5_000, 5_000, 9_500, 9_500],
        "held from T0 + 1s: 9s, then 0.5s more; from T0 + 5s: 5s"
    );
}

/// A pause with an end: held until then, and the sweep at its end ends it and
/// releases what it held (the breaker was closed: it stays closed).
fn a_pause_for_a_while_ends_by_itself(f: &dyn Fixture) {
    let store = f.open();
    let store = &*store;
    store.emit(&(0..3).map(event).collect::<Vec<_>>(), T0).expect("emit");
    let until = T0 + 2 * HOUR;
    store.pause_connection("c", &by_ops(T0, Some(until))).expect("pause");
    assert_eq!(claim(store, T0 + 1, 10).held.len(), 3);
    assert_eq!(store.next_sweep_ms(T0 + 1).expect("next"), Some(until));
    assert_eq!(store.sweep_breakers(until - 1, &lease(until - 1), &NoRaise).expect("sweep").released, 0);
    let sweep = store.sweep_breakers(until, &lease(until), &NoRaise).expect("sweep");
    assert_eq!(sweep.released, 3);
    let row = &store.breakers().expect("breakers")[0].row;
    assert_eq!((row.state, row.pause.as_ref()), (BreakerState::Closed, None));
    assert!(all(store).iter().all(|d| d.state == DeliveryState::Pending && d.held_ms == 2 * HOUR - 1));
    assert_eq!(claim(store, until, 10).run.len(), 3);
}

/// An open breaker paused sends no probe; an answer from a delivery already
/// running closes the breaker but releases nothing while paused; the resume
/// releases everything.
fn an_open_breaker_paused_probes_nothing_and_an_answer_releases_nothing(f: &dyn Fixture) {
    let store = f.open();
    let store = &*store;
    store.emit(&(0..10).map(event).collect::<Vec<_>>(), T0).expect("emit");
    let mut r = claim(store, T0, 6);
    assert_eq!(r.run.len(), 6);
    let still_running = ClaimReport { run: r.run.split_off(5), ..ClaimReport::default() };
    record_all(store, &r, &Outcome::fail(FailureKind::Unavailable, "fake.unavailable"), T0);
    assert_eq!(store.breakers().expect("breakers")[0].row.state, BreakerState::Open);
    store.pause_connection("c", &by_ops(T0 + 2, None)).expect("pause");
    assert_eq!(claim(store, T0 + 500, 20).held.len(), 4, "the four never tried");
    // Long past the breaker's own pause: still no probe.
    let later = T0 + HOUR;
    let sweep = store.sweep_breakers(later, &lease(later), &NoRaise).expect("sweep");
    assert_eq!((sweep.woken.len(), sweep.released), (0, 0));
    // The delivery running all along answers: the breaker closes, nothing is let go.
    record_all(store, &still_running, &Outcome::ok(), later);
    let row = &store.breakers().expect("breakers")[0].row;
    assert_eq!((row.state, row.pause.is_some()), (BreakerState::Closed, true));
    assert_eq!(store.sweep_breakers(later, &lease(later), &NoRaise).expect("sweep").released, 0);
    let r = claim(store, later + 1, 20);
    assert_eq!((r.run.len(), r.held.len()), (0, 5), "the five retrying are held too");
    let report = store.resume_connection("c", "ops", None, later + 2).expect("resume");
    assert_eq!(report.released, 9);
    assert_eq!(claim(store, later + 2, 20).run.len(), 9);
}

/// A connection no delivery names can be paused (its row is made), and a
/// resume of one with no row says so.
fn a_connection_never_used_can_be_paused(f: &dyn Fixture) {
    let store = f.open();
    let store = &*store;
    assert!(!store.knows_connection("c").expect("knows"));
    assert_eq!(store.resume_connection("c", "ops", None, T0).expect("resume").was, None);
    store.pause_connection("c", &by_ops(T0, None)).expect("pause");
    assert!(store.knows_connection("c").expect("knows"));
    store.emit(&[event(1)], T0 + 1).expect("emit");
    assert_eq!(claim(store, T0 + 1, 10).held.len(), 1);
}

/// A probe decided from a row read before a pause loses: its guarded statement
/// sees the pause, and the delivery is held instead. (On SQLite the claim's
/// transaction keeps the pause waiting, so the two cannot interleave.)
fn a_probe_decided_before_a_pause_is_held(f: &dyn Fixture) {
    let store = f.open();
    let store = &*store;
    store.emit(&(0..6).map(event).collect::<Vec<_>>(), T0).expect("emit");
    let r = claim(store, T0, 5);
    record_all(store, &r, &Outcome::fail(FailureKind::Unavailable, "fake.unavailable"), T0);
    let after_pause = T0 + 2 * 60_000;
    let pauser = f.open();
    let mut decide = |c: &jadpo_core::store::ClaimCandidate| {
        // The pause lands between this claim's read and its write.
        if c.id == 6 {
            pauser.pause_connection("c", &by_ops(after_pause, None)).expect("pause");
        }
        let d = rules::decide_at_claim(&c.record, &Budget::default(), after_pause, c.handled, TIMEOUT_MS);
        rules::breaker::decide_at_claim(d, &c.breaker, c.id, after_pause)
    };
    let report = store.claim(after_pause, 10, &mut decide, &NoRaise);
    let report = report.expect("claim");
    assert_eq!(report.run.len(), 0, "no probe once paused: {report:?}");
    assert!(!report.held.is_empty(), "{report:?}");
    assert!(store.breakers().expect("breakers")[0].row.pause.is_some());
}

/// Every pause, resume and end of a pause is kept with who, when and why, and
/// listed oldest first, all of them or one connection's.
fn the_history_lists_every_pause_resume_and_end(f: &dyn Fixture) {
    let store = f.open();
    let store = &*store;
    assert_eq!(store.breaker_history(None).expect("history"), vec![]);
    store.pause_connection("c", &by_ops(T0, Some(T0 + HOUR))).expect("pause");
    store
        .pause_connection("spare", &Pause { by: "alice".into(), reason: None, ..by_ops(T0 + 1, None) })
        .expect("pause");
    store.sweep_breakers(T0 + HOUR, &lease(T0 + HOUR), &NoRaise).expect("the pause of `c` ends");
    store.resume_connection("spare", "bob", Some("done"), T0 + HOUR + 5).expect("resume");
    let action = |connection: &str, action, at_ms, by: &str, reason: Option<&str>, until_ms| BreakerAction {
        connection: connection.into(),
        action,
        at_ms,
        by: by.into(),
        reason: reason.map(String::from),
        until_ms,
    };
    let c = vec![
        action("c", PauseAction::Pause, T0, "ops", Some("provider maintenance"), Some(T0 + HOUR)),
        action("c", PauseAction::Ended, T0 + HOUR, "ops", None, None),
    ];
    let spare = vec![
        action("spare", PauseAction::Pause, T0 + 1, "alice", None, None),
        action("spare", PauseAction::Resume, T0 + HOUR + 5, "bob", Some("done"), None),
    ];
    assert_eq!(store.breaker_history(Some("c")).expect("history"), c);
    assert_eq!(store.breaker_history(Some("spare")).expect("history"), spare);
    assert_eq!(
        store.breaker_history(None).expect("history"),
        vec![c[0].clone(), spare[0].clone(), c[1].clone(), spare[1].clone()]
    );
    assert_eq!(store.breaker_history(Some("other")).expect("history"), vec![]);
    // Another handle (another process) reads the same.
    assert_eq!(f.open().breaker_history(Some("c")).expect("history"), c);
}

// Each test above, on every store.
jadpo_test_support::on_every_store!(
    crate::common::fixture;
    the_history_lists_every_pause_resume_and_end,
    a_paused_connection_holds_everything_until_resumed,
    a_resume_counts_each_delivery_its_own_time_held,
    a_pause_for_a_while_ends_by_itself,
    an_open_breaker_paused_probes_nothing_and_an_answer_releases_nothing,
    a_connection_never_used_can_be_paused,
);

/// Only PostgreSQL lets the pause land between a claim's read and its write.
#[test]
fn a_probe_decided_before_a_pause_is_held_on_postgres() {
    if let Some(f) = fixture::postgres() {
        a_probe_decided_before_a_pause_is_held(&*f);
    }
}
