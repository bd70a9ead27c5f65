//! The `tooljournal` binary driven as a user drives it: one test binary for the root package's
//! integration tests (one link, not thirty), each former test file a module of its own, the
//! shared machinery in `common` (so a server or a binary it builds is started once here, not
//! once per file).
//!
//! Kept as binaries of their own, each saying why at its top:
//! - `tests/kill.rs` and `tests/postgres_kill.rs`: every child they start goes through
//!   `common::kill::SPAWN_GATE`, so that no child inherits a journal's lock this process holds;
//!   a child another test of the same binary started outside the gate would break that.
//! - `tests/security.rs`: it bounds the peak memory of every child its binary waited for
//!   (`getrusage(RUSAGE_CHILDREN)`, process-wide); the children of other tests (200 MB imports,
//!   Chromium) would count.
//! - `tests/corpora.rs`: `required-features = ["corpora"]`, run by `.ci/run` alone.
// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test crate exports nothing: `pub` only shares helpers between its modules.
#![allow(unreachable_pub)]

#[path = "../common/mod.rs"]
mod common;

mod ask_resume;
mod ask_transcript;
mod audit_browser;
mod audit_html;
mod audit_html_review;
mod bounded_input;
mod browser_harness;
mod chat_ask;
mod chat_pty;
mod cli;
mod full_disk;
mod fuzz_cli;
mod import_seams;
mod lifecycle;
mod mcp_cli;
mod models_bounds;
mod models_e2e;
mod models_kill;
mod models_overflow;
mod orphans;
mod postgres_cli;
mod postgres_review;
mod probe_kill;
mod release_deps;
mod rerun;
mod resume_rerun_seams;
mod resume_seams;
mod sandbox_cli;
mod sessions;
mod third_party_llm;
mod verify_events;
