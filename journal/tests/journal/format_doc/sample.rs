//! Records of every event and every variant of every enum, written through the public API
//! for `format_doc.rs` to decode by the document.

use runtime::event::{
    idempotency_key, Answer, Approval, ApprovalPolicy, AskAnswer, CallRef, CallStarted,
    Classification, CommittedResult, CompactTrigger, ConfigFile, ContextCalibrated,
    ContextCompacted, ContextSummaryRequested, Event, Evidence, ImportLine, ImportNote,
    ImportOutcome, ImportSource, ImportVerdict, ImportedDamage, LlmAttemptFailed, LlmNote,
    LlmRefusal, LlmRequest, LlmResponseDetail, ModelCall, ModelResponse, Outcome, OutcomeStatus,
    PlanItem, ProcessStarted, Question, QuestionOption, Record, RecoveredCall, Recovery,
    RecoveryRerun, Reply, RerunPolicy, Resources, SandboxBound, SandboxPolicy, SessionModel,
    SessionOpen, SessionPolicy, SideEffect, StepOutcome, StopReason, SyncPolicy, Text,
    ToolDescriptor, ToolSchema, ToolSource, TurnOutcome, VisibleTool, WriterStolen,
    EVENT_SCHEMA_VERSION,
};
use runtime::model::{ModelErrorKind, ModelSettings, Usage};
use runtime::state::CallState;
use runtime::ErrorCode;

fn call_ref(id: &str) -> CallRef {
    CallRef {
        turn: 1,
        step: 2,
        call_id: id.into(),
    }
}

fn outcome(status: OutcomeStatus, content: Text, side_effects: Vec<SideEffect>) -> Outcome {
    Outcome {
        status,
        content,
        value: Some("{\"n\":1}".into()),
        details: None,
        side_effects,
        attempts: 2,
        duration_ms: 1234,
    }
}

