//! The importer's integration tests: one test binary (one link, not four), each former test
//! file a module of its own.

mod common;

mod fixtures;
mod prefixes;
mod repair;
mod review_attacks;
