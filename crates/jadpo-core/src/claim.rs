//! A claim's decisions, made once for both stores.
//!
//! A store reads the due rows of its claim ([`ClaimRow`], in its claim's
//! transaction) and hands them to [`plan`] with its breaker rows
//! ([`BreakerRows`]). [`plan`] asks the core's decision of each row (its budget,
//! its breaker, the process's view), takes the probe on the breaker's row when a
//! decision makes one (a probe another process took first holds the delivery
//! instead), and says what each row's guarded statement writes ([`RowWrite`]).
//! The store writes them, each conditional on its row being as read ([`Seen`]),
//! and hands back which matched; [`settle`] then says what the claim did: the
//! deliveries to run, those ended or held, the attempts that lost workers had
//! counted ([`LostAttempt`]) and the deliveries given up, whose raised events
//! the store writes in the same transaction.
//!
//! So a store only reads and writes rows: which row is due, held, a probe or given
//! up is decided here, in one place.

use crate::rules::breaker::BreakerRow;
use crate::rules::{self, ClaimDecision, Failure, Record};
use crate::store::{
    ClaimCandidate, ClaimReport, ClaimVerdict, Claimed, EndedAtClaim, EndedDelivery, HeldAtClaim, LeftAtClaim,
    OrphanedDelivery, WaitingAtClaim, end_reason_at_claim,
};
use jadpo_check::program::DeliveryState;
// Looked up by connection for every row: FxHash, as the steps' maps.
use rustc_hash::FxHashMap as HashMap;

/// A due delivery as a claim read it, joined with its event.
#[derive(Debug, Clone)]
pub struct ClaimRow {
    /// What the core decides from (its `breaker` is filled in by [`plan`]).
    pub candidate: ClaimCandidate,
    /// Its `due_at` as read: a pending delivery's due time, a running one's lease
    /// end.
    pub due_at: Option<i64>,
    /// When it was last claimed (a running row's attempt started then).
    pub claimed_at: Option<i64>,
    /// Its event's id.
    pub event_id: i64,
    /// Its event's name.
    pub event: String,
    /// Its event's JSON payload.
    pub payload: String,
    /// The number, in the store, of the program version that stored its event
    /// (none: stored before versions were kept, or written in SQL and not yet
    /// expanded).
    pub event_version: Option<i64>,
    /// Whether it has an ordering key (`order_by:`): it was read only once no
    /// earlier delivery of its key held it back.
    pub ordered: bool,
}

/// A delivery's row as a claim read it: every change the claim makes to it is
/// conditional on all of it, so a row another process changed since is left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// The delivery's id.
    pub id: i64,
    /// Its state.
    pub state: DeliveryState,
    /// Its attempts.
    pub attempts: u32,
    /// Its `due_at`.
    pub due_at: Option<i64>,
}

impl ClaimRow {
    /// The row as read, for the guard of its statement.
    pub fn seen(&self) -> Seen {
        let c = &self.candidate;
        Seen { id: c.id, state: c.record.state, attempts: c.record.attempts, due_at: self.due_at }
    }

    /// The claim of this row for `attempt`, once the guarded statement that starts
    /// it has matched: the delivery is running until `lease_until_ms`.
    fn started(&self, attempt: u32, lease_until_ms: i64, now_ms: i64, failure: Option<Failure>) -> Claimed {
        let c = &self.candidate;
        Claimed {
            id: c.id,
            event_id: self.event_id,
            event: self.event.clone(),
            payload: self.payload.clone(),
            event_version: self.event_version,
            subscriber: c.subscriber.clone(),
            connection: c.connection.clone(),
            attempt,
            claimed_at_ms: now_ms,
            // A running row taken back was due when its lease ended.
            due_at_ms: self.due_at.or(c.record.lease_until_ms).unwrap_or(now_ms),
            record: Record {
                state: DeliveryState::Running,
                attempts: attempt,
                due_at_ms: None,
                lease_until_ms: Some(lease_until_ms),
                budget_start_ms: c.record.budget_start_ms,
                held_ms: c.record.held_ms,
                last_failure: failure,
            },
        }
    }
}

/// How a claim's statement leaves a row's last failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LastFailure {
    /// As it is.
    Kept,
    /// Written (`None` clears it).
    Set(Option<Failure>),
}

impl LastFailure {
    /// Whether the statement writes the last failure, and the failure it writes
    /// (`None`: cleared, or kept when not written).
    pub fn written(&self) -> (bool, Option<&Failure>) {
        match self {
            LastFailure::Kept => (false, None),
            LastFailure::Set(f) => (true, f.as_ref()),
        }
    }
}

