//! Each conditional statement of the PostgreSQL store run with a stale row:
//! another process changed the row after it was read, so the statement must
//! change nothing. Nothing serializes writers here (`READ COMMITTED`), so these
//! races happen: where a statement's own read can be raced (an operator's retry,
//! an outcome, a schedule's run), the test holds the row changed in another
//! transaction until the statement waits on it, then commits, as the race goes;
//! where the rows are locked when read (claims, releases, expansions), the row is
//! changed in the statement's own transaction, to keep the guard right all the
//! same.
//! Skipped with a message when no server answers, except under `CI=true`.

use super::connect::PgLocation;
use super::{PgStore, Prepared, breakers, claims, outcomes};
use jadpo_check::program::{BreakerState, DeliveryState};
use jadpo_core::claim::{Change, ClaimPlan, RowWrite};
use jadpo_core::rules::breaker::BreakerRow;
use jadpo_core::rules::{ClaimDecision, Decision, Outcome};
use jadpo_core::store::{
    Actions, NewDelivery, NewEvent, NoRaise, OpenOptions, Recorded, RetryResult, ScheduleSpec, Store, Views,
};
use jadpo_test_support::PgDatabase;
use postgres::Client;
use std::time::{Duration, Instant};

const T0: i64 = 1_700_000_000_000;

/// A fresh database, dropped after.
struct Db {
    db: PgDatabase,
}

impl Db {
    fn new() -> Option<Db> {
        PgDatabase::new("jadpo_u").map(|db| Db { db })
    }

    fn url(&self) -> &str {
        &self.db.url
    }

    /// The store, with one pending delivery (id 1) of connection `c`, due at `T0`.
    fn store(&self) -> PgStore {
        let store = PgStore::open(self.url(), OpenOptions::read_write()).expect("open");
        emit_due(&store, T0);
        store
    }

    fn client(&self) -> Client {
        self.db.client()
    }

    /// A connection as the store makes them, its search path on the store's
    /// schema, for the store's statements run alone.
    fn store_client(&self) -> Client {
        PgLocation::parse(self.url(), None).expect("the URL").connect().expect("connect")
    }

    fn meddle(&self, sql: &str) {
        self.client().batch_execute(sql).expect("meddle");
    }

    fn row(&self) -> (String, i64, Option<i64>) {
        let r = self
            .client()
            .query_one("SELECT state, attempts, due_at FROM jadpo.deliveries WHERE id = 1", &[])
            .expect("row");
        (r.get(0), r.get(1), r.get(2))
    }

    /// Run `statement` while another transaction holds the row changed by
    /// `meddling`, committing that change once the statement waits on it (it read
    /// the row before: the race a guard must win).
    fn race<T: Send>(&self, meddling: &str, statement: impl FnOnce() -> T + Send) -> T {
        let mut other = self.client();
        let mut tx = other.transaction().expect("begin");
        tx.batch_execute(meddling).expect("meddle");
        let mut watch = self.client();
        std::thread::scope(|scope| {
            let running = scope.spawn(statement);
            let start = Instant::now();
            loop {
                let waiting: i64 = watch
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                         AND wait_event_type = 'Lock'",
                        &[],
                    )
                    .expect("waiting")
                    .get(0);
                if waiting > 0 {
                    break;
                }
                assert!(start.elapsed() < Duration::from_secs(60), "the statement never waited on the row");
                assert!(!running.is_finished(), "the statement did not wait on the row");
                std::thread::sleep(Duration::from_millis(10));
            }
            tx.commit().expect("commit");
            running.join().expect("the statement")
        })
    }
}

