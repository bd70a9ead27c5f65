//! The `recover` binary for the root package's tests: cargo gives a test only its own package's
//! binaries, so it is built (or found up to date) beside `tooljournal`'s, once per test binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `recover`'s binary beside this test binary's `tooljournal`, built on first use.
pub fn recover_bin() -> &'static Path {
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
                "tooljournal-recover-cli",
                "--bin",
                "recover",
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
            "cargo build -p tooljournal-recover-cli failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let bin = profile_dir.join("recover");
        assert!(bin.is_file(), "{} was not built", bin.display());
        bin
    })
}
