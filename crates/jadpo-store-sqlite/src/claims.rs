//! Claims: due deliveries read in due order, the core deciding each
//! ([`jadpo_core::claim`]), and every change one statement conditional on the row
//! being as it was read.

use super::breakers::{read_breaker, write_breaker};
use super::builtin::{given_up, insert_events};
use super::outcomes::{AttemptRow, insert_attempts};
use super::tx::Tx;
use super::{Error, RowOf, by_name, count_in, failure_of, state_of};
use jadpo_check::program::DeliveryState;
use jadpo_core::claim::{self, BreakerRows, ClaimRow, LostAttempt, RowWrite, Seen};
use jadpo_core::rules::breaker::BreakerRow;
use jadpo_core::rules::{Failure, Record};
use jadpo_core::store::StoreError;
use jadpo_core::store::{ClaimCandidate, ClaimReport, ClaimVerdict, Raise};
use rusqlite::{CachedStatement, Connection, ToSql, named_params};

/// The columns a claim reads (a delivery joined with its event).
macro_rules! claim_columns {
    () => {
        "d.id, d.subscriber, d.connection, d.state, d.attempts, d.due_at, \
     d.lease_until, d.budget_start, d.held_ms, d.last_code, d.last_kind, d.last_reason, d.claimed_at, \
     d.handled_at IS NOT NULL AS handled, \
     e.id AS event_id, e.name AS event, e.payload, e.version AS event_version, \
     d.order_key IS NOT NULL AS ordered"
    };
}

/// A pending delivery no earlier delivery of its key holds back: unordered, or
/// every earlier one of its subscriber and key has ended
/// ([`jadpo_core::rules::BLOCKS_ITS_KEY`] lists the states that hold it back).
macro_rules! not_held_back {
    () => {
        "(d.order_key IS NULL OR NOT EXISTS (SELECT 1 FROM jadpo_deliveries b \
     WHERE b.subscriber = d.subscriber AND b.order_key = d.order_key AND b.event_id < d.event_id \
     AND b.state IN ('pending', 'running', 'held', 'parked', 'orphaned')))"
    };
}
pub(super) use not_held_back;

/// The claim's read of rows in a state, due by `:now`, in due order; `$and`
/// narrows it further.
macro_rules! claim_read {
    ($and:expr) => {
        concat!(
            "SELECT ",
            claim_columns!(),
            " FROM jadpo_deliveries d JOIN jadpo_events e ON e.id = d.event_id \
             WHERE d.state = :state AND d.due_at <= :now",
            $and,
            " ORDER BY d.due_at, d.id LIMIT :limit"
        )
    };
}

/// A claim's read of ended leases: a lease that ended is its key's head already.
pub(super) const READ_ENDED_LEASES: &str = claim_read!("");

/// A claim's read of due pending rows: one may wait behind an earlier delivery
/// of its key.
pub(super) const READ_DUE: &str = claim_read!(concat!(" AND ", not_held_back!()));

/// The positions of the columns a claim reads.
mod at {
    const COLUMNS: &str = claim_columns!();
    pub(super) const ID: usize = crate::column_at(COLUMNS, "id");
    pub(super) const SUBSCRIBER: usize = crate::column_at(COLUMNS, "subscriber");
    pub(super) const CONNECTION: usize = crate::column_at(COLUMNS, "connection");
    pub(super) const STATE: usize = crate::column_at(COLUMNS, "state");
    pub(super) const ATTEMPTS: usize = crate::column_at(COLUMNS, "attempts");
    pub(super) const DUE_AT: usize = crate::column_at(COLUMNS, "due_at");
    pub(super) const LEASE_UNTIL: usize = crate::column_at(COLUMNS, "lease_until");
    pub(super) const BUDGET_START: usize = crate::column_at(COLUMNS, "budget_start");
    pub(super) const HELD_MS: usize = crate::column_at(COLUMNS, "held_ms");
    pub(super) const LAST_CODE: usize = crate::column_at(COLUMNS, "last_code");
    pub(super) const LAST_KIND: usize = crate::column_at(COLUMNS, "last_kind");
    pub(super) const LAST_REASON: usize = crate::column_at(COLUMNS, "last_reason");
    pub(super) const CLAIMED_AT: usize = crate::column_at(COLUMNS, "claimed_at");
    pub(super) const HANDLED: usize = crate::column_at(COLUMNS, "handled");
    pub(super) const EVENT_ID: usize = crate::column_at(COLUMNS, "event_id");
    pub(super) const EVENT: usize = crate::column_at(COLUMNS, "event");
    pub(super) const PAYLOAD: usize = crate::column_at(COLUMNS, "payload");
    pub(super) const EVENT_VERSION: usize = crate::column_at(COLUMNS, "event_version");
    pub(super) const ORDERED: usize = crate::column_at(COLUMNS, "ordered");
}