/// Read delivery 1 as a claim does, change it in the same transaction as
/// `meddling` says, and apply a claim's statement to it. Returns whether it took.
fn claim_statement(db: &Db, meddling: &str) -> bool {
    let mut c = db.store_client();
    let mut tx = c.transaction().expect("begin");
    let rows =
        claims::read_rows(&mut tx, &mut Prepared::default(), claims::DueIndex::Pending, claims::Span::default(), T0, 1)
            .expect("read");
    assert_eq!(rows.len(), 1);
    if !meddling.is_empty() {
        tx.batch_execute(meddling).expect("meddle");
    }
    let hold = ClaimDecision::Hold { lease_expired: false, failure: None };
    let write = RowWrite::of(&hold, rows[0].candidate.record.attempts, rows[0].candidate.record.budget_start_ms, T0)
        .expect("a hold writes");
    let plan = ClaimPlan { changes: vec![Change { row: 0, decision: hold, write }], left: Vec::new() };
    let took = claims::apply_all(&mut tx, &mut Prepared::default(), &rows, &plan, T0).expect("apply");
    tx.commit().expect("commit");
    took == vec![0]
}

#[test]
fn a_claim_statement_on_a_row_changed_since_changes_nothing() {
    let Some(db) = Db::new() else { return };
    let _store = db.store();
    // The row's due time moved, its state changed, its attempts counted.
    for meddling in [
        "UPDATE jadpo.deliveries SET due_at = due_at + 1",
        "UPDATE jadpo.deliveries SET state = 'running'",
        "UPDATE jadpo.deliveries SET attempts = 1",
    ] {
        db.meddle("UPDATE jadpo.deliveries SET state = 'pending', attempts = 0, due_at = 1700000000000");
        assert!(!claim_statement(&db, meddling), "after `{meddling}`");
        assert_ne!(db.row().0, "held", "after `{meddling}`");
    }
    db.meddle("UPDATE jadpo.deliveries SET state = 'pending', attempts = 0, due_at = 1700000000000");
    assert!(claim_statement(&db, ""), "the row as read");
    assert_eq!(db.row().0, "held");
}

fn recorded(claimed_at: i64) -> Recorded {
    Recorded {
        id: 1,
        connection: "c".into(),
        attempt: 1,
        started_at_ms: claimed_at,
        ended_at_ms: claimed_at + 5,
        outcome: Outcome::ok(),
        decision: Decision::Succeeded,
    }
}

#[test]
fn an_outcome_for_a_lease_taken_since_changes_nothing_and_adds_no_attempt() {
    let Some(db) = Db::new() else { return };
    let store = db.store();
    db.meddle("UPDATE jadpo.deliveries SET state = 'running', attempts = 1, claimed_at = 1700000000000");
    // Another process takes the ended lease while this outcome is being written.
    let written = db.race("UPDATE jadpo.deliveries SET claimed_at = claimed_at + 40000", || {
        store.record(&[recorded(T0)], &[], &NoRaise).expect("record")
    });
    assert_eq!(written, Vec::<usize>::new());
    assert_eq!(db.row().0, "running");
    let attempts: i64 = db.client().query_one("SELECT count(*) FROM jadpo.attempts", &[]).expect("n").get(0);
    assert_eq!(attempts, 0, "no attempt row for an outcome that was not written");
    assert_eq!(store.record(&[recorded(T0 + 40_000)], &[], &NoRaise).expect("record"), vec![0]);
    assert_eq!(db.row().0, "succeeded");
    let mut c = db.store_client();
    let mut tx = c.transaction().expect("begin");
    assert!(
        outcomes::conclude_all(&mut tx, &mut Prepared::default(), &[recorded(T0 + 40_000)])
            .expect("conclude")
            .is_empty()
    );
}

#[test]
fn an_operator_retry_of_a_row_changed_since_changes_nothing() {
    let Some(db) = Db::new() else { return };
    let store = db.store();
    db.meddle("UPDATE jadpo.deliveries SET state = 'failed', attempts = 3, due_at = NULL");
    // Read as failed; another operator's retry made it pending meanwhile.
    let results = db.race("UPDATE jadpo.deliveries SET state = 'pending', attempts = 0, due_at = 5", || {
        store.retry(&[1], T0 + 10).expect("retry")
    });
    assert_eq!(results, vec![RetryResult::NotRetryable(DeliveryState::Failed)]);
    assert_eq!(db.row(), ("pending".to_string(), 0, Some(5)));
    db.meddle("UPDATE jadpo.deliveries SET state = 'failed', attempts = 3, due_at = NULL");
    assert_eq!(store.retry(&[1], T0 + 10).expect("retry"), vec![RetryResult::Retried]);
}

