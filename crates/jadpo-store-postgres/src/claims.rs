//! Claims: due deliveries locked with `FOR UPDATE SKIP LOCKED` (two processes
//! never take one row, nor wait on each other's), the core deciding each, and
//! every change one statement guarded by the row as read.
//!
//! A process's claims read in turn, each on from where the last one stopped (its
//! [`ClaimCursor`]) rather than from the head of the due indexes:
//! every delivery that leaves `pending` or `running` leaves a dead entry at the
//! head of its index until a vacuum removes it, and a claim that started at the
//! head would step over all of them, a cost growing with every delivery handled.

use super::breakers::{read_breaker, write_breaker};
use super::builtin::{given_up, insert_events};
use super::outcomes::insert_lost_attempts;
use super::unnest::Columns;
use super::{Prepared, RowOf, StoreError, bulk_transaction, col, count_of, failure_of, pg_error, state_of};
use jadpo_check::program::DeliveryState;
use jadpo_core::claim::{self, BreakerRows, ClaimPlan, ClaimRow, RowWrite, Seen};
use jadpo_core::config::CLAIM_FROM_HEAD_EVERY_MS;
use jadpo_core::rules::Record;
use jadpo_core::rules::breaker::BreakerRow;
use jadpo_core::store::{ClaimCandidate, ClaimReport, ClaimVerdict, Raise};
use postgres::{Client, Transaction};
use std::sync::Mutex;

/// How long, in milliseconds, a claim tries for the processes' turn to read
/// (held by another process's claim while it reads); past it, the claim reads
/// without the turn, stepping over the rows others have locked, rather than wait
/// on a process that has stopped answering.
const CLAIM_TURN_WAIT_MS: i64 = 50;

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

/// A pending delivery (`d`) no earlier delivery of its key holds back: unordered,
/// or every earlier one of its subscriber and key has ended
/// ([`jadpo_core::rules::BLOCKS_ITS_KEY`] lists the states that hold it back).
macro_rules! not_held_back {
    () => {
        "(d.order_key IS NULL OR NOT EXISTS (SELECT 1 FROM deliveries b WHERE b.subscriber = d.subscriber \
         AND b.order_key = d.order_key AND b.event_id < d.event_id \
         AND b.state IN ('pending', 'running', 'held', 'parked', 'orphaned')))"
    };
}
pub(super) use not_held_back;

/// A claim's read of the due index of the state `$state`: the rows due by `$1`
/// after the entry ($2, $3) up to the entry ($5, $6), at most `$4` of them,
/// locked, narrowed by the conditions `$narrowed` (each string followed by a
/// comma).
macro_rules! due_rows {
    ($state:literal, $($narrowed:tt)*) => {
        concat!(
            "SELECT d.id, d.subscriber, d.connection, d.state, d.attempts, d.due_at, d.lease_until, \
             d.budget_start, d.held_ms, d.last_code, d.last_kind, d.last_reason, d.claimed_at, \
             d.handled_at IS NOT NULL AS handled, e.id AS event_id, e.name AS event, e.payload, \
             e.version AS event_version, d.order_key IS NOT NULL AS ordered \
             FROM deliveries d JOIN events e ON e.id = d.event_id \
             WHERE d.state = '",
            $state,
            "' AND d.due_at <= $1 AND (d.due_at, d.id) > ($2, $3) AND (d.due_at, d.id) <= ($5, $6)",
            $($narrowed)*
            " ORDER BY d.due_at, d.id LIMIT $4 FOR UPDATE OF d SKIP LOCKED"
        )
    };
}

/// The due index a claim reads: ended leases (`running` rows whose lease ended)
/// or due deliveries (`pending`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DueIndex {
    Leases,
    Pending,
}

impl DueIndex {
    /// The index's read. The state is written into the statement, not passed,
    /// so that the partial index of that state is the plan whatever the
    /// parameters. A lease that ended is its key's head already; a pending
    /// delivery may wait behind an earlier one of its key.
    fn sql(self) -> &'static str {
        match self {
            DueIndex::Leases => due_rows!("running",),
            DueIndex::Pending => due_rows!("pending", " AND ", not_held_back!(),),
        }
    }
}

