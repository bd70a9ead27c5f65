//! A review of `recover import`'s seams with the `tooljournal` binary: what `resume`, `run`
//! and `journal copy` do with a journal another agent's session was imported into. A second
//! adversarial review's tests, kept: the first two each failed on a defect it found, since
//! fixed.

use crate::common::recover_bin;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tooljournal(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tooljournal"))
        .args(args)
        // A key that reaches no one: the model is never asked (the base URL goes nowhere).
        .env("OPENAI_API_KEY", "sk-import-seams")
        .output()
        .expect("tooljournal runs")
}

fn recover(args: &[&str]) -> Output {
    Command::new(recover_bin::recover_bin())
        .args(args)
        .output()
        .expect("recover runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

fn fixture(agent: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import")
        .join(agent)
        .join(format!("{name}.jsonl"))
}

fn import(agent: &str, file: &Path, journal: &Path) {
    let o = recover(&["import", "--from", agent, s(file), "--journal", s(journal)]);
    assert!(o.status.success(), "import: {}", text(&o.stderr));
}

/// Every file of the journal directory with its bytes (the lock file included).
fn bytes_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// The first `keep` records of the journal `from` copied into a new journal `to`: an import
/// cut short (killed, a full disk) at a record boundary.
fn cut(from: &Path, to: &Path, keep: usize) {
    use journal::{FsStorage, Journal, Limits, Options, Reader, Takeover};
    let storage = std::sync::Arc::new(FsStorage::create(to).unwrap());
    let backend = journal::Backend::Files(storage);
    let (j, _) = Journal::open_backend(&backend, Takeover::Refuse, Options::default()).unwrap();
    let source = std::sync::Arc::new(FsStorage::open(from).unwrap());
    let reader = Reader::open(source, Limits::default()).unwrap();
    for record in reader.take(keep) {
        let record: runtime::event::Record = record.unwrap().decode().unwrap();
        j.append(&record).unwrap();
    }
    j.close().unwrap();
}

/// `tooljournal resume` of an import cut short: whatever it is given, it refuses, saying the
/// journal is imported, and writes nothing to it (DESIGN.md §13: "an imported journal is a
/// record, not a session: `resume` refuses it").
#[test]
fn a_resume_of_an_import_cut_short_refuses_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    import("codex", &fixture("codex", "parallel_missing"), &whole);
    // A script whose first line is any user message: a resume reads it only after recovery.
    let script = tmp.path().join("script.jsonl");
    std::fs::write(&script, "{\"user\":\"go on\"}\n").unwrap();
    let cases: [(&str, Vec<&str>); 3] = [
        ("no flags", vec![]),
        ("--script", vec!["--script", s(&script)]),
        (
            "--model --prompt",
            vec![
                "--model",
                "openai-chat:gpt-4.1-mini",
                "--prompt",
                "go on",
                "--base-url",
                "http://127.0.0.1:9",
            ],
        ),
    ];
    let mut problems = Vec::new();
    for (i, (what, extra)) in cases.iter().enumerate() {
        let journal = tmp.path().join(format!("cut-{i}"));
        // Two calls received, none given its import/outcome yet (26 records whole).
        cut(&whole, &journal, 20);
        let before = bytes_of(&journal);
        let mut args = vec!["resume", "--journal", s(&journal)];
        args.extend(extra.iter().copied());
        let o = tooljournal(&args);
        let stderr = text(&o.stderr);
        if o.status.success() {
            problems.push(format!("{what}: exit 0: {}", text(&o.stdout)));
        }
        if !stderr.contains("imported") {
            problems.push(format!(
                "{what}: the refusal does not say the journal is imported: {}",
                stderr.trim()
            ));
        }
        if bytes_of(&journal) != before {
            problems.push(format!(
                "{what}: the journal was written to (stdout: {})",
                text(&o.stdout).trim()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A complete import: `resume` refuses it as imported (not "already finished", exit 0), and
/// `run` on its directory does not advise resuming it.
#[test]
fn commands_on_a_complete_import_never_offer_to_resume_it() {
    let tmp = tempfile::tempdir().unwrap();
    let journal = tmp.path().join("j");
    import("codex", &fixture("codex", "normal"), &journal);
    let before = bytes_of(&journal);
    let mut problems = Vec::new();
    let o = tooljournal(&["resume", "--journal", s(&journal)]);
    if o.status.success() || !text(&o.stderr).contains("imported") {
        problems.push(format!(
            "resume: exit {:?}, stdout {:?}, stderr {:?}",
            o.status.code(),
            text(&o.stdout).trim(),
            text(&o.stderr).trim()
        ));
    }
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let script = tmp.path().join("script.jsonl");
    std::fs::write(&script, "{\"user\":\"go on\"}\n").unwrap();
    let o = tooljournal(&[
        "run",
        "--script",
        s(&script),
        "--workspace",
        s(&ws),
        "--journal",
        s(&journal),
    ]);
    let stderr = text(&o.stderr);
    if o.status.success() || stderr.contains("tooljournal resume") {
        problems.push(format!(
            "run: exit {:?}, advises: {}",
            o.status.code(),
            stderr.trim()
        ));
    }
    assert_eq!(bytes_of(&journal), before, "the journal was written to");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `tooljournal journal copy` of an imported journal, whole and cut short: the copy reads as
/// the original (classify --json and audit --json, the journal's name aside).
#[test]
fn a_copy_of_an_imported_journal_reads_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    import(
        "claude-code",
        &fixture("claude-code", "parallel_missing"),
        &whole,
    );
    let part = tmp.path().join("part");
    cut(&whole, &part, 12);
    for (name, from) in [("whole", &whole), ("part", &part)] {
        let to = tmp.path().join(format!("{name}-copy"));
        let o = tooljournal(&["journal", "copy", s(from), s(&to)]);
        assert!(o.status.success(), "copy {name}: {}", text(&o.stderr));
        let read = |j: &Path| {
            let o = recover(&["classify", s(j), "--json", "--dry-run"]);
            assert!(o.status.success(), "classify: {}", text(&o.stderr));
            let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            v["journal"] = serde_json::Value::Null;
            v
        };
        assert_eq!(read(from), read(&to), "{name}: classify");
        let audit = |j: &Path| {
            let o = recover(&["audit", s(j), "--json"]);
            assert!(o.status.success(), "audit: {}", text(&o.stderr));
            let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            v["journal"] = serde_json::Value::Null;
            v
        };
        assert_eq!(audit(from), audit(&to), "{name}: audit");
    }
}
