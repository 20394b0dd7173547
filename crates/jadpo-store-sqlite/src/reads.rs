//! What the listing commands and the loops read: deliveries, a delivery's
//! history, counts, breakers, and when work is next due. Nothing here writes.

use super::breakers::{held_without_open_breaker, read_breakers};
use super::claims::not_held_back;
use super::schema::{VERSION_WITH_KEYS, VERSION_WITH_REASONS};
use super::tx::Tx;
use super::{Error, RowOf, count_at, failure_of, state_of};
use jadpo_check::program::DeliveryState;
use jadpo_core::rules::breaker;
use jadpo_core::store::{AttemptView, BreakerView, DeliveryView, StatusView};
use rusqlite::{Connection, Row};
use std::collections::BTreeMap;

/// The columns of a delivery as listed from a store of schema `version`: one
/// older than a column (read-only handles only) reads it as missing.
pub(super) fn view_columns(version: i64) -> String {
    let (reasons, keys) = (version >= VERSION_WITH_REASONS, version >= VERSION_WITH_KEYS);
    let extra = if reasons { "d.end_reason, d.last_reason" } else { "NULL AS end_reason, NULL AS last_reason" };
    // A pending delivery of a key waits on the earliest of its key's deliveries
    // that has not ended.
    let waiting = if keys {
        "CASE WHEN d.state = 'pending' AND d.order_key IS NOT NULL THEN (SELECT b.id FROM jadpo_deliveries b \
         WHERE b.subscriber = d.subscriber AND b.order_key = d.order_key AND b.event_id < d.event_id \
         AND b.state IN ('pending', 'running', 'held', 'parked', 'orphaned') ORDER BY b.event_id LIMIT 1) END AS waiting_on, \
         d.order_key"
    } else {
        "NULL AS waiting_on, NULL AS order_key"
    };
    format!(
        "d.id, d.event_id, e.name AS event, d.subscriber, d.connection, d.state, d.attempts, d.due_at, \
         d.lease_until, d.held_since, d.held_ms, d.budget_start, d.created_at, d.last_code, d.last_kind, {extra}, \
         {waiting}"
    )
}

pub(super) fn view_of(r: &Row<'_>) -> Result<DeliveryView, Error> {
    let state = state_of(&r.get::<_, String>("state")?)?;
    let due_at: Option<i64> = r.get("due_at")?;
    let lease_until: Option<i64> = r.get("lease_until")?;
    let id = r.get("id")?;
    Ok(DeliveryView {
        id,
        event_id: r.get("event_id")?,
        event: r.get("event")?,
        subscriber: r.get("subscriber")?,
        connection: r.get("connection")?,
        state,
        attempts: count_at(r, "attempts", RowOf::Delivery(id))?,
        due_at_ms: if state == DeliveryState::Pending { due_at } else { None },
        lease_until_ms: if state == DeliveryState::Running { lease_until } else { None },
        held_since_ms: r.get("held_since")?,
        held_ms: r.get("held_ms")?,
        budget_start_ms: r.get("budget_start")?,
        created_at_ms: r.get("created_at")?,
        last_failure: failure_of(r.get("last_code")?, r.get("last_kind")?, r.get("last_reason")?)?,
        end_reason: r.get("end_reason")?,
        order_key: r.get("order_key")?,
        waiting_on: r.get("waiting_on")?,
    })
}

fn attempt_of(r: &Row<'_>, delivery: i64) -> Result<AttemptView, Error> {
    Ok(AttemptView {
        attempt: count_at(r, "attempt", RowOf::AttemptOf(delivery))?,
        started_at_ms: r.get("started_at")?,
        duration_ms: r.get("duration_ms")?,
        outcome: r.get("outcome")?,
        code: r.get("code")?,
        kind: r.get("kind")?,
        http_status: r.get::<_, Option<i64>>("http_status")?.and_then(|s| u16::try_from(s).ok()),
        reason: r.get("reason")?,
    })
}

/// The earliest end of a running delivery's lease (a lease's end is its row's
/// due time).
macro_rules! next_lease_end {
    () => {
        "(SELECT min(due_at) FROM jadpo_deliveries WHERE state = 'running' AND due_at IS NOT NULL)"
    };
}

/// The earliest due pending delivery and the earliest end of a lease, in one
/// statement. A pending delivery held back by its key is not due: it is woken
/// when the one before it ends. Walked in due order, stopping at the first not
/// held back.
pub(super) const NEXT_DUE: &str = concat!(
    "SELECT (SELECT d.due_at FROM jadpo_deliveries d WHERE d.state = 'pending' AND d.due_at IS NOT NULL AND ",
    not_held_back!(),
    " ORDER BY d.due_at LIMIT 1), ",
    next_lease_end!()
);

/// [`NEXT_DUE`] on a store older than ordering keys (a read-only handle).
const NEXT_DUE_WITHOUT_KEYS: &str = concat!(
    "SELECT (SELECT min(due_at) FROM jadpo_deliveries WHERE state = 'pending' AND due_at IS NOT NULL), ",
    next_lease_end!()
);