/// The stretch of a due index a read takes its rows from, between two (due
/// time, id) entries: after `after` (`None`: from the head) up to `up_to`
/// itself (`None`: to the end).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Span {
    pub after: Option<(i64, i64)>,
    pub up_to: Option<(i64, i64)>,
}

impl Span {
    /// From just after `after` (the head when `None`) to the end.
    pub fn after(after: Option<(i64, i64)>) -> Span {
        Span { after, up_to: None }
    }
}

pub(super) fn read_rows(
    tx: &mut Transaction<'_>,
    prepared: &mut Prepared,
    of: DueIndex,
    span: Span,
    now_ms: i64,
    limit: usize,
) -> Result<Vec<ClaimRow>, StoreError> {
    let (after_due, after_id) = span.after.unwrap_or((i64::MIN, i64::MIN));
    let (up_to_due, up_to_id) = span.up_to.unwrap_or((i64::MAX, i64::MAX));
    let statement = prepared.get(tx, of.sql())?;
    let rows = tx
        .query(&statement, &[&now_ms, &after_due, &after_id, &(limit as i64), &up_to_due, &up_to_id])
        .map_err(pg_error)?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let state = state_of(&col::<String>(r, "state")?)?;
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
            due_at,
            claimed_at: col(r, "claimed_at")?,
            event_id: col(r, "event_id")?,
            event: col(r, "event")?,
            payload: col(r, "payload")?,
            event_version: col(r, "event_version")?,
            ordered: col(r, "ordered")?,
        });
    }
    Ok(out)
}

/// Write every change of a claim in one statement, each row guarded by itself as
/// read (state, attempts, due time): a row another process changed since is not
/// written. Returns the indices, in `plan.changes`, of the rows written.
pub(super) fn apply_all<'a>(
    tx: &mut Transaction<'_>,
    prepared: &mut Prepared,
    rows: &'a [ClaimRow],
    plan: &'a ClaimPlan,
    now_ms: i64,
) -> Result<Vec<usize>, StoreError> {
    if plan.changes.is_empty() {
        return Ok(Vec::new());
    }
    let changes = &plan.changes;
    let seen: Vec<Seen> = changes.iter().map(|c| rows[c.row].seen()).collect();
    let writes: Vec<&RowWrite> = changes.iter().map(|c| &c.write).collect();
    let failure = |w: &&'a RowWrite| w.failure.written().1;
    let mut columns = Columns::default();
    columns
        .add("i", "bigint", (0..changes.len()).map(|i| i as i64).collect::<Vec<i64>>())
        .add("id", "bigint", seen.iter().map(|r| r.id).collect::<Vec<i64>>())
        .add("seen_state", "text", seen.iter().map(|r| r.state.as_str()).collect::<Vec<&str>>())
        .add("seen_attempts", "bigint", seen.iter().map(|r| i64::from(r.attempts)).collect::<Vec<i64>>())
        .add("seen_due", "bigint", seen.iter().map(|r| r.due_at).collect::<Vec<Option<i64>>>())
        .add("state", "text", writes.iter().map(|w| w.state.as_str()).collect::<Vec<&str>>())
        .add("attempts", "bigint", writes.iter().map(|w| i64::from(w.attempts)).collect::<Vec<i64>>())
        .add("due_at", "bigint", writes.iter().map(|w| w.due_at).collect::<Vec<Option<i64>>>())
        .add("lease_until", "bigint", writes.iter().map(|w| w.lease_until).collect::<Vec<Option<i64>>>())
        .add("stamps", "bool", writes.iter().map(|w| w.stamps_claim).collect::<Vec<bool>>())
        .add("holds", "bool", writes.iter().map(|w| w.holds).collect::<Vec<bool>>())
        .add(
            "connection",
            "text",
            changes.iter().map(|c| rows[c.row].candidate.connection.as_str()).collect::<Vec<&str>>(),
        )
        .add("sets_failure", "bool", writes.iter().map(|w| w.failure.written().0).collect::<Vec<bool>>())
        .add("code", "text", writes.iter().map(|w| failure(w).map(|f| f.code.as_str())).collect::<Vec<Option<&str>>>())
        .add("kind", "text", writes.iter().map(|w| failure(w).map(|f| f.kind.as_str())).collect::<Vec<Option<&str>>>())
        .add(
            "reason",
            "text",
            writes.iter().map(|w| failure(w).and_then(|f| f.reason.as_deref())).collect::<Vec<Option<&str>>>(),
        )
        .add("end_reason", "text", writes.iter().map(|w| w.end_reason).collect::<Vec<Option<&str>>>())
        .add("budget_start", "bigint", writes.iter().map(|w| w.budget_start).collect::<Vec<i64>>())
        .add("waited", "bigint", writes.iter().map(|w| w.waited_ms).collect::<Vec<i64>>());
    let sql = format!(
        "UPDATE deliveries d SET state = u.state, attempts = u.attempts, due_at = u.due_at, \
             lease_until = u.lease_until, \
             claimed_at = CASE WHEN u.stamps THEN $1::bigint ELSE d.claimed_at END, \
             held_since = CASE WHEN u.holds THEN $1::bigint ELSE d.held_since END, \
             held_connection = CASE WHEN u.holds THEN u.connection ELSE d.held_connection END, \
             last_code = CASE WHEN u.sets_failure THEN u.code ELSE d.last_code END, \
             last_kind = CASE WHEN u.sets_failure THEN u.kind ELSE d.last_kind END, \
             last_reason = CASE WHEN u.sets_failure THEN u.reason ELSE d.last_reason END, \
             end_reason = COALESCE(u.end_reason, d.end_reason), budget_start = u.budget_start, \
             held_ms = d.held_ms + u.waited \
             FROM {} \
             WHERE d.id = u.id AND d.state = u.seen_state AND d.attempts = u.seen_attempts \
             AND d.due_at IS NOT DISTINCT FROM u.seen_due \
             RETURNING u.i",
        columns.rows_clause(2)
    );
    let statement = prepared.get(tx, sql)?;
    let written = tx.query(&statement, &columns.params_after(&[&now_ms])).map_err(pg_error)?;
    let mut out = Vec::with_capacity(written.len());
    for r in &written {
        let i: i64 = col(r, "i")?;
        out.push(usize::try_from(i).map_err(|_| StoreError::Corrupt(format!("claim index `{i}`")))?);
    }
    out.sort_unstable();
    Ok(out)
}

