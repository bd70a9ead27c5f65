//! The `tooljournal` binary ships no test harness: its normal dependency graph (what a release
//! build compiles and links, on any target) holds no `proptest`, no `tooljournal-fuzz`, tokio
//! without `test-util` (no paused clock), and the workspace's crates without their `testing`
//! and `mutant` features (no failpoint that can be armed, no manual clock, no broken variant).
//! `tooljournal fuzz` runs the separate `tooljournal-fuzz` binary for that (`src/fuzz_cmd.rs`).
//!
//! Read from `cargo tree` with no dev edges: cargo then resolves features as a build of the
//! package's normal targets does (resolver 2 keeps dev-dependencies' features out of it), so
//! the test's own dev-dependencies, which do turn these on, cannot hide or fake a finding.

use std::collections::BTreeMap;
use std::process::Command;

/// Every package in `tooljournal`'s normal and build graph, for every target, with the
/// features a build of it enables (a package reached under several feature sets: their union).
fn release_graph() -> BTreeMap<String, Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(&cargo)
        .args([
            "tree",
            "--locked",
            "--manifest-path",
            concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"),
            "-p",
            "tooljournal",
            "-e",
            "normal,build",
            "--target",
            "all",
            "--prefix",
            "none",
            "--format",
            "{p}|{f}",
        ])
        .output()
        .unwrap_or_else(|e| panic!("{cargo} tree: {e}"));
    assert!(
        out.status.success(),
        "{cargo} tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut graph: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // `name vX.Y.Z [(path)]|feature,feature[ (*)]`
        let line = line.trim_end_matches(" (*)");
        let (package, features) = line
            .split_once('|')
            .unwrap_or_else(|| panic!("an unexpected line of cargo tree: {line:?}"));
        let name = package.split(' ').next().unwrap_or(package).to_owned();
        let enabled = graph.entry(name).or_default();
        for feature in features.split(',').filter(|f| !f.is_empty()) {
            if !enabled.iter().any(|f| f == feature) {
                enabled.push(feature.to_owned());
            }
        }
    }
    graph
}

#[test]
fn the_tooljournal_binary_links_no_test_harness() {
    let graph = release_graph();
    // The graph was read: the binary's own crates are in it.
    for name in [
        "tooljournal",
        "tooljournal-runtime",
        "tooljournal-journal",
        "tokio",
    ] {
        assert!(
            graph.contains_key(name),
            "{name} is not in the graph: {graph:?}"
        );
    }
    for harness in ["proptest", "tooljournal-fuzz", "tooljournal-mockllm"] {
        assert!(
            !graph.contains_key(harness),
            "the tooljournal binary depends on {harness} (`cargo tree -e normal,build -p \
             tooljournal --target all -i {harness}` says through what)"
        );
    }
    let features = |name: &str| graph.get(name).map(Vec::as_slice).unwrap_or_default();
    assert!(
        !features("tokio").iter().any(|f| f == "test-util"),
        "tokio's test-util (the paused clock) is on in the tooljournal binary: {:?}",
        features("tokio")
    );
    for (name, package) in &graph {
        if !name.starts_with("tooljournal") {
            continue;
        }
        for test_only in ["testing", "mutant"] {
            assert!(
                !package.iter().any(|f| f == test_only),
                "{name}'s `{test_only}` feature is on in the tooljournal binary: {package:?}"
            );
        }
    }
}
