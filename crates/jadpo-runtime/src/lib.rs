//! The jadpo outbox runtime.
//!
//! - [`core`]: the pure rules of a delivery's life (no IO, no clock, no global RNG).
//! - [`store`]: the [`store::Store`] trait and its SQLite implementation.
//! - [`clock`]: the [`clock::Clock`] trait and the system clock.
//! - [`drivers`]: the [`drivers::Driver`] trait and the fake driver.
//! - [`payload`]: validation of an event's JSON payload against its declaration.
//! - [`workers`]: the tokio workers and the tick that run deliveries.
//! - [`scenario`]: the virtual-time driver of the same runtime, for `jadpoc test`.

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
