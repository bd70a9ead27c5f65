//! The `recover` binary's commands end to end on golden journals built event by event (each
//! test says in its name what situation it holds), checked against what DESIGN.md §6 says:
//! classification, idempotence, dry runs, torn tails cut and corruption refused (exit 2),
//! salvage, live sessions left alone, empty directories, bad usage, one result per call id in
//! every format, process groups a call left running.

use crate::common;

use common::*;
use journal::{FsStorage, Journal, Options};
use runtime::event::*;
use serde_json::Value;
use std::process::Command;
use std::sync::Arc;

#[test]
fn scenario_18_only_the_middle_of_three_had_started() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1", "c2", "c3"]);
    for id in ["c1", "c2", "c3"] {
        b.approve(id);
    }
    b.start("c2");
    b.done();
    let v = classify_json(dir.path(), &[]);
    assert_eq!(by_id(&v, "c1")["classification"], "TOOL_NOT_STARTED");
    assert_eq!(by_id(&v, "c2")["classification"], "TOOL_OUTCOME_UNKNOWN");
    assert_eq!(by_id(&v, "c3")["classification"], "TOOL_NOT_STARTED");
    assert_eq!(by_id(&v, "c2")["state"], "started");
    assert_eq!(by_id(&v, "c1")["state"], "approved");
    let resources: Vec<&str> = by_id(&v, "c2")["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(resources, ["write:m.txt", "intent:mark it"]);
    assert_eq!(v["end"]["kind"], "clean");
}

#[test]
fn scenario_19_a_settled_but_uncommitted_call_keeps_its_real_result() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["ok", "bad"]);
    for id in ["ok", "bad"] {
        b.approve(id);
        b.start(id);
    }
    b.settle("ok", true);
    b.settle("bad", false);
    b.done();
    let v = classify_json(dir.path(), &[]);
    assert_eq!(by_id(&v, "ok")["classification"], Value::Null);
    assert_eq!(by_id(&v, "ok")["state"], "settled");
    let audit = recover(&["audit", dir.path().to_str().unwrap(), "--json"]);
    let audit: Value = serde_json::from_slice(&audit.stdout).unwrap();
    let calls = audit["calls"].as_array().unwrap();
    assert_eq!(
        calls[0]["result_code"],
        Value::Null,
        "a success stays a success (I4)"
    );
    assert_eq!(
        calls[1]["result_code"], "TOOL_FAILED",
        "a known error stays that error"
    );
    assert!(calls[0]["side_effects"][0]
        .as_str()
        .unwrap()
        .starts_with("wrote m.txt"));
    assert_eq!(audit["totals"]["outcome_unknown"], 0);
}

#[test]
fn scenario_31_a_second_recovery_appends_nothing_and_prints_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1", "c2"]);
    b.approve("c1");
    b.start("c1");
    b.done();
    let first = recover(&["classify", dir.path().to_str().unwrap(), "--json"]);
    assert!(
        text(&first.stderr).contains("recovery appended"),
        "{}",
        text(&first.stderr)
    );
    let after_first = segment_bytes(dir.path());
    let second = recover(&["classify", dir.path().to_str().unwrap(), "--json"]);
    assert_eq!(first.stdout, second.stdout, "same bytes out (I5)");
    assert_eq!(
        segment_bytes(dir.path()),
        after_first,
        "nothing appended the second time"
    );
    assert!(!text(&second.stderr).contains("recovery appended"));
    // Exactly one recovery event in the journal.
    let storage = Arc::new(FsStorage::open(dir.path()).unwrap());
    let (replay, _) = runtime::replay::replay_storage(storage, journal::Limits::default()).unwrap();
    assert_eq!(replay.recoveries.len(), 1);
    assert_eq!(replay.turns[0].outcome, Some(TurnOutcome::Interrupted));
}

#[test]
fn scenario_32_dry_run_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1"]);
    b.done();
    let mut bytes = segment_bytes(dir.path());
    bytes.extend_from_slice(&[7, 0, 0, 0, 1]);
    std::fs::write(dir.path().join(journal::segment::file_name(0)), &bytes).unwrap();
    let v = classify_json(dir.path(), &["--dry-run"]);
    assert_eq!(v["end"]["kind"], "torn_tail");
    assert_eq!(v["end"]["dropped_bytes"], 5);
    assert_eq!(segment_bytes(dir.path()), bytes, "not a byte changed");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.to_string_lossy().contains("torn-at")),
        "no quarantine file: {names:?}"
    );
}

