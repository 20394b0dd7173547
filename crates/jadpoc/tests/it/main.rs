//! The crate's integration tests, one binary: each file below is a module, so
//! linking happens once.

mod builtin_e2e;
mod check_cli;
mod cli;
mod common;
mod console_cli;
mod diff_cli;
mod docs;
mod editors;
mod events_cli;
mod fmt_cli;
mod http_e2e;
#[path = "../../../jadpo-http/tests/it/http_server/mod.rs"]
mod http_server;
mod listen_e2e;
mod log_reasons;
mod metrics_e2e;
mod operator_cli;
mod pg_cluster;
mod plan_cli;
mod rolling;
mod runtime_e2e;
mod scenarios;
mod signing_e2e;
mod store_cli;
mod tidy;
