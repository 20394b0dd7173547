//! The retry budget's numbers and formulas, written once.
//!
//! The checker uses them for `subscriber.retry_unreachable`, `jadpoc plan` for its
//! table, and the runtime's core for the waits it draws. Times are milliseconds.

use serde::Serialize;

/// Attempts a subscriber gets when its `retry:` does not say.
pub const DEFAULT_ATTEMPTS: u32 = 10;
/// The window a subscriber's attempts must start in when its `retry:` does not say.
pub const DEFAULT_WITHIN_MS: u64 = 24 * HOUR_MS;
/// The fewest and most attempts `retry: { attempts: N }` accepts.
pub const ATTEMPTS_RANGE: (u32, u32) = (1, 100);
/// The longest `within:` accepted.
pub const MAX_WITHIN_MS: u64 = 30 * DAY_MS;

/// The ceiling of the wait after the first failed attempt; it doubles after each.
pub const BACKOFF_BASE_MS: u64 = 30 * SECOND_MS;
/// The largest ceiling of a wait between attempts.
pub const BACKOFF_CAP_MS: u64 = 6 * HOUR_MS;
/// No wait between attempts is shorter than this.
pub const MIN_WAIT_MS: u64 = SECOND_MS;

/// A subscriber's run time limit when it sets no `timeout:`, and its range.
pub const DEFAULT_RUN_TIMEOUT_MS: u64 = 30 * SECOND_MS;
pub const RUN_TIMEOUT_RANGE_MS: (u64, u64) = (SECOND_MS, 15 * MINUTE_MS);
/// A connection's per-call limit when it sets no `timeout:`, and its range.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 10 * SECOND_MS;
pub const CALL_TIMEOUT_RANGE_MS: (u64, u64) = (1, 5 * MINUTE_MS);
/// A connection's own sends of one call (`retry: { attempts: N }`): default and range.
pub const DEFAULT_CONNECTION_ATTEMPTS: u32 = 1;
pub const CONNECTION_ATTEMPTS_RANGE: (u32, u32) = (1, 10);
/// Calls in flight at once through one connection: default and range.
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 4;
pub const MAX_IN_FLIGHT_RANGE: (u32, u32) = (1, 256);

/// A connection's `rate:` is at most this many calls a second.
pub const RATE_MAX_PER_S: u32 = 10_000;

/// A rate's `burst:` when none is given: calls evenly spaced, none at once.
pub const DEFAULT_RATE_BURST: u32 = 1;

/// A rate's `burst:` takes this range.
pub const RATE_BURST_RANGE: (u32, u32) = (1, 10_000);
/// The range of a schedule's `every:`.
pub const EVERY_RANGE_MS: (u64, u64) = (SECOND_MS, 30 * DAY_MS);

pub const SECOND_MS: u64 = 1_000;
pub const MINUTE_MS: u64 = 60 * SECOND_MS;
pub const HOUR_MS: u64 = 60 * MINUTE_MS;
pub const DAY_MS: u64 = 24 * HOUR_MS;

/// The ceiling c(n) of the wait after failed attempt `n` (1-based):
/// min(30s * 2^(n-1), 6h).
pub fn wait_ceiling_ms(n: u32) -> u64 {
    let doublings = n.saturating_sub(1);
    // 30s * 2^10 is already past 6h, so larger shifts never matter.
    if doublings >= 20 {
        return BACKOFF_CAP_MS;
    }
    (BACKOFF_BASE_MS << doublings).min(BACKOFF_CAP_MS)
}

/// The average start of attempt `k` counted from the event: S(k), the sum of
/// c(n)/2 for n = 1..k-1.
pub fn average_start_ms(k: u32) -> u64 {
    (1..k).map(|n| wait_ceiling_ms(n) / 2).sum()
}

/// How many attempts fit `within_ms` on average: the largest k (at most
/// `attempts`) with S(k) <= within. Attempt 1 always fits.
pub fn attempts_that_fit(attempts: u32, within_ms: u64) -> u32 {
    // S(k + 1) = S(k) + c(k)/2, kept as a running sum: the checker asks this of every
    // subscriber, and recomputing S(k) from scratch made it quadratic in `attempts`.
    let mut fit = 1;
    // S(fit) here; S(fit + 1) once the loop adds c(fit)/2.
    let mut next_start = 0;
    while fit < attempts {
        next_start += wait_ceiling_ms(fit) / 2;
        if next_start > within_ms {
            break;
        }
        fit += 1;
    }
    fit
}

/// A subscriber's delivery budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Budget {
    pub attempts: u32,
    pub within_ms: u64,
    pub default_attempts: bool,
    pub default_within: bool,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            attempts: DEFAULT_ATTEMPTS,
            within_ms: DEFAULT_WITHIN_MS,
            default_attempts: true,
            default_within: true,
        }
    }
}

