//! `rebuild` and `audit` written as the journal is read (`rebuild::streamed`, `audit::stream`)
//! say byte for byte what the whole-session functions say (`rebuild::body`, `report::audit_*`,
//! the oracle), on generated sessions: repeated and long call ids, results final or not when
//! their step closed, a crash resumed by a recovery mid-journal, a crash at the end (a call
//! settled, one started, one approved, one never received), reductions, models, tools and
//! their schemas, response details with provider state and usage. Also with the recovery
//! written, the journals end alike.

use journal::{FsStorage, FsyncPolicy, Journal, Options};
use proptest::prelude::*;
use runtime::event::*;
use runtime::ErrorCode;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use recover::providers::{validate, Format};

/// A call's fate in a generated step.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fate {
    Ok,
    Failed,
    /// Settled, never committed.
    Settled,
    Started,
    Approved,
    /// In the `llm/response` only.
    Unreceived,
}

#[derive(Debug, Clone)]
struct StepPlan {
    ids: Vec<String>,
    fates: Vec<Fate>,
    text: String,
    detail: Option<(u64, Option<(String, String)>)>,
    tools: bool,
}

#[derive(Debug, Clone)]
struct TurnPlan {
    steps: Vec<StepPlan>,
    /// The turn stops with its last step open (its calls as their fates leave them) and a
    /// recovery is appended before the next turn.
    crash: bool,
    /// A reduction in the turn's first step: turns up to this one before it are left out.
    compact: Option<u32>,
}

fn id() -> impl Strategy<Value = String> {
    prop_oneof![
        "c[0-2]",
        "call_[0-2]_[2-3]",
        "[a-z]{50,60}",
        "[a-f0-9]{8}",
        "id with spaces|[0-9]",
    ]
}

fn state() -> impl Strategy<Value = Option<(String, String)>> {
    prop_oneof![
        Just(None),
        Just(Some((
            "anthropic".to_string(),
            r#"[{"type":"thinking","thinking":"hm","signature":"s1"}]"#.to_string()
        ))),
        Just(Some((
            "openai-responses".to_string(),
            r#"[{"type":"reasoning","id":"rs_1","summary":[]}]"#.to_string()
        ))),
        Just(Some((
            "gemini".to_string(),
            r#"{"text":"sig","calls":["a",null]}"#.to_string()
        ))),
    ]
}

fn step(closed: bool) -> impl Strategy<Value = StepPlan> {
    let fate = if closed {
        // A call left started by a step that ended anyway (a fault): not final when its step
        // closed, its result decided by a later recovery or at the end.
        prop_oneof![6 => Just(Fate::Ok), 1 => Just(Fate::Failed), 1 => Just(Fate::Started)].boxed()
    } else {
        prop_oneof![
            Just(Fate::Ok),
            Just(Fate::Settled),
            Just(Fate::Started),
            Just(Fate::Approved),
            Just(Fate::Unreceived),
        ]
        .boxed()
    };
    (
        prop::collection::vec((id(), fate), 0..4),
        "[a-z ]{0,12}",
        prop::option::of((0u64..1000, state())),
        any::<bool>(),
    )
        .prop_map(|(calls, text, detail, tools)| {
            // Ids unique within a step (the runtime's rule), repeated across steps.
            let mut seen = std::collections::HashSet::new();
            let calls: Vec<_> = calls
                .into_iter()
                .filter(|(i, _)| seen.insert(i.clone()))
                .collect();
            let mut fates: Vec<Fate> = calls.iter().map(|(_, f)| *f).collect();
            // A call never received comes after every received one.
            fates.sort_by_key(|f| *f == Fate::Unreceived);
            StepPlan {
                ids: calls.into_iter().map(|(i, _)| i).collect(),
                fates,
                text,
                detail,
                tools,
            }
        })
}

fn turn() -> impl Strategy<Value = TurnPlan> {
    (
        prop::collection::vec(step(true), 0..3),
        prop::option::of(step(false)),
        prop::option::of(0u32..4),
    )
        .prop_map(|(mut steps, crash_step, compact)| {
            let crash = crash_step.is_some();
            steps.extend(crash_step);
            TurnPlan {
                steps,
                crash,
                compact,
            }
        })
}

