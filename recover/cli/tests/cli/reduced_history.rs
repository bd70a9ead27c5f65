//! A session whose context was reduced: `recover rebuild` prints, in every format,
//! the history as the model last saw it (turn 1 replaced by the model's summary), and a resume
//! sends what the live agent would have sent (I17); `recover audit` still lists every original
//! call; a journal cut while the summary was being asked for rebuilds unreduced.
//!
//! The journals are a real agent loop's (the runtime library, a transcript as the model, the
//! provider's refusal of one request as too long), not written event by event.

use crate::common;

use common::{recover, replay_dir, text};
use journal::{FsStorage, Journal, Options};
use recover::providers::{request_body, validate, Format};
use runtime::event::{CompactTrigger, Event, Record, ToolSource};
use runtime::model::{Model, ModelError, ModelErrorKind, ModelRequest, ModelSettings, ModelStream};
use runtime::Hooks;
use runtime::ManualClock;
use runtime::Registry;
use runtime::{parse_script, ScriptedModel};
use runtime::{Agent, AgentConfig, TurnEnd};
use runtime::{Config, Session, SessionOptions};
use runtime::{Tool, ToolContext, ToolFuture, ToolOutput};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

const FORMATS: [Format; 4] = [
    Format::OpenAiChat,
    Format::OpenAiResponses,
    Format::Anthropic,
    Format::Gemini,
];

/// The model's summary of turn 1.
const SUMMARY: &str = "The user asked to read a.txt and b.txt; both were read.";

/// What opens turn 2's message once turn 1 is replaced (written out from the design).
const SUMMARY_HEAD: &str =
    "[Summary of the 1 earlier turn(s), written by the model when the context was reduced:]";

/// Reads a file: its result is marked as turn 1's.
struct Read;

impl Tool for Read {
    fn name(&self) -> &str {
        "read"
    }
    fn description(&self) -> &str {
        "reads a file"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}}})
    }
    fn execute(&self, args: runtime::Args, _ctx: ToolContext) -> ToolFuture<'_> {
        let path = args.str("path").unwrap_or_default().to_owned();
        Box::pin(async move { Ok(ToolOutput::text(format!("FIRST-RESULT of {path}"))) })
    }
}

/// A transcript as the model, whose requests the provider refuses as too long where `refuse`
/// says so (one entry per request sent, in order); it keeps every request.
struct Overflowing {
    inner: ScriptedModel,
    refuse: VecDeque<bool>,
    requests: Arc<Mutex<Vec<ModelRequest>>>,
}

type Sent<'a> = Pin<Box<dyn Future<Output = Result<ModelStream<'a>, ModelError>> + Send + 'a>>;

impl Model for Overflowing {
    fn provider(&self) -> &str {
        "anthropic"
    }
    fn model(&self) -> &str {
        "claude-test"
    }
    fn body(&mut self, request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.body(request)
    }
    fn send(&mut self, body: Vec<u8>) -> Sent<'_> {
        if self.refuse.pop_front().unwrap_or(false) {
            return Box::pin(async {
                Err(ModelError {
                    kind: ModelErrorKind::ContextOverflow,
                    status: Some(400),
                    retry_after_ms: None,
                    message: "prompt is too long: 210000 tokens > 200000 maximum".into(),
                })
            });
        }
        self.inner.send(body)
    }
}

/// A model answering with these transcript lines, refusing as `refuse` says.
fn model(
    lines: &[Value],
    refuse: &[bool],
    requests: &Arc<Mutex<Vec<ModelRequest>>>,
) -> Overflowing {
    let script: String = lines.iter().map(|l| format!("{l}\n")).collect();
    Overflowing {
        inner: ScriptedModel::new(parse_script(&script, "inline").unwrap()),
        refuse: refuse.iter().copied().collect(),
        requests: requests.clone(),
    }
}

fn answer(text: &str) -> Value {
    json!({"assistant": {"text": text, "stop_reason": "end_turn"}})
}

fn read(id: &str, path: &str) -> Value {
    json!({"assistant": {"text": "reading", "stop_reason": "tool_use", "tool_calls": [
        {"id": id, "name": "read", "arguments": json!({"path": path}).to_string()}]}})
}

fn registry() -> Arc<Registry> {
    let mut registry = Registry::new();
    registry
        .register(Arc::new(Read), ToolSource::BuiltIn)
        .unwrap();
    Arc::new(registry)
}

fn options() -> SessionOptions {
    SessionOptions {
        session_id: Some("reduced".into()),
        workspace: "/ws".into(),
        clock: Arc::new(ManualClock::new(1_700_000_000_000)),
    }
}

