//! Claims: due deliveries locked with `FOR UPDATE SKIP LOCKED` (two processes
//! never take one row, nor wait on each other's), the core deciding each, and
//! every change one statement guarded by the row as read.
//!
//! A process's claims read in turn, each on from where the last one stopped (its
//! [`ClaimCursor`]) rather than from the head of the due indexes:
//! every delivery that leaves `pending` or `running` leaves a dead entry at the
//! head of its index until a vacuum removes it, and a claim that started at the
//! head would step over all of them, a cost growing with every delivery handled.

use super::super::{ClaimCandidate, ClaimReport, ClaimRow, ClaimVerdict, Raise, end_reason_at_claim};
use super::breakers::{read_breaker, write_breaker};
use super::builtin::given_up;
use super::outcomes::{LostAttempt, insert_lost_attempts};
use super::{Prepared, RowOf, StoreError, bulk_transaction, col, count_of, failure_of, pg_error, q, state_of};
use crate::config::CLAIM_FROM_HEAD_EVERY_MS;
use crate::rules::breaker::BreakerRow;
use crate::rules::{ClaimDecision, Failure, Record};
use jadpo_check::program::DeliveryState;
use postgres::{Client, Transaction};
use std::collections::HashMap;
use std::sync::Mutex;

/// Where a process's next claim reads from, in each due index, as the due time
/// and id of the last entry it need not read again.
///
/// - **Ended leases** (`running`): a lease ends at least the lease grace after
///   its claim, so one ending by the time of a read was read by it; the next read
///   starts after that time (or after the last row a full batch took).
/// - **Due deliveries** (`pending`): while a batch comes back full (a backlog is
///   being drained) the next claim reads on after its last row; a claim that
///   found fewer, skipped one it left waiting, or failed, sends the next back to
///   the head.
///
/// A row the cursor has passed can still be due: one another process had locked
/// when the read passed it and then let go (its transaction rolled back), or
/// one committed late with an earlier due time. Each index is therefore read
/// from its head at least every [`CLAIM_FROM_HEAD_EVERY_MS`] of the claims'
/// clock, so such a row waits that long at most.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ClaimCursor {
    running: IndexCursor,
    pending: IndexCursor,
}

/// Where the next read of one due index starts, and when it was last read from
/// its head.
#[derive(Debug, Default, Clone, Copy)]
struct IndexCursor {
    /// The (due time, id) the next read starts after; `None`: the head.
    after: Option<(i64, i64)>,
    head_read_at: Option<i64>,
}

impl IndexCursor {
    /// The entry a read at `now_ms` starts after: `None` (the head) when the index
    /// was last read from its head long enough ago, before or after `now_ms` (the
    /// process's claims take their times before they take their turns to read, so
    /// a read can come with a time a little before the last one's).
    fn start(&mut self, now_ms: i64) -> Option<(i64, i64)> {
        let fresh = self.head_read_at.is_some_and(|at| now_ms.abs_diff(at) < CLAIM_FROM_HEAD_EVERY_MS);
        if fresh && self.after.is_some() {
            return self.after;
        }
        self.head_read_at = Some(now_ms);
        None
    }
}

/// The (due time, id) a row is read in.
fn position(row: &ClaimRow) -> (i64, i64) {
    (row.due_at.unwrap_or(i64::MIN), row.candidate.id)
}

