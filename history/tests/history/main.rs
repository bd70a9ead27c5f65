//! The history crate's integration tests: one test binary (one link, not seven), each former test
//! file a module of its own.

// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test crate exports nothing: `pub` only shares helpers between its modules.
#![allow(unreachable_pub)]

mod common;

mod layout;
mod providers_pairing;
mod providers_render;
mod reduce;
mod reduce_props;
mod request_body;
mod stream_body;
