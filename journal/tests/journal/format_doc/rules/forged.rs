//! The journals `rules.rs` forges from: a session that touches every rule's event (a refused
//! and reduced request, an approval, a question declined, a process, a refusal, a close and a
//! reopening, a crash recovered with a call run again), an imported one; and one forgery per
//! rule, each the base changed in one place.

use runtime::event::*;
use runtime::model::{ModelErrorKind, Usage};
use runtime::ErrorCode;

const SESSION: &str = "s";

fn call(turn: u32, step: u32, id: &str) -> CallRef {
    CallRef {
        turn,
        step,
        call_id: id.into(),
    }
}

fn model_call(id: &str, name: &str) -> ModelCall {
    ModelCall {
        call_id: id.into(),
        name: name.into(),
        arguments: "{}".into(),
    }
}

fn response(turn: u32, step: u32, calls: Vec<ModelCall>, stop_reason: StopReason) -> Event {
    Event::LlmResponse {
        turn,
        step,
        response: ModelResponse {
            text: "t".into(),
            tool_calls: calls,
            stop_reason,
        },
    }
}

fn request(turn: u32, step: u32, attempt: u32) -> Event {
    Event::LlmRequest(LlmRequest {
        turn,
        step,
        attempt,
        provider: "openai-chat".into(),
        model: "m".into(),
        body_sha256: "00".into(),
        body_bytes: 1,
    })
}

fn failed(turn: u32, step: u32, attempt: u32) -> Event {
    Event::LlmAttemptFailed(LlmAttemptFailed {
        turn,
        step,
        attempt,
        kind: ModelErrorKind::ContextOverflow,
        status: Some(400),
        message: "too long".into(),
        partial_text: String::new(),
        retry: false,
        backoff_ms: 0,
    })
}

fn detail(turn: u32, step: u32, attempt: u32) -> Event {
    Event::LlmResponseDetail(LlmResponseDetail {
        turn,
        step,
        attempt,
        response_id: None,
        usage: Usage::default(),
        provider_state: None,
    })
}

fn calibrated(attempt: u32, provider_tokens: u64) -> Event {
    Event::ContextCalibrated(ContextCalibrated {
        turn: 1,
        step: 1,
        attempt,
        estimate_tokens: 100,
        provider_tokens,
        provider_max_tokens: Some(250),
    })
}

fn compacted(turn: u32, step: u32, through_turn: u32) -> Event {
    Event::ContextCompacted(ContextCompacted {
        turn,
        step,
        trigger: CompactTrigger::Overflow,
        through_turn,
        summary: None,
        summary_note: Some("n".into()),
        shortened: Vec::new(),
        preview_chars: 2_000,
        tokens_before: 100,
        tokens_after: 50,
    })
}

fn summary(through_turn: u32) -> Event {
    Event::ContextSummaryRequested(ContextSummaryRequested {
        turn: 2,
        step: 1,
        through_turn,
        body_sha256: "00".into(),
        body_bytes: 1,
    })
}

fn received(c: &CallRef, index: u32, tool: &str, source_seqs: Vec<u64>) -> Event {
    Event::Received {
        call: c.clone(),
        index,
        tool: tool.into(),
        raw_arguments: "{}".into(),
        source_seqs,
    }
}

fn parsed(c: &CallRef, source_seqs: Vec<u64>) -> Event {
    Event::Parsed {
        call: c.clone(),
        arguments: "{}".into(),
        source_seqs,
    }
}

fn approved(c: &CallRef, approval: Approval, source_seqs: Vec<u64>) -> Event {
    Event::Approved {
        call: c.clone(),
        approval,
        source_seqs,
    }
}

fn started(c: &CallRef, key: String, evidence: Vec<Evidence>, source_seqs: Vec<u64>) -> Event {
    Event::Started(CallStarted {
        call: c.clone(),
        attempt: 1,
        resources: Resources::default(),
        idempotency_key: key,
        evidence,
        source_seqs,
    })
}

fn settled(c: &CallRef, source_seqs: Vec<u64>) -> Event {
    Event::Settled {
        call: c.clone(),
        outcome: Outcome {
            status: OutcomeStatus::Success,
            content: Text::Inline("ok".into()),
            value: None,
            details: None,
            side_effects: Vec::new(),
            attempts: 1,
            duration_ms: 1,
        },
        source_seqs,
    }
}

fn result() -> CommittedResult {
    CommittedResult {
        content: "ok".into(),
        is_error: false,
        code: None,
        value: None,
    }
}

