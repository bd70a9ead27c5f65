//! The probe: for a call whose outcome is unknown, `recover` looks at the
//! workspace (reading only, confined, following no symlink) and compares it with what the call
//! recorded before it acted.
//!
//! The journals of the first tests are a real session's: the runtime's own `write` and `edit`
//! tools, run through `runtime::Session`, the journal then cut right after the call's `started`
//! record (a copy of the journal with every byte after that record removed, as a power loss
//! after the write-ahead sync leaves it). The file is then set to each state by the test, and
//! the verdict checked through the library and through the `recover` binary. Paths the tools
//! would never record (`../x`, a symlink, a directory) and process groups come from journals
//! made by hand.

use crate::common;

use common::{forged, recover, text};
use journal::{FsStorage, Journal, Limits, Options, Reader};
use recover::RecoverError;
use recover::Recovery;
use recover::{Prober, Verdict};
use runtime::event::{
    idempotency_key, CallRef, Classification, Event, Evidence, ModelCall, ModelResponse, Record,
    StepOutcome, StopReason, ToolSource,
};
use runtime::ManualClock;
use runtime::Registry;
use runtime::Workspace;
use runtime::{Config, Session, SessionOptions};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn sha(bytes: &str) -> String {
    hex::encode(Sha256::digest(bytes.as_bytes()))
}

const BEFORE: &str = "the old text\n";
const AFTER: &str = "the new text\n";
const OTHER: &str = "someone else's text\n";

fn call(id: &str, step: u32) -> CallRef {
    CallRef {
        turn: 1,
        step,
        call_id: id.into(),
    }
}

fn model_call(id: &str, name: &str, arguments: Value) -> ModelCall {
    ModelCall {
        call_id: id.into(),
        name: name.into(),
        arguments: arguments.to_string(),
    }
}

/// Runs one turn of steps, each a batch of calls, with the runtime's file tools confined to
/// `ws`; the journal goes to `journal` (session id `probe`). The session is not closed.
fn record(journal: &Path, ws: &Path, steps: Vec<Vec<ModelCall>>) {
    let workspace = Arc::new(Workspace::new(ws, &[journal.to_owned()]).unwrap());
    let mut registry = Registry::new();
    for tool in runtime::fs::file_tools(workspace) {
        registry.register(tool, ToolSource::BuiltIn).unwrap();
    }
    let (j, _) = Journal::open(
        Arc::new(FsStorage::create(journal).unwrap()),
        Options::default(),
    )
    .unwrap();
    let mut session = Session::open(
        j,
        Arc::new(registry),
        runtime::Hooks::default(),
        Config::default(),
        SessionOptions {
            session_id: Some("probe".into()),
            workspace: ws.to_string_lossy().into_owned(),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
        },
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        session.begin_turn("change the file").unwrap();
        for calls in steps {
            session.begin_step().unwrap();
            let results = session
                .run_batch(ModelResponse {
                    text: "on it".into(),
                    tool_calls: calls,
                    stop_reason: StopReason::ToolUse,
                })
                .await
                .unwrap();
            for r in &results {
                assert!(!r.is_error, "the recorded call failed: {r:?}");
            }
            session.end_step(StepOutcome::Completed).unwrap();
        }
    });
}

/// A copy of the journal in `from`, cut right after the `started` record of `id`: what a power
/// loss right after the write-ahead sync leaves (the body's `settled` never reached the disk).
fn cut_after_started(from: &Path, id: &str, to: &Path) {
    let storage = Arc::new(FsStorage::open(from).unwrap());
    let mut end = None;
    for r in Reader::open(storage, Limits::default()).unwrap() {
        let r = r.unwrap();
        let event = r.decode::<Record>().unwrap().event;
        if matches!(&event, Event::Started(s) if s.call.call_id == id) {
            assert_eq!(r.position.segment, 0, "one segment");
            end = Some(r.position.offset + r.frame_bytes);
        }
    }
    let end = end.unwrap_or_else(|| panic!("{id} has a schema-5 `started`"));
    std::fs::create_dir_all(to).unwrap();
    let segment = journal::segment::file_name(0);
    let bytes = std::fs::read(from.join(&segment)).unwrap();
    std::fs::write(to.join(&segment), &bytes[..end as usize]).unwrap();
}

