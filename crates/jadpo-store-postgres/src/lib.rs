//! The PostgreSQL store: the same trait, rules and guards as the SQLite store, for
//! any number of `jadpoc run` processes on any number of hosts.
//!
//! Nothing serializes writers here (`READ COMMITTED`): a claim locks the rows it
//! takes (`FOR UPDATE SKIP LOCKED`), and every other change is one statement
//! guarded by the values it was decided from, as on SQLite. A breaker count that
//! loses its race is read again and counted again, so no outcome goes uncounted.
//!
//! The trait is synchronous and called from blocking threads; the `postgres`
//! crate is tokio-postgres behind a synchronous facade. Connections are kept in a
//! small pool; one found broken is replaced, with growing pauses, before an
//! operation starts (an operation cut off half-way fails whole: its transaction is
//! rolled back by the server, and the runtime's leases bring its deliveries back).
//!
//! Every statement is written in the source, whatever the store's schema, and
//! names the store's tables unqualified (`deliveries`, `events`): each
//! connection the store opens sets its search path to the store's schema once,
//! as it connects ([`connect::PgLocation::connect`]). Only the migrations name
//! the schema ([`schema`] says why).
//!
//! By job: `connect` (URL, TLS, the password never shown), `schema`
//! (migrations under an advisory lock), `claims`, `outcomes`, `breakers`,
//! `reads`, `schedules`, `events` (SQL-written events' expansion, listings,
//! replays).

mod breakers;
mod builtin;
mod claims;
pub mod connect;
mod console;
mod events;
mod outcomes;
mod pauses;
mod reads;
mod retention;
mod rows;
mod schedules;
pub mod schema;
pub mod sharing;
mod unnest;
mod versions;

use connect::PgLocation;
use jadpo_core::rules::Failure;
use jadpo_core::store::columns::{RowOf, count_of, failure_of, state_of};
use jadpo_core::store::{
    Access, AttemptRate, BreakerAction, BreakerView, ClaimCandidate, ClaimReport, ClaimVerdict, ClaimedSchedule,
    DeliveryDetail, DeliveryFilter, DeliveryView, EventCounts, EventDetail, EventFilter, EventView, NewEvent,
    OpenOptions, PruneCounts, PrunePlan, Raise, Recorded, ScheduleSpec, StatusView, Store, StoreError, Views,
};
use jadpo_core::version::{BacklogRow, OrphanRow, ProcessRow, ProgramVersion, VersionView};
use postgres::Client;
use postgres::error::SqlState;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a pooled connection may sit idle before it is checked (a round trip)
/// before use.
const CHECK_AFTER_IDLE: Duration = Duration::from_secs(1);

/// Connections kept open for reuse; more are opened when more threads need one.
const POOL_KEEP: usize = 8;

/// How long a broken connection is replaced with growing pauses before an
/// operation fails (the runtime then tries again at its next step).
const RECONNECT_FOR: Duration = Duration::from_secs(30);

/// A store in one schema of a PostgreSQL database.
pub struct PgStore {
    location: PgLocation,
    /// Idle connections, each with its prepared statements and when it was last
    /// put back.
    pool: Mutex<Vec<(Client, Prepared, Instant)>>,
    /// How long an unreachable server is tried again before an operation fails.
    reconnect_for: Duration,
    /// Set when the store is dropped, to end its listening thread.
    stop_listening: Arc<AtomicBool>,
    /// The schema's version: [`schema::VERSION`] once migrated; older only on a
    /// handle that only reads.
    schema_version: i64,
    /// The version of the program this handle stores its events with, set on
    /// each connection before it is used (see [`Prepared`]).
    writer: Mutex<Option<String>>,
    /// Where this process's next claim reads from; held while a claim reads, so
    /// that the process's claims read one after another and never step over each
    /// other's locked rows.
    claims: Mutex<claims::ClaimCursor>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("location", &self.location).finish()
    }
}

/// A database error as a value; its text never holds the URL's password (the
/// driver's messages do not carry the connection's settings).
pub(crate) fn pg_error(e: postgres::Error) -> StoreError {
    if e.is_closed() {
        return StoreError::ConnectionLost { message: e.to_string() };
    }
    let Some(db) = e.as_db_error() else {
        return StoreError::Database { message: e.to_string(), source: Some(Box::new(e)) };
    };
    let (code, message) = (db.code().clone(), db.message().to_string());
    db_error(&code, &message, e)
}

