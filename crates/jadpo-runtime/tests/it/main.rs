//! The crate's integration tests, one binary: each file below is a module, so
//! linking happens once. The stores' own suite is `jadpo-store-conformance`,
//! whose fixtures these tests share.

/// The stores and helpers these tests share with the stores' conformance suite.
mod common {
    pub use jadpo_store_conformance::*;
}

mod faults;
mod runtime;
mod stalls;
mod versions;