/// Appends events, remembering each call's last seq.
struct Builder {
    journal: Journal,
    last: HashMap<CallRef, u64>,
}

impl Builder {
    fn open(dir: &Path) -> Builder {
        let options = Options {
            fsync: FsyncPolicy::Never,
            ..Options::default()
        };
        let storage = Arc::new(
            FsStorage::open(dir)
                .or_else(|_| FsStorage::create(dir))
                .unwrap(),
        );
        let (journal, _) = Journal::open(storage, options).unwrap();
        Builder {
            journal,
            last: HashMap::new(),
        }
    }

    fn put(&mut self, event: Event) -> u64 {
        self.journal.append(&Record { at_ms: 7, event }).unwrap()
    }

    fn call_event(&mut self, call: &CallRef, make: impl FnOnce(CallRef, Vec<u64>) -> Event) {
        let seq = self.put(make(call.clone(), vec![self.last[call]]));
        self.last.insert(call.clone(), seq);
    }

    fn step(
        &mut self,
        turn: u32,
        step: u32,
        plan: &StepPlan,
        compact: Option<u32>,
        result_len: usize,
    ) {
        self.put(Event::StepStart { turn, step });
        if plan.tools {
            self.put(Event::StepTools {
                turn,
                step,
                tools: vec![VisibleTool {
                    name: "mark".into(),
                    schema_hash: "h1".into(),
                }],
            });
        }
        if let Some(through_turn) = compact.filter(|t| *t < turn) {
            self.put(Event::ContextCompacted(ContextCompacted {
                turn,
                step,
                trigger: CompactTrigger::Threshold,
                through_turn,
                summary: (through_turn % 2 == 0).then(|| "they talked".into()),
                summary_note: None,
                shortened: Vec::new(),
                preview_chars: 40,
                tokens_before: 9,
                tokens_after: 3,
            }));
        }
        let calls: Vec<CallRef> = plan
            .ids
            .iter()
            .map(|id| CallRef {
                turn,
                step,
                call_id: id.clone(),
            })
            .collect();
        let arguments = |i: usize| format!("{{\"n\":{i}.50,\"s\":\"\\u00e9\"}}");
        let response = self.put(Event::LlmResponse {
            turn,
            step,
            response: ModelResponse {
                text: plan.text.clone(),
                tool_calls: calls
                    .iter()
                    .enumerate()
                    .map(|(i, c)| ModelCall {
                        call_id: c.call_id.clone(),
                        name: "mark".into(),
                        arguments: arguments(i),
                    })
                    .collect(),
                stop_reason: StopReason::ToolUse,
            },
        });
        if let Some((tokens, provider_state)) = &plan.detail {
            self.put(Event::LlmResponseDetail(LlmResponseDetail {
                turn,
                step,
                attempt: 0,
                response_id: None,
                usage: runtime::model::Usage {
                    input_tokens: *tokens,
                    output_tokens: 2,
                    cached_input_tokens: 1,
                },
                // Reasoning item ids are the provider's, unique in a session.
                provider_state: provider_state
                    .clone()
                    .map(|(f, items)| (f, items.replace("rs_1", &format!("rs_{turn}_{step}")))),
            }));
        }
        for (i, (c, fate)) in calls.iter().zip(&plan.fates).enumerate() {
            if *fate == Fate::Unreceived {
                continue;
            }
            let seq = self.put(Event::Received {
                call: c.clone(),
                index: i as u32,
                tool: "mark".into(),
                raw_arguments: arguments(i),
                source_seqs: vec![response],
            });
            self.last.insert(c.clone(), seq);
        }
        for (c, fate) in calls.iter().zip(&plan.fates) {
            if *fate == Fate::Unreceived {
                continue;
            }
            self.call_event(c, |call, source_seqs| Event::Parsed {
                call,
                arguments: "{}".into(),
                source_seqs,
            });
            self.call_event(c, |call, source_seqs| Event::Approved {
                call,
                approval: Approval::Default,
                source_seqs,
            });
            if *fate == Fate::Approved {
                continue;
            }
            self.call_event(c, |call, source_seqs| Event::StartedV4 {
                call,
                attempt: 1,
                resources: Resources {
                    writes: vec![format!("{}.txt", c.call_id)],
                    ..Resources::default()
                },
                source_seqs,
            });
            if *fate == Fate::Started {
                continue;
            }
            let failed = *fate == Fate::Failed;
            let content = format!("{} {}", c.call_id, "r".repeat(result_len));
            self.call_event(c, |call, source_seqs| Event::Settled {
                call,
                outcome: Outcome {
                    status: if failed {
                        OutcomeStatus::Error {
                            code: ErrorCode::ToolFailed,
                            message: content.clone(),
                        }
                    } else {
                        OutcomeStatus::Success
                    },
                    content: Text::Inline(content.clone()),
                    value: None,
                    details: None,
                    side_effects: vec![SideEffect::Other {
                        kind: "k".into(),
                        detail: "d".into(),
                    }],
                    attempts: 1,
                    duration_ms: 3,
                },
                source_seqs,
            });
            if *fate == Fate::Settled {
                continue;
            }
            self.call_event(c, |call, source_seqs| Event::Committed {
                call,
                result: CommittedResult {
                    content: content.clone(),
                    is_error: failed,
                    code: failed.then_some(ErrorCode::ToolFailed),
                    value: None,
                },
                source_seqs,
            });
        }
    }
}

