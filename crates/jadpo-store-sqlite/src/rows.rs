//! The core's row operations ([`Rows`]) on SQLite, inside one `BEGIN IMMEDIATE`
//! transaction: the rules over them (an operator's retry, a pause, the tick's
//! sweep, expansion) are the core's.

use super::breakers::{self, read_breaker, read_breakers, write_breaker};
use super::builtin::insert_events;
use super::events::{insert_deliveries, mark_expanded};
use super::outcomes::{retry_one, skip_one, state_and_attempts};
use super::pauses::keep_action;
use super::retention;
use super::tx::Tx;
use super::{Error, SqliteStore, StoreError};
use jadpo_check::program::DeliveryState;
use jadpo_core::rules::Record;
use jadpo_core::rules::breaker::BreakerRow;
use jadpo_core::store::rows::{BreakerSet, HeldRow, HeldSet, LongestHeld, OperatorRow, PrunedDelivery};
use jadpo_core::store::{
    BreakerAction, BreakerView, Expansion, NewEvent, PrunePlan, PruneRows, Replay, Rows, Transact, UnexpandedEvent,
};
use rusqlite::params;

/// [`Rows`] in one transaction. SQLite's own error met inside is kept whole, so
/// that the store tells a lock, a full disk and a read-only file apart (and
/// runs the transaction again on a lock) as for any other of its writes.
struct SqliteRows<'t> {
    tx: &'t Tx<'t>,
    failed: Option<Error>,
}

impl SqliteRows<'_> {
    /// `result`'s value, or its error kept for the transaction's end.
    fn kept<T>(&mut self, result: Result<T, Error>) -> Result<T, StoreError> {
        result.map_err(|e| match e {
            Error::Store(e) => e,
            Error::Sqlite(e) => {
                // Kept whole below; the caller sees the kept error, not this one.
                let shown = StoreError::Database { message: e.to_string(), source: None };
                self.failed.get_or_insert(Error::Sqlite(e));
                shown
            }
        })
    }
}

impl Rows for SqliteRows<'_> {
    fn breaker(&mut self, connection: &str) -> Result<Option<BreakerRow>, StoreError> {
        let found = read_breaker(self.tx, connection);
        self.kept(found)
    }

    fn breakers(&mut self, which: BreakerSet) -> Result<Vec<BreakerView>, StoreError> {
        let filter = match which {
            BreakerSet::Paused => breakers::PAUSED,
            BreakerSet::Swept => breakers::SWEPT,
        };
        let found = read_breakers(self.tx, filter);
        self.kept(found)
    }

    fn write_breaker(
        &mut self,
        connection: &str,
        seen: Option<&BreakerRow>,
        next: &BreakerRow,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let written = write_breaker(self.tx, connection, seen, next, now_ms);
        self.kept(written)
    }

    fn keep_action(&mut self, action: &BreakerAction) -> Result<(), StoreError> {
        let kept = keep_action(self.tx, action);
        self.kept(kept)
    }

    fn held(&mut self, which: HeldSet<'_>) -> Result<Vec<HeldRow>, StoreError> {
        let found = breakers::held(self.tx, which);
        self.kept(found)
    }

    fn release(&mut self, rows: &[HeldRow], now_ms: i64) -> Result<u64, StoreError> {
        let released = breakers::release(self.tx, rows, now_ms);
        self.kept(released)
    }

    fn held_longest(&mut self, connection: &str) -> Result<Option<LongestHeld>, StoreError> {
        let found = breakers::held_longest(self.tx, connection);
        self.kept(found)
    }

    fn held_by_outage(&mut self, connection: &str, now_ms: i64) -> Result<u64, StoreError> {
        let n = breakers::held_by_outage(self.tx, connection, now_ms);
        self.kept(n)
    }

    fn insert_events(&mut self, events: &[NewEvent], now_ms: i64) -> Result<Vec<i64>, StoreError> {
        let ids = insert_events(self.tx, events, now_ms);
        self.kept(ids)
    }

    fn insert_replays(&mut self, replays: &[Replay], now_ms: i64) -> Result<Vec<i64>, StoreError> {
        let ids = insert_replays(self.tx, replays, now_ms);
        self.kept(ids)
    }

    fn operator_row(&mut self, id: i64) -> Result<Option<OperatorRow>, StoreError> {
        let found = state_and_attempts(self.tx, id);
        self.kept(found)
    }

    fn retry_delivery(&mut self, id: i64, seen: DeliveryState, fresh: &Record) -> Result<bool, StoreError> {
        let retried = retry_one(self.tx, id, seen, fresh);
        self.kept(retried)
    }

    fn skip_delivery(
        &mut self,
        id: i64,
        seen: DeliveryState,
        ended: DeliveryState,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let skipped = skip_one(self.tx, id, seen, ended, now_ms);
        self.kept(skipped)
    }

    fn unexpanded(&mut self, limit: usize) -> Result<Vec<UnexpandedEvent>, StoreError> {
        let found = unexpanded(self.tx, limit);
        self.kept(found)
    }

    fn write_expansions(
        &mut self,
        events: &[UnexpandedEvent],
        decided: &[Expansion],
        now_ms: i64,
    ) -> Result<Vec<bool>, StoreError> {
        let marked = write_expansions(self.tx, events, decided, now_ms);
        self.kept(marked)
    }
}

