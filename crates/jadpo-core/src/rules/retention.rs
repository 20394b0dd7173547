//! Retention: which deliveries `jadpoc prune` and `jadpoc run --retain` delete.
//!
//! Only final deliveries go: `succeeded` ones (a call that succeeded, or a
//! handled record found), and with `--include-failed` also `failed` and
//! `parked` ones. A delivery that is not final keeps its row, its attempts and
//! its handled record, so a delivery whose call succeeded is never run again.

use jadpo_check::program::DeliveryState;

/// The states deleted by default.
pub const FINAL_KEPT_FAILED: &[DeliveryState] = &[DeliveryState::Succeeded];
/// The states deleted with `--include-failed`.
pub const FINAL_ALL: &[DeliveryState] =
    &[DeliveryState::Succeeded, DeliveryState::Failed, DeliveryState::Parked, DeliveryState::Skipped];

/// The states retention deletes.
pub fn pruned_states(include_failed: bool) -> &'static [DeliveryState] {
    if include_failed { FINAL_ALL } else { FINAL_KEPT_FAILED }
}

/// The cut at `now_ms` for `--older-than`: deliveries last active before it go.
pub fn cut_ms(now_ms: i64, older_than_ms: u64) -> i64 {
    now_ms.saturating_sub(super::ms_i64(older_than_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_final_deliveries_are_pruned() {
        for include_failed in [false, true] {
            for state in pruned_states(include_failed) {
                assert!(
                    !matches!(state, DeliveryState::Pending | DeliveryState::Running | DeliveryState::Held),
                    "{state:?}"
                );
            }
        }
        assert_eq!(pruned_states(false), &[DeliveryState::Succeeded]);
        assert!(pruned_states(true).contains(&DeliveryState::Parked));
        assert_eq!(cut_ms(10 * 86_400_000, 7 * 86_400_000), 3 * 86_400_000);
        assert_eq!(cut_ms(0, u64::MAX), i64::MIN + 1);
    }
}
