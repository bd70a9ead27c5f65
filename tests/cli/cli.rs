//! The `tooljournal` binary, end to end: exit codes and messages are a contract (DESIGN.md §10).

use crate::common;

use journal::{FsStorage, Journal, Options};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

fn tooljournal(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tooljournal"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A session of `n` events of varied sizes (`session/open`, then turns opened and ended), in a
/// fresh directory: `journal verify` decodes and checks events as `recover` does.
fn journal_with(n: u64) -> tempfile::TempDir {
    use runtime::event::{Event, Record, SessionOpen, TurnOutcome, EVENT_SCHEMA_VERSION};
    let dir = tempfile::tempdir().unwrap();
    let storage = FsStorage::create(dir.path()).unwrap();
    let (journal, _) = Journal::open(Arc::new(storage), Options::default()).unwrap();
    for i in 0..n {
        let turn = (i as u32).div_ceil(2);
        let event = match i {
            0 => Event::SessionOpen(SessionOpen {
                schema_version: EVENT_SCHEMA_VERSION,
                session_id: "s".into(),
                workspace: "/w".into(),
                tools: Vec::new(),
            }),
            i if i % 2 == 1 => Event::TurnStart {
                turn,
                user_text: "u".repeat((i as usize * 13) % 200),
            },
            _ => Event::TurnEnd {
                turn,
                outcome: TurnOutcome::Completed,
            },
        };
        journal.append(&Record { at_ms: i, event }).unwrap();
    }
    journal.close().unwrap();
    dir
}

/// A journal of `n` raw records (byte vectors, not events) of varied sizes: for `dump`, which
/// lists frames without decoding them.
fn raw_journal_with(n: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let storage = FsStorage::create(dir.path()).unwrap();
    let (journal, _) = Journal::open(Arc::new(storage), Options::default()).unwrap();
    for i in 0..n {
        journal
            .append(&vec![i as u8; (i as usize * 13) % 200])
            .unwrap();
    }
    journal.close().unwrap();
    dir
}

/// Where each record of the journal in `dir` starts in segment 0.
fn record_offsets(dir: &Path) -> Vec<u64> {
    let storage: Arc<dyn journal::Storage> = Arc::new(FsStorage::open(dir).unwrap());
    journal::Reader::open(storage, journal::Limits::default())
        .unwrap()
        .map(|r| r.unwrap().position.offset)
        .collect()
}

fn segment0(dir: &Path) -> std::path::PathBuf {
    dir.join(journal::segment::file_name(0))
}

#[test]
fn verify_clean_journal_exits_0_and_counts_records() {
    let dir = journal_with(5);
    let out = tooljournal(&["journal", "verify", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("clean: 5 records"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn verify_torn_tail_exits_0_and_says_what_a_resume_drops() {
    let dir = journal_with(3);
    let path = segment0(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    let valid = bytes.len();
    bytes.extend_from_slice(&[9, 0, 0, 0, 1, 2]);
    std::fs::write(&path, &bytes).unwrap();
    let out = tooljournal(&["journal", "verify", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "torn tail at segment 00000000000000000000.segment offset {valid}"
        )),
        "{stdout}"
    );
    assert!(stdout.contains("would drop 6 bytes"), "{stdout}");
}

#[test]
fn verify_corruption_exits_2_naming_segment_and_offset() {
    let dir = journal_with(4);
    let path = segment0(dir.path());
    let second = record_offsets(dir.path())[1] as usize;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[second + 12] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let out = tooljournal(&["journal", "verify", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains(&format!(
            "segment 00000000000000000000.segment offset {second}"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("checksum mismatch"), "{stderr}");
}

#[test]
fn scenario_08_a_future_format_version_exits_2_and_says_so() {
    let dir = journal_with(1);
    let path = segment0(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8] = 3;
    std::fs::write(&path, &bytes).unwrap();
    let out = tooljournal(&["journal", "verify", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unsupported format version 3"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn missing_directory_and_bad_usage_exit_1() {
    let out = tooljournal(&["journal", "verify", "/nonexistent/tooljournal-test"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("/nonexistent/tooljournal-test"),
        "{}",
        text(&out.stderr)
    );

    let out = tooljournal(&["journal", "frobnicate"]);
    assert_eq!(out.status.code(), Some(1));
    let out = tooljournal(&["journal", "verify"]);
    assert_eq!(out.status.code(), Some(1));
    let out = tooljournal(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("journal"));
}

/// A journal path that is a plain file: every command names the path once and says what is in
/// the way (never "jf: … jf is not a directory", never "File exists (os error 17)").
#[test]
fn a_journal_path_that_is_a_file_is_named_once_with_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let jf = dir.path().join("jf");
    std::fs::write(&jf, b"not a journal").unwrap();
    let jf_s = jf.to_str().unwrap();
    let ws = dir.path().to_str().unwrap();
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/src/demo.jsonl");
    let runs: [(&[&str], &str); 3] = [
        (&["journal", "verify", jf_s], "not a directory"),
        (
            &[
                "run",
                "--script",
                demo,
                "--workspace",
                ws,
                "--journal",
                jf_s,
            ],
            "something that is not a directory has that name",
        ),
        (&["resume", "--journal", jf_s], "not a directory"),
    ];
    for (args, said) in runs {
        let out = tooljournal(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
        assert_eq!(stderr.matches(jf_s).count(), 1, "{args:?}: {stderr}");
        assert!(!stderr.contains("os error"), "{args:?}: {stderr}");
    }
    assert_eq!(std::fs::read(&jf).unwrap(), b"not a journal");
}

#[test]
fn dump_json_lists_every_record_back_to_back() {
    let dir = raw_journal_with(6);
    let out = tooljournal(&["journal", "dump", dir.path().to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let rows: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(rows.len(), 6);
    let mut offset = 48;
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["seq"], i as u64 + 1);
        assert_eq!(row["segment"], 0);
        assert_eq!(row["offset"], offset);
        let payload_len = (i * 13) % 200;
        // Frame: 8 (length + crc) + 8 (seq) + payload (length + bytes). A new journal is
        // format 2, where a length below 251 is one byte.
        assert_eq!(row["length"], (16 + 1 + payload_len) as u64);
        offset += row["length"].as_u64().unwrap();
    }
    assert_eq!(
        offset,
        std::fs::metadata(segment0(dir.path())).unwrap().len()
    );

    let out = tooljournal(&["journal", "dump", dir.path().to_str().unwrap()]);
    assert_eq!(
        text(&out.stdout).lines().next(),
        Some("seq=1 segment=0 offset=48 length=17")
    );
}

#[test]
fn demo_runs_every_feature_and_leaves_a_clean_journal_behind() {
    let out = tooljournal(&["demo"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let journal_dir = stdout
        .lines()
        .find_map(|l| l.strip_prefix("journal: "))
        .expect("the demo prints its journal directory")
        .to_owned();
    // Each thing the demo is meant to show, by the code it ends with: the code as a whole word
    // (ABORTED_BEFORE_DISPATCH is not ABORTED).
    let words: Vec<&str> = stdout
        .split(|c: char| !(c.is_ascii_uppercase() || c == '_'))
        .collect();
    for code in [
        "FS_STALE_VERSION",
        "FS_OUTSIDE_WORKSPACE",
        "QUESTION_DECLINED",
        "ABORTED",
        "ABORTED_BEFORE_DISPATCH",
        "TRUNCATED_CALL",
    ] {
        assert!(words.contains(&code), "the demo shows {code}:\n{stdout}");
    }
    let verify = tooljournal(&["journal", "verify", &journal_dir]);
    assert_eq!(verify.status.code(), Some(0));
    assert!(
        text(&verify.stdout).contains("clean:"),
        "{}",
        text(&verify.stdout)
    );
    let storage = journal::FsStorage::open(&journal_dir).unwrap();
    let (replay, _) =
        runtime::replay::replay_storage(Arc::new(storage), journal::Limits::default()).unwrap();
    assert!(replay.closed);
    assert_eq!(replay.calls().count(), 14);
    // The grep result was too large for the model: it got a preview naming the spilled blob.
    let grep = replay.calls().find(|c| c.tool == "grep").unwrap();
    let seen = &grep.committed.as_ref().unwrap().content;
    assert!(seen.contains("bytes omitted"), "{seen}");
    // The questions: d10 declined, d11 answered by choosing an option and adding words; the
    // model reads the answer as the call's result.
    let call = |id: &str| replay.calls().find(|c| c.call.call_id == id).unwrap();
    use runtime::event::{Answer, Reply};
    let declined = call("d10");
    assert_eq!(
        declined.asks[0].reply,
        Some(Reply::Declined { text: None }),
        "{declined:?}"
    );
    assert_eq!(
        declined.committed.as_ref().unwrap().code,
        Some(runtime::ErrorCode::QuestionDeclined)
    );
    let answered = call("d11");
    let question = answered.asks[0].structured.as_ref().expect("ask/question");
    let labels: Vec<_> = question.options.iter().map(|o| o.label.as_str()).collect();
    assert_eq!(labels, ["timeouts", "everything"]);
    assert_eq!(
        answered.asks[0].reply,
        Some(Reply::Answered(Answer {
            choice: vec!["timeouts".into()],
            text: Some("oldest first".into()),
        }))
    );
    let result = answered.committed.as_ref().unwrap();
    assert!(!result.is_error);
    assert_eq!(
        result.content,
        "The user chose: timeouts\nThe user wrote: oldest first"
    );
    // The crashed copy it leaves recovers truthfully: d12 was running, d13 queued behind it.
    let crashed = Path::new(&journal_dir)
        .parent()
        .unwrap()
        .join("crashed-journal");
    let r = recover::Recovery::of(&crashed).run().unwrap();
    let class = |id: &str| {
        r.analysis
            .calls
            .iter()
            .find(|c| c.call.call_id == id)
            .unwrap()
            .classification
    };
    use runtime::event::Classification::*;
    assert_eq!(class("d12"), Some(ToolOutcomeUnknown));
    assert_eq!(class("d13"), Some(ToolNotStarted));
    assert_eq!(
        class("d11"),
        None,
        "the answered question is committed before the crash"
    );
    assert_eq!(class("d1"), None);
    assert!(r.analysis.end.torn);
    std::fs::remove_dir_all(Path::new(&journal_dir).parent().unwrap()).unwrap();
}

#[test]
fn a_closed_stdout_ends_dump_quietly_not_with_a_panic() {
    use std::io::{BufRead, BufReader};
    // Enough records that the output outgrows the pipe buffer.
    let dir = journal_with(20_000);
    let mut child = Command::new(env!("CARGO_BIN_EXE_tooljournal"))
        .args(["journal", "dump", dir.path().to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("seq=1 "), "{first}");
    // The reader is dropped here: like `| head -1`.
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// Each segment of the journal in `dir` ends where its last frame ends (a segment without
/// records at its header): a clean exit leaves none of the zeros a live format-2 segment holds
/// ahead of its records.
fn assert_ends_at_last_frame(dir: &Path, what: &str) {
    let storage: Arc<dyn journal::Storage> = Arc::new(FsStorage::open(dir).unwrap());
    let mut reader = journal::Reader::open(storage, journal::Limits::default()).unwrap();
    let mut ends = std::collections::BTreeMap::new();
    for record in reader.by_ref() {
        let record = record.unwrap();
        ends.insert(
            record.position.segment,
            record.position.offset + record.frame_bytes,
        );
    }
    assert_eq!(reader.end(), Some(&journal::ReadEnd::Clean), "{what}");
    assert!(!ends.is_empty(), "{what}: the journal holds records");
    let mut segments = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(number) = journal::segment::parse_file_name(&name) else {
            continue;
        };
        segments += 1;
        let header = journal::segment::HEADER_BYTES as u64;
        let end = ends.get(&number).copied().unwrap_or(header);
        assert_eq!(
            entry.metadata().unwrap().len(),
            end,
            "{what}: {name} runs past its last record (at {end})"
        );
    }
    assert_eq!(
        segments,
        ends.len(),
        "{what}: a segment per records' segment"
    );
}

/// `run` (scripted and live), `resume`, `chat`, `demo` and `recover import` each exit
/// cleanly with every segment ending at its last record: a finished session keeps no MiB of
/// zeros.
#[test]
fn scenario_132_every_commands_clean_exit_leaves_its_segments_ending_at_their_last_record() {
    use common::models::{shown, spec, Case};
    use mockllm::{Answer, Format};
    let format = Format::OpenAiChat;

    let demo = tooljournal(&["demo"]);
    assert_eq!(demo.status.code(), Some(0), "{}", text(&demo.stderr));
    let demo_journal = text(&demo.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("journal: ").map(str::to_owned))
        .expect("the demo prints its journal directory");
    assert_ends_at_last_frame(Path::new(&demo_journal), "demo");
    std::fs::remove_dir_all(Path::new(&demo_journal).parent().unwrap()).unwrap();

    let scripted = Case::new();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/basic.jsonl");
    let out = scripted
        .command(format)
        .arg("run")
        .arg("--script")
        .arg(&script)
        .arg("--workspace")
        .arg(scripted.workspace())
        .arg("--journal")
        .arg(scripted.journal())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    assert_ends_at_last_frame(&scripted.journal(), "run --script");

    let live = Case::new();
    live.server
        .push(format, Answer::text("the first answer").into());
    let out = live.run(format, &["a first question"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    assert_ends_at_last_frame(&live.journal(), "run --model");
    live.server
        .push(format, Answer::text("the second answer").into());
    let out = live.resume(format, Some("a second question"), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    assert_ends_at_last_frame(&live.journal(), "resume --prompt");

    let chat = Case::new();
    chat.server.push(format, Answer::text("hello there").into());
    let mut child = chat
        .command(format)
        .args(["chat", "--model", &spec(format), "--base-url"])
        .arg(chat.server.base_url(format))
        .arg("--workspace")
        .arg(chat.workspace())
        .arg("--journal")
        .arg(chat.journal())
        .arg("--config")
        .arg(chat.config())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, b"hello\n").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    assert_ends_at_last_frame(&chat.journal(), "chat");

    let imported = tempfile::tempdir().unwrap();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/import/codex/normal.jsonl");
    let out = Command::new(common::recover_bin::recover_bin())
        .args(["import", "--from", "codex"])
        .arg(&file)
        .arg("--journal")
        .arg(imported.path().join("journal"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_ends_at_last_frame(&imported.path().join("journal"), "recover import");
}
