//! Retention in the store suite: final deliveries older than the cut go with
//! their attempts and handled records, in batches; failed and parked ones only
//! when asked; a delivery that is not final keeps everything, its handled record
//! too; an event goes once none of its deliveries is left. Run on every store.

use crate::common;
use common::fixture::Fixture;
use jadpo_core::store::{DeliveryDetail, NoRaise};

use common::{T0, claim, event};
use jadpo_check::program::{DeliveryState, FailureKind};
use jadpo_core::retention;
use jadpo_core::rules::retention::pruned_states;
use jadpo_core::rules::{ClaimDecision, Decision, FailedBecause, Outcome};
use jadpo_core::store::{DeliveryFilter, NewDelivery, NewEvent, PruneCounts, PrunePlan, Recorded, Store};

const DAY: i64 = 86_400_000;

fn recorded(c: &jadpo_core::store::Claimed, outcome: Outcome, decision: Decision, now: i64) -> Recorded {
    Recorded {
        id: c.id,
        connection: c.connection.clone(),
        attempt: c.attempt,
        started_at_ms: c.claimed_at_ms,
        ended_at_ms: now,
        outcome,
        decision,
    }
}

fn states(store: &dyn Store) -> Vec<(i64, DeliveryState)> {
    let mut list: Vec<_> =
        store.deliveries(&DeliveryFilter::default()).expect("list").into_iter().map(|d| (d.id, d.state)).collect();
    list.sort_unstable_by_key(|(id, _)| *id);
    list
}

fn plan(cut_ms: i64, include_failed: bool) -> PrunePlan {
    PrunePlan { cut_ms, states: pruned_states(include_failed).to_vec(), batch: 2 }
}

/// Deliveries 1 to 4 succeeded, 5 failed, 6 parked, 7 running with a handled
/// record (its call succeeded; the outcome is not recorded yet), 8 pending after
/// a failure; event 9 has two deliveries, one succeeded (9) and one pending (10).
fn a_store_with_every_state(f: &dyn Fixture) -> Box<dyn Store> {
    let store = f.open();
    store.emit(&(1..=8).map(event).collect::<Vec<_>>(), T0).expect("emit");
    let two = NewEvent {
        name: "Paid".into(),
        payload: r#"{"id":"p9"}"#.into(),
        deliveries: vec![
            NewDelivery { subscriber: "rec".into(), connection: "c".into(), order_key: None },
            NewDelivery { subscriber: "rec".into(), connection: "c".into(), order_key: None },
        ],
    };
    store.emit(&[two], T0).expect("emit");
    let r = claim(&*store, T0, 10);
    assert_eq!(r.run.len(), 10);
    let failed = Outcome::fail(FailureKind::Rejected, "http.400");
    let unavailable = Outcome::fail(FailureKind::Unavailable, "http.503");
    let unknown = Outcome::fail(FailureKind::OutcomeUnknown, "transport.no_answer");
    let mut recs = Vec::new();
    for c in &r.run {
        let now = T0 + 1;
        match c.id {
            1..=4 | 9 => recs.push(recorded(c, Outcome::ok(), Decision::Succeeded, now)),
            5 => recs.push(recorded(
                c,
                failed.clone(),
                Decision::Failed { failure: failed.failure().expect("f"), because: FailedBecause::NotRetryable },
                now,
            )),
            6 => recs.push(recorded(
                c,
                unknown.clone(),
                Decision::Parked { failure: unknown.failure().expect("f") },
                now,
            )),
            7 => {}
            _ => recs.push(recorded(
                c,
                unavailable.clone(),
                Decision::Retry { due_at_ms: T0 + 3 * DAY, failure: unavailable.failure().expect("f") },
                now,
            )),
        }
    }
    assert_eq!(store.record(&recs, &[], &NoRaise).expect("record").len(), 9);
    f.add_handled_behind(7, T0 + 1);
    store
}

fn final_deliveries_older_than_the_cut_go_with_their_history(f: &dyn Fixture) {
    let store = a_store_with_every_state(f);
    let store = &*store;
    // Nothing is older than a cut before their claims.
    assert_eq!(retention::prune(store, &plan(T0, false)).expect("prune"), PruneCounts::default());

    let cut = plan(T0 + DAY, false);
    let preview = store.prune_preview(&cut).expect("preview");
    assert_eq!(states(store).len(), 10, "a preview deletes nothing");
    let pruned = retention::prune(store, &cut).expect("prune");
    assert_eq!(pruned, PruneCounts { deliveries: 5, attempts: 5, handled: 5, events: 4 });
    assert_eq!(preview, pruned, "the preview counts what goes");
    use DeliveryState::*;
    assert_eq!(states(store), vec![(5, Failed), (6, Parked), (7, Running), (8, Pending), (10, Pending)]);
    let DeliveryDetail { delivery: d, attempts: history } = store.delivery(8).expect("read").expect("there");
    assert_eq!((d.attempts, history.len()), (1, 1), "a delivery not final keeps its history");

    // Asked, failed and parked go too; event 9 stays while delivery 10 is left.
    let all = retention::prune(store, &plan(T0 + DAY, true)).expect("prune");
    assert_eq!(all, PruneCounts { deliveries: 2, attempts: 2, handled: 0, events: 2 });
    assert_eq!(states(store), vec![(7, Running), (8, Pending), (10, Pending)]);
    assert_eq!(store.delivery(10).expect("read").expect("there").delivery.event_id, 9);

    // The running delivery kept its handled record: its next claim finds it
    // handled and does not run it again.
    let r = claim(store, T0 + 4 * DAY, 10);
    assert!(
        r.ended.iter().any(|e| e.id == 7 && e.decision == ClaimDecision::Handled),
        "delivery 7's handled record survived: {r:?}"
    );
    assert!(r.run.iter().all(|c| c.id != 7));
    assert_eq!(store.delivery(7).expect("read").expect("there").delivery.state, Succeeded);

    // Delivery 7 ended at that claim, days after its first: its age counts from
    // its end, so a cut between the two keeps it, and one after takes it.
    let kept = retention::prune(store, &plan(T0 + 2 * DAY, false)).expect("prune");
    assert_eq!(kept.deliveries, 0, "{kept:?}");
    assert_eq!(store.delivery(7).expect("read").expect("there").delivery.state, Succeeded);
    let gone = retention::prune(store, &plan(T0 + 5 * DAY, false)).expect("prune");
    assert_eq!(gone.deliveries, 1, "{gone:?}");
    assert!(store.delivery(7).expect("read").is_none());
}

// Each test above, on every store.
jadpo_test_support::on_every_store!(crate::common::fixture; final_deliveries_older_than_the_cut_go_with_their_history,);