/// Writes the session `turns` plan into `dir`; a crashed turn is recovered (the recovery
/// appended) before the next, as a resume would.
fn write_session(dir: &Path, system: Option<&str>, turns: &[TurnPlan], result_len: usize) {
    let mut b = Builder::open(dir);
    b.put(Event::SessionOpen(SessionOpen {
        schema_version: EVENT_SCHEMA_VERSION,
        session_id: "gen".into(),
        workspace: "/ws".into(),
        tools: vec![ToolDescriptor {
            name: "mark".into(),
            source: ToolSource::BuiltIn,
            version: "1".into(),
            schema_hash: "h1".into(),
        }],
    }));
    b.put(Event::ToolSchema(ToolSchema {
        schema_hash: "h1".into(),
        name: "mark".into(),
        description: "marks".into(),
        input_schema: r#"{"type":"object"}"#.into(),
    }));
    if let Some(system) = system {
        b.put(Event::SessionModel(SessionModel {
            provider: "anthropic".into(),
            model: "m".into(),
            system: Some(system.into()),
            settings: Default::default(),
            note: None,
            base_url: None,
        }));
    }
    let last = turns.len();
    for (t, plan) in turns.iter().enumerate() {
        let turn = t as u32 + 1;
        b.put(Event::TurnStart {
            turn,
            user_text: format!("turn {turn}"),
        });
        for (s, step) in plan.steps.iter().enumerate() {
            let compact = if s == 0 { plan.compact } else { None };
            b.step(turn, s as u32 + 1, step, compact, result_len);
            let open = plan.crash && s + 1 == plan.steps.len();
            if !open {
                b.put(Event::StepEnd {
                    turn,
                    step: s as u32 + 1,
                    outcome: StepOutcome::Completed,
                });
            }
        }
        if !plan.crash {
            b.put(Event::TurnEnd {
                turn,
                outcome: TurnOutcome::Completed,
            });
        } else if t + 1 < last {
            // The crash, then a resume's recovery.
            b.journal.close().unwrap();
            recover::Recovery::of(dir).write(true).run().unwrap();
            b = Builder::open(dir);
        }
    }
    b.journal.close().unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// The body and audits as the whole-session functions give them (reading only).
fn oracle(dir: &Path, format: Format, write: bool) -> (String, String, String) {
    let r = recover::Recovery::of(dir).write(write).run().unwrap();
    let body = recover::rebuild_body(&r.analysis, format).unwrap();
    let text = format!("{}\n", body.body.to_json_pretty());
    let json = format!("{}\n", recover::audit_json("j", &r.analysis));
    (text, json, recover::audit_text("j", &r.analysis))
}

fn streamed_body(dir: &Path, format: Format, write: bool) -> String {
    let first = recover::rebuild_first_reading(dir, format, write, &|_, _| {}, None).unwrap();
    let written = recover::rebuild_write(dir, first, Vec::new()).unwrap();
    String::from_utf8(written.out).unwrap()
}

fn streamed_audit(dir: &Path, json: bool) -> String {
    let first = recover::audit_first_reading(dir, &|_, _| {}).unwrap();
    let out = recover::audit_stream(dir, first, "j", json, Vec::new()).unwrap();
    String::from_utf8(out).unwrap()
}

fn segments(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".seg"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

/// Every format's body and both audits agree with the oracle, read only; and with the recovery
/// written, the body agrees and the journals end alike.
fn assert_agrees(dir: &Path) {
    let scratch = tempfile::tempdir().unwrap();
    for (i, format) in Format::ALL.into_iter().enumerate() {
        let (body, json, text) = oracle(dir, format, false);
        assert_eq!(streamed_body(dir, format, false), body, "{format}");
        if i == 0 {
            assert_eq!(streamed_audit(dir, true), json, "audit --json");
            assert_eq!(streamed_audit(dir, false), text, "audit");
        }
        let (whole, stream) = (
            scratch.path().join(format!("w{i}")),
            scratch.path().join(format!("s{i}")),
        );
        copy_dir(dir, &whole);
        copy_dir(dir, &stream);
        let (body, ..) = oracle(&whole, format, true);
        assert_eq!(
            streamed_body(&stream, format, true),
            body,
            "{format}, written"
        );
        assert_eq!(
            segments(&stream),
            segments(&whole),
            "{format}: the journals"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn streamed_rebuild_and_audit_say_what_the_whole_session_says(
        turns in prop::collection::vec(turn(), 1..6),
        system in prop::option::of("[a-z ]{1,10}"),
    ) {
        let dir = tempfile::tempdir().unwrap();
        write_session(dir.path(), system.as_deref(), &turns, 20);
        assert_agrees(dir.path());
    }
}

/// Through the binary, on a journal whose results alone are tens of MB (what the old path
/// held whole): `recover rebuild` in every format is the oracle's body, valid for its format
/// (but Anthropic's tools rule, which this journal meets: it has its tools), and `recover
/// audit` the oracle's audit.
#[test]
fn the_binary_streams_a_large_journal_as_the_oracle_says() {
    let dir = tempfile::tempdir().unwrap();
    let plan = |crash| TurnPlan {
        steps: (0..3)
            .map(|s| StepPlan {
                ids: (0..4).map(|i| format!("c{i}")).collect(),
                fates: vec![
                    Fate::Ok,
                    Fate::Ok,
                    Fate::Failed,
                    if crash && s == 2 {
                        Fate::Started
                    } else {
                        Fate::Ok
                    },
                ],
                text: "working".into(),
                detail: Some((5, None)),
                tools: s == 0,
            })
            .collect(),
        crash,
        compact: None,
    };
    let turns: Vec<TurnPlan> = (0..40).map(|t| plan(t == 39)).collect();
    // 40 turns of 12 calls of 64 KiB, each result journaled twice: about 60 MB.
    write_session(dir.path(), Some("be brief"), &turns, 64 << 10);
    let bin = env!("CARGO_BIN_EXE_recover");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(bin)
            .args(args)
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    for format in Format::ALL {
        let (body, ..) = oracle(dir.path(), format, false);
        let printed = run(&["rebuild", "--dry-run", "--format", format.as_str()]);
        assert!(
            printed == body,
            "{format}: the printed body is not the oracle's"
        );
        let value: serde_json::Value = serde_json::from_str(&printed).unwrap();
        validate(format, &value).unwrap();
        if format == Format::OpenAiChat {
            // The binary names the journal by its directory.
            let name = dir.path().display().to_string();
            let r = recover::Recovery::of(dir.path()).run().unwrap();
            let json = format!("{}\n", recover::audit_json(&name, &r.analysis));
            assert!(run(&["audit", "--json"]) == json, "audit --json");
            assert!(
                run(&["audit"]) == recover::audit_text(&name, &r.analysis),
                "audit"
            );
        }
    }
}
