//! The jadpo runtime's core: everything a run decides and does, with no async
//! runtime, no SQL and no HTTP. The stores (`jadpo-store-sqlite`,
//! `jadpo-store-postgres`), the HTTP side (`jadpo-http`) and the live driver
//! (`jadpo-runtime`) are built on it; `jadpoc test` runs on it alone.
//!
//! - [`rules`]: the pure rules of a delivery's life and of the circuit breakers (no
//!   IO, no clock, no global RNG), and [`claim`]: a claim's decisions from the rows
//!   a store read, which both stores apply.
//! - [`steps`]: the [`steps::Runtime`] and its steps (claim, prepare a call,
//!   conclude, record, tick), shared by both drivers of time, reporting to a
//!   [`steps::Observer`] (the live driver's wake-ups, the metrics).
//! - [`scenario`]: the virtual-time driver of `jadpoc test`.
//! - [`store`]: the [`store::Store`] trait, its typed rows, and its errors
//!   ([`store::StoreError`]), which each store maps its driver's errors into.
//! - [`drivers`]: the [`drivers::Driver`] trait and the fake driver.
//! - [`clock`]: the [`clock::Clock`] trait, the host's clock, the store's clock and
//!   the virtual clock.
//! - [`rng`]: the run's one seeded, portable random source.
//! - [`builtin`]: jadpo's own events (`jadpo.delivery_failed`, ...) as the runtime
//!   raises them, with the loop guard.
//! - [`breaker_view`]: the process's view of the breakers, moved as soon as an
//!   outcome is known.
//! - [`codes`]: the registry of runtime codes (attempt failures, ingest refusals).
//! - [`config`]: how the runtime runs, and the defaults the command line takes.
//! - [`payload`]: validation of an event's JSON payload against its declaration.
//! - [`retention`]: pruning in batches.
//! - [`events`]: the run's log events.
//! - [`version`]: a program's version as a store keeps it, and the processes
//!   running each.

pub mod breaker_view;
pub mod builtin;
pub mod claim;
pub mod clock;
pub mod codes;
pub mod config;
pub mod drivers;
pub mod events;
pub mod payload;
pub mod retention;
pub mod rng;
pub mod rules;
pub mod scenario;
pub mod steps;
pub mod store;
pub mod version;
