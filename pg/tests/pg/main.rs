//! The PostgreSQL record store's integration tests: one test binary (one link, not four), each former test
//! file a module of its own.

mod common;

mod durable_server;
mod outcome;
mod review;
mod store;
