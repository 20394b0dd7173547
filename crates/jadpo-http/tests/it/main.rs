//! The crate's integration tests, one binary: each file below is a module, so
//! linking happens once.

mod http_driver;
mod http_server;
mod http_tls;
mod ingest;
