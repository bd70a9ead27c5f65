//! Binaries of other packages beside this test binary's `tooljournal`: cargo gives a test only
//! its own package's binaries, so each is built (or found up to date) there, once per test
//! binary. `recover` (package `tooljournal-recover-cli`) here; `fuzz_bin.rs` builds
//! `tooljournal-fuzz` with [`built_beside_tooljournal`].

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `recover`'s binary beside this test binary's `tooljournal`, built on first use.
pub fn recover_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| built_beside_tooljournal("tooljournal-recover-cli", "recover"))
}

/// Builds `bin` of `package` into the directory of `tooljournal`'s binary (the same profile and
/// target directory) and returns its path.
pub fn built_beside_tooljournal(package: &str, bin: &str) -> PathBuf {
    let tooljournal = PathBuf::from(env!("CARGO_BIN_EXE_tooljournal"));
    let profile_dir = tooljournal.parent().expect("the binary's directory");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .args(["build", "-q", "-p", package, "--bin", bin])
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
        "cargo build -p {package} --bin {bin} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let built = profile_dir.join(bin);
    assert!(built.is_file(), "{} was not built", built.display());
    built
}
