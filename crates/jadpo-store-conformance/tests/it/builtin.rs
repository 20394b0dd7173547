//! jadpo's own events raised by the runtime's steps, on each store: once per
//! change whose guarded statement matched, in its transaction, with the fields
//! the checker declares; never about a delivery of a built-in event itself.

use crate::common::T0;
use crate::common::fixture::Fixture;
use jadpo_check::program::{DeliveryState, FailureKind, Program};
use jadpo_core::clock::{VirtualClock, rfc3339};
use jadpo_core::config::RuntimeConfig;
use jadpo_core::payload::new_event;
use jadpo_core::rng::RandomSource;
use jadpo_core::rules::{self, Outcome};
use jadpo_core::steps::Runtime;
use jadpo_core::store::{Claimed, DeliveryFilter, DeliveryView, Store};
use serde_json::{Value, json};
use std::sync::Arc;

const PROGRAM: &str = r#"
event Paid { id: string }

connection c {
    url: "http://127.0.0.1:9/x"
    max_in_flight: 8
}
connection pager { url: "http://127.0.0.1:9/pager" }

action record(id: string) { via: c }
action page_delivery(delivery: string, about: string, who: string, kind: string, code: string?, attempts: int) {
    via: pager
}
action page_outage(name: string, since: time, held: int) { via: pager }
action page_recovery(name: string, outage_ms: int) { via: pager }

subscriber rec {
    on: Paid
    run: record(event.id)
    timeout: 1s
    retry: { attempts: 3  within: 1h }
}

subscriber on_failed {
    on: jadpo.delivery_failed
    run: page_delivery(event.delivery, event.event, event.subscriber, event.kind, event.code, event.attempts)
}

subscriber on_parked {
    on: jadpo.delivery_parked
    run: page_delivery(event.delivery, event.event, event.subscriber, event.kind, event.code, event.attempts)
}

subscriber on_outage {
    on: jadpo.connection_unavailable
    run: page_outage(event.connection, event.since, event.held)
}

subscriber on_recovered {
    on: jadpo.connection_recovered
    run: page_recovery(event.connection, event.outage_ms)
}
"#;

fn program() -> Arc<Program> {
    jadpo_test_support::program(PROGRAM)
}

/// A runtime on a new handle of the fixture's store, as one process.
fn runtime(f: &dyn Fixture) -> (Runtime, Arc<dyn Store>) {
    let store: Arc<dyn Store> = Arc::from(f.open());
    let clock = Arc::new(VirtualClock::new(T0));
    let rt =
        Runtime::new(program(), store.clone(), clock, Vec::new(), RandomSource::from_seed(1), RuntimeConfig::default());
    (rt, store)
}