fn read_claim_rows(tx: &Tx<'_>, state: DeliveryState, now_ms: i64, limit: usize) -> Result<Vec<ClaimRow>, Error> {
    let (sql, at) =
        if state == DeliveryState::Pending { (READ_DUE, by_name!()) } else { (READ_ENDED_LEASES, by_name!()) };
    let mut stmt = tx.prepare_cached(sql)?;
    at.bind(&mut stmt, named_params! {":state": state.as_str(), ":now": now_ms, ":limit": limit as i64})?;
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        // Read in place: a state is one of a few words, not worth a string.
        let state = r.get_ref(at::STATE)?;
        let state = state_of(
            state
                .as_str()
                .map_err(|e| rusqlite::Error::FromSqlConversionFailure(at::STATE, state.data_type(), Box::new(e)))?,
        )?;
        let due_at: Option<i64> = r.get(at::DUE_AT)?;
        let id = r.get(at::ID)?;
        let record = Record {
            state,
            attempts: count_in(r.get_ref(at::ATTEMPTS)?, "attempts", RowOf::Delivery(id))?,
            due_at_ms: if state == DeliveryState::Pending { due_at } else { None },
            lease_until_ms: r.get(at::LEASE_UNTIL)?,
            budget_start_ms: r.get(at::BUDGET_START)?,
            held_ms: r.get(at::HELD_MS)?,
            last_failure: failure_of(r.get(at::LAST_CODE)?, r.get(at::LAST_KIND)?, r.get(at::LAST_REASON)?)?,
        };
        out.push(ClaimRow {
            candidate: ClaimCandidate {
                id,
                subscriber: r.get(at::SUBSCRIBER)?,
                connection: r.get(at::CONNECTION)?,
                record,
                handled: r.get(at::HANDLED)?,
                breaker: BreakerRow::default(),
            },
            due_at,
            claimed_at: r.get(at::CLAIMED_AT)?,
            event_id: r.get(at::EVENT_ID)?,
            event: r.get(at::EVENT)?,
            payload: r.get(at::PAYLOAD)?,
            event_version: r.get(at::EVENT_VERSION)?,
            ordered: r.get(at::ORDERED)?,
        });
    }
    Ok(out)
}

/// A claim statement: `$set`, guarded by the row being as the claim read it (one
/// literal, so that the hot path formats no SQL per row).
macro_rules! as_seen {
    ($set:literal) => {
        concat!(
            $set,
            " WHERE id = :id AND state = :seen_state AND attempts = :seen_attempts AND due_at IS :seen_due_at"
        )
    };
}

/// A claim's write statements, each looked up in the connection's cache once
/// per claim rather than once per row (the lookup hashes the statement's SQL).
pub(super) struct Writes<'t> {
    tx: &'t Tx<'t>,
    held: Vec<(&'static str, CachedStatement<'t>)>,
}

impl<'t> Writes<'t> {
    pub(super) fn new(tx: &'t Tx<'t>) -> Writes<'t> {
        Writes { tx, held: Vec::new() }
    }

    fn statement(&mut self, sql: &'static str) -> Result<&mut CachedStatement<'t>, Error> {
        // The statements are literals: one is known by its address.
        let i = match self.held.iter().position(|(s, _)| std::ptr::eq(*s, sql)) {
            Some(i) => i,
            None => {
                self.held.push((sql, self.tx.prepare_cached(sql)?));
                self.held.len() - 1
            }
        };
        Ok(&mut self.held[i].1)
    }
}

