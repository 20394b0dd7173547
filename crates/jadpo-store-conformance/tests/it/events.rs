//! The store suite for events beyond `emit`, on each store: events written in SQL
//! expanded once (two handles never expand one twice), kept invalid with the
//! reason, listed, shown and replayed.

use crate::common;
use jadpo_core::store::{Actions, EventDetail};

use common::fixture::Fixture;
use common::{T0, event};
use jadpo_check::program::DeliveryState;
use jadpo_core::store::{
    DeliveryFilter, EventFilter, Expanded, Expansion, NewDelivery, NewEvent, Replay, Store, UnexpandedEvent,
};
use std::collections::HashSet;
use std::sync::{Barrier, Mutex};

/// What the program makes of an event in these tests: `Paid` goes to `rec`, any
/// other name is unknown.
fn expansion(e: &UnexpandedEvent) -> Expansion {
    if e.name == "Paid" {
        Expansion::Deliveries(vec![NewDelivery { subscriber: "rec".into(), connection: "c".into(), order_key: None }])
    } else {
        Expansion::Invalid { code: "ingest.unknown_event".into(), reason: format!("no event `{}` is declared", e.name) }
    }
}

fn expand(store: &dyn Store, now: i64, limit: usize) -> jadpo_core::store::ExpandReport {
    store.expand_events(now, limit, &mut expansion).expect("expand")
}

fn an_event_written_in_sql_is_expanded_once_or_kept_invalid(f: &dyn Fixture) {
    let store = f.open();
    let emitted = store.emit(&[event(1)], T0).unwrap();
    let ids = f.emit_in_sql(&[("Paid", r#"{"id": "p2"}"#), ("Nope", r#"{"x": 1}"#)]);
    let counts = store.event_counts().unwrap();
    assert_eq!((counts.invalid, counts.unexpanded), (0, 2));
    let waiting = store.event(ids[0]).unwrap().unwrap();
    assert!(!waiting.event.expanded, "an event written in SQL waits");
    assert!(waiting.deliveries.is_empty());
    assert!(store.event(emitted[0]).unwrap().unwrap().event.expanded, "an emitted event is expanded at once");

    let report = expand(&*store, T0 + 5, 10);
    assert_eq!(report.expanded, vec![Expanded { id: ids[0], deliveries: 1 }]);
    assert_eq!(report.invalid.len(), 1);
    assert_eq!(report.invalid[0].id, ids[1]);
    assert_eq!(report.invalid[0].code, "ingest.unknown_event");
    // Nothing is expanded twice.
    assert_eq!(expand(&*store, T0 + 6, 10), Default::default());

    let all = store.deliveries(&DeliveryFilter::default()).unwrap();
    assert_eq!(all.len(), 2, "one delivery for the emitted event, one for the expanded one");
    let made = all.iter().find(|d| d.event_id == ids[0]).expect("the expanded event's delivery");
    assert_eq!((made.state, made.due_at_ms, made.budget_start_ms), (DeliveryState::Pending, Some(T0 + 5), T0 + 5));
    let EventDetail { deliveries: shown, .. } = store.event(ids[0]).unwrap().unwrap();
    assert_eq!(shown.iter().map(|d| d.id).collect::<Vec<_>>(), vec![made.id], "the expanded event shows its delivery");

    let EventDetail { event: invalid, deliveries } = store.event(ids[1]).unwrap().unwrap();
    assert!(invalid.expanded);
    assert_eq!(invalid.invalid, Some(("ingest.unknown_event".into(), "no event `Nope` is declared".into())));
    assert!(deliveries.is_empty(), "an invalid event is delivered to no one");
    let counts = store.event_counts().unwrap();
    assert_eq!((counts.invalid, counts.unexpanded), (1, 0));
}

fn two_handles_never_expand_one_event_twice(f: &dyn Fixture) {
    let payloads: Vec<String> = (0..400).map(|n| format!(r#"{{"id": "p{n}"}}"#)).collect();
    let events: Vec<(&str, &str)> = payloads.iter().map(|p| ("Paid", p.as_str())).collect();
    let store = f.open();
    let ids = f.emit_in_sql(&events);
    let expanded = Mutex::new(Vec::<i64>::new());
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let store = f.open();
                barrier.wait();
                loop {
                    let r = expand(&*store, T0, 23);
                    if r.expanded.is_empty() {
                        break;
                    }
                    expanded.lock().unwrap().extend(r.expanded.iter().map(|e| e.id));
                }
            });
        }
    });
    let expanded = expanded.into_inner().unwrap();
    let unique: HashSet<_> = expanded.iter().copied().collect();
    assert_eq!(expanded.len(), ids.len(), "every event expanded once");
    assert_eq!(unique, ids.iter().copied().collect::<HashSet<_>>());
    let all = store.deliveries(&DeliveryFilter::default()).unwrap();
    assert_eq!(all.len(), ids.len(), "one delivery per event");
    assert_eq!(all.iter().map(|d| d.event_id).collect::<HashSet<_>>().len(), ids.len());
}

