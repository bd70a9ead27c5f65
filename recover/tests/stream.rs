//! The streaming classifier (`recover classify`): it holds only the calls still open however
//! long the journal, and it says exactly what the full analysis says — the same reports in the
//! same order, the same recovery event, the same errors for a journal that does not make sense.

// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]

use journal::{Journal, Limits, Options, Reader, SimStorage, Storage};
use runtime::event::*;
use runtime::ErrorCode;
use std::sync::Arc;
use tooljournal_recover::CallReport;
use tooljournal_recover::Classifier;
use tooljournal_recover::JsonListing;
use tooljournal_recover::Recovery;

/// Appends events, remembering each call's last seq so the next can point back at it.
struct Builder {
    journal: Journal,
    last: std::collections::HashMap<CallRef, u64>,
}

impl Builder {
    fn new(storage: &SimStorage) -> Builder {
        let (journal, _) = Journal::open(Arc::new(storage.clone()), Options::default()).unwrap();
        let mut b = Builder {
            journal,
            last: Default::default(),
        };
        b.put(Event::SessionOpen(SessionOpen {
            schema_version: 1,
            session_id: "long".into(),
            workspace: "/ws".into(),
            tools: vec![],
        }));
        b
    }

    fn put(&mut self, event: Event) -> u64 {
        self.journal.append(&Record { at_ms: 7, event }).unwrap()
    }

    /// step/start and an llm/response with `n` calls, all received; returns the calls.
    fn step(&mut self, turn: u32, step: u32, n: u32) -> Vec<CallRef> {
        self.step_receiving(turn, step, n, n as usize)
    }

    /// As [`Builder::step`], with only the first `received` calls received.
    fn step_receiving(&mut self, turn: u32, step: u32, n: u32, received: usize) -> Vec<CallRef> {
        self.put(Event::StepStart { turn, step });
        let calls: Vec<CallRef> = (0..n)
            .map(|i| CallRef {
                turn,
                step,
                call_id: format!("c{i}"),
            })
            .collect();
        let response = self.put(Event::LlmResponse {
            turn,
            step,
            response: ModelResponse {
                text: "on it".into(),
                tool_calls: calls
                    .iter()
                    .map(|c| ModelCall {
                        call_id: c.call_id.clone(),
                        name: "mark".into(),
                        arguments: format!("{{\"n\":{turn}}}"),
                    })
                    .collect(),
                stop_reason: StopReason::ToolUse,
            },
        });
        for (i, c) in calls.iter().enumerate().take(received) {
            let seq = self.put(Event::Received {
                call: c.clone(),
                index: i as u32,
                tool: "mark".into(),
                raw_arguments: format!("{{\"n\":{turn}}}"),
                source_seqs: vec![response],
            });
            self.last.insert(c.clone(), seq);
        }
        calls
    }

    fn call_event(&mut self, call: &CallRef, make: impl FnOnce(CallRef, Vec<u64>) -> Event) {
        let seq = self.put(make(call.clone(), vec![self.last[call]]));
        self.last.insert(call.clone(), seq);
    }

    fn approve(&mut self, c: &CallRef) {
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
    }

    fn start(&mut self, c: &CallRef) {
        self.call_event(c, |call, source_seqs| Event::StartedV4 {
            call,
            attempt: 1,
            resources: Resources {
                writes: vec![format!("{}.txt", c.call_id)],
                reads: vec!["a dir/with \\ back\\slash".into()],
                intents: vec!["say \"hi\" – ünïcode\n\u{1}".into()],
            },
            source_seqs,
        });
    }

    fn settle(&mut self, c: &CallRef, ok: bool) {
        let status = if ok {
            OutcomeStatus::Success
        } else {
            OutcomeStatus::Error {
                code: ErrorCode::ToolFailed,
                message: "no".into(),
            }
        };
        self.call_event(c, |call, source_seqs| Event::Settled {
            call,
            outcome: Outcome {
                status,
                content: Text::Inline("x".repeat(300)),
                value: None,
                details: None,
                side_effects: vec![],
                attempts: 1,
                duration_ms: 1,
            },
            source_seqs,
        });
    }

    fn commit(&mut self, c: &CallRef) {
        self.call_event(c, |call, source_seqs| Event::Committed {
            call,
            result: CommittedResult {
                content: "x".repeat(300),
                is_error: false,
                code: None,
                value: None,
            },
            source_seqs,
        });
    }

