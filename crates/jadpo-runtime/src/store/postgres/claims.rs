//! Claims: due deliveries locked with `FOR UPDATE SKIP LOCKED` (two processes
//! never take one row, nor wait on each other's), the core deciding each, and
//! every change one statement guarded by the row as read.

use super::super::Raise;
use super::super::{ClaimCandidate, ClaimReport, ClaimRow, ClaimVerdict, end_reason_at_claim};
use super::breakers::{read_breaker, write_breaker};
use super::builtin::given_up;
use super::outcomes::insert_attempt;
use super::{StoreError, col, failure_of, pg_error, q, state_of, u32_of};
use crate::rules::breaker::BreakerRow;
use crate::rules::{ClaimDecision, Failure, Record};
use jadpo_check::program::DeliveryState;
use postgres::{Client, Transaction};
use std::collections::HashMap;

pub(super) fn read_rows(
    tx: &mut Transaction<'_>,
    s: &str,
    state: &str,
    now_ms: i64,
    limit: usize,
) -> Result<Vec<ClaimRow>, StoreError> {
    let sql = q(
        "SELECT d.id, d.subscriber, d.connection, d.state, d.attempts, d.due_at, d.lease_until, d.budget_start, \
         d.held_ms, d.last_code, d.last_kind, d.last_reason, d.claimed_at, \
         EXISTS (SELECT 1 FROM {s}.handled h WHERE h.delivery_id = d.id) AS handled, \
         e.id AS event_id, e.name AS event, e.payload \
         FROM {s}.deliveries d JOIN {s}.events e ON e.id = d.event_id \
         WHERE d.state = $1 AND d.due_at <= $2 ORDER BY d.due_at, d.id LIMIT $3 \
         FOR UPDATE OF d SKIP LOCKED",
        s,
    );
    let rows = tx.query(&sql, &[&state, &now_ms, &(limit as i64)]).map_err(pg_error)?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let st: String = col(r, "state")?;
        let state = state_of(&st)?;
        let due_at: Option<i64> = col(r, "due_at")?;
        let record = Record {
            state,
            attempts: u32_of(col(r, "attempts")?),
            due_at_ms: if state == DeliveryState::Pending { due_at } else { None },
            lease_until_ms: col(r, "lease_until")?,
            budget_start_ms: col(r, "budget_start")?,
            held_ms: col(r, "held_ms")?,
            last_failure: failure_of(col(r, "last_code")?, col(r, "last_kind")?, col(r, "last_reason")?)?,
        };
        out.push(ClaimRow {
            candidate: ClaimCandidate {
                id: col(r, "id")?,
                subscriber: col(r, "subscriber")?,
                connection: col(r, "connection")?,
                record,
                handled: col(r, "handled")?,
                breaker: BreakerRow::default(),
            },
            state: st,
            due_at,
            claimed_at: col(r, "claimed_at")?,
            event_id: col(r, "event_id")?,
            event: col(r, "event")?,
            payload: col(r, "payload")?,
        });
    }
    Ok(out)
}

/// The guard every claim statement ends with: the row is as the claim read it.
const AS_SEEN: &str = "WHERE id = $1 AND state = $2 AND attempts = $3 AND due_at IS NOT DISTINCT FROM $4";

pub(super) fn apply(
    tx: &mut Transaction<'_>,
    s: &str,
    row: &ClaimRow,
    set: &str,
    extra: &[&(dyn postgres::types::ToSql + Sync)],
) -> Result<bool, StoreError> {
    let sql = q(&format!("UPDATE {{s}}.deliveries SET {set} {AS_SEEN}"), s);
    let attempts = i64::from(row.candidate.record.attempts);
    let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> =
        vec![&row.candidate.id, &row.state, &attempts, &row.due_at];
    params.extend_from_slice(extra);
    Ok(tx.execute(&sql, &params).map_err(pg_error)? == 1)
}

fn code(f: Option<&Failure>) -> Option<&str> {
    f.map(|f| f.code.as_str())
}

fn kind(f: Option<&Failure>) -> Option<&'static str> {
    f.map(|f| f.kind.as_str())
}

fn reason(f: Option<&Failure>) -> Option<&str> {
    f.and_then(|f| f.reason.as_deref())
}

