//! Breakers in the store suite: two handles on one store race to open, alert,
//! probe and release; every change is one conditional statement, so each happens
//! once. Run on every store, as the rest of the suite.

use crate::common;
use common::fixture::Fixture;
use jadpo_core::store::{Actions, NoRaise};

use common::{T0, TIMEOUT_MS, claim, event, record_all};
use jadpo_check::program::{BreakerState, DeliveryState, FailureKind};
use jadpo_core::rules::{self, Outcome};
use jadpo_core::store::{DeliveryFilter, NewEvent, Store};
use std::sync::Barrier;

fn count(store: &dyn Store, state: DeliveryState) -> usize {
    store.deliveries(&DeliveryFilter { state: Some(state), ..Default::default() }).expect("list").len()
}

fn lease(now: i64) -> impl Fn(&str) -> i64 {
    move |_| rules::lease_until_ms(now, TIMEOUT_MS)
}

/// Run `f` on two handles of one store at once; returns both results.
fn race<T: Send>(fixture: &dyn Fixture, f: impl Fn(&dyn Store) -> T + Sync) -> Vec<T> {
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let store = fixture.open();
                    barrier.wait();
                    f(&*store)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a racer")).collect()
    })
}

fn two_processes_race_to_open_alert_probe_and_release(f: &dyn Fixture) {
    let setup = f.open();
    let setup = &*setup;
    let events: Vec<NewEvent> = (0..200).map(event).collect();
    setup.emit(&events, T0).expect("emit");

    // Open: both claim in small batches and every call finds `c` unavailable.
    let unavailable = Outcome::fail(FailureKind::Unavailable, "fake.unavailable");
    let attempts = race(f, |store| {
        let mut ran = 0;
        loop {
            let r = claim(store, T0, 3);
            if r.changed() == 0 {
                return ran;
            }
            ran += r.run.len();
            record_all(store, &r, &unavailable, T0);
        }
    });
    let ran: usize = attempts.iter().sum();
    // Five open it; a batch already claimed when it opened may finish (at most
    // two batches of three were in flight).
    assert!((5..=10).contains(&ran), "{ran} attempts");
    assert_eq!(count(setup, DeliveryState::Held), 200 - ran);
    assert_eq!(count(setup, DeliveryState::Pending), ran);
    let b = &setup.breakers().expect("breakers")[0];
    assert_eq!((b.row.state, b.row.alerts, b.held), (BreakerState::Open, 0, (200 - ran) as u64));

    // The alert: both sweep, one raises it.
    let sweeps = race(f, |store| store.sweep_breakers(T0 + 1, &lease(T0 + 1), &NoRaise).expect("sweep"));
    let alerts: Vec<_> = sweeps.iter().flat_map(|s| s.alerts.clone()).collect();
    assert_eq!(alerts.len(), 1, "{sweeps:?}");
    assert_eq!(alerts[0].connection, "c");
    assert_eq!(alerts[0].since_ms, T0);
    assert!(sweeps.iter().all(|s| s.woken.is_empty()), "no probe during the pause");

    // After the pause: both sweep, one wakes the longest-held to probe; both
    // claim, only that one runs; the rest stay held.
    let after = T0 + 60_000;
    let sweeps = race(f, move |store| store.sweep_breakers(after, &lease(after), &NoRaise).expect("sweep"));
    let woken: Vec<i64> = sweeps.iter().flat_map(|s| s.woken.clone()).collect();
    assert_eq!(woken.len(), 1, "one probe: {sweeps:?}");
    assert!(sweeps.iter().all(|s| s.alerts.is_empty()), "no second alert");
    let claims = race(f, move |store| claim(store, after, 50));
    let probes: Vec<i64> = claims.iter().flat_map(|r| r.run.iter().map(|c| c.id)).collect();
    // The retries of the first attempts are due by now too: held at their claims.
    assert_eq!(probes, woken, "only the woken delivery runs: {claims:?}");
    assert_eq!(setup.breakers().expect("breakers")[0].row.state, BreakerState::Probing);

    // The probe is answered: the breaker closes and releases every held delivery.
    let probe = claims.into_iter().find(|r| !r.run.is_empty()).expect("the probe's claim");
    record_all(setup, &probe, &Outcome::ok(), after + 5);
    assert_eq!(count(setup, DeliveryState::Held), 0, "nothing left held after a close");
    assert_eq!(count(setup, DeliveryState::Succeeded), 1);
    let b = &setup.breakers().expect("breakers")[0];
    assert_eq!((b.row.state, b.row.alerts, b.row.failures_in_a_row, b.held), (BreakerState::Closed, 1, 0, 0));
    // Released deliveries are due at once, their held time moving their window on.
    let released = setup.deliveries(&DeliveryFilter::default()).expect("list");
    assert!(released.iter().filter(|d| d.state == DeliveryState::Pending).all(|d| d.due_at_ms == Some(after + 5)));
    assert!(
        released.iter().filter(|d| d.attempts == 0).all(|d| d.held_ms == after + 5 - T0 && d.held_since_ms.is_none())
    );
    let r = claim(setup, after + 5, 500);
    assert_eq!(r.run.len(), 199, "every released delivery runs");
    assert!(r.held.is_empty());
}

