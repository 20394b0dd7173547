//! The guarded row operations a store offers inside one of its transactions,
//! and the rules written once over them.
//!
//! A store knows how to read and write its rows; it does not know what an
//! operator's retry, a pause or the tick's sweep decide. Those are written here,
//! once, over [`Rows`]: each reads typed rows, asks the core's pure rules what
//! follows, and hands the store guarded writes (each one conditional on the row
//! being as it was read, returning whether it was). A guarded write that misses
//! (another process changed the row first) is decided the same way on every
//! store: an operator's change of a breaker is read and decided again, up to
//! [`CHANGE_TRIES`] times, then fails with [`StoreError::Contended`]; a change
//! of a delivery is reported as not made. The shared conformance suite
//! (`jadpo-store-conformance`) runs each on every store, the missed guards
//! included.

use super::{
    BreakerAction, BreakerAlert, BreakerSweep, BreakerView, ExpandReport, Expanded, Expansion, InvalidEvent, NewEvent,
    PauseAction, PruneCounts, PrunePlan, Raise, Replay, ResumeReport, RetryResult, SkipResult, StoreError,
    UnexpandedEvent,
};
use crate::rules::breaker::{self, BreakerRow, Pause};
use crate::rules::{self, Record};
use jadpo_check::program::DeliveryState;

/// How many times an operator's change of a breaker is read and decided again
/// when another process changed the row first, before it gives up.
pub const CHANGE_TRIES: usize = 16;

/// Which breakers [`Rows::breakers`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerSet {
    /// Those with a pause recorded.
    Paused,
    /// Those the tick's sweep looks at: not closed, or paused.
    Swept,
}

/// Which held deliveries [`Rows::held`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldSet<'a> {
    /// Those held for `connection` (only `one` when given).
    Of {
        /// The connection holding them.
        connection: &'a str,
        /// Only this delivery.
        one: Option<i64>,
    },
    /// Those whose connection has no breaker that is not closed, nor a pause: a
    /// release racing a hold can leave these behind.
    Unheld,
}

/// A held delivery as read by a release: the guard its release is written under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldRow {
    /// The delivery's id.
    pub id: i64,
    /// Its time held before this hold.
    pub held_ms: i64,
    /// When this hold started.
    pub held_since_ms: Option<i64>,
}

/// The delivery a connection has held longest, as the tick's sweep reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongestHeld {
    /// The delivery's id.
    pub id: i64,
    /// Its subscriber (whose lease a probe takes).
    pub subscriber: String,
}

/// A final delivery retention deleted, as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrunedDelivery {
    /// Its id.
    pub id: i64,
    /// Its event's id.
    pub event_id: i64,
    /// Whether it had a handled record (a column of its row, gone with it).
    pub handled: bool,
}

/// A delivery as an operator's retry or skip reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperatorRow {
    /// Its state.
    pub state: DeliveryState,
    /// The attempts it used.
    pub attempts: u32,
}

/// What a store does inside one transaction: reads of typed rows and writes
/// guarded by the rows as read. Nothing here decides; [`Actions`] does.
pub trait Rows: PruneRows {
    /// A connection's breaker row, if it has one.
    fn breaker(&mut self, connection: &str) -> Result<Option<BreakerRow>, StoreError>;

    /// The breakers of `which`, by connection name, each with its held count.
    fn breakers(&mut self, which: BreakerSet) -> Result<Vec<BreakerView>, StoreError>;

    /// Write a breaker's `next` row only if it is still `seen` (`None`: no row
    /// yet). Returns whether it did.
    fn write_breaker(
        &mut self,
        connection: &str,
        seen: Option<&BreakerRow>,
        next: &BreakerRow,
        now_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Keep an operator's action on a connection (or a pause's end).
    fn keep_action(&mut self, action: &BreakerAction) -> Result<(), StoreError>;

