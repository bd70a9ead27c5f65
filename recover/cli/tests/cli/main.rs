//! The `recover` binary driven as a user drives it: one test binary for every command's tests
//! (one link, not seventeen), each file a room of its own.

// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test crate exports nothing: `pub` only shares helpers between its modules.
#![allow(unreachable_pub)]

mod common;

mod cli_commands;
mod cli_crash_points;
mod exact_histories;
mod format_1;
mod import_cli;
mod import_review;
mod import_seams;
mod model_requests;
mod plain_spoken;
mod probe;
mod probe_refused;
mod questions;
mod rebuild_bodies;
mod reduced_history;
mod repair_cli;
mod sandbox;
mod schema;
mod seams;
mod streamed_outputs;