/// The budget a subscriber's declaration writes, defaults filled in, when its
/// `retry:` is valid (the checker reports it otherwise, and there is no plan to
/// show). Read from the syntax alone, so that an editor can show it while the
/// program has errors elsewhere.
pub fn declared(decl: &jadpo_syntax::ast::Decl<'_>) -> Option<Budget> {
    use jadpo_syntax::ast::{Body, ValueKind};
    let Body::Block { block, .. } = &decl.body else { return None };
    let mut b = Budget::default();
    let Some(retry) = block.get("retry") else { return Some(b) };
    let ValueKind::Block(retry) = &retry.value.kind else { return None };
    for entry in &retry.entries {
        match (&*entry.key.text, &entry.value.kind) {
            ("attempts", ValueKind::Int(n)) => {
                let n = u32::try_from(*n).ok().filter(|n| (ATTEMPTS_RANGE.0..=ATTEMPTS_RANGE.1).contains(n))?;
                b.attempts = n;
                b.default_attempts = false;
            }
            ("within", ValueKind::Duration(ms)) if *ms > 0 && *ms <= MAX_WITHIN_MS => {
                b.within_ms = *ms;
                b.default_within = false;
            }
            _ => return None,
        }
    }
    Some(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_that_fit_agrees_with_its_definition() {
        for attempts in 1..=110 {
            for within_ms in [0, 1, 14_999, 15_000, 45_000, HOUR_MS, 2 * HOUR_MS, DAY_MS, 7 * DAY_MS, MAX_WITHIN_MS] {
                let mut fit = 1;
                while fit < attempts && average_start_ms(fit + 1) <= within_ms {
                    fit += 1;
                }
                assert_eq!(attempts_that_fit(attempts, within_ms), fit, "{attempts} attempts within {within_ms} ms");
            }
        }
    }

    #[test]
    fn ceilings_double_from_30s_to_6h() {
        assert_eq!(wait_ceiling_ms(1), 30_000);
        assert_eq!(wait_ceiling_ms(2), 60_000);
        assert_eq!(wait_ceiling_ms(9), 7_680_000);
        assert_eq!(wait_ceiling_ms(10), 15_360_000);
        assert_eq!(wait_ceiling_ms(11), BACKOFF_CAP_MS);
        assert_eq!(wait_ceiling_ms(100), BACKOFF_CAP_MS);
    }

    #[test]
    fn average_starts_match_the_language_reference() {
        assert_eq!(average_start_ms(1), 0);
        assert_eq!(average_start_ms(8), 1_905_000);
        assert_eq!(average_start_ms(9), 3_825_000);
        assert_eq!(average_start_ms(10), 7_665_000);
    }

    #[test]
    fn twenty_attempts_in_an_hour_fit_eight() {
        assert_eq!(attempts_that_fit(20, HOUR_MS), 8);
        assert_eq!(attempts_that_fit(DEFAULT_ATTEMPTS, DEFAULT_WITHIN_MS), 10);
        assert_eq!(attempts_that_fit(1, 1), 1);
    }
}

/// One row of a budget's plan: when attempt `attempt` starts, counted from the
/// event, with no Retry-After and no time held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanRow {
    pub attempt: u32,
    /// The ceiling of the wait before this attempt (0 for the first).
    pub ceiling_ms: u64,
    /// Every wait drawn at its floor, 1s.
    pub earliest_ms: u64,
    /// Every wait drawn at its average, half its ceiling: S(k).
    pub average_ms: u64,
    /// Every wait drawn at its ceiling, cut at the window.
    pub latest_ms: u64,
}

/// The plan of a budget: one row per attempt.
pub fn plan(attempts: u32, within_ms: u64) -> Vec<PlanRow> {
    let mut rows = Vec::with_capacity(attempts as usize);
    let (mut earliest, mut latest) = (0u64, 0u64);
    for k in 1..=attempts {
        let ceiling_ms = if k == 1 { 0 } else { wait_ceiling_ms(k - 1) };
        if k > 1 {
            earliest += MIN_WAIT_MS;
            latest += ceiling_ms;
        }
        rows.push(PlanRow {
            attempt: k,
            ceiling_ms,
            earliest_ms: earliest,
            average_ms: average_start_ms(k),
            latest_ms: latest.min(within_ms),
        });
    }
    rows
}

#[cfg(test)]
mod plan_tests {
    use super::*;

    #[test]
    fn the_default_budgets_tenth_attempt() {
        let rows = plan(DEFAULT_ATTEMPTS, DEFAULT_WITHIN_MS);
        assert_eq!(rows.len(), 10);
        assert_eq!(rows[0], PlanRow { attempt: 1, ceiling_ms: 0, earliest_ms: 0, average_ms: 0, latest_ms: 0 });
        assert_eq!(
            rows[9],
            PlanRow {
                attempt: 10,
                ceiling_ms: 7_680_000,
                earliest_ms: 9_000,
                average_ms: 7_665_000,
                latest_ms: 15_330_000
            }
        );
    }

    #[test]
    fn latest_is_cut_at_the_window() {
        let rows = plan(20, HOUR_MS);
        assert_eq!(rows[19].latest_ms, HOUR_MS);
        // Attempt 7 starts at the latest 30s * (2^6 - 1) after the event; attempt 8's
        // 3810s is past the hour.
        assert_eq!(rows[6].latest_ms, 1_890_000);
        assert_eq!(rows[7].latest_ms, HOUR_MS);
    }
}
