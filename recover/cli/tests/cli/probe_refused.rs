//! The probe says when it did not look, plainly rather than guessing: a file behind a symlink
//! that leads out of the workspace is `not_looked`, saying why, through every output of the
//! `recover` binary; never `changed`, and never "holds neither …", which would claim what the
//! file holds.

use crate::common;

use common::{forged, recover, text};
use runtime::event::Evidence;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// What the call would have written; the file outside holds exactly it, so a probe that
/// followed the symlink would say `applied`.
const AFTER: &str = "the new text\n";

/// A journal whose `w1` was to create `a.txt` (absent before it), cut after its `started`; the
/// workspace's `a.txt` is a symlink to a file outside it.
fn behind_a_symlink_out() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(d.path().join("outside.txt"), AFTER).unwrap();
    std::os::unix::fs::symlink(d.path().join("outside.txt"), ws.join("a.txt")).unwrap();
    let journal = d.path().join("journal");
    let evidence = vec![Evidence::FileReplace {
        path: "a.txt".into(),
        before_sha256: None,
        after_sha256: hex::encode(Sha256::digest(AFTER.as_bytes())),
    }];
    forged(&journal, &[("w1", evidence)], vec![]);
    (d, ws, journal)
}

/// `recover ARGS JOURNAL --dry-run --probe WS`'s stdout (it must succeed).
fn probed(args: &[&str], journal: &Path, ws: &Path) -> String {
    let mut all = vec![args[0], journal.to_str().unwrap()];
    all.extend(&args[1..]);
    all.extend(["--dry-run", "--probe", ws.to_str().unwrap()]);
    let out = recover(&all);
    assert_eq!(out.status.code(), Some(0), "{all:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn a_file_behind_a_symlink_out_of_the_workspace_is_not_looked_at_never_changed() {
    let (_d, ws, journal) = behind_a_symlink_out();
    let detail = "a.txt was not looked at: the probe reads only inside the workspace, and \
                  \"a.txt\" is outside the workspace: a symlink leads out of it; so the probe \
                  says nothing of what it holds";

    // classify --json: the verdict, why, and nothing found.
    let json: Value = serde_json::from_str(&probed(&["classify", "--json"], &journal, &ws))
        .expect("classify --json prints JSON");
    let w1 = &json["calls"][0];
    assert_eq!(w1["call_id"], "w1", "{json}");
    assert_eq!(w1["classification"], "TOOL_OUTCOME_UNKNOWN", "{json}");
    assert_eq!(w1["probe"]["verdict"], "not_looked", "{json}");
    assert_eq!(w1["probe"]["detail"], detail, "{json}");
    assert_eq!(w1["probe"]["found_sha256"], Value::Null, "{json}");

    // classify's table: the column and the words under the row.
    let table = probed(&["classify"], &journal, &ws);
    let row = table.lines().find(|l| l.starts_with("w1 ")).unwrap();
    assert!(row.contains("TOOL_OUTCOME_UNKNOWN ! not_looked"), "{table}");
    assert!(table.contains(&format!("probe: {detail}")), "{table}");

    for shown in [json.to_string(), table] {
        assert!(!shown.contains("changed"), "{shown}");
        assert!(!shown.contains("holds neither"), "{shown}");
    }

    // What the model is told (rebuild, the text recovery journals), as a JSON string in the
    // request body; its own "check whatever it could have changed" is no verdict.
    let body = probed(&["rebuild", "--format", "anthropic"], &journal, &ws);
    let words = serde_json::to_string(&format!("no probe was possible: {detail};")).unwrap();
    assert!(body.contains(words.trim_matches('"')), "{body}");
    assert!(!body.contains("a probe of the workspace found"), "{body}");
    assert!(!body.contains("holds neither"), "{body}");
}
