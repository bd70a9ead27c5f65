//! docs/FORMAT.md's event table against the bytes the codec writes. The byte layouts pinned
//! here are format 1's (fixint, `FORMAT_1`): what every version-1 journal holds and a resumed
//! one keeps being written in. `format_2.rs` pins format 2's (varint) for representative events.

mod format_2;
mod schema_5;

use journal::codec::Encoding;

/// The encoding whose bytes the layout tests of this file (and `schema_5.rs`) pin.
const FORMAT_1: Encoding = Encoding::Fixint;

use tooljournal_runtime::event::*;
use tooljournal_runtime::model::{ModelErrorKind, ModelSettings, Usage};
use tooljournal_runtime::state::CallState;
use tooljournal_runtime::ErrorCode;

/// `record` as format 1 lays it out.
fn encode(record: &Record) -> Vec<u8> {
    let mut out = Vec::new();
    journal::codec::encode_into(record, &mut out, 1 << 20, FORMAT_1).unwrap();
    out
}

fn call() -> CallRef {
    CallRef {
        turn: 1,
        step: 2,
        call_id: "c".into(),
    }
}

fn committed() -> CommittedResult {
    CommittedResult {
        content: "x".into(),
        is_error: false,
        code: None,
        value: None,
    }
}

/// One example of every event, with the index and name FORMAT.md gives it.
fn every_event() -> Vec<(u32, &'static str, Event)> {
    let s = |v: &[u64]| v.to_vec();
    vec![
        (
            0,
            "session/open",
            Event::SessionOpen(SessionOpen {
                schema_version: 1,
                session_id: "s".into(),
                workspace: "w".into(),
                tools: vec![],
            }),
        ),
        (
            1,
            "turn/start",
            Event::TurnStart {
                turn: 1,
                user_text: "u".into(),
            },
        ),
        (2, "step/start", Event::StepStart { turn: 1, step: 1 }),
        (
            3,
            "llm/response",
            Event::LlmResponse {
                turn: 1,
                step: 1,
                response: ModelResponse {
                    text: "t".into(),
                    tool_calls: vec![],
                    stop_reason: StopReason::EndTurn,
                },
            },
        ),
        (
            4,
            "step/end",
            Event::StepEnd {
                turn: 1,
                step: 1,
                outcome: StepOutcome::Completed,
            },
        ),
        (
            5,
            "turn/end",
            Event::TurnEnd {
                turn: 1,
                outcome: TurnOutcome::Completed,
            },
        ),
        (6, "session/close", Event::SessionClose),
        (
            7,
            "received",
            Event::Received {
                call: call(),
                index: 0,
                tool: "t".into(),
                raw_arguments: "{}".into(),
                source_seqs: s(&[1]),
            },
        ),
        (
            8,
            "parsed",
            Event::Parsed {
                call: call(),
                arguments: "{}".into(),
                source_seqs: s(&[2]),
            },
        ),
        (
            9,
            "approved",
            Event::Approved {
                call: call(),
                approval: Approval::Default,
                source_seqs: s(&[3]),
            },
        ),
        (
            10,
            "started",
            Event::StartedV4 {
                call: call(),
                attempt: 1,
                resources: Resources::default(),
                source_seqs: s(&[4]),
            },
        ),
        (
            11,
            "settled",
            Event::Settled {
                call: call(),
                outcome: Outcome {
                    status: OutcomeStatus::Success,
                    content: Text::Inline("x".into()),
                    value: None,
                    details: None,
                    side_effects: vec![],
                    attempts: 1,
                    duration_ms: 3,
                },
                source_seqs: s(&[5]),
            },
        ),
        (
            12,
            "committed",
            Event::Committed {
                call: call(),
                result: committed(),
                source_seqs: s(&[6]),
            },
        ),
        (
            13,
            "rejected",
            Event::Rejected {
                call: call(),
                code: ErrorCode::SchemaError,
                reason: "r".into(),
                source_seqs: s(&[9]),
            },
        ),
        (
            14,
            "cancelled-before-start",
            Event::CancelledBeforeStart {
                call: call(),
                reason: "r".into(),
                source_seqs: s(&[1]),
            },
        ),
        (
            15,
            "ask/pending",
            Event::AskPending {
                call: call(),
                question: "q".into(),
            },
        ),
        (
            16,
            "ask/answered",
            Event::AskAnswered {
                call: call(),
                answer: AskAnswer::Denied,
            },
        ),
        (
            17,
            "ask/cancelled",
            Event::AskCancelled {
                call: call(),
                reason: "r".into(),
            },
        ),
        (18, "ask/expired", Event::AskExpired { call: call() }),
        (19, "plan/replace", Event::PlanReplace { items: vec![] }),
        (
            20,
            "spill/stored",
            Event::SpillStored {
                locator: "l".into(),
                bytes: 1,
                sha256: "h".into(),
            },
        ),
        (
            21,
            "fault",
            Event::Fault {
                turn: 1,
                step: 1,
                message: "m".into(),
            },
        ),
        (
            22,
            "recovery",
            Event::Recovery(Recovery {
                dropped_bytes: 0,
                calls: vec![RecoveredCall {
                    call: call(),
                    state: CallState::Started,
                    classification: Some(Classification::ToolOutcomeUnknown),
                    result: committed(),
                }],
                interrupted_step: None,
                interrupted_turn: None,
            }),
        ),
        (
            23,
            "step/tools",
            Event::StepTools {
                turn: 1,
                step: 1,
                tools: vec![VisibleTool {
                    name: "read".into(),
                    schema_hash: "h".into(),
                }],
            },
        ),
        (
            24,
            "plan/mode",
            Event::PlanMode {
                on: false,
                reason: "r".into(),
                call: Some(call()),
            },
        ),
        (
            25,
            "session/policy",
            Event::SessionPolicy(SessionPolicy {
                approval: ApprovalPolicy::Deny,
                parallel_max: 3,
                fsync: SyncPolicy::Group,
                exposure: vec![("grep".into(), "hidden".into())],
                config: Some(ConfigFile {
                    path: "/c.toml".into(),
                    sha256: "ab".into(),
                }),
                reason: "r".into(),
            }),
        ),
        (
            26,
            "call/process",
            Event::CallProcess {
                call: call(),
                process: ProcessStarted {
                    pid: 7,
                    pgid: 7,
                    start_ticks: 99,
                    boot_id: "b".into(),
                },
            },
        ),
        (
            27,
            "process/killed",
            Event::ProcessKilled {
                call: call(),
                pgid: 7,
                signal: 9,
            },
        ),
        (
            28,
            "session/model",
            Event::SessionModel(SessionModel {
                provider: "gemini".into(),
                model: "m".into(),
                system: None,
                settings: ModelSettings::default(),
                note: None,
                base_url: None,
            }),
        ),
        (
            29,
            "tool/schema",
            Event::ToolSchema(ToolSchema {
                schema_hash: "h".into(),
                name: "read".into(),
                description: "d".into(),
                input_schema: "{}".into(),
            }),
        ),
        (
            30,
            "llm/request",
            Event::LlmRequest(LlmRequest {
                turn: 1,
                step: 1,
                attempt: 1,
                provider: "anthropic".into(),
                model: "m".into(),
                body_sha256: "h".into(),
                body_bytes: 10,
            }),
        ),
        (
            31,
            "llm/attempt-failed",
            Event::LlmAttemptFailed(LlmAttemptFailed {
                turn: 1,
                step: 1,
                attempt: 1,
                kind: ModelErrorKind::Transport,
                status: None,
                message: "reset".into(),
                partial_text: String::new(),
                retry: true,
                backoff_ms: 500,
            }),
        ),
        (
            32,
            "llm/response-detail",
            Event::LlmResponseDetail(LlmResponseDetail {
                turn: 1,
                step: 1,
                attempt: 2,
                response_id: None,
                usage: Usage::default(),
                provider_state: None,
            }),
        ),
        (
            33,
            "ask/question",
            Event::AskQuestion {
                call: call(),
                question: Question {
                    text: "q".into(),
                    options: vec![],
                    multiple: false,
                    free_text: true,
                    plan_option: None,
                },
            },
        ),
        (
            34,
            "ask/reply",
            Event::AskReplied {
                call: call(),
                reply: Reply::Declined { text: None },
            },
        ),
        (
            35,
            "context/summary-requested",
            Event::ContextSummaryRequested(ContextSummaryRequested {
                turn: 2,
                step: 1,
                through_turn: 1,
                body_sha256: "h".into(),
                body_bytes: 10,
            }),
        ),
        (
            36,
            "context/compacted",
            Event::ContextCompacted(ContextCompacted {
                turn: 2,
                step: 1,
                trigger: CompactTrigger::Overflow,
                through_turn: 1,
                summary: Some("s".into()),
                summary_note: None,
                shortened: vec![],
                preview_chars: 2000,
                tokens_before: 100,
                tokens_after: 40,
            }),
        ),
        (
            37,
            "started",
            Event::Started(CallStarted {
                call: call(),
                attempt: 2,
                resources: Resources::default(),
                idempotency_key: idempotency_key("s", &call()),
                evidence: vec![Evidence::FileReplace {
                    path: "a.txt".into(),
                    before_sha256: None,
                    after_sha256: "ff".into(),
                }],
                source_seqs: s(&[5]),
            }),
        ),
        (
            38,
            "recovery/rerun",
            Event::RecoveryRerun(RecoveryRerun {
                policy: RerunPolicy::Safe,
                calls: vec![call()],
            }),
        ),
        (
            39,
            "writer/stolen",
            Event::WriterStolen(WriterStolen {
                epoch: 2,
                holder: "host:1".into(),
                holder_epoch: 1,
                lease_left_ms: 500,
            }),
        ),
        (
            40,
            "import/source",
            Event::ImportSource(ImportSource {
                agent: "pi".into(),
                file: "s.jsonl".into(),
                size_bytes: 10,
                sha256: "00".repeat(32),
                source_session_id: None,
                damaged: vec![],
                notes: vec![],
            }),
        ),
        (
            41,
            "import/line",
            Event::ImportLine(ImportLine {
                line: 3,
                offset: 99,
            }),
        ),
        (
            42,
            "import/outcome",
            Event::ImportOutcome(ImportOutcome {
                call: call(),
                verdict: ImportVerdict::OutcomeUnknown { why: "w".into() },
                result: CommittedResult {
                    content: "c".into(),
                    is_error: true,
                    code: Some(ErrorCode::ToolOutcomeUnknown),
                    value: None,
                },
                source_seqs: vec![5],
            }),
        ),
        (
            43,
            "llm/refusal",
            Event::LlmRefusal(LlmRefusal {
                turn: 1,
                step: 1,
                attempt: 1,
                reason: "refusal".into(),
                explanation: "e".into(),
            }),
        ),
        (
            44,
            "llm/note",
            Event::LlmNote(LlmNote {
                turn: 1,
                step: 1,
                attempt: 1,
                note: "n".into(),
            }),
        ),
        (45, "session/reopen", Event::SessionReopen),
        (
            46,
            "context/calibrated",
            Event::ContextCalibrated(ContextCalibrated {
                turn: 2,
                step: 1,
                attempt: 1,
                estimate_tokens: 100,
                provider_tokens: 250,
                provider_max_tokens: Some(200),
            }),
        ),
        (
            47,
            "session/sandbox",
            Event::SessionSandbox(tooljournal_runtime::event::SandboxBound {
                policy: tooljournal_runtime::event::SandboxPolicy::WorkspaceWrite,
                enforced: true,
                writable: vec!["/w".into()],
                readable: vec!["/usr".into(), "/w".into()],
                network: false,
                mechanism: "Landlock ABI 6".into(),
                escalated: false,
            }),
        ),
    ]
}

