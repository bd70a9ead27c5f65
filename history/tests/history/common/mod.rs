//! Helpers shared by the history crate's integration tests.

pub mod conversations;