/// What one claim decision writes on its row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowWrite {
    /// The new state.
    pub state: DeliveryState,
    /// The new attempts.
    pub attempts: u32,
    /// The new `due_at` (a running delivery's is its lease end, so that a claim
    /// finds it again when the lease ends).
    pub due_at: Option<i64>,
    /// The new lease end.
    pub lease_until: Option<i64>,
    /// Whether the claim's time becomes the delivery's last claim (it runs, or
    /// ends: retention counts a final delivery's age from it).
    pub stamps_claim: bool,
    /// Whether the delivery is held from now by its connection's breaker
    /// (`held_since`, `held_connection`).
    pub holds: bool,
    /// The last failure.
    pub failure: LastFailure,
    /// Why it ended, when the claim ends it.
    pub end_reason: Option<&'static str>,
    /// Time added to its time held (a wait for its connection's rate).
    pub waited_ms: i64,
    /// The start of its `within:` window (moved by an ordered delivery's first
    /// claim, see [`rules::window_start_at_claim`]).
    pub budget_start: i64,
}

impl RowWrite {
    /// What `decision` writes on a row read with `attempts`; `None` for a row
    /// the claim leaves as it is.
    pub fn of(decision: &ClaimDecision, attempts: u32, budget_start: i64, now_ms: i64) -> Option<RowWrite> {
        let end_reason = end_reason_at_claim(decision);
        let write = |state, attempts, due_at, stamps_claim, holds, failure| RowWrite {
            budget_start,
            waited_ms: 0,
            state,
            attempts,
            due_at,
            lease_until: due_at.filter(|_| state == DeliveryState::Running),
            stamps_claim,
            holds,
            failure,
            end_reason,
        };
        Some(match decision {
            ClaimDecision::Skip => return None,
            ClaimDecision::Wait { until_ms } => RowWrite {
                waited_ms: until_ms.saturating_sub(now_ms).max(0),
                ..write(DeliveryState::Pending, attempts, Some(*until_ms), false, false, LastFailure::Kept)
            },
            ClaimDecision::Hold { failure, .. } => {
                write(DeliveryState::Held, attempts, None, false, true, LastFailure::Set(failure.clone()))
            }
            ClaimDecision::Handled => write(DeliveryState::Succeeded, attempts, None, true, false, LastFailure::Kept),
            ClaimDecision::Run { attempt, lease_until_ms, failure, .. } => write(
                DeliveryState::Running,
                *attempt,
                Some(*lease_until_ms),
                true,
                false,
                LastFailure::Set(failure.clone()),
            ),
            ClaimDecision::GiveUp { failure, .. } => {
                write(DeliveryState::Failed, attempts, None, true, false, LastFailure::Set(Some(failure.clone())))
            }
            // A lost worker's attempt stays counted, as at any claim that finds it.
            ClaimDecision::Leave { until_ms, lease_expired } => {
                let failure =
                    if *lease_expired { LastFailure::Set(Some(Failure::lease_expired())) } else { LastFailure::Kept };
                match until_ms {
                    Some(until_ms) => RowWrite {
                        waited_ms: until_ms.saturating_sub(now_ms).max(0),
                        ..write(DeliveryState::Pending, attempts, Some(*until_ms), false, false, failure)
                    },
                    // `held_since` marks when it began to wait, for its time held.
                    None => write(DeliveryState::Orphaned, attempts, None, false, true, failure),
                }
            }
        })
    }
}

/// One row's change in a claim: its decision and what its statement writes.
#[derive(Debug, Clone)]
pub struct Change {
    /// The row's index in the rows read.
    pub row: usize,
    /// The core's decision.
    pub decision: ClaimDecision,
    /// What the row's guarded statement writes.
    pub write: RowWrite,
}

/// Every change a claim makes, and the rows it leaves for a later claim.
#[derive(Debug, Clone, Default)]
pub struct ClaimPlan {
    /// The rows' changes, in the order read.
    pub changes: Vec<Change>,
    /// Indices of the rows left as they are (their connection's slots are taken).
    pub left: Vec<usize>,
}

/// The breaker rows of a claim's connections, in the claim's transaction.
pub trait BreakerRows {
    /// The store's error.
    type Error;
    /// `connection`'s row (none: it has never failed).
    fn read(&mut self, connection: &str) -> Result<Option<BreakerRow>, Self::Error>;
    /// Write `next` as `connection`'s row if the row is still `seen` (none: there
    /// was no row); whether it was written.
    fn write(&mut self, connection: &str, seen: Option<&BreakerRow>, next: &BreakerRow) -> Result<bool, Self::Error>;
}