/// A workspace holding `a.txt` (when `content` is given) and a journal directory next to it.
fn setup(content: Option<&str>) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    if let Some(c) = content {
        std::fs::write(ws.join("a.txt"), c).unwrap();
    }
    let journal = d.path().join("journal");
    (d, ws, journal)
}

/// The file's state for one probe: its content, or absent.
fn set(ws: &Path, content: Option<&str>) {
    let path = ws.join("a.txt");
    match content {
        Some(c) => std::fs::write(&path, c).unwrap(),
        None => {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Every entry below `root` (not following symlinks): kind, size, mtime and content (or link
/// target): what a probe must leave exactly as it found it.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, (String, u64, i64, i64, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_owned()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let m = std::fs::symlink_metadata(&path).unwrap();
            let (kind, content) = if m.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                ("symlink", target.into_os_string().into_encoded_bytes())
            } else if m.is_dir() {
                todo.push(path.clone());
                ("dir", Vec::new())
            } else {
                ("file", std::fs::read(&path).unwrap())
            };
            let key = path.strip_prefix(root).unwrap().to_owned();
            out.insert(
                key,
                (kind.into(), m.len(), m.mtime(), m.mtime_nsec(), content),
            );
        }
    }
    out
}

/// `recover classify DIR --dry-run --json --probe WS`, parsed.
fn classify_probe_all(journal: &Path, ws: &Path) -> Value {
    let out = recover(&[
        "classify",
        journal.to_str().unwrap(),
        "--dry-run",
        "--json",
        "--probe",
        ws.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The call `id`'s object in [`classify_probe_all`].
fn classify_probe(journal: &Path, ws: &Path, id: &str) -> Value {
    let v = classify_probe_all(journal, ws);
    v["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["call_id"] == id)
        .unwrap_or_else(|| panic!("{id} in {v}"))
        .clone()
}

/// Probes the call `id` of the journal in `journal` through the library and the binary, and
/// checks that both say `verdict` with `found` (the hash of what the file holds, `None`:
/// nothing readable), that the call stays TOOL_OUTCOME_UNKNOWN, and that nothing in the
/// workspace changed. Returns the binary's `probe` object.
fn check_verdict(journal: &Path, ws: &Path, id: &str, verdict: &str, found: Option<&str>) -> Value {
    let before = snapshot(ws.parent().unwrap());
    let r = Recovery::of(journal).probe(Some(ws)).run().unwrap();
    let c = r
        .analysis
        .calls
        .iter()
        .find(|c| c.call.call_id == id)
        .unwrap();
    assert_eq!(c.classification, Some(Classification::ToolOutcomeUnknown));
    let p = c.probe.as_ref().expect("an unknown call is probed");
    assert_eq!(p.verdict.as_str(), verdict, "library: {p:?}");
    assert_eq!(p.found_sha256.as_deref(), found, "library: {p:?}");
    // The binary's streamed listing says what the whole analysis says, probes included.
    let all = classify_probe_all(journal, ws);
    let name = journal.display().to_string();
    assert_eq!(all, recover::classify_json(&name, &r.analysis));
    let json = classify_probe(journal, ws, id);
    assert_eq!(json["classification"], "TOOL_OUTCOME_UNKNOWN", "{json}");
    let probe = json["probe"].clone();
    assert_eq!(probe["verdict"], verdict, "binary: {json}");
    assert_eq!(probe["found_sha256"], json!(found), "binary: {json}");
    assert_eq!(
        before,
        snapshot(ws.parent().unwrap()),
        "probing changed the workspace or the journal"
    );
    probe
}

/// A workspace whose `a.txt` holds `before` (absent: `None`), a session that wrote `AFTER` to
/// it (call `w1`), and a copy of its journal cut right after `w1`'s `started`: what a power loss
/// right after the write-ahead sync leaves. Returns the directory, the workspace and the cut
/// journal.
fn write_cut_after_started(before: Option<&str>) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (d, ws, full) = setup(before);
    record(
        &full,
        &ws,
        vec![vec![model_call(
            "w1",
            "write",
            json!({"path": "a.txt", "content": AFTER}),
        )]],
    );
    let journal = full.with_file_name("cut");
    cut_after_started(&full, "w1", &journal);
    (d, ws, journal)
}

#[test]
fn a_write_cut_after_its_started_is_probed_in_every_state_of_its_file() {
    let (_d, ws, journal) = write_cut_after_started(Some(BEFORE));

    set(&ws, Some(AFTER));
    let p = check_verdict(&journal, &ws, "w1", "applied", Some(&sha(AFTER)));
    assert_eq!(p["path"], "a.txt");
    assert_eq!(p["expected_sha256"], sha(AFTER));
    assert_eq!(p["before_sha256"], sha(BEFORE));
    assert_eq!(p["pgid"], Value::Null);
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("now holds exactly the content this call would have produced"),
        "{p}"
    );
    set(&ws, Some(BEFORE));
    check_verdict(&journal, &ws, "w1", "not_applied", Some(&sha(BEFORE)));
    set(&ws, Some(OTHER));
    check_verdict(&journal, &ws, "w1", "changed", Some(&sha(OTHER)));
    set(&ws, None);
    let p = check_verdict(&journal, &ws, "w1", "changed", None);
    assert!(p["detail"].as_str().unwrap().contains("is gone"), "{p}");
}

#[test]
fn a_write_that_creates_its_file_is_not_applied_while_the_file_is_absent() {
    let (_d, ws, journal) = write_cut_after_started(None);
    set(&ws, None);
    let p = check_verdict(&journal, &ws, "w1", "not_applied", None);
    assert_eq!(p["before_sha256"], Value::Null);
    assert!(
        p["detail"].as_str().unwrap().contains("still absent"),
        "{p}"
    );
    set(&ws, Some(AFTER));
    check_verdict(&journal, &ws, "w1", "applied", Some(&sha(AFTER)));
    set(&ws, Some(OTHER));
    check_verdict(&journal, &ws, "w1", "changed", Some(&sha(OTHER)));
}

#[test]
fn an_edit_cut_after_its_started_is_probed_in_every_state_of_its_file() {
    let (_d, ws, full) = setup(Some(BEFORE));
    record(
        &full,
        &ws,
        vec![
            vec![model_call("r1", "read", json!({"path": "a.txt"}))],
            vec![model_call(
                "e1",
                "edit",
                json!({"path": "a.txt", "old_string": "old", "new_string": "new"}),
            )],
        ],
    );
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), AFTER);
    let journal = full.with_file_name("cut");
    cut_after_started(&full, "e1", &journal);
    for (state, verdict) in [
        (Some(AFTER), "applied"),
        (Some(BEFORE), "not_applied"),
        (Some(OTHER), "changed"),
        (None, "changed"),
    ] {
        set(&ws, state);
        check_verdict(&journal, &ws, "e1", verdict, state.map(sha).as_deref());
    }
}

