//! Each conditional statement run with a stale row: another process changed the
//! row after it was read, so the statement must change nothing. SQLite's write
//! lock makes these races impossible between two of our transactions; these tests
//! keep the guards right for a store where nothing serializes the writers.

use super::claims;
use super::tx::Tx;
use super::{SqliteStore, breakers, outcomes, schedules};
use jadpo_check::program::{BreakerState, DeliveryState, FailureKind};
use jadpo_core::claim::{RowWrite, Seen};
use jadpo_core::rules::ClaimDecision;
use jadpo_core::rules::breaker::BreakerRow;
use jadpo_core::rules::{Decision, Failure, Outcome, Record};
use jadpo_core::store::rows::HeldRow;
use jadpo_core::store::{NewDelivery, NewEvent, NoRaise, Recorded, Store, Views};

const T0: i64 = 1_700_000_000_000;

/// `n` events `Paid`, of one delivery each (to `rec` through `c`).
fn paid(n: usize) -> Vec<NewEvent> {
    let event = || NewEvent {
        name: "Paid".into(),
        payload: "{}".into(),
        deliveries: vec![NewDelivery { subscriber: "rec".into(), connection: "c".into(), order_key: None }],
    };
    (0..n).map(|_| event()).collect()
}

/// A store with one pending delivery (id 1), due at `T0`.
fn store() -> SqliteStore {
    let store = SqliteStore::open_in_memory().expect("open");
    store.emit(&paid(1), T0).expect("emit");
    store
}

