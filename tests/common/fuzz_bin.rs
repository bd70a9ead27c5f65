//! `tooljournal` with `tooljournal-fuzz` beside it, for the tests of `tooljournal fuzz`: the
//! command runs that binary from its own binary's directory, and cargo builds a test only its own
//! package's binaries, so it is built (or found up to date) there once per test binary, as
//! `recover_bin.rs` builds `recover`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The `tooljournal` binary, once `tooljournal-fuzz` is built beside it.
pub fn tooljournal() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let tooljournal = PathBuf::from(env!("CARGO_BIN_EXE_tooljournal"));
        let profile_dir = tooljournal.parent().expect("the binary's directory");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .args([
                "build",
                "-q",
                "-p",
                "tooljournal-fuzz",
                "--bin",
                "tooljournal-fuzz",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        if let Some(target) = profile_dir.parent() {
            build.env("CARGO_TARGET_DIR", target);
        }
        let out = build.output().expect("cargo runs");
        assert!(
            out.status.success(),
            "cargo build -p tooljournal-fuzz failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let fuzz = profile_dir.join("tooljournal-fuzz");
        assert!(fuzz.is_file(), "{} was not built", fuzz.display());
        tooljournal
    })
}
