//! Confinement against a concurrent process: while a child process keeps
//! swapping a workspace directory for a symlink to a directory outside and back, the file
//! tools read, write, edit, list and walk through it. Nothing outside may be read into a result
//! (every outside file holds a marker that must never appear), nothing outside may change, and
//! every write the journal confirms is found inside the workspace with the content it says.
//!
//! The batches go on until the swapper has swapped often enough while they ran, however loaded
//! the machine (a fixed number of rounds once ended before a slowed swapper had swapped), within
//! a generous bound on time; a race that still did not happen by then fails the test.

// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test crate exports nothing: `pub` only shares helpers between its modules.
#![allow(unreachable_pub)]

mod common;

use common::*;
use journal::SimStorage;
use serde_json::json;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tooljournal_runtime::event::{SideEffect, ToolSource};
use tooljournal_runtime::fs::file_tools;
use tooljournal_runtime::Hooks;
use tooljournal_runtime::Registry;
use tooljournal_runtime::{sha256_hex, Workspace};
use tooljournal_runtime::{Config, ToolResult};

const MARKER: &str = "OUTSIDE-7f3a9c-MARKER";
/// Fewest batches of calls made while the swapper runs.
const ROUNDS_MIN: usize = 150;
/// Fewest swaps the child must complete while the batches run, so the race was really run.
const SWAPS_MIN: u64 = 20;
/// Longest the batches go on waiting for [`SWAPS_MIN`] swaps: not a timing assertion (an
/// unloaded machine swaps that often in well under a second), a bound on a machine too loaded
/// to swap at all, where the test fails saying so.
const RACE_BOUND: Duration = Duration::from_secs(300);

/// Every entry below `dir` (not following symlinks) with its bytes; a symlink: its target.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            let meta = fs::symlink_metadata(&p).unwrap();
            let content = if meta.is_symlink() {
                fs::read_link(&p)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else if meta.is_dir() {
                todo.push(p.clone());
                b"<dir>".to_vec()
            } else {
                fs::read(&p).unwrap()
            };
            out.insert(p, content);
        }
    }
    out
}

/// The hash of every regular file below `dir`, by file name (names written are unique).
fn files_by_name(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (path, bytes) in snapshot(dir) {
        if fs::symlink_metadata(&path).unwrap().is_file() {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            out.entry(name).or_default().push(sha256_hex(&bytes));
        }
    }
    out
}

/// A shell loop that, until `stop` exists, renames `ws/d` away, puts a symlink to `outside`
/// in its place, removes it and renames the directory back; a directory a writer created at
/// `d` meanwhile is moved inside the real one (so nothing is lost and the loop never sticks).
/// Appends a line to `count` for every swap it completes (one `write` of a few bytes in append
/// mode: a reader never sees half a line counted). Its steps fail often, and on purpose (a
/// writer's directory stands at `d`: `rm` refuses it, `mv` moves it): they are quiet, and the
/// loop's status is not theirs. A shell loop ends with the status of the last command it ran,
/// so an `rm` refused in the last round made the swapper exit 1 after it was told to stop;
/// it exits 0 once it saw `stop`, and fails only when it could not start (or was killed).
const SWAPPER: &str = r#"
cd "$1" || exit 1
m=0
while [ ! -e "$2" ]; do
  if mv -T d d.real 2>/dev/null; then
    if ln -s "$3" d 2>/dev/null; then echo swap >> "$4"; rm -f d 2>/dev/null; fi
    until mv -T d.real d 2>/dev/null; do
      m=$((m+1)); mv -T d "d.real/recreated-$m" 2>/dev/null; rm -f d 2>/dev/null
    done
  fi
done
exit 0
"#;

