//! The crate's integration tests, one binary: each file below is a module, so
//! linking happens once.

mod check_cli;
mod cli;
mod common;
mod docs;
mod fmt_cli;
mod http_e2e;
#[path = "../../../jadpo-runtime/tests/it/http_server/mod.rs"]
mod http_server;
mod metrics_e2e;
mod plan_cli;
mod runtime_e2e;
mod scenarios;
mod store_cli;
mod tidy;
