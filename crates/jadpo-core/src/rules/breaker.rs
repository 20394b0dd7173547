//! The circuit breaker's rules, one breaker per connection: a breaker's
//! row and an event (a claim, an attempt's outcome) in, the next row and what to do
//! out. Pure like the rest of the core; the store applies each change as one
//! conditional statement so that processes sharing a store share the breaker.
//!
//! The store calls [`decide_at_claim`] inside a claim, [`after_attempt`] inside the
//! transaction that records an attempt, and [`tick_wake`] and [`alert_due`] in the
//! tick's sweep.

use super::{ClaimDecision, Outcome};
use jadpo_check::budget::MINUTE_MS;
use jadpo_check::program::{BreakerState, FailureKind};

/// Attempts in a row that found the provider unavailable before the breaker opens.
pub const OPEN_AFTER: u32 = 5;
/// The first pause.
pub const FIRST_PAUSE_MS: u64 = MINUTE_MS;
/// The longest pause.
pub const MAX_PAUSE_MS: u64 = 10 * MINUTE_MS;

/// A breaker's row as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakerRow {
    /// `closed`, `open` or `probing`.
    pub state: BreakerState,
    /// Delivery attempts in a row that found the provider unavailable.
    pub failures_in_a_row: u32,
    /// When it last opened.
    pub opened_at_ms: Option<i64>,
    /// The current pause.
    pub pause_ms: u64,
    /// Alerts raised, over all outages.
    pub alerts: u32,
    /// Whether this outage's alert has been raised.
    pub alerted: bool,
    /// The delivery that is the probe, while probing.
    pub probe: Option<i64>,
    /// When the probe's lease ends.
    pub probe_lease_until_ms: Option<i64>,
    /// An operator's pause, while one is recorded (see [`paused`]).
    pub pause: Option<Pause>,
    /// The connection's rate (`rate:`, and a `429`'s `Retry-After`): when its next
    /// call may start at the steady rate, in microseconds (the theoretical
    /// arrival time of the generic cell rate algorithm); see [`crate::rules::rate`].
    pub rate_tat_us: Option<i64>,
}

/// An operator's pause of a connection: every delivery is held as an open
/// breaker holds them, whatever the breaker's own state, and no probe goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pause {
    /// When it was paused.
    pub at_ms: i64,
    /// When the pause ends by itself; `None` until an operator resumes it.
    pub until_ms: Option<i64>,
    /// Who paused it.
    pub by: String,
    /// Why.
    pub reason: Option<String>,
}

impl Default for BreakerRow {
    fn default() -> Self {
        BreakerRow {
            state: BreakerState::Closed,
            failures_in_a_row: 0,
            opened_at_ms: None,
            pause_ms: 0,
            alerts: 0,
            alerted: false,
            probe: None,
            probe_lease_until_ms: None,
            pause: None,
            rate_tat_us: None,
        }
    }
}

/// What an attempt's outcome says of the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// The call surely did nothing, or no answer came back: 5xx, 408, 429, a
    /// timeout, a call that never left.
    Unavailable,
    /// The provider answered at all (a success, a refusal, a rejected credential).
    Answered,
    /// Says nothing of the provider (a defect of our own, a lost worker).
    Neutral,
}

/// How an attempt's outcome counts for its connection's breaker.
pub fn signal(outcome: &Outcome) -> Signal {
    match outcome {
        Outcome::Succeeded { .. } => Signal::Answered,
        Outcome::Failed(f) => match f.kind {
            FailureKind::Unavailable
            | FailureKind::RateLimited
            | FailureKind::DeadlineExceeded
            | FailureKind::OutcomeUnknown => Signal::Unavailable,
            FailureKind::NotFound | FailureKind::Conflict | FailureKind::Rejected => Signal::Answered,
            // A status means the provider answered, however oddly (a failure body
            // naming an unknown kind): the provider is up.
            FailureKind::InternalFault if f.http_status.is_some() => Signal::Answered,
            FailureKind::InternalFault | FailureKind::LeaseExpired => Signal::Neutral,
        },
    }
}

/// What a claim does with a delivery, as far as its breaker goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtClaim {
    /// Run it.
    Run,
    /// Run it as the probe.
    Probe,
    /// Hold it: `held`, not due, its claim's attempt given back.
    Hold,
}

