//! What the listing commands and the loops read. Nothing here writes.

use super::breakers::{held_without_open_breaker, read_breakers};
use super::claims::not_held_back;
use super::{RowOf, StoreError, col, count_of, failure_of, pg_error, state_of};
use jadpo_check::program::DeliveryState;
use jadpo_core::rules::breaker;
use jadpo_core::store::rows::BreakerSet;
use jadpo_core::store::{AttemptView, BreakerView, DeliveryView, StatusView};
use postgres::{Client, Row};

/// A delivery's columns (`d`, joined with its event `e`), as [`view_of`] reads
/// them.
macro_rules! view_columns {
    () => {
        "d.id, d.event_id, e.name AS event, d.subscriber, d.connection, d.state, d.attempts, d.due_at, \
         d.lease_until, d.held_since, d.held_ms, d.budget_start, d.created_at, d.last_code, d.last_kind, \
         d.last_reason, d.end_reason, d.order_key, \
         CASE WHEN d.state = 'pending' AND d.order_key IS NOT NULL THEN (SELECT b.id FROM deliveries b \
         WHERE b.subscriber = d.subscriber AND b.order_key = d.order_key AND b.event_id < d.event_id \
         AND b.state IN ('pending', 'running', 'held', 'parked', 'orphaned') ORDER BY b.event_id LIMIT 1) \
         END AS waiting_on"
    };
}
pub(super) use view_columns;

pub(super) fn view_of(r: &Row) -> Result<DeliveryView, StoreError> {
    let state = state_of(&col::<String>(r, "state")?)?;
    let due_at: Option<i64> = col(r, "due_at")?;
    let lease_until: Option<i64> = col(r, "lease_until")?;
    let id = col(r, "id")?;
    Ok(DeliveryView {
        id,
        event_id: col(r, "event_id")?,
        event: col(r, "event")?,
        subscriber: col(r, "subscriber")?,
        connection: col(r, "connection")?,
        state,
        attempts: count_of(col(r, "attempts")?, RowOf::Delivery(id), "attempts")?,
        due_at_ms: if state == DeliveryState::Pending { due_at } else { None },
        lease_until_ms: if state == DeliveryState::Running { lease_until } else { None },
        held_since_ms: col(r, "held_since")?,
        held_ms: col(r, "held_ms")?,
        budget_start_ms: col(r, "budget_start")?,
        created_at_ms: col(r, "created_at")?,
        last_failure: failure_of(col(r, "last_code")?, col(r, "last_kind")?, col(r, "last_reason")?)?,
        end_reason: col(r, "end_reason")?,
        order_key: col(r, "order_key")?,
        waiting_on: col(r, "waiting_on")?,
    })
}

pub(super) fn next_due_ms(c: &mut Client) -> Result<Option<i64>, StoreError> {
    const SQL: &str = concat!(
        "SELECT LEAST((SELECT d.due_at FROM deliveries d WHERE d.state = 'pending' AND ",
        not_held_back!(),
        " ORDER BY d.due_at LIMIT 1), (SELECT min(due_at) FROM deliveries WHERE state = 'running')) AS t"
    );
    let row = c.query_one(SQL, &[]).map_err(pg_error)?;
    col(&row, "t")
}

pub(super) fn delivery(c: &mut Client, id: i64) -> Result<Option<(DeliveryView, Vec<AttemptView>)>, StoreError> {
    let mut tx = c.build_transaction().read_only(true).start().map_err(pg_error)?;
    const SQL: &str =
        concat!("SELECT ", view_columns!(), " FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.id = $1");
    let Some(row) = tx.query_opt(SQL, &[&id]).map_err(pg_error)? else {
        return Ok(None);
    };
    let view = view_of(&row)?;
    let rows = tx
        .query(
            "SELECT attempt, started_at, duration_ms, outcome, code, kind, http_status, reason \
                 FROM attempts WHERE delivery_id = $1 ORDER BY id",
            &[&id],
        )
        .map_err(pg_error)?;
    let mut history = Vec::with_capacity(rows.len());
    for r in &rows {
        history.push(AttemptView {
            attempt: count_of(col(r, "attempt")?, RowOf::AttemptOf(id), "attempt")?,
            started_at_ms: col(r, "started_at")?,
            duration_ms: col(r, "duration_ms")?,
            outcome: col(r, "outcome")?,
            code: col(r, "code")?,
            kind: col(r, "kind")?,
            http_status: col::<Option<i64>>(r, "http_status")?.and_then(|v| u16::try_from(v).ok()),
            reason: col(r, "reason")?,
        });
    }
    tx.commit().map_err(pg_error)?;
    Ok(Some((view, history)))
}

pub(super) fn status(c: &mut Client, now_ms: i64) -> Result<StatusView, StoreError> {
    let mut tx = c.build_transaction().read_only(true).start().map_err(pg_error)?;
    let mut view =
        StatusView { states: DeliveryState::ALL.iter().map(|st| (*st, 0)).collect(), ..StatusView::default() };
    let rows = tx
        .query(
            "SELECT subscriber, state, count(*) AS n FROM deliveries GROUP BY subscriber, state \
                 ORDER BY subscriber, state",
            &[],
        )
        .map_err(pg_error)?;
    for r in &rows {
        let sub: String = col(r, "subscriber")?;
        let state = state_of(&col::<String>(r, "state")?)?;
        let n = u64::try_from(col::<i64>(r, "n")?).unwrap_or(0);
        if let Some(slot) = view.states.iter_mut().find(|(st, _)| *st == state) {
            slot.1 += n;
        }
        match view.subscribers.last_mut() {
            Some((name, counts)) if *name == sub => counts.push((state, n)),
            _ => view.subscribers.push((sub, vec![(state, n)])),
        }
    }
    let row = tx
        .query_one(
            "SELECT (SELECT count(*) FROM circuit_breakers WHERE state <> 'closed') AS open, \
                 (SELECT min(created_at) FROM deliveries WHERE state = 'pending') AS oldest",
            &[],
        )
        .map_err(pg_error)?;
    view.breakers_open = u64::try_from(col::<i64>(&row, "open")?).unwrap_or(0);
    view.breakers_paused =
        read_breakers(&mut tx, Some(BreakerSet::Paused))?.iter().filter(|b| breaker::paused(&b.row, now_ms)).count()
            as u64;
    view.oldest_pending_s = col::<Option<i64>>(&row, "oldest")?.map(|t| ((now_ms - t) / 1000).max(0));
    tx.commit().map_err(pg_error)?;
    Ok(view)
}

pub(super) fn next_sweep_ms(c: &mut Client, now_ms: i64) -> Result<Option<i64>, StoreError> {
    let row = c
        .query_one(
            concat!("SELECT EXISTS (SELECT 1 FROM deliveries WHERE ", held_without_open_breaker!(), ") AS orphans"),
            &[],
        )
        .map_err(pg_error)?;
    let mut next = col::<bool>(&row, "orphans")?.then_some(now_ms);
    let views: Vec<BreakerView> = read_breakers(c, Some(BreakerSet::Swept))?;
    for view in views {
        if let Some(t) = breaker::next_work_ms(&view.row, view.held > 0, now_ms) {
            next = Some(next.map_or(t, |n: i64| n.min(t)));
        }
    }
    Ok(next)
}
