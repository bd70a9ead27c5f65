//! recover never runs a tool (DESIGN.md I5): it reads events through `runtime`'s event types
//! and `replay`, and has nothing of its own to run a call with. This test reads the dependency
//! graph as `cargo metadata` gives it (not the source's text, which a renamed import would
//! fool): among the workspace's crates recover reaches only `journal`, `history`, `runtime`,
//! `pg` (the record store) and `import` (other agents' session files), never the crates that start tools or servers (`mcp`, the CLI,
//! `fuzz`); its own dependencies hold no async executor and no process control; and it asks
//! `runtime` for no optional feature.

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
            // A journal in PostgreSQL: the record store, which runs no call.
            "tooljournal-pg",
            "tooljournal-runtime"
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
    let runtime = normal_dependencies(recover)
        .into_iter()
        .find(|d| d["name"] == "tooljournal-runtime")
        .expect("recover reads runtime's event types");
    assert_eq!(
        runtime["features"],
        Value::Array(vec![]),
        "recover asks runtime for no optional feature"
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
