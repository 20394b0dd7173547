//! Unit tests of every rule of the core, with their boundaries.

use super::*;
use jadpo_check::budget::SECOND_MS;

const HOUR_MS: u64 = jadpo_check::budget::HOUR_MS;
const DAY_MS: u64 = jadpo_check::budget::DAY_MS;
const HOUR: i64 = HOUR_MS as i64;
const DAY: i64 = DAY_MS as i64;
use crate::rng::RunRng;
use rand::SeedableRng;
use std::convert::Infallible;

/// A random source that always gives the same word: 0 draws the bottom of a range,
/// `u64::MAX` its top.
struct Constant(u64);

impl rand::TryRng for Constant {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(self.0 as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(self.0)
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        dst.fill(self.0 as u8);
        Ok(())
    }
}

const T0: i64 = 1_700_000_000_000;

fn default_budget() -> Budget {
    Budget::default()
}

fn budget(attempts: u32, within_ms: u64) -> Budget {
    Budget { attempts, within_ms, default_attempts: false, default_within: false }
}

/// A record just claimed for its `attempts`-th attempt.
fn running(attempts: u32) -> Record {
    Record {
        state: DeliveryState::Running,
        attempts,
        due_at_ms: None,
        lease_until_ms: Some(T0 + 60_000),
        budget_start_ms: T0,
        held_ms: 0,
        last_failure: None,
    }
}

fn fail(kind: FailureKind) -> Outcome {
    Outcome::fail(kind, format!("fake.{kind}"))
}

fn retry_after(kind: FailureKind, ms: u64) -> Outcome {
    Outcome::Failed(CallFailure {
        kind,
        code: "http.429".into(),
        http_status: Some(429),
        retry_after_ms: Some(ms),
        reason: None,
    })
}

#[test]
fn success_succeeds() {
    let mut rng = Constant(0);
    let d = decide_after_attempt(&running(1), &default_budget(), &Outcome::ok(), T0, &mut rng);
    assert_eq!(d, Decision::Succeeded);
    assert_eq!(d.state(), DeliveryState::Succeeded);
}

#[test]
fn unavailable_and_rate_limited_are_retried() {
    for kind in [FailureKind::Unavailable, FailureKind::RateLimited] {
        let mut rng = RunRng::seed_from_u64(1);
        let d = decide_after_attempt(&running(1), &default_budget(), &fail(kind), T0, &mut rng);
        let Decision::Retry { due_at_ms, failure } = d else {
            panic!("{kind} should be retried, got {d:?}");
        };
        assert_eq!(failure.kind, kind);
        assert!((T0 + 1_000..=T0 + 30_000).contains(&due_at_ms), "{due_at_ms}");
    }
}

#[test]
fn declared_failures_fail_at_once() {
    for kind in [FailureKind::NotFound, FailureKind::Conflict, FailureKind::Rejected] {
        let d = decide_after_attempt(&running(1), &default_budget(), &fail(kind), T0, &mut Constant(0));
        assert_eq!(
            d,
            Decision::Failed {
                failure: Failure::new(format!("fake.{kind}"), kind),
                because: FailedBecause::NotRetryable
            }
        );
    }
}

#[test]
fn outcome_unknown_parks() {
    let d =
        decide_after_attempt(&running(1), &default_budget(), &fail(FailureKind::OutcomeUnknown), T0, &mut Constant(0));
    assert!(matches!(d, Decision::Parked { .. }));
    assert_eq!(d.state(), DeliveryState::Parked);
}

#[test]
fn internal_fault_fails_as_a_defect() {
    let d =
        decide_after_attempt(&running(1), &default_budget(), &fail(FailureKind::InternalFault), T0, &mut Constant(0));
    assert!(matches!(d, Decision::Failed { because: FailedBecause::Defect, .. }));
}

#[test]
fn deadline_exceeded_counts_and_is_retried_while_the_budget_lasts() {
    let b = budget(3, DAY_MS);
    let d = decide_after_attempt(&running(2), &b, &fail(FailureKind::DeadlineExceeded), T0, &mut Constant(0));
    assert!(matches!(d, Decision::Retry { .. }));
    let d = decide_after_attempt(&running(3), &b, &fail(FailureKind::DeadlineExceeded), T0, &mut Constant(0));
    assert_eq!(
        d,
        Decision::Failed {
            failure: Failure::new("fake.deadline_exceeded", FailureKind::DeadlineExceeded),
            because: FailedBecause::AttemptsUsed
        }
    );
}

