//! The measurement of docs/console.md: paging deliveries on a store of
//! 1,000,000 (ignored by default: it fills the store for a minute or so).
//!
//! ```sh
//! cargo test -p jadpo-console --test it -- --ignored --nocapture paging
//! ```
//!
//! The store is filled by `emit` in batches of 10,000 events, each with one
//! delivery (a program whose one subscriber takes every event); the oldest
//! 10,000 are then claimed and failed, the worst case for a page of failed
//! deliveries read from the newest down without an index. Each page is read
//! five times and the median shown, with SQLite's plan for it.

use jadpo_check::program::DeliveryState;
use jadpo_core::store::{DeliveryFilter, NewDelivery, NewEvent, Store, Views};
use jadpo_store_sqlite::SqliteStore;
use std::time::{Duration, Instant};

const BATCH: usize = 10_000;

fn deliveries_wanted() -> usize {
    std::env::var("JADPO_CONSOLE_BENCH_DELIVERIES").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000)
}

fn median(store: &SqliteStore, filter: &DeliveryFilter) -> (Duration, usize) {
    let mut times = Vec::new();
    let mut rows = 0;
    for _ in 0..5 {
        let start = Instant::now();
        rows = store.deliveries(filter).expect("a page").len();
        times.push(start.elapsed());
    }
    times.sort();
    (times[2], rows)
}

#[test]
#[ignore = "fills a store of 1,000,000 deliveries; run with --ignored --nocapture"]
fn paging_stays_fast_on_a_million_deliveries() {
    let n = deliveries_wanted();
    let dir = tempfile::tempdir().expect("a folder");
    let store = SqliteStore::open(&dir.path().join("outbox.db")).expect("a store");
    let start = Instant::now();
    let mut made = 0;
    while made < n {
        let events: Vec<NewEvent> = (made..(made + BATCH).min(n))
            .map(|i| NewEvent {
                name: "Paid".into(),
                payload: format!(r#"{{"id":"p{i}"}}"#),
                deliveries: vec![NewDelivery {
                    subscriber: "booking".into(),
                    connection: "ledger".into(),
                    order_key: None,
                }],
            })
            .collect();
        made += events.len();
        store.emit(&events, crate::T0).expect("emit");
    }
    let filled = start.elapsed();
    let failing = (n / 100).max(1);
    let mut failed = 0;
    while failed < failing {
        crate::attempt_all(&store, crate::T0 + 1, "booking", "fake.rejected");
        failed = store
            .status(crate::T0 + 2)
            .expect("status")
            .states
            .iter()
            .find(|(s, _)| *s == DeliveryState::Failed)
            .map_or(0, |(_, k)| *k as usize);
    }
    println!("filled {n} deliveries in {filled:?}; {failed} failed (the oldest), the rest pending");
    let page = 50;
    let cases = [
        ("newest page", DeliveryFilter { limit: Some(page + 1), ..DeliveryFilter::default() }),
        (
            "page at the middle",
            DeliveryFilter { limit: Some(page + 1), before_id: Some(n as i64 / 2), ..DeliveryFilter::default() },
        ),
        (
            "failed, newest page",
            DeliveryFilter { state: Some(DeliveryState::Failed), limit: Some(page + 1), ..DeliveryFilter::default() },
        ),
        (
            "failed, page at the middle",
            DeliveryFilter {
                state: Some(DeliveryState::Failed),
                limit: Some(page + 1),
                before_id: Some(failed as i64 / 2),
                ..DeliveryFilter::default()
            },
        ),
        (
            "failed with a code, newest page",
            DeliveryFilter {
                state: Some(DeliveryState::Failed),
                failure_code: Some("fake.rejected".into()),
                limit: Some(page + 1),
                ..DeliveryFilter::default()
            },
        ),
        (
            "pending, page at the middle",
            DeliveryFilter {
                state: Some(DeliveryState::Pending),
                limit: Some(page + 1),
                before_id: Some(n as i64 / 2),
                ..DeliveryFilter::default()
            },
        ),
        (
            "subscriber, newest page",
            DeliveryFilter { subscriber: Some("booking".into()), limit: Some(page + 1), ..DeliveryFilter::default() },
        ),
    ];
    println!("| page | rows | median of 5 | plan |\n|---|---|---|---|");
    for (name, filter) in &cases {
        let (took, rows) = median(&store, filter);
        let plan = store.deliveries_plan(filter).expect("a plan").join("; ");
        println!("| {name} | {rows} | {:.2} ms | {plan} |", took.as_secs_f64() * 1000.0);
        assert_eq!(rows, page + 1, "{name}");
        if filter.state == Some(DeliveryState::Failed) {
            assert!(plan.contains("jadpo_deliveries_failed"), "{name}: {plan}");
        } else {
            assert!(plan.contains("SCAN d;") || plan.contains("USING INTEGER PRIMARY KEY (rowid<?)"), "{name}: {plan}");
        }
        assert!(!plan.contains("TEMP B-TREE"), "{name} sorts: {plan}");
    }
    let start = Instant::now();
    let rates = store.attempt_rates(crate::T0 - 3_600_000).expect("rates");
    println!(
        "attempts per minute over the last hour ({} minutes): {:.2} ms",
        rates.len(),
        start.elapsed().as_secs_f64() * 1000.0
    );
}
