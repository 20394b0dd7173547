//! Writes that are not claims: emitted events, attempts' outcomes (with the
//! breaker's count), and an operator's retry or skip of one delivery.

use super::breakers::{read_breaker, release_held, write_breaker};
use super::builtin::insert_events;
use super::tx::Tx;
use super::{Error, RowOf, count_at, state_of};
use jadpo_check::program::DeliveryState;
use jadpo_core::rules::breaker::{self, AfterAttempt, BreakerRow};
use jadpo_core::rules::{Decision, Failure, Record};
use jadpo_core::store::Raise;
use jadpo_core::store::rows::OperatorRow;
use jadpo_core::store::{NewEvent, Recorded, end_reason_after_attempt, recovered};
use rusqlite::{Connection, Statement, ToSql, named_params, params};
use rustc_hash::FxHashMap;

/// A failure's short human reason, as the store keeps it.
pub(super) fn reason_of(failure: &Failure) -> Option<&str> {
    failure.reason.as_deref()
}

pub(super) fn emit(conn: &mut Connection, events: &[NewEvent], now_ms: i64) -> Result<Vec<i64>, Error> {
    let tx = Tx::immediate(conn)?;
    let ids = insert_events(&tx, events, now_ms)?;
    tx.commit()?;
    Ok(ids)
}

/// The columns of an attempt row, in the order [`insert_attempts`] binds them.
const ATTEMPT_COLUMNS: &str = "delivery_id, attempt, started_at, duration_ms, outcome, code, kind, http_status, reason";

/// The number of values each attempt row binds (one a column of [`ATTEMPT_COLUMNS`]).
const ATTEMPT_VALUES: usize = 9;

/// The rows one statement adds to the history at most: a batch is written in
/// chunks of these sizes, largest first, so that a few prepared statements
/// (one a size) serve any batch. One statement of many rows costs SQLite far
/// less per row than a statement a row.
const ATTEMPT_CHUNKS: [usize; 4] = [64, 16, 4, 1];

/// The statement adding `rows` attempts (a size of [`ATTEMPT_CHUNKS`]): its
/// text, made once a size.
fn insert_attempts_sql(rows: usize) -> &'static str {
    static SQL: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let all = SQL.get_or_init(|| {
        ATTEMPT_CHUNKS
            .iter()
            .map(|&n| {
                let one = format!("({})", ["?"; ATTEMPT_VALUES].join(", "));
                format!("INSERT INTO jadpo_attempts ({ATTEMPT_COLUMNS}) VALUES {}", vec![one; n].join(", "))
            })
            .collect()
    });
    let i = ATTEMPT_CHUNKS.iter().position(|&n| n == rows).unwrap_or(ATTEMPT_CHUNKS.len() - 1);
    &all[i]
}

/// An attempt to add to a delivery's history: failed with `failure`, else
/// succeeded.
pub(super) struct AttemptRow<'a> {
    pub(super) delivery: i64,
    pub(super) attempt: u32,
    pub(super) started_at_ms: i64,
    pub(super) ended_at_ms: i64,
    pub(super) failure: Option<&'a Failure>,
    pub(super) http_status: Option<u16>,
}

/// Add `rows` to the history, in order, a chunk of [`ATTEMPT_CHUNKS`] rows a
/// statement, bound by position (rusqlite looks a name up for every value
/// bound).
pub(super) fn insert_attempts(tx: &Tx<'_>, rows: &[AttemptRow<'_>]) -> Result<(), Error> {
    let mut left = rows;
    while !left.is_empty() {
        let size = ATTEMPT_CHUNKS.iter().copied().find(|&n| n <= left.len()).unwrap_or(1);
        let (chunk, rest) = left.split_at(size.min(left.len()));
        let mut stmt = tx.prepare_cached(insert_attempts_sql(chunk.len()))?;
        for (j, a) in chunk.iter().enumerate() {
            let duration = a.ended_at_ms.saturating_sub(a.started_at_ms).max(0);
            let outcome = if a.failure.is_some() { "failed" } else { "succeeded" };
            let (code, kind) = (a.failure.map(|f| f.code.as_str()), a.failure.map(|f| f.kind.as_str()));
            let values: [&dyn ToSql; ATTEMPT_VALUES] = [
                &a.delivery,
                &a.attempt,
                &a.started_at_ms,
                &duration,
                &outcome,
                &code,
                &kind,
                &a.http_status,
                &a.failure.and_then(reason_of),
            ];
            for (k, value) in values.iter().enumerate() {
                stmt.raw_bind_parameter(j * ATTEMPT_VALUES + k + 1, value)?;
            }
        }
        stmt.raw_execute()?;
        left = rest;
    }
    Ok(())
}