/// A claim at `now_ms` of `delivery`, which would be leased until `lease_until_ms`.
pub fn at_claim(row: &BreakerRow, delivery: i64, now_ms: i64, lease_until_ms: i64) -> (BreakerRow, AtClaim) {
    let probe = |row: &BreakerRow| {
        let mut next = row.clone();
        next.state = BreakerState::Probing;
        next.probe = Some(delivery);
        next.probe_lease_until_ms = Some(lease_until_ms);
        (next, AtClaim::Probe)
    };
    if paused(row, now_ms) {
        return (row.clone(), AtClaim::Hold);
    }
    match row.state {
        BreakerState::Closed => (row.clone(), AtClaim::Run),
        BreakerState::Open => {
            let reopens = row.opened_at_ms.unwrap_or(now_ms).saturating_add(super::ms_i64(row.pause_ms));
            if now_ms >= reopens { probe(row) } else { (row.clone(), AtClaim::Hold) }
        }
        // The delivery the tick woke to be the probe (or the probe itself, claimed
        // again after its worker was lost) runs as the probe.
        BreakerState::Probing if row.probe == Some(delivery) => probe(row),
        // A probe whose worker is lost loses the probe when its lease ends.
        BreakerState::Probing => match row.probe_lease_until_ms {
            Some(until) if until > now_ms => (row.clone(), AtClaim::Hold),
            _ => probe(row),
        },
    }
}

/// What the core decided for a claim candidate: the delivery's fate, and the
/// breaker's next row when this claim makes it the probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimVerdict {
    /// What the claim does with the delivery.
    pub decision: ClaimDecision,
    /// The breaker's next row, when the delivery goes as its probe.
    pub probe: Option<BreakerRow>,
}

/// The claim's decision once the breaker has had its say: a delivery the budget
/// would run is run, run as the probe (with the breaker's next row to write), or
/// held. Deliveries ended at the claim (handled, given up) never call out, so the
/// breaker does not see them.
pub fn decide_at_claim(decision: ClaimDecision, row: &BreakerRow, delivery: i64, now_ms: i64) -> ClaimVerdict {
    let ClaimDecision::Run { lease_until_ms, .. } = decision else {
        return ClaimVerdict { decision, probe: None };
    };
    match at_claim(row, delivery, now_ms, lease_until_ms) {
        (_, AtClaim::Run) => ClaimVerdict { decision, probe: None },
        (next, AtClaim::Probe) => ClaimVerdict { decision, probe: Some(next) },
        (_, AtClaim::Hold) => ClaimVerdict { decision: decision.held(), probe: None },
    }
}

/// When the pause of an open breaker ends.
pub fn pause_ends_ms(row: &BreakerRow) -> Option<i64> {
    match row.state {
        BreakerState::Open => Some(row.opened_at_ms?.saturating_add(super::ms_i64(row.pause_ms))),
        _ => None,
    }
}

/// The tick's sweep at `now_ms`: once the pause has passed (or a probe's lease
/// ended with its worker lost), the delivery held longest, `delivery`, is woken to
/// be the probe, leased until `lease_until_ms`, so a probe goes even when nothing
/// new arrives. `None` when there is nothing to wake it for.
pub fn tick_wake(row: &BreakerRow, now_ms: i64, delivery: i64, lease_until_ms: i64) -> Option<BreakerRow> {
    if paused(row, now_ms) {
        return None;
    }
    let wake = match row.state {
        BreakerState::Closed => false,
        BreakerState::Open => pause_ends_ms(row).is_some_and(|end| now_ms >= end),
        BreakerState::Probing => row.probe_lease_until_ms.is_none_or(|until| until <= now_ms),
    };
    wake.then(|| BreakerRow {
        state: BreakerState::Probing,
        probe: Some(delivery),
        probe_lease_until_ms: Some(lease_until_ms),
        ..row.clone()
    })
}

/// When the tick next has work for this breaker, given whether deliveries are
/// held for it: its alert at once, a wake at the pause's end or the probe's lease
/// end.
pub fn next_work_ms(row: &BreakerRow, any_held: bool, now_ms: i64) -> Option<i64> {
    if alert_due(row) {
        return Some(now_ms);
    }
    if let Some(pause) = &row.pause {
        // The sweep ends a pause whose time has come (and then releases what it
        // held); one an operator must resume has no work before that.
        return pause.until_ms.map(|until| until.max(now_ms));
    }
    if !any_held {
        return None;
    }
    match row.state {
        BreakerState::Closed => Some(now_ms),
        BreakerState::Open => pause_ends_ms(row),
        BreakerState::Probing => Some(row.probe_lease_until_ms.unwrap_or(now_ms)),
    }
}