/// Decide each of `rows` with `decide` (the core), each connection's breaker read
/// once and carried on through the claim (a probe taken earlier in it holds the
/// rest), and say what each row's statement writes.
pub fn plan<B: BreakerRows>(
    rows: &mut [ClaimRow],
    breakers: &mut B,
    now_ms: i64,
    decide: &mut dyn FnMut(&ClaimCandidate) -> ClaimVerdict,
) -> Result<ClaimPlan, B::Error> {
    // Each connection's breaker as this claim leaves it.
    let mut rows_of: HashMap<String, Option<BreakerRow>> = HashMap::default();
    let mut plan = ClaimPlan { changes: Vec::with_capacity(rows.len()), left: Vec::new() };
    for (i, row) in rows.iter_mut().enumerate() {
        let connection = &row.candidate.connection;
        let current = match rows_of.get(connection) {
            Some(known) => known.clone(),
            None => {
                let found = breakers.read(connection)?;
                rows_of.insert(connection.clone(), found.clone());
                found
            }
        };
        row.candidate.breaker = current.clone().unwrap_or_default();
        let record = &mut row.candidate.record;
        record.budget_start_ms = rules::window_start_at_claim(record, row.ordered, now_ms);
        let ClaimVerdict { mut decision, probe: next_breaker } = decide(&row.candidate);
        if let Some(next) = next_breaker {
            // This claim is the probe, or takes a turn of the connection's rate; if
            // another process changed the breaker since it was read, a probe is
            // held instead, and a turn left for a later claim.
            let probes = next.probe != current.as_ref().and_then(|c| c.probe);
            if breakers.write(&row.candidate.connection, current.as_ref(), &next)? {
                rows_of.insert(row.candidate.connection.clone(), Some(next));
            } else if probes {
                decision = decision.held();
            } else {
                decision = ClaimDecision::Skip;
            }
        }
        let record = &row.candidate.record;
        match RowWrite::of(&decision, record.attempts, record.budget_start_ms, now_ms) {
            Some(write) => plan.changes.push(Change { row: i, decision, write }),
            None => plan.left.push(i),
        }
    }
    Ok(plan)
}

/// An attempt a lost worker had counted, found by a claim whose lease on it had
/// ended: recorded `lease_expired` in the delivery's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostAttempt {
    /// The delivery's id.
    pub delivery: i64,
    /// The attempt's number.
    pub attempt: u32,
    /// When it started (its claim).
    pub started_at_ms: i64,
}

/// What a claim did, once its statements were written.
#[derive(Debug)]
pub struct Settled<'a> {
    /// The claim's report.
    pub report: ClaimReport,
    /// The attempts lost workers had counted, to record as `lease_expired`.
    pub lost: Vec<LostAttempt>,
    /// The deliveries given up, whose raised events the store writes with them.
    pub given_up: Vec<EndedDelivery<'a>>,
    /// The deliveries orphaned, whose raised events the store writes with them.
    pub orphaned: Vec<OrphanedDelivery<'a>>,
}

/// What the claim of `rows` by `plan` did, given `written`: the indices, in
/// `plan.changes`, of the statements that matched (the others' rows had
/// changed: another process took them).
pub fn settle<'a>(rows: &'a [ClaimRow], plan: &'a ClaimPlan, written: &[usize], now_ms: i64) -> Settled<'a> {
    let mut settled =
        Settled { report: ClaimReport::default(), lost: Vec::new(), given_up: Vec::new(), orphaned: Vec::new() };
    for change in written.iter().filter_map(|&w| plan.changes.get(w)) {
        let Some(row) = rows.get(change.row) else { continue };
        let c = &row.candidate;
        let lease_expired = match &change.decision {
            ClaimDecision::Skip => continue,
            ClaimDecision::Wait { until_ms } => {
                let connection = c.connection.clone();
                settled.report.waiting.push(WaitingAtClaim { id: c.id, connection, until_ms: *until_ms });
                continue;
            }
            ClaimDecision::Hold { lease_expired, .. } => {
                settled.report.held.push(HeldAtClaim { id: c.id, connection: c.connection.clone() });
                *lease_expired
            }
            ClaimDecision::Leave { until_ms, lease_expired } => {
                if until_ms.is_none() {
                    settled.orphaned.push(OrphanedDelivery {
                        id: c.id,
                        event_id: row.event_id,
                        event: &row.event,
                        subscriber: &c.subscriber,
                        attempts: c.record.attempts,
                    });
                }
                let left = LeftAtClaim { id: c.id, subscriber: c.subscriber.clone(), until_ms: *until_ms };
                settled.report.left.push(left);
                *lease_expired
            }
            ClaimDecision::Handled => {
                let ended =
                    EndedAtClaim { id: c.id, subscriber: c.subscriber.clone(), decision: change.decision.clone() };
                settled.report.ended.push(ended);
                false
            }
            ClaimDecision::Run { attempt, lease_until_ms, lease_expired, failure } => {
                settled.report.run.push(row.started(*attempt, *lease_until_ms, now_ms, failure.clone()));
                *lease_expired
            }
            ClaimDecision::GiveUp { failure, lease_expired, .. } => {
                settled.given_up.push(EndedDelivery {
                    id: c.id,
                    event_id: row.event_id,
                    event: &row.event,
                    subscriber: &c.subscriber,
                    parked: false,
                    failure,
                    attempts: c.record.attempts,
                });
                let ended =
                    EndedAtClaim { id: c.id, subscriber: c.subscriber.clone(), decision: change.decision.clone() };
                settled.report.ended.push(ended);
                *lease_expired
            }
        };
        if lease_expired {
            settled.lost.push(LostAttempt {
                delivery: c.id,
                attempt: c.record.attempts,
                started_at_ms: row.claimed_at.unwrap_or(now_ms),
            });
        }
    }
    settled
}

