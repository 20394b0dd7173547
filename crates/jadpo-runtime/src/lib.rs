//! The jadpo outbox runtime.
//!
//! - [`builtin`]: jadpo's own events (`jadpo.delivery_failed`, ...) as the runtime
//!   raises them, with the loop guard.
//! - [`breaker_view`]: the in-process view of the breakers, moved as soon as an
//!   outcome is known.
//! - [`codes`]: the registry of runtime codes (attempt failures, ingest refusals).
//! - [`rules`]: the pure rules of a delivery's life and of the circuit breakers (no
//!   IO, no clock, no global RNG).
//! - [`steps`]: the [`steps::Runtime`] and its steps (claim, prepare a call,
//!   conclude, record, tick), shared by both drivers of time.
//! - [`drive`]: the drivers of time: [`drive::live`] (tokio loops, `jadpoc run`) and
//!   [`drive::scenario`] (virtual time, `jadpoc test`).
//! - [`config`]: how the runtime runs, and the defaults the command line takes.
//! - [`rng`]: the run's one seeded, portable random source.
//! - [`store`]: the [`store::Store`] trait and its two implementations, SQLite and
//!   PostgreSQL, with [`store::open`] choosing one from a path or a URL.
//! - [`clock`]: the [`clock::Clock`] trait, the system clock and the virtual clock.
//! - [`drivers`]: the [`drivers::Driver`] trait and the fake driver.
//! - [`http`]: the HTTP driver.
//! - [`payload`]: validation of an event's JSON payload against its declaration.
//! - [`ingest`]: the `--listen` HTTP ingest of events.
//! - [`metrics`]: the run's Prometheus metrics and their `--metrics` server.
//! - `server`: the HTTP server both run (the accept loop, its connection cap, the
//!   drain at a stop).
//! - [`views`]: what `deliveries`, `status` and `breakers` print.
//! - [`events`]: the run's log events.

pub mod breaker_view;
pub mod builtin;
pub mod clock;
pub mod codes;
pub mod config;
pub mod drive;
pub mod drivers;
pub mod events;
pub mod http;
pub mod ingest;
pub mod metrics;
pub mod payload;
pub mod retention;
pub mod rng;
pub mod rules;
mod server;
pub mod steps;
pub mod store;
pub mod views;
