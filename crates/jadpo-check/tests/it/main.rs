//! The crate's integration tests, one binary: each file below is a module, so
//! linking happens once.

mod corpus;
mod diff;
mod docs;
mod index;
mod lower;
mod messages;
mod robustness;