fn insert_replays(tx: &Tx<'_>, replays: &[Replay], now_ms: i64) -> Result<Vec<i64>, Error> {
    let mut ids = Vec::with_capacity(replays.len());
    for r in replays {
        tx.prepare_cached(
            "INSERT INTO jadpo_events (name, payload, emitted_at, replay_of, version) \
             VALUES (?1, ?2, ?3, ?4, (SELECT version FROM temp.jadpo_writer))",
        )?
        .execute(params![r.event.name, r.event.payload, now_ms, r.of])?;
        let id = tx.last_insert_rowid();
        insert_deliveries(tx, id, &r.event.deliveries, now_ms)?;
        ids.push(id);
    }
    Ok(ids)
}

fn unexpanded(tx: &Tx<'_>, limit: usize) -> Result<Vec<UnexpandedEvent>, Error> {
    let mut stmt =
        tx.prepare_cached("SELECT id, name, payload FROM jadpo_events WHERE expanded = 0 ORDER BY id LIMIT ?1")?;
    let rows = stmt.query_map([i64::try_from(limit).unwrap_or(i64::MAX)], |r| {
        Ok(UnexpandedEvent { id: r.get(0)?, name: r.get(1)?, payload: r.get(2)? })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn write_expansions(
    tx: &Tx<'_>,
    events: &[UnexpandedEvent],
    decided: &[Expansion],
    now_ms: i64,
) -> Result<Vec<bool>, Error> {
    let mut marked = Vec::with_capacity(events.len());
    for (e, decided) in events.iter().zip(decided) {
        let (code, reason) = match decided {
            Expansion::Deliveries(_) => (None, None),
            Expansion::Invalid { code, reason } => (Some(code.as_str()), Some(reason.as_str())),
        };
        let mark = mark_expanded(tx, e.id, code, reason)?;
        if mark && let Expansion::Deliveries(deliveries) = decided {
            insert_deliveries(tx, e.id, deliveries, now_ms)?;
        }
        marked.push(mark);
    }
    Ok(marked)
}

impl PruneRows for SqliteRows<'_> {
    fn prune_deliveries(&mut self, plan: &PrunePlan) -> Result<Vec<PrunedDelivery>, StoreError> {
        let gone = retention::prune_deliveries(self.tx, plan);
        self.kept(gone)
    }

    fn delete_attempts(&mut self, deliveries: &[i64]) -> Result<u64, StoreError> {
        let n = retention::delete_attempts(self.tx, deliveries);
        self.kept(n)
    }

    fn delete_emptied_events(&mut self, events: &[i64]) -> Result<u64, StoreError> {
        let n = retention::delete_emptied_events(self.tx, events);
        self.kept(n)
    }
}

impl Transact for SqliteStore {
    fn transact(&self, work: &mut dyn FnMut(&mut dyn Rows) -> Result<(), StoreError>) -> Result<(), StoreError> {
        self.with_retry(|conn| {
            let tx = Tx::immediate(conn)?;
            let mut rows = SqliteRows { tx: &tx, failed: None };
            if let Err(e) = work(&mut rows) {
                return Err(rows.failed.take().unwrap_or(Error::Store(e)));
            }
            tx.commit()
        })
    }

    fn expansion_waiting(&self) -> Result<bool, StoreError> {
        self.with_retry(|conn| {
            Ok(conn
                .prepare_cached("SELECT EXISTS (SELECT 1 FROM jadpo_events WHERE expanded = 0)")?
                .query_row([], |r| r.get(0))?)
        })
    }
}
