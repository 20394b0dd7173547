//! The crate's integration tests, one binary: each file below is a module, so
//! linking happens once.

mod common;
mod http_server;
mod breakers;
mod http_driver;
mod runtime;
mod store;
