//! `recover repair` through the binary: a copy the agent can resume, the original untouched,
//! nothing overwritten, and every refusal naming what was wrong.

use crate::common::imported::fixture;
use import::{read, Agent, Verdict};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `recover repair --from FROM FILE --out OUT`, in `dir` when given.
fn repair(dir: Option<&Path>, from: &str, file: &Path, out: &Path) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_recover"));
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    (command.args(["repair", "--from", from]).arg(file))
        .arg("--out")
        .arg(out)
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
    let o = repair(None, "codex", &file, &out);
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
                let text = session.text(*text).unwrap();
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
    let o = repair(None, "pi", &file, &out);
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
    let o = repair(None, "pi", &file, &out);
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
    let run = |out: &Path, from: &str, file: &Path| repair(None, from, file, out);

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
    let o = repair(None, "claude-code", &file, &out);
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

/// A file that never ends (a device, or a pipe fed by a runaway writer) is refused, never read
/// without bound: run under a 3 GB address-space limit, an unbounded read would fail with "out
/// of memory" instead (an adversarial review found it so).
#[test]
fn an_endless_file_is_refused_not_read_without_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("fixed.jsonl");
    let o = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 3000000; exec timeout 60 \"$0\" repair --from pi /dev/zero --out \"$1\"")
        .arg(env!("CARGO_BIN_EXE_recover"))
        .arg(&out)
        .output()
        .unwrap();
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{:?}: {stderr}", o.status);
    assert!(stderr.contains("/dev/zero: not a regular file"), "{stderr}");
    assert!(
        std::fs::read_dir(tmp.path()).unwrap().next().is_none(),
        "nothing written"
    );
}

/// The original is never the target, through a symlink, a hard link or a relative path; a
/// directory as FILE is refused; an `--out` whose quarantine would be the original is refused;
/// each refusal exits 1 naming a path and leaves no file behind.
#[test]
fn the_original_cannot_be_reached_through_out() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (file, original) = session_in(dir, "pi", "torn_tail");
    std::os::unix::fs::symlink(&file, dir.join("sym.jsonl")).unwrap();
    std::fs::hard_link(&file, dir.join("hard.jsonl")).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::os::unix::fs::symlink(dir.join("gone"), dir.join("dangling.jsonl")).unwrap();
    let names = || {
        let mut v: Vec<_> = (std::fs::read_dir(dir).unwrap())
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let before = names();
    let name = Path::new("torn_tail.jsonl");
    for out in [
        "sym.jsonl",
        "hard.jsonl",
        "./sub/../torn_tail.jsonl",
        "torn_tail.jsonl",
        "sub",
        "dangling.jsonl",
    ] {
        let o = repair(Some(dir), "pi", name, Path::new(out));
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{out}: {stderr}");
        assert!(stderr.contains(out), "{out}: {stderr}");
        assert_eq!(std::fs::read(&file).unwrap(), original, "{out}");
    }
    let o = repair(Some(dir), "pi", Path::new("sub"), Path::new("x.jsonl"));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("sub: not a regular file"),
        "{}",
        text(&o.stderr)
    );
    // --out whose quarantine is the original: refused, the original not overwritten.
    let q = dir.join("t.jsonl.quarantine");
    std::fs::write(&q, &original).unwrap();
    let o = repair(Some(dir), "pi", &q, Path::new("t.jsonl"));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(&q).unwrap(), original);
    std::fs::remove_file(&q).unwrap();
    assert_eq!(before, names(), "no partial or stray file left");
}

/// What the repair does besides answering is said, each with why: a line
/// that is not JSON moved out, a valid result of a call that is not in the file moved out (pi
/// would send it, and the provider refuse it), a header written where a pi file starts with
/// none (pi discards such a file), and each relinked line.
#[test]
fn the_repair_says_what_it_moved_and_wrote_and_why() {
    let tmp = tempfile::tempdir().unwrap();
    let (file, _) = session_in(tmp.path(), "pi", "unknown_item");
    let out = tmp.path().join("fixed.jsonl");
    let o = repair(None, "pi", &file, &out);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(
        stdout.contains("(a result of a call that is not in the file: pi would send it, and the provider refuse it)"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("(not JSON)"),
        "nothing there is not JSON: {stdout}"
    );
    let quarantine = std::fs::read_to_string(tmp.path().join("fixed.jsonl.quarantine")).unwrap();
    assert!(quarantine.contains("toolu_zzz"), "{quarantine}");

    let (file, _) = session_in(tmp.path(), "pi", "no_header");
    let out = tmp.path().join("headed.jsonl");
    let o = repair(None, "pi", &file, &out);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(
        stdout.contains("wrote a session header as line 1 (the file starts with none"),
        "{stdout}"
    );
    let copy = std::fs::read_to_string(&out).unwrap();
    let header: serde_json::Value = serde_json::from_str(copy.lines().next().unwrap()).unwrap();
    assert!(
        header["type"] == "session" && header["id"].is_string(),
        "{header}"
    );
    assert!(stdout.contains("answered call_n2 (line 5)"), "{stdout}");

    let (file, _) = session_in(tmp.path(), "pi", "bad_middle");
    let out = tmp.path().join("unbroken.jsonl");
    let o = repair(None, "pi", &file, &out);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains(" to ") && text(&o.stdout).contains("(not JSON)"));
}