    /// A whole call: approved, started, settled, committed.
    fn run(&mut self, c: &CallRef, ok: bool) {
        self.approve(c);
        self.start(c);
        self.settle(c, ok);
        self.commit(c);
    }

    fn end_step(&mut self, turn: u32, step: u32) {
        self.put(Event::StepEnd {
            turn,
            step,
            outcome: StepOutcome::Completed,
        });
    }

    fn done(self) {
        self.journal.close().unwrap();
    }
}

/// A session of `turns` turns, each of 3 steps of up to 4 calls, every call committed, and a
/// last turn cut off: one call settled, one started, one approved, one never received.
fn long_session(turns: u32) -> SimStorage {
    let storage = SimStorage::new();
    let mut b = Builder::new(&storage);
    for turn in 1..=turns {
        b.put(Event::TurnStart {
            turn,
            user_text: format!("turn {turn}"),
        });
        for step in 1..=3 {
            let calls = b.step(turn, step, 1 + (turn + step) % 4);
            for (i, c) in calls.iter().enumerate() {
                b.run(c, i % 3 != 2);
            }
            b.end_step(turn, step);
        }
        b.put(Event::TurnEnd {
            turn,
            outcome: TurnOutcome::Completed,
        });
    }
    let turn = turns + 1;
    b.put(Event::TurnStart {
        turn,
        user_text: "cut off".into(),
    });
    let calls = b.step_receiving(turn, 1, 4, 3); // c3: in the llm/response only
    b.approve(&calls[0]);
    b.start(&calls[0]);
    b.settle(&calls[0], true);
    b.approve(&calls[1]);
    b.start(&calls[1]);
    b.approve(&calls[2]);
    b.done();
    storage
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

fn events(s: &SimStorage) -> Vec<Event> {
    Reader::open(Arc::new(s.clone()) as Arc<dyn Storage>, Limits::default())
        .unwrap()
        .map(|r| r.unwrap().decode::<Record>().unwrap().event)
        .collect()
}

/// Streamed and full recovery of copies of `storage` agree, reading only and writing.
fn assert_streaming_agrees(storage: &SimStorage) {
    for write in [false, true] {
        let (full_disk, stream_disk) = (copy_of(storage), copy_of(storage));
        let full = Recovery::of(journal::Backend::Files(Arc::new(full_disk.clone())))
            .write(write)
            .run()
            .unwrap();
        let mut reports: Vec<CallReport> = Vec::new();
        let s = Recovery::of(journal::Backend::Files(Arc::new(stream_disk.clone())))
            .write(write)
            .stream(&mut reports)
            .unwrap();
        let a = &full.analysis;
        assert_eq!(reports, a.calls, "write {write}: the reports");
        assert_eq!(s.calls as usize, a.calls.len());
        assert_eq!(
            (s.end, s.live, &s.recovery, &s.pending_asks, s.appended),
            (a.end, a.live, &a.recovery, &a.pending_asks, full.appended),
            "write {write}"
        );
        assert_eq!(events(&stream_disk), events(&full_disk), "write {write}");
    }
    // `classify --json`, streamed, is byte for byte what `report::classify_json` prints.
    let full = Recovery::of(journal::Backend::Files(Arc::new(copy_of(storage))))
        .run()
        .unwrap();
    let mut out: Vec<u8> = Vec::new();
    let mut listing = JsonListing::new(&mut out, "the \"journal\"");
    let s = Recovery::of(journal::Backend::Files(Arc::new(copy_of(storage))))
        .stream(&mut listing)
        .unwrap();
    listing.finish(s.end, s.live, None).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!(
            "{}\n",
            tooljournal_recover::classify_json("the \"journal\"", &full.analysis)
        )
    );
}

