//! Writes that are not claims: emitted events, attempts' outcomes (with the
//! breaker's count), and operator retries.

use super::breakers::{read_breaker, release_held, write_breaker};
use super::builtin::insert_events;
use super::unnest::Columns;
use super::{Prepared, RowOf, StoreError, bulk_transaction, col, count_of, pg_error, state_of};
use jadpo_check::program::DeliveryState;
use jadpo_core::claim::LostAttempt;
use jadpo_core::rules::breaker::{self, AfterAttempt, BreakerRow};
use jadpo_core::rules::{Decision, Failure, Record};
use jadpo_core::store::rows::OperatorRow;
use jadpo_core::store::{NewEvent, Raise, Recorded, end_reason_after_attempt, recovered};
use postgres::{Client, Transaction};
use std::collections::HashMap;

/// How many times an outcome's count is tried against a row other processes keep
/// changing before the transaction gives up (and is run again by the caller).
const COUNT_TRIES: usize = 16;

pub(super) fn emit(client: &mut Client, events: &[NewEvent], now_ms: i64) -> Result<Vec<i64>, StoreError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let mut tx = client.transaction().map_err(pg_error)?;
    let ids = insert_events(&mut tx, events, now_ms)?;
    tx.commit().map_err(pg_error)?;
    Ok(ids)
}

/// Add the `lease_expired` attempts a claim found to their deliveries' histories,
/// in one statement.
pub(super) fn insert_lost_attempts(
    tx: &mut Transaction<'_>,
    lost: &[LostAttempt],
    now_ms: i64,
) -> Result<(), StoreError> {
    if lost.is_empty() {
        return Ok(());
    }
    let f = Failure::lease_expired();
    let mut u = Columns::default();
    // Inserted in the claim's order (`n`), so that attempt rows' ids follow it.
    u.add("n", "bigint", (0..lost.len()).map(|n| n as i64).collect::<Vec<i64>>())
        .add("delivery", "bigint", lost.iter().map(|l| l.delivery).collect::<Vec<i64>>())
        .add("attempt", "bigint", lost.iter().map(|l| i64::from(l.attempt)).collect::<Vec<i64>>())
        .add("started", "bigint", lost.iter().map(|l| l.started_at_ms).collect::<Vec<i64>>())
        .add(
            "duration",
            "bigint",
            lost.iter().map(|l| now_ms.saturating_sub(l.started_at_ms).max(0)).collect::<Vec<i64>>(),
        );
    tx.execute(
        &format!(
            "INSERT INTO attempts (delivery_id, attempt, started_at, duration_ms, outcome, code, kind, \
                 reason) SELECT delivery, attempt, started, duration, 'failed', $1::text, $2::text, $3::text \
                 FROM {} ORDER BY n",
            u.rows_clause(4)
        ),
        &u.params_after(&[&f.code.as_str(), &f.kind.as_str(), &f.reason.as_deref()]),
    )
    .map_err(pg_error)?;
    Ok(())
}