#[test]
fn a_breaker_row_changed_since_it_was_read_is_not_overwritten() {
    let Some(db) = Db::new() else { return };
    let _store = db.store();
    let write = |old: Option<&BreakerRow>, next: &BreakerRow| {
        let mut c = db.store_client();
        let mut tx = c.transaction().expect("begin");
        let took = breakers::write_breaker(&mut tx, "c", old, next, T0).expect("write");
        tx.commit().expect("commit");
        took
    };
    let closed = BreakerRow::default();
    let failing = BreakerRow { failures_in_a_row: 1, ..BreakerRow::default() };
    // The first write of a row: only one process inserts it.
    assert!(write(None, &failing));
    assert!(!write(None, &failing));
    let two = BreakerRow { failures_in_a_row: 2, ..BreakerRow::default() };
    assert!(!write(Some(&closed), &two), "a count read before the insert");
    let reset = "UPDATE jadpo.circuit_breakers SET state = 'closed', failures_in_a_row = 1, opened_at = NULL, \
                 probe_delivery = NULL, alerts = 0";
    for meddling in [
        "UPDATE jadpo.circuit_breakers SET state = 'open'",
        "UPDATE jadpo.circuit_breakers SET failures_in_a_row = 3",
        "UPDATE jadpo.circuit_breakers SET opened_at = 1",
        "UPDATE jadpo.circuit_breakers SET probe_delivery = 9",
        "UPDATE jadpo.circuit_breakers SET alerts = 1",
    ] {
        db.meddle(reset);
        db.meddle(meddling);
        assert!(!write(Some(&failing), &two), "{meddling}");
    }
    db.meddle(reset);
    assert!(write(Some(&failing), &two));
    let state: String = db.client().query_one("SELECT state FROM jadpo.circuit_breakers", &[]).expect("state").get(0);
    assert_eq!(state, BreakerState::Closed.as_str());
}

#[test]
fn a_release_of_a_row_held_again_since_changes_nothing() {
    let Some(db) = Db::new() else { return };
    let _store = db.store();
    db.meddle(
        "UPDATE jadpo.deliveries SET state = 'held', due_at = NULL, held_since = 1700000000000, \
         held_connection = 'c'",
    );
    let release = |held_ms: i64, held_since: i64| {
        let mut c = db.store_client();
        let mut tx = c.transaction().expect("begin");
        let row = jadpo_core::store::rows::HeldRow { id: 1, held_ms, held_since_ms: Some(held_since) };
        let took = breakers::release(&mut tx, &[row], T0 + 60_000).expect("release");
        tx.commit().expect("commit");
        took == 1
    };
    // Released and held again by others since it was read as held from T0.
    db.meddle("UPDATE jadpo.deliveries SET held_since = held_since + 5000");
    assert!(!release(0, T0));
    assert_eq!(db.row().0, DeliveryState::Held.as_str());
    // Its held time counted by another release since.
    db.meddle("UPDATE jadpo.deliveries SET held_ms = 7");
    assert!(!release(0, T0 + 5_000));
    assert!(release(7, T0 + 5_000));
    let held_ms: i64 = db.client().query_one("SELECT held_ms FROM jadpo.deliveries", &[]).expect("held").get(0);
    assert_eq!(held_ms, 55_007);
}