/// What follows an attempt for the breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterAttempt {
    /// Nothing changes for other deliveries.
    Nothing,
    /// The breaker opened: hold the connection's deliveries; raise the alert.
    Opened,
    /// The breaker closed: release every held delivery, due at once.
    Closed,
    /// The probe found the provider unavailable: open again for a longer pause.
    Reopened,
}

/// The breaker after `delivery`'s attempt ended with `outcome` at `now_ms`. A
/// provider's `Retry-After` (on a `429` or a `503`) slows the whole connection:
/// no call of it starts before then ([`super::rate::after_retry_after`]).
pub fn after_attempt(row: &BreakerRow, delivery: i64, outcome: &Outcome, now_ms: i64) -> (BreakerRow, AfterAttempt) {
    let (mut next, what) = breaker_after_attempt(row, delivery, outcome, now_ms);
    next.rate_tat_us = super::rate::after_retry_after(row.rate_tat_us, outcome, now_ms);
    (next, what)
}

fn breaker_after_attempt(
    row: &BreakerRow,
    delivery: i64,
    outcome: &Outcome,
    now_ms: i64,
) -> (BreakerRow, AfterAttempt) {
    let mut next = row.clone();
    let is_probe = row.state == BreakerState::Probing && row.probe == Some(delivery);
    match (signal(outcome), row.state) {
        (Signal::Neutral, _) => {
            if is_probe {
                // The probe said nothing of the provider: give the probe back (its
                // pause has passed, so the next claim probes).
                next.state = BreakerState::Open;
                next.probe = None;
                next.probe_lease_until_ms = None;
            }
            (next, AfterAttempt::Nothing)
        }
        (Signal::Answered, BreakerState::Closed) => {
            next.failures_in_a_row = 0;
            (next, AfterAttempt::Nothing)
        }
        // Any answer closes it: the probe's, or one already running when it opened.
        // A paused connection keeps its pause, and what it holds stays held.
        (Signal::Answered, _) => {
            next = BreakerRow { alerts: row.alerts, pause: row.pause.clone(), ..BreakerRow::default() };
            let what = if paused(row, now_ms) { AfterAttempt::Nothing } else { AfterAttempt::Closed };
            (next, what)
        }
        (Signal::Unavailable, BreakerState::Closed) => {
            next.failures_in_a_row = row.failures_in_a_row.saturating_add(1);
            if next.failures_in_a_row >= OPEN_AFTER {
                next.state = BreakerState::Open;
                next.opened_at_ms = Some(now_ms);
                next.pause_ms = FIRST_PAUSE_MS;
                next.alerted = false;
                (next, AfterAttempt::Opened)
            } else {
                (next, AfterAttempt::Nothing)
            }
        }
        (Signal::Unavailable, _) => {
            next.failures_in_a_row = row.failures_in_a_row.saturating_add(1);
            if is_probe {
                next.state = BreakerState::Open;
                next.opened_at_ms = Some(now_ms);
                next.pause_ms = row.pause_ms.saturating_mul(2).clamp(FIRST_PAUSE_MS, MAX_PAUSE_MS);
                next.probe = None;
                next.probe_lease_until_ms = None;
                (next, AfterAttempt::Reopened)
            } else {
                (next, AfterAttempt::Nothing)
            }
        }
    }
}

/// Whether the tick should raise this outage's alert now (once per outage; the
/// store records it on the row with a conditional update so one process does).
pub fn alert_due(row: &BreakerRow) -> bool {
    row.state != BreakerState::Closed && !row.alerted
}

/// The row after its alert was raised.
pub fn alert_raised(row: &BreakerRow) -> BreakerRow {
    BreakerRow { alerted: true, alerts: row.alerts.saturating_add(1), ..row.clone() }
}

/// Whether an operator's pause holds the connection at `now_ms`: from the pause
/// until its `until` (if any) or until it is resumed. While paused, every claim
/// holds, no probe is woken, and an answer that closes the breaker releases
/// nothing: time held spends no budget, as for an open breaker.
pub fn paused(row: &BreakerRow, now_ms: i64) -> bool {
    row.pause.as_ref().is_some_and(|p| p.until_ms.is_none_or(|until| now_ms < until))
}