fn a_delivery_running_when_the_breaker_opened_closes_it_with_its_answer(f: &dyn Fixture) {
    let store = f.open();
    let store = &*store;
    store.emit(&(0..6).map(event).collect::<Vec<_>>(), T0).expect("emit");
    let late = claim(store, T0, 1);
    let first = claim(store, T0, 5);
    record_all(store, &first, &Outcome::fail(FailureKind::Unavailable, "fake.unavailable"), T0 + 1);
    assert_eq!(store.breakers().expect("breakers")[0].row.state, BreakerState::Open);
    record_all(store, &late, &Outcome::ok(), T0 + 2);
    let b = &store.breakers().expect("breakers")[0];
    assert_eq!(b.row.state, BreakerState::Closed);
}

fn a_lost_probe_is_lost_when_its_lease_ends(f: &dyn Fixture) {
    let store = f.open();
    let store = &*store;
    store.emit(&(0..7).map(event).collect::<Vec<_>>(), T0).expect("emit");
    let first = claim(store, T0, 5);
    record_all(store, &first, &Outcome::fail(FailureKind::Unavailable, "fake.unavailable"), T0);
    assert_eq!(claim(store, T0, 10).held.len(), 2);
    let after = T0 + 60_000;
    let sweep = store.sweep_breakers(after, &lease(after), &NoRaise).expect("sweep");
    let probe = claim(store, after, 10);
    assert_eq!(probe.run.iter().map(|c| c.id).collect::<Vec<_>>(), sweep.woken);
    // Its worker dies: nothing is recorded. At its lease's end the probe is lost,
    // and the sweep wakes the next held delivery; the lost one, reclaimed, is held.
    let lease_end = rules::lease_until_ms(after, TIMEOUT_MS);
    assert!(store.sweep_breakers(lease_end - 1, &lease(lease_end - 1), &NoRaise).expect("sweep").woken.is_empty());
    let sweep = store.sweep_breakers(lease_end, &lease(lease_end), &NoRaise).expect("sweep");
    assert_eq!(sweep.woken.len(), 1);
    assert_ne!(sweep.woken, probe.run.iter().map(|c| c.id).collect::<Vec<_>>());
    assert!(store.next_sweep_ms(lease_end).expect("next").is_some());
}

/// A release can race a hold: a delivery held just after its breaker closed stays
/// held until the tick's sweep finds its breaker closed and releases it.
fn the_sweep_releases_deliveries_a_closed_breaker_still_holds(f: &dyn Fixture) {
    let store = f.open();
    let store = &*store;
    store.emit(&(0..10).map(event).collect::<Vec<_>>(), T0).expect("emit");
    let unavailable = Outcome::fail(FailureKind::Unavailable, "fake.unavailable");
    let r = claim(store, T0, 5);
    record_all(store, &r, &unavailable, T0);
    let r = claim(store, T0, 10);
    assert_eq!((r.run.len(), r.held.len()), (0, 5), "open: the rest are held at their claims");

    // The breaker closes in another process, whose release ran before these holds
    // were written: the row says closed and five deliveries are still held.
    f.close_breaker_behind("c");
    assert_eq!(count(store, DeliveryState::Held), 5);

    let now = T0 + 2_000;
    let sweep = store.sweep_breakers(now, &lease(now), &NoRaise).expect("sweep");
    assert_eq!(sweep.released, 5);
    assert_eq!(count(store, DeliveryState::Held), 0);
    let list = store.deliveries(&DeliveryFilter::default()).expect("list");
    let released: Vec<_> = list.iter().filter(|d| d.attempts == 0).collect();
    assert_eq!(released.len(), 5);
    // Due at once, their time held moving their window on.
    assert!(released.iter().all(|d| d.state == DeliveryState::Pending && d.due_at_ms == Some(now)), "{released:?}");
    assert!(released.iter().all(|d| d.held_ms == 2_000 && d.held_since_ms.is_none()), "{released:?}");
    // A second sweep has nothing left to release.
    assert_eq!(store.sweep_breakers(now, &lease(now), &NoRaise).expect("sweep").released, 0);
}

/// The alert written at the first tick after the breaker opens counts the
/// deliveries the outage holds: none is held yet, but every due one will be.
fn the_alert_counts_what_the_outage_holds(f: &dyn Fixture) {
    let store = f.open();
    let store = &*store;
    store.emit(&(0..20).map(event).collect::<Vec<_>>(), T0).expect("emit");
    let r = claim(store, T0, 5);
    record_all(store, &r, &Outcome::fail(FailureKind::Unavailable, "fake.unavailable"), T0);
    assert_eq!(store.breakers().expect("breakers")[0].row.state, BreakerState::Open);
    // The tick comes before any claim has held a delivery.
    let sweep = store.sweep_breakers(T0 + 1, &lease(T0 + 1), &NoRaise).expect("sweep");
    assert_eq!(sweep.alerts.len(), 1);
    assert_eq!(sweep.alerts[0].held, 15, "the 15 due deliveries the outage holds");
    assert_eq!(claim(store, T0 + 1, 50).held.len(), 15);
}

// Each test above, on every store.
jadpo_test_support::on_every_store!(
    crate::common::fixture;
    two_processes_race_to_open_alert_probe_and_release,
    a_delivery_running_when_the_breaker_opened_closes_it_with_its_answer,
    a_lost_probe_is_lost_when_its_lease_ends,
    the_sweep_releases_deliveries_a_closed_breaker_still_holds,
    the_alert_counts_what_the_outage_holds,
);