    /// The held deliveries of `which` (on a store of many writers, locked for
    /// this transaction; those another holds are left out).
    fn held(&mut self, which: HeldSet<'_>) -> Result<Vec<HeldRow>, StoreError>;

    /// Release held deliveries as read: each pending, due at `now_ms`, its time
    /// held counted by [`rules::hold::held_ms_after_release`], only if still as
    /// read. Returns how many were.
    fn release(&mut self, rows: &[HeldRow], now_ms: i64) -> Result<u64, StoreError>;

    /// The delivery `connection` has held longest (by hold, then id), with its
    /// subscriber.
    fn held_longest(&mut self, connection: &str) -> Result<Option<LongestHeld>, StoreError>;

    /// How many deliveries an outage of `connection` holds at `now_ms`: those
    /// held, and those due that its open breaker holds at their claim.
    fn held_by_outage(&mut self, connection: &str, now_ms: i64) -> Result<u64, StoreError>;

    /// Store events with their deliveries, due at `now_ms`; returns their ids.
    fn insert_events(&mut self, events: &[NewEvent], now_ms: i64) -> Result<Vec<i64>, StoreError>;

    /// Store replays, each a new event naming the one it replays, with its
    /// deliveries due at `now_ms`; returns their ids.
    fn insert_replays(&mut self, replays: &[Replay], now_ms: i64) -> Result<Vec<i64>, StoreError>;

    /// A delivery's state and attempts, if there is such a delivery.
    fn operator_row(&mut self, id: i64) -> Result<Option<OperatorRow>, StoreError>;

    /// Write an operator's retry of a delivery: `fresh`, its history kept, only
    /// if its state is still `seen`. Returns whether it was.
    fn retry_delivery(&mut self, id: i64, seen: DeliveryState, fresh: &Record) -> Result<bool, StoreError>;

    /// End a delivery as an operator's skip does (`ended`, end reason
    /// `skipped`, at `now_ms`), only if its state is still `seen`. Returns
    /// whether it was.
    fn skip_delivery(
        &mut self,
        id: i64,
        seen: DeliveryState,
        ended: DeliveryState,
        now_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Up to `limit` events stored without deliveries (written in SQL), oldest
    /// first (on a store of many writers, locked; those another holds are left
    /// out).
    fn unexpanded(&mut self, limit: usize) -> Result<Vec<UnexpandedEvent>, StoreError>;

    /// Mark each event expanded as `decided` (invalid, or with its deliveries
    /// due at `now_ms`), each only if it is not expanded yet, its deliveries
    /// written only then. Returns, in order, whether each was.
    fn write_expansions(
        &mut self,
        events: &[UnexpandedEvent],
        decided: &[Expansion],
        now_ms: i64,
    ) -> Result<Vec<bool>, StoreError>;
}

/// How a store deletes what retention names, inside one of its transactions
/// (a part of [`Rows`]).
pub trait PruneRows {
    /// Delete up to `plan.batch` deliveries `plan` names (final, older than its
    /// cut), oldest id first, each only if it still is (on a store of many
    /// writers, one another holds is left for a later batch). Returns those
    /// deleted.
    fn prune_deliveries(&mut self, plan: &PrunePlan) -> Result<Vec<PrunedDelivery>, StoreError>;

    /// Delete the attempts of the deliveries `deliveries`; returns how many.
    fn delete_attempts(&mut self, deliveries: &[i64]) -> Result<u64, StoreError>;

    /// Delete each event of `events` that has no delivery left; returns how many.
    fn delete_emptied_events(&mut self, events: &[i64]) -> Result<u64, StoreError>;
}

/// A store that runs [`Rows`] in transactions: the rules of [`Actions`] are
/// written over this alone.
pub trait Transact {
    /// Run `work` in one transaction and commit it if it returns `Ok`; a store
    /// that must run it again (a lock waited on, a connection replaced before
    /// it started) does, so `work` starts from nothing each time.
    fn transact(&self, work: &mut dyn FnMut(&mut dyn Rows) -> Result<(), StoreError>) -> Result<(), StoreError>;

    /// Whether any event waits to be expanded: a read outside a transaction
    /// that writes, so that a store with none (the usual case) costs its
    /// writers no lock.
    fn expansion_waiting(&self) -> Result<bool, StoreError>;
}

/// Run `work` in one transaction of `store` and return what it made.
fn within<T>(
    store: &(impl Transact + ?Sized),
    mut work: impl FnMut(&mut dyn Rows) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let mut out = None;
    store.transact(&mut |rows| {
        out = Some(work(rows)?);
        Ok(())
    })?;
    out.ok_or_else(|| StoreError::Corrupt("a transaction committed without its work".into()))
}

/// The store's actions, each written once over [`Rows`] for every store (a
/// store cannot have its own: every [`Transact`] store has exactly these).
pub trait Actions {
    /// Operator retry of each id at `now_ms` (the core decides the fresh record).
    fn retry(&self, ids: &[i64], now_ms: i64) -> Result<Vec<RetryResult>, StoreError>;

    /// Operator skip of each id at `now_ms` (the core decides which may end
    /// `skipped`): a pending, held, parked or orphaned delivery ends, and the
    /// later deliveries of its key go on.
    fn skip(&self, ids: &[i64], now_ms: i64) -> Result<Vec<SkipResult>, StoreError>;

    /// Pause `connection` (creating its breaker row, closed, if it has none) as
    /// `pause` says, and keep the action; returns the row written.
    fn pause_connection(&self, connection: &str, pause: &Pause) -> Result<BreakerRow, StoreError>;

    /// Resume `connection` at `now_ms`: its breaker closed, its pause ended, what
    /// it holds released due at once; the action kept with `by` and `reason`.
    fn resume_connection(
        &self,
        connection: &str,
        by: &str,
        reason: Option<&str>,
        now_ms: i64,
    ) -> Result<ResumeReport, StoreError>;

    /// Store replays in one transaction: each a new event, expanded, naming the
    /// event it replays, with its deliveries due at once. Returns the new ids.
    fn replay(&self, replays: &[Replay], now_ms: i64) -> Result<Vec<i64>, StoreError>;

    /// The tick's sweep of the breakers at `now_ms`: end the pauses whose time
    /// has come, release deliveries whose breaker has closed, raise each
    /// outage's alert once (storing `raise.connection_unavailable`'s events),
    /// and wake the delivery held longest to be the probe once a pause has
    /// passed (`lease_until` gives a subscriber's lease taken now).
    fn sweep_breakers(
        &self,
        now_ms: i64,
        lease_until: &dyn Fn(&str) -> i64,
        raise: &dyn Raise,
    ) -> Result<BreakerSweep, StoreError>;

    /// Expand up to `limit` events stored without deliveries (written in SQL),
    /// oldest first: `expand` (the program) says what each becomes; each event is
    /// marked expanded only if it is not so yet, and its deliveries (due at
    /// once) are written only then, so two processes never expand one event twice.
    fn expand_events(
        &self,
        now_ms: i64,
        limit: usize,
        expand: &mut dyn FnMut(&UnexpandedEvent) -> Expansion,
    ) -> Result<ExpandReport, StoreError>;

    /// Delete one batch of what `plan` names, in one transaction: each delivery
    /// only if it is still final and old, then the attempts and handled records
    /// of those deleted, then their events left with no delivery. Zero
    /// deliveries: nothing is left ([`crate::retention::prune`] loops until then).
    fn prune_batch(&self, plan: &PrunePlan) -> Result<PruneCounts, StoreError>;
}

impl<S: Transact + ?Sized> Actions for S {
    fn retry(&self, ids: &[i64], now_ms: i64) -> Result<Vec<RetryResult>, StoreError> {
        within(self, |rows| {
            let mut results = Vec::with_capacity(ids.len());
            for &id in ids {
                let Some(seen) = rows.operator_row(id)? else {
                    results.push(RetryResult::NotFound);
                    continue;
                };
                let subject = super::retry_subject(seen.state, seen.attempts, now_ms);
                let Some(fresh) = rules::operator_retry(&subject, now_ms) else {
                    results.push(RetryResult::NotRetryable(seen.state));
                    continue;
                };
                // The history keeps the earlier attempts: it is keyed by its own id.
                results.push(if rows.retry_delivery(id, seen.state, &fresh)? {
                    RetryResult::Retried
                } else {
                    RetryResult::NotRetryable(seen.state)
                });
            }
            Ok(results)
        })
    }

    fn skip(&self, ids: &[i64], now_ms: i64) -> Result<Vec<SkipResult>, StoreError> {
        within(self, |rows| {
            let mut results = Vec::with_capacity(ids.len());
            for &id in ids {
                let Some(seen) = rows.operator_row(id)? else {
                    results.push(SkipResult::NotFound);
                    continue;
                };
                let subject = super::retry_subject(seen.state, seen.attempts, now_ms);
                let Some(ended) = rules::operator_skip(&subject) else {
                    results.push(SkipResult::NotSkippable(seen.state));
                    continue;
                };
                results.push(if rows.skip_delivery(id, seen.state, ended.state, now_ms)? {
                    SkipResult::Skipped
                } else {
                    SkipResult::NotSkippable(seen.state)
                });
            }
            Ok(results)
        })
    }

    fn pause_connection(&self, connection: &str, pause: &Pause) -> Result<BreakerRow, StoreError> {
        within(self, |rows| {
            for _ in 0..CHANGE_TRIES {
                let seen = rows.breaker(connection)?;
                let next = breaker::pause(&seen.clone().unwrap_or_default(), pause.clone());
                if rows.write_breaker(connection, seen.as_ref(), &next, pause.at_ms)? {
                    rows.keep_action(&BreakerAction {
                        connection: connection.to_string(),
                        action: PauseAction::Pause,
                        at_ms: pause.at_ms,
                        by: pause.by.clone(),
                        reason: pause.reason.clone(),
                        until_ms: pause.until_ms,
                    })?;
                    return Ok(next);
                }
            }
            Err(contended(connection, "pause"))
        })
    }

    fn resume_connection(
        &self,
        connection: &str,
        by: &str,
        reason: Option<&str>,
        now_ms: i64,
    ) -> Result<ResumeReport, StoreError> {
        within(self, |rows| {
            for _ in 0..CHANGE_TRIES {
                let Some(seen) = rows.breaker(connection)? else {
                    return Ok(ResumeReport { was: None, released: 0 });
                };
                let next = breaker::resume(&seen);
                if rows.write_breaker(connection, Some(&seen), &next, now_ms)? {
                    let held = rows.held(HeldSet::Of { connection, one: None })?;
                    let released = rows.release(&held, now_ms)?;
                    rows.keep_action(&BreakerAction {
                        connection: connection.to_string(),
                        action: PauseAction::Resume,
                        at_ms: now_ms,
                        by: by.to_string(),
                        reason: reason.map(str::to_string),
                        until_ms: None,
                    })?;
                    return Ok(ResumeReport { was: Some(seen), released });
                }
            }
            Err(contended(connection, "resume"))
        })
    }

    fn replay(&self, replays: &[Replay], now_ms: i64) -> Result<Vec<i64>, StoreError> {
        within(self, |rows| rows.insert_replays(replays, now_ms))
    }

    fn sweep_breakers(
        &self,
        now_ms: i64,
        lease_until: &dyn Fn(&str) -> i64,
        raise: &dyn Raise,
    ) -> Result<BreakerSweep, StoreError> {
        within(self, |rows| sweep(rows, now_ms, lease_until, raise))
    }

    fn expand_events(
        &self,
        now_ms: i64,
        limit: usize,
        expand: &mut dyn FnMut(&UnexpandedEvent) -> Expansion,
    ) -> Result<ExpandReport, StoreError> {
        if !self.expansion_waiting()? {
            return Ok(ExpandReport::default());
        }
        within(self, |rows| {
            let events = rows.unexpanded(limit)?;
            if events.is_empty() {
                return Ok(ExpandReport::default());
            }
            let decided: Vec<Expansion> = events.iter().map(&mut *expand).collect();
            let marked = rows.write_expansions(&events, &decided, now_ms)?;
            let mut report = ExpandReport::default();
            for ((e, d), marked) in events.into_iter().zip(decided).zip(marked) {
                if !marked {
                    continue;
                }
                match d {
                    Expansion::Deliveries(deliveries) => {
                        report.expanded.push(Expanded { id: e.id, deliveries: deliveries.len() })
                    }
                    Expansion::Invalid { code, reason } => {
                        report.invalid.push(InvalidEvent { id: e.id, name: e.name, code, reason })
                    }
                }
            }
            Ok(report)
        })
    }

    fn prune_batch(&self, plan: &PrunePlan) -> Result<PruneCounts, StoreError> {
        within(self, |rows| prune_batch(rows, plan))
    }
}

/// [`Actions::prune_batch`] inside one transaction.
fn prune_batch(rows: &mut dyn Rows, plan: &PrunePlan) -> Result<PruneCounts, StoreError> {
    let gone = rows.prune_deliveries(plan)?;
    let mut counts = PruneCounts {
        deliveries: gone.len() as u64,
        handled: gone.iter().filter(|d| d.handled).count() as u64,
        ..PruneCounts::default()
    };
    if gone.is_empty() {
        return Ok(counts);
    }
    let ids: Vec<i64> = gone.iter().map(|d| d.id).collect();
    counts.attempts = rows.delete_attempts(&ids)?;
    let mut events: Vec<i64> = gone.iter().map(|d| d.event_id).collect();
    events.sort_unstable();
    events.dedup();
    counts.events = rows.delete_emptied_events(&events)?;
    Ok(counts)
}

/// The error of an operator's change of `connection`'s breaker that other
/// processes kept changing under it.
fn contended(connection: &str, what: &str) -> StoreError {
    StoreError::Contended { what: format!("the breaker of `{connection}` kept changing under its {what}") }
}

/// End every pause whose time has come at `now_ms`, each by one guarded write
/// (of processes sweeping at once, one ends it and keeps the action).
fn end_pauses(rows: &mut dyn Rows, now_ms: i64) -> Result<(), StoreError> {
    for view in rows.breakers(BreakerSet::Paused)? {
        if let Some(next) = breaker::pause_ended(&view.row, now_ms)
            && rows.write_breaker(&view.connection, Some(&view.row), &next, now_ms)?
        {
            rows.keep_action(&BreakerAction {
                connection: view.connection.clone(),
                action: PauseAction::Ended,
                at_ms: now_ms,
                by: view.row.pause.as_ref().map(|p| p.by.clone()).unwrap_or_default(),
                reason: None,
                until_ms: None,
            })?;
        }
    }
    Ok(())
}

/// The tick's sweep ([`Actions::sweep_breakers`]) inside one transaction.
fn sweep(
    rows: &mut dyn Rows,
    now_ms: i64,
    lease_until: &dyn Fn(&str) -> i64,
    raise: &dyn Raise,
) -> Result<BreakerSweep, StoreError> {
    end_pauses(rows, now_ms)?;
    let unheld = rows.held(HeldSet::Unheld)?;
    let released = rows.release(&unheld, now_ms)?;
    let mut sweep = BreakerSweep { released, ..BreakerSweep::default() };
    for view in rows.breakers(BreakerSet::Swept)? {
        let BreakerView { connection, mut row, held } = view;
        if breaker::alert_due(&row) {
            let raised = breaker::alert_raised(&row);
            if rows.write_breaker(&connection, Some(&row), &raised, now_ms)? {
                let alert = BreakerAlert {
                    connection: connection.clone(),
                    since_ms: row.opened_at_ms.unwrap_or(now_ms),
                    held: rows.held_by_outage(&connection, now_ms)?,
                };
                rows.insert_events(&raise.connection_unavailable(&alert), now_ms)?;
                sweep.alerts.push(alert);
                row = raised;
            }
        }
        if held == 0 {
            continue;
        }
        let Some(LongestHeld { id, subscriber }) = rows.held_longest(&connection)? else { continue };
        if let Some(next) = breaker::tick_wake(&row, now_ms, id, lease_until(&subscriber))
            && rows.write_breaker(&connection, Some(&row), &next, now_ms)?
        {
            let probe = rows.held(HeldSet::Of { connection: &connection, one: Some(id) })?;
            rows.release(&probe, now_ms)?;
            sweep.woken.push(id);
        }
    }
    Ok(sweep)
}