pub(super) fn read_rows(
    tx: &mut Transaction<'_>,
    prepared: &mut Prepared,
    s: &str,
    of: DeliveryState,
    after: Option<(i64, i64)>,
    now_ms: i64,
    limit: usize,
) -> Result<Vec<ClaimRow>, StoreError> {
    // The state (pending: due deliveries; running: ended leases) is written into
    // the statement, not passed, so that the partial index of that state is the
    // plan whatever the parameters.
    let sql = q(
        &format!(
            "SELECT d.id, d.subscriber, d.connection, d.state, d.attempts, d.due_at, d.lease_until, \
             d.budget_start, d.held_ms, d.last_code, d.last_kind, d.last_reason, d.claimed_at, \
             d.handled_at IS NOT NULL AS handled, e.id AS event_id, e.name AS event, e.payload \
             FROM {{s}}.deliveries d JOIN {{s}}.events e ON e.id = d.event_id \
             WHERE d.state = '{}' AND d.due_at <= $1 AND (d.due_at, d.id) > ($2, $3) \
             ORDER BY d.due_at, d.id LIMIT $4 FOR UPDATE OF d SKIP LOCKED",
            of.as_str()
        ),
        s,
    );
    let (after_due, after_id) = after.unwrap_or((i64::MIN, i64::MIN));
    let statement = prepared.get(tx, sql)?;
    let rows = tx.query(&statement, &[&now_ms, &after_due, &after_id, &(limit as i64)]).map_err(pg_error)?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let st: String = col(r, "state")?;
        let state = state_of(&st)?;
        let due_at: Option<i64> = col(r, "due_at")?;
        let id = col(r, "id")?;
        let record = Record {
            state,
            attempts: count_of(col(r, "attempts")?, RowOf::Delivery(id), "attempts")?,
            due_at_ms: if state == DeliveryState::Pending { due_at } else { None },
            lease_until_ms: col(r, "lease_until")?,
            budget_start_ms: col(r, "budget_start")?,
            held_ms: col(r, "held_ms")?,
            last_failure: failure_of(col(r, "last_code")?, col(r, "last_kind")?, col(r, "last_reason")?)?,
        };
        out.push(ClaimRow {
            candidate: ClaimCandidate {
                id,
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

/// One claim decision's write, as the bulk statement takes it: the row as read
/// (the guard) and the values the decision gives it.
pub(super) struct Change {
    /// Index in the rows read.
    row: usize,
    decision: ClaimDecision,
    state: &'static str,
    attempts: i64,
    due_at: Option<i64>,
    lease_until: Option<i64>,
    /// Whether the decision writes the last failure (`failure` may be `None`).
    sets_failure: bool,
    failure: Option<Failure>,
    end_reason: Option<&'static str>,
}

impl Change {
    pub(super) fn of(row: usize, seen: &ClaimRow, decision: ClaimDecision) -> Option<Change> {
        let attempts = i64::from(seen.candidate.record.attempts);
        let end_reason = end_reason_at_claim(&decision);
        let (state, attempts, due_at, lease_until, sets_failure, failure) = match &decision {
            ClaimDecision::Skip => return None,
            ClaimDecision::Hold { failure, .. } => ("held", attempts, None, None, true, failure.clone()),
            ClaimDecision::Handled => ("succeeded", attempts, None, None, false, None),
            ClaimDecision::Run { attempt, lease_until_ms, failure, .. } => {
                ("running", i64::from(*attempt), Some(*lease_until_ms), Some(*lease_until_ms), true, failure.clone())
            }
            ClaimDecision::GiveUp { failure, .. } => ("failed", attempts, None, None, true, Some(failure.clone())),
        };
        Some(Change { row, decision, state, attempts, due_at, lease_until, sets_failure, failure, end_reason })
    }

    fn lease_expired(&self) -> bool {
        match &self.decision {
            ClaimDecision::Run { lease_expired, .. }
            | ClaimDecision::Hold { lease_expired, .. }
            | ClaimDecision::GiveUp { lease_expired, .. } => *lease_expired,
            ClaimDecision::Skip | ClaimDecision::Handled => false,
        }
    }
}

/// Write every decision of a claim in one statement, each row guarded by itself as
/// read (state, attempts, due time): a row another process changed since is not
/// written. Returns the indices, in `changes`, of the rows written.
pub(super) fn apply_all(
    tx: &mut Transaction<'_>,
    prepared: &mut Prepared,
    s: &str,
    rows: &[ClaimRow],
    changes: &[Change],
    now_ms: i64,
) -> Result<Vec<usize>, StoreError> {
    if changes.is_empty() {
        return Ok(Vec::new());
    }
    let mut idx = Vec::with_capacity(changes.len());
    let (mut id, mut seen_state, mut seen_attempts, mut seen_due) = (vec![], vec![], vec![], vec![]);
    let (mut state, mut attempts, mut due_at, mut lease_until) = (vec![], vec![], vec![], vec![]);
    let (mut connection, mut sets_failure, mut code, mut kind, mut reason, mut end_reason) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for (i, c) in changes.iter().enumerate() {
        let row = &rows[c.row];
        let f = c.failure.as_ref();
        idx.push(i as i64);
        id.push(row.candidate.id);
        seen_state.push(row.state.as_str());
        seen_attempts.push(i64::from(row.candidate.record.attempts));
        seen_due.push(row.due_at);
        state.push(c.state);
        attempts.push(c.attempts);
        due_at.push(c.due_at);
        lease_until.push(c.lease_until);
        connection.push(row.candidate.connection.as_str());
        sets_failure.push(c.sets_failure);
        code.push(f.map(|f| f.code.as_str()));
        kind.push(f.map(|f| f.kind.as_str()));
        reason.push(f.and_then(|f| f.reason.as_deref()));
        end_reason.push(c.end_reason);
    }
    let sql = q(
        "UPDATE {s}.deliveries d SET state = u.state, attempts = u.attempts, due_at = u.due_at, \
         lease_until = u.lease_until, \
         claimed_at = CASE WHEN u.state IN ('running', 'succeeded', 'failed') THEN $1::bigint \
         ELSE d.claimed_at END, \
         held_since = CASE WHEN u.state = 'held' THEN $1::bigint ELSE d.held_since END, \
         held_connection = CASE WHEN u.state = 'held' THEN u.connection ELSE d.held_connection END, \
         last_code = CASE WHEN u.sets_failure THEN u.code ELSE d.last_code END, \
         last_kind = CASE WHEN u.sets_failure THEN u.kind ELSE d.last_kind END, \
         last_reason = CASE WHEN u.sets_failure THEN u.reason ELSE d.last_reason END, \
         end_reason = COALESCE(u.end_reason, d.end_reason) \
         FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::bigint[], $6::bigint[], $7::text[], \
         $8::bigint[], $9::bigint[], $10::bigint[], $11::text[], $12::bool[], $13::text[], $14::text[], \
         $15::text[], $16::text[]) AS u(i, id, seen_state, seen_attempts, seen_due, state, attempts, due_at, \
         lease_until, connection, sets_failure, code, kind, reason, end_reason) \
         WHERE d.id = u.id AND d.state = u.seen_state AND d.attempts = u.seen_attempts \
         AND d.due_at IS NOT DISTINCT FROM u.seen_due \
         RETURNING u.i",
        s,
    );
    let statement = prepared.get(tx, sql)?;
    let written = tx
        .query(
            &statement,
            &[
                &now_ms,
                &idx,
                &id,
                &seen_state,
                &seen_attempts,
                &seen_due,
                &state,
                &attempts,
                &due_at,
                &lease_until,
                &connection,
                &sets_failure,
                &code,
                &kind,
                &reason,
                &end_reason,
            ],
        )
        .map_err(pg_error)?;
    let mut out = Vec::with_capacity(written.len());
    for r in &written {
        let i: i64 = col(r, "i")?;
        out.push(usize::try_from(i).map_err(|_| StoreError::Corrupt(format!("claim index `{i}`")))?);
    }
    out.sort_unstable();
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
pub(super) fn claim(
    client: &mut Client,
    prepared: &mut Prepared,
    s: &str,
    cursor: &Mutex<ClaimCursor>,
    now_ms: i64,
    limit: usize,
    decide: &mut dyn FnMut(&ClaimCandidate) -> ClaimVerdict,
    raise: &dyn Raise,
) -> Result<ClaimReport, StoreError> {
    let claimed = (|| -> Result<ClaimReport, StoreError> {
        let mut tx = bulk_transaction(client)?;
        let (mut rows, expired) = read_due(&mut tx, prepared, s, cursor, now_ms, limit)?;
        let mut breakers: HashMap<String, Option<BreakerRow>> = HashMap::new();
        let mut changes = Vec::with_capacity(rows.len());
        // Whether a due row (or an ended lease) was left for later.
        let (mut left_pending, mut left_running) = (false, false);
        for (i, row) in rows.iter_mut().enumerate() {
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
            match Change::of(i, row, decision) {
                Some(change) => changes.push(change),
                // A due row left for later (its connection's slots are taken): the
                // next claim reads it again, from the head.
                None if i >= expired => left_pending = true,
                None => left_running = true,
            }
        }
        if left_pending || left_running {
            let mut cursor = lock(cursor);
            if left_pending {
                cursor.pending.after = None;
            }
            if left_running {
                cursor.running.after = None;
            }
        }
        let written = apply_all(&mut tx, prepared, s, &rows, &changes, now_ms)?;
        // The attempts lost workers had counted, recorded only for the rows this claim
        // took.
        let lost: Vec<LostAttempt> = written
            .iter()
            .map(|&w| &changes[w])
            .filter(|c| c.lease_expired())
            .map(|c| {
                let row = &rows[c.row];
                LostAttempt {
                    delivery: row.candidate.id,
                    attempt: row.candidate.record.attempts,
                    started_at_ms: row.claimed_at.unwrap_or(now_ms),
                }
            })
            .collect();
        insert_lost_attempts(&mut tx, s, &lost, now_ms)?;
        let mut report = ClaimReport::default();
        for c in written.into_iter().map(|w| &changes[w]) {
            let row = &rows[c.row];
            let id = row.candidate.id;
            match &c.decision {
                ClaimDecision::Skip => {}
                ClaimDecision::Hold { .. } => report.held.push((id, row.candidate.connection.clone())),
                ClaimDecision::Run { attempt, lease_until_ms, failure, .. } => {
                    report.run.push(row.started(*attempt, *lease_until_ms, now_ms, failure.clone()));
                }
                ClaimDecision::GiveUp { failure, .. } => {
                    // What giving it up raises, stored now that its statement matched.
                    given_up(&mut tx, s, raise, row, failure, now_ms)?;
                    report.ended.push((id, row.candidate.subscriber.clone(), c.decision.clone()));
                }
                ClaimDecision::Handled => report.ended.push((id, row.candidate.subscriber.clone(), c.decision.clone())),
            }
        }
        tx.commit().map_err(pg_error)?;
        Ok(report)
    })();
    if claimed.is_err() {
        // The rows it had locked are free again, behind where the next claim reads.
        *lock(cursor) = ClaimCursor::default();
    }
    claimed
}

fn lock(cursor: &Mutex<ClaimCursor>) -> std::sync::MutexGuard<'_, ClaimCursor> {
    cursor.lock().unwrap_or_else(|e| e.into_inner())
}

/// Lock the due rows from where the cursor stands and move it past them; the
/// cursor is held for these reads only, so the process's next claim reads on
/// after them while this one decides, writes and commits.
fn read_due(
    tx: &mut Transaction<'_>,
    prepared: &mut Prepared,
    s: &str,
    cursor: &Mutex<ClaimCursor>,
    now_ms: i64,
    limit: usize,
) -> Result<(Vec<ClaimRow>, usize), StoreError> {
    let mut cursor = lock(cursor);
    let after = cursor.running.start(now_ms);
    let mut rows = read_rows(tx, prepared, s, DeliveryState::Running, after, now_ms, limit)?;
    // Every lease ending by now was read, unless the batch was full.
    cursor.running.after = if rows.len() == limit { rows.last().map(position) } else { Some((now_ms, i64::MAX)) };
    let expired = rows.len();
    let left = limit.saturating_sub(expired);
    if left > 0 {
        let after = cursor.pending.start(now_ms);
        let pending = read_rows(tx, prepared, s, DeliveryState::Pending, after, now_ms, left)?;
        cursor.pending.after = if pending.len() == left { pending.last().map(position) } else { None };
        rows.extend(pending);
    }
    Ok((rows, expired))
}