fn string(s: &str) -> Vec<u8> {
    let mut b = (s.len() as u64).to_le_bytes().to_vec();
    b.extend(s.as_bytes());
    b
}

#[test]
fn a_session_model_event_is_laid_out_field_by_field_as_documented() {
    let event = Event::SessionModel(SessionModel {
        provider: "openai-chat".into(),
        model: "gpt".into(),
        system: Some("sys".into()),
        settings: ModelSettings {
            max_tokens: Some(256),
            temperature: Some(0.5),
        },
        note: None,
        base_url: Some("http://localhost:11434/v1".into()),
    });
    let mut expected = Vec::new();
    expected.extend(7u64.to_le_bytes()); // at_ms
    expected.extend(28u32.to_le_bytes()); // session/model
    expected.extend(string("openai-chat"));
    expected.extend(string("gpt"));
    expected.push(1); // system: some
    expected.extend(string("sys"));
    expected.push(1); // max_tokens: some
    expected.extend(256u32.to_le_bytes());
    expected.push(1); // temperature: some, IEEE 754 binary64 little-endian
    expected.extend([0, 0, 0, 0, 0, 0, 0xE0, 0x3F]);
    expected.push(0); // note: none
    expected.push(1); // base_url: some
    expected.extend(string("http://localhost:11434/v1"));
    assert_eq!(encode(&Record { at_ms: 7, event }), expected);
}

