//! Claims: due deliveries read in due order, the core deciding each, and every
//! change one statement conditional on the row being as it was read.

use super::super::Raise;
use super::super::{ClaimCandidate, ClaimReport, ClaimRow, ClaimVerdict, end_reason_at_claim};
use super::breakers::{read_breaker, write_breaker};
use super::builtin::given_up;
use super::outcomes::{insert_attempt, reason_of};
use super::{RowOf, StoreError, count_at, failure_of, state_of};
use crate::rules::breaker::BreakerRow;
use crate::rules::{ClaimDecision, Failure, Record};
use jadpo_check::program::DeliveryState;
use rusqlite::{Connection, Transaction, TransactionBehavior, named_params};
use std::collections::HashMap;

/// A delivery's row as a claim read it; each change the claim makes is
/// conditional on all of it, so a row another process changed since is left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Seen<'a> {
    /// The delivery's id.
    pub id: i64,
    /// Its state.
    pub state: &'a str,
    /// Its attempts.
    pub attempts: u32,
    /// Its `due_at` (a pending delivery's due time, a running one's lease end).
    pub due_at: Option<i64>,
}

/// The columns a claim reads (a delivery joined with its event).
const CLAIM_COLUMNS: &str = "d.id, d.subscriber, d.connection, d.state, d.attempts, d.due_at, \
     d.lease_until, d.budget_start, d.held_ms, d.last_code, d.last_kind, d.last_reason, d.claimed_at, \
     EXISTS (SELECT 1 FROM jadpo_handled h WHERE h.delivery_id = d.id) AS handled, \
     e.id AS event_id, e.name AS event, e.payload";

impl ClaimRow {
    fn seen(&self) -> Seen<'_> {
        Seen {
            id: self.candidate.id,
            state: &self.state,
            attempts: self.candidate.record.attempts,
            due_at: self.due_at,
        }
    }
}

fn read_claim_rows(tx: &Transaction<'_>, state: &str, now_ms: i64, limit: usize) -> Result<Vec<ClaimRow>, StoreError> {
    let sql = format!(
        "SELECT {CLAIM_COLUMNS} FROM jadpo_deliveries d JOIN jadpo_events e ON e.id = d.event_id \
         WHERE d.state = :state AND d.due_at <= :now ORDER BY d.due_at, d.id LIMIT :limit"
    );
    let mut stmt = tx.prepare_cached(&sql)?;
    let mut rows = stmt.query(named_params! {":state": state, ":now": now_ms, ":limit": limit as i64})?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let st: String = r.get("state")?;
        let state = state_of(&st)?;
        let due_at: Option<i64> = r.get("due_at")?;
        let id = r.get("id")?;
        let record = Record {
            state,
            attempts: count_at(r, "attempts", RowOf::Delivery(id))?,
            due_at_ms: if state == DeliveryState::Pending { due_at } else { None },
            lease_until_ms: r.get("lease_until")?,
            budget_start_ms: r.get("budget_start")?,
            held_ms: r.get("held_ms")?,
            last_failure: failure_of(r.get("last_code")?, r.get("last_kind")?, r.get("last_reason")?)?,
        };
        out.push(ClaimRow {
            candidate: ClaimCandidate {
                id,
                subscriber: r.get("subscriber")?,
                connection: r.get("connection")?,
                record,
                handled: r.get("handled")?,
                breaker: BreakerRow::default(),
            },
            state: st,
            due_at,
            claimed_at: r.get("claimed_at")?,
            event_id: r.get("event_id")?,
            event: r.get("event")?,
            payload: r.get("payload")?,
        });
    }
    Ok(out)
}

/// The guard every claim statement ends with: the row is as the claim read it.
const AS_SEEN: &str = "WHERE id = :id AND state = :seen_state AND attempts = :seen_attempts AND due_at IS :seen_due_at";

/// Hold the delivery for its connection's open breaker: not due, the claim's
/// attempt given back. Returns whether the row was as seen and changed.
pub(super) fn hold(
    tx: &Transaction<'_>,
    seen: Seen<'_>,
    connection: &str,
    failure: Option<&Failure>,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE jadpo_deliveries SET state = 'held', due_at = NULL, lease_until = NULL, \
         held_since = :now, held_connection = :connection, last_code = :code, last_kind = :kind, \
         last_reason = :reason {AS_SEEN}"
    );
    let n = tx.prepare_cached(&sql)?.execute(named_params! {
        ":id": seen.id, ":seen_state": seen.state, ":seen_attempts": seen.attempts, ":seen_due_at": seen.due_at,
        ":now": now_ms, ":connection": connection,
        ":code": failure.map(|f| f.code.as_str()), ":kind": failure.map(|f| f.kind.as_str()),
        ":reason": failure.and_then(reason_of),
    })?;
    Ok(n == 1)
}

/// End the delivery `succeeded` without running it: a handled record exists. The
/// claim's time is kept as its last (retention counts a final delivery's age
/// from it).
pub(super) fn end_handled(
    tx: &Transaction<'_>,
    seen: Seen<'_>,
    end_reason: &str,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE jadpo_deliveries SET state = 'succeeded', due_at = NULL, lease_until = NULL, \
         claimed_at = :now, end_reason = :end_reason {AS_SEEN}"
    );
    let n = tx.prepare_cached(&sql)?.execute(named_params! {
        ":id": seen.id, ":seen_state": seen.state, ":seen_attempts": seen.attempts, ":seen_due_at": seen.due_at,
        ":end_reason": end_reason, ":now": now_ms,
    })?;
    Ok(n == 1)
}