fn events_are_listed_newest_first_shown_and_replayed(f: &dyn Fixture) {
    let store = f.open();
    let refunded = NewEvent { name: "Refunded".into(), payload: r#"{"id":"r1"}"#.into(), deliveries: Vec::new() };
    let a = store.emit(&[event(1)], T0).unwrap()[0];
    let b = store.emit(&[refunded], T0 + 1_000).unwrap()[0];
    let c = store.emit(&[event(3)], T0 + 2_000).unwrap()[0];

    let ids = |filter: EventFilter| store.events(&filter).unwrap().iter().map(|e| e.id).collect::<Vec<_>>();
    assert_eq!(ids(EventFilter::default()), vec![c, b, a]);
    assert_eq!(ids(EventFilter { name: Some("Paid".into()), ..Default::default() }), vec![c, a]);
    assert_eq!(ids(EventFilter { since_ms: Some(T0 + 1_000), ..Default::default() }), vec![c, b]);
    assert_eq!(ids(EventFilter { until_ms: Some(T0 + 1_000), ..Default::default() }), vec![a]);
    assert_eq!(ids(EventFilter { limit: Some(1), ..Default::default() }), vec![c]);
    let listed = store.events(&EventFilter::default()).unwrap();
    assert_eq!(listed[2].deliveries, vec![(DeliveryState::Pending, 1)]);
    assert!(listed[1].deliveries.is_empty(), "no subscriber listens to `Refunded`");

    let replayed = store.replay(&[Replay { of: a, event: event(1) }], T0 + 9_000).unwrap();
    assert_eq!(replayed.len(), 1);
    let EventDetail { event: replay, deliveries } = store.event(replayed[0]).unwrap().unwrap();
    assert_eq!((replay.replay_of, replay.expanded, replay.emitted_at_ms), (Some(a), true, T0 + 9_000));
    assert_eq!(deliveries.len(), 1);
    let EventDetail { event: original, deliveries: first } = store.event(a).unwrap().unwrap();
    assert_ne!(deliveries[0].id, first[0].id, "a replay's delivery is a new one");
    assert_eq!(original.replay_of, None);
    assert_eq!(
        (deliveries[0].state, deliveries[0].attempts, deliveries[0].budget_start_ms),
        (DeliveryState::Pending, 0, T0 + 9_000),
        "with a fresh budget, due at once"
    );
    assert_eq!(ids(EventFilter::default())[0], replayed[0]);
    assert!(store.event(replayed[0] + 100).unwrap().is_none());
}

fn events_stored_together_each_show_their_own_deliveries(f: &dyn Fixture) {
    let store = f.open();
    let to = |subscribers: &[&str]| -> Vec<NewDelivery> {
        subscribers
            .iter()
            .map(|s| NewDelivery { subscriber: (*s).into(), connection: "c".into(), order_key: None })
            .collect()
    };
    // A batch with two deliveries, none and one: each event names only its own.
    let batch: Vec<NewEvent> = [to(&["rec", "audit"]), to(&[]), to(&["rec"])]
        .into_iter()
        .map(|deliveries| NewEvent { name: "Paid".into(), payload: "{}".into(), deliveries })
        .collect();
    let emitted = store.emit(&batch, T0).unwrap();
    // The same shapes expanded from SQL, with an invalid event between.
    let written = f.emit_in_sql(&[("Two", "{}"), ("Nope", "{}"), ("One", "{}")]);
    let report = store
        .expand_events(T0 + 1, 10, &mut |e: &UnexpandedEvent| match e.name.as_str() {
            "Two" => Expansion::Deliveries(to(&["rec", "audit"])),
            "One" => Expansion::Deliveries(to(&["rec"])),
            _ => Expansion::Invalid { code: "ingest.unknown_event".into(), reason: "unknown".into() },
        })
        .unwrap();
    assert_eq!(
        report.expanded,
        vec![Expanded { id: written[0], deliveries: 2 }, Expanded { id: written[2], deliveries: 1 }]
    );
    let replayed = store
        .replay(
            &[Replay { of: emitted[0], event: batch[0].clone() }, Replay { of: emitted[2], event: batch[2].clone() }],
            T0 + 2,
        )
        .unwrap();
    for (ids, what) in
        [(emitted, "emitted"), (written, "written in SQL"), (vec![replayed[0], -1, replayed[1]], "replayed")]
    {
        let shown = |id: i64| -> Vec<(i64, String)> {
            let EventDetail { deliveries, .. } = store.event(id).unwrap().unwrap();
            deliveries.iter().map(|d| (d.event_id, d.subscriber.clone())).collect()
        };
        assert_eq!(shown(ids[0]), vec![(ids[0], "rec".into()), (ids[0], "audit".into())], "{what}");
        if ids[1] > 0 {
            assert_eq!(shown(ids[1]), vec![], "{what}");
        }
        assert_eq!(shown(ids[2]), vec![(ids[2], "rec".into())], "{what}");
        let counted = store.event(ids[0]).unwrap().unwrap().event.deliveries;
        assert_eq!(counted, vec![(DeliveryState::Pending, 2)], "{what}");
    }
}

// Each test above, on every store.
jadpo_test_support::on_every_store!(
    crate::common::fixture;
    events_stored_together_each_show_their_own_deliveries,
    an_event_written_in_sql_is_expanded_once_or_kept_invalid,
    two_handles_never_expand_one_event_twice,
    events_are_listed_newest_first_shown_and_replayed,
);