#[test]
fn the_llm_events_are_laid_out_field_by_field_as_documented() {
    let failed = Event::LlmAttemptFailed(LlmAttemptFailed {
        turn: 2,
        step: 3,
        attempt: 1,
        kind: ModelErrorKind::Status,
        status: Some(429),
        message: "slow down".into(),
        partial_text: "hal".into(),
        retry: true,
        backoff_ms: 1500,
    });
    let mut expected = Vec::new();
    expected.extend(7u64.to_le_bytes()); // at_ms
    expected.extend(31u32.to_le_bytes()); // llm/attempt-failed
    expected.extend(2u32.to_le_bytes()); // turn
    expected.extend(3u32.to_le_bytes()); // step
    expected.extend(1u32.to_le_bytes()); // attempt
    expected.extend(1u32.to_le_bytes()); // kind: status
    expected.push(1); // status: some, a u16
    expected.extend(429u16.to_le_bytes());
    expected.extend(string("slow down"));
    expected.extend(string("hal"));
    expected.push(1); // retry
    expected.extend(1500u64.to_le_bytes());
    assert_eq!(
        encode(&Record {
            at_ms: 7,
            event: failed
        }),
        expected
    );

    let detail = Event::LlmResponseDetail(LlmResponseDetail {
        turn: 2,
        step: 3,
        attempt: 2,
        response_id: Some("r".into()),
        usage: Usage {
            input_tokens: 10,
            output_tokens: 20,
            cached_input_tokens: 5,
        },
        provider_state: Some(("anthropic".into(), "[]".into())),
    });
    let mut expected = Vec::new();
    expected.extend(7u64.to_le_bytes());
    expected.extend(32u32.to_le_bytes()); // llm/response-detail
    expected.extend(2u32.to_le_bytes());
    expected.extend(3u32.to_le_bytes());
    expected.extend(2u32.to_le_bytes());
    expected.push(1);
    expected.extend(string("r"));
    for n in [10u64, 20, 5] {
        expected.extend(n.to_le_bytes()); // usage: input, output, cached input
    }
    expected.push(1); // provider_state: a tuple, no count
    expected.extend(string("anthropic"));
    expected.extend(string("[]"));
    assert_eq!(
        encode(&Record {
            at_ms: 7,
            event: detail
        }),
        expected
    );

    let request = Event::LlmRequest(LlmRequest {
        turn: 2,
        step: 3,
        attempt: 4,
        provider: "gemini".into(),
        model: "g".into(),
        body_sha256: "ff".into(),
        body_bytes: 99,
    });
    let mut expected = Vec::new();
    expected.extend(7u64.to_le_bytes());
    expected.extend(30u32.to_le_bytes()); // llm/request
    for n in [2u32, 3, 4] {
        expected.extend(n.to_le_bytes()); // turn, step, attempt
    }
    expected.extend(string("gemini"));
    expected.extend(string("g"));
    expected.extend(string("ff"));
    expected.extend(99u64.to_le_bytes());
    assert_eq!(
        encode(&Record {
            at_ms: 7,
            event: request
        }),
        expected
    );
}