#[test]
fn the_recovery_appended_states_the_evidence_and_a_later_run_keeps_it() {
    let (_d, ws, journal) = write_cut_after_started(Some(BEFORE));
    // The body ran: the file holds what it wrote.
    let r = Recovery::of(&journal)
        .write(true)
        .probe(Some(&ws))
        .run()
        .unwrap();
    assert!(r.appended);
    let content = common::replay_dir(&journal)
        .call(&call("w1", 1))
        .unwrap()
        .committed
        .clone()
        .unwrap()
        .content;
    let expected = format!(
        "TOOL_OUTCOME_UNKNOWN: the session was interrupted while this call was running: it may \
         have run, and its effects may have happened; check these before retrying: writes \
         a.txt; a probe of the workspace found that a.txt now holds exactly the content this \
         call would have produced (sha256 {}); this is evidence, not proof, so the outcome is \
         still unknown; retry only if the call is idempotent",
        sha(AFTER)
    );
    assert_eq!(content, expected);
    // The file changed back since: the journaled text stays; the probe says what is there now.
    set(&ws, Some(BEFORE));
    let again = Recovery::of(&journal)
        .write(true)
        .probe(Some(&ws))
        .run()
        .unwrap();
    assert!(!again.appended);
    let c = &again.analysis.calls[0];
    assert_eq!(c.result.content, expected);
    assert_eq!(c.probe.as_ref().unwrap().verdict, Verdict::NotApplied);
    // Without a probe, the words are the ones recovery always gave.
    let (_d2, ws2, full2) = setup(Some(BEFORE));
    record(
        &full2,
        &ws2,
        vec![vec![model_call(
            "w1",
            "write",
            json!({"path": "a.txt", "content": AFTER}),
        )]],
    );
    let plain = full2.with_file_name("cut");
    cut_after_started(&full2, "w1", &plain);
    let r = Recovery::of(&plain).probe(None).run().unwrap();
    assert_eq!(r.analysis.calls[0].probe, None);
    assert_eq!(
        r.analysis.calls[0].result.content,
        "TOOL_OUTCOME_UNKNOWN: the session was interrupted while this call was running: it may \
         have run, and its effects may have happened; check these before retrying: writes \
         a.txt; retry only if the call is idempotent"
    );
}

