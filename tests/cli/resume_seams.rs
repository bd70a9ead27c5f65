//! `tooljournal resume` at the seams: recovery, which resume runs
//! first, never breaks a finished session, never touches a corrupt journal, and records a cut an
//! interrupted repair left unrecorded.

use journal::{FsStorage, Journal, Limits, Options};
use runtime::event::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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

fn resume(dir: &Path) -> Output {
    tooljournal(&["resume", "--journal", dir.to_str().unwrap()])
}

fn put(journal: &Journal, event: Event) {
    journal
        .append(&Record {
            at_ms: 1_000,
            event,
        })
        .unwrap();
}

/// session/open, then turn 1 with one step whose response asks for nothing (or, with `id`,
/// for one call that was received and never went further). The response and the call's
/// arguments carry `padding_bytes` each, so that small segments make several.
fn session(dir: &Path, options: Options, id: Option<&str>, padding_bytes: usize) -> Journal {
    let (journal, _) = Journal::open(Arc::new(FsStorage::create(dir).unwrap()), options).unwrap();
    put(
        &journal,
        Event::SessionOpen(SessionOpen {
            schema_version: 1,
            session_id: "seams".into(),
            workspace: "/ws".into(),
            tools: vec![],
        }),
    );
    put(
        &journal,
        Event::TurnStart {
            turn: 1,
            user_text: "go".into(),
        },
    );
    put(&journal, Event::StepStart { turn: 1, step: 1 });
    let arguments = format!("{{\"p\":\"{}\"}}", "x".repeat(padding_bytes));
    let response_seq = journal
        .append(&Record {
            at_ms: 1_000,
            event: Event::LlmResponse {
                turn: 1,
                step: 1,
                response: ModelResponse {
                    text: "y".repeat(padding_bytes),
                    tool_calls: id
                        .map(|id| ModelCall {
                            call_id: id.into(),
                            name: "mark".into(),
                            arguments: arguments.clone(),
                        })
                        .into_iter()
                        .collect(),
                    stop_reason: StopReason::EndTurn,
                },
            },
        })
        .unwrap();
    if let Some(id) = id {
        put(
            &journal,
            Event::Received {
                call: CallRef {
                    turn: 1,
                    step: 1,
                    call_id: id.into(),
                },
                index: 0,
                tool: "mark".into(),
                raw_arguments: arguments,
                source_seqs: vec![response_seq],
            },
        );
    }
    journal
}

fn closed_session(dir: &Path) {
    let journal = session(dir, Options::default(), None, 10);
    put(
        &journal,
        Event::StepEnd {
            turn: 1,
            step: 1,
            outcome: StepOutcome::Completed,
        },
    );
    put(
        &journal,
        Event::TurnEnd {
            turn: 1,
            outcome: TurnOutcome::Completed,
        },
    );
    put(&journal, Event::SessionClose);
    journal.close().unwrap();
}

fn last_segment(dir: &Path) -> PathBuf {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "segment"))
        .collect();
    names.sort();
    names.pop().unwrap()
}

fn append_bytes(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

/// Every file's name and bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn replay(dir: &Path) -> runtime::replay::SessionReplay {
    let storage = Arc::new(FsStorage::open(dir).unwrap());
    let (replay, end) = runtime::replay::replay_storage(storage, Limits::default())
        .unwrap_or_else(|e| panic!("replay refuses the journal: {e}"));
    assert_eq!(end, journal::ReadEnd::Clean);
    replay
}

#[test]
fn resume_cuts_a_finished_sessions_torn_tail_and_leaves_it_finished() {
    for tail in [b"\x20\x00\x00\x00garbage".to_vec(), vec![0u8; 4096]] {
        let dir = tempfile::tempdir().unwrap();
        closed_session(dir.path());
        let segment = last_segment(dir.path());
        let healthy = std::fs::read(&segment).unwrap();
        append_bytes(&segment, &tail);
        for attempt in ["first", "second"] {
            let out = resume(dir.path());
            assert_eq!(
                out.status.code(),
                Some(0),
                "{attempt}: {}",
                text(&out.stderr)
            );
            assert!(
                text(&out.stdout).contains("already finished"),
                "{attempt}: {}",
                text(&out.stdout)
            );
        }
        // Garbage is a torn tail, cut; zeros after the last record are where a format-2
        // segment's records end (its zeros written ahead), not torn: nothing to cut.
        let mut expected = healthy.clone();
        if tail.iter().all(|&b| b == 0) {
            expected.extend_from_slice(&tail);
        }
        assert!(
            std::fs::read(&segment).unwrap() == expected,
            "the healthy journal, and the zeros after it if those were the tail"
        );
        let r = replay(dir.path());
        assert!(r.closed && r.recoveries.is_empty());
        let verify = tooljournal(&["journal", "verify", dir.path().to_str().unwrap()]);
        assert_eq!(verify.status.code(), Some(0), "{}", text(&verify.stderr));
    }
}

#[test]
fn resume_of_a_corrupt_journal_with_a_torn_tail_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        limits: Limits {
            segment_size_bytes_max: 300,
            ..Limits::default()
        },
        ..Options::default()
    };
    session(dir.path(), options, Some("c1"), 200)
        .close()
        .unwrap();
    let first = dir.path().join(journal::segment::file_name(0));
    assert!(
        last_segment(dir.path()) >= dir.path().join(journal::segment::file_name(2)),
        "segment 0 is not among the last two, which a writer's reopen reads"
    );
    // Damage segment 0's second record (turn/start); tear the last segment.
    let mut bytes = std::fs::read(&first).unwrap();
    let header = journal::segment::HEADER_BYTES;
    let second =
        header + 8 + u32::from_le_bytes(bytes[header..header + 4].try_into().unwrap()) as usize;
    bytes[second + 20] ^= 0x01;
    std::fs::write(&first, &bytes).unwrap();
    append_bytes(&last_segment(dir.path()), &[0u8; 700]);
    let before = files(dir.path());
    let out = resume(dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!("offset {second}")),
        "{}",
        text(&out.stderr)
    );
    let after = files(dir.path());
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "nothing created or removed"
    );
    for (name, bytes) in &before {
        assert!(&after[name] == bytes, "{name}: not a byte changed");
    }
}

#[test]
fn resume_records_the_cut_of_a_repair_killed_halfway() {
    let dir = tempfile::tempdir().unwrap();
    session(dir.path(), Options::default(), Some("c1"), 10)
        .close()
        .unwrap();
    append_bytes(&last_segment(dir.path()), &[0x77u8; 123]);
    // Reopening quarantines and cuts; the process dies before anything is appended.
    let (journal, report) = Journal::open(
        Arc::new(FsStorage::open(dir.path()).unwrap()),
        Options::default(),
    )
    .unwrap();
    drop(journal);
    let quarantine = report.quarantine_file.unwrap();
    let out = resume(dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&quarantine),
        "{}",
        text(&out.stderr)
    );
    let r = replay(dir.path());
    assert_eq!(r.recoveries.len(), 1);
    assert_eq!(r.recoveries[0].dropped_bytes, 123);
}
