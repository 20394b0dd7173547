//! Programs of two versions on one store, as in a rolling deploy: each process
//! runs what its program has, leaves the rest to the processes whose programs
//! have it (orphaned when none does, and taken back when one starts), and never
//! sends a call that reads a field its event was stored without. Through the
//! `Runtime`'s steps under a virtual clock, on both stores.

use crate::common::fixture::Fixture;
use jadpo_check::program::{DeliveryState, FailureKind, Program};
use jadpo_check::{Lower, SourceFile, check};
use jadpo_core::clock::VirtualClock;
use jadpo_core::config::RuntimeConfig;
use jadpo_core::drivers::{Driver, FakeDriver};
use jadpo_core::payload::new_event;
use jadpo_core::rng::RandomSource;
use jadpo_core::rules::{LEAVE_FOR_ANOTHER_MS, Outcome};
use jadpo_core::steps::Runtime;
use jadpo_core::store::{DeliveryDetail, EventDetail};
use jadpo_core::store::{DeliveryFilter, Store};
use jadpo_core::version::{self, PROCESS_LIVE_MS, ProcessRow, ProgramVersion, SourceText, window_cut_ms};
use std::sync::Arc;

const T0: i64 = 1_700_000_000_000;

const OLD: &str = r#"
event Paid { id: string  cents: int }
connection c { url: "http://127.0.0.1:9/x" }
action record(id: string, cents: int) { via: c  idempotent: true }
subscriber rec { on: Paid  run: record(event.id, event.cents) }
subscriber audit { on: Paid  run: record(event.id, event.cents) }
"#;

/// `OLD` without `audit`.
const NEW: &str = r#"
event Paid { id: string  cents: int }
connection c { url: "http://127.0.0.1:9/x" }
action record(id: string, cents: int) { via: c  idempotent: true }
subscriber rec { on: Paid  run: record(event.id, event.cents) }
"#;

/// `NEW` with a subscriber of `jadpo.delivery_orphaned`.
const NEW_WITH_PAGER: &str = r#"
event Paid { id: string  cents: int }
connection c { url: "http://127.0.0.1:9/x" }
action record(id: string, cents: int) { via: c  idempotent: true }
action page(who: string, delivery: string) { via: c  idempotent: true }
subscriber rec { on: Paid  run: record(event.id, event.cents) }
subscriber pager { on: jadpo.delivery_orphaned  run: page(event.subscriber, event.delivery) }
"#;

/// `OLD` with `audit` renamed `ledger_audit`.
const RENAMED_SUBSCRIBER: &str = r#"
event Paid { id: string  cents: int }
connection c { url: "http://127.0.0.1:9/x" }
action record(id: string, cents: int) { via: c  idempotent: true }
subscriber rec { on: Paid  run: record(event.id, event.cents) }
subscriber ledger_audit { was: audit  on: Paid  run: record(event.id, event.cents) }
"#;

/// `OLD` with the field `cents` renamed `amount`, which `rec` reads.
const RENAMED_FIELD: &str = r#"
event Paid { id: string  amount: int }
connection c { url: "http://127.0.0.1:9/x" }
action record(id: string, cents: int) { via: c  idempotent: true }
subscriber rec { on: Paid  run: record(event.id, event.amount) }
"#;

/// `RENAMED_FIELD` with `amount` optional: a call may go without it.
const OPTIONAL_FIELD: &str = r#"
event Paid { id: string  amount: int? }
connection c { url: "http://127.0.0.1:9/x" }
action record(id: string, cents: int?) { via: c  idempotent: true }
subscriber rec { on: Paid  run: record(event.id, event.amount) }
"#;

/// A process running `text` on the fixture's store.
struct Process {
    rt: Runtime,
    program: Arc<Program>,
    version: ProgramVersion,
}

fn process(f: &dyn Fixture, text: &str, name: &str, clock: &Arc<VirtualClock>) -> Process {
    let sources = [SourceFile { name: "test.jadpo".into(), text: text.into() }];
    let program = Arc::new(check(&sources, Lower::Yes).program.expect("the program checks"));
    let files = vec![SourceText { path: "test.jadpo".into(), text: text.into() }];
    let version = ProgramVersion::of(&program, files);
    let store: Arc<dyn Store> = Arc::from(f.open());
    let row = ProcessRow::this(name, &version.hash, T0);
    // A driver for the one connection; the tests prepare calls and make none.
    let drivers: Vec<Arc<dyn Driver>> = vec![Arc::new(FakeDriver::new(Vec::new()))];
    let rt = Runtime::new(program.clone(), store, clock.clone(), drivers, RandomSource::from_seed(1), config())
        .with_presence(version.clone(), row);
    Process { rt, program, version }
}

