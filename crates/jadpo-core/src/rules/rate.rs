//! A connection's rate (`rate: 50/s` with `burst:`), by the generic cell rate
//! algorithm: one number per connection, the theoretical arrival time (TAT) of its
//! next call at the steady rate, kept on its breaker's row so that every process
//! sharing the store counts the same calls. A call may start when the TAT is at
//! most `burst - 1` intervals ahead of now; starting it moves the TAT one interval
//! on. A provider's `Retry-After` moves the TAT to that time, so no call of the
//! connection starts before it.
//!
//! A delivery that must wait for its turn is not run: it is due again at its turn
//! and the wait is added to its time held, so it spends no attempt and none of
//! its `within:` window. Those waiting queue: each is given the turn after the
//! last one given (the process keeps that one number per connection), so that a
//! backlog is claimed once at each turn, not all of it again at every turn. The
//! queue only places the waits; the TAT alone lets a call start.

use super::Outcome;
use jadpo_check::program::Rate;

/// What a connection's rate says of one call at a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateTurn {
    /// It may start; the connection's TAT becomes `next_tat_us`.
    Go { next_tat_us: i64 },
    /// It may not start before `until_ms`: its turn, `turn_us`, rounded up to
    /// the millisecond.
    Wait { until_ms: i64, turn_us: i64 },
}

/// A call of a connection whose rate is `rate` (none: only a `Retry-After`
/// slows it) and whose TAT is `tat_us`, at `now_ms`; `queued_us` is the last
/// turn given to a call of the connection that waits, so that this one's turn
/// comes after it (one in the past has come: no call waits for it). `None` when
/// nothing limits the connection now.
pub fn turn(rate: Option<Rate>, tat_us: Option<i64>, now_ms: i64, queued_us: Option<i64>) -> Option<RateTurn> {
    let now_us = now_ms.saturating_mul(1000);
    let interval = rate.map_or(0, Rate::interval_us);
    let tolerance = rate.map_or(0, |r| i64::from(r.burst.saturating_sub(1)).saturating_mul(interval));
    let tat = tat_us.unwrap_or(i64::MIN);
    if tat.saturating_sub(tolerance) <= now_us {
        return (interval > 0).then(|| RateTurn::Go { next_tat_us: tat.max(now_us).saturating_add(interval) });
    }
    let mut turn_us = tat.saturating_sub(tolerance);
    if let Some(q) = queued_us.filter(|&q| q > now_us) {
        turn_us = turn_us.max(q.saturating_add(interval));
    }
    Some(RateTurn::Wait { until_ms: div_ceil(turn_us, 1000), turn_us })
}

/// The TAT after an attempt that ended at `now_ms` with `outcome`: moved to the
/// provider's `Retry-After`, when it gave one and it is later.
pub fn after_retry_after(tat_us: Option<i64>, outcome: &Outcome, now_ms: i64) -> Option<i64> {
    let asked = match outcome {
        Outcome::Failed(f) => f.retry_after_ms,
        _ => None,
    };
    match asked {
        Some(ms) => {
            let until_us = now_ms.saturating_add(super::ms_i64(ms)).saturating_mul(1000);
            Some(tat_us.map_or(until_us, |t| t.max(until_us)))
        }
        None => tat_us,
    }
}

fn div_ceil(a: i64, b: i64) -> i64 {
    let q = a.div_euclid(b);
    if a.rem_euclid(b) == 0 { q } else { q + 1 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::CallFailure;
    use jadpo_check::program::FailureKind;

    const T0: i64 = 1_700_000_000_000;

    fn rate(count: u32, burst: u32) -> Option<Rate> {
        Some(Rate { count, per_ms: 1000, burst })
    }

    /// Calls of one connection claimed at `at` each: when each starts.
    fn starts(rate: Option<Rate>, claims: &[i64]) -> Vec<Option<i64>> {
        let mut tat = None;
        claims
            .iter()
            .map(|&at| match turn(rate, tat, at, None) {
                Some(RateTurn::Go { next_tat_us }) => {
                    tat = Some(next_tat_us);
                    Some(at)
                }
                Some(RateTurn::Wait { .. }) => None,
                None => Some(at),
            })
            .collect()
    }

    #[test]
    fn calls_are_spaced_by_the_interval_after_the_burst() {
        // 10/s, no burst: one call per 100ms.
        assert_eq!(starts(rate(10, 1), &[T0, T0 + 50, T0 + 100]), vec![Some(T0), None, Some(T0 + 100)]);
        // A burst of 3: three at once, then the steady rate.
        assert_eq!(
            starts(rate(10, 3), &[T0, T0, T0, T0, T0 + 100]),
            vec![Some(T0), Some(T0), Some(T0), None, Some(T0 + 100)]
        );
    }

    #[test]
    fn a_waiting_call_is_due_at_its_turn_behind_those_queued_before_it() {
        let us = |ms: i64| ms * 1000;
        let tat = Some(us(T0 + 100));
        assert_eq!(
            turn(rate(10, 1), tat, T0, None),
            Some(RateTurn::Wait { until_ms: T0 + 100, turn_us: us(T0 + 100) })
        );
        // Three wait already, the last for T0 + 300: this one's turn is T0 + 400.
        assert_eq!(
            turn(rate(10, 1), tat, T0, Some(us(T0 + 300))),
            Some(RateTurn::Wait { until_ms: T0 + 400, turn_us: us(T0 + 400) })
        );
        // A queued turn that has come holds nobody back.
        assert_eq!(
            turn(rate(10, 1), tat, T0 + 50, Some(us(T0 + 20))),
            Some(RateTurn::Wait { until_ms: T0 + 100, turn_us: us(T0 + 100) })
        );
        // Nor does the queue hold back a call the TAT lets start.
        assert!(matches!(turn(rate(10, 1), tat, T0 + 100, Some(us(T0 + 900))), Some(RateTurn::Go { .. })));
        // 3/s: 333,333µs apart, rounded up to the millisecond.
        assert_eq!(
            turn(rate(3, 1), Some(T0 * 1000 + 333_333), T0, None),
            Some(RateTurn::Wait { until_ms: T0 + 334, turn_us: T0 * 1000 + 333_333 })
        );
    }

    #[test]
    fn without_a_rate_only_a_retry_after_holds_calls_back() {
        assert_eq!(turn(None, None, T0, None), None);
        let failed = Outcome::Failed(CallFailure {
            retry_after_ms: Some(30_000),
            ..CallFailure::new(FailureKind::RateLimited, "http.429")
        });
        let tat = after_retry_after(None, &failed, T0);
        assert_eq!(tat, Some((T0 + 30_000) * 1000));
        assert_eq!(
            turn(None, tat, T0 + 1_000, None),
            Some(RateTurn::Wait { until_ms: T0 + 30_000, turn_us: (T0 + 30_000) * 1000 })
        );
        assert_eq!(turn(None, tat, T0 + 30_000, None), None);
        // A later time is kept; an answer without Retry-After changes nothing.
        assert_eq!(after_retry_after(Some((T0 + 90_000) * 1000), &failed, T0), Some((T0 + 90_000) * 1000));
        assert_eq!(after_retry_after(tat, &Outcome::ok(), T0), tat);
    }
}