#[test]
fn attempt_n_of_n_fails_and_n_minus_one_retries() {
    let b = default_budget();
    let mut rng = Constant(0);
    let d = decide_after_attempt(&running(9), &b, &fail(FailureKind::Unavailable), T0, &mut rng);
    assert!(matches!(d, Decision::Retry { .. }), "{d:?}");
    let d = decide_after_attempt(&running(10), &b, &fail(FailureKind::Unavailable), T0, &mut rng);
    assert!(matches!(d, Decision::Failed { because: FailedBecause::AttemptsUsed, .. }));
    // One attempt: the first failure ends it.
    let d = decide_after_attempt(&running(1), &budget(1, DAY_MS), &fail(FailureKind::Unavailable), T0, &mut rng);
    assert!(matches!(d, Decision::Failed { because: FailedBecause::AttemptsUsed, .. }));
}

#[test]
fn a_wait_drawn_at_zero_is_floored_to_one_second() {
    assert_eq!(draw_wait_ms(1, &mut Constant(0)), SECOND_MS);
    let d = decide_after_attempt(&running(1), &default_budget(), &fail(FailureKind::Unavailable), T0, &mut Constant(0));
    assert_eq!(d.due_at_ms(), Some(T0 + 1_000));
}

#[test]
fn a_wait_drawn_at_the_top_is_the_ceiling() {
    assert_eq!(draw_wait_ms(1, &mut Constant(u64::MAX)), 30_000);
    assert_eq!(draw_wait_ms(2, &mut Constant(u64::MAX)), 60_000);
    assert_eq!(draw_wait_ms(11, &mut Constant(u64::MAX)), 6 * HOUR_MS);
    assert_eq!(draw_wait_ms(100, &mut Constant(u64::MAX)), 6 * HOUR_MS);
}

#[test]
fn waits_stay_within_their_ceiling() {
    let mut rng = RunRng::seed_from_u64(7);
    for n in 1..=12 {
        for _ in 0..200 {
            let w = draw_wait_ms(n, &mut rng);
            assert!(w >= SECOND_MS && w <= budget::wait_ceiling_ms(n), "n={n} w={w}");
        }
    }
}

#[test]
fn retry_after_raises_the_wait_but_never_lowers_it() {
    let b = default_budget();
    let d =
        decide_after_attempt(&running(1), &b, &retry_after(FailureKind::RateLimited, 120_000), T0, &mut Constant(0));
    assert_eq!(d.due_at_ms(), Some(T0 + 120_000));
    let d =
        decide_after_attempt(&running(1), &b, &retry_after(FailureKind::RateLimited, 10), T0, &mut Constant(u64::MAX));
    assert_eq!(d.due_at_ms(), Some(T0 + 30_000));
}

#[test]
fn a_retry_after_past_the_window_fails_at_once() {
    let b = budget(10, HOUR_MS);
    let now = T0 + 10 * 60_000;
    let d = decide_after_attempt(
        &running(1),
        &b,
        &retry_after(FailureKind::RateLimited, 2 * HOUR_MS),
        now,
        &mut Constant(0),
    );
    assert_eq!(
        d,
        Decision::Failed {
            failure: Failure::new("http.429", FailureKind::RateLimited),
            because: FailedBecause::PastWindow
        }
    );
}

#[test]
fn a_next_attempt_exactly_at_within_is_allowed_and_one_ms_past_fails() {
    let b = budget(10, 60_000);
    // The floor of 1s lands the next attempt exactly at the window's end.
    let now = T0 + 59_000;
    let d = decide_after_attempt(&running(1), &b, &fail(FailureKind::Unavailable), now, &mut Constant(0));
    assert_eq!(d.due_at_ms(), Some(T0 + 60_000));
    let d = decide_after_attempt(&running(1), &b, &fail(FailureKind::Unavailable), now + 1, &mut Constant(0));
    assert!(matches!(d, Decision::Failed { because: FailedBecause::PastWindow, .. }));
}

