//! Recovery over every crash point (DESIGN.md I4, I5, I6): a journal cut at every record
//! boundary and at a sample of byte offsets inside records, and power loss at every I/O point,
//! always recovers to a history that all four providers' validators accept; a call whose body
//! ran is in the journal and never `TOOL_NOT_STARTED`, and its result is what the body returned
//! (or `TOOL_OUTCOME_UNKNOWN`); a known result is never replaced; a second recovery appends
//! nothing and reports the same.
//!
//! Which bodies ran comes from the tool itself (outside the journal): with power loss, every
//! body that ran before the power went out; with a cut at byte N, every body that started when
//! the journal file was at most N bytes long (a crash at N came after it).

// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]

use journal::storage::{Fault, Op, TailLoss};
use journal::{Journal, Limits, Options, Reader, SimStorage, Storage};
use runtime::event::{AskAnswer, Classification, ToolSource};
use runtime::state::CallState;
use runtime::Hooks;
use runtime::ManualClock;
use runtime::Registry;
use runtime::{drive, ScriptedApprover};
use runtime::{parse_script, ScriptedModel};
use runtime::{Config, ErrorCode, Session, SessionOptions};
use runtime::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use tooljournal_recover::conversation::ModelSettings;
use tooljournal_recover::providers::{render, request_body, stand_in_tools, validate, Format};
use tooljournal_recover::Recovery;

/// A body that ran, as the tool recorded it.
#[derive(Debug, Clone)]
struct Ran {
    call_id: String,
    /// The journal file's length (bytes written, synced or not) when the body started.
    journal_bytes: u64,
    /// The result the model gets from what the body returned (`None` until it returned).
    content: Option<String>,
}

/// A tool that records, outside the journal, every body that ran and what it returned.
struct Mark {
    runs: Arc<Mutex<Vec<Ran>>>,
    storage: SimStorage,
}

impl Tool for Mark {
    fn name(&self) -> &str {
        "mark"
    }
    fn description(&self) -> &str {
        "records that it ran"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"fail": {"type": "boolean"}, "parallel": {"type": "boolean"}, "path": {"type": "string"}}})
    }
    fn is_concurrency_safe(&self, args: &runtime::Args) -> bool {
        args.get("parallel").and_then(Value::as_bool) == Some(true)
    }
    fn resources(&self, args: &runtime::Args) -> runtime::event::Resources {
        runtime::event::Resources {
            writes: args
                .str("path")
                .map(|p| vec![p.to_owned()])
                .unwrap_or_default(),
            ..Default::default()
        }
    }
    fn execute(&self, args: runtime::Args, ctx: ToolContext) -> ToolFuture<'_> {
        let journal_bytes = self
            .storage
            .read_file(&journal::segment::file_name(0))
            .map_or(0, |b| b.len() as u64);
        let index = {
            let mut runs = self.runs.lock().unwrap();
            runs.push(Ran {
                call_id: ctx.call_id().to_owned(),
                journal_bytes,
                content: None,
            });
            runs.len() - 1
        };
        let runs = self.runs.clone();
        Box::pin(async move {
            let (result, content) = if args.get("fail").and_then(Value::as_bool) == Some(true) {
                (
                    Err(ToolError::new(ErrorCode::ToolFailed, "it failed, really")),
                    "TOOL_FAILED: it failed, really".to_owned(),
                )
            } else {
                let text = format!("marked {}", ctx.call_id());
                (Ok(ToolOutput::text(text.clone())), text)
            };
            runs.lock().unwrap()[index].content = Some(content);
            result
        })
    }
}

const SCRIPT: &str = r#"{"user": "first turn"}
{"assistant": {"text": "three in parallel, one exclusive", "tool_calls": [{"id": "a1", "name": "mark", "arguments": "{\"parallel\":true,\"path\":\"x\"}"}, {"id": "a2", "name": "mark", "arguments": "{\"parallel\":true,\"path\":\"y\"}"}, {"id": "a3", "name": "mark", "arguments": "{\"fail\":true}"}, {"id": "a.4/odd", "name": "mark", "arguments": "{\"parallel\":true}"}]}}
{"assistant": {"text": "rejections", "tool_calls": [{"id": "b1", "name": "nope", "arguments": "{}"}, {"id": "b2", "name": "mark", "arguments": "{bad"}, {"id": "b3", "name": "ask", "arguments": "{\"question\":\"ok?\"}"}], "approvals": {"b3": "deny"}}}
{"assistant": {"text": "done", "stop_reason": "end_turn"}}
{"user": "second turn"}
{"assistant": {"text": "", "tool_calls": [{"id": "c1", "name": "mark", "arguments": "{}"}, {"id": "c2", "name": "todo", "arguments": "{\"items\":[{\"text\":\"t\",\"status\":\"done\"}]}"}]}}
{"assistant": {"text": "cut short", "tool_calls": [{"id": "d1", "name": "mark", "arguments": "{}"}], "stop_reason": "length"}}
{"assistant": {"text": "bye", "stop_reason": "end_turn"}}
"#;