/// The breaker rows of a claim, in its transaction.
struct Breakers<'t, 'c> {
    tx: &'t mut Transaction<'c>,
    now_ms: i64,
}

impl BreakerRows for Breakers<'_, '_> {
    type Error = StoreError;

    fn read(&mut self, connection: &str) -> Result<Option<BreakerRow>, StoreError> {
        read_breaker(self.tx, connection)
    }

    fn write(&mut self, connection: &str, seen: Option<&BreakerRow>, next: &BreakerRow) -> Result<bool, StoreError> {
        write_breaker(self.tx, connection, seen, next, self.now_ms)
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn claim(
    client: &mut Client,
    prepared: &mut Prepared,
    cursor: &Mutex<ClaimCursor>,
    now_ms: i64,
    limit: usize,
    decide: &mut dyn FnMut(&ClaimCandidate) -> ClaimVerdict,
    raise: &dyn Raise,
) -> Result<ClaimReport, StoreError> {
    // Whether this claim holds the processes' turn to read: it is a session's
    // lock, which a rollback does not release.
    let mut turn = false;
    let claimed = (|| -> Result<ClaimReport, StoreError> {
        let mut tx = bulk_transaction(client)?;
        let Due { mut rows, expired, read_to } = read_due(&mut tx, prepared, cursor, now_ms, limit, &mut turn)?;
        let plan = claim::plan(&mut rows, &mut Breakers { tx: &mut tx, now_ms }, now_ms, decide)?;
        // A due row (or an ended lease) left for later (its connection's slots are
        // taken): the next claim reads that index again, from the head.
        let left_running = plan.left.iter().any(|&i| i < expired);
        let left_pending = plan.left.iter().any(|&i| i >= expired);
        if left_pending || left_running {
            let mut cursor = lock(cursor);
            if left_pending {
                cursor.pending.after = None;
            }
            if left_running {
                cursor.running.after = None;
            }
        }
        if turn {
            // The turn ends once the claim knows it leaves no due row waiting:
            // only then may the processes' cursor pass its rows.
            let (due, id) = read_to.filter(|_| !left_pending).unzip();
            let statement = prepared.get(&mut tx, "SELECT end_claim_turn($1, $2)")?;
            tx.execute(&statement, &[&due, &id]).map_err(pg_error)?;
            turn = false;
        }
        let written = apply_all(&mut tx, prepared, &rows, &plan, now_ms)?;
        let settled = claim::settle(&rows, &plan, &written, now_ms);
        insert_lost_attempts(&mut tx, &settled.lost, now_ms)?;
        for ended in &settled.given_up {
            // What giving it up raises, stored now that its statement matched.
            given_up(&mut tx, raise, ended, now_ms)?;
        }
        for orphaned in &settled.orphaned {
            insert_events(&mut tx, &raise.delivery_orphaned(orphaned), now_ms)?;
        }
        let report = settled.report;
        tx.commit().map_err(pg_error)?;
        Ok(report)
    })();
    if claimed.is_err() {
        // The rows it had locked are free again, behind where the next claim reads.
        *lock(cursor) = ClaimCursor::default();
        if turn {
            // A connection this fails on is broken, and its session's end
            // releases the turn.
            let _ = client.batch_execute("SELECT pg_advisory_unlock(claim_turn_key())");
        }
    }
    claimed
}

fn lock(cursor: &Mutex<ClaimCursor>) -> std::sync::MutexGuard<'_, ClaimCursor> {
    cursor.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a claim read: the rows it locked, the ended leases first (`expired` of
/// them), and where a full read of due deliveries stopped.
struct Due {
    rows: Vec<ClaimRow>,
    expired: usize,
    read_to: Option<(i64, i64)>,
}

/// Lock the due rows from where the cursor stands and move it past them; the
/// cursor is held for these reads only, so the process's next claim reads on
/// after them while this one decides, writes and commits. The due deliveries
/// are read in the processes' turn (`turn` says it is held; the claim ends it
/// once decided): reading on, a claim starts after the rows the last turn
/// locked when they are ahead of its own cursor.
fn read_due(
    tx: &mut Transaction<'_>,
    prepared: &mut Prepared,
    cursor: &Mutex<ClaimCursor>,
    now_ms: i64,
    limit: usize,
    turn: &mut bool,
) -> Result<Due, StoreError> {
    let mut cursor = lock(cursor);
    let after = cursor.running.start(now_ms);
    let mut rows = read_rows(tx, prepared, DueIndex::Leases, Span::after(after), now_ms, limit)?;
    // Every lease ending by now was read, unless the batch was full.
    cursor.running.after = if rows.len() == limit { rows.last().map(position) } else { Some((now_ms, i64::MAX)) };
    let expired = rows.len();
    let left = limit.saturating_sub(expired);
    let mut read_to = None;
    if left > 0 {
        let statement = prepared.get(tx, "SELECT turn, due, id FROM claim_turn($1)")?;
        let shared = tx.query_one(&statement, &[&CLAIM_TURN_WAIT_MS]).map_err(pg_error)?;
        *turn = col(&shared, "turn")?;
        let after = match cursor.pending.start(now_ms) {
            Some(own) if *turn => Some(own.max((col(&shared, "due")?, col(&shared, "id")?))),
            start => start,
        };
        let mut pending = read_rows(tx, prepared, DueIndex::Pending, Span::after(after), now_ms, left)?;
        if pending.len() < left && after.is_some() {
            // Read on, the claim found fewer than it could take: the rows it
            // passed, up to where it started, may hold some due now (due earlier
            // than the last one taken, or let go or released since: a row
            // released is due where it stood), which it takes first rather
            // than a poll later.
            let passed = Span { after: None, up_to: after };
            let mut earlier = read_rows(tx, prepared, DueIndex::Pending, passed, now_ms, left - pending.len())?;
            earlier.append(&mut pending);
            pending = earlier;
        }
        cursor.pending.after = if pending.len() == left { pending.last().map(position) } else { None };
        read_to = cursor.pending.after;
        rows.extend(pending);
    }
    Ok(Due { rows, expired, read_to })
}
