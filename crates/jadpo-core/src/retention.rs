//! Retention's loop over the store: batch after batch, each its own
//! transaction, until nothing older than the cut is left. Which deliveries go is
//! the core's rule ([`crate::rules::retention`]); `jadpoc prune` and
//! `jadpoc run --retain` both call [`prune`].

use crate::config::PRUNE_BATCH;
use crate::rules::retention;
use crate::store::{Actions, PruneCounts, PrunePlan, Store, StoreError};

/// The plan at `now_ms` for `--older-than` (and `--include-failed`), in batches
/// of [`PRUNE_BATCH`].
pub fn plan(now_ms: i64, older_than_ms: u64, include_failed: bool) -> PrunePlan {
    PrunePlan {
        cut_ms: retention::cut_ms(now_ms, older_than_ms),
        states: retention::pruned_states(include_failed).to_vec(),
        batch: PRUNE_BATCH,
    }
}

/// Delete what `plan` names, one batch per transaction, so a running `run` waits
/// at most one batch for the store. Returns what was deleted in all.
pub fn prune(store: &dyn Store, plan: &PrunePlan) -> Result<PruneCounts, StoreError> {
    let mut total = PruneCounts::default();
    loop {
        let batch = store.prune_batch(plan)?;
        total = total.plus(batch);
        if batch.deliveries == 0 {
            return Ok(total);
        }
    }
}