fn committed(c: &CallRef, source_seqs: Vec<u64>) -> Event {
    Event::Committed {
        call: c.clone(),
        result: result(),
        source_seqs,
    }
}

fn key(c: &CallRef) -> String {
    idempotency_key(SESSION, c)
}

/// A journal being built: each push returns its record's seq.
#[derive(Default)]
struct Base(Vec<Event>);

impl Base {
    fn push(&mut self, e: Event) -> u64 {
        self.0.push(e);
        self.0.len() as u64
    }
}

fn open() -> Event {
    Event::SessionOpen(SessionOpen {
        schema_version: EVENT_SCHEMA_VERSION,
        session_id: SESSION.into(),
        workspace: "/w".into(),
        tools: Vec::new(),
    })
}

/// The session every forgery but the imported ones starts from.
pub fn session() -> Vec<Event> {
    let mut b = Base::default();
    let (c1, c2) = (call(1, 1, "c1"), call(1, 1, "c2"));
    b.push(open());
    b.push(Event::TurnStart {
        turn: 1,
        user_text: "u".into(),
    });
    b.push(Event::StepStart { turn: 1, step: 1 });
    b.push(Event::StepTools {
        turn: 1,
        step: 1,
        tools: Vec::new(),
    });
    b.push(request(1, 1, 1));
    b.push(failed(1, 1, 1));
    b.push(calibrated(1, 250));
    b.push(compacted(1, 1, 0));
    b.push(request(1, 1, 2));
    let r = b.push(response(
        1,
        1,
        vec![model_call("c1", "read"), model_call("c2", "ask")],
        StopReason::ToolUse,
    ));
    b.push(detail(1, 1, 2));
    let s = b.push(received(&c1, 0, "read", vec![r]));
    b.push(parsed(&c1, vec![s]));
    b.push(Event::AskPending {
        call: c1.clone(),
        question: "q".into(),
    });
    let s = b.push(Event::AskAnswered {
        call: c1.clone(),
        answer: AskAnswer::AllowedOnce,
    });
    let allowed = Approval::Asked {
        answer: AskAnswer::AllowedOnce,
    };
    let s = b.push(approved(&c1, allowed, vec![s]));
    let s = b.push(started(&c1, key(&c1), Vec::new(), vec![s]));
    b.push(Event::CallProcess {
        call: c1.clone(),
        process: ProcessStarted {
            pid: 7,
            pgid: 7,
            start_ticks: 1,
            boot_id: "b".into(),
        },
    });
    let s = b.push(settled(&c1, vec![s]));
    b.push(committed(&c1, vec![s]));
    let s = b.push(received(&c2, 1, "ask", vec![r]));
    b.push(parsed(&c2, vec![s]));
    b.push(Event::AskQuestion {
        call: c2.clone(),
        question: Question {
            text: "which?".into(),
            options: Vec::new(),
            multiple: false,
            free_text: true,
            plan_option: None,
        },
    });
    let s = b.push(Event::AskReplied {
        call: c2.clone(),
        reply: Reply::Declined { text: None },
    });
    let s = b.push(Event::Rejected {
        call: c2.clone(),
        code: ErrorCode::QuestionDeclined,
        reason: "declined".into(),
        source_seqs: vec![s],
    });
    b.push(committed(&c2, vec![s]));
    b.push(Event::StepEnd {
        turn: 1,
        step: 1,
        outcome: StepOutcome::Completed,
    });
    b.push(Event::TurnEnd {
        turn: 1,
        outcome: TurnOutcome::Completed,
    });
    // Turn 2: a summary asked for, then an answer refused.
    b.push(Event::TurnStart {
        turn: 2,
        user_text: "u".into(),
    });
    b.push(Event::StepStart { turn: 2, step: 1 });
    b.push(summary(1));
    b.push(request(2, 1, 1));
    b.push(response(2, 1, Vec::new(), StopReason::Refusal));
    b.push(detail(2, 1, 1));
    b.push(Event::LlmRefusal(LlmRefusal {
        turn: 2,
        step: 1,
        attempt: 1,
        reason: "refusal".into(),
        explanation: "no".into(),
    }));
    b.push(Event::LlmNote(LlmNote {
        turn: 2,
        step: 1,
        attempt: 1,
        note: "n".into(),
    }));
    b.push(Event::StepEnd {
        turn: 2,
        step: 1,
        outcome: StepOutcome::Completed,
    });
    b.push(Event::TurnEnd {
        turn: 2,
        outcome: TurnOutcome::Completed,
    });
    b.push(Event::SessionClose);
    // Reopened; turn 3's step crashed with c3 approved and c4 never received; recovered with
    // c3 run again.
    b.push(Event::SessionReopen);
    b.push(Event::TurnStart {
        turn: 3,
        user_text: "u".into(),
    });
    b.push(Event::StepStart { turn: 3, step: 1 });
    let (c3, c4) = (call(3, 1, "c3"), call(3, 1, "c4"));
    let r = b.push(response(
        3,
        1,
        vec![model_call("c3", "read"), model_call("c4", "read")],
        StopReason::ToolUse,
    ));
    let s = b.push(received(&c3, 0, "read", vec![r]));
    let s = b.push(parsed(&c3, vec![s]));
    b.push(approved(&c3, Approval::Default, vec![s]));
    b.push(Event::Recovery(Recovery {
        dropped_bytes: 0,
        calls: vec![RecoveredCall {
            call: c4.clone(),
            state: runtime::state::CallState::Received,
            classification: Some(Classification::ToolNotStarted),
            result: result(),
        }],
        interrupted_step: None,
        interrupted_turn: None,
    }));
    let s = b.push(Event::RecoveryRerun(RecoveryRerun {
        policy: RerunPolicy::NotStarted,
        calls: vec![c3.clone()],
    }));
    let s = b.push(started(&c3, key(&c3), Vec::new(), vec![s]));
    let s = b.push(settled(&c3, vec![s]));
    b.push(committed(&c3, vec![s]));
    b.push(Event::StepEnd {
        turn: 3,
        step: 1,
        outcome: StepOutcome::Completed,
    });
    b.push(Event::TurnEnd {
        turn: 3,
        outcome: TurnOutcome::Interrupted,
    });
    b.0
}