/// A held row: not due, the claim's attempt given back.
pub(super) const HOLD: &str = as_seen!(
    "UPDATE jadpo_deliveries SET state = 'held', due_at = NULL, lease_until = NULL, held_since = :now, \
     held_connection = :connection, last_code = :code, last_kind = :kind, last_reason = :reason"
);
/// A row waiting for its connection's rate (or left for a process whose program
/// has its subscriber): pending, due at its turn, the wait held; a lost
/// worker's failure, when one is written, kept as its last.
pub(super) const WAIT: &str = as_seen!(
    "UPDATE jadpo_deliveries SET state = 'pending', due_at = :due_at, lease_until = NULL, \
     held_ms = held_ms + :waited, last_code = COALESCE(:code, last_code), last_kind = COALESCE(:kind, last_kind), \
     last_reason = CASE WHEN :code IS NULL THEN last_reason ELSE :reason END"
);
/// A row whose subscriber no running process's program has: not due, waiting
/// since now (its time held when it is taken back), a lost worker's failure
/// kept as [`WAIT`] keeps it.
pub(super) const ORPHAN: &str = as_seen!(
    "UPDATE jadpo_deliveries SET state = 'orphaned', due_at = NULL, lease_until = NULL, held_since = :now, \
     last_code = COALESCE(:code, last_code), last_kind = COALESCE(:kind, last_kind), \
     last_reason = CASE WHEN :code IS NULL THEN last_reason ELSE :reason END"
);
/// A run: the attempt counted, leased (the lease's end is also its due time, so a
/// claim finds it again when the lease ends).
pub(super) const RUN: &str = as_seen!(
    "UPDATE jadpo_deliveries SET state = 'running', attempts = :attempt, due_at = :lease_until, \
     lease_until = :lease_until, claimed_at = :now, last_code = :code, last_kind = :kind, \
     last_reason = :reason, budget_start = :budget_start"
);
/// Ended at the claim, a handled record found; the claim's time kept as its last
/// (retention counts a final delivery's age from it).
pub(super) const SUCCEED: &str = as_seen!(
    "UPDATE jadpo_deliveries SET state = 'succeeded', due_at = NULL, lease_until = NULL, \
     claimed_at = :now, end_reason = :end_reason"
);
/// Given up at the claim, its time kept as [`SUCCEED`] keeps it.
pub(super) const FAIL: &str = as_seen!(
    "UPDATE jadpo_deliveries SET state = 'failed', due_at = NULL, lease_until = NULL, claimed_at = :now, \
     last_code = :code, last_kind = :kind, last_reason = :reason, end_reason = :end_reason"
);

/// Each row write's parameters in the order SQLite numbers them, which is the
/// order they are bound in (the guard's four last): a test holds the statements
/// to it.
#[cfg(test)]
pub(super) const WRITE_PARAMS: [(&str, &[&str]); 6] = [
    (
        HOLD,
        &[":now", ":connection", ":code", ":kind", ":reason", ":id", ":seen_state", ":seen_attempts", ":seen_due_at"],
    ),
    (
        WAIT,
        &[":due_at", ":waited", ":code", ":kind", ":reason", ":id", ":seen_state", ":seen_attempts", ":seen_due_at"],
    ),
    (ORPHAN, &[":now", ":code", ":kind", ":reason", ":id", ":seen_state", ":seen_attempts", ":seen_due_at"]),
    (
        RUN,
        &[
            ":attempt",
            ":lease_until",
            ":now",
            ":code",
            ":kind",
            ":reason",
            ":budget_start",
            ":id",
            ":seen_state",
            ":seen_attempts",
            ":seen_due_at",
        ],
    ),
    (SUCCEED, &[":now", ":end_reason", ":id", ":seen_state", ":seen_attempts", ":seen_due_at"]),
    (
        FAIL,
        &[":now", ":code", ":kind", ":reason", ":end_reason", ":id", ":seen_state", ":seen_attempts", ":seen_due_at"],
    ),
];

/// Write what a claim decided for one row, as [`RowWrite`] says, conditional on the
/// row being as seen. Returns whether it was. One statement per kind of change,
/// each binding only what that change writes (a statement binding every column
/// for every row cost a claim a tenth more), by position: rusqlite looks a named
/// parameter up for every value bound.
pub(super) fn apply(
    writes: &mut Writes<'_>,
    seen: Seen,
    connection: &str,
    write: &RowWrite,
    now_ms: i64,
) -> Result<bool, Error> {
    let (_, failure) = write.failure.written();
    let (code, kind, reason) =
        (failure.map(|f| f.code.as_str()), failure.map(|f| f.kind.as_str()), failure.and_then(|f| f.reason.as_deref()));
    let state = seen.state.as_str();
    let guard = [&seen.id as &dyn ToSql, &state, &seen.attempts, &seen.due_at];
    let n = match write.state {
        DeliveryState::Held => {
            let set: [&dyn ToSql; 5] = [&now_ms, &connection, &code, &kind, &reason];
            execute(writes, HOLD, &set, &guard)?
        }
        DeliveryState::Pending => {
            let set: [&dyn ToSql; 5] = [&write.due_at, &write.waited_ms, &code, &kind, &reason];
            execute(writes, WAIT, &set, &guard)?
        }
        DeliveryState::Orphaned => {
            let set: [&dyn ToSql; 4] = [&now_ms, &code, &kind, &reason];
            execute(writes, ORPHAN, &set, &guard)?
        }
        DeliveryState::Running => {
            let set: [&dyn ToSql; 7] =
                [&write.attempts, &write.lease_until, &now_ms, &code, &kind, &reason, &write.budget_start];
            execute(writes, RUN, &set, &guard)?
        }
        DeliveryState::Succeeded => {
            let set: [&dyn ToSql; 2] = [&now_ms, &write.end_reason];
            execute(writes, SUCCEED, &set, &guard)?
        }
        DeliveryState::Failed => {
            let set: [&dyn ToSql; 5] = [&now_ms, &code, &kind, &reason, &write.end_reason];
            execute(writes, FAIL, &set, &guard)?
        }
        other => {
            return Err(StoreError::Corrupt(format!("a claim does not leave a delivery `{}`", other.as_str())).into());
        }
    };
    Ok(n == 1)
}