/// Run `f` in a write transaction, committed.
fn write<T>(store: &SqliteStore, f: impl FnOnce(&Tx<'_>) -> T) -> T {
    let mut conn = store.lock();
    let tx = Tx::immediate(&mut conn).expect("begin");
    let out = f(&tx);
    tx.commit().expect("commit");
    out
}

/// Change the row behind the store's back, as another process would.
fn meddle(store: &SqliteStore, sql: &str) {
    store.lock().execute_batch(sql).expect("meddle");
}

fn row(store: &SqliteStore) -> (String, i64, Option<i64>) {
    store
        .lock()
        .query_row("SELECT state, attempts, due_at FROM jadpo_deliveries WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .expect("row")
}

const PENDING: Seen = Seen { id: 1, state: DeliveryState::Pending, attempts: 0, due_at: Some(T0) };

/// The four decisions a claim writes on a pending row read as [`PENDING`]: hold,
/// handled, run, give up.
fn decisions(failure: &Failure) -> [ClaimDecision; 4] {
    [
        ClaimDecision::Hold { lease_expired: false, failure: Some(failure.clone()) },
        ClaimDecision::Handled,
        ClaimDecision::Run { attempt: 1, lease_until_ms: T0 + 31_000, lease_expired: false, failure: None },
        ClaimDecision::GiveUp {
            failure: failure.clone(),
            because: jadpo_core::rules::FailedBecause::PastWindow,
            lease_expired: false,
        },
    ]
}

/// The claim's statement for `decision` on the row read as [`PENDING`].
fn claim_write(tx: &Tx<'_>, decision: &ClaimDecision) -> bool {
    let write = RowWrite::of(decision, PENDING.attempts, T0, T0).expect("a decision that writes");
    claims::apply(&mut claims::Writes::new(tx), PENDING, "c", &write, T0).expect("statement")
}

#[test]
fn a_claim_statement_on_a_row_changed_since_changes_nothing() {
    let failure = Failure::new("fake.unavailable", FailureKind::Unavailable);
    // Each of the claim's statements, on a row whose due time another process
    // moved, whose state it changed, and whose attempts it counted.
    let stale = [
        "UPDATE jadpo_deliveries SET due_at = due_at + 1",
        "UPDATE jadpo_deliveries SET state = 'running'",
        "UPDATE jadpo_deliveries SET attempts = 1",
    ];
    for meddling in stale {
        for decision in decisions(&failure) {
            let s = store();
            meddle(&s, meddling);
            let before = row(&s);
            assert!(!write(&s, |tx| claim_write(tx, &decision)), "{decision:?} after `{meddling}`");
            assert_eq!(row(&s), before, "{decision:?} after `{meddling}`");
        }
    }
    // As read, each takes the row.
    for decision in decisions(&failure) {
        let s = store();
        assert!(write(&s, |tx| claim_write(tx, &decision)), "{decision:?} on the row as read");
    }
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
    let s = store();
    let run = ClaimDecision::Run { attempt: 1, lease_until_ms: T0 + 31_000, lease_expired: false, failure: None };
    assert!(write(&s, |tx| claim_write(tx, &run)));
    // Another process took the ended lease: same attempt number, a later claim.
    meddle(&s, "UPDATE jadpo_deliveries SET claimed_at = claimed_at + 40000");
    assert_eq!(s.record(&[recorded(T0)], &[], &NoRaise).expect("record"), Vec::<usize>::new());
    assert_eq!(row(&s).0, "running");
    let attempts: i64 = s.lock().query_row("SELECT count(*) FROM jadpo_attempts", [], |r| r.get(0)).expect("count");
    assert_eq!(attempts, 0, "no attempt row for an outcome that was not written");
    assert!(!write(&s, |tx| outcomes::conclude(tx, &recorded(T0))).expect("conclude"));
    assert!(write(&s, |tx| outcomes::conclude(tx, &recorded(T0 + 40_000))).expect("conclude"));
}

#[test]
fn an_operator_retry_of_a_row_changed_since_changes_nothing() {
    let s = store();
    meddle(&s, "UPDATE jadpo_deliveries SET state = 'failed', attempts = 3");
    let fresh = Record::new(T0 + 10);
    // Read as failed; another operator's retry made it pending meanwhile.
    meddle(&s, "UPDATE jadpo_deliveries SET state = 'pending', attempts = 0");
    assert!(!write(&s, |tx| outcomes::retry_one(tx, 1, DeliveryState::Failed, &fresh)).expect("retry"));
    meddle(&s, "UPDATE jadpo_deliveries SET state = 'failed', attempts = 3");
    assert!(write(&s, |tx| outcomes::retry_one(tx, 1, DeliveryState::Failed, &fresh)).expect("retry"));
}

#[test]
fn a_breaker_row_changed_since_it_was_read_is_not_overwritten() {
    let s = store();
    let closed = BreakerRow::default();
    let failing = BreakerRow { failures_in_a_row: 1, ..BreakerRow::default() };
    // The first write of a row: only one process inserts it.
    assert!(write(&s, |tx| breakers::write_breaker(tx, "c", None, &failing, T0)).expect("insert"));
    assert!(!write(&s, |tx| breakers::write_breaker(tx, "c", None, &failing, T0)).expect("insert"));
    // An update from a row read before that insert's count: nothing.
    let two = BreakerRow { failures_in_a_row: 2, ..BreakerRow::default() };
    assert!(!write(&s, |tx| breakers::write_breaker(tx, "c", Some(&closed), &two, T0)).expect("update"));
    // Each guarded column, changed behind the reader's back.
    for meddling in [
        "UPDATE jadpo_circuit_breakers SET state = 'open'",
        "UPDATE jadpo_circuit_breakers SET opened_at = 1",
        "UPDATE jadpo_circuit_breakers SET probe_delivery = 9",
        "UPDATE jadpo_circuit_breakers SET alerts = 1",
        // An operator's pause: a probe decided before it must not go.
        "UPDATE jadpo_circuit_breakers SET paused_at = 1",
    ] {
        meddle(
            &s,
            "UPDATE jadpo_circuit_breakers SET state = 'closed', failures_in_a_row = 1, opened_at = NULL, \
                    probe_delivery = NULL, alerts = 0, paused_at = NULL",
        );
        meddle(&s, meddling);
        assert!(
            !write(&s, |tx| breakers::write_breaker(tx, "c", Some(&failing), &two, T0)).expect("update"),
            "{meddling}"
        );
    }
    meddle(
        &s,
        "UPDATE jadpo_circuit_breakers SET state = 'closed', failures_in_a_row = 1, opened_at = NULL, \
                probe_delivery = NULL, alerts = 0, paused_at = NULL",
    );
    assert!(write(&s, |tx| breakers::write_breaker(tx, "c", Some(&failing), &two, T0)).expect("update"));
    let state: String =
        s.lock().query_row("SELECT state FROM jadpo_circuit_breakers", [], |r| r.get(0)).expect("state");
    assert_eq!(state, BreakerState::Closed.as_str());
}

#[test]
fn a_release_of_a_row_held_again_since_changes_nothing() {
    let s = store();
    assert!(write(&s, |tx| claim_write(tx, &ClaimDecision::Hold { lease_expired: false, failure: None })));
    // Released and held again by others since it was read as held from T0.
    meddle(&s, "UPDATE jadpo_deliveries SET held_since = held_since + 5000");
    assert!(
        !write(&s, |tx| breakers::release_one(
            tx,
            &HeldRow { id: 1, held_ms: 0, held_since_ms: Some(T0) },
            T0 + 60_000
        ))
        .expect("release")
    );
    assert_eq!(row(&s).0, DeliveryState::Held.as_str());
    assert!(
        write(&s, |tx| breakers::release_one(
            tx,
            &HeldRow { id: 1, held_ms: 0, held_since_ms: Some(T0 + 5_000) },
            T0 + 60_000
        ))
        .expect("release")
    );
    let held_ms: i64 = s.lock().query_row("SELECT held_ms FROM jadpo_deliveries", [], |r| r.get(0)).expect("held");
    assert_eq!(held_ms, 55_000);
}

#[test]
fn a_schedule_run_taken_or_ended_by_another_changes_nothing() {
    let s = store();
    let spec = jadpo_core::store::ScheduleSpec { name: "nightly".into(), every_ms: 60_000, timeout_ms: 1_000 };
    s.sync_schedules(std::slice::from_ref(&spec), T0).expect("sync");
    // Read as due at T0 + 60s; another process took that run since.
    meddle(&s, "UPDATE jadpo_schedules SET due_at = due_at + 60000, runs = 1");
    assert!(!write(&s, |tx| schedules::take_run(tx, "nightly", T0 + 60_000, T0 + 120_000, T0 + 60_000)).expect("take"));
    // Run 1's end after run 2 was taken: not written.
    meddle(&s, "UPDATE jadpo_schedules SET runs = 2");
    assert!(!s.record_schedule("nightly", 1, T0 + 70_000, None).expect("record"));
    assert!(s.record_schedule("nightly", 2, T0 + 70_000, None).expect("record"));
}

#[test]
fn a_cleared_store_in_memory_is_as_new_and_a_file_is_refused() {
    let store = store();
    meddle(&store, "UPDATE jadpo_deliveries SET handled_at = 0 WHERE id = 1");
    store.clear_in_memory().expect("clear");
    let tables: Vec<String> = {
        let conn = store.lock();
        let mut stmt =
            conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'jadpo%'").expect("list");
        stmt.query_map([], |r| r.get(0)).expect("query").collect::<Result<_, _>>().expect("names")
    };
    assert!(tables.len() >= 6, "{tables:?}");
    for table in &tables {
        let n: i64 = store.lock().query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)).expect("count");
        assert_eq!(n, 0, "{table} has rows after clearing");
    }
    // Ids count from 1 again, as on a new store.
    let event = NewEvent { name: "Paid".into(), payload: "{}".into(), deliveries: vec![] };
    assert_eq!(store.emit(&[event], T0).expect("emit"), vec![1]);

    let dir = tempfile::tempdir().expect("tempdir");
    let file = SqliteStore::open(&dir.path().join("store.db")).expect("open a file");
    let event = NewEvent { name: "Paid".into(), payload: "{}".into(), deliveries: vec![] };
    file.emit(&[event], T0).expect("emit");
    assert!(file.clear_in_memory().is_err());
    let n: i64 = file.lock().query_row("SELECT count(*) FROM jadpo_events", [], |r| r.get(0)).expect("count");
    assert_eq!(n, 1, "a refused clear leaves the file as it was");
}