/// Start attempt `attempt`, leased until `lease_until_ms` (also its `due_at`, so
/// a claim finds it again when the lease ends).
pub(super) fn start_run(
    tx: &Transaction<'_>,
    seen: Seen<'_>,
    attempt: u32,
    lease_until_ms: i64,
    now_ms: i64,
    failure: Option<&Failure>,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE jadpo_deliveries SET state = 'running', attempts = :attempt, due_at = :lease_until, \
         lease_until = :lease_until, claimed_at = :now, last_code = :code, last_kind = :kind, \
         last_reason = :reason {AS_SEEN}"
    );
    let n = tx.prepare_cached(&sql)?.execute(named_params! {
        ":id": seen.id, ":seen_state": seen.state, ":seen_attempts": seen.attempts, ":seen_due_at": seen.due_at,
        ":attempt": attempt, ":lease_until": lease_until_ms, ":now": now_ms,
        ":code": failure.map(|f| f.code.as_str()), ":kind": failure.map(|f| f.kind.as_str()),
        ":reason": failure.and_then(reason_of),
    })?;
    Ok(n == 1)
}

/// Give the delivery up at the claim: `failed`, keeping `failure` (and the claim's
/// time as its last, as [`end_handled`] does).
pub(super) fn give_up(
    tx: &Transaction<'_>,
    seen: Seen<'_>,
    failure: &Failure,
    end_reason: &str,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE jadpo_deliveries SET state = 'failed', due_at = NULL, lease_until = NULL, \
         claimed_at = :now, last_code = :code, last_kind = :kind, last_reason = :reason, end_reason = :end_reason {AS_SEEN}"
    );
    let n = tx.prepare_cached(&sql)?.execute(named_params! {
        ":id": seen.id, ":seen_state": seen.state, ":seen_attempts": seen.attempts, ":seen_due_at": seen.due_at,
        ":code": failure.code, ":kind": failure.kind.as_str(), ":reason": reason_of(failure),
        ":end_reason": end_reason, ":now": now_ms,
    })?;
    Ok(n == 1)
}

/// Record the attempt a lost worker had counted, as `lease_expired`; called only
/// once the claim's statement took the row, so a lost race records nothing.
fn insert_lease_expired_attempt(tx: &Transaction<'_>, row: &ClaimRow, now_ms: i64) -> Result<(), StoreError> {
    let started = row.claimed_at.unwrap_or(now_ms);
    let f = Failure::lease_expired();
    insert_attempt(tx, row.candidate.id, row.candidate.record.attempts, started, now_ms, Some(&f), None)
}

pub(super) fn claim(
    conn: &mut Connection,
    now_ms: i64,
    limit: usize,
    decide: &mut dyn FnMut(&ClaimCandidate) -> ClaimVerdict,
    raise: &dyn Raise,
) -> Result<ClaimReport, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Ended leases first (rare), then due pending deliveries in due order; two
    // queries so each walks the (state, due_at) index in order under its LIMIT.
    let mut rows = read_claim_rows(&tx, "running", now_ms, limit)?;
    let left = limit.saturating_sub(rows.len());
    if left > 0 {
        rows.extend(read_claim_rows(&tx, "pending", now_ms, left)?);
    }
    // Each connection's breaker as this claim leaves it (a probe taken earlier in
    // the batch holds the rest).
    let mut breakers: HashMap<String, Option<BreakerRow>> = HashMap::new();
    let mut report = ClaimReport::default();
    for mut row in rows {
        if !breakers.contains_key(&row.candidate.connection) {
            let found = read_breaker(&tx, &row.candidate.connection)?;
            breakers.insert(row.candidate.connection.clone(), found);
        }
        let current = breakers.get(&row.candidate.connection).cloned().flatten();
        row.candidate.breaker = current.clone().unwrap_or_default();
        let (mut decision, next_breaker) = decide(&row.candidate);
        let c = &row.candidate;
        if let Some(next) = next_breaker {
            // This claim is the probe; if another process changed the breaker
            // since it was read, the delivery is held instead.
            if write_breaker(&tx, &c.connection, current.as_ref(), &next, now_ms)? {
                breakers.insert(c.connection.clone(), Some(next));
            } else {
                decision = decision.held();
            }
        }
        let seen = row.seen();
        let (took, lease_expired) = match &decision {
            ClaimDecision::Skip => continue,
            ClaimDecision::Hold { lease_expired, failure } => {
                let took = hold(&tx, seen, &c.connection, failure.as_ref(), now_ms)?;
                if took {
                    report.held.push((c.id, c.connection.clone()));
                }
                (took, *lease_expired)
            }
            ClaimDecision::Handled => {
                let took = end_handled(&tx, seen, end_reason_at_claim(&decision).unwrap_or_default(), now_ms)?;
                (took, false)
            }
            ClaimDecision::Run { attempt, lease_until_ms, lease_expired, failure } => {
                let took = start_run(&tx, seen, *attempt, *lease_until_ms, now_ms, failure.as_ref())?;
                if took {
                    report.run.push(row.started(*attempt, *lease_until_ms, now_ms, failure.clone()));
                }
                (took, *lease_expired)
            }
            ClaimDecision::GiveUp { failure, lease_expired, .. } => {
                let took = give_up(&tx, seen, failure, end_reason_at_claim(&decision).unwrap_or_default(), now_ms)?;
                if took {
                    given_up(&tx, raise, &row, failure, now_ms)?;
                }
                (took, *lease_expired)
            }
        };
        if took && lease_expired {
            insert_lease_expired_attempt(&tx, &row, now_ms)?;
        }
        if took && matches!(decision, ClaimDecision::Handled | ClaimDecision::GiveUp { .. }) {
            report.ended.push((row.candidate.id, row.candidate.subscriber.clone(), decision));
        }
    }
    tx.commit()?;
    Ok(report)
}
