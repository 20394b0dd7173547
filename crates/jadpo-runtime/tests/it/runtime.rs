//! The `Runtime`'s steps on an in-memory store under a virtual clock: what they
//! record and report.

use jadpo_check::program::{DeliveryState, FailureKind, Program};
use jadpo_check::{Lower, SourceFile, check};
use jadpo_runtime::clock::VirtualClock;
use jadpo_runtime::config::RuntimeConfig;
use jadpo_runtime::drivers::{Driver, FakeDriver};
use jadpo_runtime::events::Logger;
use jadpo_runtime::rng::RandomSource;
use jadpo_runtime::rules::{self, Outcome};
use jadpo_runtime::steps::Runtime;
use jadpo_runtime::store::{NewDelivery, NewEvent, SqliteStore, Store};
use std::sync::Arc;

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
    let checked = check(&[SourceFile { name: "p.jadpo".into(), text: PROGRAM.into() }], Lower::Yes);
    Arc::new(checked.program.unwrap_or_else(|| panic!("the program checks: {:?}", checked.diagnostics)))
}

fn runtime(drivers: Vec<Arc<dyn Driver>>) -> (Runtime, Arc<SqliteStore>, Arc<VirtualClock>) {
    let store = Arc::new(SqliteStore::open_in_memory().expect("store"));
    let clock = Arc::new(VirtualClock::new(T0));
    let random = RandomSource::from_seed(1);
    let config = RuntimeConfig::default();
    let rt = Runtime::new(program(), store.clone(), clock.clone(), drivers, Arc::new(Logger::silent()), random, config);
    (rt, store, clock)
}

fn emit(store: &SqliteStore) {
    let event = NewEvent {
        name: "Paid".into(),
        payload: r#"{"id":"p1"}"#.into(),
        deliveries: vec![NewDelivery { subscriber: "rec".into(), connection: "c".into() }],
    };
    store.emit(&[event], T0).expect("emit");
}

#[test]
fn only_outcomes_still_owned_are_recorded_and_counted() {
    let (rt, store, clock) = runtime(vec![Arc::new(FakeDriver::new(Vec::new()))]);
    emit(&store);
    let lost = rt.claim_due(T0, 10).expect("claim").run.remove(0);
    // Its worker is lost: past the lease, another claim takes the delivery.
    let lease_end = rules::lease_until_ms(T0, 1_000);
    clock.advance_to(lease_end);
    let current = rt.claim_due(lease_end, 10).expect("claim").run.remove(0);
    assert_eq!(current.attempt, 2);
    let late = rt.conclude(&lost, Outcome::ok(), lease_end + 1);
    let done = rt.conclude(&current, Outcome::ok(), lease_end + 2);
    assert_eq!(rt.record_outcomes(&[late, done]).expect("record"), 1);
    let (d, history) = store.delivery(current.id).expect("read").expect("a delivery");
    assert_eq!((d.state, d.attempts), (DeliveryState::Succeeded, 2));
    assert_eq!(history.len(), 2, "the lost attempt as `lease_expired`, then the success");
}

#[test]
fn a_connection_without_a_driver_ends_its_calls_as_a_defect() {
    let (rt, store, _clock) = runtime(Vec::new());
    emit(&store);
    let c = rt.claim_due(T0, 10).expect("claim").run.remove(0);
    let Err(defect) = rt.prepare_call(&c) else {
        panic!("a call was prepared with no driver");
    };
    assert_eq!(
        defect.failure().map(|f| (f.kind, f.code)),
        Some((FailureKind::InternalFault, "runtime.no_driver".into()))
    );
}
