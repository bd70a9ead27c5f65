//! The model adapters' integration tests: one test binary (one link, not four), each former test
//! file a module of its own.

mod common;

mod config;
mod decode;
mod http;
mod overflow;