/// Run `sql` with `set`'s values, then the guard's.
fn execute(
    writes: &mut Writes<'_>,
    sql: &'static str,
    set: &[&dyn ToSql],
    guard: &[&dyn ToSql; 4],
) -> Result<usize, Error> {
    let stmt = writes.statement(sql)?;
    for (i, value) in set.iter().chain(guard.iter()).enumerate() {
        stmt.raw_bind_parameter(i + 1, value)?;
    }
    Ok(stmt.raw_execute()?)
}

/// The breaker rows of a claim, in its transaction.
struct Breakers<'t, 'c> {
    tx: &'t Tx<'c>,
    now_ms: i64,
}

impl BreakerRows for Breakers<'_, '_> {
    type Error = Error;

    fn read(&mut self, connection: &str) -> Result<Option<BreakerRow>, Error> {
        read_breaker(self.tx, connection)
    }

    fn write(&mut self, connection: &str, seen: Option<&BreakerRow>, next: &BreakerRow) -> Result<bool, Error> {
        write_breaker(self.tx, connection, seen, next, self.now_ms)
    }
}

/// Record the attempts lost workers had counted, as `lease_expired`.
fn insert_lost_attempts(tx: &Tx<'_>, lost: &[LostAttempt], now_ms: i64) -> Result<(), Error> {
    if lost.is_empty() {
        return Ok(());
    }
    let f = Failure::lease_expired();
    let rows: Vec<AttemptRow<'_>> = lost
        .iter()
        .map(|l| AttemptRow {
            delivery: l.delivery,
            attempt: l.attempt,
            started_at_ms: l.started_at_ms,
            ended_at_ms: now_ms,
            failure: Some(&f),
            http_status: None,
        })
        .collect();
    insert_attempts(tx, &rows)
}

pub(super) fn claim(
    conn: &mut Connection,
    now_ms: i64,
    limit: usize,
    decide: &mut dyn FnMut(&ClaimCandidate) -> ClaimVerdict,
    raise: &dyn Raise,
) -> Result<ClaimReport, Error> {
    let tx = Tx::immediate(conn)?;
    let report = claim_in(&tx, now_ms, limit, decide, raise)?;
    tx.commit()?;
    Ok(report)
}

/// A claim's reads and writes, in the transaction `tx` (a write transaction).
pub(super) fn claim_in(
    tx: &Tx<'_>,
    now_ms: i64,
    limit: usize,
    decide: &mut dyn FnMut(&ClaimCandidate) -> ClaimVerdict,
    raise: &dyn Raise,
) -> Result<ClaimReport, Error> {
    // Ended leases first (rare), then due pending deliveries in due order; two
    // queries so each walks the (state, due_at) index in order under its LIMIT.
    let mut rows = read_claim_rows(tx, DeliveryState::Running, now_ms, limit)?;
    let left = limit.saturating_sub(rows.len());
    if left > 0 {
        rows.extend(read_claim_rows(tx, DeliveryState::Pending, now_ms, left)?);
    }
    let plan = claim::plan(&mut rows, &mut Breakers { tx, now_ms }, now_ms, decide)?;
    let mut written = Vec::with_capacity(plan.changes.len());
    {
        let mut writes = Writes::new(tx);
        for (i, change) in plan.changes.iter().enumerate() {
            let row = &rows[change.row];
            if apply(&mut writes, row.seen(), &row.candidate.connection, &change.write, now_ms)? {
                written.push(i);
            }
        }
    }
    let settled = claim::settle(&rows, &plan, &written, now_ms);
    insert_lost_attempts(tx, &settled.lost, now_ms)?;
    for ended in &settled.given_up {
        given_up(tx, raise, ended, now_ms)?;
    }
    for orphaned in &settled.orphaned {
        insert_events(tx, &raise.delivery_orphaned(orphaned), now_ms)?;
    }
    Ok(settled.report)
}
