//! The conformance suite, one binary: each file below is a module, so linking
//! happens once. Every test runs on every store (`on_every_store!`).

/// The suite's shared parts, as the files below name them.
mod common {
    pub use jadpo_store_conformance::*;
}

mod breakers;
mod builtin;
mod events;
mod pauses;
mod retention;
mod rows;
mod store;