pub(super) fn claim(
    client: &mut Client,
    s: &str,
    now_ms: i64,
    limit: usize,
    decide: &mut dyn FnMut(&ClaimCandidate) -> ClaimVerdict,
    raise: &dyn Raise,
) -> Result<ClaimReport, StoreError> {
    let mut tx = client.transaction().map_err(pg_error)?;
    let mut rows = read_rows(&mut tx, s, "running", now_ms, limit)?;
    let left = limit.saturating_sub(rows.len());
    if left > 0 {
        rows.extend(read_rows(&mut tx, s, "pending", now_ms, left)?);
    }
    let mut breakers: HashMap<String, Option<BreakerRow>> = HashMap::new();
    let mut report = ClaimReport::default();
    for mut row in rows {
        if !breakers.contains_key(&row.candidate.connection) {
            let found = read_breaker(&mut tx, s, &row.candidate.connection)?;
            breakers.insert(row.candidate.connection.clone(), found);
        }
        let current = breakers.get(&row.candidate.connection).cloned().flatten();
        row.candidate.breaker = current.clone().unwrap_or_default();
        let (mut decision, next_breaker) = decide(&row.candidate);
        if let Some(next) = next_breaker {
            // This claim is the probe; if another process changed the breaker
            // since it was read, the delivery is held instead.
            if write_breaker(&mut tx, s, &row.candidate.connection, current.as_ref(), &next, now_ms)? {
                breakers.insert(row.candidate.connection.clone(), Some(next));
            } else {
                decision = decision.held();
            }
        }
        let c = row.candidate.clone();
        let (took, lease_expired) = match &decision {
            ClaimDecision::Skip => continue,
            ClaimDecision::Hold { lease_expired, failure } => {
                let f = failure.as_ref();
                let took = apply(
                    &mut tx,
                    s,
                    &row,
                    "state = 'held', due_at = NULL, lease_until = NULL, held_since = $5, held_connection = $6, \
                     last_code = $7, last_kind = $8, last_reason = $9",
                    &[&now_ms, &c.connection, &code(f), &kind(f), &reason(f)],
                )?;
                if took {
                    report.held.push((c.id, c.connection.clone()));
                }
                (took, *lease_expired)
            }
            ClaimDecision::Handled => {
                let end = end_reason_at_claim(&decision);
                let took = apply(
                    &mut tx,
                    s,
                    &row,
                    "state = 'succeeded', due_at = NULL, lease_until = NULL, end_reason = $5",
                    &[&end],
                )?;
                (took, false)
            }
            ClaimDecision::Run { attempt, lease_until_ms, lease_expired, failure } => {
                let f = failure.as_ref();
                let attempt_i = i64::from(*attempt);
                let took = apply(
                    &mut tx,
                    s,
                    &row,
                    "state = 'running', attempts = $5, due_at = $6, lease_until = $6, claimed_at = $7, \
                     last_code = $8, last_kind = $9, last_reason = $10",
                    &[&attempt_i, lease_until_ms, &now_ms, &code(f), &kind(f), &reason(f)],
                )?;
                if took {
                    report.run.push(row.started(*attempt, *lease_until_ms, now_ms, failure.clone()));
                }
                (took, *lease_expired)
            }
            ClaimDecision::GiveUp { failure, lease_expired, .. } => {
                let f = Some(failure);
                let end = end_reason_at_claim(&decision);
                let took = apply(
                    &mut tx,
                    s,
                    &row,
                    "state = 'failed', due_at = NULL, lease_until = NULL, last_code = $5, last_kind = $6, \
                     last_reason = $7, end_reason = $8",
                    &[&code(f), &kind(f), &reason(f), &end],
                )?;
                if took {
                    given_up(&mut tx, s, raise, &row, failure, now_ms)?;
                }
                (took, *lease_expired)
            }
        };
        if took && lease_expired {
            // The attempt a lost worker had counted, recorded only once this claim
            // took the row.
            let started = row.claimed_at.unwrap_or(now_ms);
            let f = Failure::lease_expired();
            insert_attempt(&mut tx, s, c.id, c.record.attempts, started, now_ms, Some(&f), None)?;
        }
        if took && matches!(decision, ClaimDecision::Handled | ClaimDecision::GiveUp { .. }) {
            report.ended.push((c.id, c.subscriber.clone(), decision));
        }
    }
    tx.commit().map_err(pg_error)?;
    Ok(report)
}