#[test]
fn a_schedule_run_taken_or_ended_by_another_changes_nothing() {
    let Some(db) = Db::new() else { return };
    let store = db.store();
    let spec = ScheduleSpec { name: "nightly".into(), every_ms: 60_000, timeout_ms: 1_000 };
    store.sync_schedules(std::slice::from_ref(&spec), T0).expect("sync");
    // Read as due at T0 + 60s; another process takes that run meanwhile.
    let claimed = db.race("UPDATE jadpo.schedules SET due_at = due_at + 60000, runs = 1", || {
        store.claim_schedules(std::slice::from_ref(&spec), T0 + 60_000).expect("claim")
    });
    assert_eq!(claimed, vec![], "a run another process took");
    // Run 1's end after run 2 was taken: not written.
    db.meddle("UPDATE jadpo.schedules SET runs = 2");
    let ended = db.race("UPDATE jadpo.schedules SET runs = 3", || {
        store.record_schedule("nightly", 2, T0 + 70_000, None).expect("record")
    });
    assert!(!ended, "the end of a run no longer the latest");
    assert!(!store.record_schedule("nightly", 1, T0 + 70_000, None).expect("record"));
    assert!(store.record_schedule("nightly", 3, T0 + 70_000, None).expect("record"));
    let claimed = store.claim_schedules(std::slice::from_ref(&spec), T0 + 120_000).expect("claim");
    assert_eq!(claimed.len(), 1, "the next due time is taken");
}

/// The ids a claim at `now` takes, each decided to run.
fn run_ids(store: &PgStore, now: i64, limit: usize) -> Vec<i64> {
    let mut run = |c: &jadpo_core::store::ClaimCandidate| {
        let attempt = c.record.attempts + 1;
        let decision =
            ClaimDecision::Run { attempt, lease_until_ms: now + 60_000, lease_expired: false, failure: None };
        jadpo_core::store::ClaimVerdict { decision, probe: None }
    };
    store.claim(now, limit, &mut run, &NoRaise).expect("claim").run.iter().map(|c| c.id).collect()
}

/// Store one `Paid` event with one delivery, due at `due`.
fn emit_due(store: &PgStore, due: i64) {
    let event = NewEvent {
        name: "Paid".into(),
        payload: "{}".into(),
        deliveries: vec![NewDelivery { subscriber: "rec".into(), connection: "c".into(), order_key: None }],
    };
    store.emit(&[event], due).expect("emit");
}

#[test]
fn claims_read_on_after_a_full_batch_and_from_the_head_at_least_every_tick_or_when_short() {
    use jadpo_core::config::CLAIM_FROM_HEAD_EVERY_MS as EVERY;
    let every = EVERY as i64;
    let Some(db) = Db::new() else { return };
    let store = db.store();
    for _ in 0..3 {
        emit_due(&store, T0);
    }
    // A full batch: the next claim reads on after it.
    assert_eq!(run_ids(&store, T0, 1), vec![1]);
    // A delivery due earlier than where the claims read on (committed late, say).
    emit_due(&store, T0 - 10);
    assert_eq!(run_ids(&store, T0 + 1, 1), vec![2], "read on after the last row taken");
    assert_eq!(run_ids(&store, T0 + every - 1, 1), vec![3], "the early one waits within a tick");
    assert_eq!(run_ids(&store, T0 + every, 1), vec![5], "read from the head a tick later");
    assert_eq!(run_ids(&store, T0 + every + 1, 1), vec![4]);
    // A claim that reads on and comes back short takes the rows it passed that
    // are due, in the same claim: here the only one due, behind where it read on.
    emit_due(&store, T0 - 20);
    assert_eq!(run_ids(&store, T0 + every + 2, 1), vec![6], "the row behind, at once");
    emit_due(&store, T0 + every + 3);
    emit_due(&store, T0 + every + 3);
    assert_eq!(run_ids(&store, T0 + every + 3, 1), vec![7]);
    emit_due(&store, T0 - 30);
    assert_eq!(run_ids(&store, T0 + every + 4, 10), vec![9, 8], "the one passed first, then the one ahead");
    assert_eq!(run_ids(&store, T0 + every + 5, 10), Vec::<i64>::new());
}

#[test]
fn a_row_due_again_where_the_claims_read_on_from_is_taken_by_the_next_claim() {
    let Some(db) = Db::new() else { return };
    let store = db.store();
    assert_eq!(run_ids(&store, T0, 1), vec![1], "a full batch: the claims read on after it");
    // Due again where it stood, at the very entry the claims read on after (held
    // there and released at the same time, say).
    db.meddle(&format!("UPDATE jadpo.deliveries SET state = 'pending', due_at = {T0}, lease_until = NULL"));
    assert_eq!(run_ids(&store, T0, 1), vec![1]);
}