#[test]
fn scenario_02_a_torn_tail_is_cut_and_the_bytes_before_it_are_never_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1"]);
    b.done();
    let mut bytes = segment_bytes(dir.path());
    let valid = bytes.len();
    // A torn last page: garbage, not a frame, to its end (in format 2 a zero-filled one would
    // be where the records end, FORMAT.md *Preallocated tail*).
    bytes.resize(valid + 4096, 0xab);
    std::fs::write(dir.path().join(journal::segment::file_name(0)), &bytes).unwrap();
    let first = classify_json(dir.path(), &[]);
    assert_eq!(
        first["end"],
        serde_json::json!({"kind": "torn_tail", "dropped_bytes": 4096})
    );
    let quarantine = dir.path().join(format!(
        "{}.torn-at-{valid}",
        journal::segment::file_name(0)
    ));
    assert_eq!(
        std::fs::read(&quarantine).unwrap(),
        vec![0xab; 4096],
        "evidence first"
    );
    assert!(
        segment_bytes(dir.path()).starts_with(&bytes[..valid]),
        "the prefix is never rewritten"
    );
    let second = classify_json(dir.path(), &[]);
    assert_eq!(first, second);
}

#[test]
fn scenario_03_a_bad_record_before_valid_ones_exits_2_naming_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1", "c2"]);
    b.approve("c1");
    b.done();
    let mut bytes = segment_bytes(dir.path());
    // Damage the second record's payload.
    let second = frame_offsets(&bytes)[1];
    bytes[second + 20] ^= 0x01;
    std::fs::write(dir.path().join(journal::segment::file_name(0)), &bytes).unwrap();
    for args in [
        vec!["classify"],
        vec!["classify", "--dry-run"],
        vec!["audit"],
        vec!["verify"],
    ] {
        let mut full = args.clone();
        full.insert(1, dir.path().to_str().unwrap());
        let out = recover(&full);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains(&format!("offset {second}")),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    assert_eq!(
        segment_bytes(dir.path()),
        bytes,
        "corruption is never repaired"
    );
}

#[test]
fn scenario_33_a_live_session_is_reported_live_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = Journal::open(
        Arc::new(FsStorage::create(dir.path()).unwrap()),
        Options::default(),
    )
    .unwrap();
    for event in [
        Event::SessionOpen(SessionOpen {
            schema_version: 1,
            session_id: "live".into(),
            workspace: "/ws".into(),
            tools: vec![],
        }),
        Event::TurnStart {
            turn: 1,
            user_text: "hi".into(),
        },
    ] {
        let seq = journal.append(&Record { at_ms: 1, event }).unwrap();
        journal.sync_through_blocking(seq).unwrap();
    }
    let before = segment_bytes(dir.path());
    let v = classify_json(dir.path(), &[]);
    assert_eq!(v["live"], true);
    assert_eq!(
        segment_bytes(dir.path()),
        before,
        "nothing appended to a live journal"
    );
    drop(journal);
}

#[test]
fn an_empty_journal_directory_is_an_empty_session() {
    let dir = tempfile::tempdir().unwrap();
    let v = classify_json(dir.path(), &[]);
    assert_eq!(v["calls"], serde_json::json!([]));
    assert_eq!(v["end"]["kind"], "clean");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing created"
    );
}