fn emit_paid(store: &dyn Store, n: usize, now: i64) -> i64 {
    let event = new_event(&program(), "Paid", &format!(r#"{{"id":"p{n}"}}"#)).expect("a valid event");
    store.emit(&[event], now).expect("emit")[0]
}

/// Claim what is due at `now` and record each attempt as `answer` says it
/// ended, at `now + 1`; returns what was claimed.
fn step(rt: &Runtime, now: i64, answer: &dyn Fn(&Claimed) -> Outcome) -> Vec<Claimed> {
    let claimed = rt.claim_due(now, 100).expect("claim").report.run;
    let done: Vec<_> = claimed.iter().map(|c| rt.conclude(c, answer(c), now + 1)).collect();
    rt.record_outcomes(&done).expect("record");
    claimed
}

fn of(store: &dyn Store, subscriber: &str) -> Vec<DeliveryView> {
    let filter = DeliveryFilter { subscriber: Some(subscriber.into()), ..DeliveryFilter::default() };
    store.deliveries(&filter).expect("list")
}

/// The payloads of `subscriber`'s deliveries claimed at `now` (all claimed
/// deliveries succeed).
fn payloads(rt: &Runtime, now: i64, subscriber: &str) -> Vec<Value> {
    step(rt, now, &|_| Outcome::ok())
        .iter()
        .filter(|c| c.subscriber == subscriber)
        .map(|c| serde_json::from_str(&c.payload).expect("a JSON payload"))
        .collect()
}

fn rejected() -> Outcome {
    Outcome::fail(FailureKind::Rejected, "http.422")
}

fn unavailable() -> Outcome {
    Outcome::fail(FailureKind::Unavailable, "http.503")
}

fn a_failed_delivery_raises_one_delivery_failed_with_its_fields(f: &dyn Fixture) {
    let (rt, store) = runtime(f);
    let event_id = emit_paid(&*store, 1, T0);
    // A retry raises nothing.
    step(&rt, T0, &|_| unavailable());
    assert!(of(&*store, "on_failed").is_empty());
    let due = of(&*store, "rec")[0].due_at_ms.expect("due again");
    step(&rt, due, &|_| rejected());
    let rec = &of(&*store, "rec")[0];
    assert_eq!((rec.state, rec.attempts), (DeliveryState::Failed, 2));
    assert_eq!(of(&*store, "on_failed").len(), 1);
    assert!(of(&*store, "on_parked").is_empty());
    let found = payloads(&rt, due + 2, "on_failed");
    let expected = json!({
        "delivery": rec.id.to_string(), "event": event_id.to_string(), "subscriber": "rec",
        "kind": "rejected", "code": "http.422", "attempts": 2,
    });
    assert_eq!(found, vec![expected]);
    // The alert's own success raises nothing more.
    assert_eq!(of(&*store, "on_failed")[0].state, DeliveryState::Succeeded);
    assert_eq!(store.deliveries(&DeliveryFilter::default()).expect("list").len(), 2);
}

fn a_parked_delivery_raises_delivery_parked(f: &dyn Fixture) {
    let (rt, store) = runtime(f);
    emit_paid(&*store, 1, T0);
    step(&rt, T0, &|_| Outcome::fail(FailureKind::OutcomeUnknown, "transport.reset"));
    let rec = &of(&*store, "rec")[0];
    assert_eq!(rec.state, DeliveryState::Parked);
    assert!(of(&*store, "on_failed").is_empty());
    let found = payloads(&rt, T0 + 2, "on_parked");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["delivery"], json!(rec.id.to_string()));
    assert_eq!((&found[0]["kind"], &found[0]["attempts"]), (&json!("outcome_unknown"), &json!(1)));
}

fn a_delivery_given_up_at_its_claim_raises_delivery_failed(f: &dyn Fixture) {
    let (rt, store) = runtime(f);
    emit_paid(&*store, 1, T0);
    step(&rt, T0, &|_| unavailable());
    // Its next claim is past its hour: given up there, never run.
    let late = T0 + 2 * 3_600_000;
    let claimed = step(&rt, late, &|_| Outcome::ok());
    assert!(claimed.iter().all(|c| c.subscriber != "rec"));
    let rec = &of(&*store, "rec")[0];
    assert_eq!(rec.state, DeliveryState::Failed);
    let last = rec.last_failure.clone().expect("its failure");
    let found = payloads(&rt, late + 2, "on_failed");
    assert_eq!(found.len(), 1, "one alert, raised by the claim's transaction");
    assert_eq!(found[0]["kind"], json!(last.kind.as_str()));
    assert_eq!(found[0]["code"], json!(last.code));
    assert_eq!(found[0]["attempts"], json!(1));
}

fn a_stale_outcome_raises_nothing(f: &dyn Fixture) {
    let (rt, store) = runtime(f);
    emit_paid(&*store, 1, T0);
    let lost = rt.claim_due(T0, 10).expect("claim").report.run.remove(0);
    // Its worker is lost: past the lease, another claim takes the delivery.
    let lease_end = rules::lease_until_ms(T0, 1_000);
    let current = rt.claim_due(lease_end, 10).expect("claim").report.run.remove(0);
    let late = rt.conclude(&lost, rejected(), lease_end + 1);
    assert!(!late.raises.is_empty(), "the late outcome would raise an alert if written");
    assert_eq!(rt.record_outcomes(&[late]).expect("record"), 0);
    assert!(of(&*store, "on_failed").is_empty(), "an outcome not written raises nothing");
    let done = rt.conclude(&current, rejected(), lease_end + 2);
    assert_eq!(rt.record_outcomes(&[done]).expect("record"), 1);
    assert_eq!(of(&*store, "on_failed").len(), 1);
}

fn an_alert_that_fails_raises_nothing_about_itself(f: &dyn Fixture) {
    let (rt, store) = runtime(f);
    emit_paid(&*store, 1, T0);
    emit_paid(&*store, 2, T0);
    step(&rt, T0, &|c| {
        if c.payload.contains("p2") {
            Outcome::fail(FailureKind::OutcomeUnknown, "transport.reset")
        } else {
            rejected()
        }
    });
    assert_eq!((of(&*store, "on_failed").len(), of(&*store, "on_parked").len()), (1, 1));
    // Both alerts fail: one refused, one with its outcome unknown.
    step(&rt, T0 + 2, &|c| {
        if c.subscriber == "on_failed" {
            rejected()
        } else {
            Outcome::fail(FailureKind::OutcomeUnknown, "transport.reset")
        }
    });
    assert_eq!(of(&*store, "on_failed")[0].state, DeliveryState::Failed);
    assert_eq!(of(&*store, "on_parked")[0].state, DeliveryState::Parked);
    assert_eq!((of(&*store, "on_failed").len(), of(&*store, "on_parked").len()), (1, 1));
    assert_eq!(store.deliveries(&DeliveryFilter::default()).expect("list").len(), 4);
}

/// Five unavailable attempts (of six running deliveries), ended at `T0 + 1`,
/// open the breaker of `c`.
fn open_the_breaker(rt: &Runtime, store: &dyn Store) -> Vec<Claimed> {
    for n in 0..6 {
        emit_paid(store, n, T0);
    }
    let claimed = rt.claim_due(T0, 100).expect("claim").report.run;
    assert_eq!(claimed.len(), 6);
    let done: Vec<_> = claimed[..5].iter().map(|c| rt.conclude(c, unavailable(), T0 + 1)).collect();
    assert_eq!(rt.record_outcomes(&done).expect("record"), 5);
    let breakers = store.breakers().expect("breakers");
    assert_eq!(breakers[0].row.opened_at_ms, Some(T0 + 1));
    claimed
}

fn an_outage_raises_one_connection_unavailable_however_many_processes_tick(f: &dyn Fixture) {
    let (a, store) = runtime(f);
    let (b, _) = runtime(f);
    open_the_breaker(&a, &*store);
    emit_paid(&*store, 7, T0 + 1);
    assert!(of(&*store, "on_outage").is_empty(), "raised by the tick's alert, not by the outcome");
    a.tick(T0 + 2).expect("tick");
    b.tick(T0 + 2).expect("tick");
    a.tick(T0 + 3).expect("tick");
    b.tick(T0 + 4).expect("tick");
    assert_eq!(of(&*store, "on_outage").len(), 1);
    assert_eq!(store.breakers().expect("breakers")[0].row.alerts, 1);
    let found = payloads(&a, T0 + 5, "on_outage");
    // Held: the delivery emitted since, due and held by the open breaker.
    assert_eq!(found, vec![json!({"connection": "c", "since": rfc3339(T0 + 1), "held": 1})]);
}

fn a_breaker_that_closes_raises_connection_recovered_with_the_outage(f: &dyn Fixture) {
    let (rt, store) = runtime(f);
    let claimed = open_the_breaker(&rt, &*store);
    // The sixth call was running when the breaker opened: its answer closes it.
    let done = rt.conclude(&claimed[5], Outcome::ok(), T0 + 501);
    assert_eq!(rt.record_outcomes(&[done]).expect("record"), 1);
    assert_eq!(of(&*store, "on_recovered").len(), 1);
    let found = payloads(&rt, T0 + 502, "on_recovered");
    assert_eq!(found, vec![json!({"connection": "c", "outage_ms": 500})]);
    // A success on a closed breaker raises nothing more.
    emit_paid(&*store, 9, T0 + 600);
    step(&rt, T0 + 600, &|_| Outcome::ok());
    assert_eq!(of(&*store, "on_recovered").len(), 1);
}

// Each test above, on every store.
jadpo_test_support::on_every_store!(
    crate::common::fixture;
    a_failed_delivery_raises_one_delivery_failed_with_its_fields,
    a_parked_delivery_raises_delivery_parked,
    a_delivery_given_up_at_its_claim_raises_delivery_failed,
    a_stale_outcome_raises_nothing,
    an_alert_that_fails_raises_nothing_about_itself,
    an_outage_raises_one_connection_unavailable_however_many_processes_tick,
    a_breaker_that_closes_raises_connection_recovered_with_the_outage,
);