#[test]
fn rebuild_with_a_probe_tells_the_model_the_evidence() {
    let (_d, ws, journal) = write_cut_after_started(Some(BEFORE));
    set(&ws, Some(BEFORE));
    let out = recover(&[
        "rebuild",
        journal.to_str().unwrap(),
        "--format",
        "anthropic",
        "--dry-run",
        "--probe",
        ws.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body = text(&out.stdout);
    let words = format!(
        "a probe of the workspace found that a.txt still holds exactly what it held before \
         this call started (sha256 {})",
        sha(BEFORE)
    );
    assert!(body.contains(&words), "{body}");
}

/// Audit shows each call's idempotency key and the evidence its `started` recorded.
#[test]
fn audit_shows_the_key_and_the_evidence() {
    let (_d, ws, full) = setup(Some(BEFORE));
    record(
        &full,
        &ws,
        vec![vec![model_call(
            "w1",
            "write",
            json!({"path": "a.txt", "content": AFTER}),
        )]],
    );
    let key = idempotency_key("probe", &call("w1", 1));
    let out = recover(&["audit", full.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &v["calls"][0];
    assert_eq!(c["idempotency_key"], key);
    assert_eq!(
        c["evidence"],
        json!([{"kind": "file_replace", "path": "a.txt", "before_sha256": sha(BEFORE),
                "after_sha256": sha(AFTER)}])
    );
    let out = recover(&["audit", full.to_str().unwrap()]);
    let table = text(&out.stdout);
    let line = format!(
        "key: {key}; evidence: replaces a.txt ({} → {})",
        &sha(BEFORE)[..12],
        &sha(AFTER)[..12]
    );
    assert!(table.contains(&line), "{table}");
    // A journal from before schema 5 has no keys: `-` and null.
    let old = tempfile::tempdir().unwrap();
    common::settled_unknown_and_not_started(old.path());
    let v: Value =
        serde_json::from_slice(&recover(&["audit", old.path().to_str().unwrap(), "--json"]).stdout)
            .unwrap();
    for c in v["calls"].as_array().unwrap() {
        assert_eq!(c["idempotency_key"], Value::Null, "{c}");
        assert_eq!(c["evidence"], json!([]), "{c}");
    }
    let table = text(&recover(&["audit", old.path().to_str().unwrap()]).stdout);
    assert_eq!(table.matches("          key: -\n").count(), 3, "{table}");
}

// ---------------------------------------------------------------------------------------------
// Journals made by hand: what no tool records, and process groups.

/// A hand-made journal whose evidence hash is not hex (FORMAT.md: 64 lowercase hex digits) is
/// refused as inconsistent, naming the record, by every command that reads it; never a panic
/// (`audit` once cut such a hash at byte 12, inside a character).
#[test]
fn evidence_whose_hash_is_not_hex_is_refused_naming_it_never_a_panic() {
    let d = tempfile::tempdir().unwrap();
    let journal = d.path().join("journal");
    let odd = vec![Evidence::FileReplace {
        path: "x".into(),
        // 2 + 3 × 5 bytes: byte 12 falls inside the fourth `€`.
        before_sha256: Some("aa€€€€€".into()),
        after_sha256: "bb€€€€€".into(),
    }];
    forged(&journal, &[("w1", odd)], vec![]);
    for command in ["audit", "verify"] {
        let out = recover(&[command, journal.to_str().unwrap()]);
        let stderr = text(&out.stderr);
        assert!(!stderr.contains("panicked"), "{command}: {stderr}");
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains("not 64 lowercase hex digits") && stderr.contains("started"),
            "{command}: {stderr}"
        );
    }
}

/// A `write` through a symlink to a directory whose name is not UTF-8: the write succeeds. Its
/// evidence could name the path only lossily (`\u{FFFD}` for the bad byte), a path that names
/// no file, and the probe would then say `not_applied` for a file the call wrote. So it records
/// none, and the probe says `no_evidence`.
#[test]
fn a_path_that_is_not_utf8_records_no_evidence_and_is_never_not_applied() {
    use std::os::unix::ffi::OsStrExt;
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let odd = ws.join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    std::fs::create_dir(&odd).unwrap();
    symlink(&odd, ws.join("cafe")).unwrap();
    let journal = d.path().join("journal");
    record(
        &journal,
        &ws,
        vec![vec![model_call(
            "w1",
            "write",
            json!({"path": "cafe/notes.txt", "content": AFTER}),
        )]],
    );
    assert_eq!(
        std::fs::read_to_string(odd.join("notes.txt")).unwrap(),
        AFTER
    );
    let replay = Recovery::of(&journal)
        .probe(None)
        .run()
        .unwrap()
        .analysis
        .replay;
    let w1 = replay.calls().find(|c| c.call.call_id == "w1").unwrap();
    assert_eq!(w1.evidence, [], "no lossy path journaled");
    // As a crash right after this `started` would have left it: the file written.
    let probe = Prober::open(&ws).unwrap().probe(w1);
    assert_eq!(probe.verdict, Verdict::NoEvidence, "{}", probe.detail);
}

fn replace(path: &str) -> Vec<Evidence> {
    vec![Evidence::FileReplace {
        path: path.into(),
        before_sha256: Some(sha(BEFORE)),
        after_sha256: sha(AFTER),
    }]
}

#[test]
fn paths_that_lead_out_or_through_symlinks_are_not_looked_at_and_directories_are_changed() {
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("ws");
    std::fs::create_dir_all(ws.join("dir.txt")).unwrap();
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    // What the call would have written, outside and inside, behind symlinks.
    std::fs::write(d.path().join("x"), AFTER).unwrap();
    std::fs::write(d.path().join("outside.txt"), AFTER).unwrap();
    std::fs::write(ws.join("target.txt"), AFTER).unwrap();
    symlink(d.path().join("outside.txt"), ws.join("out.txt")).unwrap();
    symlink(ws.join("target.txt"), ws.join("in.txt")).unwrap();
    symlink(ws.join("sub"), ws.join("alias")).unwrap();
    std::fs::write(ws.join("sub/f.txt"), AFTER).unwrap();
    std::fs::write(ws.join("plain.txt"), AFTER).unwrap();
    let journal = d.path().join("journal");
    let (looked, not_looked) = (Verdict::Changed, Verdict::NotLooked);
    let cases = [
        ("p1", "../x", not_looked, "outside the workspace"),
        ("p2", "/etc/passwd", not_looked, "outside the workspace"),
        ("p3", "out.txt", not_looked, "a symlink leads out"),
        ("p4", "in.txt", not_looked, "symlink"),
        ("p5", "alias/f.txt", not_looked, "symlink"),
        ("p6", "dir.txt", looked, "a directory stands there"),
        ("p7", "plain.txt/deeper", looked, "needs a directory"),
        ("p8", "plain.txt", Verdict::Applied, "now holds exactly"),
    ];
    let calls: Vec<(&str, Vec<Evidence>)> = cases
        .iter()
        .map(|(id, path, _, _)| (*id, replace(path)))
        .collect();
    forged(&journal, &calls, vec![]);
    let before = snapshot(d.path());
    let r = Recovery::of(&journal).probe(Some(&ws)).run().unwrap();
    for (id, path, want, why) in cases {
        let c = r
            .analysis
            .calls
            .iter()
            .find(|c| c.call.call_id == id)
            .unwrap();
        let p = c.probe.as_ref().unwrap();
        assert_eq!(p.verdict, want, "{id} {path}: {p:?}");
        assert!(p.detail.contains(why), "{id} {path}: {}", p.detail);
        assert_eq!(p.path.as_deref(), Some(path));
        if want != Verdict::Applied {
            assert_eq!(p.found_sha256, None, "{id}: nothing was read through it");
        }
        // Not looked at: said so, and nothing claimed of what it holds.
        if want == Verdict::NotLooked {
            assert!(p.detail.contains("was not looked at"), "{id}: {}", p.detail);
            assert!(!p.detail.contains("holds neither"), "{id}: {}", p.detail);
        }
        let json = classify_probe(&journal, &ws, id);
        assert_eq!(json["probe"]["verdict"], want.as_str(), "{json}");
        assert_eq!(json["classification"], "TOOL_OUTCOME_UNKNOWN");
    }
    assert_eq!(before, snapshot(d.path()), "probing changed something");
}

#[test]
fn several_files_agree_or_the_call_is_changed() {
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a"), AFTER).unwrap();
    std::fs::write(ws.join("b"), AFTER).unwrap();
    std::fs::write(ws.join("c"), BEFORE).unwrap();
    std::fs::write(ws.join("d"), BEFORE).unwrap();
    let journal = d.path().join("journal");
    let two = |x: &str, y: &str| replace(x).into_iter().chain(replace(y)).collect();
    forged(
        &journal,
        &[
            ("both", two("a", "b")),
            ("neither", two("c", "d")),
            ("mixed", two("a", "c")),
        ],
        vec![],
    );
    let r = Recovery::of(&journal).probe(Some(&ws)).run().unwrap();
    let verdict = |id: &str| {
        let c = r
            .analysis
            .calls
            .iter()
            .find(|c| c.call.call_id == id)
            .unwrap();
        c.probe.clone().unwrap()
    };
    assert_eq!(verdict("both").verdict, Verdict::Applied);
    assert_eq!(verdict("neither").verdict, Verdict::NotApplied);
    let mixed = verdict("mixed");
    assert_eq!(mixed.verdict, Verdict::Changed);
    assert!(
        mixed.detail.starts_with("the files disagree"),
        "{}",
        mixed.detail
    );
}

#[test]
fn a_live_process_group_is_running_and_an_ended_one_is_no_evidence() {
    use std::os::unix::process::CommandExt;
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = sleeper.id();
    let process = runtime::process::identify(pid, pid).expect("the sleeper is in /proc");
    let journal = d.path().join("journal");
    forged(
        &journal,
        &[("b1", vec![]), ("q1", vec![])],
        vec![Event::CallProcess {
            call: call("b1", 1),
            process,
        }],
    );
    let c = classify_probe(&journal, &ws, "b1");
    assert_eq!(c["probe"]["verdict"], "running", "{c}");
    assert_eq!(c["probe"]["pgid"], pid);
    assert_eq!(c["classification"], "TOOL_OUTCOME_UNKNOWN");
    let q = classify_probe(&journal, &ws, "q1");
    assert_eq!(q["probe"]["verdict"], "no_evidence", "{q}");
    assert_eq!(
        q["probe"]["detail"],
        "the call recorded nothing that can be checked"
    );

    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    let c = classify_probe(&journal, &ws, "b1");
    assert_eq!(c["probe"]["verdict"], "no_evidence", "{c}");
    assert_eq!(c["probe"]["pgid"], Value::Null);
    // The table shows the verdict in its own column.
    let out = recover(&[
        "classify",
        journal.to_str().unwrap(),
        "--dry-run",
        "--probe",
        ws.to_str().unwrap(),
    ]);
    let table = text(&out.stdout);
    let header = table.lines().nth(1).unwrap();
    assert!(header.contains(" probe "), "{table}");
    let row = table.lines().find(|l| l.starts_with("b1 ")).unwrap();
    assert!(
        row.contains("TOOL_OUTCOME_UNKNOWN ! no_evidence"),
        "{table}"
    );
}

#[test]
fn a_workspace_that_cannot_be_probed_is_an_error_before_anything_is_written() {
    let d = tempfile::tempdir().unwrap();
    let journal = d.path().join("journal");
    forged(&journal, &[("w1", replace("a.txt"))], vec![]);
    let before = snapshot(&journal);
    let missing = d.path().join("no-such-workspace");
    match Recovery::of(&journal)
        .write(true)
        .probe(Some(&missing))
        .run()
    {
        Err(RecoverError::Workspace(e)) => assert_eq!(e.workspace, missing),
        other => panic!("{other:?}"),
    }
    for args in [vec!["classify"], vec!["rebuild", "--format", "gemini"]] {
        let mut full = args.clone();
        full.insert(1, journal.to_str().unwrap());
        full.extend(["--probe", missing.to_str().unwrap()]);
        let out = recover(&full);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!(
                "{}: cannot probe this workspace",
                missing.display()
            )),
            "{err}"
        );
    }
    assert_eq!(before, snapshot(&journal), "nothing was appended");
    // A file is not a workspace either.
    let file = d.path().join("file");
    std::fs::write(&file, "x").unwrap();
    assert!(matches!(
        Prober::open(&file),
        Err(e) if e.workspace == file
    ));
}
