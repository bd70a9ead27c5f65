//! `tooljournal fuzz` through the binary (issue #22, item 2): a transcript with a parallel batch
//! run many times with the real tools, its report, its determinism and its refusals.
//!
//! `tests/data/fuzz_batch.jsonl` reads `notes.txt` (from `tests/data/fuzz_template`), then sends
//! one batch: `b1` `bash sleep 30` (exclusive, so it runs alone and first; its own
//! `timeout_ms` of 300 ends it when no cancel does, so no case waits 30 s), then `w1` `write`
//! and `e1` `edit` (concurrency-safe, together), then `t1` `todo` (exclusive). A stop the moment
//! `b1`'s body begins aborts it (`ABORTED`) and leaves the three behind it never dispatched
//! (`ABORTED_BEFORE_DISPATCH`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The seed the report tests start from; with [`CASES`] cases it draws the stops above.
const SEED: u64 = 7;
/// Enough cases for both words from [`SEED`], few enough for a debug build on 2 cores.
const CASES: u64 = 12;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `tooljournal fuzz ARGS`, with no configuration file of the user's in the way.
fn fuzz(args: &[&str]) -> Output {
    let config_home = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_tooljournal"))
        .arg("fuzz")
        .args(args)
        .env("XDG_CONFIG_HOME", config_home.path())
        .output()
        .expect("the binary runs")
}

/// `fuzz_batch.jsonl` on its template, from `seed`, `cases` cases.
fn fuzz_batch(seed: u64, cases: u64) -> Output {
    fuzz(&[
        "--script",
        data("fuzz_batch.jsonl").to_str().unwrap(),
        "--workspace-template",
        data("fuzz_template").to_str().unwrap(),
        "--seed",
        &seed.to_string(),
        "--cases",
        &cases.to_string(),
    ])
}

/// The report's per-call lines (`id (tool): word n, word n`), by id.
fn outcomes(stdout: &str) -> BTreeMap<String, BTreeMap<String, u64>> {
    stdout
        .lines()
        .filter_map(|line| {
            let (call, words) = line.split_once("): ")?;
            let (id, _tool) = call.split_once(" (")?;
            let words = words
                .split(", ")
                .map(|w| {
                    let (word, n) = w.rsplit_once(' ').unwrap_or((w, "?"));
                    (word.to_owned(), n.parse().unwrap_or(0))
                })
                .collect();
            Some((id.to_owned(), words))
        })
        .collect()
}

#[test]
fn a_stopped_parallel_batch_reaches_aborted_and_aborted_before_dispatch_with_no_violation() {
    let out = fuzz_batch(SEED, CASES);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        stdout.lines().next(),
        Some(format!("first seed {SEED}").as_str())
    );
    assert_eq!(
        stdout.trim_end().lines().last(),
        Some(format!("cases: {CASES}, violations: 0").as_str()),
        "{stdout}"
    );
    let words = outcomes(&stdout);
    let count = |id: &str, word: &str| words.get(id).and_then(|w| w.get(word)).copied();
    assert!(
        count("b1", "ABORTED") > Some(0),
        "b1 never aborted:\n{stdout}"
    );
    for queued in ["w1", "e1", "t1"] {
        assert!(
            count(queued, "ABORTED_BEFORE_DISPATCH") > Some(0),
            "{queued} never aborted before dispatch:\n{stdout}"
        );
    }
    // Only a call queued behind a running body is refused before dispatch: `b1` runs first.
    assert_eq!(count("b1", "ABORTED_BEFORE_DISPATCH"), None, "{stdout}");
    // The calls also ran to their end in some cases: the write, the edit, the plan.
    for done in ["w1", "e1", "t1"] {
        assert!(count(done, "ok") > Some(0), "{done} never ok:\n{stdout}");
    }
    // Every case's words add up to the cases run, for every call the model sent.
    for id in ["r1", "b1", "w1", "e1", "t1"] {
        let total: u64 = words.get(id).map_or(0, |w| w.values().sum());
        assert_eq!(total, CASES, "{id}:\n{stdout}");
    }
}

#[test]
fn the_same_seed_prints_the_same_report_byte_for_byte() {
    let first = fuzz_batch(SEED + 100, 6);
    let second = fuzz_batch(SEED + 100, 6);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    assert_eq!(
        text(&first.stdout),
        text(&second.stdout),
        "stderr:\n{}",
        text(&second.stderr)
    );
    assert!(
        text(&first.stdout).contains("b1 (bash): "),
        "{}",
        text(&first.stdout)
    );
}

#[test]
fn a_transcript_that_cannot_be_used_exits_2_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |args: &[&str], said: &[&str]| {
        let out = fuzz(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        for s in said {
            assert!(stderr.contains(s), "{args:?}: {s:?} not in {stderr}");
        }
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    };

    let missing = dir.path().join("no-such.jsonl");
    let missing = missing.to_str().unwrap();
    refused(
        &["--script", missing],
        &[missing, "cannot read the transcript"],
    );

    let bad_line = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad_line,
        "{\"user\": \"hi\"}\n{\"assistant\": {\"tool_calls\": 3}}\n",
    )
    .unwrap();
    let bad_line = bad_line.to_str().unwrap();
    refused(&["--script", bad_line], &[&format!("{bad_line}:2")]);

    let no_user = dir.path().join("no-user.jsonl");
    std::fs::write(
        &no_user,
        "{\"assistant\": {\"text\": \"hi\", \"stop_reason\": \"end_turn\"}}\n",
    )
    .unwrap();
    let no_user = no_user.to_str().unwrap();
    refused(&["--script", no_user], &[no_user, "line 1"]);

    let script = data("fuzz_batch.jsonl");
    let template = dir.path().join("no-such-template");
    refused(
        &[
            "--script",
            script.to_str().unwrap(),
            "--workspace-template",
            template.to_str().unwrap(),
        ],
        &[template.to_str().unwrap()],
    );
}