/// An imported journal: `import/source`, a line, a call and its outcome.
pub fn imported() -> Vec<Event> {
    let mut b = Base::default();
    let c = call(1, 1, "i1");
    b.push(open());
    b.push(Event::ImportSource(ImportSource {
        agent: "codex".into(),
        file: "f.jsonl".into(),
        size_bytes: 1,
        sha256: "00".into(),
        source_session_id: None,
        damaged: Vec::new(),
        notes: Vec::new(),
    }));
    b.push(Event::TurnStart {
        turn: 1,
        user_text: "u".into(),
    });
    b.push(Event::StepStart { turn: 1, step: 1 });
    let r = b.push(response(
        1,
        1,
        vec![model_call("i1", "read")],
        StopReason::ToolUse,
    ));
    b.push(Event::ImportLine(ImportLine { line: 2, offset: 9 }));
    let s = b.push(received(&c, 0, "read", vec![r]));
    b.push(Event::ImportOutcome(ImportOutcome {
        call: c.clone(),
        verdict: ImportVerdict::Recorded,
        result: result(),
        source_seqs: vec![s],
    }));
    b.push(Event::StepEnd {
        turn: 1,
        step: 1,
        outcome: StepOutcome::Completed,
    });
    b.push(Event::TurnEnd {
        turn: 1,
        outcome: TurnOutcome::Completed,
    });
    b.0
}

/// The index of the `nth` (from 0) event of `kind` in `events`.
fn at(events: &[Event], kind: &str, nth: usize) -> usize {
    events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind() == kind)
        .nth(nth)
        .unwrap_or_else(|| panic!("no {kind} number {nth}"))
        .0
}

/// `base` with `event` inserted at `index`.
fn inserted(base: &[Event], index: usize, event: Event) -> (Vec<Event>, usize) {
    let mut events = base.to_vec();
    events.insert(index, event);
    (events, index)
}

/// `base` with the event at `index` replaced by `event`.
fn replaced(base: &[Event], index: usize, event: Event) -> (Vec<Event>, usize) {
    let mut events = base.to_vec();
    events[index] = event;
    (events, index)
}

/// `base` with the event at `index` changed by `change`.
fn changed(base: &[Event], index: usize, change: impl FnOnce(&mut Event)) -> (Vec<Event>, usize) {
    let mut events = base.to_vec();
    change(&mut events[index]);
    (events, index)
}