#[test]
fn a_claim_reads_on_while_the_one_before_it_still_holds_its_rows() {
    let Some(db) = Db::new() else { return };
    let store = std::sync::Arc::new(db.store());
    for _ in 0..3 {
        emit_due(&store, T0);
    }
    // The first claim has locked its rows and is deciding them when the second
    // one starts: the second neither waits for it nor steps over its rows.
    let mut second = None;
    let mut deciding = |c: &jadpo_core::store::ClaimCandidate| {
        if second.is_none() {
            let (tx, rx) = std::sync::mpsc::channel();
            let other = store.clone();
            std::thread::spawn(move || tx.send(run_ids(&other, T0 + 6, 2)));
            second = Some(rx.recv_timeout(Duration::from_secs(30)).expect("the second claim waited on the first"));
        }
        let attempt = c.record.attempts + 1;
        let decision = ClaimDecision::Run { attempt, lease_until_ms: T0 + 60_000, lease_expired: false, failure: None };
        jadpo_core::store::ClaimVerdict { decision, probe: None }
    };
    let first: Vec<i64> =
        store.claim(T0 + 5, 2, &mut deciding, &NoRaise).expect("claim").run.iter().map(|c| c.id).collect();
    assert_eq!(first, vec![1, 2]);
    assert_eq!(second, Some(vec![3, 4]), "read on after the rows the first holds");
    // A claim whose time is a little before the last read's (it took its time
    // before its turn came) reads on too, past a row due earlier.
    emit_due(&store, T0 - 10);
    emit_due(&store, T0);
    assert_eq!(run_ids(&store, T0 + 4, 1), vec![6]);
}

#[test]
fn an_ended_lease_is_taken_back_at_its_end_however_the_claims_read_on() {
    let Some(db) = Db::new() else { return };
    let store = db.store();
    assert_eq!(run_ids(&store, T0, 10), vec![1]);
    let lease_end = T0 + 60_000;
    // Claims in between read on past the ended leases they found (none).
    for now in [T0 + 1, lease_end - 500, lease_end - 1] {
        assert_eq!(run_ids(&store, now, 10), Vec::<i64>::new(), "at {now}");
    }
    assert_eq!(run_ids(&store, lease_end, 10), vec![1], "taken back at the lease's end");
}

#[test]
fn a_read_of_a_schema_older_than_the_reads_know_is_refused_with_what_updates_it() {
    let Some(db) = Db::new() else { return };
    drop(db.store());
    db.meddle(&format!("DELETE FROM jadpo.schema_migrations WHERE version >= {}", super::schema::READS_NEED));
    let err = PgStore::open(db.url(), OpenOptions::read_only()).expect_err("an older schema");
    assert!(
        matches!(err, jadpo_core::store::StoreError::TooOld { found, needs, .. } if found == super::schema::READS_NEED - 1 && needs == super::schema::READS_NEED),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "`{url}` has schema version {old}, older than this jadpoc reads (version {needs} or newer): \
             `jadpoc migrate --db '{url}'` applies migrations {needs} to {known} (`--print` shows their SQL \
             first), as `jadpoc run` and `jadpoc emit` do",
            url = db.url(),
            old = super::schema::READS_NEED - 1,
            needs = super::schema::READS_NEED,
            known = super::schema::VERSION,
        )
    );
    // The oldest version the reads know opens.
    db.meddle(&format!("INSERT INTO jadpo.schema_migrations (version) VALUES ({})", super::schema::READS_NEED));
    assert!(PgStore::open(db.url(), OpenOptions::read_only()).is_ok());
}

