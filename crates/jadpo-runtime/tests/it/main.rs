//! The crate's integration tests, one binary: each file below is a module, so
//! linking happens once.

mod breakers;
mod builtin;
mod common;
mod events;
mod faults;
mod pauses;
mod retention;
mod runtime;
mod stalls;
mod store;
mod versions;