#[test]
fn statements_bound_by_position_number_their_names_in_the_order_bound() {
    let store = store();
    let conn = store.lock();
    let outcomes = [(outcomes::CONCLUDE, &outcomes::CONCLUDE_PARAMS[..])];
    for (sql, names) in outcomes.into_iter().chain(claims::WRITE_PARAMS) {
        let stmt = conn.prepare(sql).expect("prepare");
        assert_eq!(stmt.parameter_count(), names.len(), "{sql}");
        for (i, name) in names.iter().enumerate() {
            assert_eq!(stmt.parameter_name(i + 1), Some(*name), "{sql}");
        }
    }
}

/// A store file at `path` as schema version `version` left it.
fn store_of_version(path: &std::path::Path, version: usize) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).expect("open");
    for sql in &super::schema::MIGRATIONS[..version] {
        conn.execute_batch(sql).expect("migrate");
    }
    conn.pragma_update(None, "user_version", version as i64).expect("version");
    conn.pragma_update(None, "application_id", super::schema::APPLICATION_ID).expect("id");
    conn
}

#[test]
fn a_store_of_version_six_keeps_its_handled_records_on_its_deliveries() {
    use jadpo_core::store::{OpenOptions, PrunePlan};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.db");
    {
        let conn = store_of_version(&path, 6);
        conn.execute_batch(
            "INSERT INTO jadpo_events (id, name, payload, emitted_at) VALUES (1, 'Paid', '{}', 0);
             INSERT INTO jadpo_deliveries (id, event_id, subscriber, connection, state, attempts, budget_start, \
             held_ms, created_at, claimed_at) VALUES (1, 1, 'rec', 'c', 'succeeded', 1, 0, 0, 0, 0), \
             (2, 1, 'rec', 'c', 'failed', 1, 0, 0, 0, 0);
             INSERT INTO jadpo_handled (delivery_id, handled_at) VALUES (1, 5);",
        )
        .expect("rows");
    }
    // A read-only handle reads the table version 6 has.
    let plan = PrunePlan { cut_ms: 1, states: vec![DeliveryState::Succeeded, DeliveryState::Failed], batch: 10 };
    let old = SqliteStore::open_with(&path, OpenOptions::read_only()).expect("read-only");
    assert_eq!(old.prune_preview(&plan).expect("preview").handled, 1);
    drop(old);
    // Opened read-write, the record moves onto its delivery and the table goes.
    let store = SqliteStore::open(&path).expect("migrate");
    let handled: Vec<Option<i64>> = {
        let conn = store.lock();
        let mut stmt = conn.prepare("SELECT handled_at FROM jadpo_deliveries ORDER BY id").expect("select");
        stmt.query_map([], |r| r.get(0)).expect("query").collect::<Result<_, _>>().expect("rows")
    };
    assert_eq!(handled, vec![Some(5), None]);
    let tables: i64 = store
        .lock()
        .query_row("SELECT count(*) FROM sqlite_master WHERE name = 'jadpo_handled'", [], |r| r.get(0))
        .expect("count");
    assert_eq!(tables, 0);
    assert_eq!(store.prune_preview(&plan).expect("preview").handled, 1);
}

