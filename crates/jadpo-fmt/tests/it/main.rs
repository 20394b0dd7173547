//! The crate's integration tests, one binary: each file below is a module, so
//! linking happens once.

mod layout;
mod props;
