//! One clock and wake-ups for every process sharing the database.
//!
//! The database's clock (`clock_timestamp()`) is the one clock of all processes,
//! whatever their hosts' clocks say. An insert into the events table notifies
//! (a trigger of the schema's, so an event inserted by any writer does) on the
//! channel `SCHEMA.events`; `listen` keeps one connection of its own listening
//! there and calls its waker on each notification.

use super::connect::PgLocation;
use super::{col, pg_error};
use jadpo_core::store::{StoreError, Waker};
use postgres::Client;
use postgres::fallible_iterator::FallibleIterator;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long the listening thread waits for a notification before it looks whether
/// the store was dropped or its connection lost.
const LISTEN_CHECK: Duration = Duration::from_millis(500);

/// The pauses between attempts to listen again on a lost connection.
const LISTEN_RETRY_FIRST: Duration = Duration::from_millis(100);
const LISTEN_RETRY_MAX: Duration = Duration::from_secs(2);

/// The channel an insert into `schema`'s events table notifies (the trigger names
/// it from its table's schema: `TG_TABLE_SCHEMA || '.events'`).
pub fn channel(schema: &str) -> String {
    format!("{schema}.events")
}

/// The database's clock now, in milliseconds since the Unix epoch.
pub(super) fn db_now_ms(c: &mut Client) -> Result<Option<i64>, StoreError> {
    let row = c
        .query_one("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms", &[])
        .map_err(pg_error)?;
    Ok(Some(col(&row, "now_ms")?))
}

/// Listen on the schema's channel on a thread of its own until `stop` is set,
/// calling `wake` for each notification, and after each (re)connection (an event
/// stored while not listening would otherwise wait for a poll).
pub(super) fn listen(location: PgLocation, stop: Arc<AtomicBool>, wake: Waker) -> Result<bool, StoreError> {
    let spawned = std::thread::Builder::new().name("jadpo-listen".into()).spawn(move || {
        let mut pause = LISTEN_RETRY_FIRST;
        while !stop.load(Ordering::Relaxed) {
            match listening(&location) {
                Ok(mut client) => {
                    pause = LISTEN_RETRY_FIRST;
                    wake();
                    relay(&mut client, &stop, &wake);
                }
                // Not logged: the claims' own store errors tell of a lost
                // database, once per try, and polling goes on meanwhile.
                Err(_) => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(LISTEN_RETRY_MAX);
                }
            }
        }
    });
    spawned.map(|_| true).map_err(|e| StoreError::Database {
        message: format!("cannot start the listening thread: {e}"),
        source: Some(Box::new(e)),
    })
}

fn listening(location: &PgLocation) -> Result<Client, StoreError> {
    let mut client = location.connect()?;
    let channel = channel(&location.schema);
    client.batch_execute(&format!("LISTEN \"{channel}\"")).map_err(pg_error)?;
    Ok(client)
}

/// Call `wake` for each notification until the connection is lost or `stop` set.
fn relay(client: &mut Client, stop: &AtomicBool, wake: &Waker) {
    while !stop.load(Ordering::Relaxed) {
        let next = client.notifications().timeout_iter(LISTEN_CHECK).next();
        match next {
            Ok(Some(_)) => {
                // Several events in a burst need one wake (`iter` does not wait).
                while let Ok(Some(_)) = client.notifications().iter().next() {}
                wake();
            }
            Ok(None) if client.is_closed() => return,
            Ok(None) => {}
            Err(_) => return,
        }
    }
}