#[test]
fn attempts_added_in_chunks_are_each_added_once_in_order() {
    // 85 = 64 + 16 + 4 + 1: one statement of each size.
    for n in [0usize, 1, 3, 5, 85] {
        let s = store();
        let failure = Failure::new("fake.unavailable", FailureKind::Unavailable);
        let rows: Vec<outcomes::AttemptRow<'_>> = (0..n)
            .map(|i| outcomes::AttemptRow {
                delivery: 1,
                attempt: i as u32 + 1,
                started_at_ms: T0 + i as i64,
                ended_at_ms: T0 + 2 * i as i64,
                failure: (i % 2 == 1).then_some(&failure),
                http_status: (i % 3 == 0).then_some(200),
            })
            .collect();
        write(&s, |tx| outcomes::insert_attempts(tx, &rows)).expect("insert");
        type Seen = (u32, i64, i64, String, Option<String>, Option<u16>);
        let found: Vec<Seen> = {
            let conn = s.lock();
            let mut stmt = conn
                .prepare("SELECT attempt, started_at, duration_ms, outcome, code, http_status FROM jadpo_attempts ORDER BY id")
                .expect("select");
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))
                .expect("query")
                .collect::<Result<_, _>>()
                .expect("rows")
        };
        let wanted: Vec<Seen> = rows
            .iter()
            .map(|a| {
                let outcome = if a.failure.is_some() { "failed" } else { "succeeded" };
                let code = a.failure.map(|f| f.code.clone());
                (a.attempt, a.started_at_ms, a.ended_at_ms - a.started_at_ms, outcome.to_string(), code, a.http_status)
            })
            .collect();
        assert_eq!(found, wanted, "{n} attempts");
    }
}

