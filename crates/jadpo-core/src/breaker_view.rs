//! The in-process view of the circuit breakers.
//!
//! Outcomes reach the store in batches, so a claim reading only the store's row
//! would go on reading a closed breaker while failures it has not seen yet pile up
//! (a whole batch could spend an attempt on a provider that is down). This view
//! moves as soon as an outcome is known: a claim sees the store's row with this
//! process's concluded but unrecorded outcomes applied by the core's
//! [`breaker::after_attempt`], and holds a delivery that view says to hold. The
//! store's row stays the truth across processes: once an outcome is recorded it
//! leaves the view, and only the store's conditional statements ever write a row.
//!
//! A claim reads the row while it runs, and on PostgreSQL an outcome can be
//! written in between: after the claim read the row, before it decides. So an
//! outcome recorded leaves the view only for claims that start after it; each
//! claim ([`ProcessBreakers::claim`]) still sees those recorded since it started,
//! which may count one twice (its row read after the write), only ever holding
//! more.
//!
//! A connection that has not answered in this process since its last failure (or
//! since the start) is also limited to its `max_in_flight` attempts claimed and not
//! yet concluded: so at most [`breaker::OPEN_AFTER`] failures plus the attempts
//! already in flight on that connection start before the rest are held. A
//! connection that answers is not limited here (its driver queues what it cannot
//! send at once).

use crate::rules::breaker::{self, BreakerRow, Signal};
use crate::rules::{ClaimDecision, Outcome};
use jadpo_check::program::{BreakerState, Program};
// Looked up by connection for every delivery: FxHash, as the steps' maps.
use rustc_hash::FxHashMap as HashMap;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

/// An outcome concluded in this process.
#[derive(Debug)]
struct Concluded {
    delivery: i64,
    outcome: Outcome,
    at_ms: i64,
    /// When it was recorded, as the count of outcomes recorded by then; `None`
    /// while it is not.
    recorded: Option<u64>,
}

impl Concluded {
    /// Whether a claim that started when `since` outcomes had been recorded
    /// counts it: the claim may have read the row before it was written.
    fn counts_for(&self, since: u64) -> bool {
        self.recorded.is_none_or(|at| at > since)
    }
}

#[derive(Debug, Default)]
struct Connection {
    /// Outcomes concluded, in the order concluded: those not yet recorded, and
    /// those recorded while a claim that started before is still running. Mostly
    /// recorded in that order too, so a removal finds them near the front.
    concluded: VecDeque<Concluded>,
    /// Counts the changes to `concluded` other than an outcome added at its end,
    /// after which a view is folded afresh.
    changes: u64,
    /// The last view folded: from which store row, for a claim started when,
    /// at which count of changes, over how many outcomes.
    folded: Option<Folded>,
    /// Attempts claimed and not yet concluded.
    in_flight: usize,
    /// It answered in this process, and has not failed since.
    answering: bool,
}

/// A view folded from a store row over the first `over` outcomes.
#[derive(Debug)]
struct Folded {
    from: BreakerRow,
    since: u64,
    changes: u64,
    over: usize,
    view: BreakerRow,
}

impl Connection {
    /// The store's `row` moved on by the outcomes a claim started when `since`
    /// outcomes had been recorded counts. A claim asks once per delivery with the
    /// same row while outcomes keep arriving, so the last fold is carried on over
    /// the new outcomes only, until the row changes or an outcome is recorded.
    fn view(&mut self, row: &BreakerRow, since: u64) -> BreakerRow {
        if self.concluded.is_empty() {
            return row.clone();
        }
        let (start, mut view) = match &self.folded {
            Some(f)
                if f.from == *row
                    && f.since == since
                    && f.changes == self.changes
                    && f.over <= self.concluded.len() =>
            {
                (f.over, f.view.clone())
            }
            _ => (0, row.clone()),
        };
        for c in self.concluded.iter().skip(start).filter(|c| c.counts_for(since)) {
            view = breaker::after_attempt(&view, c.delivery, &c.outcome, c.at_ms).0;
        }
        let over = self.concluded.len();
        self.folded = Some(Folded { from: row.clone(), since, changes: self.changes, over, view: view.clone() });
        view
    }

