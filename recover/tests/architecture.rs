//! recover never runs a tool (DESIGN.md I5): it reads events through the journal's vocabulary
//! (`events`: event types, the state machine, `replay`) and has nothing of its own to run a call
//! with. This test reads the dependency graph as cargo gives it (not the source's text, which a
//! renamed import would fool): among the workspace's crates recover reaches only `journal`,
//! `history`, `events`, `confine` (the probe's confined reads) and `import` (other agents'
//! session files), never the executor (`runtime`), the crates that start tools or servers
//! (`mcp`, the CLI, `fuzz`) or the record store's driver; its own dependencies hold no async
//! executor and no process control; and neither recover's nor the model adapters' whole tree
//! (`cargo tree -e normal`) holds the executor's or a command line's crates.

// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::collections::{BTreeSet, HashMap};

/// The workspace's packages as `cargo metadata --no-deps` lists them.
fn workspace_packages() -> Vec<Value> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let out = std::process::Command::new(&cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--manifest-path",
            manifest,
        ])
        .output()
        .unwrap_or_else(|e| panic!("{cargo} metadata: {e}"));
    assert!(
        out.status.success(),
        "{cargo} metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    metadata["packages"]
        .as_array()
        .expect("cargo metadata lists packages")
        .clone()
}

/// A package's normal (not dev, not build) dependencies.
fn normal_dependencies(package: &Value) -> Vec<&Value> {
    package["dependencies"]
        .as_array()
        .expect("every package lists its dependencies")
        .iter()
        .filter(|d| d["kind"].is_null())
        .collect()
}

#[test]
fn recover_reaches_no_crate_that_runs_calls() {
    let packages = workspace_packages();
    let by_name: HashMap<&str, &Value> = packages
        .iter()
        .map(|p| (p["name"].as_str().expect("named"), p))
        .collect();
    for name in [
        "tooljournal-recover",
        "tooljournal-journal",
        "tooljournal-runtime",
        "tooljournal-mcp",
        "tooljournal-fuzz",
        "tooljournal",
    ] {
        assert!(
            by_name.contains_key(name),
            "the workspace has no package {name}"
        );
    }
    // The workspace crates recover depends on, directly or through another workspace crate.
    let mut reached = BTreeSet::new();
    let mut todo = vec!["tooljournal-recover"];
    while let Some(name) = todo.pop() {
        for d in normal_dependencies(by_name[name]) {
            let dep = d["name"].as_str().expect("named");
            if by_name.contains_key(dep) && reached.insert(dep) {
                todo.push(dep);
            }
        }
    }
    assert_eq!(
        reached,
        BTreeSet::from([
            "tooljournal-history",
            // Other agents' session files, read (`recover repair`): no executor either.
            "tooljournal-import",
            "tooljournal-journal",
            // The vocabulary: events, the state machine, replay.
            "tooljournal-events",
            // The workspace's confinement, which the probe reads through.
            "tooljournal-confine",
        ]),
        "recover's workspace dependencies (never the model adapters: recover sends no request)"
    );

    let recover = by_name["tooljournal-recover"];
    let direct: Vec<&str> = normal_dependencies(recover)
        .iter()
        .map(|d| d["name"].as_str().expect("named"))
        .collect();
    for executor in [
        "tokio",
        "tokio-util",
        "futures-util",
        "futures",
        "nix",
        "tooljournal-mcp",
        "reqwest",
    ] {
        assert!(
            !direct.contains(&executor),
            "recover depends on {executor}: it would have the means to run a call ({direct:?})"
        );
    }
}

/// Every package a package's normal build links, by name, as `cargo tree -e normal` lists
/// them (dev- and build-dependencies left out: they are not in what a user links).
fn linked(package: &str) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let out = std::process::Command::new(&cargo)
        .args([
            "tree", "-e", "normal", "--prefix", "none", "--format", "{p}",
        ])
        .args(["--manifest-path", manifest, "-p", package])
        .output()
        .unwrap_or_else(|e| panic!("{cargo} tree: {e}"));
    assert!(
        out.status.success(),
        "{cargo} tree -p {package} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(
        names.contains(package),
        "cargo tree -p {package} did not list the package itself: {names:?}"
    );
    names
}

/// The executor and a command line's crates: what a reader of a journal, or a model adapter,
/// must not link (a tool runner, its store, its schema checker, argument parsing, progress bars,
/// a database driver).
const EXECUTOR_AND_CLI: [&str; 8] = [
    "tooljournal-runtime",
    "tooljournal-mcp",
    "sled",
    "jsonschema",
    "clap",
    "indicatif",
    "postgres",
    "globset",
];

#[test]
fn recover_and_the_model_adapters_link_no_executor_and_no_command_line() {
    for package in [
        "tooljournal-recover",
        "tooljournal-llm",
        "tooljournal-events",
    ] {
        let names = linked(package);
        let found: Vec<&str> = EXECUTOR_AND_CLI
            .into_iter()
            .filter(|n| names.contains(*n))
            .collect();
        assert!(found.is_empty(), "{package} links {found:?}");
    }
    // The same listing finds them where they are linked: the recover command has both.
    let cli = linked("tooljournal-recover-cli");
    assert!(
        cli.contains("clap") && cli.contains("postgres"),
        "the recover command parses arguments and opens PostgreSQL journals: {cli:?}"
    );
}

/// `import` (other agents' session files) knows nothing of ours: it depends on no crate of the
/// workspace, so a format it reads can never reach the journal but through `recover`.
#[test]
fn import_depends_on_no_workspace_crate() {
    let packages = workspace_packages();
    let names: BTreeSet<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().expect("named"))
        .collect();
    let import = packages
        .iter()
        .find(|p| p["name"] == "tooljournal-import")
        .expect("the workspace has tooljournal-import");
    let reached: Vec<&str> = normal_dependencies(import)
        .iter()
        .map(|d| d["name"].as_str().expect("named"))
        .filter(|d| names.contains(d))
        .collect();
    assert!(reached.is_empty(), "import depends on {reached:?}");
}