#[test]
fn a_store_migrated_from_handled_rows_and_the_index_by_event_keeps_its_history() {
    let Some(db) = Db::new() else { return };
    let mut c = db.client();
    super::schema::migrate_to(&mut c, "jadpo", "test", 5).expect("version 5");
    // Event 1 with a succeeded and a pending delivery, event 2 with one that
    // succeeded at its second attempt; handled records as rows of their own.
    c.batch_execute(&format!(
        "INSERT INTO jadpo.events (name, payload, emitted_at) VALUES ('Paid', '{{}}', {T0}), ('Paid', '{{}}', {T0});
         INSERT INTO jadpo.deliveries (event_id, subscriber, connection, state, attempts, due_at, claimed_at,
             budget_start, created_at) VALUES
             (1, 'a', 'c', 'succeeded', 1, NULL, {T0}, {T0}, {T0}),
             (1, 'b', 'c', 'pending', 0, {T0}, NULL, {T0}, {T0}),
             (2, 'a', 'c', 'succeeded', 2, NULL, {T0}, {T0}, {T0});
         INSERT INTO jadpo.attempts (delivery_id, attempt, started_at, duration_ms, outcome) VALUES
             (1, 1, {T0}, 5, 'succeeded'), (3, 1, {T0}, 5, 'failed'), (3, 2, {T0}, 7, 'succeeded');
         INSERT INTO jadpo.handled (delivery_id, handled_at) VALUES (1, {T0} + 5), (3, {T0} + 9);"
    ))
    .expect("fill version 5");
    let store = PgStore::open(db.url(), OpenOptions::read_write()).expect("migrated");
    let handled: Vec<(i64, Option<i64>)> = c
        .query("SELECT id, handled_at FROM jadpo.deliveries ORDER BY id", &[])
        .expect("handled")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(handled, vec![(1, Some(T0 + 5)), (2, None), (3, Some(T0 + 9))]);
    let ids = |event: i64| -> Vec<i64> {
        let deliveries = store.event(event).expect("event").expect("found").deliveries;
        deliveries.iter().map(|d| d.id).collect()
    };
    assert_eq!((ids(1), ids(2)), (vec![1, 2], vec![3]));
    let history = store.delivery(3).expect("delivery").expect("found").attempts;
    assert_eq!(history.iter().map(|a| (a.attempt, a.duration_ms)).collect::<Vec<_>>(), vec![(1, 5), (2, 7)]);
    // An event stored after the migration names its delivery, whose id follows on.
    emit_due(&store, T0);
    assert_eq!(ids(3), vec![4]);
    // The succeeded deliveries go with their handled records and attempts; event 2
    // goes with its last delivery, event 1 stays with its pending one.
    let plan = jadpo_core::retention::plan(T0 + 86_400_000, 3_600_000, false);
    let pruned = jadpo_core::retention::prune(&store, &plan).expect("prune");
    assert_eq!((pruned.deliveries, pruned.handled, pruned.attempts, pruned.events), (2, 2, 3, 1));
    assert_eq!(ids(1), vec![2]);
    assert!(store.event(2).expect("event").is_none());
}

#[test]
fn an_expansion_of_an_event_expanded_since_changes_nothing() {
    use jadpo_core::store::{Expansion, UnexpandedEvent};
    let Some(db) = Db::new() else { return };
    drop(db.store());
    db.meddle(
        "INSERT INTO jadpo.events (name, payload, emitted_at, expanded) VALUES ('Paid', '{}', 0, false), \
               ('Paid', '{}', 0, false)",
    );
    let mut c = db.store_client();
    let mut tx = c.transaction().expect("begin");
    let read: Vec<UnexpandedEvent> =
        [2, 3].into_iter().map(|id| UnexpandedEvent { id, name: "Paid".into(), payload: "{}".into() }).collect();
    // Event 2 was expanded (found invalid) after it was read.
    tx.batch_execute("UPDATE jadpo.events SET expanded = true, invalid_code = 'theirs' WHERE id = 2").expect("meddle");
    let to_rec = || {
        Expansion::Deliveries(vec![NewDelivery { subscriber: "rec".into(), connection: "c".into(), order_key: None }])
    };
    let marked = super::events::write_expansions(&mut tx, &read, &[to_rec(), to_rec()], T0).expect("write");
    assert_eq!(marked, vec![false, true], "only the event still waiting");
    let rows: Vec<(i64, Option<String>, Vec<i64>)> = tx
        .query("SELECT id, invalid_code, delivery_ids FROM jadpo.events WHERE id IN (2, 3) ORDER BY id", &[])
        .expect("events")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let made: Vec<(i64, i64)> = tx
        .query("SELECT id, event_id FROM jadpo.deliveries WHERE event_id IN (2, 3)", &[])
        .expect("deliveries")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(made.len(), 1, "no delivery for the event expanded since: {made:?}");
    assert_eq!(rows, vec![(2, Some("theirs".into()), vec![]), (3, None, vec![made[0].0])]);
    assert_eq!(made[0].1, 3);
}