#[test]
fn a_long_journal_is_classified_holding_only_the_open_calls() {
    let turns = 400;
    let storage = long_session(turns);
    let mut classifier = Classifier::new(false);
    let mut reported = 0usize;
    let mut records = 0usize;
    for record in Reader::open(
        Arc::new(storage.clone()) as Arc<dyn Storage>,
        Limits::default(),
    )
    .unwrap()
    {
        classifier.apply(record.unwrap().as_ref()).unwrap();
        reported += classifier.take_ready().count();
        records += 1;
        // Never more than one step's calls (4 at most here), however long the journal.
        assert!(
            classifier.retained_calls() <= 4,
            "{} calls held after record {records}",
            classifier.retained_calls()
        );
    }
    assert!(records > 10_000, "a long journal: {records} records");
    let calls_committed: usize = (1..=turns)
        .map(|turn| {
            (1..=3)
                .map(|step| 1 + (turn + step) as usize % 4)
                .sum::<usize>()
        })
        .sum();
    assert_eq!(
        reported, calls_committed,
        "every committed call is out already"
    );
    assert_eq!(
        classifier.retained_calls(),
        3,
        "the cut-off step's received calls"
    );
    assert_eq!(classifier.retained_calls_max(), 4);
    let finished = classifier.finish(&journal::ReadEnd::Clean, 0);
    let rest: Vec<CallReport> = classifier.take_ready().collect();
    assert_eq!(
        rest.len(),
        4,
        "three received, one only in the llm/response"
    );
    let recovery = finished.recovery.expect("the open turn needs a recovery");
    assert_eq!(recovery.calls.len(), 4);
    assert_eq!(recovery.interrupted_turn, Some(turns + 1));

    // The whole recovery, streamed: the same as the full analysis, holding at most 4 calls.
    let mut reports: Vec<CallReport> = Vec::new();
    let s = Recovery::of(journal::Backend::Files(Arc::new(copy_of(&storage))))
        .stream(&mut reports)
        .unwrap();
    assert_eq!(s.retained_calls_max, 4);
    assert_eq!(s.outcome_unknown, 1);
    assert_eq!(s.not_started, 2);
    assert_streaming_agrees(&long_session(5));
}

#[test]
fn orphans_left_in_closed_steps_hold_back_only_what_follows_them() {
    // A fault leaves a call approved in a closed step; the session goes on; a recovery later.
    let storage = SimStorage::new();
    let mut b = Builder::new(&storage);
    b.put(Event::TurnStart {
        turn: 1,
        user_text: "t".into(),
    });
    let calls = b.step(1, 1, 3);
    b.run(&calls[0], true);
    b.approve(&calls[1]);
    b.approve(&calls[2]);
    b.put(Event::Fault {
        turn: 1,
        step: 1,
        message: "boom".into(),
    });
    b.end_step(1, 1);
    let later = b.step(1, 2, 2);
    b.run(&later[0], true);
    b.run(&later[1], false);
    b.end_step(1, 2);
    b.put(Event::TurnEnd {
        turn: 1,
        outcome: TurnOutcome::Completed,
    });
    b.done();
    assert_streaming_agrees(&storage);
    // Recovered once: the second time round, everything is final as it is read.
    Recovery::of(journal::Backend::Files(Arc::new(storage.clone())))
        .write(true)
        .run()
        .unwrap();
    assert_streaming_agrees(&storage);
    let mut reports: Vec<CallReport> = Vec::new();
    let s = Recovery::of(journal::Backend::Files(Arc::new(storage.clone())))
        .stream(&mut reports)
        .unwrap();
    assert!(s.recovery.is_none(), "balanced already");
    assert_eq!(reports.len(), 5);
}

#[test]
fn questions_and_torn_tails_agree() {
    let storage = SimStorage::new();
    let mut b = Builder::new(&storage);
    b.put(Event::TurnStart {
        turn: 1,
        user_text: "t".into(),
    });
    let calls = b.step(1, 1, 2);
    b.call_event(&calls[0], |call, source_seqs| Event::Parsed {
        call,
        arguments: "{}".into(),
        source_seqs,
    });
    let pending = b.put(Event::AskPending {
        call: calls[0].clone(),
        question: "ok?".into(),
    });
    b.last.insert(calls[0].clone(), pending);
    b.call_event(&calls[1], |call, source_seqs| Event::Rejected {
        call,
        code: ErrorCode::PolicyDenied,
        reason: "no".into(),
        source_seqs,
    });
    b.done();
    assert_streaming_agrees(&storage);
    // A torn tail: cut inside the last record.
    let name = journal::segment::file_name(0);
    let bytes = storage.read_file(&name).unwrap();
    let torn = SimStorage::new();
    torn.put_file(&name, bytes[..bytes.len() - 3].to_vec());
    assert_streaming_agrees(&torn);
}

