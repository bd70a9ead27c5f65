//! Test machinery of the root package's integration tests, one module a topic; a test file
//! declares `mod common;` and uses the modules it needs.

pub mod fuzz_bin;
pub mod kill;
pub mod models;
pub mod pg;
pub mod recover_bin;
