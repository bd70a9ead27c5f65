//! The journal's integration tests: one test binary (one link, not fourteen), each former test
//! file a module of its own.

// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test crate exports nothing: `pub` only shares helpers between its modules.
#![allow(unreachable_pub)]

mod common;

mod bitflip;
mod codec_props;
mod failstop;
mod format_doc;
mod group_commit;
mod lock;
mod mapped;
mod power_loss;
mod preallocation;
mod preallocation_seams;
mod records;
mod shared_sync;
mod tail_scan;
mod tails;
mod truncation;
mod versions;