/// Journals that check out byte for byte but do not make sense: both paths refuse them with
/// the same message, naming the same record.
#[test]
fn nonsense_is_refused_with_the_same_error() {
    type Damage = fn(&mut Builder, &[CallRef]);
    let cases: Vec<(&str, Damage)> = vec![
        ("event after close", |b, _| {
            b.put(Event::SessionClose);
        }),
        ("a call event that does not point back", |b, c| {
            b.put(Event::Parsed {
                call: c[0].clone(),
                arguments: "{}".into(),
                source_seqs: vec![1],
            });
        }),
        ("an illegal transition", |b, c| {
            b.call_event(&c[0], |call, source_seqs| Event::Settled {
                call,
                outcome: Outcome {
                    status: OutcomeStatus::Success,
                    content: Text::Inline(String::new()),
                    value: None,
                    details: None,
                    side_effects: vec![],
                    attempts: 1,
                    duration_ms: 1,
                },
                source_seqs,
            });
        }),
        ("a second step while one is open", |b, _| {
            b.put(Event::StepStart { turn: 1, step: 2 });
        }),
        ("an answer with no question", |b, c| {
            b.put(Event::AskAnswered {
                call: c[1].clone(),
                answer: AskAnswer::AllowedOnce,
            });
        }),
        ("a call never received", |b, _| {
            b.put(Event::Parsed {
                call: CallRef {
                    turn: 1,
                    step: 1,
                    call_id: "nobody".into(),
                },
                arguments: "{}".into(),
                source_seqs: vec![1],
            });
        }),
        ("recovery of a committed call", |b, c| {
            b.run(&c[0], true);
            b.put(Event::Recovery(runtime::event::Recovery {
                dropped_bytes: 0,
                calls: vec![RecoveredCall {
                    call: c[0].clone(),
                    state: runtime::state::CallState::Settled,
                    classification: None,
                    result: CommittedResult {
                        content: "x".into(),
                        is_error: false,
                        code: None,
                        value: None,
                    },
                }],
                interrupted_step: None,
                interrupted_turn: None,
            }));
        }),
    ];
    for (what, damage) in cases {
        let storage = SimStorage::new();
        let mut b = Builder::new(&storage);
        b.put(Event::TurnStart {
            turn: 1,
            user_text: "t".into(),
        });
        let calls = b.step(1, 1, 2);
        damage(&mut b, &calls);
        b.done();
        let full = Recovery::of(journal::Backend::Files(Arc::new(storage.clone())))
            .run()
            .err()
            .unwrap_or_else(|| panic!("{what}: the full replay accepts it"));
        let mut reports: Vec<CallReport> = Vec::new();
        let streamed = Recovery::of(journal::Backend::Files(Arc::new(storage.clone())))
            .stream(&mut reports)
            .err()
            .unwrap_or_else(|| panic!("{what}: the streaming classifier accepts it"));
        assert_eq!(streamed.to_string(), full.to_string(), "{what}");
        assert!(
            matches!(streamed, tooljournal_recover::RecoverError::Corrupt(_)),
            "{what}: exit 2"
        );
    }
}

#[test]
fn a_committed_call_in_the_open_step_holds_no_outcome_or_arguments() {
    let storage = SimStorage::new();
    let mut b = Builder::new(&storage);
    b.put(Event::TurnStart {
        turn: 1,
        user_text: "go".into(),
    });
    let calls = b.step(1, 1, 2);
    b.run(&calls[0], true); // committed
    b.approve(&calls[1]);
    b.start(&calls[1]);
    b.settle(&calls[1], true); // settled, not committed: the step stays open
    b.done();

    let mut classifier = Classifier::new(false);
    let mut held = Vec::new();
    for record in Reader::open(
        Arc::new(storage.clone()) as Arc<dyn Storage>,
        Limits::default(),
    )
    .unwrap()
    {
        classifier.apply(record.unwrap().as_ref()).unwrap();
        held.push(classifier.retained_payload_bytes());
    }
    assert_eq!(classifier.retained_calls(), 2, "the open step's calls");
    // c0's outcome (300 bytes of content) and arguments (`{}`) are held from its `settled`
    // to its `committed`, which lets go of both at once; at the end only c1's are held.
    let c0 = 300 + 2;
    assert!(
        held.windows(2).any(|w| w == [c0, 0]),
        "c0's commit frees its payload: {held:?}"
    );
    assert_eq!(classifier.retained_payload_bytes(), 300 + 2, "{held:?}");
}