/// The statement writing an attempt's decision on its delivery, guarded; bound
/// by position in the order of `CONCLUDE_PARAMS` (which a test checks), as the
/// attempt rows are in the order of [`ATTEMPT_COLUMNS`].
pub(super) const CONCLUDE: &str = "UPDATE jadpo_deliveries SET state = :state, due_at = :due_at, lease_until = NULL, \
     last_code = COALESCE(:code, last_code), last_kind = COALESCE(:kind, last_kind), \
     last_reason = CASE WHEN :code IS NULL THEN last_reason ELSE :reason END, \
     end_reason = :end_reason, handled_at = COALESCE(handled_at, :handled_at) \
     WHERE id = :id AND state = 'running' AND attempts = :attempt AND claimed_at = :claimed_at";

/// [`CONCLUDE`]'s parameters, in the order SQLite numbers them (a name's first
/// place; `:code` is one parameter, read twice).
#[cfg(test)]
pub(super) const CONCLUDE_PARAMS: [&str; 10] =
    [":state", ":due_at", ":code", ":kind", ":reason", ":end_reason", ":handled_at", ":id", ":attempt", ":claimed_at"];

/// [`conclude_with`] on a statement of its own (the store's tests write one
/// outcome at a time).
#[cfg(test)]
pub(super) fn conclude(tx: &Tx<'_>, r: &Recorded) -> Result<bool, Error> {
    let mut stmt = tx.prepare_cached(CONCLUDE)?;
    conclude_with(&mut stmt, r)
}

/// Write an attempt's decision on its delivery with [`CONCLUDE`], only while the
/// delivery is still `running` with this attempt from this claim (a claim that
/// took the lease since owns it). Returns whether it did.
fn conclude_with(stmt: &mut Statement<'_>, r: &Recorded) -> Result<bool, Error> {
    let failure = r.decision.failure();
    let n = stmt.execute(params![
        r.decision.state().as_str(),
        r.decision.due_at_ms(),
        failure.map(|f| f.code.as_str()),
        failure.map(|f| f.kind.as_str()),
        failure.and_then(reason_of),
        end_reason_after_attempt(&r.decision),
        // A succeeded delivery's handled record, kept from its first success.
        matches!(r.decision, Decision::Succeeded).then_some(r.ended_at_ms),
        r.id,
        r.attempt,
        r.started_at_ms,
    ])?;
    Ok(n == 1)
}

pub(super) fn record(
    conn: &mut Connection,
    outcomes: &[Recorded],
    raised: &[Vec<NewEvent>],
    raise: &dyn Raise,
) -> Result<Vec<usize>, Error> {
    let tx = Tx::immediate(conn)?;
    let written = record_in(&tx, outcomes, raised, raise)?;
    tx.commit()?;
    Ok(written)
}

