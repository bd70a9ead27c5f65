//! The `recover` binary's test harness: running it, and golden journals built event by event
//! (`Builder`); shared by `cli_commands.rs` and `cli_crash_points.rs`.
#![allow(dead_code)]

pub mod imported;

use journal::{FsStorage, Journal, Options};
use runtime::event::*;
use runtime::ErrorCode;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

pub fn recover(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_recover"))
        .args(args)
        .output()
        .expect("recover runs")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn call(id: &str) -> CallRef {
    CallRef {
        turn: 1,
        step: 1,
        call_id: id.into(),
    }
}

/// The schema hash `batch_shown` journals `mark` under (any text names it; the runtime's is a
/// sha256).
pub const MARK_HASH: &str = "4d41524b4d41524b4d41524b4d41524b4d41524b4d41524b4d41524b4d41524b";

/// `mark`'s input schema, as `tool/schema` keeps it.
pub const MARK_SCHEMA: &str =
    r#"{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"}"#;

/// Appends events with the seqs they get, so per-call events can point back correctly.
pub struct Builder {
    pub journal: Journal,
    pub last: std::collections::HashMap<String, u64>,
    pub response_seq: u64,
}

impl Builder {
    pub fn new(dir: &Path) -> Builder {
        let (journal, _) = Journal::open(
            Arc::new(FsStorage::create(dir).unwrap()),
            Options::default(),
        )
        .unwrap();
        Builder {
            journal,
            last: Default::default(),
            response_seq: 0,
        }
    }
    pub fn put(&mut self, event: Event) -> u64 {
        self.journal
            .append(&Record {
                at_ms: 1_000,
                event,
            })
            .unwrap()
    }
    /// session/open, turn 1, step 1, and an llm/response with these calls (all `mark`), as a
    /// journal before event schema 3 has them: no tool schemas.
    pub fn batch(&mut self, ids: &[&str]) {
        self.batch_with(ids, false);
    }

    /// `batch`, the step showing the model `mark` (`step/tools`) with its schema journaled
    /// (`tool/schema`), as a schema-3 runtime writes it.
    pub fn batch_shown(&mut self, ids: &[&str]) {
        self.batch_with(ids, true);
    }

    fn batch_with(&mut self, ids: &[&str], shown: bool) {
        self.put(Event::SessionOpen(SessionOpen {
            schema_version: if shown { 3 } else { 1 },
            session_id: "golden".into(),
            workspace: "/ws".into(),
            tools: vec![],
        }));
        self.put(Event::TurnStart {
            turn: 1,
            user_text: "do three things".into(),
        });
        self.put(Event::StepStart { turn: 1, step: 1 });
        if shown {
            self.put(Event::ToolSchema(ToolSchema {
                schema_hash: MARK_HASH.into(),
                name: "mark".into(),
                description: "Mark a file.".into(),
                input_schema: MARK_SCHEMA.into(),
            }));
            self.put(Event::StepTools {
                turn: 1,
                step: 1,
                tools: vec![VisibleTool {
                    name: "mark".into(),
                    schema_hash: MARK_HASH.into(),
                }],
            });
        }
        let tool_calls = ids
            .iter()
            .map(|id| ModelCall {
                call_id: id.to_string(),
                name: "mark".into(),
                arguments: format!("{{\"path\":\"{id}.txt\"}}"),
            })
            .collect();
        self.response_seq = self.put(Event::LlmResponse {
            turn: 1,
            step: 1,
            response: ModelResponse {
                text: "on it".into(),
                tool_calls,
                stop_reason: StopReason::ToolUse,
            },
        });
        for (i, id) in ids.iter().enumerate() {
            let seq = self.put(Event::Received {
                call: call(id),
                index: i as u32,
                tool: "mark".into(),
                raw_arguments: format!("{{\"path\":\"{id}.txt\"}}"),
                source_seqs: vec![self.response_seq],
            });
            self.last.insert(id.to_string(), seq);
        }
    }
    pub fn step(&mut self, id: &str, make: impl FnOnce(CallRef, Vec<u64>) -> Event) {
        let src = vec![self.last[id]];
        let seq = self.put(make(call(id), src));
        self.last.insert(id.to_string(), seq);
    }
    pub fn approve(&mut self, id: &str) {
        self.step(id, |call, s| Event::Parsed {
            call,
            arguments: "{}".into(),
            source_seqs: s,
        });
        self.step(id, |call, s| Event::Approved {
            call,
            approval: Approval::Default,
            source_seqs: s,
        });
    }
    pub fn start(&mut self, id: &str) {
        self.step(id, |call, s| Event::StartedV4 {
            call,
            attempt: 1,
            resources: Resources {
                writes: vec![format!("{}.txt", "m")],
                intents: vec!["mark it".into()],
                ..Default::default()
            },
            source_seqs: s,
        });
    }
    pub fn settle(&mut self, id: &str, ok: bool) {
        let status = if ok {
            OutcomeStatus::Success
        } else {
            OutcomeStatus::Error {
                code: ErrorCode::ToolFailed,
                message: "disk on fire".into(),
            }
        };
        self.step(id, |call, s| Event::Settled {
            call,
            outcome: Outcome {
                status,
                content: Text::Inline("marked".into()),
                value: None,
                details: None,
                side_effects: vec![SideEffect::FsWrite {
                    path: "m.txt".into(),
                    before_sha256: None,
                    after_sha256: "ab".repeat(32),
                }],
                attempts: 1,
                duration_ms: 5,
            },
            source_seqs: s,
        });
    }
    pub fn done(self) {
        self.journal.close().unwrap();
    }
}

pub fn classify_json(dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["classify", dir.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = recover(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn by_id<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["call_id"] == id)
        .unwrap()
}

pub fn segment_bytes(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join(journal::segment::file_name(0))).unwrap()
}

/// Where each record of a segment's bytes begins (after the header), and where the bytes end.
pub fn frame_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut offsets = vec![journal::segment::HEADER_BYTES];
    while *offsets.last().unwrap() < bytes.len() {
        let at = *offsets.last().unwrap();
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize + 8;
        offsets.push(at + len);
    }
    offsets
}