/// The error for the server's answer `message` with SQLSTATE `code`. A full disk
/// and a database that can only be read (a standby, or
/// `default_transaction_read_only`) are the errors SQLite's store gives for its
/// file, with the same words; they name their store once it is known
/// ([`PgStore::named`], at the store's edge), as the statements that meet them do
/// not know it. `source` is the driver's error the answer came in.
fn db_error(code: &SqlState, message: &str, source: postgres::Error) -> StoreError {
    if *code == SqlState::DISK_FULL {
        StoreError::Full { path: String::new() }
    } else if *code == SqlState::READ_ONLY_SQL_TRANSACTION {
        StoreError::ReadOnly { path: String::new() }
    } else {
        StoreError::Database { message: format!("{}: {message}", code.code()), source: Some(Box::new(source)) }
    }
}

impl PgStore {
    /// Open the store at `url` (`PGPASSWORD` gives a password the URL lacks):
    /// read-write applies the migrations the schema lacks; read-only only checks
    /// the schema is there and not newer than this build.
    pub fn open(url: &str, options: OpenOptions) -> Result<PgStore, StoreError> {
        let location = PgLocation::parse(url, std::env::var("PGPASSWORD").ok())?;
        let mut store = PgStore {
            schema_version: schema::VERSION,
            writer: Mutex::new(None),
            location,
            pool: Mutex::new(Vec::new()),
            reconnect_for: options.lock_wait.min(RECONNECT_FOR),
            stop_listening: Arc::new(AtomicBool::new(false)),
            claims: Mutex::new(claims::ClaimCursor::default()),
        };
        let mut client = store.fresh_client()?;
        let (schema, shown) = (&store.location.schema, &store.location.shown);
        let version = match options.access {
            Access::ReadWrite => schema::migrate(&mut client, schema, shown),
            Access::ReadOnly => schema::check(&mut client, schema, shown),
        }
        .map_err(|e| store.named(e))?;
        store.schema_version = version;
        store.put(client, Prepared::default());
        Ok(store)
    }

    /// `e` with this store named where [`db_error`] could not name it.
    fn named(&self, e: StoreError) -> StoreError {
        let path = self.location.shown.clone();
        match e {
            StoreError::Full { path: p } if p.is_empty() => StoreError::Full { path },
            StoreError::ReadOnly { path: p } if p.is_empty() => StoreError::ReadOnly { path },
            e => e,
        }
    }

    /// The URL as it may be shown (no password).
    pub fn shown(&self) -> &str {
        &self.location.shown
    }

