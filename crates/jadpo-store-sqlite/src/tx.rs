//! The store's transactions, begun and ended by statements the connection keeps
//! prepared.
//!
//! rusqlite's `Transaction` runs `BEGIN` and `COMMIT` as text, parsed again
//! each time: in `jadpoc test`, whose store is in memory and whose
//! transactions are a few statements each, those two parses were an eighth
//! of a test's instructions. A [`Tx`] behaves as one (rolled back when it is
//! dropped uncommitted) and reads as the connection it holds.

use super::Error;
use rusqlite::Connection;

/// A transaction on a connection: committed by [`Tx::commit`], rolled back if
/// dropped before.
pub(crate) struct Tx<'c> {
    conn: &'c Connection,
    open: bool,
}

impl<'c> Tx<'c> {
    /// A write transaction (`BEGIN IMMEDIATE`): the write lock is taken at once,
    /// so that what it reads stays as read until it commits.
    pub(crate) fn immediate(conn: &'c mut Connection) -> Result<Tx<'c>, Error> {
        Tx::begin(conn, "BEGIN IMMEDIATE")
    }

    /// A read transaction (`BEGIN`): what it reads is of one moment.
    pub(crate) fn deferred(conn: &'c mut Connection) -> Result<Tx<'c>, Error> {
        Tx::begin(conn, "BEGIN")
    }

    fn begin(conn: &'c Connection, sql: &'static str) -> Result<Tx<'c>, Error> {
        conn.prepare_cached(sql)?.execute([])?;
        Ok(Tx { conn, open: true })
    }

    /// Commit; on an error the transaction is rolled back when dropped.
    pub(crate) fn commit(mut self) -> Result<(), Error> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        self.open = false;
        Ok(())
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        // SQLite may have ended the transaction itself (a full disk rolls it
        // back); then there is nothing to roll back.
        if self.open && !self.conn.is_autocommit() {
            // A rollback that fails leaves the connection in the transaction;
            // the next `BEGIN` then fails and the error reaches the caller.
            let _ = self.conn.prepare_cached("ROLLBACK").and_then(|mut s| s.execute([]));
        }
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}
