//! Reading a stored row's columns back into the runtime's types, the same for
//! every store: an unknown word or an impossible count in a column is a corrupt
//! store, never a panic, and never a value made up in its place.

use super::{PauseAction, StoreError};
use crate::rules::Failure;
use jadpo_check::program::{DeliveryState, FailureKind};

/// A delivery's state from its column.
pub fn state_of(s: &str) -> Result<DeliveryState, StoreError> {
    DeliveryState::parse(s).ok_or_else(|| StoreError::Corrupt(format!("unknown state `{s}`")))
}

/// A failure from its columns (code, kind, reason), if the row has one.
pub fn failure_of(
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

/// An operator's action from its stored word.
pub fn pause_action_of(word: &str) -> Result<PauseAction, StoreError> {
    PauseAction::parse(word).ok_or_else(|| StoreError::Corrupt(format!("unknown breaker action `{word}`")))
}

/// The row a stored value was read from, as an error about it names it.
#[derive(Debug, Clone, Copy)]
pub enum RowOf<'a> {
    /// A delivery, by its id.
    Delivery(i64),
    /// An attempt of the delivery of this id.
    AttemptOf(i64),
    /// The breaker of a connection.
    Breaker(&'a str),
}

impl std::fmt::Display for RowOf<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RowOf::Delivery(id) => write!(f, "delivery {id}"),
            RowOf::AttemptOf(id) => write!(f, "an attempt of delivery {id}"),
            RowOf::Breaker(connection) => write!(f, "the breaker of `{connection}`"),
        }
    }
}

/// A type a stored count is read as.
pub trait Count: TryFrom<i64> {
    /// The largest count of this type a store can hold.
    const MAX: i64;
}

impl Count for u32 {
    const MAX: i64 = u32::MAX as i64;
}

impl Count for u64 {
    const MAX: i64 = i64::MAX;
}

/// A count stored as an integer (attempts, a breaker's failures in a row); one
/// that is negative or too large is an error naming its row and column, never
/// read as 0, which would give a delivery its budget again.
pub fn count_of<T: Count>(value: i64, row: RowOf<'_>, column: &str) -> Result<T, StoreError> {
    T::try_from(value).map_err(|_| not_a_count(row, column, &format!("`{value}`"), T::MAX))
}

/// The error for a count column holding `found`, where counts from 0 to `max` are accepted.
pub fn not_a_count(row: RowOf<'_>, column: &str, found: &str, max: i64) -> StoreError {
    StoreError::Corrupt(format!("{row} has {found} in `{column}`, which holds a count from 0 to {max}"))
}

/// A version's files or a list of names as a store keeps them: JSON text.
pub fn to_stored<T: serde::Serialize + ?Sized>(value: &T) -> String {
    // Strings and lists of strings always serialize.
    serde_json::to_string(value).unwrap_or_default()
}

/// A version's files or a list of names read back from a store; `what` names
/// the column for the error.
pub fn from_stored<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("a program version's {what}: {e}")))
}
