//! Time held by an open breaker: a held delivery's window moves on by the time it
//! was held, so an outage does not spend its budget.
//!
//! The store calls [`held_ms_after_release`] when it releases a held delivery and
//! writes the result in the release's conditional statement.

/// A delivery's time held after a release at `now_ms`: what it had been held
/// before, plus the time since it was held at `held_since_ms` (none if it was not
/// held, never negative if clocks disagree).
pub fn held_ms_after_release(held_ms: i64, held_since_ms: Option<i64>, now_ms: i64) -> i64 {
    let this_time = held_since_ms.map_or(0, |since| now_ms.saturating_sub(since).max(0));
    held_ms.saturating_add(this_time)
}

#[cfg(test)]
mod tests {
    use super::held_ms_after_release;

    #[test]
    fn the_time_held_adds_up_and_is_never_negative() {
        assert_eq!(held_ms_after_release(0, Some(1_000), 61_000), 60_000);
        assert_eq!(held_ms_after_release(5_000, Some(1_000), 2_000), 6_000);
        assert_eq!(held_ms_after_release(5_000, None, 2_000), 5_000);
        // A release stamped before the hold (another host's clock): nothing added.
        assert_eq!(held_ms_after_release(5_000, Some(3_000), 2_000), 5_000);
        assert_eq!(held_ms_after_release(i64::MAX, Some(0), i64::MAX), i64::MAX);
    }
}