#[test]
fn a_store_of_version_seven_keeps_only_claimable_deliveries_in_the_claims_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.db");
    {
        let conn = store_of_version(&path, 7);
        conn.execute_batch(&format!(
            "INSERT INTO jadpo_events (id, name, payload, emitted_at) VALUES (1, 'Paid', '{{}}', 0);
             INSERT INTO jadpo_deliveries (id, event_id, subscriber, connection, state, attempts, due_at, \
             lease_until, budget_start, held_since, held_connection, created_at) VALUES \
             (1, 1, 'rec', 'c', 'succeeded', 1, NULL, NULL, 0, NULL, NULL, 0), \
             (2, 1, 'rec', 'c', 'pending', 0, {T0}, NULL, 0, NULL, NULL, 0), \
             (3, 1, 'rec', 'c', 'running', 1, {lease}, {lease}, 0, NULL, NULL, 0), \
             (4, 1, 'rec', 'd', 'held', 1, NULL, NULL, 0, {T0}, 'd', 0);
             INSERT INTO jadpo_circuit_breakers (connection, state, opened_at) VALUES ('d', 'open', {T0});",
            lease = T0 + 60_000,
        ))
        .expect("rows");
    }
    let store = SqliteStore::open(&path).expect("migrate");
    {
        let conn = store.lock();
        let in_index = |index: &str, condition: &str| -> Vec<i64> {
            let sql = format!("SELECT id FROM jadpo_deliveries INDEXED BY {index} WHERE {condition} ORDER BY id");
            let mut stmt = conn.prepare(&sql).expect("select");
            stmt.query_map([], |r| r.get(0)).expect("query").collect::<Result<_, _>>().expect("rows")
        };
        assert_eq!(in_index("jadpo_deliveries_due", "due_at IS NOT NULL"), vec![2, 3], "pending and running");
        assert_eq!(in_index("jadpo_deliveries_held", "state = 'held'"), vec![4]);
        // Every read a claim, the next due time and the breakers make of the
        // deliveries goes through an index, never a walk of every row.
        let reads = [
            claims::READ_DUE,
            claims::READ_ENDED_LEASES,
            super::reads::NEXT_DUE,
            breakers::BREAKERS_WITH_HELD,
            super::reads::OLDEST_PENDING,
            &format!("SELECT 1 FROM jadpo_deliveries WHERE {}", breakers::HELD_WITHOUT_OPEN_BREAKER),
        ];
        for sql in reads {
            // The plan does not depend on the values, left unbound.
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).expect("plan");
            let mut rows = stmt.raw_query();
            let mut plan: Vec<String> = Vec::new();
            while let Some(r) = rows.next().expect("step") {
                plan.push(r.get(3).expect("detail"));
            }
            for step in plan.iter().filter(|s| s.contains("jadpo_deliveries") || s.contains(" d ")) {
                assert!(step.contains("INDEX"), "`{step}` of {sql}");
            }
        }
    }
    assert_eq!(store.next_due_ms().expect("next due"), Some(T0));
    let held: Vec<(String, u64)> =
        store.breakers().expect("breakers").into_iter().map(|b| (b.connection, b.held)).collect();
    assert_eq!(held, vec![("d".to_string(), 1)], "the held delivery counted for its breaker");
}

#[test]
fn a_named_value_the_statement_lacks_is_an_error_and_the_rest_bind_by_name() {
    let store = store();
    let conn = store.lock();
    let mut stmt = conn.prepare_cached("SELECT :b, :a").expect("prepare");
    let missing = super::by_name!().bind(&mut stmt, rusqlite::named_params! {":a": 1});
    assert!(missing.is_err(), "`:b` has no value");
    let at = super::by_name!();
    for (a, b) in [(1, 2), (3, 4)] {
        at.bind(&mut stmt, rusqlite::named_params! {":a": a, ":b": b}).expect("bind");
        let mut rows = stmt.raw_query();
        let row = rows.next().expect("step").expect("a row");
        assert_eq!((row.get::<_, i64>(0).expect("b"), row.get::<_, i64>(1).expect("a")), (b, a));
    }
}

#[test]
fn a_column_is_found_by_the_word_after_its_last_space_or_dot() {
    const LIST: &str = "d.id, e.name AS event, d.handled_at IS NOT NULL AS handled, payload , 0 AS held";
    let at = |name| super::column_at(LIST, name);
    assert_eq!([at("id"), at("event"), at("handled"), at("payload"), at("held")], [0, 1, 2, 3, 4]);
}

/// The frames in the store's write-ahead log after its last commit.
fn log_frames(store: &SqliteStore) -> u32 {
    store.commits.frames.load(std::sync::atomic::Ordering::Relaxed)
}

/// Emit until the log starts over (its frames fewer than after the commit
/// before), at most `tries` times; the most frames it held, or `None` if it did
/// not start over.
fn emit_until_the_log_starts_over(store: &SqliteStore, tries: usize) -> Option<u32> {
    let mut most = 0;
    for _ in 0..tries {
        let before = log_frames(store);
        store.emit(&paid(50), T0).expect("emit");
        let after = log_frames(store);
        most = most.max(after);
        if after < before {
            return Some(most);
        }
    }
    None
}