#[test]
fn the_schema_3_variants_have_the_indexes_format_md_gives_them() {
    assert_eq!(
        variant_index(&StopReason::Interrupted),
        3,
        "StopReason 3 interrupted"
    );
    let kinds = [
        ModelErrorKind::Transport,
        ModelErrorKind::Status,
        ModelErrorKind::Malformed,
        ModelErrorKind::Config,
    ];
    for (i, kind) in kinds.into_iter().enumerate() {
        assert_eq!(variant_index(&kind), i as u32, "ModelErrorKind {kind:?}");
    }
}

/// The `u32` an enum value's format-1 encoding begins with: its variant index.
fn variant_index<T: serde::Serialize>(value: &T) -> u32 {
    let mut out = Vec::new();
    journal::codec::encode_into(value, &mut out, 1 << 10, FORMAT_1).unwrap();
    u32::from_le_bytes(out[0..4].try_into().expect("a variant index"))
}

#[test]
fn the_schema_4_variants_have_the_indexes_format_md_gives_them() {
    assert_eq!(
        variant_index(&AskAnswer::Answered),
        5,
        "AskAnswer 5 answered"
    );
    assert_eq!(
        variant_index(&AskAnswer::Declined),
        6,
        "AskAnswer 6 declined"
    );
    let answered = Reply::Answered(Answer {
        choice: vec![],
        text: None,
    });
    assert_eq!(variant_index(&answered), 0, "Reply 0 Answered");
    assert_eq!(
        variant_index(&Reply::Declined { text: None }),
        1,
        "Reply 1 Declined"
    );
    let approval = Approval::Asked {
        answer: AskAnswer::Answered,
    };
    let mut out = Vec::new();
    journal::codec::encode_into(&approval, &mut out, 1 << 10, FORMAT_1).unwrap();
    assert_eq!(
        out,
        [2, 0, 0, 0, 5, 0, 0, 0],
        "Approval 2 Asked {{answer: answered}}"
    );
}

