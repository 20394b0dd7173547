//! The jadpo runtime's HTTP side, on hyper and rustls (ring):
//!
//! - [`client`]: the HTTP driver that calls providers (answer mapping, re-sends,
//!   the in-flight limit, TLS and mTLS, and the connector that tells a call the
//!   provider never read).
//! - [`ingest`]: `jadpoc run --listen`, events taken over HTTP with a group commit.
//! - [`signing`]: signed calls and their verification (the Standard Webhooks
//!   scheme).
//! - [`metrics`]: the run's Prometheus metrics (an observer of the runtime's
//!   steps) and their `--metrics` endpoint.
//! - [`server`]: the accept loop the ingest, the metrics and the operator's
//!   console (`jadpo-console`) share (the connection cap, the spare descriptor,
//!   the drain at a stop).

pub mod client;
pub mod ingest;
pub mod metrics;
pub mod server;
mod setup;
pub mod signing;