/// Write every outcome's decision (with the handled record, a column of the
/// delivery, on success) and attempt row in one statement. Each decision is
/// written only while its delivery is still `running` with this attempt from
/// this claim (a reclaimed lease wins); the attempt row only with it. Returns
/// the indices, in `outcomes`, of those written, in order.
pub(super) fn conclude_all(
    tx: &mut Transaction<'_>,
    prepared: &mut Prepared,
    outcomes: &[Recorded],
) -> Result<Vec<usize>, StoreError> {
    let failures: Vec<Option<Failure>> = outcomes.iter().map(|r| r.outcome.failure()).collect();
    let decided: Vec<Option<&Failure>> = outcomes.iter().map(|r| r.decision.failure()).collect();
    let mut u = Columns::default();
    u.add("i", "bigint", (0..outcomes.len()).map(|i| i as i64).collect::<Vec<i64>>())
        .add("id", "bigint", outcomes.iter().map(|r| r.id).collect::<Vec<i64>>())
        .add("attempt", "bigint", outcomes.iter().map(|r| i64::from(r.attempt)).collect::<Vec<i64>>())
        .add("started_at", "bigint", outcomes.iter().map(|r| r.started_at_ms).collect::<Vec<i64>>())
        .add("state", "text", outcomes.iter().map(|r| r.decision.state().as_str()).collect::<Vec<&str>>())
        .add("due_at", "bigint", outcomes.iter().map(|r| r.decision.due_at_ms()).collect::<Vec<Option<i64>>>())
        .add("code", "text", decided.iter().map(|f| f.map(|f| f.code.as_str())).collect::<Vec<_>>())
        .add("kind", "text", decided.iter().map(|f| f.map(|f| f.kind.as_str())).collect::<Vec<_>>())
        .add("reason", "text", decided.iter().map(|f| f.and_then(|f| f.reason.as_deref())).collect::<Vec<_>>())
        .add("end_reason", "text", outcomes.iter().map(|r| end_reason_after_attempt(&r.decision)).collect::<Vec<_>>())
        .add("ended_at", "bigint", outcomes.iter().map(|r| r.ended_at_ms).collect::<Vec<i64>>())
        .add(
            "duration_ms",
            "bigint",
            outcomes.iter().map(|r| r.ended_at_ms.saturating_sub(r.started_at_ms).max(0)).collect::<Vec<i64>>(),
        )
        .add(
            "outcome",
            "text",
            failures.iter().map(|f| if f.is_some() { "failed" } else { "succeeded" }).collect::<Vec<&str>>(),
        )
        .add("a_code", "text", failures.iter().map(|f| f.as_ref().map(|f| f.code.as_str())).collect::<Vec<_>>())
        .add("a_kind", "text", failures.iter().map(|f| f.as_ref().map(|f| f.kind.as_str())).collect::<Vec<_>>())
        .add(
            "http_status",
            "bigint",
            outcomes.iter().map(|r| r.outcome.http_status().map(i64::from)).collect::<Vec<_>>(),
        )
        .add(
            "a_reason",
            "text",
            failures.iter().map(|f| f.as_ref().and_then(|f| f.reason.as_deref())).collect::<Vec<_>>(),
        )
        .add(
            "handled",
            "bool",
            outcomes.iter().map(|r| matches!(r.decision, Decision::Succeeded)).collect::<Vec<bool>>(),
        )
        // The guard's state as a value rather than a constant: a constant would
        // let the planner walk the partial index of running rows (with every row a
        // finished attempt left in it until a vacuum) instead of reaching each row
        // by its id.
        .add("running", "text", vec!["running"; outcomes.len()]);
    let sql = format!(
        "WITH done AS (UPDATE deliveries d SET state = u.state, due_at = u.due_at, lease_until = NULL, \
             last_code = COALESCE(u.code, d.last_code), last_kind = COALESCE(u.kind, d.last_kind), \
             last_reason = CASE WHEN u.code IS NULL THEN d.last_reason ELSE u.reason END, end_reason = u.end_reason, \
             handled_at = COALESCE(d.handled_at, CASE WHEN u.handled THEN u.ended_at END) \
             FROM {} \
             WHERE d.id = u.id AND d.state = u.running AND d.attempts = u.attempt AND d.claimed_at = u.started_at \
             RETURNING u.i, u.id, u.attempt, u.started_at, u.duration_ms, u.outcome, u.a_code, u.a_kind, \
             u.http_status, u.a_reason), \
             tried AS (INSERT INTO attempts (delivery_id, attempt, started_at, duration_ms, outcome, code, kind, \
             http_status, reason) SELECT id, attempt, started_at, duration_ms, outcome, a_code, a_kind, http_status, \
             a_reason FROM done) \
             SELECT i FROM done",
        u.rows_clause(1)
    );
    let statement = prepared.get(tx, sql)?;
    let rows = tx.query(&statement, &u.params_after(&[])).map_err(pg_error)?;
    let mut written = Vec::with_capacity(rows.len());
    for r in &rows {
        let i: i64 = col(r, "i")?;
        match usize::try_from(i) {
            Ok(i) if i < outcomes.len() => written.push(i),
            _ => return Err(StoreError::Corrupt(format!("outcome index `{i}`"))),
        }
    }
    written.sort_unstable();
    Ok(written)
}

