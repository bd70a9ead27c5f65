//! The real-world corpora (`../shared/corpora`, its README says what and from where): data no
//! one on this project wrote. Every recorded provider stream is replayed through `tooljournal
//! run --model` from a loopback server, and every other agent's session file imported and
//! repaired through `recover`; each is compared with what an independent reader of the same
//! bytes expects (`corpora/streams.rs`, `corpora/imports.rs`: written from the providers' and
//! agents' formats, never calling the code under test). A file added to the folders is tested
//! with no change here.
//!
//! Not part of `cargo test --workspace` (a fresh clone has no `../shared/`): `.ci/run` runs it,
//! `cargo test --features corpora --test corpora`. Without the corpora it fails saying where
//! they are expected; it never passes on nothing.
//!
//! Why a binary of its own, not a module of `tests/cli/main.rs`: `required-features =
//! ["corpora"]` (Cargo.toml) leaves it out of `cargo test --workspace`, and `.ci/run` runs it by
//! that name.
// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test crate exports nothing: `pub` only shares helpers between its modules.
#![allow(unreachable_pub)]

mod common;
#[path = "corpora/imports.rs"]
mod imports;
#[path = "corpora/streams.rs"]
mod streams;

use std::path::{Path, PathBuf};

/// The corpora: `TOOLJOURNAL_CORPORA` when set, else `../shared/corpora` beside the repository.
pub fn corpora() -> PathBuf {
    let dir = match std::env::var_os("TOOLJOURNAL_CORPORA") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpora"),
    };
    assert!(
        dir.join("real-streams").is_dir() && dir.join("import-real").is_dir(),
        "the corpora are expected at {} (with real-streams/ and import-real/): the directory \
         ../shared/corpora beside the repository, or where TOOLJOURNAL_CORPORA says",
        dir.display()
    );
    dir
}

/// The files under `dir` (one level of subdirectories) whose name ends with `suffix`, sorted.
pub fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            found.extend(files(&path, suffix));
        } else if path.to_string_lossy().ends_with(suffix) {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// Runs `check` on every job on two threads (the machines have two cores), and gives back what
/// each that failed said, named by `name`.
pub fn on_two_threads<J: Sync>(
    jobs: &[J],
    name: impl Fn(&J) -> String + Sync,
    check: impl Fn(&J) -> Result<(), String> + Sync,
) -> Vec<String> {
    let failures = std::sync::Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(job) = jobs.get(i) else { break };
                if let Err(why) = check(job) {
                    let line = format!("{}: {why}", name(job));
                    failures
                        .lock()
                        .expect("no check panics holding it")
                        .push(line);
                }
            });
        }
    });
    failures.into_inner().expect("no check panicked holding it")
}

#[test]
fn every_recorded_stream_is_read_exactly() {
    streams::run_all(&corpora().join("real-streams"));
}

#[test]
fn every_session_file_imports_and_repairs_as_an_independent_count_says() {
    imports::run_all(&corpora().join("import-real"));
}