#[test]
fn stores_in_two_schemas_of_one_database_reach_only_their_own_tables() {
    use jadpo_core::store::{DeliveryFilter, Transact};
    let Some(db) = Db::new() else { return };
    // Tables named as the store's, of other shapes, in `public` (where a search
    // path left as it was would find them) before either store exists.
    db.meddle(
        "CREATE TABLE public.deliveries (id text PRIMARY KEY, note text); \
         INSERT INTO public.deliveries VALUES ('theirs', 'kept'); \
         CREATE TABLE public.events (id text PRIMARY KEY);",
    );
    let a = PgStore::open(&format!("{}?schema=team_a", db.url()), OpenOptions::read_write()).expect("open a");
    let b = PgStore::open(&format!("{}?schema=team_b", db.url()), OpenOptions::read_write()).expect("open b");
    emit_due(&a, T0);
    emit_due(&a, T0);
    let ids = |store: &PgStore| -> Vec<i64> {
        store.deliveries(&DeliveryFilter::default()).expect("deliveries").iter().map(|d| d.id).collect()
    };
    assert_eq!((ids(&a), ids(&b)), (vec![1, 2], vec![]));
    assert_eq!(b.events(&Default::default()).expect("events").len(), 0, "an event of the other schema");
    assert_eq!(run_ids(&b, T0, 10), Vec::<i64>::new(), "nothing to claim in the other schema");
    assert_eq!(run_ids(&a, T0, 10), vec![1, 2]);
    // An event written in SQL by the application, whose session's search path
    // finds `public.events` first, goes to the schema whose `emit` it calls.
    let mut app = db.client();
    app.batch_execute("SELECT team_b.emit('Paid', '{}')").expect("emit in SQL");
    assert_eq!((a.expansion_waiting().expect("a"), b.expansion_waiting().expect("b")), (false, true));
    assert_eq!(b.events(&Default::default()).expect("events").iter().map(|e| e.id).collect::<Vec<_>>(), vec![1]);
    // A temporary table named as the store's, on the store's own connection, is
    // not read either: `pg_temp` comes last.
    let listed = a
        .with_client(|c| {
            c.batch_execute("CREATE TEMPORARY TABLE deliveries (id text)").expect("a temporary table");
            super::console::deliveries(c, &DeliveryFilter::default())
        })
        .expect("deliveries");
    assert_eq!(listed.iter().map(|d| d.id).collect::<Vec<_>>(), vec![1, 2]);
    let kept: Vec<(String, String)> = app
        .query("SELECT id, note FROM public.deliveries", &[])
        .expect("public")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(kept, vec![("theirs".to_string(), "kept".to_string())]);
    let counted: i64 = app.query_one("SELECT count(*) FROM public.events", &[]).expect("public").get(0);
    assert_eq!(counted, 0);
    // Each connection's search path, as the store set it.
    let path = |store: &PgStore| -> String {
        store.with_client(|c| Ok(c.query_one("SHOW search_path", &[]).expect("show").get(0))).expect("path")
    };
    assert_eq!(path(&a), "team_a, pg_catalog, pg_temp");
    assert_eq!(path(&b), "team_b, pg_catalog, pg_temp");
}