/// [`record`]'s writes, in the transaction `tx` (a write transaction).
pub(super) fn record_in(
    tx: &Tx<'_>,
    outcomes: &[Recorded],
    raised: &[Vec<NewEvent>],
    raise: &dyn Raise,
) -> Result<Vec<usize>, Error> {
    let mut written = Vec::with_capacity(outcomes.len());
    {
        // Looked up once for the batch, not once an outcome.
        let mut concluding = tx.prepare_cached(CONCLUDE)?;
        for (i, r) in outcomes.iter().enumerate() {
            // An outcome whose delivery's lease ended and another claim took
            // is not written: that claim owns it now.
            if conclude_with(&mut concluding, r)? {
                written.push(i);
            }
        }
    }
    for &i in &written {
        if let Some(events) = raised.get(i).filter(|e| !e.is_empty()) {
            insert_events(tx, events, outcomes[i].ended_at_ms)?;
        }
    }
    let failures: Vec<Option<Failure>> = written.iter().map(|&i| outcomes[i].outcome.failure()).collect();
    let attempts: Vec<AttemptRow<'_>> = written
        .iter()
        .zip(&failures)
        .map(|(&i, failure)| {
            let r = &outcomes[i];
            AttemptRow {
                delivery: r.id,
                attempt: r.attempt,
                started_at_ms: r.started_at_ms,
                ended_at_ms: r.ended_at_ms,
                failure: failure.as_ref(),
                http_status: r.outcome.http_status(),
            }
        })
        .collect();
    insert_attempts(tx, &attempts)?;
    // Count each written outcome for its connection's breaker, in order.
    let mut breakers: FxHashMap<&str, Option<BreakerRow>> = FxHashMap::default();
    for r in written.iter().map(|&i| &outcomes[i]) {
        let current = match breakers.get(r.connection.as_str()) {
            Some(row) => row.clone(),
            None => read_breaker(tx, &r.connection)?,
        };
        let old = current.clone().unwrap_or_default();
        let (next, what) = breaker::after_attempt(&old, r.id, &r.outcome, r.ended_at_ms);
        if next != old && write_breaker(tx, &r.connection, current.as_ref(), &next, r.ended_at_ms)? {
            if what == AfterAttempt::Closed {
                release_held(tx, &r.connection, r.ended_at_ms)?;
                insert_events(tx, &recovered(raise, &r.connection, old.opened_at_ms, r.ended_at_ms), r.ended_at_ms)?;
            }
            breakers.insert(&r.connection, Some(next));
        } else {
            breakers.insert(&r.connection, current);
        }
    }
    Ok(written)
}

/// An operator's retry of one delivery whose state was read as `seen`: the
/// core's fresh record, written only if the state is still the one read.
pub(super) fn retry_one(tx: &Tx<'_>, id: i64, seen: DeliveryState, fresh: &Record) -> Result<bool, Error> {
    let n = tx
        .prepare_cached(
            "UPDATE jadpo_deliveries SET state = :state, attempts = :attempts, due_at = :due_at, \
             lease_until = NULL, budget_start = :budget_start, held_ms = :held_ms, held_since = NULL, \
             held_connection = NULL, last_code = NULL, last_kind = NULL, last_reason = NULL, \
             end_reason = NULL WHERE id = :id AND state = :seen_state",
        )?
        .execute(named_params! {
            ":id": id,
            ":seen_state": seen.as_str(),
            ":state": fresh.state.as_str(),
            ":attempts": fresh.attempts,
            ":due_at": fresh.due_at_ms,
            ":budget_start": fresh.budget_start_ms,
            ":held_ms": fresh.held_ms,
        })?;
    Ok(n == 1)
}

/// An operator's skip of one delivery whose state was read as `seen`: ended
/// as `ended`, only if the state is still the one read.
pub(super) fn skip_one(
    tx: &Tx<'_>,
    id: i64,
    seen: DeliveryState,
    ended: DeliveryState,
    now_ms: i64,
) -> Result<bool, Error> {
    let n = tx
        .prepare_cached(
            "UPDATE jadpo_deliveries SET state = :state, due_at = NULL, lease_until = NULL, held_since = NULL, \
             held_connection = NULL, claimed_at = :now, end_reason = :end_reason \
             WHERE id = :id AND state = :seen_state",
        )?
        .execute(named_params! {
            ":id": id, ":seen_state": seen.as_str(), ":state": ended.as_str(), ":now": now_ms,
            ":end_reason": jadpo_core::store::END_SKIPPED,
        })?;
    Ok(n == 1)
}

/// A delivery's state and attempts, for an operator's action.
pub(super) fn state_and_attempts(tx: &Tx<'_>, id: i64) -> Result<Option<OperatorRow>, Error> {
    let mut stmt = tx.prepare_cached("SELECT state, attempts FROM jadpo_deliveries WHERE id = ?1")?;
    let mut rows = stmt.query([id])?;
    Ok(match rows.next()? {
        Some(r) => Some(OperatorRow {
            state: state_of(&r.get::<_, String>("state")?)?,
            attempts: count_at(r, "attempts", RowOf::Delivery(id))?,
        }),
        None => None,
    })
}