    /// Drop the recorded outcomes no running claim counts (`oldest`: when the
    /// oldest running claim started, if any).
    ///
    /// Only from the front, where the oldest are: one left behind an outcome
    /// still to be recorded counts for no claim it should not (a view folds
    /// only those that count for its claim, see [`Concluded::counts_for`]) and
    /// goes when the ones before it do. Looking through them all at each
    /// outcome recorded cost a run a twentieth of its instructions.
    fn forget(&mut self, oldest: Option<u64>) {
        let forgotten = |c: &Concluded| match (c.recorded, oldest) {
            (None, _) => false,
            (Some(at), Some(since)) => at <= since,
            (Some(_), None) => true,
        };
        let before = self.concluded.len();
        while self.concluded.front().is_some_and(forgotten) {
            self.concluded.pop_front();
        }
        if self.concluded.len() != before {
            self.changes += 1;
        }
    }
}

/// Every connection's view, and the claims running.
#[derive(Debug, Default)]
struct Views {
    connections: HashMap<String, Connection>,
    /// Outcomes recorded so far.
    recorded: u64,
    /// The claims running, by the count of outcomes recorded when each started.
    claims: BTreeMap<u64, usize>,
}

impl Views {
    fn oldest_claim(&self) -> Option<u64> {
        self.claims.keys().next().copied()
    }
}

/// What the view makes of a delivery the store's breaker would run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Run it.
    Run,
    /// Hold it: this process's outcomes have opened the breaker.
    Hold,
    /// Leave it for a later claim: the connection has not answered and has as many
    /// attempts in flight as it may.
    Wait,
}

/// The in-process view of every connection's breaker.
#[derive(Debug)]
pub struct ProcessBreakers {
    limits: HashMap<String, usize>,
    views: Mutex<Views>,
}

/// One claim's view of the breakers, from its start to its end (when dropped).
#[derive(Debug)]
pub struct ClaimView<'a> {
    breakers: &'a ProcessBreakers,
    /// Outcomes recorded when the claim started.
    since: u64,
}

