//! Retention: final deliveries older than a cut deleted in small transactions,
//! each by a statement guarded by its being final and old still (re-checked on
//! the row as it is when the delete runs, under `READ COMMITTED`), then its
//! attempts (its handled record is a column of its row), then the events left
//! with no delivery.

use super::{StoreError, col, pg_error};
use jadpo_core::store::rows::PrunedDelivery;
use jadpo_core::store::{PruneCounts, PrunePlan};
use postgres::{Client, Transaction};

/// The deliveries `plan` deletes (`d` names the delivery), the cut as `$1`.
fn pruned_deliveries(plan: &PrunePlan) -> String {
    let states: Vec<String> = plan.states.iter().map(|s| format!("'{}'", s.as_str())).collect();
    format!("d.state IN ({}) AND COALESCE(d.claimed_at, d.created_at) < $1", states.join(", "))
}

/// The events among `$1` that may go once deliveries were deleted: none of
/// their deliveries is left. Only events of deliveries just deleted are looked
/// at, so an event that never had a delivery is not touched by this alone; a
/// condition that keeps more events (one still to be expanded, say) is added
/// here.
const DELETE_EVENTS_LEFT_EMPTY: &str = "DELETE FROM events e WHERE e.id = ANY($1) \
     AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.id = ANY(e.delivery_ids))";

/// Delete up to a batch of the deliveries `plan` names, locked first (`SKIP
/// LOCKED`: a row a claim or a retry holds is left for a later batch), the
/// delete checking them again. Returns those deleted.
pub(super) fn prune_deliveries(tx: &mut Transaction<'_>, plan: &PrunePlan) -> Result<Vec<PrunedDelivery>, StoreError> {
    let which = pruned_deliveries(plan);
    let batch = i64::try_from(plan.batch).unwrap_or(i64::MAX);
    tx.query(
        &format!(
            "WITH gone AS (DELETE FROM deliveries d WHERE d.id IN (SELECT d.id FROM deliveries d \
             WHERE {which} ORDER BY d.id LIMIT $2 FOR UPDATE SKIP LOCKED) AND {which} \
             RETURNING d.id, d.event_id, d.handled_at IS NOT NULL AS handled) \
             SELECT id, event_id, handled FROM gone"
        ),
        &[&plan.cut_ms, &batch],
    )
    .map_err(pg_error)?
    .iter()
    .map(|r| Ok(PrunedDelivery { id: col(r, "id")?, event_id: col(r, "event_id")?, handled: col(r, "handled")? }))
    .collect()
}

/// Delete the attempts of `deliveries`. Returns how many.
pub(super) fn delete_attempts(tx: &mut Transaction<'_>, deliveries: &[i64]) -> Result<u64, StoreError> {
    tx.execute("DELETE FROM attempts WHERE delivery_id = ANY($1)", &[&deliveries]).map_err(pg_error)
}

/// Delete each of `events` left with no delivery. Returns how many.
pub(super) fn delete_emptied_events(tx: &mut Transaction<'_>, events: &[i64]) -> Result<u64, StoreError> {
    tx.execute(DELETE_EVENTS_LEFT_EMPTY, &[&events]).map_err(pg_error)
}

pub(super) fn prune_preview(client: &mut Client, plan: &PrunePlan) -> Result<PruneCounts, StoreError> {
    let which = pruned_deliveries(plan);
    let sql = format!(
        "SELECT (SELECT count(*) FROM deliveries d WHERE {which}) AS deliveries, \
             (SELECT count(*) FROM attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE {which}) \
             AS attempts, \
             (SELECT count(*) FROM deliveries d WHERE {which} AND d.handled_at IS NOT NULL) AS handled, \
             (SELECT count(*) FROM events e WHERE EXISTS (SELECT 1 FROM deliveries d \
             WHERE d.id = ANY(e.delivery_ids) AND {which}) AND NOT EXISTS (SELECT 1 FROM deliveries d \
             WHERE d.id = ANY(e.delivery_ids) AND NOT ({which}))) AS events"
    );
    let row = client.query_one(&sql, &[&plan.cut_ms]).map_err(pg_error)?;
    let n = |name: &str| col::<i64>(&row, name).map(|v| u64::try_from(v).unwrap_or(0));
    Ok(PruneCounts {
        deliveries: n("deliveries")?,
        attempts: n("attempts")?,
        handled: n("handled")?,
        events: n("events")?,
    })
}