/// One record of every event, and every variant of every enum in some record.
pub fn every_event() -> Vec<Record> {
    // Every code the runtime has: a code the document does not list fails the reader.
    let all_codes = ErrorCode::ALL;
    let c = call_ref("call_1");
    let tool = |name: &str, source| ToolDescriptor {
        name: name.into(),
        source,
        version: "1.0".into(),
        schema_hash: "ab12".into(),
    };
    let mut events = vec![
        Event::SessionOpen(SessionOpen {
            schema_version: EVENT_SCHEMA_VERSION,
            session_id: "sess".into(),
            workspace: "/ws".into(),
            tools: vec![
                tool("read", ToolSource::BuiltIn),
                tool("ext", ToolSource::External { server: "x".into() }),
                tool(
                    "mcp__fs__read",
                    ToolSource::Mcp {
                        server: "fs".into(),
                        implementation: "fs-server".into(),
                        version: "0.3".into(),
                    },
                ),
            ],
        }),
        Event::TurnStart {
            turn: 1,
            user_text: "héllo".into(),
        },
        Event::StepStart { turn: 1, step: 2 },
    ];
    let stop_reasons = [
        StopReason::ToolUse,
        StopReason::EndTurn,
        StopReason::Length,
        StopReason::Interrupted,
        StopReason::Refusal,
    ];
    for (i, stop_reason) in stop_reasons.into_iter().enumerate() {
        events.push(Event::LlmResponse {
            turn: 1,
            step: 2,
            response: ModelResponse {
                text: format!("text {i}"),
                tool_calls: vec![ModelCall {
                    call_id: "call_1".into(),
                    name: "read".into(),
                    arguments: "{\"path\": \"a\"}".into(),
                }],
                stop_reason,
            },
        });
    }
    let outcomes = [
        StepOutcome::Completed,
        StepOutcome::Cancelled,
        StepOutcome::Failed {
            message: "m".into(),
        },
        StepOutcome::Interrupted,
    ];
    for outcome in outcomes {
        events.push(Event::StepEnd {
            turn: 1,
            step: 2,
            outcome,
        });
    }
    let outcomes = [
        TurnOutcome::Completed,
        TurnOutcome::Cancelled,
        TurnOutcome::Failed {
            message: "m".into(),
        },
        TurnOutcome::Interrupted,
    ];
    for outcome in outcomes {
        events.push(Event::TurnEnd { turn: 1, outcome });
    }
    events.push(Event::SessionClose);
    events.push(Event::Received {
        call: c.clone(),
        index: 3,
        tool: "read".into(),
        raw_arguments: "{\"path\": \"a\"".into(),
        source_seqs: vec![4],
    });
    events.push(Event::Parsed {
        call: c.clone(),
        arguments: "{}".into(),
        source_seqs: vec![5, 6],
    });
    let answers = [
        AskAnswer::AllowedOnce,
        AskAnswer::AllowedAlways,
        AskAnswer::Denied,
        AskAnswer::Expired,
        AskAnswer::Cancelled,
    ];
    let approvals = [
        Approval::Listener {
            name: "policy".into(),
        },
        Approval::Default,
        Approval::Asked {
            answer: AskAnswer::AllowedOnce,
        },
        Approval::AlwaysAllowed,
        // Schema 4: the answers only `ask/reply` gives, in an approval (the layout only:
        // replay approves an `ask` call only as `answered`, after its reply).
        Approval::Asked {
            answer: AskAnswer::Answered,
        },
        Approval::Asked {
            answer: AskAnswer::Declined,
        },
    ];
    for approval in approvals {
        events.push(Event::Approved {
            call: c.clone(),
            approval,
            source_seqs: vec![],
        });
    }
    // The `started` of schemas 1 to 4 (event 10): no longer written, still read.
    events.push(Event::StartedV4 {
        call: c.clone(),
        attempt: 1,
        resources: Resources {
            reads: vec!["a".into()],
            writes: vec!["b".into(), "c".into()],
            intents: vec!["ls -l".into()],
        },
        source_seqs: vec![9],
    });
    let side_effects = vec![
        SideEffect::FsWrite {
            path: "a".into(),
            before_sha256: None,
            after_sha256: "ff".into(),
        },
        SideEffect::FsWrite {
            path: "b".into(),
            before_sha256: Some("00".into()),
            after_sha256: "ff".into(),
        },
        SideEffect::ProcExit {
            pid: 4242,
            status: Some(-1),
            signal: None,
        },
        SideEffect::ProcExit {
            pid: 1,
            status: None,
            signal: Some(i32::MIN),
        },
        SideEffect::Other {
            kind: "k".into(),
            detail: "d".into(),
        },
        SideEffect::PlanReplaced {
            items: vec![PlanItem {
                text: "t".into(),
                status: "pending".into(),
            }],
        },
        SideEffect::ToolsLoaded {
            names: vec!["x".into(), "y".into()],
        },
    ];
    events.push(Event::Settled {
        call: c.clone(),
        outcome: outcome(
            OutcomeStatus::Success,
            Text::Inline("ok".into()),
            side_effects,
        ),
        source_seqs: vec![10],
    });
    events.push(Event::Settled {
        call: c.clone(),
        outcome: outcome(
            OutcomeStatus::Error {
                code: ErrorCode::Timeout,
                message: "slow".into(),
            },
            Text::Preview {
                head: "h".into(),
                tail: "t".into(),
                total_bytes: 1 << 40,
                sha256: "ee".into(),
                locator: Some("spill:sha256:ee".into()),
            },
            vec![],
        ),
        source_seqs: vec![10],
    });
    for code in all_codes {
        events.push(Event::Rejected {
            call: c.clone(),
            code,
            reason: code.as_str().into(),
            source_seqs: vec![1],
        });
    }
    events.push(Event::Committed {
        call: c.clone(),
        result: CommittedResult {
            content: "done".into(),
            is_error: false,
            code: None,
            value: None,
        },
        source_seqs: vec![11],
    });
    events.push(Event::CancelledBeforeStart {
        call: c.clone(),
        reason: "stop".into(),
        source_seqs: vec![12],
    });
    events.push(Event::AskPending {
        call: c.clone(),
        question: "may I?".into(),
    });
    for answer in answers {
        events.push(Event::AskAnswered {
            call: c.clone(),
            answer,
        });
    }
    events.push(Event::AskCancelled {
        call: c.clone(),
        reason: "session interrupted".into(),
    });
    events.push(Event::AskExpired { call: c.clone() });
    events.push(Event::PlanReplace {
        items: vec![
            PlanItem {
                text: "a".into(),
                status: "done".into(),
            },
            PlanItem {
                text: "b".into(),
                status: "pending".into(),
            },
        ],
    });
    events.push(Event::SpillStored {
        locator: "spill:sha256:ee".into(),
        bytes: 99,
        sha256: "ee".into(),
    });
    events.push(Event::Fault {
        turn: 1,
        step: 2,
        message: "boom".into(),
    });
    let states = [
        CallState::Received,
        CallState::Parsed,
        CallState::Approved,
        CallState::Started,
        CallState::Settled,
        CallState::Committed,
        CallState::Rejected,
        CallState::CancelledBeforeStart,
    ];
    let classifications = [
        None,
        Some(Classification::ToolNotStarted),
        Some(Classification::ToolOutcomeUnknown),
    ];
    events.push(Event::Recovery(Recovery {
        dropped_bytes: 17,
        calls: states
            .iter()
            .enumerate()
            .map(|(i, &state)| RecoveredCall {
                call: call_ref(&format!("c{i}")),
                state,
                classification: classifications[i % 3],
                result: CommittedResult {
                    content: "TOOL_NOT_STARTED: …".into(),
                    is_error: true,
                    code: Some(ErrorCode::ToolNotStarted),
                    value: Some("null".into()),
                },
            })
            .collect(),
        interrupted_step: Some((1, 2)),
        interrupted_turn: Some(1),
    }));
    events.push(Event::Recovery(Recovery {
        dropped_bytes: 0,
        calls: vec![],
        interrupted_step: None,
        interrupted_turn: None,
    }));
    events.push(Event::StepTools {
        turn: 1,
        step: 2,
        tools: vec![VisibleTool {
            name: "read".into(),
            schema_hash: "ab12".into(),
        }],
    });
    events.push(Event::PlanMode {
        on: false,
        reason: "ask allowed".into(),
        call: Some(c.clone()),
    });
    events.push(Event::PlanMode {
        on: true,
        reason: "--plan-mode".into(),
        call: None,
    });
    // Schema 2.
    for (approval, fsync, config) in [
        (ApprovalPolicy::Allow, SyncPolicy::Always, None),
        (
            ApprovalPolicy::Deny,
            SyncPolicy::Group,
            Some(ConfigFile {
                path: "/etc/c.toml".into(),
                sha256: "ab".into(),
            }),
        ),
        (ApprovalPolicy::Deny, SyncPolicy::Never, None),
        // Schema 3.
        (ApprovalPolicy::Ask, SyncPolicy::Group, None),
    ] {
        events.push(Event::SessionPolicy(SessionPolicy {
            approval,
            parallel_max: 4,
            fsync,
            exposure: vec![
                ("grep".into(), "hidden".into()),
                ("ls".into(), "deferred".into()),
            ],
            config,
            reason: "session opened".into(),
        }));
    }
    events.push(Event::CallProcess {
        call: c.clone(),
        process: ProcessStarted {
            pid: 4242,
            pgid: 4242,
            start_ticks: 123_456,
            boot_id: "b00t".into(),
        },
    });
    events.push(Event::ProcessKilled {
        call: c.clone(),
        pgid: 4242,
        signal: -9,
    });
    // Schema 3.
    events.push(Event::SessionModel(SessionModel {
        provider: "anthropic".into(),
        model: "claude-x".into(),
        system: Some("Be brief.\n".into()),
        settings: ModelSettings {
            max_tokens: Some(4096),
            temperature: Some(0.5),
        },
        note: None,
        base_url: None,
    }));
    events.push(Event::SessionModel(SessionModel {
        provider: "scripted".into(),
        model: "transcript".into(),
        system: None,
        settings: ModelSettings {
            max_tokens: None,
            temperature: None,
        },
        note: Some("provider state of anthropic dropped".into()),
        base_url: Some("http://127.0.0.1:8080/v1".into()),
    }));
    events.push(Event::ToolSchema(ToolSchema {
        schema_hash: "ab12".into(),
        name: "read".into(),
        description: "Reads a file.".into(),
        input_schema: r#"{"properties":{"path":{"type":"string"}},"type":"object"}"#.into(),
    }));
    events.push(Event::LlmRequest(LlmRequest {
        turn: 1,
        step: 2,
        attempt: 3,
        provider: "openai-chat".into(),
        model: "gpt-x".into(),
        body_sha256: "cd34".into(),
        body_bytes: 5_000_000_000,
    }));
    let failures = [
        (ModelErrorKind::Transport, None, true),
        (ModelErrorKind::Status, Some(503), true),
        (ModelErrorKind::Malformed, None, false),
        (ModelErrorKind::Config, None, false),
        // Schema 4.
        (ModelErrorKind::ContextOverflow, Some(400), false),
    ];
    for (attempt, (kind, status, retry)) in (1..).zip(failures) {
        events.push(Event::LlmAttemptFailed(LlmAttemptFailed {
            turn: 1,
            step: 2,
            attempt,
            kind,
            status,
            message: format!("failure {attempt}"),
            partial_text: "half an ans".into(),
            retry,
            backoff_ms: if retry { 1500 } else { 0 },
        }));
    }
    events.push(Event::LlmResponseDetail(LlmResponseDetail {
        turn: 1,
        step: 2,
        attempt: 2,
        response_id: Some("resp_1".into()),
        usage: Usage {
            input_tokens: 1200,
            output_tokens: 34,
            cached_input_tokens: 1024,
        },
        provider_state: Some((
            "anthropic".into(),
            r#"[{"type":"thinking","thinking":"t","signature":"s"}]"#.into(),
        )),
    }));
    events.push(Event::LlmResponseDetail(LlmResponseDetail {
        turn: 1,
        step: 2,
        attempt: 1,
        response_id: None,
        usage: Usage::default(),
        provider_state: None,
    }));
    // Schema 4.
    events.push(Event::AskQuestion {
        call: c.clone(),
        question: Question {
            text: "Which files?".into(),
            options: vec![
                QuestionOption {
                    label: "a.txt".into(),
                    description: "the first".into(),
                },
                QuestionOption {
                    label: "Approve".into(),
                    description: String::new(),
                },
            ],
            multiple: true,
            free_text: false,
            plan_option: Some("Approve".into()),
        },
    });
    events.push(Event::AskQuestion {
        call: c.clone(),
        question: Question {
            text: "Why?".into(),
            options: vec![],
            multiple: false,
            free_text: true,
            plan_option: None,
        },
    });
    let replies = [
        Reply::Answered(Answer {
            choice: vec!["a.txt".into(), "Approve".into()],
            text: Some("both, please".into()),
        }),
        Reply::Answered(Answer {
            choice: vec![],
            text: None,
        }),
        Reply::Declined {
            text: Some("not now".into()),
        },
        Reply::Declined { text: None },
    ];
    for reply in replies {
        events.push(Event::AskReplied {
            call: c.clone(),
            reply,
        });
    }
    events.push(Event::ContextSummaryRequested(ContextSummaryRequested {
        turn: 3,
        step: 2,
        through_turn: 2,
        body_sha256: "ef56".into(),
        body_bytes: 70_000,
    }));
    events.push(Event::ContextCompacted(ContextCompacted {
        turn: 3,
        step: 2,
        trigger: CompactTrigger::Overflow,
        through_turn: 2,
        summary: Some("The user wants a.txt fixed; done: read it.".into()),
        summary_note: None,
        shortened: vec![(3, 1)],
        preview_chars: 2_000,
        tokens_before: 210_000,
        tokens_after: 40_000,
    }));
    events.push(Event::ContextCompacted(ContextCompacted {
        turn: 4,
        step: 1,
        trigger: CompactTrigger::Threshold,
        through_turn: 3,
        summary: None,
        summary_note: Some("the summary request failed: HTTP 500: down".into()),
        shortened: vec![],
        preview_chars: 2_000,
        tokens_before: 170_000,
        tokens_after: 9_000,
    }));
    // Schema 5: `started` with its key and evidence (none, or a file created and one replaced),
    // and a re-run under each policy.
    let evidence = vec![
        Evidence::FileReplace {
            path: "new.txt".into(),
            before_sha256: None,
            after_sha256: "aa".into(),
        },
        Evidence::FileReplace {
            path: "src/old.rs".into(),
            before_sha256: Some("bb".into()),
            after_sha256: "cc".into(),
        },
    ];
    for (attempt, evidence) in [(1, evidence), (2, vec![])] {
        events.push(Event::Started(CallStarted {
            call: c.clone(),
            attempt,
            resources: Resources {
                reads: vec![],
                writes: vec!["new.txt".into(), "src/old.rs".into()],
                intents: vec![],
            },
            idempotency_key: idempotency_key("sess", &c),
            evidence,
            source_seqs: vec![9, 10],
        }));
    }
    events.push(Event::RecoveryRerun(RecoveryRerun {
        policy: RerunPolicy::NotStarted,
        calls: vec![c.clone(), call_ref("call_2")],
    }));
    events.push(Event::RecoveryRerun(RecoveryRerun {
        policy: RerunPolicy::Safe,
        calls: vec![],
    }));
    events.push(Event::WriterStolen(WriterStolen {
        epoch: 4,
        holder: "worker-a:4242".into(),
        holder_epoch: 3,
        lease_left_ms: 9_500,
    }));
    events.push(Event::ImportSource(ImportSource {
        agent: "codex".into(),
        file: "rollout.jsonl".into(),
        size_bytes: 4096,
        sha256: "ab".repeat(32),
        source_session_id: Some("0199".into()),
        damaged: vec![ImportedDamage {
            line: 7,
            offset: 900,
            bytes: 12,
            reason: "torn".into(),
            followed: false,
        }],
        notes: vec![ImportNote {
            line: 3,
            offset: 300,
            text: "an item of unknown type world_state".into(),
        }],
    }));
    events.push(Event::ImportLine(ImportLine {
        line: 4,
        offset: 420,
    }));
    for verdict in [
        ImportVerdict::Recorded,
        ImportVerdict::NotStarted {
            why: "stopped with error".into(),
        },
        ImportVerdict::OutcomeUnknown {
            why: "no output".into(),
        },
    ] {
        events.push(Event::ImportOutcome(ImportOutcome {
            call: c.clone(),
            verdict,
            result: CommittedResult {
                content: "done".into(),
                is_error: false,
                code: None,
                value: None,
            },
            source_seqs: vec![11],
        }));
    }
    events.push(Event::LlmRefusal(LlmRefusal {
        turn: 2,
        step: 1,
        attempt: 1,
        reason: "refusal".into(),
        explanation: "[cyber] blocked".into(),
    }));
    events.push(Event::LlmNote(LlmNote {
        turn: 2,
        step: 1,
        attempt: 1,
        note: "kept a block of type `x`".into(),
    }));
    events.push(Event::SessionReopen);
    for provider_max_tokens in [Some(128_000), None] {
        events.push(Event::ContextCalibrated(ContextCalibrated {
            turn: 2,
            step: 1,
            attempt: 1,
            estimate_tokens: 70_000,
            provider_tokens: 131_072,
            provider_max_tokens,
        }));
    }
    // Schema 11: the session's sandbox under each policy, and a `started` whose evidence is
    // a bound (enforced, then not, escalated).
    for (policy, enforced, escalated) in [
        (SandboxPolicy::WorkspaceWrite, true, false),
        (SandboxPolicy::ReadOnly, false, false),
        (SandboxPolicy::DangerFullAccess, false, true),
    ] {
        let bound = SandboxBound {
            policy,
            enforced,
            writable: if policy == SandboxPolicy::ReadOnly {
                vec![]
            } else {
                vec!["/w".into(), "/tmp/s".into()]
            },
            readable: vec!["/usr".into(), "/w".into()],
            network: escalated,
            mechanism: "landlock ABI 6; user and network namespaces".into(),
            escalated,
        };
        events.push(Event::SessionSandbox(bound.clone()));
        events.push(Event::Started(CallStarted {
            call: c.clone(),
            attempt: 3,
            resources: Resources::default(),
            idempotency_key: idempotency_key("sess", &c),
            evidence: vec![Evidence::Sandbox(bound)],
            source_seqs: vec![12],
        }));
    }
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| Record {
            at_ms: 1_700_000_000_000 + i as u64,
            event,
        })
        .collect()
}