/// One journal per rule: (the rule, the events, the index of the record that breaks it).
pub fn forgeries() -> Vec<(&'static str, Vec<Event>, usize)> {
    let b = session();
    let i = imported();
    let (c1, c2) = (call(1, 1, "c1"), call(1, 1, "c2"));
    let after = |kind: &str, nth: usize| at(&b, kind, nth) + 1;
    let response1 = b[at(&b, "llm/response", 0)].clone();
    let forged: Vec<(&'static str, (Vec<Event>, usize))> = vec![
        ("first-is-session-open", (b[1..].to_vec(), 0)),
        ("one-session-open", inserted(&b, 1, open())),
        (
            "nothing-after-close",
            inserted(&b, at(&b, "session/reopen", 0), Event::SessionClose),
        ),
        ("reopen-after-close", inserted(&b, 1, Event::SessionReopen)),
        (
            "close-with-no-open-turn",
            inserted(&b, 2, Event::SessionClose),
        ),
        (
            "turn-start-with-no-open-turn",
            inserted(
                &b,
                2,
                Event::TurnStart {
                    turn: 2,
                    user_text: "u".into(),
                },
            ),
        ),
        (
            "turn-numbered-next",
            changed(&b, at(&b, "turn/start", 1), |e| {
                if let Event::TurnStart { turn, .. } = e {
                    *turn = 5;
                }
            }),
        ),
        (
            "names-open-turn",
            changed(&b, at(&b, "turn/end", 0), |e| {
                if let Event::TurnEnd { turn, .. } = e {
                    *turn = 9;
                }
            }),
        ),
        (
            "turn-end-with-no-open-step",
            inserted(
                &b,
                3,
                Event::TurnEnd {
                    turn: 1,
                    outcome: TurnOutcome::Completed,
                },
            ),
        ),
        (
            "step-start-with-no-open-step",
            inserted(&b, 3, Event::StepStart { turn: 1, step: 2 }),
        ),
        (
            "step-numbered-next",
            replaced(&b, 2, Event::StepStart { turn: 1, step: 2 }),
        ),
        (
            "names-open-step",
            replaced(
                &b,
                3,
                Event::StepTools {
                    turn: 1,
                    step: 5,
                    tools: Vec::new(),
                },
            ),
        ),
        ("step-tools-once", inserted(&b, 4, b[3].clone())),
        (
            "one-response",
            inserted(&b, after("llm/response", 0), response1.clone()),
        ),
        (
            "response-of-live-attempt",
            inserted(&b, after("llm/attempt-failed", 0), response1.clone()),
        ),
        (
            "request-before-response",
            inserted(&b, after("llm/response", 0), request(1, 1, 3)),
        ),
        (
            "attempt-numbered-next",
            replaced(&b, at(&b, "llm/request", 0), request(1, 1, 2)),
        ),
        (
            "failure-before-response",
            inserted(&b, after("llm/response", 0), failed(1, 1, 2)),
        ),
        ("failure-of-last-attempt", inserted(&b, 4, failed(1, 1, 1))),
        (
            "attempt-fails-once",
            inserted(&b, after("llm/attempt-failed", 0), failed(1, 1, 1)),
        ),
        (
            "detail-after-response",
            inserted(&b, at(&b, "llm/response", 0), detail(1, 1, 2)),
        ),
        (
            "refusal-after-refused-response",
            inserted(
                &b,
                after("llm/response-detail", 0),
                Event::LlmRefusal(LlmRefusal {
                    turn: 1,
                    step: 1,
                    attempt: 2,
                    reason: "refusal".into(),
                    explanation: "no".into(),
                }),
            ),
        ),
        (
            "note-after-response",
            inserted(
                &b,
                at(&b, "llm/response", 0),
                Event::LlmNote(LlmNote {
                    turn: 1,
                    step: 1,
                    attempt: 2,
                    note: "n".into(),
                }),
            ),
        ),
        (
            "summary-before-response",
            inserted(&b, after("llm/response", 1), summary(1)),
        ),
        (
            "summary-of-earlier-turns",
            replaced(&b, at(&b, "context/summary-requested", 0), summary(2)),
        ),
        (
            "reduction-before-response",
            inserted(&b, after("llm/response", 0), compacted(1, 1, 0)),
        ),
        (
            "reduction-between-attempts",
            inserted(&b, after("llm/request", 1), compacted(1, 1, 0)),
        ),
        (
            "reduction-keeps-its-turn",
            replaced(&b, at(&b, "context/compacted", 0), compacted(1, 1, 1)),
        ),
        (
            "calibration-after-overflow",
            inserted(&b, after("llm/request", 0), calibrated(1, 250)),
        ),
        (
            "calibration-counts",
            replaced(&b, at(&b, "context/calibrated", 0), calibrated(1, 0)),
        ),
        (
            "received-after-response",
            inserted(
                &b,
                at(&b, "llm/response", 0),
                received(&c1, 0, "read", vec![1]),
            ),
        ),
        (
            "received-matches-response",
            changed(&b, at(&b, "received", 0), |e| {
                if let Event::Received { tool, .. } = e {
                    *tool = "write".into();
                }
            }),
        ),
        (
            "received-points-back",
            changed(&b, at(&b, "received", 0), |e| {
                if let Event::Received { source_seqs, .. } = e {
                    source_seqs.clear();
                }
            }),
        ),
        (
            "call-was-received",
            inserted(
                &b,
                after("llm/response-detail", 0),
                parsed(&call(1, 1, "ghost"), vec![1]),
            ),
        ),
        (
            "call-points-back",
            changed(&b, at(&b, "parsed", 0), |e| {
                if let Event::Parsed { source_seqs, .. } = e {
                    *source_seqs = vec![1];
                }
            }),
        ),
        (
            "call-state-machine",
            inserted(
                &b,
                after("received", 0),
                settled(&c1, vec![after("received", 0) as u64]),
            ),
        ),
        (
            "started-key",
            changed(&b, at(&b, "started", 0), |e| {
                if let Event::Started(s) = e {
                    s.idempotency_key = key(&c2);
                }
            }),
        ),
        (
            "evidence-sha256",
            changed(&b, at(&b, "started", 0), |e| {
                if let Event::Started(s) = e {
                    s.evidence = vec![Evidence::FileReplace {
                        path: "a".into(),
                        before_sha256: None,
                        after_sha256: "ABC".into(),
                    }];
                }
            }),
        ),
        (
            "process-while-started",
            inserted(&b, after("parsed", 0), b[at(&b, "call/process", 0)].clone()),
        ),
        (
            "approval-fits-question",
            changed(&b, at(&b, "approved", 0), |e| {
                if let Event::Approved { approval, .. } = e {
                    *approval = Approval::Asked {
                        answer: AskAnswer::Denied,
                    };
                }
            }),
        ),
        (
            "question-while-parsed",
            inserted(
                &b,
                after("received", 0),
                b[at(&b, "ask/pending", 0)].clone(),
            ),
        ),
        (
            "reply-to-pending-question",
            inserted(
                &b,
                after("ask/answered", 0),
                Event::AskReplied {
                    call: c1.clone(),
                    reply: Reply::Declined { text: None },
                },
            ),
        ),
        (
            "yes-no-answer-to-approval",
            changed(&b, at(&b, "ask/answered", 0), |e| {
                if let Event::AskAnswered { answer, .. } = e {
                    *answer = AskAnswer::Answered;
                }
            }),
        ),
        (
            "answer-ends-pending-question",
            inserted(
                &b,
                after("ask/answered", 0),
                Event::AskExpired { call: c1.clone() },
            ),
        ),
        (
            "recovery-of-uncommitted",
            changed(&b, at(&b, "recovery", 0), |e| {
                if let Event::Recovery(r) = e {
                    r.calls[0].call = c1.clone();
                }
            }),
        ),
        (
            "recovery-of-answered-call",
            changed(&b, at(&b, "recovery", 0), |e| {
                if let Event::Recovery(r) = e {
                    r.calls[0].call = call(3, 1, "c9");
                }
            }),
        ),
        (
            // The `recovery/rerun` after the event put between it and its `recovery` breaks it.
            "rerun-after-recovery",
            {
                let plan_mode = Event::PlanMode {
                    on: false,
                    reason: "r".into(),
                    call: None,
                };
                let (events, index) = inserted(&b, after("recovery", 0), plan_mode);
                (events, index + 1)
            },
        ),
        (
            "rerun-of-open-calls",
            changed(&b, at(&b, "recovery/rerun", 0), |e| {
                if let Event::RecoveryRerun(r) = e {
                    r.calls = vec![call(3, 1, "c4")];
                }
            }),
        ),
        ("import-source-after-open", inserted(&i, 3, i[1].clone())),
        (
            "import-events-imported",
            inserted(&b, 1, Event::ImportLine(ImportLine { line: 1, offset: 0 })),
        ),
    ];
    forged
        .into_iter()
        .map(|(id, (events, index))| (id, events, index))
        .collect()
}