#[cfg(test)]
mod tests {
    use super::*;
    use jadpo_check::program::BreakerState;

    const T0: i64 = 1_700_000_000_000;

    /// Breaker rows as a store keeps them, counting reads; a probe's write is lost
    /// when `lose_writes` (another process took the probe first).
    #[derive(Default)]
    struct Rows {
        rows: HashMap<String, BreakerRow>,
        reads: Vec<String>,
        lose_writes: bool,
    }

    impl BreakerRows for Rows {
        type Error = ();

        fn read(&mut self, connection: &str) -> Result<Option<BreakerRow>, ()> {
            self.reads.push(connection.to_string());
            Ok(self.rows.get(connection).cloned())
        }

        fn write(&mut self, connection: &str, seen: Option<&BreakerRow>, next: &BreakerRow) -> Result<bool, ()> {
            if self.lose_writes || self.rows.get(connection) != seen {
                return Ok(false);
            }
            self.rows.insert(connection.to_string(), next.clone());
            Ok(true)
        }
    }

    fn row(id: i64, connection: &str, state: DeliveryState) -> ClaimRow {
        let mut record = Record::new(T0);
        record.state = state;
        if state == DeliveryState::Running {
            record.attempts = 1;
            record.due_at_ms = None;
            record.lease_until_ms = Some(T0);
        }
        ClaimRow {
            candidate: ClaimCandidate {
                id,
                subscriber: "rec".into(),
                connection: connection.into(),
                record,
                handled: false,
                breaker: BreakerRow::default(),
            },
            due_at: Some(T0),
            claimed_at: Some(T0 - 30_000),
            event_id: id,
            event: "Paid".into(),
            payload: "{}".into(),
            event_version: None,
            ordered: false,
        }
    }

    fn run(attempt: u32, lease_expired: bool) -> ClaimDecision {
        ClaimDecision::Run { attempt, lease_until_ms: T0 + 31_000, lease_expired, failure: None }
    }

    /// The core's claim with the breaker's rule, as the steps decide.
    fn decide(c: &ClaimCandidate) -> ClaimVerdict {
        let lease_expired = c.record.state == DeliveryState::Running;
        crate::rules::breaker::decide_at_claim(run(c.record.attempts + 1, lease_expired), &c.breaker, c.id, T0)
    }

    #[test]
    fn each_connection_s_breaker_is_read_once_and_each_row_gets_it() {
        let open = BreakerRow { state: BreakerState::Open, failures_in_a_row: 5, ..BreakerRow::default() };
        let mut breakers = Rows::default();
        breakers.rows.insert("down".into(), open.clone());
        let mut rows = vec![
            row(1, "up", DeliveryState::Pending),
            row(2, "down", DeliveryState::Pending),
            row(3, "up", DeliveryState::Pending),
        ];
        let mut seen = Vec::new();
        let plan = plan(&mut rows, &mut breakers, T0, &mut |c| {
            seen.push((c.id, c.breaker.clone()));
            ClaimVerdict { decision: ClaimDecision::Skip, probe: None }
        })
        .expect("plan");
        assert_eq!(breakers.reads, ["up", "down"]);
        assert_eq!(seen, [(1, BreakerRow::default()), (2, open), (3, BreakerRow::default())]);
        assert!(plan.changes.is_empty());
        assert_eq!(plan.left, [0, 1, 2], "rows the core skips are left for a later claim");
    }