/// Swaps the swapper has completed so far (whole lines of `count`; none before the first).
fn swaps(count: &Path) -> u64 {
    fs::read(count).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count() as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_never_leads_out() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let root = base.join("ws");
    let outside = base.join("outside");
    fs::create_dir_all(root.join("d/sub")).unwrap();
    fs::create_dir_all(root.join(".tooljournal")).unwrap();
    fs::write(root.join("d/f.txt"), "inside f\n").unwrap();
    fs::write(root.join("d/sub/g.txt"), "inside g\n").unwrap();
    fs::write(root.join("d/e.txt"), "alpha inside\n").unwrap();
    fs::create_dir_all(outside.join("sub")).unwrap();
    fs::write(outside.join("f.txt"), format!("{MARKER} f\n")).unwrap();
    fs::write(outside.join("sub/g.txt"), format!("{MARKER} g\n")).unwrap();
    fs::write(outside.join("e.txt"), format!("alpha {MARKER}\n")).unwrap();
    fs::write(outside.join(format!("only-{MARKER}.txt")), "x\n").unwrap();
    let outside_before = snapshot(&outside);

    let ws = Arc::new(Workspace::new(&root, &[root.join(".tooljournal")]).unwrap());
    let mut registry = Registry::new();
    for tool in file_tools(ws.clone()) {
        registry.register(tool, ToolSource::BuiltIn).unwrap();
    }
    let storage = SimStorage::new();
    let mut session = session_on(
        &storage,
        Arc::new(registry),
        Hooks::default(),
        Config::default(),
    );

    let stop = base.join("stop");
    let count = base.join("count");
    let mut swapper = Command::new("sh")
        .args(["-c", SWAPPER, "swapper"])
        .arg(&root)
        .arg(&stop)
        .arg(&outside)
        .arg(&count)
        .stdin(Stdio::null())
        .spawn()
        .expect("sh runs");

    let mut results: Vec<ToolResult> = Vec::new();
    let began = Instant::now();
    let swaps_before = swaps(&count);
    let mut i = 0;
    // Rounds until the race has been run (or the bound passes; the assertion below then fails).
    while i < ROUNDS_MIN
        || (swaps(&count) - swaps_before < SWAPS_MIN && began.elapsed() < RACE_BOUND)
    {
        if let Some(status) = swapper.try_wait().unwrap() {
            panic!("the swapper ended before it was told to: {status}");
        }
        let (from, to) = if i % 2 == 0 {
            ("alpha", "beta")
        } else {
            ("beta", "alpha")
        };
        let calls = [
            ("read", json!({"path": "d/f.txt"})),
            ("read", json!({"path": "d/sub/g.txt"})),
            // (A pattern that does not itself contain the marker: "no matches" quotes it.)
            ("grep", json!({"pattern": "OUTSIDE-7f3a9c-MARKE[R]"})),
            ("grep", json!({"pattern": "inside|OUTSIDE", "path": "d"})),
            ("glob", json!({"pattern": "**/*"})),
            ("ls", json!({"path": "d"})),
            ("ls", json!({"path": "d/sub"})),
            (
                "write",
                json!({"path": format!("d/new-{i}.txt"), "content": format!("new {i}\n")}),
            ),
            (
                "write",
                json!({"path": format!("d/sub/deep-{i}/w.txt"), "content": format!("deep {i}\n")}),
            ),
            ("read", json!({"path": "d/e.txt"})),
            (
                "edit",
                json!({"path": "d/e.txt", "old_string": from, "new_string": to}),
            ),
        ];
        let calls = calls
            .iter()
            .enumerate()
            .map(|(j, (tool, args))| call(&format!("c{i}-{j}"), tool, &args.to_string()))
            .collect();
        results.extend(one_step(&mut session, calls).await);
        i += 1;
    }
    // Counted before the stop: the swaps made while the calls ran.
    let swapped = swaps(&count) - swaps_before;
    fs::write(&stop, "").unwrap();
    let status = swapper.wait().unwrap();
    assert!(status.success(), "the swapper failed: {status}");
    assert!(
        swapped >= SWAPS_MIN,
        "only {swapped} swaps happened in {:?} of {i} rounds of calls: the race was not run",
        began.elapsed()
    );

    let refused = results.iter().filter(|r| r.is_error).count();
    eprintln!(
        "{swapped} swaps in {i} rounds; {refused} of {} calls failed",
        results.len()
    );

    // Nothing from outside reached a result, and nothing outside changed.
    for r in &results {
        assert!(
            !r.content.contains(MARKER),
            "{} read outside the workspace: {}",
            r.call_id,
            r.content
        );
    }
    assert_eq!(
        snapshot(&outside),
        outside_before,
        "something outside changed"
    );

    // Every confirmed write is in the workspace with the content the journal says (under the
    // name it was given: the swapper only moves whole directories around inside).
    let inside = files_by_name(&root);
    let journal = replay(&storage);
    let mut writes = 0;
    for c in journal.calls() {
        let Some(outcome) = &c.outcome else { continue };
        for effect in &outcome.side_effects {
            if let SideEffect::FsWrite {
                path, after_sha256, ..
            } = effect
            {
                writes += 1;
                assert!(path.starts_with("d/"), "{path}");
                let name = Path::new(path).file_name().unwrap().to_string_lossy();
                if name == "e.txt" {
                    continue; // edited every round: only its last version survives
                }
                assert!(
                    inside
                        .get(name.as_ref())
                        .is_some_and(|h| h.contains(after_sha256)),
                    "{path}: the journal confirms a write that is not in the workspace"
                );
            }
        }
    }
    assert!(writes > 0, "no write succeeded: nothing was checked");
}
