//! Writes that are not claims: emitted events, attempts' outcomes (with the
//! breaker's count), and operator retries.

use super::super::Raise;
use super::super::{NewEvent, Recorded, RetryResult, end_reason_after_attempt};
use super::breakers::{count_outcome, release_held};
use super::builtin::{insert_events, recovered};
use super::{StoreError, col, pg_error, q, state_of, u32_of};
use crate::rules::breaker::AfterAttempt;
use crate::rules::{self, Decision, Failure};
use postgres::{Client, Transaction};

pub(super) fn emit(client: &mut Client, s: &str, events: &[NewEvent], now_ms: i64) -> Result<Vec<i64>, StoreError> {
    let mut tx = client.transaction().map_err(pg_error)?;
    let ids = insert_events(&mut tx, s, events, now_ms)?;
    tx.commit().map_err(pg_error)?;
    Ok(ids)
}

/// Add an attempt to a delivery's history: failed with `failure`, else succeeded.
#[allow(clippy::too_many_arguments)] // one attempt row's columns
pub(super) fn insert_attempt(
    tx: &mut Transaction<'_>,
    s: &str,
    delivery: i64,
    attempt: u32,
    started_at_ms: i64,
    ended_at_ms: i64,
    failure: Option<&Failure>,
    http_status: Option<u16>,
) -> Result<(), StoreError> {
    let outcome = if failure.is_some() { "failed" } else { "succeeded" };
    tx.execute(
        &q(
            "INSERT INTO {s}.attempts (delivery_id, attempt, started_at, duration_ms, outcome, code, kind, \
             http_status, reason) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            s,
        ),
        &[
            &delivery,
            &i64::from(attempt),
            &started_at_ms,
            &ended_at_ms.saturating_sub(started_at_ms).max(0),
            &outcome,
            &failure.map(|f| f.code.as_str()),
            &failure.map(|f| f.kind.as_str()),
            &http_status.map(i64::from),
            &failure.and_then(|f| f.reason.as_deref()),
        ],
    )
    .map_err(pg_error)?;
    Ok(())
}

/// Write an attempt's decision, only while the delivery is still `running` with
/// this attempt from this claim. Returns whether it did.
pub(super) fn conclude(tx: &mut Transaction<'_>, s: &str, r: &Recorded) -> Result<bool, StoreError> {
    let failure = r.decision.failure();
    let n = tx
        .execute(
            &q(
                "UPDATE {s}.deliveries SET state = $4, due_at = $5, lease_until = NULL, \
                 last_code = COALESCE($6, last_code), last_kind = COALESCE($7, last_kind), \
                 last_reason = CASE WHEN $6::text IS NULL THEN last_reason ELSE $8 END, end_reason = $9 \
                 WHERE id = $1 AND state = 'running' AND attempts = $2 AND claimed_at = $3",
                s,
            ),
            &[
                &r.id,
                &i64::from(r.attempt),
                &r.started_at_ms,
                &r.decision.state().as_str(),
                &r.decision.due_at_ms(),
                &failure.map(|f| f.code.as_str()),
                &failure.map(|f| f.kind.as_str()),
                &failure.and_then(|f| f.reason.as_deref()),
                &end_reason_after_attempt(&r.decision),
            ],
        )
        .map_err(pg_error)?;
    Ok(n == 1)
}

pub(super) fn record(
    client: &mut Client,
    s: &str,
    outcomes: &[Recorded],
    raised: &[Vec<NewEvent>],
    raise: &dyn Raise,
) -> Result<Vec<usize>, StoreError> {
    let mut tx = client.transaction().map_err(pg_error)?;
    let mut written = Vec::with_capacity(outcomes.len());
    for (i, r) in outcomes.iter().enumerate() {
        if !conclude(&mut tx, s, r)? {
            continue;
        }
        written.push(i);
        if let Some(events) = raised.get(i) {
            insert_events(&mut tx, s, events, r.ended_at_ms)?;
        }
        let failure = r.outcome.failure();
        insert_attempt(
            &mut tx,
            s,
            r.id,
            r.attempt,
            r.started_at_ms,
            r.ended_at_ms,
            failure.as_ref(),
            r.outcome.http_status(),
        )?;
        if matches!(r.decision, Decision::Succeeded) {
            tx.execute(
                &q("INSERT INTO {s}.handled (delivery_id, handled_at) VALUES ($1, $2) ON CONFLICT DO NOTHING", s),
                &[&r.id, &r.ended_at_ms],
            )
            .map_err(pg_error)?;
        }
    }
    for r in written.iter().map(|&i| &outcomes[i]) {
        let (what, opened_at_ms) = count_outcome(&mut tx, s, r)?;
        if what == AfterAttempt::Closed {
            release_held(&mut tx, s, &r.connection, None, r.ended_at_ms)?;
            recovered(&mut tx, s, raise, &r.connection, opened_at_ms, r.ended_at_ms)?;
        }
    }
    tx.commit().map_err(pg_error)?;
    Ok(written)
}

pub(super) fn retry(client: &mut Client, s: &str, ids: &[i64], now_ms: i64) -> Result<Vec<RetryResult>, StoreError> {
    let mut tx = client.transaction().map_err(pg_error)?;
    let mut results = Vec::with_capacity(ids.len());
    for &id in ids {
        let row = tx
            .query_opt(&q("SELECT state, attempts FROM {s}.deliveries WHERE id = $1", s), &[&id])
            .map_err(pg_error)?;
        let Some(row) = row else {
            results.push(RetryResult::NotFound);
            continue;
        };
        let seen: String = col(&row, "state")?;
        let state = state_of(&seen)?;
        let record = super::super::retry_subject(state, u32_of(col(&row, "attempts")?), now_ms);
        let Some(fresh) = rules::operator_retry(&record, now_ms) else {
            results.push(RetryResult::NotRetryable(state));
            continue;
        };
        let n = tx
            .execute(
                &q(
                    "UPDATE {s}.deliveries SET state = $3, attempts = $4, due_at = $5, lease_until = NULL, \
                     budget_start = $6, held_ms = $7, held_since = NULL, held_connection = NULL, last_code = NULL, \
                     last_kind = NULL, last_reason = NULL, end_reason = NULL WHERE id = $1 AND state = $2",
                    s,
                ),
                &[
                    &id,
                    &seen,
                    &fresh.state.as_str(),
                    &i64::from(fresh.attempts),
                    &fresh.due_at_ms,
                    &fresh.budget_start_ms,
                    &fresh.held_ms,
                ],
            )
            .map_err(pg_error)?;
        results.push(if n == 1 { RetryResult::Retried } else { RetryResult::NotRetryable(state) });
    }
    tx.commit().map_err(pg_error)?;
    Ok(results)
}