/// Count written outcomes for their connections' breakers (the core's
/// `after_attempt`), in order. Each connection's row is read once and counted on
/// as it changes; a change is written only if the row is still as read, else the
/// row is read again and the outcome counted again. A breaker that closes
/// releases its held deliveries.
fn count_outcomes(tx: &mut Transaction<'_>, written: &[&Recorded], raise: &dyn Raise) -> Result<(), StoreError> {
    let mut rows: HashMap<&str, Option<BreakerRow>> = HashMap::new();
    for r in written {
        let mut counted = false;
        for _ in 0..COUNT_TRIES {
            let current = match rows.get(r.connection.as_str()) {
                Some(row) => row.clone(),
                None => read_breaker(tx, &r.connection)?,
            };
            let old = current.clone().unwrap_or_default();
            let (next, what) = breaker::after_attempt(&old, r.id, &r.outcome, r.ended_at_ms);
            if next == old {
                rows.insert(&r.connection, current);
                counted = true;
                break;
            }
            if write_breaker(tx, &r.connection, current.as_ref(), &next, r.ended_at_ms)? {
                rows.insert(&r.connection, Some(next));
                if what == AfterAttempt::Closed {
                    release_held(tx, &r.connection, r.ended_at_ms)?;
                    insert_events(
                        tx,
                        &recovered(raise, &r.connection, old.opened_at_ms, r.ended_at_ms),
                        r.ended_at_ms,
                    )?;
                }
                counted = true;
                break;
            }
            // Another process changed the row: read it again.
            rows.remove(r.connection.as_str());
        }
        if !counted {
            return Err(StoreError::Contended {
                what: format!("the breaker of `{}` kept changing under this outcome's count", r.connection),
            });
        }
    }
    Ok(())
}

pub(super) fn record(
    client: &mut Client,
    prepared: &mut Prepared,
    outcomes: &[Recorded],
    raised: &[Vec<NewEvent>],
    raise: &dyn Raise,
) -> Result<Vec<usize>, StoreError> {
    let mut tx = bulk_transaction(client)?;
    let written = conclude_all(&mut tx, prepared, outcomes)?;
    // What the written outcomes raise (a delivery failed or parked), stored only
    // for those whose guard matched.
    for &i in &written {
        if let Some(events) = raised.get(i).filter(|e| !e.is_empty()) {
            insert_events(&mut tx, events, outcomes[i].ended_at_ms)?;
        }
    }
    let counted: Vec<&Recorded> = written.iter().map(|&i| &outcomes[i]).collect();
    count_outcomes(&mut tx, &counted, raise)?;
    tx.commit().map_err(pg_error)?;
    Ok(written)
}

/// A delivery's state and attempts, for an operator's action.
pub(super) fn operator_row(tx: &mut Transaction<'_>, id: i64) -> Result<Option<OperatorRow>, StoreError> {
    let Some(row) = tx.query_opt("SELECT state, attempts FROM deliveries WHERE id = $1", &[&id]).map_err(pg_error)?
    else {
        return Ok(None);
    };
    Ok(Some(OperatorRow {
        state: state_of(&col::<String>(&row, "state")?)?,
        attempts: count_of(col(&row, "attempts")?, RowOf::Delivery(id), "attempts")?,
    }))
}

/// An operator's skip of one delivery whose state was read as `seen`: ended
/// as `ended`, only if the state is still the one read.
pub(super) fn skip_one(
    tx: &mut Transaction<'_>,
    id: i64,
    seen: DeliveryState,
    ended: DeliveryState,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let n = tx
        .execute(
            "UPDATE deliveries SET state = $3, due_at = NULL, lease_until = NULL, held_since = NULL, \
                 held_connection = NULL, claimed_at = $4, end_reason = $5 WHERE id = $1 AND state = $2",
            &[&id, &seen.as_str(), &ended.as_str(), &now_ms, &jadpo_core::store::END_SKIPPED],
        )
        .map_err(pg_error)?;
    Ok(n == 1)
}

/// An operator's retry of one delivery whose state was read as `seen`: the
/// core's fresh record, written only if the state is still the one read.
pub(super) fn retry_one(
    tx: &mut Transaction<'_>,
    id: i64,
    seen: DeliveryState,
    fresh: &Record,
) -> Result<bool, StoreError> {
    let n = tx
        .execute(
            "UPDATE deliveries SET state = $3, attempts = $4, due_at = $5, lease_until = NULL, \
                 budget_start = $6, held_ms = $7, held_since = NULL, held_connection = NULL, last_code = NULL, \
                 last_kind = NULL, last_reason = NULL, end_reason = NULL WHERE id = $1 AND state = $2",
            &[
                &id,
                &seen.as_str(),
                &fresh.state.as_str(),
                &i64::from(fresh.attempts),
                &fresh.due_at_ms,
                &fresh.budget_start_ms,
                &fresh.held_ms,
            ],
        )
        .map_err(pg_error)?;
    Ok(n == 1)
}
