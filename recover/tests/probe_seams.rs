//! The probe and the audit at their seams: a path that is not UTF-8, evidence a journal written
//! by hand holds (found in review; each test failed before its fix).

mod common;

use journal::{FsStorage, Journal, Limits, Options, Reader};
use runtime::event::{
    idempotency_key, Approval, CallRef, CallStarted, Event, Evidence, ModelCall, ModelResponse,
    Record, Resources, SessionOpen, StepOutcome, StopReason, ToolSource,
};
use runtime::registry::Registry;
use runtime::testing::ManualClock;
use runtime::tools::Workspace;
use runtime::{Config, Session, SessionOptions};
use serde_json::{json, Value};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use tooljournal_recover::probe::{Prober, Verdict};

fn model_call(id: &str, name: &str, arguments: Value) -> ModelCall {
    ModelCall {
        call_id: id.into(),
        name: name.into(),
        arguments: arguments.to_string(),
    }
}

fn response(calls: Vec<ModelCall>) -> ModelResponse {
    ModelResponse {
        text: "on it".into(),
        tool_calls: calls,
        stop_reason: StopReason::ToolUse,
    }
}

fn events(dir: &Path) -> Vec<Event> {
    let storage = Arc::new(FsStorage::open(dir).unwrap());
    Reader::open(storage, Limits::default())
        .unwrap()
        .map(|r| r.unwrap().decode::<Record>().unwrap().event)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The probe and paths that are not UTF-8.

/// A `write` through a symlink to a directory whose name is not UTF-8: the write succeeds. Its
/// evidence, were it recorded, could name the path only lossily (`\u{FFFD}` for the bad byte),
/// a path that names no file, and the probe would say `not_applied` for a file the call did
/// write. So it records none, and the probe says `no_evidence`.
#[test]
fn the_probe_never_says_not_applied_for_a_file_written_through_a_non_utf8_directory() {
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let odd = ws.join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    std::fs::create_dir(&odd).unwrap();
    std::os::unix::fs::symlink(&odd, ws.join("cafe")).unwrap();
    let journal = d.path().join("journal");

    let workspace = Arc::new(Workspace::new(&ws, std::slice::from_ref(&journal)).unwrap());
    let mut registry = Registry::new();
    for tool in runtime::tools::fs::file_tools(workspace) {
        registry.register(tool, ToolSource::BuiltIn).unwrap();
    }
    let (j, _) = Journal::open(
        Arc::new(FsStorage::create(&journal).unwrap()),
        Options::default(),
    )
    .unwrap();
    let mut session = Session::open(
        j,
        Arc::new(registry),
        runtime::hooks::Hooks::default(),
        Config::default(),
        SessionOptions {
            session_id: Some("odd".into()),
            workspace: ws.to_string_lossy().into_owned(),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
        },
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let results = rt.block_on(async {
        session.begin_turn("write it").unwrap();
        session.begin_step().unwrap();
        let r = session
            .run_batch(response(vec![model_call(
                "w1",
                "write",
                json!({"path": "cafe/notes.txt", "content": "written\n"}),
            )]))
            .await
            .unwrap();
        session.end_step(StepOutcome::Completed).unwrap();
        r
    });
    assert!(!results[0].is_error, "{:?}", results[0]);
    // The file was written, where the symlink leads.
    assert_eq!(
        std::fs::read_to_string(odd.join("notes.txt")).unwrap(),
        "written\n"
    );
    let evidence = events(&journal)
        .into_iter()
        .find_map(|e| match e {
            Event::Started(s) if s.call.call_id == "w1" => Some(s.evidence),
            _ => None,
        })
        .expect("w1 started");
    // A path that cannot be journaled exactly gets no evidence, rather than a lossy name
    // (`caf\u{FFFD}/notes.txt`) that would send the probe to look at another path.
    assert_eq!(evidence, [], "the evidence names no file lossily");
    // The probe, on the call as the journal has it (its outcome aside: a crash right after
    // this `started` would have left exactly this evidence and this file).
    let replay = tooljournal_recover::session::recover(&journal, false)
        .unwrap()
        .analysis
        .replay;
    let w1 = replay.calls().find(|c| c.call.call_id == "w1").expect("w1");
    let probe = Prober::open(&ws).unwrap().probe(w1);
    assert_ne!(
        probe.verdict,
        Verdict::NotApplied,
        "the call wrote the file, yet the probe says: {}",
        probe.detail
    );
    assert_eq!(probe.verdict, Verdict::NoEvidence, "{}", probe.detail);
}

// ---------------------------------------------------------------------------------------------
// `recover audit` on evidence that is not what this build writes.

/// A schema-5 journal written by another implementation (FORMAT.md is enough to write one), one
/// `write` call started with `evidence` and never settled.
fn forged(journal: &Path, evidence: Vec<Evidence>) {
    let (j, _) = Journal::open(
        Arc::new(FsStorage::create(journal).unwrap()),
        Options::default(),
    )
    .unwrap();
    let put = |event: Event| {
        j.append(&Record {
            at_ms: 1_000,
            event,
        })
        .unwrap()
    };
    put(Event::SessionOpen(SessionOpen {
        schema_version: runtime::event::EVENT_SCHEMA_VERSION,
        session_id: "hand".into(),
        workspace: "/ws".into(),
        tools: vec![],
    }));
    put(Event::TurnStart {
        turn: 1,
        user_text: "go".into(),
    });
    put(Event::StepStart { turn: 1, step: 1 });
    let args = json!({"path": "x"});
    let response = put(Event::LlmResponse {
        turn: 1,
        step: 1,
        response: response(vec![model_call("w1", "write", args.clone())]),
    });
    let c = CallRef {
        turn: 1,
        step: 1,
        call_id: "w1".into(),
    };
    let mut last = put(Event::Received {
        call: c.clone(),
        index: 0,
        tool: "write".into(),
        raw_arguments: args.to_string(),
        source_seqs: vec![response],
    });
    last = put(Event::Parsed {
        call: c.clone(),
        arguments: "{}".into(),
        source_seqs: vec![last],
    });
    last = put(Event::Approved {
        call: c.clone(),
        approval: Approval::Default,
        source_seqs: vec![last],
    });
    put(Event::Started(CallStarted {
        call: c.clone(),
        attempt: 1,
        resources: Resources::default(),
        idempotency_key: idempotency_key("hand", &c),
        evidence,
        source_seqs: vec![last],
    }));
    j.close().unwrap();
}

/// FORMAT.md says an evidence hash is hex; nothing checks it (replay checks the key only), and
/// `recover audit`'s table cuts each hash at byte 12 (`report::evidence_text`, `short`). A hash
/// whose 12th byte falls inside a character makes `recover audit` panic instead of reporting
/// the journal (as corrupt, or as it is): bad input must get a clear error, never a panic.
#[test]
fn recover_audit_does_not_panic_on_an_evidence_hash_that_is_not_hex() {
    let d = tempfile::tempdir().unwrap();
    let journal = d.path().join("journal");
    forged(
        &journal,
        vec![Evidence::FileReplace {
            path: "x".into(),
            // 2 + 3 × 5 bytes: byte 12 falls inside the fourth `€`.
            before_sha256: Some("aa€€€€€".into()),
            after_sha256: "bb€€€€€".into(),
        }],
    );
    let out = common::recover(&["audit", journal.to_str().unwrap()]);
    let stderr = common::text(&out.stderr);
    assert!(
        !stderr.contains("panicked"),
        "recover audit panicked (exit {:?}): {stderr}",
        out.status.code()
    );
    assert!(
        matches!(out.status.code(), Some(0) | Some(2)),
        "exit {:?}: {stderr}",
        out.status.code()
    );
}