#[test]
fn the_ask_events_are_laid_out_field_by_field_as_documented() {
    let call_bytes = || {
        let mut b = Vec::new();
        b.extend(1u32.to_le_bytes()); // call.turn
        b.extend(2u32.to_le_bytes()); // call.step
        b.extend(string("c"));
        b
    };
    let question = Event::AskQuestion {
        call: call(),
        question: Question {
            text: "Go?".into(),
            options: vec![
                QuestionOption {
                    label: "yes".into(),
                    description: "do it".into(),
                },
                QuestionOption {
                    label: "no".into(),
                    description: String::new(),
                },
            ],
            multiple: false,
            free_text: true,
            plan_option: Some("yes".into()),
        },
    };
    let mut expected = Vec::new();
    expected.extend(7u64.to_le_bytes()); // at_ms
    expected.extend(33u32.to_le_bytes()); // ask/question
    expected.extend(call_bytes());
    expected.extend(string("Go?")); // text
    expected.extend(2u64.to_le_bytes()); // two options: label, description
    expected.extend(string("yes"));
    expected.extend(string("do it"));
    expected.extend(string("no"));
    expected.extend(string(""));
    expected.push(0); // multiple
    expected.push(1); // free_text
    expected.push(1); // plan_option: some
    expected.extend(string("yes"));
    assert_eq!(
        encode(&Record {
            at_ms: 7,
            event: question
        }),
        expected
    );

    let reply = Event::AskReplied {
        call: call(),
        reply: Reply::Answered(Answer {
            choice: vec!["yes".into()],
            text: Some("now".into()),
        }),
    };
    let mut expected = Vec::new();
    expected.extend(7u64.to_le_bytes());
    expected.extend(34u32.to_le_bytes()); // ask/reply
    expected.extend(call_bytes());
    expected.extend(0u32.to_le_bytes()); // Answered: the Answer's fields follow
    expected.extend(1u64.to_le_bytes()); // choice: one label
    expected.extend(string("yes"));
    expected.push(1); // text: some
    expected.extend(string("now"));
    assert_eq!(
        encode(&Record {
            at_ms: 7,
            event: reply
        }),
        expected
    );

    let declined = Event::AskReplied {
        call: call(),
        reply: Reply::Declined {
            text: Some("later".into()),
        },
    };
    let mut expected = Vec::new();
    expected.extend(7u64.to_le_bytes());
    expected.extend(34u32.to_le_bytes());
    expected.extend(call_bytes());
    expected.extend(1u32.to_le_bytes()); // Declined {text}
    expected.push(1);
    expected.extend(string("later"));
    assert_eq!(
        encode(&Record {
            at_ms: 7,
            event: declined
        }),
        expected
    );
}

#[test]
fn the_context_reduction_variants_have_the_indexes_format_md_gives_them() {
    assert_eq!(
        variant_index(&ModelErrorKind::ContextOverflow),
        4,
        "ModelErrorKind 4 context_overflow"
    );
    assert_eq!(
        serde_json::to_value(ModelErrorKind::ContextOverflow).unwrap(),
        "context_overflow"
    );
    assert_eq!(
        variant_index(&CompactTrigger::Overflow),
        0,
        "CompactTrigger 0 overflow"
    );
    assert_eq!(
        variant_index(&CompactTrigger::Threshold),
        1,
        "CompactTrigger 1 threshold"
    );
    assert_eq!(
        serde_json::to_value(CompactTrigger::Threshold).unwrap(),
        "threshold"
    );
}

