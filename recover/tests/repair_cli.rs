//! `recover repair` through the binary: a copy the agent can resume, the original untouched,
//! nothing overwritten, and every refusal naming what was wrong.

use import::{read, Agent, Verdict};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(agent: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/import")
        .join(agent)
        .join(format!("{name}.jsonl"))
}

fn recover(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_recover"))
        .args(args)
        .output()
        .expect("the recover binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Copies a fixture into `dir`, returning its path and bytes.
fn session_in(dir: &Path, agent: &str, name: &str) -> (PathBuf, Vec<u8>) {
    let bytes = std::fs::read(fixture(agent, name)).unwrap();
    let path = dir.join(format!("{name}.jsonl"));
    std::fs::write(&path, &bytes).unwrap();
    (path, bytes)
}

#[test]
fn a_torn_codex_rollout_is_answered_and_its_torn_line_moved_out() {
    let tmp = tempfile::tempdir().unwrap();
    let (file, original) = session_in(tmp.path(), "codex", "torn_tail");
    let out = tmp.path().join("fixed.jsonl");
    let o = recover(&[
        Path::new("repair"),
        Path::new("--from"),
        Path::new("codex"),
        &file,
        Path::new("--out"),
        &out,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(
        stdout.contains("answered call_a (line 4)") && stdout.contains("answered call_b (line 5)"),
        "{stdout}"
    );
    assert!(stdout.contains("moved line 6 to"), "{stdout}");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        original,
        "the original is untouched"
    );

    let fixed = std::fs::read(&out).unwrap();
    let session = read(Agent::Codex, &fixed).unwrap();
    assert!(session.quarantined.is_empty(), "{:?}", session.quarantined);
    for id in ["call_a", "call_b"] {
        let call = session.calls.iter().find(|c| c.id == id).unwrap();
        match &call.verdict {
            Verdict::Result { text, .. } => {
                assert!(text.starts_with("TOOL_OUTCOME_UNKNOWN"), "{text}")
            }
            other => panic!("{id}: {other:?}"),
        }
    }
    let torn_line = original.rsplit(|b| *b == b'\n').next().unwrap();
    let mut expected = torn_line.to_vec();
    expected.push(b'\n');
    let quarantine = tmp.path().join("fixed.jsonl.quarantine");
    assert_eq!(std::fs::read(quarantine).unwrap(), expected);
}

#[test]
fn a_pi_session_with_a_bad_line_is_relinked_and_its_error_calls_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let (file, _) = session_in(tmp.path(), "pi", "bad_middle");
    let out = tmp.path().join("fixed.jsonl");
    let o = recover(&[
        Path::new("repair"),
        Path::new("--from"),
        Path::new("pi"),
        &file,
        Path::new("--out"),
        &out,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("relinked line 6"),
        "{}",
        text(&o.stdout)
    );
    let session = read(Agent::Pi, &std::fs::read(&out).unwrap()).unwrap();
    assert!(
        session.notes.iter().all(|(_, n)| !n.contains("parentId")),
        "{:?}",
        session.notes
    );

    let (file, _) = session_in(tmp.path(), "pi", "length_cut");
    let out = tmp.path().join("cut.jsonl");
    let o = recover(&[
        Path::new("repair"),
        Path::new("--from"),
        Path::new("pi"),
        &file,
        Path::new("--out"),
        &out,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(stdout.contains("answered toolu_len"), "{stdout}");
    assert!(
        !stdout.contains("toolu_err") && !stdout.contains("toolu_abt"),
        "pi drops its error and aborted messages on replay: {stdout}"
    );
    assert!(
        !tmp.path().join("cut.jsonl.quarantine").exists(),
        "nothing moved, no quarantine"
    );
}

#[test]
fn refusals_name_the_file_and_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (file, original) = session_in(tmp.path(), "codex", "no_output");
    let run = |out: &Path, from: &str, file: &Path| {
        recover(&[
            Path::new("repair"),
            Path::new("--from"),
            Path::new(from),
            file,
            Path::new("--out"),
            out,
        ])
    };

    // --out is the session file itself.
    let o = run(&file, "codex", &file);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("the original is never modified"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(std::fs::read(&file).unwrap(), original);

    // --out exists.
    let taken = tmp.path().join("taken.jsonl");
    std::fs::write(&taken, b"mine").unwrap();
    let o = run(&taken, "codex", &file);
    assert_eq!(o.status.code(), Some(1));
    let stderr = text(&o.stderr);
    assert!(stderr.contains("taken.jsonl: exists"), "{stderr}");
    assert_eq!(std::fs::read(&taken).unwrap(), b"mine");

    // The session file is missing.
    let missing = tmp.path().join("missing.jsonl");
    let o = run(&tmp.path().join("x.jsonl"), "codex", &missing);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("missing.jsonl: cannot read"),
        "{}",
        text(&o.stderr)
    );
    assert!(!tmp.path().join("x.jsonl").exists());

    // An agent this build does not read.
    let o = run(&tmp.path().join("y.jsonl"), "gemini-cli", &file);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("gemini-cli"),
        "{}",
        text(&o.stderr)
    );
    assert!(!tmp.path().join("y.jsonl").exists());

    // A directory that is not there for the copy.
    let o = run(&tmp.path().join("no/such/dir.jsonl"), "codex", &file);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("dir.jsonl: cannot write"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn a_claude_code_response_missing_one_result_gets_it_on_the_chain() {
    let tmp = tempfile::tempdir().unwrap();
    let (file, original) = session_in(tmp.path(), "claude-code", "parallel_missing");
    let out = tmp.path().join("fixed.jsonl");
    let o = recover(&[
        Path::new("repair"),
        Path::new("--from"),
        Path::new("claude-code"),
        &file,
        Path::new("--out"),
        &out,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("answered toolu_p2"),
        "{}",
        text(&o.stdout)
    );
    assert_eq!(std::fs::read(&file).unwrap(), original);
    let fixed = std::fs::read(&out).unwrap();
    let lines: Vec<serde_json::Value> = fixed
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    // The answer follows the existing results, as the last line: the chain's leaf.
    let last = lines.last().unwrap();
    let before = &lines[lines.len() - 2];
    assert_eq!(last["type"], "user");
    assert_eq!(last["parentUuid"], before["uuid"]);
    assert_eq!(last["sessionId"], before["sessionId"]);
    let block = &last["message"]["content"][0];
    assert_eq!(block["tool_use_id"], "toolu_p2");
    assert_eq!(block["is_error"], true);
    assert!(block["content"]
        .as_str()
        .unwrap()
        .starts_with("TOOL_OUTCOME_UNKNOWN"));
    let session = read(Agent::ClaudeCode, &fixed).unwrap();
    assert!(session
        .calls
        .iter()
        .all(|c| matches!(c.verdict, Verdict::Result { .. })));
}
