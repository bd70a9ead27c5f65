//! The loopback provider server's integration tests: one test binary (one link, not eight), each former test
//! file a module of its own.

// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test crate exports nothing: `pub` only shares helpers between its modules.
#![allow(unreachable_pub)]

mod common;

mod anthropic;
mod bin;
mod checks;
mod faults;
mod gemini;
mod openai_chat;
mod openai_responses;
mod overflow;