#[test]
fn a_commit_that_fills_the_log_folds_it_into_the_file_and_the_next_starts_it_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).expect("open");
    for round in 0..3 {
        let most = emit_until_the_log_starts_over(&store, 2_000).unwrap_or_else(|| panic!("round {round}: never"));
        // The commit that reached the limit checkpointed; the one after it
        // started the log over, adding no more than one commit's frames.
        assert!((super::CHECKPOINT_FRAMES..super::CHECKPOINT_FRAMES + 100).contains(&most), "round {round}: {most}");
    }
    let log = std::fs::metadata(dir.path().join("store.db-wal")).expect("the log").len();
    assert!(log < 1_100 * (4096 + 24), "the log's file stays as long as 1,000 frames: {log} bytes");
}

#[test]
fn a_reader_of_an_old_snapshot_puts_the_log_starting_over_off_and_no_commit_fails() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).expect("open");
    let reader = rusqlite::Connection::open(&path).expect("a reader");
    reader.execute_batch("BEGIN").expect("begin");
    let seen: i64 = reader.query_row("SELECT count(*) FROM jadpo_events", [], |r| r.get(0)).expect("read");
    assert_eq!(seen, 0);
    // Every commit is written while the reader keeps its snapshot, and the
    // checkpoint that could not finish is tried again a few commits later,
    // not at every commit.
    assert_eq!(emit_until_the_log_starts_over(&store, 300), None, "no new log while the reader reads the old");
    let events: i64 = store.lock().query_row("SELECT count(*) FROM jadpo_events", [], |r| r.get(0)).expect("count");
    assert_eq!(events, 300 * 50);
    let frames = log_frames(&store);
    assert!(frames > super::CHECKPOINT_FRAMES, "{frames}");
    let next = store.checkpoint_at.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        (frames + 1..=frames + super::CHECKPOINT_RETRY_FRAMES).contains(&next),
        "{frames} frames, next try at {next}"
    );
    // Once the reader is done, the next checkpoint finishes and the log starts over.
    reader.execute_batch("COMMIT").expect("end the read");
    assert!(emit_until_the_log_starts_over(&store, 2_000).is_some());
    assert_eq!(store.checkpoint_at.load(std::sync::atomic::Ordering::Relaxed), super::CHECKPOINT_FRAMES);
}

#[test]
fn a_write_of_any_kind_that_fills_the_log_folds_it_into_the_file() {
    // Writes other than a run's claims, outcomes and emits (an operator's
    // retry, a prune, the expansion of events written in SQL) take the same
    // checkpoint: SQLite's own is turned off.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(&dir.path().join("store.db")).expect("open");
    let mut started_over = 0;
    for i in 0..2_000 {
        let before = log_frames(&store);
        store
            .with_retry(|conn| {
                let tx = Tx::immediate(conn)?;
                tx.execute(
                    "INSERT INTO jadpo_events (name, payload, emitted_at) VALUES ('Paid', zeroblob(8000), ?1)",
                    [i],
                )?;
                tx.commit()
            })
            .expect("write");
        if log_frames(&store) < before {
            started_over += 1;
        }
        assert!(log_frames(&store) < super::CHECKPOINT_FRAMES + 10, "{}", log_frames(&store));
    }
    assert!(started_over >= 2, "the log started over {started_over} times");
}

#[test]
fn a_program_without_schedules_starts_without_the_write_lock() {
    use jadpo_core::store::OpenOptions;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.db");
    drop(SqliteStore::open(&path).expect("create"));
    let options = OpenOptions { lock_wait: std::time::Duration::from_millis(50), ..OpenOptions::read_write() };
    let store = SqliteStore::open_with(&path, options).expect("open");
    // Another process holds the write lock.
    let other = rusqlite::Connection::open(&path).expect("another connection");
    other.execute_batch("BEGIN IMMEDIATE").expect("the write lock");
    store.sync_schedules(&[], T0).expect("nothing to write, no lock to wait for");
    let every = jadpo_core::store::ScheduleSpec { name: "nightly".into(), every_ms: 60_000, timeout_ms: 1_000 };
    assert!(
        matches!(store.sync_schedules(&[every], T0), Err(jadpo_core::store::StoreError::Busy { .. })),
        "a schedule to write waits for the lock, and gives up"
    );
}

#[test]
fn a_database_error_keeps_the_drivers_error_as_its_source() {
    let e: jadpo_core::store::StoreError = super::Error::Sqlite(rusqlite::Error::InvalidQuery).into();
    assert_eq!(e.to_string(), "store error: Query is not read-only");
    let source = std::error::Error::source(&e).expect("the driver's error");
    assert!(source.downcast_ref::<rusqlite::Error>().is_some(), "{source:?}");
}