/// Runs the script on `storage` until it ends or the storage fails. Returns the bodies that ran.
fn run_session(storage: &SimStorage) -> Vec<Ran> {
    let runs = Arc::new(Mutex::new(Vec::new()));
    let mut registry = Registry::new();
    registry
        .register(
            Arc::new(Mark {
                runs: runs.clone(),
                storage: storage.clone(),
            }),
            ToolSource::BuiltIn,
        )
        .unwrap();
    registry
        .register(Arc::new(runtime::todo::Todo), ToolSource::BuiltIn)
        .unwrap();
    registry
        .register(Arc::new(runtime::ask::Ask), ToolSource::BuiltIn)
        .unwrap();
    let approver = Arc::new(ScriptedApprover::new(AskAnswer::AllowedOnce));
    let hooks = Hooks {
        pre_execute: vec![],
        approver: Some(approver.clone()),
        ..Hooks::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let Ok((journal, _)) = Journal::open(Arc::new(storage.clone()), Options::default()) else {
            return;
        };
        let Ok(mut session) = Session::open(
            journal,
            Arc::new(registry),
            hooks,
            Config::default(),
            SessionOptions {
                session_id: Some("s".into()),
                workspace: "/ws".into(),
                clock: Arc::new(ManualClock::new(7)),
            },
        ) else {
            return;
        };
        let mut model = ScriptedModel::new(parse_script(SCRIPT, "script").unwrap());
        if drive(&mut session, &mut model, &approver).await.is_ok() {
            let _ = session.close().await;
        }
    });
    let runs = runs.lock().unwrap().clone();
    runs
}

/// An independent copy of a simulated disk (clones share theirs).
fn copy_of(s: &SimStorage) -> SimStorage {
    let copy = SimStorage::new();
    for name in s.file_names() {
        if let Some(bytes) = s.read_file(&name) {
            copy.put_file(&name, bytes);
        }
    }
    copy
}

fn events(s: &SimStorage) -> Vec<runtime::event::Event> {
    Reader::open(Arc::new(s.clone()) as Arc<dyn Storage>, Limits::default())
        .unwrap()
        .map(|r| r.unwrap().decode::<runtime::event::Record>().unwrap().event)
        .collect()
}

/// The streaming classifier (what `recover classify` runs) reports what the full analysis
/// reports, in the same order, and appends the same events (timestamps aside).
fn check_streaming(storage: &SimStorage, at: &str) {
    for write in [false, true] {
        let (full_disk, stream_disk) = (copy_of(storage), copy_of(storage));
        let full = Recovery::of(journal::Backend::Files(Arc::new(full_disk.clone())))
            .write(write)
            .run()
            .unwrap_or_else(|e| panic!("{at}: {e}"));
        let mut reports: Vec<tooljournal_recover::CallReport> = Vec::new();
        let s = Recovery::of(journal::Backend::Files(Arc::new(stream_disk.clone())))
            .write(write)
            .stream(&mut reports)
            .unwrap_or_else(|e| panic!("{at}: streamed: {e}"));
        let a = &full.analysis;
        assert_eq!(reports, a.calls, "{at} (write {write}): streamed reports");
        assert_eq!(
            (s.end, s.live, &s.recovery, &s.pending_asks, s.appended),
            (a.end, a.live, &a.recovery, &a.pending_asks, full.appended),
            "{at} (write {write}): streamed recovery"
        );
        assert_eq!(
            events(&stream_disk),
            events(&full_disk),
            "{at} (write {write}): appended events"
        );
    }
}

