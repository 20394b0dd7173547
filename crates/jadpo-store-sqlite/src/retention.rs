//! Retention: final deliveries older than a cut deleted in small transactions,
//! each by a statement guarded by its being final and old still (its handled
//! record a column of its row), then its attempts, then the events left with no
//! delivery.

use super::Error;
use super::schema::VERSION_WITH_HANDLED_AT;
use super::tx::Tx;
use jadpo_core::store::rows::PrunedDelivery;
use jadpo_core::store::{PruneCounts, PrunePlan};
use rusqlite::{Connection, named_params};

/// The deliveries `plan` deletes (`d` names the delivery), its cut bound as `:cut`.
fn pruned_deliveries(plan: &PrunePlan) -> String {
    let states: Vec<String> = plan.states.iter().map(|s| format!("'{}'", s.as_str())).collect();
    format!("d.state IN ({}) AND COALESCE(d.claimed_at, d.created_at) < :cut", states.join(", "))
}

/// An event (`e`) that may go once deliveries were deleted: none of its
/// deliveries is left. Only events of deliveries just deleted are looked at, so
/// an event that never had a delivery is not touched by this alone; a condition
/// that keeps more events (one still to be expanded, say) is added here.
const EVENT_LEFT_EMPTY: &str = "NOT EXISTS (SELECT 1 FROM jadpo_deliveries d WHERE d.event_id = e.id)";

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Delete up to a batch of the deliveries `plan` names, each by a statement
/// guarded by its being final and old still. Returns those deleted.
pub(super) fn prune_deliveries(tx: &Tx<'_>, plan: &PrunePlan) -> Result<Vec<PrunedDelivery>, Error> {
    let which = pruned_deliveries(plan);
    let found: Vec<PrunedDelivery> = tx
        .prepare_cached(&format!(
            "SELECT d.id, d.event_id, d.handled_at IS NOT NULL AS handled FROM jadpo_deliveries d \
             WHERE {which} ORDER BY d.id LIMIT :batch"
        ))?
        .query_map(named_params! {":cut": plan.cut_ms, ":batch": plan.batch as i64}, |r| {
            Ok(PrunedDelivery { id: r.get("id")?, event_id: r.get("event_id")?, handled: r.get("handled")? })
        })?
        .collect::<Result<_, _>>()?;
    let mut gone = Vec::with_capacity(found.len());
    for d in found {
        let deleted = tx
            .prepare_cached(&format!("DELETE FROM jadpo_deliveries AS d WHERE d.id = :id AND {which}"))?
            .execute(named_params! {":id": d.id, ":cut": plan.cut_ms})?;
        if deleted == 1 {
            gone.push(d);
        }
    }
    Ok(gone)
}

/// Delete the attempts of `deliveries`. Returns how many.
pub(super) fn delete_attempts(tx: &Tx<'_>, deliveries: &[i64]) -> Result<u64, Error> {
    let mut n = 0;
    for id in deliveries {
        n += count(tx.prepare_cached("DELETE FROM jadpo_attempts WHERE delivery_id = ?1")?.execute([id])?);
    }
    Ok(n)
}

/// Delete each of `events` left with no delivery. Returns how many.
pub(super) fn delete_emptied_events(tx: &Tx<'_>, events: &[i64]) -> Result<u64, Error> {
    let mut n = 0;
    for event in events {
        n += count(
            tx.prepare_cached(&format!("DELETE FROM jadpo_events AS e WHERE e.id = ?1 AND {EVENT_LEFT_EMPTY}"))?
                .execute([event])?,
        );
    }
    Ok(n)
}

/// What a batch of [`prune_deliveries`] and the rest would delete, counted, on a store of schema `version`
/// (a read-only handle may be on an older one).
pub(super) fn prune_preview(conn: &mut Connection, plan: &PrunePlan, version: i64) -> Result<PruneCounts, Error> {
    let which = pruned_deliveries(plan);
    let handled = if version >= VERSION_WITH_HANDLED_AT {
        format!("(SELECT count(*) FROM jadpo_deliveries d WHERE {which} AND d.handled_at IS NOT NULL)")
    } else {
        format!("(SELECT count(*) FROM jadpo_handled h JOIN jadpo_deliveries d ON d.id = h.delivery_id WHERE {which})")
    };
    let sql = format!(
        "SELECT (SELECT count(*) FROM jadpo_deliveries d WHERE {which}) AS deliveries, \
         (SELECT count(*) FROM jadpo_attempts a JOIN jadpo_deliveries d ON d.id = a.delivery_id WHERE {which}) \
         AS attempts, \
         {handled} AS handled, \
         (SELECT count(*) FROM jadpo_events e WHERE EXISTS (SELECT 1 FROM jadpo_deliveries d \
         WHERE d.event_id = e.id AND {which}) AND NOT EXISTS (SELECT 1 FROM jadpo_deliveries d \
         WHERE d.event_id = e.id AND NOT ({which}))) AS events"
    );
    let tx = Tx::deferred(conn)?;
    let counts = tx.prepare_cached(&sql)?.query_row(named_params! {":cut": plan.cut_ms}, |r| {
        let n = |name: &str| r.get::<_, i64>(name).map(|v| u64::try_from(v).unwrap_or(0));
        Ok(PruneCounts {
            deliveries: n("deliveries")?,
            attempts: n("attempts")?,
            handled: n("handled")?,
            events: n("events")?,
        })
    })?;
    tx.commit()?;
    Ok(counts)
}