pub(super) fn next_due_ms(conn: &mut Connection, keys: bool) -> Result<Option<i64>, Error> {
    let sql = if keys { NEXT_DUE } else { NEXT_DUE_WITHOUT_KEYS };
    let (p, l): (Option<i64>, Option<i64>) = conn.prepare_cached(sql)?.query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(match (p, l) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    })
}

pub(super) fn delivery(
    conn: &mut Connection,
    id: i64,
    version: i64,
) -> Result<Option<(DeliveryView, Vec<AttemptView>)>, Error> {
    // One read transaction: the delivery and its history are of one moment.
    let tx = Tx::deferred(conn)?;
    let view = {
        let sql = format!(
            "SELECT {} FROM jadpo_deliveries d JOIN jadpo_events e ON e.id = d.event_id WHERE d.id = ?1",
            view_columns(version)
        );
        let mut stmt = tx.prepare_cached(&sql)?;
        let mut rows = stmt.query([id])?;
        match rows.next()? {
            Some(r) => view_of(r)?,
            None => return Ok(None),
        }
    };
    let sql = format!(
        "SELECT attempt, started_at, duration_ms, outcome, code, kind, http_status, {} \
         FROM jadpo_attempts WHERE delivery_id = ?1 ORDER BY id",
        if version >= VERSION_WITH_REASONS { "reason" } else { "NULL AS reason" }
    );
    let mut history = Vec::new();
    {
        let mut stmt = tx.prepare_cached(&sql)?;
        let mut rows = stmt.query([id])?;
        while let Some(r) = rows.next()? {
            history.push(attempt_of(r, id)?);
        }
    }
    Ok(Some((view, history)))
}

/// When the oldest pending delivery was made. Every pending delivery has a due
/// time; saying so lets the claims' index, which holds only deliveries with
/// one, answer instead of a walk of every row.
pub(super) const OLDEST_PENDING: &str =
    "SELECT min(created_at) FROM jadpo_deliveries WHERE state = 'pending' AND due_at IS NOT NULL";

pub(super) fn status(conn: &mut Connection, now_ms: i64, version: i64) -> Result<StatusView, Error> {
    let tx = Tx::deferred(conn)?;
    let mut view = StatusView { states: DeliveryState::ALL.iter().map(|s| (*s, 0)).collect(), ..StatusView::default() };
    {
        // Counted here rather than by `GROUP BY`, whose sort of every row took
        // three times the scan itself: by subscriber, then by state, each in
        // the order of its name.
        let mut counts: BTreeMap<String, BTreeMap<&'static str, (DeliveryState, u64)>> = BTreeMap::new();
        let mut stmt = tx.prepare_cached("SELECT subscriber, state FROM jadpo_deliveries")?;
        let mut rows = stmt.raw_query();
        while let Some(r) = rows.next()? {
            let text = |i: usize| {
                let v = r.get_ref(i)?;
                v.as_str().map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, v.data_type(), Box::new(e)))
            };
            let (sub, state) = (text(0)?, state_of(text(1)?)?);
            let of_sub = match counts.get_mut(sub) {
                Some(of_sub) => of_sub,
                None => counts.entry(sub.to_owned()).or_default(),
            };
            of_sub.entry(state.as_str()).or_insert((state, 0)).1 += 1;
        }
        for (sub, of_sub) in counts {
            for &(state, n) in of_sub.values() {
                if let Some(slot) = view.states.iter_mut().find(|(s, _)| *s == state) {
                    slot.1 += n;
                }
            }
            view.subscribers.push((sub, of_sub.into_values().collect()));
        }
    }
    let open: i64 =
        tx.query_row("SELECT count(*) FROM jadpo_circuit_breakers WHERE state <> 'closed'", [], |r| r.get(0))?;
    view.breakers_open = u64::try_from(open).unwrap_or(0);
    if version >= super::schema::VERSION_WITH_PAUSES {
        let paused = super::breakers::read_breakers_of(&tx, super::breakers::PAUSED, version)?;
        view.breakers_paused = paused.iter().filter(|b| breaker::paused(&b.row, now_ms)).count() as u64;
    }
    let oldest: Option<i64> = tx.query_row(OLDEST_PENDING, [], |r| r.get(0))?;
    view.oldest_pending_s = oldest.map(|t| ((now_ms - t) / 1000).max(0));
    Ok(view)
}

pub(super) fn breakers(conn: &mut Connection, version: i64) -> Result<Vec<BreakerView>, Error> {
    super::breakers::read_breakers_of(conn, "", version)
}

pub(super) fn next_sweep_ms(conn: &mut Connection, now_ms: i64) -> Result<Option<i64>, Error> {
    let orphans: bool = conn
        .prepare_cached(concat!(
            "SELECT EXISTS (SELECT 1 FROM jadpo_deliveries WHERE ",
            held_without_open_breaker!(),
            ")"
        ))?
        .query_row([], |r| r.get(0))?;
    let mut next = orphans.then_some(now_ms);
    for view in read_breakers(conn, super::breakers::SWEPT)? {
        if let Some(t) = breaker::next_work_ms(&view.row, view.held > 0, now_ms) {
            next = Some(next.map_or(t, |n: i64| n.min(t)));
        }
    }
    Ok(next)
}