/// Recovers `storage` and checks everything that must hold of the result, given the bodies
/// that ran before the crash.
fn check(storage: &SimStorage, ran: &[Ran], at: &str) {
    check_streaming(storage, at);
    let first = Recovery::of(journal::Backend::Files(Arc::new(storage.clone())))
        .write(true)
        .run()
        .unwrap_or_else(|e| panic!("{at}: {e}"));
    let a = &first.analysis;
    let conv = a.conversation();
    // Stand-ins for the tools the calls name: Anthropic takes no tool call without tools.
    let tools = stand_in_tools(&conv);
    for format in Format::ALL {
        let body = request_body(&conv, &tools, &ModelSettings::default(), format).value();
        if let Err(v) = validate(format, &body) {
            panic!(
                "{at}: {} rejects the rebuilt history: {v}\n{body:#}",
                format.as_str()
            );
        }
    }
    // I1, from the bodies that ran: each one's call is in the journal, started, and its result
    // is what the body returned, or says its outcome is unknown.
    for body in ran {
        let id = &body.call_id;
        let Some(c) = a.calls.iter().find(|c| &c.call.call_id == id) else {
            panic!("{at}: the body of {id} ran, but the journal has no record of the call");
        };
        assert!(
            matches!(
                c.state,
                CallState::Started | CallState::Settled | CallState::Committed
            ) && c.classification != Some(Classification::ToolNotStarted),
            "{at}: the body of {id} ran, but the journal says {} ({:?})",
            c.state,
            c.classification
        );
        if c.classification != Some(Classification::ToolOutcomeUnknown) {
            assert_eq!(
                Some(&c.result.content),
                body.content.as_ref(),
                "{at}: {id}'s result is not what its body returned"
            );
        }
    }
    for c in &a.calls {
        // I4: a settled call keeps its real result (no listeners here, so what the model got
        // is the outcome itself): a success stays a success, an error stays that error.
        if let Some(outcome) = a.replay.call(&c.call).and_then(|r| r.outcome.as_ref()) {
            match &outcome.status {
                runtime::event::OutcomeStatus::Success => {
                    assert!(
                        !c.result.is_error,
                        "{at}: {} succeeded but is reported as {:?}",
                        c.call, c.result.code
                    )
                }
                runtime::event::OutcomeStatus::Error { code, .. } => {
                    assert_eq!(c.result.code, Some(*code), "{at}: {}", c.call)
                }
            }
        }
        assert!(
            !c.result.content.is_empty(),
            "{at}: {} has an empty result",
            c.call
        );
    }
    // I5: a second recovery appends nothing and says the same.
    let second = Recovery::of(journal::Backend::Files(Arc::new(storage.clone())))
        .write(true)
        .run()
        .unwrap();
    assert!(!second.appended, "{at}: the second recovery appended");
    assert_eq!(
        tooljournal_recover::classify_json("j", &second.analysis),
        tooljournal_recover::classify_json("j", a),
        "{at}: the second recovery reports differently"
    );
    for format in Format::ALL {
        assert_eq!(
            render(&second.analysis.conversation(), format),
            render(&conv, format),
            "{at}: rebuild differs"
        );
    }
}

#[test]
fn every_prefix_recovers_to_a_history_all_providers_accept() {
    let full = SimStorage::new();
    let ran = run_session(&full);
    assert!(ran.len() >= 5, "the script's bodies ran: {ran:?}");
    let name = journal::segment::file_name(0);
    let bytes = full.read_file(&name).unwrap();
    let boundaries: Vec<u64> = Reader::open(
        Arc::new(full.clone()) as Arc<dyn Storage>,
        Limits::default(),
    )
    .unwrap()
    .map(|r| {
        let r = r.unwrap();
        r.position.offset + r.frame_bytes
    })
    .collect();
    assert!(
        boundaries.len() > 40,
        "the session is long enough: {} records",
        boundaries.len()
    );
    let mut cuts: Vec<u64> = boundaries.clone();
    cuts.extend((journal::segment::HEADER_BYTES as u64..bytes.len() as u64).step_by(37));
    cuts.push(0);
    cuts.push(20);
    for cut in cuts {
        let storage = SimStorage::new();
        storage.put_file(&name, bytes[..cut as usize].to_vec());
        // A crash when the file held `cut` bytes came after every body that started when it
        // held no more.
        let ran_before: Vec<Ran> = ran
            .iter()
            .filter(|r| r.journal_bytes <= cut)
            .cloned()
            .collect();
        check(&storage, &ran_before, &format!("cut at byte {cut}"));
    }
}

#[test]
fn power_loss_anywhere_recovers_truthfully() {
    let probe = SimStorage::new();
    run_session(&probe);
    let ops = probe.op_count(Op::Any);
    for k in 1..=ops {
        let storage = SimStorage::new();
        storage.inject(Op::Any, k, Fault::PowerLoss);
        let ran = run_session(&storage);
        for tail in [
            TailLoss::DropUnsynced,
            TailLoss::Torn {
                granule_bytes: 512,
                granules: 1,
            },
        ] {
            check(
                &storage.power_loss(tail),
                &ran,
                &format!("power loss at op {k} ({tail:?})"),
            );
        }
    }
}
