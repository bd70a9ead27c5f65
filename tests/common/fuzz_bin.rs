//! `tooljournal` with `tooljournal-fuzz` beside it, for the tests of `tooljournal fuzz`: the
//! command runs that binary from its own binary's directory, and cargo builds a test only its own
//! package's binaries, so it is built (or found up to date) there once per test binary, as
//! `recover_bin.rs` builds `recover`.

// Only the test binaries of `tooljournal fuzz` use it; `common` is compiled into every one.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The `tooljournal` binary, once `tooljournal-fuzz` is built beside it.
pub fn tooljournal() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        super::recover_bin::built_beside_tooljournal("tooljournal-fuzz", "tooljournal-fuzz");
        PathBuf::from(env!("CARGO_BIN_EXE_tooljournal"))
    })
}
