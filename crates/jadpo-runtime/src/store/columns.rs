//! Reading a stored row's columns back into the runtime's types, the same for
//! every store: an unknown word in a column is a corrupt store, never a panic.

use super::StoreError;
use crate::rules::Failure;
use jadpo_check::program::{DeliveryState, FailureKind};

/// A delivery's state from its column.
pub(super) fn state_of(s: &str) -> Result<DeliveryState, StoreError> {
    DeliveryState::parse(s).ok_or_else(|| StoreError::Corrupt(format!("unknown state `{s}`")))
}

/// A failure from its columns (code, kind, reason), if the row has one.
pub(super) fn failure_of(
    code: Option<String>,
    kind: Option<String>,
    reason: Option<String>,
) -> Result<Option<Failure>, StoreError> {
    match (code, kind) {
        (Some(code), Some(kind)) => {
            let kind = FailureKind::parse(&kind)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown failure kind `{kind}`")))?;
            Ok(Some(Failure { reason, ..Failure::new(code, kind) }))
        }
        _ => Ok(None),
    }
}

/// A count stored as an integer; a negative or oversized one reads as 0.
pub(super) fn u32_of(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(0)
}