/// `RENAMED_FIELD` with `amount` declared with a default.
const DEFAULTED_FIELD: &str = r#"
event Paid { id: string  amount: { type: int, default: 0 } }
connection c { url: "http://127.0.0.1:9/x" }
action record(id: string, cents: int) { via: c  idempotent: true }
subscriber rec { on: Paid  run: record(event.id, event.amount) }
"#;

/// A process of the old program that emitted `n` events and stopped, and the
/// clock the test's processes share.
fn left_by_old(f: &dyn Fixture, n: usize) -> (Arc<VirtualClock>, Process) {
    let clock = Arc::new(VirtualClock::new(T0));
    let old = process(f, OLD, "old", &clock);
    old.rt.start(T0).expect("start");
    old.emit(n, T0);
    old.rt.stopped().expect("stop");
    (clock, old)
}

fn config() -> RuntimeConfig {
    RuntimeConfig::default()
}

impl Process {
    /// Emit `n` `Paid` events as this process's program makes them.
    fn emit(&self, n: usize, now: i64) {
        let events: Vec<_> = (0..n)
            .map(|i| new_event(&self.program, "Paid", &format!(r#"{{"id":"p{i}","cents":{i}}}"#)).expect("valid"))
            .collect();
        self.rt.store().emit(&events, now).expect("emit");
    }

    /// Claim and conclude what is due with the provider answering well; the ids run.
    fn deliver(&self, now: i64) -> Vec<i64> {
        let claim = self.rt.claim_due(now, 100).expect("claim");
        let done: Vec<_> = claim
            .report
            .run
            .iter()
            .map(|c| {
                let outcome = match self.rt.prepare_call(c) {
                    Ok(_) => Outcome::Succeeded { http_status: Some(200) },
                    Err(defect) => defect,
                };
                self.rt.conclude(c, outcome, now)
            })
            .collect();
        self.rt.record_outcomes(&done).expect("record");
        claim.report.run.iter().map(|c| c.id).collect()
    }
}

fn of_subscriber(store: &dyn Store, subscriber: &str) -> Vec<(i64, DeliveryState)> {
    let filter = DeliveryFilter { subscriber: Some(subscriber.into()), ..DeliveryFilter::default() };
    let mut rows: Vec<_> = store.deliveries(&filter).expect("list").into_iter().map(|d| (d.id, d.state)).collect();
    rows.sort_unstable_by_key(|(id, _)| *id);
    rows
}

fn states(rows: &[(i64, DeliveryState)]) -> Vec<DeliveryState> {
    rows.iter().map(|(_, s)| *s).collect()
}

/// A subscriber removed while its deliveries wait: the new program's process
/// neither runs nor fails them; with no running process whose program has the
/// subscriber they are orphaned, and a process of the old program takes them
/// back when it starts, the time they waited costing their budget nothing.
pub fn a_removed_subscribers_deliveries_are_orphaned_then_taken_back(f: &dyn Fixture) {
    let (clock, old) = left_by_old(f, 2);

    let new = process(f, NEW, "new", &clock);
    new.rt.start(T0 + 1_000).expect("start");
    let ran = new.deliver(T0 + 1_000);
    assert_eq!(ran.len(), 2, "the new program runs `rec`'s deliveries");
    let store = new.rt.store();
    assert_eq!(states(&of_subscriber(&**store, "rec")), [DeliveryState::Succeeded; 2]);
    let audit = of_subscriber(&**store, "audit");
    assert_eq!(states(&audit), [DeliveryState::Orphaned; 2], "never failed, never run");
    for (id, _) in &audit {
        let DeliveryDetail { attempts: history, .. } = store.delivery(*id).expect("read").expect("found");
        assert!(history.is_empty(), "no attempt was made for an orphaned delivery");
    }

    // The store names both versions; the new one is running, with no work
    // left, and the old one's events have two deliveries not ended.
    let live_since = T0 + 1_000 - PROCESS_LIVE_MS as i64;
    let versions = store.versions(live_since).expect("versions");
    assert_eq!(versions.len(), 2);
    assert_eq!(versions[0].hash, new.version.hash, "the newest first");
    assert_eq!(versions[0].processes.len(), 1);
    assert_eq!(versions[1].hash, old.version.hash);
    assert_eq!((versions[1].processes.len(), versions[1].in_flight), (0, 2));
    assert_eq!(store.latest_version().expect("latest").map(|v| v.hash), Some(new.version.hash.clone()));

    // An hour later the old program starts again: it takes them back at once.
    let later = T0 + 3_600_000;
    let again = process(f, OLD, "old-again", &clock);
    again.rt.start(later).expect("start");
    assert_eq!(states(&of_subscriber(&**store, "audit")), [DeliveryState::Pending; 2]);
    let DeliveryDetail { delivery: view, attempts: _ } = store.delivery(audit[0].0).expect("read").expect("found");
    assert_eq!(view.due_at_ms, Some(later));
    assert!(view.held_ms >= later - (T0 + 1_000), "the hour orphaned is time held: {}", view.held_ms);
    assert_eq!(again.deliver(later).len(), 2);
    assert_eq!(states(&of_subscriber(&**store, "audit")), [DeliveryState::Succeeded; 2]);
}

/// Each delivery orphaned raises `jadpo.delivery_orphaned`, in the claim's
/// transaction, routed to the program's subscribers of it.
pub fn an_orphaned_delivery_raises_jadpo_delivery_orphaned(f: &dyn Fixture) {
    let (clock, _) = left_by_old(f, 1);
    let new = process(f, NEW_WITH_PAGER, "new", &clock);
    new.rt.start(T0).expect("start");
    let claim = new.rt.claim_due(T0, 100).expect("claim");
    assert_eq!(claim.report.left.len(), 1);
    let store = new.rt.store();
    let audit = of_subscriber(&**store, "audit");
    let pages = store.deliveries(&DeliveryFilter { subscriber: Some("pager".into()), ..DeliveryFilter::default() });
    let pages = pages.expect("list");
    assert_eq!(pages.len(), 1, "one page for one delivery orphaned");
    let EventDetail { event, deliveries: _ } = store.event(pages[0].event_id).expect("read").expect("found");
    assert_eq!(event.name, "jadpo.delivery_orphaned");
    let payload: serde_json::Value = serde_json::from_str(&event.payload).expect("json");
    assert_eq!(payload["subscriber"], "audit");
    assert_eq!(payload["delivery"], audit[0].0.to_string());
}

/// Taking back an orphaned delivery is conditional on the row being as read: a
/// second process taking back the same rows (or a row changed since) takes none.
pub fn an_orphan_taken_back_twice_is_taken_once(f: &dyn Fixture) {
    let (clock, _) = left_by_old(f, 2);
    let new = process(f, NEW, "new", &clock);
    new.rt.start(T0).expect("start");
    new.deliver(T0);
    let store = new.rt.store();
    let rows = store.orphans(&["audit".to_string()], 10).expect("orphans");
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r.orphaned_at_ms == Some(T0) && r.subscriber == "audit"));
    let other: Arc<dyn Store> = Arc::from(f.open());
    assert_eq!(other.adopt(&rows[..1], T0 + 5_000).expect("adopt"), 1);
    assert_eq!(store.adopt(&rows, T0 + 6_000).expect("adopt"), 1, "only the row still as read");
    assert_eq!(store.adopt(&rows, T0 + 7_000).expect("adopt"), 0);
    let DeliveryDetail { delivery: first, attempts: _ } = store.delivery(rows[0].id).expect("read").expect("found");
    assert_eq!((first.state, first.due_at_ms, first.held_ms), (DeliveryState::Pending, Some(T0 + 5_000), 5_000));
}

/// The version a run is compared with is the one the last run started with: a
/// producer emitting with a new program before the runs are deployed does not
/// move it; before any run, it is the version kept last.
pub fn the_version_runs_are_compared_with_is_the_last_runs(f: &dyn Fixture) {
    let clock = Arc::new(VirtualClock::new(T0));
    let (old, new) = (process(f, OLD, "old", &clock), process(f, NEW, "new", &clock));
    let store = old.rt.store();
    store.record_version(&old.version, T0, false).expect("emit's");
    assert_eq!(store.latest_version().expect("read").map(|v| v.hash), Some(old.version.hash.clone()));
    store.record_version(&new.version, T0 + 1, false).expect("emit's");
    assert_eq!(store.latest_version().expect("read").map(|v| v.hash), Some(new.version.hash.clone()), "no run yet");
    old.rt.start(T0 + 2).expect("start");
    store.record_version(&new.version, T0 + 3, false).expect("emit's");
    let latest = store.latest_version().expect("read").expect("a version");
    assert_eq!(latest.hash, old.version.hash, "an emit does not move it");
    assert_eq!(latest.sources.len(), 1);
    assert!(latest.sources[0].text.contains("subscriber audit"), "its files are kept");
    let mut accepted = new.version.clone();
    accepted.accepted = vec!["subscriber.removed".into()];
    store.record_version(&accepted, T0 + 4, true).expect("a run's");
    let latest = store.latest_version().expect("read").expect("a version");
    assert_eq!((latest.hash, latest.accepted), (new.version.hash.clone(), vec!["subscriber.removed".to_string()]));
}

/// With the field declared with a default, the same event is delivered with the
/// default in its place: a compatible change.
pub fn an_event_without_a_field_declared_with_a_default_is_sent_with_it(f: &dyn Fixture) {
    let (clock, _) = left_by_old(f, 1);
    let new = process(f, DEFAULTED_FIELD, "new", &clock);
    new.rt.start(T0).expect("start");
    let claim = new.rt.claim_due(T0, 100).expect("claim");
    let Ok(call) = new.rt.prepare_call(&claim.report.run[0]) else {
        panic!("a field with a default stops no call");
    };
    assert_eq!(call.request.args, serde_json::json!({"id": "p0", "cents": 0}));
    // A new event may leave it out too.
    assert!(new_event(&new.program, "Paid", r#"{"id": "q"}"#).is_ok());
}

/// The deliveries a tightened budget would give up, counted as the claim would
/// decide them: those with as many attempts as the new budget has, and those
/// whose window (moved on by their time held) ends before the new one's cut.
pub fn a_tightened_budget_counts_the_deliveries_past_it(f: &dyn Fixture) {
    let clock = Arc::new(VirtualClock::new(T0));
    let old = process(f, OLD, "old", &clock);
    old.rt.start(T0).expect("start");
    old.emit(2, T0);
    // `rec`'s first delivery fails once and waits for its second attempt.
    let claim = old.rt.claim_due(T0, 1).expect("claim");
    let failed = Outcome::Failed(jadpo_core::rules::CallFailure::new(FailureKind::Unavailable, "fake.unavailable"));
    let done = old.rt.conclude(&claim.report.run[0], failed, T0);
    old.rt.record_outcomes(&[done]).expect("record");
    let store = old.rt.store();
    let cut = |within_ms: u64| window_cut_ms(T0 + 60_000, within_ms);
    assert_eq!(store.past_budget("rec", 1, cut(3_600_000)).expect("count"), 1, "one attempt used");
    assert_eq!(store.past_budget("rec", 2, cut(3_600_000)).expect("count"), 0);
    assert_eq!(store.past_budget("rec", 20, cut(30_000)).expect("count"), 2, "a minute old, past 30s");
    assert_eq!(store.past_budget("audit", 1, cut(3_600_000)).expect("count"), 0);
    let backlog = store.backlog().expect("backlog");
    let rec: u64 = backlog.iter().filter(|r| r.subscriber == "rec").map(|r| r.count).sum();
    assert_eq!(rec, 2);
    assert!(backlog.iter().all(|r| r.oldest_created_ms == T0 && r.connection == "c"));
}

/// In a rolling deploy a process whose program lacks a subscriber leaves its
/// deliveries for the running process whose program has it: pending, due a
/// moment later, never orphaned or failed.
pub fn a_delivery_another_running_program_has_is_left_for_it(f: &dyn Fixture) {
    let clock = Arc::new(VirtualClock::new(T0));
    let old = process(f, OLD, "old", &clock);
    old.rt.start(T0).expect("start");
    let new = process(f, NEW, "new", &clock);
    new.rt.start(T0).expect("start");
    old.emit(1, T0);

    let claim = new.rt.claim_due(T0, 100).expect("claim");
    assert_eq!(claim.report.run.len(), 1, "`rec` runs here");
    assert_eq!(claim.report.left.len(), 1);
    assert_eq!(claim.report.left[0].subscriber, "audit");
    assert_eq!(claim.report.left[0].until_ms, Some(T0 + LEAVE_FOR_ANOTHER_MS as i64));
    let store = new.rt.store();
    let audit = of_subscriber(&**store, "audit");
    assert_eq!(states(&audit), [DeliveryState::Pending]);

    // The old program's process takes it when it is due again.
    assert!(old.deliver(T0).is_empty(), "not due before its turn");
    assert_eq!(old.deliver(T0 + LEAVE_FOR_ANOTHER_MS as i64), vec![audit[0].0]);
    assert_eq!(states(&of_subscriber(&**store, "audit")), [DeliveryState::Succeeded]);
}

/// A subscriber renamed with `was:` runs the deliveries made under its old
/// name, and takes back those orphaned under it.
pub fn a_renamed_subscriber_runs_and_takes_back_its_old_names_deliveries(f: &dyn Fixture) {
    let (clock, _) = left_by_old(f, 2);
    // Orphaned by a program without `audit` at all.
    let without = process(f, NEW, "without", &clock);
    without.rt.start(T0).expect("start");
    assert_eq!(without.deliver(T0).len(), 2, "`rec` runs");
    without.rt.stopped().expect("stop");
    assert_eq!(states(&of_subscriber(&**without.rt.store(), "audit")), [DeliveryState::Orphaned; 2]);

    let renamed = process(f, RENAMED_SUBSCRIBER, "renamed", &clock);
    renamed.rt.start(T0 + 1_000).expect("start");
    assert!(renamed.version.subscribers.contains(&"audit".to_string()), "the version names the old name too");
    renamed.deliver(T0 + 1_000);
    let store = renamed.rt.store();
    assert_eq!(states(&of_subscriber(&**store, "audit")), [DeliveryState::Succeeded; 2]);
    assert_eq!(states(&of_subscriber(&**store, "rec")), [DeliveryState::Succeeded; 2]);
}

/// An event stored under a program whose `Paid` had `cents` reaches a
/// subscriber of a program that reads `amount`: no call is made with a `null`
/// for it; the delivery fails with its own code, naming the field and both
/// versions.
pub fn an_event_without_a_field_the_new_program_requires_is_never_sent(f: &dyn Fixture) {
    let (clock, old) = left_by_old(f, 1);

    let new = process(f, RENAMED_FIELD, "new", &clock);
    new.rt.start(T0).expect("start");
    let claim = new.rt.claim_due(T0, 100).expect("claim");
    assert_eq!(claim.report.run.len(), 1);
    let Err(Outcome::Failed(failure)) = new.rt.prepare_call(&claim.report.run[0]) else {
        panic!("a call was prepared with a field the event lacks");
    };
    assert_eq!(failure.code, "runtime.event_shape");
    let reason = failure.reason.clone().unwrap_or_default();
    assert!(reason.contains("`amount`"), "{reason}");
    let versions = new.rt.store().versions(T0).expect("versions");
    let id = |v: &ProgramVersion| versions.iter().find(|x| x.hash == v.hash).map(|x| x.id).expect("kept");
    let (old_id, new_id) = (id(&old.version), id(&new.version));
    assert!(reason.contains(&format!("stored by version #{old_id};")), "{reason}");
    assert!(reason.contains(&format!("version #{new_id} ({})", version::short(&new.version.hash))), "{reason}");
    let done = new.rt.conclude(&claim.report.run[0], Outcome::Failed(failure), T0);
    new.rt.record_outcomes(&[done]).expect("record");
    let store = new.rt.store();
    let rec = of_subscriber(&**store, "rec");
    assert_eq!(states(&rec), [DeliveryState::Failed]);
    let DeliveryDetail { delivery: view, attempts: _ } = store.delivery(rec[0].0).expect("read").expect("found");
    assert_eq!(view.last_failure.map(|f| f.code).as_deref(), Some("runtime.event_shape"));
    let EventDetail { event, deliveries: _ } = store.event(view.event_id).expect("read").expect("found");
    assert_eq!(event.version, Some(old_id), "the event names the version that stored it");
}

/// With the field optional, the same event is delivered: the call goes without
/// it, as the program says it may.
pub fn an_event_without_an_optional_field_is_sent_without_it(f: &dyn Fixture) {
    let (clock, _) = left_by_old(f, 1);

    let new = process(f, OPTIONAL_FIELD, "new", &clock);
    new.rt.start(T0).expect("start");
    let claim = new.rt.claim_due(T0, 100).expect("claim");
    let Ok(call) = new.rt.prepare_call(&claim.report.run[0]) else {
        panic!("an optional field left out stops no call");
    };
    assert_eq!(call.request.args, serde_json::json!({"id": "p0", "cents": null}));
}

jadpo_test_support::on_every_store!(
    crate::common::fixture;
    a_removed_subscribers_deliveries_are_orphaned_then_taken_back,
    a_delivery_another_running_program_has_is_left_for_it,
    an_event_without_a_field_the_new_program_requires_is_never_sent,
    an_event_without_an_optional_field_is_sent_without_it,
    a_renamed_subscriber_runs_and_takes_back_its_old_names_deliveries,
    an_orphaned_delivery_raises_jadpo_delivery_orphaned,
    a_tightened_budget_counts_the_deliveries_past_it,
    the_version_runs_are_compared_with_is_the_last_runs,
    an_orphan_taken_back_twice_is_taken_once,
    an_event_without_a_field_declared_with_a_default_is_sent_with_it,
);
