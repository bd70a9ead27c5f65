//! The fuzz harness's integration tests: one test binary (one link, not four), each former test
//! file a module of its own.

// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod campaign;
mod harness;
mod harness_review;
mod harness_truth;
mod rules;
