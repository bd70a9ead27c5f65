//! The probe at a seam the review found: a path that is not UTF-8 (the test failed before its
//! fix).

mod common;

use journal::{FsStorage, Journal, Limits, Options, Reader};
use runtime::event::{
    Event, ModelCall, ModelResponse, Record, StepOutcome, StopReason, ToolSource,
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