#[test]
fn time_held_moves_the_window_on() {
    let b = budget(10, 60_000);
    let mut r = running(1);
    r.held_ms = 5 * 60_000;
    assert_eq!(r.window_end_ms(&b), T0 + 6 * 60_000);
    let d = decide_after_attempt(&r, &b, &fail(FailureKind::Unavailable), T0 + 4 * 60_000, &mut Constant(0));
    assert!(matches!(d, Decision::Retry { .. }));
}

fn pending(attempts: u32, due: i64, last: Option<Failure>) -> Record {
    Record {
        state: DeliveryState::Pending,
        attempts,
        due_at_ms: Some(due),
        lease_until_ms: None,
        budget_start_ms: T0,
        held_ms: 0,
        last_failure: last,
    }
}

#[test]
fn a_due_claim_runs_and_counts_the_attempt_with_a_lease() {
    let d = decide_at_claim(&pending(0, T0, None), &default_budget(), T0, false, 30_000);
    assert_eq!(d, ClaimDecision::Run { attempt: 1, lease_until_ms: T0 + 60_000, lease_expired: false, failure: None });
    // A retry's claim keeps the last attempt's failure on the record meanwhile.
    let last = Failure::new("http.503", FailureKind::Unavailable);
    let d = decide_at_claim(&pending(1, T0, Some(last.clone())), &default_budget(), T0, false, 30_000);
    assert!(matches!(d, ClaimDecision::Run { attempt: 2, failure: Some(f), .. } if f == last));
}

#[test]
fn a_claim_before_due_skips() {
    let d = decide_at_claim(&pending(1, T0 + 5, None), &default_budget(), T0, false, 30_000);
    assert_eq!(d, ClaimDecision::Skip);
    let mut done = pending(1, T0, None);
    done.state = DeliveryState::Succeeded;
    assert_eq!(decide_at_claim(&done, &default_budget(), T0, false, 30_000), ClaimDecision::Skip);
}

#[test]
fn a_handled_record_succeeds_without_running_even_past_the_window() {
    let b = budget(3, 60_000);
    let d = decide_at_claim(&pending(3, T0, None), &b, T0 + DAY, true, 30_000);
    assert_eq!(d, ClaimDecision::Handled);
}

#[test]
fn a_claim_after_the_window_without_an_attempt_gives_up_deadline_exceeded() {
    let b = budget(10, HOUR_MS);
    let d = decide_at_claim(&pending(0, T0, None), &b, T0 + HOUR + 1, false, 30_000);
    assert_eq!(
        d,
        ClaimDecision::GiveUp {
            failure: Failure::deadline_exceeded(),
            because: FailedBecause::PastWindow,
            lease_expired: false
        }
    );
    // Exactly at the window's end it still runs.
    let d = decide_at_claim(&pending(0, T0, None), &b, T0 + HOUR, false, 30_000);
    assert!(matches!(d, ClaimDecision::Run { attempt: 1, .. }));
}

#[test]
fn a_claim_after_the_window_with_an_attempt_keeps_its_failure() {
    let b = budget(10, HOUR_MS);
    let last = Failure::new("http.503", FailureKind::Unavailable);
    let d = decide_at_claim(&pending(2, T0 + 100, Some(last.clone())), &b, T0 + 2 * HOUR, false, 30_000);
    assert_eq!(d, ClaimDecision::GiveUp { failure: last, because: FailedBecause::PastWindow, lease_expired: false });
}

#[test]
fn a_claim_after_the_attempts_are_used_gives_up() {
    let b = budget(2, DAY_MS);
    let last = Failure::new("fake.unavailable", FailureKind::Unavailable);
    let d = decide_at_claim(&pending(2, T0, Some(last.clone())), &b, T0, false, 30_000);
    assert_eq!(d, ClaimDecision::GiveUp { failure: last, because: FailedBecause::AttemptsUsed, lease_expired: false });
}