    #[test]
    fn a_probe_holds_the_rest_of_its_connection_and_a_lost_probe_is_held() {
        // A breaker open long enough that a claim's delivery becomes its probe.
        let open = BreakerRow {
            state: BreakerState::Open,
            failures_in_a_row: 5,
            opened_at_ms: Some(T0 - 3_600_000),
            pause_ms: 30_000,
            ..BreakerRow::default()
        };
        for lose in [false, true] {
            let mut breakers = Rows { lose_writes: lose, ..Rows::default() };
            breakers.rows.insert("c".into(), open.clone());
            let mut rows = vec![row(1, "c", DeliveryState::Pending), row(2, "c", DeliveryState::Pending)];
            let plan = plan(&mut rows, &mut breakers, T0, &mut decide).expect("plan");
            let states: Vec<DeliveryState> = plan.changes.iter().map(|c| c.write.state).collect();
            let expected = if lose {
                // Another process took the probe: this claim holds both.
                [DeliveryState::Held, DeliveryState::Held]
            } else {
                [DeliveryState::Running, DeliveryState::Held]
            };
            assert_eq!(states, expected, "probe lost: {lose}");
            assert_eq!(breakers.rows["c"].probe, (!lose).then_some(1), "probe lost: {lose}");
        }
    }

    #[test]
    fn what_each_decision_writes() {
        let failure = Failure::lease_expired();
        let hold = ClaimDecision::Hold { lease_expired: false, failure: Some(failure.clone()) };
        let w = RowWrite::of(&hold, 2, T0, T0).expect("a hold writes");
        assert_eq!((w.state, w.attempts, w.due_at, w.lease_until), (DeliveryState::Held, 2, None, None));
        assert!(w.holds && !w.stamps_claim);
        assert_eq!(w.failure, LastFailure::Set(Some(failure.clone())));
        let w = RowWrite::of(&run(3, false), 2, T0, T0).expect("a run writes");
        assert_eq!((w.state, w.attempts), (DeliveryState::Running, 3));
        assert_eq!((w.due_at, w.lease_until), (Some(T0 + 31_000), Some(T0 + 31_000)), "a lease's end is its due time");
        assert!(w.stamps_claim && !w.holds);
        let w = RowWrite::of(&ClaimDecision::Handled, 2, T0, T0).expect("handled writes");
        assert_eq!(
            (w.state, w.failure.clone(), w.end_reason),
            (DeliveryState::Succeeded, LastFailure::Kept, Some("handled"))
        );
        let give_up = ClaimDecision::GiveUp {
            failure: failure.clone(),
            because: crate::rules::FailedBecause::PastWindow,
            lease_expired: false,
        };
        let w = RowWrite::of(&give_up, 2, T0, T0).expect("giving up writes");
        assert_eq!((w.state, w.end_reason), (DeliveryState::Failed, Some("past_window")));
        assert_eq!(RowWrite::of(&ClaimDecision::Skip, 2, T0, T0), None);
    }

    #[test]
    fn only_written_rows_are_reported_with_their_lost_attempts_and_raises() {
        let mut rows = vec![
            row(1, "c", DeliveryState::Running),
            row(2, "c", DeliveryState::Pending),
            row(3, "c", DeliveryState::Pending),
        ];
        let give_up = |lease_expired| ClaimDecision::GiveUp {
            failure: Failure::lease_expired(),
            because: crate::rules::FailedBecause::PastWindow,
            lease_expired,
        };
        let mut decisions = [give_up(true), run(1, false), run(1, false)]
            .into_iter()
            .map(|decision| ClaimVerdict { decision, probe: None });
        let plan =
            plan(&mut rows, &mut Rows::default(), T0, &mut |_| decisions.next().expect("a decision")).expect("plan");
        // Row 3's statement did not match (another process took it).
        let settled = settle(&rows, &plan, &[0, 1], T0);
        assert_eq!(settled.report.run.iter().map(|c| c.id).collect::<Vec<_>>(), [2]);
        assert_eq!(settled.report.ended.iter().map(|e| e.id).collect::<Vec<_>>(), [1]);
        assert_eq!(settled.lost, [LostAttempt { delivery: 1, attempt: 1, started_at_ms: T0 - 30_000 }]);
        assert_eq!(settled.given_up.iter().map(|e| (e.id, e.attempts)).collect::<Vec<_>>(), [(1, 1)]);
        let claimed = &settled.report.run[0];
        assert_eq!((claimed.attempt, claimed.claimed_at_ms, claimed.due_at_ms), (1, T0, T0));
        assert_eq!(claimed.record.lease_until_ms, Some(T0 + 31_000));
    }
}