#[test]
fn bad_usage_and_missing_directories_exit_1() {
    assert_eq!(recover(&["classify"]).status.code(), Some(1));
    assert_eq!(recover(&["frobnicate", "x"]).status.code(), Some(1));
    let out = recover(&["classify", "/nonexistent/recover-test"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("/nonexistent/recover-test"));
}

#[test]
fn scenario_03_salvage_skips_the_bad_record_lists_it_and_the_calls_it_touched() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1", "c2"]);
    b.approve("c1");
    b.approve("c2");
    b.done();
    let mut bytes = segment_bytes(dir.path());
    // Damage the `parsed` record of c1 (records: open, turn, step, response, received x2, parsed c1 …).
    let parsed_c1 = frame_offsets(&bytes)[6];
    bytes[parsed_c1 + 20] ^= 0x01;
    std::fs::write(dir.path().join(journal::segment::file_name(0)), &bytes).unwrap();

    let v = classify_json(dir.path(), &["--salvage"]);
    let skipped = v["salvage"]["skipped"].as_array().unwrap();
    assert_eq!(skipped[0]["offset"], parsed_c1 as u64);
    assert!(skipped[0]["what"].as_str().unwrap().contains("checksum"));
    // c1's `approved` no longer follows anything it can: that record is listed too.
    let events = v["salvage"]["skipped_events"].as_array().unwrap();
    assert!(!events.is_empty());
    let affected: Vec<&str> = v["salvage"]["affected_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["call_id"].as_str().unwrap())
        .collect();
    assert!(affected.contains(&"c1"), "{affected:?}");
    assert_eq!(by_id(&v, "c2")["classification"], "TOOL_NOT_STARTED");
    for format in ["openai-chat", "anthropic"] {
        let out = recover(&[
            "rebuild",
            dir.path().to_str().unwrap(),
            "--format",
            format,
            "--salvage",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("SALVAGED"),
            "{}",
            text(&out.stderr)
        );
    }
    assert_eq!(segment_bytes(dir.path()), bytes, "salvage never writes");
}

#[test]
fn scenario_23_every_format_gets_exactly_one_result_per_call_id() {
    let dir = tempfile::tempdir().unwrap();
    // The tool's schema journaled: every body is whole (Anthropic takes no calls without tools).
    settled_unknown_and_not_started_shown(dir.path());
    for format in ["openai-chat", "openai-responses", "anthropic", "gemini"] {
        let out = recover(&["rebuild", dir.path().to_str().unwrap(), "--format", format]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{format}: {}",
            text(&out.stderr)
        );
        let body: Value = serde_json::from_slice(&out.stdout).unwrap();
        let f: recover::providers::Format = format.parse().unwrap();
        recover::providers::validate(f, &body).unwrap();
        let s = body.to_string();
        assert_eq!(
            s.matches("TOOL_OUTCOME_UNKNOWN").count(),
            1,
            "{format}: {s}"
        );
        assert_eq!(s.matches("TOOL_NOT_STARTED").count(), 1, "{format}: {s}");
        assert!(
            s.contains("marked"),
            "{format}: the settled call keeps its real result"
        );
    }
    let out = recover(&["rebuild", dir.path().to_str().unwrap(), "--format", "cobol"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn classify_warns_on_stderr_about_a_process_group_a_call_left_running() {
    use std::os::unix::process::CommandExt;
    // A process group of our own, standing for a command a crashed run left behind.
    let mut orphan = Command::new("sleep")
        .arg("300")
        .process_group(0)
        .spawn()
        .expect("sleep starts");
    let pid = orphan.id();
    let process = runtime::process::identify(pid, pid).expect("it has a stat");
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["a"]);
    b.approve("a");
    b.start("a");
    b.put(Event::CallProcess {
        call: call("a"),
        process,
    });
    b.journal.close().unwrap();
    let path = dir.path().to_str().unwrap();

    let out = recover(&["classify", "--dry-run", path]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let warning = format!("still running: process group {pid} (1 processes)");
    assert!(
        text(&out.stderr).contains(&warning),
        "{}",
        text(&out.stderr)
    );
    // Stdout is the journal's alone: the world's state stays out of it.
    let stdout = text(&out.stdout);
    assert!(!stdout.contains("still running"), "{stdout}");

    orphan.kill().unwrap();
    orphan.wait().unwrap();
    let again = recover(&["classify", "--dry-run", path]);
    assert_eq!(again.status.code(), Some(0));
    assert!(
        !text(&again.stderr).contains("still running"),
        "{}",
        text(&again.stderr)
    );
    assert_eq!(
        text(&again.stdout),
        stdout,
        "the same journal, the same stdout"
    );
}
