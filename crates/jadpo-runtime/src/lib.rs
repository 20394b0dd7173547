//! The jadpo outbox's live driver and its store's opening:
//!
//! - [`live`]: `jadpoc run`'s state machine (claims, records, the tick) and
//!   the async shell that performs what it decides, over the core's steps.
//! - [`store`]: opening a store from where it is (a path is SQLite, a
//!   `postgres://` URL PostgreSQL).
//! - [`scenario`]: `jadpoc test`'s runs, the core's virtual-time driver on an
//!   in-memory SQLite store.

pub mod live;
pub mod scenario;
pub mod store;
