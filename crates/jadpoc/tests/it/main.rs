//! The crate's integration tests, one binary: each file below is a module, so
//! linking happens once.

mod common;
#[path = "../../../jadpo-runtime/tests/it/http_server/mod.rs"]
mod http_server;
mod check_cli;
mod fmt_cli;
mod http_e2e;
mod plan_cli;
mod runtime_e2e;
mod scenarios;