#[test]
fn the_context_events_are_laid_out_field_by_field_as_documented() {
    let asked = Event::ContextSummaryRequested(ContextSummaryRequested {
        turn: 3,
        step: 2,
        through_turn: 2,
        body_sha256: "ab".into(),
        body_bytes: 4096,
    });
    let mut expected = Vec::new();
    expected.extend(7u64.to_le_bytes()); // at_ms
    expected.extend(35u32.to_le_bytes()); // context/summary-requested
    for n in [3u32, 2, 2] {
        expected.extend(n.to_le_bytes()); // turn, step, through_turn
    }
    expected.extend(string("ab"));
    expected.extend(4096u64.to_le_bytes());
    assert_eq!(
        encode(&Record {
            at_ms: 7,
            event: asked
        }),
        expected
    );

    let compacted = Event::ContextCompacted(ContextCompacted {
        turn: 3,
        step: 2,
        trigger: CompactTrigger::Threshold,
        through_turn: 1,
        summary: None,
        summary_note: Some("down".into()),
        shortened: vec![(3, 1), (2, 4)],
        preview_chars: 2000,
        tokens_before: 90_000,
        tokens_after: 30_000,
    });
    let mut expected = Vec::new();
    expected.extend(7u64.to_le_bytes());
    expected.extend(36u32.to_le_bytes()); // context/compacted
    expected.extend(3u32.to_le_bytes()); // turn
    expected.extend(2u32.to_le_bytes()); // step
    expected.extend(1u32.to_le_bytes()); // trigger: threshold
    expected.extend(1u32.to_le_bytes()); // through_turn
    expected.push(0); // summary: none
    expected.push(1); // summary_note: some
    expected.extend(string("down"));
    expected.extend(2u64.to_le_bytes()); // two (turn, step) pairs, each two u32s, no count
    for n in [3u32, 1, 2, 4] {
        expected.extend(n.to_le_bytes());
    }
    expected.extend(2000u32.to_le_bytes()); // preview_chars
    expected.extend(90_000u64.to_le_bytes()); // tokens_before
    expected.extend(30_000u64.to_le_bytes()); // tokens_after
    assert_eq!(
        encode(&Record {
            at_ms: 7,
            event: compacted
        }),
        expected
    );

    // An overflow is an `llm/attempt-failed` of kind 4, its status kept.
    let failed = Event::LlmAttemptFailed(LlmAttemptFailed {
        turn: 3,
        step: 2,
        attempt: 1,
        kind: ModelErrorKind::ContextOverflow,
        status: Some(400),
        message: "too long".into(),
        partial_text: String::new(),
        retry: false,
        backoff_ms: 0,
    });
    let bytes = encode(&Record {
        at_ms: 7,
        event: failed,
    });
    assert_eq!(bytes[8..12], 31u32.to_le_bytes());
    assert_eq!(bytes[24..31], [4, 0, 0, 0, 1, 0x90, 0x01]); // kind 4, status Some(400)
}

#[test]
fn a_session_policy_event_is_laid_out_field_by_field_as_documented() {
    let event = Event::SessionPolicy(SessionPolicy {
        approval: ApprovalPolicy::Deny,
        parallel_max: 3,
        fsync: SyncPolicy::Never,
        exposure: vec![("g".into(), "hidden".into())],
        config: None,
        reason: "r".into(),
    });
    let mut expected = Vec::new();
    expected.extend(7u64.to_le_bytes()); // at_ms
    expected.extend(25u32.to_le_bytes()); // session/policy
    expected.extend(1u32.to_le_bytes()); // approval: deny
    expected.extend(3u32.to_le_bytes()); // parallel_max
    expected.extend(2u32.to_le_bytes()); // fsync: never
    expected.extend(1u64.to_le_bytes()); // one exposure pair
    expected.extend(string("g"));
    expected.extend(string("hidden"));
    expected.push(0); // config: none
    expected.extend(string("r"));
    assert_eq!(encode(&Record { at_ms: 7, event }), expected);
}

#[test]
fn the_new_source_and_side_effect_variants_have_the_indexes_format_md_gives_them() {
    let mcp = ToolSource::Mcp {
        server: "a".into(),
        implementation: "b".into(),
        version: "c".into(),
    };
    let mut out = Vec::new();
    journal::codec::encode_into(&mcp, &mut out, 1 << 10, FORMAT_1).unwrap();
    let mut expected = 2u32.to_le_bytes().to_vec();
    for s in ["a", "b", "c"] {
        expected.extend((s.len() as u64).to_le_bytes());
        expected.extend(s.as_bytes());
    }
    assert_eq!(
        out, expected,
        "ToolSource 2 Mcp {{server, implementation, version}}"
    );
    let loaded = SideEffect::ToolsLoaded {
        names: vec!["x".into()],
    };
    let mut out = Vec::new();
    journal::codec::encode_into(&loaded, &mut out, 1 << 10, FORMAT_1).unwrap();
    let mut expected = 4u32.to_le_bytes().to_vec();
    expected.extend(1u64.to_le_bytes());
    expected.extend(1u64.to_le_bytes());
    expected.extend(b"x");
    assert_eq!(out, expected, "SideEffect 4 ToolsLoaded {{names}}");
}