    /// A new connection, retried with growing pauses while the server is
    /// unreachable (restarting, or the network down), for up to [`RECONNECT_FOR`]
    /// (or the store's lock wait, if shorter).
    fn fresh_client(&self) -> Result<Client, StoreError> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(50);
        loop {
            match self.location.connect() {
                Ok(c) => return Ok(c),
                Err(StoreError::Unreachable { .. }) if start.elapsed() + pause < self.reconnect_for => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// A pooled connection (the one put back last) with its prepared statements
    /// and how long it has been idle, or a fresh one.
    fn take(&self) -> Result<(Client, Prepared, Duration), StoreError> {
        let pooled = self.pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match pooled {
            Some((c, p, at)) if !c.is_closed() => Ok((c, p, at.elapsed())),
            _ => Ok((self.fresh_client()?, Prepared::default(), Duration::ZERO)),
        }
    }

    fn put(&self, client: Client, prepared: Prepared) {
        if client.is_closed() {
            return;
        }
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < POOL_KEEP {
            pool.push((client, prepared, Instant::now()));
        }
    }

    /// Run `f` on a pooled connection. A connection that broke before the
    /// operation could start is replaced and the operation run on the new one.
    fn with_client<T>(&self, mut f: impl FnMut(&mut Client) -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.with_prepared(|c, _| f(c))
    }

    /// [`PgStore::with_client`], with the connection's prepared statements.
    fn with_prepared<T>(
        &self,
        mut f: impl FnMut(&mut Client, &mut Prepared) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let (mut client, mut prepared, idle) = self.take()?;
        // A check that a connection idle for a while still answers, so a server
        // restart since it was used costs a reconnect, not a failed operation. A
        // busy store's connections are never idle that long and skip the round
        // trip; one the server closed is found closed without it.
        if idle >= CHECK_AFTER_IDLE && client.is_valid(Duration::from_secs(5)).is_err() {
            client = self.fresh_client()?;
            prepared = Prepared::default();
        }
        // The connection names the version its events are stored with: set
        // again only when it changed (a copy is made then alone).
        let changed = {
            let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            (prepared.1 != *writer).then(|| writer.clone())
        };
        if let Some(writer) = changed {
            versions::set_writer(&mut client, writer.as_deref().unwrap_or_default()).map_err(|e| self.named(e))?;
            prepared.1 = writer;
        }
        let out = f(&mut client, &mut prepared);
        self.put(client, prepared);
        out.map_err(|e| self.named(e))
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.stop_listening.store(true, Ordering::Relaxed);
        // Closing a connection blocks on the driver's own runtime, which must not
        // happen on a thread driving async tasks (the store may be dropped at the
        // end of `jadpoc run`'s async main): close them on a thread of their own.
        let clients = std::mem::take(&mut *self.pool.lock().unwrap_or_else(|e| e.into_inner()));
        if !clients.is_empty() {
            let _ = std::thread::spawn(move || drop(clients)).join();
        }
    }
}

/// The statements one connection has prepared, by their text: the claims' and
/// outcomes' statements, run hundreds of times a second, are parsed once per
/// connection and planned once (a generic plan, see [`BULK_PLAN`]), not at every
/// batch. A statement written in the source is kept by its `&'static str` (no
/// copy of its text is made); one built at run time (its rows passed as
/// arrays, see [`unnest::Columns`]) by its text, copied once per connection.
#[derive(Default)]
pub(crate) struct Prepared(HashMap<Cow<'static, str>, postgres::Statement>, Option<String>);

impl Prepared {
    /// `sql` prepared on the transaction's connection, once.
    pub(crate) fn get(
        &mut self,
        tx: &mut postgres::Transaction<'_>,
        sql: impl Into<Cow<'static, str>>,
    ) -> Result<postgres::Statement, StoreError> {
        let sql = sql.into();
        if let Some(statement) = self.0.get(sql.as_ref()) {
            return Ok(statement.clone());
        }
        let statement = tx.prepare(&sql).map_err(pg_error)?;
        self.0.insert(sql, statement.clone());
        Ok(statement)
    }
}

/// A column read by name, as a value (a missing or mistyped column is an error,
/// never a panic).
fn col<'a, T: postgres::types::FromSql<'a>>(row: &'a postgres::Row, name: &str) -> Result<T, StoreError> {
    row.try_get(name).map_err(pg_error)
}

/// The planner's settings for a claim's or a batch's transaction: walk the
/// partial indexes in due order and reach rows by primary key, whatever the
/// table's statistics say. A queue's statistics are nearly always wrong (a table
/// filled in seconds, or a server with no autovacuum, has none), and a plan that
/// sorts or scans the whole table turns a claim of 256 rows into a read of all of
/// them. No path is forbidden: the others only cost more. The plan of a prepared
/// statement is made once, for any parameters ([`Prepared`]): the paths above do
/// not depend on them.
const BULK_PLAN: &str = "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; \
     SET LOCAL enable_sort = off; SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off; \
     SET LOCAL enable_material = off; \
     SET LOCAL jit = off; SET LOCAL plan_cache_mode = force_generic_plan";

/// A transaction for a bulk claim or write, planned as [`BULK_PLAN`] says.
fn bulk_transaction(client: &mut Client) -> Result<postgres::Transaction<'_>, StoreError> {
    let mut tx = client.transaction().map_err(pg_error)?;
    tx.batch_execute(BULK_PLAN).map_err(pg_error)?;
    Ok(tx)
}

impl Views for PgStore {
    fn latest_version(&self) -> Result<Option<ProgramVersion>, StoreError> {
        if self.schema_version < schema::VERSION_WITH_VERSIONS {
            return Ok(None);
        }
        self.with_client(versions::latest)
    }

    fn versions(&self, live_since_ms: i64) -> Result<Vec<VersionView>, StoreError> {
        if self.schema_version < schema::VERSION_WITH_VERSIONS {
            return Ok(Vec::new());
        }
        self.with_client(|c| versions::versions(c, live_since_ms))
    }

    fn backlog(&self) -> Result<Vec<BacklogRow>, StoreError> {
        self.with_client(versions::backlog)
    }

    fn past_budget(&self, subscriber: &str, attempts: u32, window_cut_ms: i64) -> Result<u64, StoreError> {
        self.with_client(|c| versions::past_budget(c, subscriber, attempts, window_cut_ms))
    }

    fn deliveries(&self, filter: &DeliveryFilter) -> Result<Vec<DeliveryView>, StoreError> {
        self.with_client(|c| console::deliveries(c, filter))
    }

    fn delivery(&self, id: i64) -> Result<Option<DeliveryDetail>, StoreError> {
        let found = self.with_client(|c| reads::delivery(c, id))?;
        Ok(found.map(|(delivery, attempts)| DeliveryDetail { delivery, attempts }))
    }

    fn status(&self, now_ms: i64) -> Result<StatusView, StoreError> {
        self.with_client(|c| reads::status(c, now_ms))
    }

    fn breakers(&self) -> Result<Vec<BreakerView>, StoreError> {
        self.with_client(|c| breakers::read_breakers(c, None))
    }

    fn knows_connection(&self, connection: &str) -> Result<bool, StoreError> {
        self.with_client(|c| pauses::knows_connection(c, connection))
    }

    fn breaker_history(&self, connection: Option<&str>) -> Result<Vec<BreakerAction>, StoreError> {
        self.with_client(|c| pauses::history(c, connection))
    }

    fn prune_preview(&self, plan: &PrunePlan) -> Result<PruneCounts, StoreError> {
        self.with_client(|c| retention::prune_preview(c, plan))
    }

    fn events(&self, filter: &EventFilter) -> Result<Vec<EventView>, StoreError> {
        let schema = self.schema_version;
        self.with_client(|c| events::list(c, filter, schema))
    }

    fn event(&self, id: i64) -> Result<Option<EventDetail>, StoreError> {
        let schema = self.schema_version;
        let found = self.with_client(|c| events::one(c, id, schema))?;
        Ok(found.map(|(event, deliveries)| EventDetail { event, deliveries }))
    }

    fn event_counts(&self) -> Result<EventCounts, StoreError> {
        self.with_client(events::counts)
    }

    fn attempt_rates(&self, since_ms: i64) -> Result<Vec<AttemptRate>, StoreError> {
        self.with_client(|c| console::attempt_rates(c, since_ms))
    }
    fn db_now_ms(&self) -> Result<Option<i64>, StoreError> {
        self.with_client(sharing::db_now_ms)
    }
}

impl Store for PgStore {
    fn record_version(&self, version: &ProgramVersion, now_ms: i64, run: bool) -> Result<i64, StoreError> {
        let id = self.with_client(|c| versions::record(c, version, now_ms, run))?;
        *self.writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(id.to_string());
        Ok(id)
    }

    fn heartbeat(&self, process: &ProcessRow, now_ms: i64, live_since_ms: i64) -> Result<Vec<String>, StoreError> {
        self.with_client(|c| versions::heartbeat(c, process, now_ms, live_since_ms))
    }

    fn process_stopped(&self, id: &str) -> Result<(), StoreError> {
        self.with_client(|c| versions::stopped(c, id))
    }

    fn orphans(&self, subscribers: &[String], limit: usize) -> Result<Vec<OrphanRow>, StoreError> {
        self.with_client(|c| versions::orphans(c, subscribers, limit))
    }

    fn adopt(&self, rows: &[OrphanRow], now_ms: i64) -> Result<usize, StoreError> {
        self.with_client(|c| versions::adopt(c, rows, now_ms))
    }

    fn emit(&self, events: &[NewEvent], now_ms: i64) -> Result<Vec<i64>, StoreError> {
        self.with_client(|c| outcomes::emit(c, events, now_ms))
    }

    fn next_due_ms(&self) -> Result<Option<i64>, StoreError> {
        self.with_client(reads::next_due_ms)
    }

    fn sync_schedules(&self, schedules: &[ScheduleSpec], now_ms: i64) -> Result<(), StoreError> {
        self.with_client(|c| schedules::sync(c, schedules, now_ms))
    }

    fn claim_schedules(&self, schedules: &[ScheduleSpec], now_ms: i64) -> Result<Vec<ClaimedSchedule>, StoreError> {
        self.with_client(|c| schedules::claim(c, schedules, now_ms))
    }

    fn record_schedule(
        &self,
        name: &str,
        run: u64,
        ended_at_ms: i64,
        failure: Option<&Failure>,
    ) -> Result<bool, StoreError> {
        self.with_client(|c| schedules::record(c, name, run, ended_at_ms, failure))
    }

    fn next_schedule_due_ms(&self) -> Result<Option<i64>, StoreError> {
        self.with_client(schedules::next_due_ms)
    }

    fn next_sweep_ms(&self, now_ms: i64) -> Result<Option<i64>, StoreError> {
        self.with_client(|c| reads::next_sweep_ms(c, now_ms))
    }

    fn listen(&self, wake: jadpo_core::store::Waker) -> Result<bool, StoreError> {
        sharing::listen(self.location.clone(), self.stop_listening.clone(), wake)
    }

    fn claim(
        &self,
        now_ms: i64,
        limit: usize,
        decide: &mut dyn FnMut(&ClaimCandidate) -> ClaimVerdict,
        raise: &dyn Raise,
    ) -> Result<ClaimReport, StoreError> {
        self.with_prepared(|c, p| claims::claim(c, p, &self.claims, now_ms, limit, decide, raise))
    }

    fn record(
        &self,
        outcomes: &[Recorded],
        raised: &[Vec<NewEvent>],
        raise: &dyn Raise,
    ) -> Result<Vec<usize>, StoreError> {
        if outcomes.is_empty() {
            return Ok(Vec::new());
        }
        self.with_prepared(|c, p| outcomes::record(c, p, outcomes, raised, raise))
    }
}

#[cfg(test)]
mod tests;