impl ProcessBreakers {
    /// A view of `program`'s connections, none failed yet.
    pub fn new(program: &Program) -> ProcessBreakers {
        let limits = program.connections.iter().map(|c| (c.name.clone(), c.max_in_flight.max(1) as usize)).collect();
        ProcessBreakers { limits, views: Mutex::new(Views::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Views> {
        self.views.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A claim starts: until it ends, it counts every outcome not recorded when
    /// it started, whenever that is recorded.
    pub fn claim(&self) -> ClaimView<'_> {
        let mut views = self.lock();
        let since = views.recorded;
        *views.claims.entry(since).or_default() += 1;
        ClaimView { breakers: self, since }
    }

    fn limit(&self, connection: &str) -> usize {
        self.limits.get(connection).copied().unwrap_or(1)
    }

    /// `n` runs [`ClaimView::gate`] let through on `connection` did not start
    /// (the connection's turn sent them back to wait, another process changed
    /// the delivery first, or the claim failed).
    pub fn not_started(&self, connection: &str, n: usize) {
        if n > 0
            && let Some(c) = self.lock().connections.get_mut(connection)
        {
            c.in_flight = c.in_flight.saturating_sub(n);
        }
    }

    /// A connection with runs counted in flight, and how many: with no attempt
    /// under way there is none (a run counted and never started would hold a
    /// slot of a connection not yet answering well for good).
    pub fn counted_in_flight(&self) -> Option<(String, usize)> {
        let views = self.lock();
        views.connections.iter().find(|(_, c)| c.in_flight > 0).map(|(name, c)| (name.clone(), c.in_flight))
    }

    /// An attempt of `delivery` on `connection` ended with `outcome` at `now_ms`;
    /// true when the connection was at its limit (a claim may be waiting).
    pub fn concluded(&self, connection: &str, delivery: i64, outcome: &Outcome, now_ms: i64) -> bool {
        let limit = self.limit(connection);
        let mut views = self.lock();
        let c = views.connections.entry(connection.to_string()).or_default();
        let was_full = c.in_flight >= limit;
        c.in_flight = c.in_flight.saturating_sub(1);
        match breaker::signal(outcome) {
            Signal::Answered => c.answering = true,
            Signal::Unavailable => c.answering = false,
            Signal::Neutral => {}
        }
        c.concluded.push_back(Concluded { delivery, outcome: outcome.clone(), at_ms: now_ms, recorded: None });
        was_full
    }

    /// The outcome of `delivery` on `connection` reached the store (or never will):
    /// the store's row speaks for it to the claims that start from now on.
    pub fn recorded(&self, connection: &str, delivery: i64) {
        let mut views = self.lock();
        views.recorded += 1;
        let (at, oldest) = (views.recorded, views.oldest_claim());
        if let Some(c) = views.connections.get_mut(connection)
            && let Some(found) = c.concluded.iter_mut().find(|c| c.delivery == delivery && c.recorded.is_none())
        {
            found.recorded = Some(at);
            c.changes += 1;
            c.forget(oldest);
        }
    }
}

impl ClaimView<'_> {
    /// What to do with a claim's `decision` on `connection`, whose store row is
    /// `row`. Only a plain run is gated (a probe, a hold or an end is the store
    /// row's to decide); a run is counted in flight at once, so claims of other
    /// loops see it (see [`ProcessBreakers::not_started`]).
    pub fn gate(&self, connection: &str, row: &BreakerRow, decision: &ClaimDecision) -> Gate {
        if !matches!(decision, ClaimDecision::Run { .. }) {
            return Gate::Run;
        }
        let limit = self.breakers.limit(connection);
        let mut views = self.breakers.lock();
        // A connection nothing is known of in this process has not answered yet.
        let c = views.connections.entry(connection.to_string()).or_default();
        let view = c.view(row, self.since);
        if view.state != BreakerState::Closed {
            return Gate::Hold;
        }
        let proven = c.answering && view.failures_in_a_row == 0;
        if !proven && c.in_flight >= limit {
            return Gate::Wait;
        }
        c.in_flight += 1;
        Gate::Run
    }
}

impl Drop for ClaimView<'_> {
    /// The claim ended: the outcomes recorded since it started that no other
    /// running claim counts leave the view.
    fn drop(&mut self) {
        let mut views = self.breakers.lock();
        if let Some(n) = views.claims.get_mut(&self.since) {
            *n -= 1;
            if *n == 0 {
                views.claims.remove(&self.since);
            }
        }
        let oldest = views.oldest_claim();
        for c in views.connections.values_mut() {
            c.forget(oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jadpo_check::program::FailureKind;

    fn down() -> Outcome {
        Outcome::fail(FailureKind::Unavailable, "http.503")
    }

    fn concluded(delivery: i64, outcome: Outcome, at_ms: i64) -> Concluded {
        Concluded { delivery, outcome, at_ms, recorded: None }
    }

    /// The view carried on over new outcomes is the view folded afresh, and a
    /// recorded outcome leaves it (the store's row speaks for it) once no claim
    /// that started before it was recorded is running.
    #[test]
    fn the_view_moves_with_each_outcome_and_leaves_recorded_ones_to_the_store() {
        let mut c = Connection::default();
        let closed = BreakerRow::default();
        for d in 1..=4 {
            c.concluded.push_back(concluded(d, down(), 10 * d));
            assert_eq!(c.view(&closed, 0).failures_in_a_row, d as u32);
            assert_eq!(c.view(&closed, 0).state, BreakerState::Closed);
        }
        // The store's row once the first four are written.
        let four = c.view(&closed, 0);
        c.concluded.push_back(concluded(5, down(), 50));
        let open = c.view(&closed, 0);
        assert_eq!(open.state, BreakerState::Open);
        assert_eq!(open.opened_at_ms, Some(50));
        // All five recorded, the fifth while a claim that started before is
        // running: that claim still counts it; one started after does not.
        for (n, concluded) in (1..).zip(c.concluded.iter_mut()) {
            concluded.recorded = Some(n);
        }
        c.changes += 1;
        c.forget(Some(4));
        assert_eq!(c.concluded.len(), 1);
        assert_eq!(c.view(&four, 4), open, "the claim that read the row before the fifth was written");
        assert_eq!(c.view(&open, 5), open);
        // That claim ended: the store's row now says open, and the view is it.
        c.forget(None);
        assert!(c.concluded.is_empty());
        assert_eq!(c.view(&open, 5), open);
        // A success not yet recorded closes the view of a breaker the store still
        // has open only when the store's row would close too: a non-probe answer
        // closes it.
        c.concluded.push_back(concluded(6, Outcome::ok(), 60));
        assert_eq!(c.view(&open, 5).state, BreakerState::Closed);
    }
}