#[test]
fn every_event_has_the_index_and_name_format_md_gives_it() {
    let events = every_event();
    assert_eq!(events.len() as u32, Event::VARIANT_COUNT);
    for (index, name, event) in events {
        assert_eq!(event.kind(), name);
        let bytes = encode(&Record {
            at_ms: 7,
            event: event.clone(),
        });
        assert_eq!(&bytes[0..8], &7u64.to_le_bytes(), "{name}: at_ms first");
        assert_eq!(&bytes[8..12], &index.to_le_bytes(), "{name}: variant index");
        let back: Record = journal::codec::decode(&bytes, FORMAT_1).unwrap();
        assert_eq!(back.event, event, "{name} round-trips");
        // Format 2: at_ms 7 and the index (all below 251) are one byte each.
        let bytes = format_2::encode(&Record {
            at_ms: 7,
            event: event.clone(),
        });
        assert_eq!(bytes[..2], [7, index as u8], "{name}: format 2 prefix");
        let back: Record = journal::codec::decode(&bytes, Encoding::Varint).unwrap();
        assert_eq!(back.event, event, "{name} round-trips in format 2");
    }
}

#[test]
fn a_rejected_event_is_laid_out_field_by_field_as_documented() {
    let event = Event::Rejected {
        call: call(),
        code: ErrorCode::SchemaError,
        reason: "bad".into(),
        source_seqs: vec![9],
    };
    let mut expected = Vec::new();
    expected.extend(7u64.to_le_bytes()); // at_ms
    expected.extend(13u32.to_le_bytes()); // rejected
    expected.extend(1u32.to_le_bytes()); // call.turn
    expected.extend(2u32.to_le_bytes()); // call.step
    expected.extend(1u64.to_le_bytes()); // call_id length
    expected.extend(b"c");
    expected.extend(2u32.to_le_bytes()); // SCHEMA_ERROR
    expected.extend(3u64.to_le_bytes()); // reason length
    expected.extend(b"bad");
    expected.extend(1u64.to_le_bytes()); // one source seq
    expected.extend(9u64.to_le_bytes());
    assert_eq!(encode(&Record { at_ms: 7, event }), expected);
}

/// FORMAT.md's `ErrorCode` list: (index, name) in the order the document gives them.
fn documented_error_codes() -> Vec<(u32, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/FORMAT.md");
    let doc = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let line = doc
        .lines()
        .find(|l| l.contains("`ErrorCode` ="))
        .unwrap_or_else(|| panic!("{path}: no line defines `ErrorCode` = …"));
    let list = &line[line.find("`ErrorCode` =").expect("found above") + "`ErrorCode` =".len()..];
    let entry = regex::Regex::new(r"(\d+) `([A-Z_]+)`").expect("a valid pattern");
    entry
        .captures_iter(list)
        .map(|c| (c[1].parse().expect("digits"), c[2].to_owned()))
        .collect()
}

#[test]
fn error_codes_have_the_indexes_format_md_gives_them() {
    let documented = documented_error_codes();
    assert_eq!(
        documented.len(),
        ErrorCode::ALL.len(),
        "FORMAT.md lists {documented:?}; the code knows {:?}",
        ErrorCode::ALL
    );
    for (index, name) in &documented {
        let code: ErrorCode = name
            .parse()
            .unwrap_or_else(|e| panic!("FORMAT.md's {name} is no error code: {e}"));
        let mut out = Vec::new();
        journal::codec::encode_into(&code, &mut out, 16, FORMAT_1).unwrap();
        assert_eq!(
            out,
            index.to_le_bytes(),
            "{name}: FORMAT.md says index {index}"
        );
    }
}

fn format_md() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/FORMAT.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_event_table_of_format_md_names_every_event_at_its_index() {
    let doc = format_md();
    let row = regex::Regex::new(r"^\| (\d+) \| `([a-z/-]+)` \|").expect("a valid pattern");
    let documented: Vec<(u32, String)> = doc
        .lines()
        .filter_map(|l| row.captures(l))
        .map(|c| (c[1].parse().expect("digits"), c[2].to_owned()))
        .collect();
    let known: Vec<(u32, String)> = every_event()
        .into_iter()
        .map(|(index, name, _)| (index, name.to_owned()))
        .collect();
    assert_eq!(documented, known);
}

/// The variants FORMAT.md gives `ty` (`- \`TY\` = 0 \`a\` | 1 \`b\` …`, over continuation
/// lines), as (index, name).
fn documented_variants(ty: &str) -> Vec<(u32, String)> {
    let doc = format_md();
    let head = format!("`{ty}` =");
    let mut lines = doc.lines().skip_while(|l| !l.contains(&head));
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("FORMAT.md: no line defines {head}"));
    let mut item = first[first.find(&head).expect("found above") + head.len()..].to_owned();
    for l in lines.take_while(|l| l.starts_with("  ")) {
        item.push(' ');
        item.push_str(l.trim());
    }
    // Only the list itself: a parenthesis's words are not variants.
    let mut depth = 0;
    let list: String = item
        .chars()
        .filter(|c| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            depth == 0 && *c != ')'
        })
        .collect();
    let entry = regex::Regex::new(r"(\d+) `([a-z_]+)`").expect("a valid pattern");
    entry
        .captures_iter(&list)
        .map(|c| (c[1].parse().expect("digits"), c[2].to_owned()))
        .collect()
}

