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
//! A connection that has not answered in this process since its last failure (or
//! since the start) is also limited to its `max_in_flight` attempts claimed and not
//! yet concluded: so at most [`breaker::OPEN_AFTER`] failures plus the attempts
//! already in flight on that connection start before the rest are held. A
//! connection that answers is not limited here (its driver queues what it cannot
//! send at once).

use crate::rules::breaker::{self, BreakerRow, Signal};
use crate::rules::{ClaimDecision, Outcome};
use jadpo_check::program::{BreakerState, Program};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

#[derive(Debug, Default)]
struct Connection {
    /// Outcomes concluded and not yet recorded, in the order concluded:
    /// `(delivery, outcome, at)`. Mostly recorded in that order too, so removal
    /// finds them near the front.
    unrecorded: VecDeque<(i64, Outcome, i64)>,
    /// Counts removals from `unrecorded`, after which a view is folded afresh.
    removals: u64,
    /// The last view folded: from which store row, at which count of removals,
    /// over how many outcomes.
    folded: Option<Folded>,
    /// Attempts claimed and not yet concluded.
    in_flight: usize,
    /// It answered in this process, and has not failed since.
    answering: bool,
}

/// A view folded from a store row over the first `over` unrecorded outcomes.
#[derive(Debug)]
struct Folded {
    from: BreakerRow,
    removals: u64,
    over: usize,
    view: BreakerRow,
}

impl Connection {
    /// The store's `row` moved on by the outcomes not yet recorded. A claim asks
    /// once per delivery with the same row while outcomes keep arriving, so the
    /// last fold is carried on over the new outcomes only, until the row changes
    /// or an outcome is recorded.
    fn view(&mut self, row: &BreakerRow) -> BreakerRow {
        if self.unrecorded.is_empty() {
            return row.clone();
        }
        let (start, mut view) = match &self.folded {
            Some(f) if f.from == *row && f.removals == self.removals && f.over <= self.unrecorded.len() => {
                (f.over, f.view.clone())
            }
            _ => (0, row.clone()),
        };
        for (delivery, outcome, at) in self.unrecorded.iter().skip(start) {
            view = breaker::after_attempt(&view, *delivery, outcome, *at).0;
        }
        let over = self.unrecorded.len();
        self.folded = Some(Folded { from: row.clone(), removals: self.removals, over, view: view.clone() });
        view
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
pub struct BreakerView {
    limits: HashMap<String, usize>,
    connections: Mutex<HashMap<String, Connection>>,
}

impl BreakerView {
    /// A view of `program`'s connections, none failed yet.
    pub fn new(program: &Program) -> BreakerView {
        let limits = program.connections.iter().map(|c| (c.name.clone(), c.max_in_flight.max(1) as usize)).collect();
        BreakerView { limits, connections: Mutex::new(HashMap::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Connection>> {
        self.connections.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The breaker of `connection` as this process knows it: the store's `row`
    /// moved on by the outcomes not yet recorded.
    pub fn row(&self, connection: &str, row: &BreakerRow) -> BreakerRow {
        match self.lock().get_mut(connection) {
            Some(c) => c.view(row),
            None => row.clone(),
        }
    }

    /// What to do with a claim's `decision` on `connection`, whose store row is
    /// `row`. Only a plain run is gated (a probe, a hold or an end is the store
    /// row's to decide); a run is counted in flight at once, so claims of other
    /// loops see it (see [`BreakerView::not_started`]).
    pub fn gate(&self, connection: &str, row: &BreakerRow, decision: &ClaimDecision) -> Gate {
        if !matches!(decision, ClaimDecision::Run { .. }) {
            return Gate::Run;
        }
        let limit = self.limit(connection);
        let mut map = self.lock();
        // A connection nothing is known of in this process has not answered yet.
        let c = map.entry(connection.to_string()).or_default();
        let view = c.view(row);
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

    fn limit(&self, connection: &str) -> usize {
        self.limits.get(connection).copied().unwrap_or(1)
    }

    /// `n` runs [`BreakerView::gate`] let through on `connection` did not start
    /// (another process changed the delivery first, or the claim failed).
    pub fn not_started(&self, connection: &str, n: usize) {
        if n > 0
            && let Some(c) = self.lock().get_mut(connection)
        {
            c.in_flight = c.in_flight.saturating_sub(n);
        }
    }

    /// An attempt of `delivery` on `connection` ended with `outcome` at `now_ms`;
    /// true when the connection was at its limit (a claim may be waiting).
    pub fn concluded(&self, connection: &str, delivery: i64, outcome: &Outcome, now_ms: i64) -> bool {
        let limit = self.limit(connection);
        let mut map = self.lock();
        let c = map.entry(connection.to_string()).or_default();
        let was_full = c.in_flight >= limit;
        c.in_flight = c.in_flight.saturating_sub(1);
        match breaker::signal(outcome) {
            Signal::Answered => c.answering = true,
            Signal::Unavailable => c.answering = false,
            Signal::Neutral => {}
        }
        c.unrecorded.push_back((delivery, outcome.clone(), now_ms));
        was_full
    }

    /// The outcome of `delivery` on `connection` reached the store (or never will):
    /// the store's row speaks for it now.
    pub fn recorded(&self, connection: &str, delivery: i64) {
        let mut map = self.lock();
        if let Some(c) = map.get_mut(connection)
            && let Some(i) = c.unrecorded.iter().position(|(d, _, _)| *d == delivery)
        {
            c.unrecorded.remove(i);
            c.removals += 1;
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

    /// The view carried on over new outcomes is the view folded afresh, and a
    /// recorded outcome leaves it (the store's row speaks for it).
    #[test]
    fn the_view_moves_with_each_outcome_and_leaves_recorded_ones_to_the_store() {
        let mut c = Connection::default();
        let closed = BreakerRow::default();
        for d in 1..=4 {
            c.unrecorded.push_back((d, down(), 10 * d));
            assert_eq!(c.view(&closed).failures_in_a_row, d as u32);
            assert_eq!(c.view(&closed).state, BreakerState::Closed);
        }
        c.unrecorded.push_back((5, down(), 50));
        let open = c.view(&closed);
        assert_eq!(open.state, BreakerState::Open);
        assert_eq!(open.opened_at_ms, Some(50));
        // All five recorded: the store's row now says open, and the view is it.
        for d in 1..=5 {
            let i = c.unrecorded.iter().position(|(x, _, _)| *x == d).expect("there");
            c.unrecorded.remove(i);
            c.removals += 1;
        }
        assert_eq!(c.view(&open), open);
        // A success not yet recorded closes the view of a breaker the store still
        // has open only when the store's row would close too: a non-probe answer
        // closes it.
        c.unrecorded.push_back((6, Outcome::ok(), 60));
        assert_eq!(c.view(&open).state, BreakerState::Closed);
    }
}