/// The row once an operator pauses it with `pause` (a pause already in place is
/// replaced). The breaker's own state is kept: when the pause ends by itself the
/// breaker goes on as it was (closed, or open until its probe).
pub fn pause(row: &BreakerRow, pause: Pause) -> BreakerRow {
    BreakerRow { pause: Some(pause), ..row.clone() }
}

/// The row once an operator resumes it: closed, the pause gone, its alerts
/// counted still; the store releases what it holds, due at once.
pub fn resume(row: &BreakerRow) -> BreakerRow {
    BreakerRow { alerts: row.alerts, rate_tat_us: row.rate_tat_us, ..BreakerRow::default() }
}

/// The tick's sweep at `now_ms` ends a pause whose time has come: the row
/// without it (the store then releases what a closed breaker no longer holds).
pub fn pause_ended(row: &BreakerRow, now_ms: i64) -> Option<BreakerRow> {
    (row.pause.is_some() && !paused(row, now_ms)).then(|| BreakerRow { pause: None, ..row.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000_000;

    fn unavailable() -> Outcome {
        Outcome::fail(FailureKind::Unavailable, "http.503")
    }

    fn open_after_five(now: i64) -> BreakerRow {
        let mut row = BreakerRow::default();
        for i in 0..5 {
            let (next, what) = after_attempt(&row, i, &unavailable(), now);
            row = next;
            assert_eq!(what == AfterAttempt::Opened, i == 4, "attempt {i}");
        }
        row
    }

    #[test]
    fn five_unavailable_attempts_in_a_row_open_it() {
        let row = open_after_five(T0);
        assert_eq!(row.state, BreakerState::Open);
        assert_eq!(row.pause_ms, FIRST_PAUSE_MS);
        assert!(alert_due(&row));
        let raised = alert_raised(&row);
        assert!(!alert_due(&raised));
        assert_eq!(raised.alerts, 1);
    }

    #[test]
    fn an_answer_ends_the_run() {
        let mut row = BreakerRow::default();
        for _ in 0..4 {
            row = after_attempt(&row, 1, &unavailable(), T0).0;
        }
        row = after_attempt(&row, 1, &Outcome::fail(FailureKind::Rejected, "http.401"), T0).0;
        assert_eq!(row.failures_in_a_row, 0);
        let (row, what) = after_attempt(&row, 1, &unavailable(), T0);
        assert_eq!((row.state, what), (BreakerState::Closed, AfterAttempt::Nothing));
    }

    #[test]
    fn timeouts_429_and_no_answer_count_as_unavailable_and_defects_count_for_nothing() {
        for kind in [FailureKind::RateLimited, FailureKind::DeadlineExceeded, FailureKind::OutcomeUnknown] {
            assert_eq!(signal(&Outcome::fail(kind, "x")), Signal::Unavailable);
        }
        assert_eq!(signal(&Outcome::ok()), Signal::Answered);
        assert_eq!(signal(&Outcome::fail(FailureKind::InternalFault, "x")), Signal::Neutral);
    }

    #[test]
    fn an_internal_fault_the_provider_answered_ends_the_run() {
        let answered = Outcome::Failed(crate::rules::CallFailure {
            kind: FailureKind::InternalFault,
            code: "provider.weird".into(),
            http_status: Some(400),
            retry_after_ms: None,
            reason: None,
        });
        assert_eq!(signal(&answered), Signal::Answered);
        let mut row = BreakerRow::default();
        for _ in 0..4 {
            row = after_attempt(&row, 1, &unavailable(), T0).0;
        }
        row = after_attempt(&row, 1, &answered, T0).0;
        assert_eq!(row.failures_in_a_row, 0);
        // A runtime-side fault says nothing: the run goes on and the fifth opens it.
        let mut row = BreakerRow::default();
        for _ in 0..4 {
            row = after_attempt(&row, 1, &unavailable(), T0).0;
        }
        row = after_attempt(&row, 1, &Outcome::fail(FailureKind::InternalFault, "runtime.bad_payload"), T0).0;
        assert_eq!(row.failures_in_a_row, 4);
        assert_eq!(after_attempt(&row, 1, &unavailable(), T0).1, AfterAttempt::Opened);
        // A probe answered with one closes the breaker.
        let open = open_after_five(T0);
        let (probing, _) = at_claim(&open, 9, T0 + 60_000, T0 + 120_000);
        assert_eq!(after_attempt(&probing, 9, &answered, T0 + 60_001).1, AfterAttempt::Closed);
    }

    #[test]
    fn held_during_the_pause_then_one_probe() {
        let row = open_after_five(T0);
        let lease = T0 + 61_000 + 60_000;
        assert_eq!(at_claim(&row, 9, T0 + 59_999, lease).1, AtClaim::Hold);
        let (row, what) = at_claim(&row, 9, T0 + 60_000, lease);
        assert_eq!(what, AtClaim::Probe);
        assert_eq!(row.state, BreakerState::Probing);
        assert_eq!(row.probe, Some(9));
        // The rest stay held while the probe runs.
        assert_eq!(at_claim(&row, 10, T0 + 60_001, lease).1, AtClaim::Hold);
        // A probe whose worker died loses the probe when its lease ends.
        let (row2, what) = at_claim(&row, 10, lease, lease + 60_000);
        assert_eq!((what, row2.probe), (AtClaim::Probe, Some(10)));
    }

    #[test]
    fn a_probe_answered_closes_it_and_releases() {
        let row = open_after_five(T0);
        let (row, _) = at_claim(&row, 9, T0 + 60_000, T0 + 120_000);
        let (row, what) = after_attempt(&row, 9, &Outcome::ok(), T0 + 60_010);
        assert_eq!(what, AfterAttempt::Closed);
        assert_eq!(row.state, BreakerState::Closed);
        assert_eq!(row.failures_in_a_row, 0);
    }

    #[test]
    fn a_running_delivery_answered_closes_it_too() {
        let row = open_after_five(T0);
        let (row, what) = after_attempt(&row, 77, &Outcome::ok(), T0 + 5);
        assert_eq!((row.state, what), (BreakerState::Closed, AfterAttempt::Closed));
        // A new outage raises a new alert.
        let row = open_after_five(T0 + 10);
        assert!(alert_due(&row));
    }

    #[test]
    fn failed_probes_double_the_pause_up_to_ten_minutes() {
        let mut row = open_after_five(T0);
        let mut now = T0;
        let mut pauses = vec![row.pause_ms / MINUTE_MS];
        for i in 0..5 {
            now += super::super::ms_i64(row.pause_ms);
            let (probing, what) = at_claim(&row, 100 + i, now, now + 60_000);
            assert_eq!(what, AtClaim::Probe);
            let (next, what) = after_attempt(&probing, 100 + i, &unavailable(), now + 1);
            assert_eq!(what, AfterAttempt::Reopened);
            row = next;
            now += 1;
            pauses.push(row.pause_ms / MINUTE_MS);
        }
        assert_eq!(pauses, vec![1, 2, 4, 8, 10, 10]);
    }

    #[test]
    fn a_neutral_probe_gives_the_probe_back() {
        let row = open_after_five(T0);
        let (row, _) = at_claim(&row, 9, T0 + 60_000, T0 + 120_000);
        let (row, what) = after_attempt(&row, 9, &Outcome::fail(FailureKind::InternalFault, "x"), T0 + 60_001);
        assert_eq!((row.state, row.probe, what), (BreakerState::Open, None, AfterAttempt::Nothing));
        assert_eq!(at_claim(&row, 10, T0 + 60_002, T0 + 1).1, AtClaim::Probe);
    }

    #[test]
    fn the_tick_wakes_the_longest_held_after_the_pause_and_it_runs_as_the_probe() {
        let row = open_after_five(T0);
        assert_eq!(tick_wake(&row, T0 + 59_999, 7, T0 + 200_000), None);
        assert_eq!(next_work_ms(&alert_raised(&row), true, T0), Some(T0 + 60_000));
        assert_eq!(next_work_ms(&alert_raised(&row), false, T0), None);
        let woken = tick_wake(&row, T0 + 60_000, 7, T0 + 200_000).unwrap();
        assert_eq!(
            (woken.state, woken.probe, woken.probe_lease_until_ms),
            (BreakerState::Probing, Some(7), Some(T0 + 200_000))
        );
        // The woken delivery runs as the probe; any other is held.
        assert_eq!(at_claim(&woken, 7, T0 + 60_001, T0 + 200_001).1, AtClaim::Probe);
        assert_eq!(at_claim(&woken, 8, T0 + 60_001, T0 + 200_001).1, AtClaim::Hold);
        // Nothing more to wake while the probe's lease lasts; after it, another.
        assert_eq!(tick_wake(&woken, T0 + 199_999, 8, T0 + 300_000), None);
        assert_eq!(tick_wake(&woken, T0 + 200_000, 8, T0 + 300_000).unwrap().probe, Some(8));
        assert_eq!(tick_wake(&BreakerRow::default(), T0, 8, T0), None);
    }

    #[test]
    fn a_claim_is_held_while_open_and_keeps_its_attempt() {
        let row = open_after_five(T0);
        let last = Some(crate::rules::Failure::new("http.503", FailureKind::Unavailable));
        let run =
            ClaimDecision::Run { attempt: 3, lease_until_ms: T0 + 60_000, lease_expired: false, failure: last.clone() };
        assert_eq!(
            decide_at_claim(run.clone(), &row, 9, T0 + 1),
            ClaimVerdict { decision: ClaimDecision::Hold { lease_expired: false, failure: last }, probe: None }
        );
        let ClaimVerdict { decision: d, probe: next } = decide_at_claim(run.clone(), &row, 9, T0 + 60_000);
        assert_eq!(d, run);
        assert_eq!(next.map(|r| (r.state, r.probe)), Some((BreakerState::Probing, Some(9))));
        assert_eq!(
            decide_at_claim(run.clone(), &BreakerRow::default(), 9, T0),
            ClaimVerdict { decision: run, probe: None }
        );
        // Ended at the claim: the breaker has no say.
        assert_eq!(
            decide_at_claim(ClaimDecision::Handled, &row, 9, T0),
            ClaimVerdict { decision: ClaimDecision::Handled, probe: None }
        );
    }

    fn paused_by_ops(until_ms: Option<i64>) -> Pause {
        Pause { at_ms: T0, until_ms, by: "ops".into(), reason: Some("maintenance".into()) }
    }

    #[test]
    fn a_pause_holds_every_claim_and_wakes_no_probe_until_it_ends() {
        let closed = pause(&BreakerRow::default(), paused_by_ops(Some(T0 + 3_600_000)));
        assert_eq!(at_claim(&closed, 1, T0 + 1, T0 + 60_000).1, AtClaim::Hold);
        assert_eq!(at_claim(&closed, 1, T0 + 3_599_999, T0 + 60_000).1, AtClaim::Hold);
        assert_eq!(at_claim(&closed, 1, T0 + 3_600_000, T0 + 60_000).1, AtClaim::Run);
        assert_eq!(next_work_ms(&closed, true, T0), Some(T0 + 3_600_000));
        assert_eq!(pause_ended(&closed, T0 + 3_599_999), None);
        assert_eq!(pause_ended(&closed, T0 + 3_600_000), Some(BreakerRow::default()));
        // An open breaker whose own pause passed sends no probe while paused.
        let open = pause(&open_after_five(T0), paused_by_ops(None));
        assert_eq!(at_claim(&open, 9, T0 + 600_000, T0 + 660_000).1, AtClaim::Hold);
        assert_eq!(tick_wake(&open, T0 + 600_000, 9, T0 + 660_000), None);
        assert_eq!(next_work_ms(&alert_raised(&open), true, T0 + 600_000), None);
        assert_eq!(pause_ended(&open, i64::MAX), None);
        // Ended, it is open as it was, and the tick wakes its probe.
        let ended = BreakerRow { pause: None, ..open.clone() };
        assert!(tick_wake(&ended, T0 + 600_000, 9, T0 + 660_000).is_some());
    }

    #[test]
    fn an_answer_while_paused_closes_the_breaker_but_releases_nothing() {
        let open = pause(&open_after_five(T0), paused_by_ops(None));
        let (next, what) = after_attempt(&open, 77, &Outcome::ok(), T0 + 5);
        assert_eq!((next.state, what), (BreakerState::Closed, AfterAttempt::Nothing));
        assert_eq!(next.pause, open.pause);
        assert!(paused(&next, T0 + 6));
    }

    #[test]
    fn resuming_closes_a_paused_or_open_breaker() {
        let open = alert_raised(&open_after_five(T0));
        for row in [open.clone(), pause(&open, paused_by_ops(None)), pause(&BreakerRow::default(), paused_by_ops(None))]
        {
            let resumed = resume(&row);
            assert_eq!(resumed.state, BreakerState::Closed);
            assert_eq!(resumed.pause, None);
            assert_eq!(resumed.alerts, row.alerts);
            assert_eq!(at_claim(&resumed, 1, T0, T0 + 1).1, AtClaim::Run);
        }
    }
}