#[test]
fn an_expired_lease_is_reclaimed_as_lease_expired() {
    let b = default_budget();
    let mut r = running(1);
    r.lease_until_ms = Some(T0 + 60_000);
    assert_eq!(decide_at_claim(&r, &b, T0 + 59_999, false, 30_000), ClaimDecision::Skip);
    let d = decide_at_claim(&r, &b, T0 + 60_000, false, 30_000);
    assert_eq!(
        d,
        ClaimDecision::Run {
            attempt: 2,
            lease_until_ms: T0 + 120_000,
            lease_expired: true,
            failure: Some(Failure::lease_expired())
        }
    );
}

#[test]
fn an_expired_lease_on_the_last_attempt_gives_up_as_lease_expired() {
    let b = budget(1, DAY_MS);
    let d = decide_at_claim(&running(1), &b, T0 + 60_000, false, 30_000);
    assert_eq!(
        d,
        ClaimDecision::GiveUp {
            failure: Failure::lease_expired(),
            because: FailedBecause::AttemptsUsed,
            lease_expired: true
        }
    );
}

#[test]
fn lease_expired_is_retryable_after_an_attempt() {
    let d = decide_after_attempt(
        &running(2),
        &default_budget(),
        &Outcome::Failed(CallFailure {
            kind: FailureKind::LeaseExpired,
            code: CODE_LEASE_EXPIRED.into(),
            http_status: None,
            retry_after_ms: None,
            reason: None,
        }),
        T0,
        &mut Constant(0),
    );
    assert!(matches!(d, Decision::Retry { .. }));
}

#[test]
fn operator_retry_gives_a_fresh_budget() {
    let mut r = pending(10, T0, Some(Failure::new("x", FailureKind::Rejected)));
    r.state = DeliveryState::Failed;
    r.held_ms = 1234;
    let now = T0 + 5 * DAY;
    let fresh = operator_retry(&r, now).expect("a failed delivery can be retried");
    assert_eq!(fresh.state, DeliveryState::Pending);
    assert_eq!(fresh.attempts, 0);
    assert_eq!(fresh.due_at_ms, Some(now));
    assert_eq!(fresh.budget_start_ms, now);
    assert_eq!(fresh.held_ms, 0);
    assert_eq!(fresh.window_end_ms(&default_budget()), now + DAY);
    r.state = DeliveryState::Parked;
    assert!(operator_retry(&r, now).is_some());
    for state in [DeliveryState::Pending, DeliveryState::Running, DeliveryState::Held, DeliveryState::Succeeded] {
        r.state = state;
        assert_eq!(operator_retry(&r, now), None, "{state}");
    }
}

#[test]
fn the_default_budget_runs_ten_attempts_then_fails() {
    let b = default_budget();
    let mut rng = RunRng::seed_from_u64(3);
    let mut r = Record::new(T0);
    let mut now = T0;
    let mut ran = 0;
    loop {
        let ClaimDecision::Run { attempt, .. } = decide_at_claim(&r, &b, now, false, 30_000) else {
            panic!("should run");
        };
        ran += 1;
        r.attempts = attempt;
        r.state = DeliveryState::Running;
        match decide_after_attempt(&r, &b, &fail(FailureKind::Unavailable), now, &mut rng) {
            Decision::Retry { due_at_ms, failure } => {
                r.state = DeliveryState::Pending;
                r.due_at_ms = Some(due_at_ms);
                r.last_failure = Some(failure);
                now = due_at_ms;
            }
            Decision::Failed { because, .. } => {
                assert_eq!(because, FailedBecause::AttemptsUsed);
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(ran, 10);
    assert!(now - T0 <= 15_330_000, "attempt 10 starts at the latest 4h15m30s");
}

#[test]
fn schedules_catch_up_once() {
    let every: i64 = 60_000;
    let e = every as u64;
    assert_eq!(schedule_next_due_ms(T0, e, T0), T0 + every);
    assert_eq!(schedule_next_due_ms(T0, e, T0 + 10), T0 + every);
    // Down for ten minutes: one run now, the next on the grid after now.
    assert_eq!(schedule_next_due_ms(T0, e, T0 + 10 * every + 5), T0 + 11 * every);
    assert_eq!(schedule_next_due_ms(T0 + 5, e, T0), T0 + 5);
}
