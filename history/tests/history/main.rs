//! The history crate's integration tests: one test binary (one link, not seven), each former test
//! file a module of its own.

mod common;

mod layout;
mod providers_pairing;
mod providers_render;
mod reduce;
mod reduce_props;
mod request_body;
mod stream_body;