fn config() -> AgentConfig {
    AgentConfig {
        system: Some("be careful".into()),
        backoff_base_ms: 1,
        backoff_max_ms: 10,
        idle_timeout_ms: 5_000,
        ..AgentConfig::default()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The live side of a session.
struct Live {
    agent: Agent,
    requests: Arc<Mutex<Vec<ModelRequest>>>,
}

/// A session in `dir`: turn 1 (long) reads a.txt and b.txt, then answers; turn 2's request is
/// refused as too long, turn 1 is summarized, and the request is sent again, reduced, and
/// answered. The session is then dropped (as a process ends), the turns closed. The agent
/// stays alive, as the live one would have gone on; it would answer turn 3 with "third".
fn record(dir: &Path) -> Live {
    let requests = Arc::default();
    let lines = [
        read("c1", "a.txt"),
        read("c2", "b.txt"),
        answer("FIRST-ANSWER both read"),
        answer(SUMMARY),
        answer("second answer"),
        answer("third"),
    ];
    let refuse = [false, false, false, true];
    let mut agent = Agent::new(Box::new(model(&lines, &refuse, &requests)), config());
    let (journal, _) = Journal::open(
        Arc::new(FsStorage::create(dir).unwrap()),
        Options::default(),
    )
    .unwrap();
    let mut session = Session::open(
        journal,
        registry(),
        Hooks::default(),
        Config::default(),
        options(),
    )
    .unwrap();
    runtime().block_on(async {
        let stop = CancellationToken::new();
        let first = format!("FIRST-TURN {}", "context ".repeat(1_000));
        for user in [first.as_str(), "SECOND-TURN go on"] {
            let end = agent
                .run_turn(&mut session, user, &stop, &mut ())
                .await
                .unwrap();
            assert_eq!(end, TurnEnd::Completed, "{user:.20}");
        }
    });
    drop(session);
    let r = replay_dir(dir);
    let c = r.compaction.expect("turn 2 was reduced");
    assert_eq!((c.trigger, c.through_turn), (CompactTrigger::Overflow, 1));
    assert_eq!(c.summary.as_deref(), Some(SUMMARY));
    Live { agent, requests }
}

/// `recover rebuild DIR --format F --dry-run`: the body (exit 0).
fn rebuild(dir: &Path, format: Format) -> Value {
    let out = recover(&[
        "rebuild",
        dir.to_str().unwrap(),
        "--format",
        format.as_str(),
        "--dry-run",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{format}: {}",
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{format}: {e}: {}", text(&out.stdout)))
}

#[test]
fn rebuild_prints_the_reduced_history_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let live = record(dir.path());
    let last = live.requests.lock().unwrap().last().cloned().unwrap();
    assert!(
        serde_json::to_string(
            &request_body(
                &last.conversation,
                &last.tools,
                &last.settings,
                Format::OpenAiChat
            )
            .value()
        )
        .unwrap()
        .contains(SUMMARY_HEAD),
        "the live agent's last request was the reduced one"
    );
    for format in FORMATS {
        let body = rebuild(dir.path(), format);
        validate(format, &body).unwrap_or_else(|v| panic!("{format}: {v}"));
        let all = body.to_string();
        assert!(all.contains(SUMMARY_HEAD), "{format}: {all}");
        assert!(all.contains(SUMMARY), "{format}");
        assert!(all.contains("SECOND-TURN go on"), "{format}");
        assert!(all.contains("second answer"), "{format}");
        for gone in ["FIRST-TURN", "FIRST-RESULT", "FIRST-ANSWER"] {
            assert!(!all.contains(gone), "{format}: {gone} is left out: {all}");
        }
        // The history the live agent would send next, with the tools and settings it sent.
        let live_body = request_body(
            &live.agent.conversation(),
            &last.tools,
            &ModelSettings::default(),
            format,
        );
        assert_eq!(body, live_body.value(), "{format}");
    }
}

#[test]
fn audit_still_lists_every_original_call() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path());
    let out = recover(&["audit", dir.path().to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let audit: Value = serde_json::from_slice(&out.stdout).unwrap();
    let calls: Vec<(String, u64, String, String)> = audit["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["call_id"].as_str().unwrap().to_owned(),
                c["turn"].as_u64().unwrap(),
                c["state"].as_str().unwrap().to_owned(),
                c["arguments"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            (
                "c1".into(),
                1,
                "committed".into(),
                r#"{"path":"a.txt"}"#.into()
            ),
            (
                "c2".into(),
                1,
                "committed".into(),
                r#"{"path":"b.txt"}"#.into()
            ),
        ]
    );
    // Every answered step's response: three in turn 1, one in turn 2 (the summary is none).
    assert_eq!(audit["usage"]["responses"], 4);
    // And the library's analysis keeps both results whole.
    let analysis = recover::Recovery::of(dir.path()).run().unwrap().analysis;
    let results: Vec<&str> = analysis
        .calls
        .iter()
        .map(|c| c.result.content.as_str())
        .collect();
    assert_eq!(results, ["FIRST-RESULT of a.txt", "FIRST-RESULT of b.txt"]);
}

/// A session continued from the journal in `dir`: `agent` with a resumed session, for one
/// turn; the request its model got.
fn next_request(
    dir: &Path,
    mut agent: Agent,
    requests: &Arc<Mutex<Vec<ModelRequest>>>,
) -> ModelRequest {
    let replay = replay_dir(dir);
    let (journal, _) =
        Journal::open(Arc::new(FsStorage::open(dir).unwrap()), Options::default()).unwrap();
    let mut session = Session::resume(
        journal,
        registry(),
        Hooks::default(),
        Config::default(),
        options(),
        &replay,
    )
    .unwrap();
    let before = requests.lock().unwrap().len();
    let end = runtime().block_on(agent.run_turn(
        &mut session,
        "THIRD-TURN",
        &CancellationToken::new(),
        &mut (),
    ));
    assert_eq!(end.unwrap(), TurnEnd::Completed);
    let requests = requests.lock().unwrap();
    assert_eq!(requests.len(), before + 1, "one request for turn 3");
    requests[before].clone()
}

/// Copies the journal directory `from` to a new one.
fn copy_of(from: &Path) -> tempfile::TempDir {
    let to = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        assert!(entry.file_type().unwrap().is_file(), "{:?}", entry.path());
        std::fs::copy(entry.path(), to.path().join(entry.file_name())).unwrap();
    }
    to
}

#[test]
fn a_resumed_agent_is_sent_what_the_live_one_would_have_sent() {
    let dir = tempfile::tempdir().unwrap();
    let live = record(dir.path());
    let other = copy_of(dir.path());
    // What recover reads is what the live agent keeps (I17).
    let analysis = recover::Recovery::of(other.path()).run().unwrap().analysis;
    assert_eq!(analysis.conversation(), live.agent.conversation());
    // The live agent goes on in one copy, an agent rebuilt from the journal in the other.
    let from_live = next_request(dir.path(), live.agent, &live.requests);
    let requests = Arc::default();
    let resumed = Agent::new(
        Box::new(model(&[answer("third")], &[], &requests)),
        config(),
    )
    .with_history(
        analysis.turns(),
        analysis.replay.compaction.as_ref().map(|c| c.compaction()),
    );
    let from_resumed = next_request(other.path(), resumed, &requests);
    assert_eq!(from_resumed, from_live);
    let sent = serde_json::to_string(
        &request_body(
            &from_live.conversation,
            &from_live.tools,
            &from_live.settings,
            Format::Anthropic,
        )
        .value(),
    )
    .unwrap();
    assert!(
        sent.contains(SUMMARY_HEAD) && !sent.contains("FIRST-TURN"),
        "{sent}"
    );
    assert!(sent.contains("THIRD-TURN"));
}

/// Cuts the journal right after the first record `last` matches: a crash once it was durable.
fn cut_after(dir: &Path, last: impl Fn(&Event) -> bool) {
    let storage = Arc::new(FsStorage::open(dir).unwrap());
    let reader = journal::Reader::open(storage, journal::Limits::default()).unwrap();
    for record in reader {
        let record = record.unwrap();
        let event = record.decode::<Record>().unwrap().event;
        if last(&event) {
            assert_eq!(record.position.segment, 0, "one segment");
            let end = record.position.offset + record.frame_bytes;
            let file = dir.join(journal::segment::file_name(0));
            let bytes = std::fs::read(&file).unwrap();
            std::fs::write(&file, &bytes[..end as usize]).unwrap();
            return;
        }
    }
    panic!("no such record in the journal");
}

#[test]
fn a_journal_cut_during_the_summary_request_rebuilds_unreduced_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path());
    cut_after(dir.path(), |e| {
        matches!(e, Event::ContextSummaryRequested(_))
    });
    assert_eq!(replay_dir(dir.path()).compaction, None);
    for format in FORMATS {
        let body = rebuild(dir.path(), format);
        validate(format, &body).unwrap_or_else(|v| panic!("{format}: {v}"));
        let all = body.to_string();
        for kept in [
            "FIRST-TURN",
            "FIRST-RESULT of a.txt",
            "FIRST-ANSWER",
            "SECOND-TURN",
        ] {
            assert!(all.contains(kept), "{format}: {kept} is kept");
        }
        assert!(
            !all.contains("[Summary of"),
            "{format}: nothing was reduced"
        );
        assert!(!all.contains(SUMMARY), "{format}");
    }
    // Recovery closes the interrupted turn; the session resumes with every message.
    let recovered = recover::Recovery::of(dir.path()).write(true).run().unwrap();
    assert!(recovered.appended);
    let analysis = recover::Recovery::of(dir.path()).run().unwrap().analysis;
    let requests = Arc::default();
    let agent = Agent::new(
        Box::new(model(&[answer("third")], &[], &requests)),
        config(),
    )
    .with_history(
        analysis.turns(),
        analysis.replay.compaction.as_ref().map(|c| c.compaction()),
    );
    let sent = next_request(dir.path(), agent, &requests);
    let all = format!("{:?}", sent.conversation);
    assert!(
        all.contains("FIRST-TURN") && !all.contains("[Summary of"),
        "{all}"
    );
}
