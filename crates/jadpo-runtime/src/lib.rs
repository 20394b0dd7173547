//! The jadpo outbox runtime.
//!
//! - [`core`]: the pure rules of a delivery's life and of the circuit breakers (no
//!   IO, no clock, no global RNG).
//! - [`store`]: the [`store::Store`] trait and its SQLite implementation.
//! - [`clock`]: the [`clock::Clock`] trait, the system clock and the virtual clock.
//! - [`drivers`]: the [`drivers::Driver`] trait and the fake driver.
//! - [`http`]: the HTTP driver.
//! - [`payload`]: validation of an event's JSON payload against its declaration.
//! - [`ingest`]: the `--listen` HTTP ingest of events.
//! - [`workers`]: the [`workers::Runtime`]'s steps, and the tokio workers and tick
//!   that run them.
//! - [`scenario`]: the virtual-time driver of the same runtime, for `jadpoc test`.
//! - [`views`]: what `deliveries`, `status` and `breakers` print.
//! - [`log`]: the run's log lines, as text or JSON.

pub mod clock;
pub mod core;
pub mod drivers;
pub mod http;
pub mod ingest;
pub mod log;
pub mod payload;
pub mod scenario;
pub mod store;
pub mod views;
pub mod workers;
