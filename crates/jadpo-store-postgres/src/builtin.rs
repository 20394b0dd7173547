//! jadpo's own events: stored with their deliveries inside the transaction of the
//! change that raises them (a claim that gives a delivery up, a recorded outcome,
//! a breaker that closes, an outage's alert), once its guarded statement matched.

use super::unnest::Columns;
use super::versions::WRITER_VERSION;
use super::{StoreError, col, pg_error};
use jadpo_core::store::{EndedDelivery, NewDelivery, NewEvent, Raise};
use postgres::Transaction;

/// Store events and their deliveries, due at `now_ms`, in bulk (their ids taken
/// first, then one statement for the events, one for their deliveries); returns
/// their ids in order.
pub(super) fn insert_events(
    tx: &mut Transaction<'_>,
    events: &[NewEvent],
    now_ms: i64,
) -> Result<Vec<i64>, StoreError> {
    let events: Vec<(&NewEvent, Option<i64>)> = events.iter().map(|e| (e, None)).collect();
    insert_events_of(tx, &events, now_ms)
}

/// Store events, each with the event it replays if any, and their deliveries, as
/// [`insert_events`] does.
pub(super) fn insert_events_of(
    tx: &mut Transaction<'_>,
    events: &[(&NewEvent, Option<i64>)],
    now_ms: i64,
) -> Result<Vec<i64>, StoreError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    // The ids first, taken from the columns' own sequences in emit order, so that
    // each event names its deliveries and each delivery its event in the same
    // bulk inserts.
    let ids = next_ids(tx, NEXT_EVENT_IDS, events.len())?;
    let batch = DeliveryIds::of(tx, events.iter().map(|(e, _)| e.deliveries.as_slice()).collect())?;
    let mut u = Columns::default();
    u.add("id", "bigint", ids.as_slice())
        .add("name", "text", events.iter().map(|(e, _)| e.name.as_str()).collect::<Vec<&str>>())
        .add("payload", "text", events.iter().map(|(e, _)| e.payload.as_str()).collect::<Vec<&str>>())
        .add("replay_of", "bigint", events.iter().map(|(_, of)| *of).collect::<Vec<Option<i64>>>())
        .add("lo", "bigint", batch.lo.as_slice())
        .add("hi", "bigint", batch.hi.as_slice());
    tx.execute(
        &format!(
            "INSERT INTO events (id, name, payload, emitted_at, replay_of, delivery_ids, version) \
                 SELECT id, name, payload, $1::bigint, replay_of, ($2::bigint[])[lo:hi], {} FROM {}",
            WRITER_VERSION,
            u.rows_clause(3)
        ),
        &u.params_after(&[&now_ms, &batch.ids]),
    )
    .map_err(pg_error)?;
    drop(u);
    batch.insert(tx, &ids, |_| true, now_ms)?;
    Ok(ids)
}

/// `n` fresh ids from an id sequence, in order: `sql` is [`NEXT_EVENT_IDS`]
/// or [`NEXT_DELIVERY_IDS`].
fn next_ids(tx: &mut Transaction<'_>, sql: &'static str, n: usize) -> Result<Vec<i64>, StoreError> {
    let rows = tx.query(sql, &[&(n as i64)]).map_err(pg_error)?;
    let mut ids = rows.iter().map(|r| col::<i64>(r, "id")).collect::<Result<Vec<_>, _>>()?;
    ids.sort_unstable();
    Ok(ids)
}

/// `$1` fresh ids from the id sequence of the table `$table`.
macro_rules! fresh_ids {
    ($table:literal) => {
        concat!(
            "SELECT nextval(pg_get_serial_sequence('",
            $table,
            "', 'id')) AS id FROM generate_series(1, $1::bigint)"
        )
    };
}

/// Fresh event ids (see [`next_ids`]).
const NEXT_EVENT_IDS: &str = fresh_ids!("events");

/// Fresh delivery ids (see [`next_ids`]).
const NEXT_DELIVERY_IDS: &str = fresh_ids!("deliveries");

/// A batch of events' deliveries with their ids, taken before any is written: all
/// of them in order, and each event's as the slice `[lo, hi]` (1-based, as SQL's
/// arrays count) of them, empty (`hi = lo - 1`) for an event with none.
pub(super) struct DeliveryIds<'a> {
    /// Each event's deliveries, in the batch's order.
    made: Vec<&'a [NewDelivery]>,
    pub(super) ids: Vec<i64>,
    pub(super) lo: Vec<i64>,
    pub(super) hi: Vec<i64>,
}

impl<'a> DeliveryIds<'a> {
    /// Fresh ids for the deliveries each event makes.
    pub(super) fn of(tx: &mut Transaction<'_>, made: Vec<&'a [NewDelivery]>) -> Result<DeliveryIds<'a>, StoreError> {
        let ids = next_ids(tx, NEXT_DELIVERY_IDS, made.iter().map(|d| d.len()).sum())?;
        let (mut lo, mut hi) = (Vec::with_capacity(made.len()), Vec::with_capacity(made.len()));
        let mut taken = 0i64;
        for d in &made {
            lo.push(taken + 1);
            taken += d.len() as i64;
            hi.push(taken);
        }
        Ok(DeliveryIds { made, ids, lo, hi })
    }

    /// Write the deliveries of the events (their ids, in the batch's order) that
    /// `keep` takes, pending and due at `now_ms` with a fresh budget.
    pub(super) fn insert(
        &self,
        tx: &mut Transaction<'_>,
        events: &[i64],
        keep: impl Fn(i64) -> bool,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let mut next = self.ids.iter();
        let mut kept: Vec<(i64, i64, &NewDelivery)> = Vec::new();
        for (&event, deliveries) in events.iter().zip(&self.made) {
            for (d, &id) in deliveries.iter().zip(next.by_ref()) {
                if keep(event) {
                    kept.push((id, event, d));
                }
            }
        }
        if kept.is_empty() {
            return Ok(());
        }
        let mut u = Columns::default();
        u.add("id", "bigint", kept.iter().map(|k| k.0).collect::<Vec<i64>>())
            .add("event_id", "bigint", kept.iter().map(|k| k.1).collect::<Vec<i64>>())
            .add("subscriber", "text", kept.iter().map(|k| k.2.subscriber.as_str()).collect::<Vec<&str>>())
            .add("connection", "text", kept.iter().map(|k| k.2.connection.as_str()).collect::<Vec<&str>>())
            .add("order_key", "text", kept.iter().map(|k| k.2.order_key.as_deref()).collect::<Vec<Option<&str>>>());
        tx.execute(
            &format!(
                "INSERT INTO deliveries (id, event_id, subscriber, connection, state, attempts, due_at, \
                     budget_start, held_ms, created_at, order_key) \
                     SELECT id, event_id, subscriber, connection, 'pending', 0, $1::bigint, $1::bigint, 0, $1::bigint, \
                     order_key \
                     FROM {}",
                u.rows_clause(2)
            ),
            &u.params_after(&[&now_ms]),
        )
        .map_err(pg_error)?;
        Ok(())
    }
}

/// A delivery a claim gave up (its statement matched): store what that raises.
pub(super) fn given_up(
    tx: &mut Transaction<'_>,
    raise: &dyn Raise,
    ended: &EndedDelivery<'_>,
    now_ms: i64,
) -> Result<(), StoreError> {
    insert_events(tx, &raise.delivery_ended(ended), now_ms).map(drop)
}