#[test]
fn format_md_lists_the_model_error_kinds_and_the_compaction_triggers_by_index() {
    let kinds = [
        ModelErrorKind::Transport,
        ModelErrorKind::Status,
        ModelErrorKind::Malformed,
        ModelErrorKind::Config,
        ModelErrorKind::ContextOverflow,
    ];
    let names = |values: Vec<serde_json::Value>| -> Vec<(u32, String)> {
        values
            .into_iter()
            .enumerate()
            .map(|(i, v)| (i as u32, v.as_str().expect("a unit variant").to_owned()))
            .collect()
    };
    for kind in kinds {
        assert_eq!(
            variant_index(&kind),
            kinds.iter().position(|k| *k == kind).unwrap() as u32
        );
    }
    assert_eq!(
        documented_variants("ModelErrorKind"),
        names(
            kinds
                .iter()
                .map(|k| serde_json::to_value(k).unwrap())
                .collect()
        )
    );
    let triggers = [CompactTrigger::Overflow, CompactTrigger::Threshold];
    assert_eq!(
        documented_variants("CompactTrigger"),
        names(
            triggers
                .iter()
                .map(|t| serde_json::to_value(t).unwrap())
                .collect()
        )
    );
}

/// The three lines of FORMAT.md's *Context reduction* block, `\n` as a newline.
fn documented_reduction_texts() -> Vec<String> {
    let doc = format_md();
    let start = doc
        .find("```text\n[Summary of the {N}")
        .expect("FORMAT.md: the reduction texts' block")
        + "```text\n".len();
    let block = &doc[start..start + doc[start..].find("```").expect("the block's end")];
    block.lines().map(|l| l.replace("\\n", "\n")).collect()
}

#[test]
fn the_reduced_history_has_the_texts_format_md_gives() {
    use history::layout::{layout, shorten, Compaction, StepView, TurnView};
    use tooljournal_runtime::model::{ConvCall, ConvResult, Message};
    let texts = documented_reduction_texts();
    assert_eq!(texts.len(), 3, "{texts:?}");
    let turn = |n: u32, result: &str| TurnView {
        turn: n,
        user_text: format!("user {n}"),
        steps: vec![StepView {
            step: 1,
            text: String::new(),
            calls: vec![ConvCall {
                id: format!("c{n}"),
                name: "t".into(),
                arguments: "{}".into(),
            }],
            state: None,
            results: vec![ConvResult {
                id: format!("c{n}"),
                name: "t".into(),
                content: result.into(),
                is_error: false,
            }],
        }],
    };
    let turns = vec![turn(1, "a"), turn(2, "b"), turn(3, "0123456789")];
    let first_user = |c: &Compaction| match &layout(None, &turns, Some(c)).messages[0] {
        Message::User { text } => text.clone(),
        other => panic!("{other:?}"),
    };
    let summarized = Compaction {
        through_turn: 2,
        summary: Some("S".into()),
        shortened: vec![],
        preview_chars: 4,
    };
    let expected = texts[0].replace("{N}", "2").replace("{summary}", "S") + "user 3";
    assert_eq!(first_user(&summarized), expected);
    let left_out = Compaction {
        summary: None,
        ..summarized.clone()
    };
    assert_eq!(
        first_user(&left_out),
        texts[1].replace("{N}", "2") + "user 3"
    );
    // Ten characters cut to four: two from each end.
    let cut = texts[2].replace("{T}", "10");
    assert_eq!(shorten("0123456789", 4), format!("01{cut}89"));
    assert_eq!(
        shorten("0123", 4),
        "0123",
        "not longer than the preview: kept"
    );
    let shortened = Compaction {
        shortened: vec![(3, 1)],
        ..summarized
    };
    let laid_out = layout(None, &turns, Some(&shortened));
    assert_eq!(
        laid_out.messages.last(),
        Some(&Message::Results {
            results: vec![ConvResult {
                id: "c3".into(),
                name: "t".into(),
                content: format!("01{cut}89"),
                is_error: false,
            }]
        })
    );
}
