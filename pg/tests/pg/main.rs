//! The PostgreSQL record store's integration tests: one test binary (one link, not four), each former test
//! file a module of its own.

// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test crate exports nothing: `pub` only shares helpers between its modules.
#![allow(unreachable_pub)]

mod common;

mod durable_server;
mod outcome;
mod review;
mod store;
