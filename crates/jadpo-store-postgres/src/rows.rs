//! The core's row operations ([`Rows`]) on PostgreSQL, inside one transaction:
//! the rules over them (an operator's retry, a pause, the tick's sweep,
//! expansion) are the core's. Rows read to be changed are locked
//! (`FOR UPDATE SKIP LOCKED`) where another process may change them at once.

use super::breakers::{self, read_breaker, read_breakers, write_breaker};
use super::builtin::{insert_events, insert_events_of};
use super::events::{unexpanded, write_expansions};
use super::outcomes::{operator_row, retry_one, skip_one};
use super::pauses::keep_action;
use super::retention;
use super::{PgStore, StoreError, pg_error};
use jadpo_check::program::DeliveryState;
use jadpo_core::rules::Record;
use jadpo_core::rules::breaker::BreakerRow;
use jadpo_core::store::rows::{BreakerSet, HeldRow, HeldSet, LongestHeld, OperatorRow, PrunedDelivery};
use jadpo_core::store::{
    BreakerAction, BreakerView, Expansion, NewEvent, PrunePlan, PruneRows, Replay, Rows, Transact, UnexpandedEvent,
};
use postgres::Transaction;

/// [`Rows`] in one transaction.
struct PgRows<'a, 't> {
    tx: &'a mut Transaction<'t>,
}

impl Rows for PgRows<'_, '_> {
    fn breaker(&mut self, connection: &str) -> Result<Option<BreakerRow>, StoreError> {
        read_breaker(self.tx, connection)
    }

    fn breakers(&mut self, which: BreakerSet) -> Result<Vec<BreakerView>, StoreError> {
        read_breakers(self.tx, Some(which))
    }

    fn write_breaker(
        &mut self,
        connection: &str,
        seen: Option<&BreakerRow>,
        next: &BreakerRow,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        write_breaker(self.tx, connection, seen, next, now_ms)
    }

    fn keep_action(&mut self, action: &BreakerAction) -> Result<(), StoreError> {
        keep_action(self.tx, action)
    }

    fn held(&mut self, which: HeldSet<'_>) -> Result<Vec<HeldRow>, StoreError> {
        breakers::held(self.tx, which)
    }

    fn release(&mut self, rows: &[HeldRow], now_ms: i64) -> Result<u64, StoreError> {
        breakers::release(self.tx, rows, now_ms)
    }

    fn held_longest(&mut self, connection: &str) -> Result<Option<LongestHeld>, StoreError> {
        breakers::held_longest(self.tx, connection)
    }

    fn held_by_outage(&mut self, connection: &str, now_ms: i64) -> Result<u64, StoreError> {
        breakers::held_by_outage(self.tx, connection, now_ms)
    }

    fn insert_events(&mut self, events: &[NewEvent], now_ms: i64) -> Result<Vec<i64>, StoreError> {
        insert_events(self.tx, events, now_ms)
    }

    fn insert_replays(&mut self, replays: &[Replay], now_ms: i64) -> Result<Vec<i64>, StoreError> {
        let events: Vec<(&NewEvent, Option<i64>)> = replays.iter().map(|r| (&r.event, Some(r.of))).collect();
        insert_events_of(self.tx, &events, now_ms)
    }

    fn operator_row(&mut self, id: i64) -> Result<Option<OperatorRow>, StoreError> {
        operator_row(self.tx, id)
    }

    fn retry_delivery(&mut self, id: i64, seen: DeliveryState, fresh: &Record) -> Result<bool, StoreError> {
        retry_one(self.tx, id, seen, fresh)
    }

    fn skip_delivery(
        &mut self,
        id: i64,
        seen: DeliveryState,
        ended: DeliveryState,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        skip_one(self.tx, id, seen, ended, now_ms)
    }

    fn unexpanded(&mut self, limit: usize) -> Result<Vec<UnexpandedEvent>, StoreError> {
        unexpanded(self.tx, limit)
    }

    fn write_expansions(
        &mut self,
        events: &[UnexpandedEvent],
        decided: &[Expansion],
        now_ms: i64,
    ) -> Result<Vec<bool>, StoreError> {
        write_expansions(self.tx, events, decided, now_ms)
    }
}

impl PruneRows for PgRows<'_, '_> {
    fn prune_deliveries(&mut self, plan: &PrunePlan) -> Result<Vec<PrunedDelivery>, StoreError> {
        retention::prune_deliveries(self.tx, plan)
    }

    fn delete_attempts(&mut self, deliveries: &[i64]) -> Result<u64, StoreError> {
        retention::delete_attempts(self.tx, deliveries)
    }

    fn delete_emptied_events(&mut self, events: &[i64]) -> Result<u64, StoreError> {
        retention::delete_emptied_events(self.tx, events)
    }
}

impl Transact for PgStore {
    fn transact(&self, work: &mut dyn FnMut(&mut dyn Rows) -> Result<(), StoreError>) -> Result<(), StoreError> {
        self.with_client(|c| {
            let mut tx = c.transaction().map_err(pg_error)?;
            work(&mut PgRows { tx: &mut tx })?;
            tx.commit().map_err(pg_error)
        })
    }

    fn expansion_waiting(&self) -> Result<bool, StoreError> {
        self.with_client(super::events::expansion_waiting)
    }
}