/// The journal in `dir`, replayed.
pub fn replay_dir(dir: &Path) -> runtime::replay::SessionReplay {
    let storage = Arc::new(FsStorage::open(dir).unwrap());
    runtime::replay::replay_storage(storage, journal::Limits::default())
        .unwrap()
        .0
}

/// One batch of three calls, crashed: `c1` settled, `c.2` started (an id no provider takes as
/// it is, so its mapped form is checked too), `c3` approved only.
pub fn settled_unknown_and_not_started(dir: &Path) {
    crashed_batch(dir, false);
}

/// `settled_unknown_and_not_started`, with the tool shown and its schema journaled.
pub fn settled_unknown_and_not_started_shown(dir: &Path) {
    crashed_batch(dir, true);
}

fn crashed_batch(dir: &Path, shown: bool) {
    let mut b = Builder::new(dir);
    b.batch_with(&["c1", "c.2", "c3"], shown);
    for id in ["c1", "c.2", "c3"] {
        b.approve(id);
    }
    b.start("c1");
    b.settle("c1", true);
    b.start("c.2");
    b.done();
}

/// A schema-5 session `hand` with one step whose calls (of `write`) each get `started` with
/// their evidence; then `extra` events. Nothing settles: every call's outcome is unknown.
pub fn forged(journal: &Path, calls: &[(&str, Vec<Evidence>)], extra: Vec<Event>) {
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
        schema_version: EVENT_SCHEMA_VERSION,
        session_id: "hand".into(),
        workspace: "/ws".into(),
        tools: vec![],
    }));
    put(Event::TurnStart {
        turn: 1,
        user_text: "go".into(),
    });
    put(Event::StepStart { turn: 1, step: 1 });
    let arguments = serde_json::json!({"path": "x"}).to_string();
    let response = put(Event::LlmResponse {
        turn: 1,
        step: 1,
        response: ModelResponse {
            text: "on it".into(),
            tool_calls: calls
                .iter()
                .map(|(id, _)| ModelCall {
                    call_id: (*id).into(),
                    name: "write".into(),
                    arguments: arguments.clone(),
                })
                .collect(),
            stop_reason: StopReason::ToolUse,
        },
    });
    for (i, (id, evidence)) in calls.iter().enumerate() {
        let at = Answered {
            response,
            index: i as u32,
            tool: "write",
            raw_arguments: &arguments,
        };
        start_call(&put, &call(id), at, "hand", evidence.clone());
    }
    for e in extra {
        put(e);
    }
    j.close().unwrap();
}

/// Whether the tests run as root (the effective uid, `Uid:`'s second field in
/// `/proc/self/status`), whom permission bits do not stop.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Where a call stands in the answer that sent it: the answer's seq, the call's index in it, its
/// tool and its arguments as sent.
pub struct Answered<'a> {
    pub response: u64,
    pub index: u32,
    pub tool: &'a str,
    pub raw_arguments: &'a str,
}

/// `received`, `parsed`, `approved` and `started` of call `c`, as the runtime journals a call it
/// starts (its key derived from `session_id`); the seq of its `started`.
pub fn start_call(
    put: &impl Fn(Event) -> u64,
    c: &CallRef,
    at: Answered<'_>,
    session_id: &str,
    evidence: Vec<Evidence>,
) -> u64 {
    let mut last = put(Event::Received {
        call: c.clone(),
        index: at.index,
        tool: at.tool.into(),
        raw_arguments: at.raw_arguments.into(),
        source_seqs: vec![at.response],
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
        idempotency_key: idempotency_key(session_id, c),
        evidence,
        source_seqs: vec![last],
    }))
}
