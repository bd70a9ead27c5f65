//! Journals of the older event schemas (1 to 4), written byte by byte from FORMAT.md alone
//! (segment header, frames, CRC and payload layout by hand: no encoder or type of ours), must
//! still be read by this build. That is the versioning rule's promise: a schema changes by
//! additions only, so a journal that uses none of them decodes and replays as it always did.
//! A reordered or retyped event or variant breaks these bytes, whatever the runtime's types say.

use super::{crc, events, Layout};
use runtime::event::{
    Approval, ApprovalPolicy, AskAnswer, ConfigFile, ProcessStarted, SessionPolicy, StepOutcome,
    StopReason, SyncPolicy, ToolSource, TurnOutcome, VisibleTool,
};
use runtime::replay::replay_storage;
use runtime::state::CallState;
use std::sync::Arc;
use tooljournal_journal::{Journal, Limits, Options, ReadEnd, SimStorage};

/// A payload being written with FORMAT.md's *Payload encoding*.
#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    /// A `String`: a `u64` byte count, then the UTF-8 bytes.
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend(s.as_bytes());
        self
    }
    /// A `Vec` count.
    fn len(&mut self, n: usize) -> &mut Self {
        self.u64(n as u64)
    }
    fn none(&mut self) -> &mut Self {
        self.u8(0)
    }
    fn some(&mut self) -> &mut Self {
        self.u8(1)
    }
    /// `CallRef` = `{turn: u32, step: u32, call_id: String}`.
    fn call(&mut self, id: &str) -> &mut Self {
        self.u32(1).u32(1).str(id)
    }
    /// `source_seqs`: a `Vec<u64>`.
    fn seqs(&mut self, seqs: &[u64]) -> &mut Self {
        self.len(seqs.len());
        seqs.iter().for_each(|&s| {
            self.u64(s);
        });
        self
    }
}

/// The payloads of one session of `schema` (1 to 4): one tool call run to its commit, its
/// `started` the event 10 of schemas 1 to 4. A schema-2 journal also has `session/policy` and
/// `call/process`; a schema-3 one also `session/model`, `llm/request` and
/// `llm/response-detail`, and its call is approved by a person's yes/no answer (`ask/pending`,
/// `ask/answered`), the shape every approval by a person, the built-in `ask`'s included, had
/// before schema 4. A schema-4 journal is laid out as a schema-3 one (a yes/no approval is
/// still schema 4's for a tool other than `ask`): what it shows is that its `started`, which
/// schema 5 no longer writes, still replays.
fn session(schema: u32) -> Vec<Vec<u8>> {
    let mut records: Vec<Vec<u8>> = Vec::new();
    // Appends `Record {at_ms, event}` with the event index `index`; returns its seq.
    let mut push = |index: u32, fields: &dyn Fn(&mut Enc)| -> u64 {
        let mut e = Enc::default();
        e.u64(1_600_000_000_000 + records.len() as u64).u32(index);
        fields(&mut e);
        records.push(e.0);
        records.len() as u64
    };
    let args = r#"{"path":"a"}"#;
    push(0, &|e| {
        // session/open: schema, id, workspace, one tool `read`, BuiltIn (variant 0).
        e.u32(schema).str("old-session").str("/ws").len(1);
        e.str("read").u32(0).str("1").str("ab12");
    });
    if schema >= 2 {
        push(25, &|e| {
            // session/policy: deny (1), 4 at once, group (1), one exposure pair, a config file.
            e.u32(1).u32(4).u32(1).len(1).str("grep").str("deferred");
            e.some().str("/c.toml").str("cd").str("session opened");
        });
    }
    if schema >= 3 {
        push(28, &|e| {
            // session/model: provider, model, no system prompt, settings {Some(512), None},
            // no note, no base URL.
            e.str("anthropic").str("claude-old").none();
            e.some().u32(512).none();
            e.none().none();
        });
    }
    push(1, &|e| {
        e.u32(1).str("hello");
    });
    push(2, &|e| {
        e.u32(1).u32(1);
    });
    push(23, &|e| {
        e.u32(1).u32(1).len(1).str("read").str("ab12");
    });
    if schema >= 3 {
        push(30, &|e| {
            // llm/request: turn 1, step 1, attempt 1, provider, model, body hash and size.
            e.u32(1).u32(1).u32(1).str("anthropic").str("claude-old");
            e.str("ee").u64(321);
        });
    }
    let response = push(3, &|e| {
        // llm/response: text, one call, tool_use (0).
        e.u32(1).u32(1).str("reading").len(1);
        e.str("c1").str("read").str(args).u32(0);
    });
    if schema >= 3 {
        push(32, &|e| {
            // llm/response-detail: attempt 1, no response id, usage 10/2/0, no provider state.
            e.u32(1).u32(1).u32(1).none();
            e.u64(10).u64(2).u64(0).none();
        });
    }
    let received = push(7, &|e| {
        e.call("c1").u32(0).str("read").str(args).seqs(&[response]);
    });
    let parsed = push(8, &|e| {
        e.call("c1").str(args).seqs(&[received]);
    });
    let approved = if schema >= 3 {
        push(15, &|e| {
            e.call("c1").str("may I read a?");
        });
        let answered = push(16, &|e| {
            e.call("c1").u32(0); // allowed_once
        });
        push(9, &|e| {
            // approval: Asked (2) {answer: allowed_once (0)}.
            e.call("c1").u32(2).u32(0).seqs(&[answered]);
        })
    } else {
        push(9, &|e| {
            // approval: Default (1).
            e.call("c1").u32(1).seqs(&[parsed]);
        })
    };
    let started = push(10, &|e| {
        // attempt 1; resources: reads ["a"], no writes, no intents.
        e.call("c1").u32(1).len(1).str("a").len(0).len(0);
        e.seqs(&[approved]);
    });
    if schema >= 2 {
        push(26, &|e| {
            e.call("c1").u32(77).u32(77).u64(5).str("boot");
        });
    }
    let settled = push(11, &|e| {
        // Outcome: Success (0), Inline (0) text, no value, no details, no side effects,
        // 1 attempt, 3 ms.
        e.call("c1")
            .u32(0)
            .u32(0)
            .str("text of a")
            .none()
            .none()
            .len(0);
        e.u32(1).u64(3).seqs(&[started]);
    });
    push(12, &|e| {
        // CommittedResult: content, is_error false, no code, no value.
        e.call("c1").str("text of a").u8(0).none().none();
        e.seqs(&[settled]);
    });
    push(4, &|e| {
        e.u32(1).u32(1).u32(0); // step/end Completed
    });
    push(5, &|e| {
        e.u32(1).u32(0); // turn/end Completed
    });
    push(6, &|_| {}); // session/close
    records
}

/// Segment 0 of a journal holding `payloads`, by *Segment header* and *Records*.
fn segment(payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut b = b"TJRNSEG\0".to_vec();
    b.extend(1u32.to_le_bytes()); // format_version
    b.extend([0x5A; 16]); // journal_id
    b.extend(0u64.to_le_bytes()); // segment_number
    b.extend(1u64.to_le_bytes()); // first_seq
    let header_crc = crc(&[&b[0..44]]);
    b.extend(header_crc.to_le_bytes());
    for (i, payload) in payloads.iter().enumerate() {
        let length = (8 + payload.len() as u32).to_le_bytes();
        let seq = (i as u64 + 1).to_le_bytes();
        b.extend(length);
        b.extend(crc(&[&length, &seq, payload]).to_le_bytes());
        b.extend(seq);
        b.extend(payload);
    }
    b
}

/// Replays a hand-written session of `schema` with this build and checks what it read.
fn reads_as_it_always_did(schema: u32) {
    let payloads = session(schema);
    // This build's own reader of the document (schema 5) decodes every record.
    assert_eq!(
        events::verdict(&payloads, Layout::Fixint),
        events::Verdict::Read(payloads.len()),
        "schema {schema}"
    );
    let storage = SimStorage::new();
    storage.put_file(&format!("{:020}.segment", 0), segment(&payloads));
    let (replay, end) = replay_storage(Arc::new(storage), Limits::default())
        .unwrap_or_else(|e| panic!("a schema-{schema} journal does not replay: {e}"));
    assert!(matches!(end, ReadEnd::Clean), "schema {schema}: {end:?}");
    assert_eq!(replay.last_seq, payloads.len() as u64);

    let open = replay.open.as_ref().expect("session/open read");
    assert_eq!(open.schema_version, schema);
    assert_eq!(open.session_id, "old-session");
    assert_eq!(
        (open.tools[0].name.as_str(), &open.tools[0].source),
        ("read", &ToolSource::BuiltIn)
    );
    assert!(replay.closed, "session/close read");
    assert_eq!(replay.turns.len(), 1);
    let turn = &replay.turns[0];
    assert_eq!(turn.user_text, "hello");
    assert_eq!(turn.outcome, Some(TurnOutcome::Completed));
    let step = &turn.steps[0];
    assert_eq!(
        step.tools,
        Some(vec![VisibleTool {
            name: "read".into(),
            schema_hash: "ab12".into(),
        }])
    );
    let response = step.response.as_ref().expect("llm/response read");
    assert_eq!(response.text, "reading");
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(step.outcome, Some(StepOutcome::Completed));
    assert!(step.failed_attempts.is_empty() && replay.tool_schemas.is_empty());
    if schema >= 3 {
        assert_eq!(step.attempts, 1);
        let detail = step.detail.as_ref().expect("llm/response-detail read");
        assert_eq!((detail.attempt, detail.usage.input_tokens), (1, 10));
        let model = replay.model.as_ref().expect("session/model read");
        assert_eq!(
            (model.provider.as_str(), model.model.as_str()),
            ("anthropic", "claude-old")
        );
        assert_eq!(model.settings.max_tokens, Some(512));
    } else {
        // Nothing of schema 3 in an older journal.
        assert_eq!(step.attempts, 0);
        assert!(step.detail.is_none() && replay.model.is_none());
    }

    let call = replay.calls().next().expect("call c1");
    assert_eq!(call.call.call_id, "c1");
    assert_eq!(call.state, CallState::Committed);
    // Event 10 journaled no key and no evidence, and nothing was re-run.
    assert_eq!(call.attempts, 1);
    assert_eq!(call.idempotency_key, None);
    assert!(call.evidence.is_empty() && call.rerun.is_none());
    assert_eq!(call.arguments.as_deref(), Some(r#"{"path":"a"}"#));
    if schema >= 3 {
        // A yes/no answer approves as it always did: schema 4's rule for `Asked` approvals
        // (right after that answer) holds for the journals written before it.
        let answer = AskAnswer::AllowedOnce;
        assert_eq!(call.approval, Some(Approval::Asked { answer }));
        let ask = &call.asks[..];
        assert_eq!(ask.len(), 1);
        assert_eq!(
            (ask[0].question.as_str(), ask[0].answer),
            ("may I read a?", Some(answer))
        );
        assert!(ask[0].structured.is_none() && ask[0].reply.is_none());
    } else {
        assert_eq!(call.approval, Some(Approval::Default));
        assert!(call.asks.is_empty());
    }
    assert_eq!(
        call.resources.as_ref().map(|r| r.reads.clone()),
        Some(vec!["a".into()])
    );
    let outcome = call.outcome.as_ref().expect("settled read");
    assert_eq!((outcome.attempts, outcome.duration_ms), (1, 3));
    let committed = call.committed.as_ref().expect("committed read");
    assert_eq!(committed.content, "text of a");
    assert!(!committed.is_error);

    if schema >= 2 {
        assert_eq!(
            replay.policy,
            Some(SessionPolicy {
                approval: ApprovalPolicy::Deny,
                parallel_max: 4,
                fsync: SyncPolicy::Group,
                exposure: vec![("grep".into(), "deferred".into())],
                config: Some(ConfigFile {
                    path: "/c.toml".into(),
                    sha256: "cd".into(),
                }),
                reason: "session opened".into(),
            })
        );
        assert_eq!(
            call.processes,
            vec![ProcessStarted {
                pid: 77,
                pgid: 77,
                start_ticks: 5,
                boot_id: "boot".into(),
            }]
        );
    } else {
        assert_eq!(replay.policy, None);
        assert!(call.processes.is_empty());
    }
}

#[test]
fn a_schema_1_journal_written_from_the_document_replays_with_this_build() {
    reads_as_it_always_did(1);
}

#[test]
fn a_schema_2_journal_written_from_the_document_replays_with_this_build() {
    reads_as_it_always_did(2);
}

#[test]
fn a_schema_3_journal_written_from_the_document_replays_with_this_build() {
    reads_as_it_always_did(3);
}

#[test]
fn a_schema_4_journal_with_the_old_started_replays_with_this_build() {
    reads_as_it_always_did(4);
}

#[test]
fn a_hand_written_format_1_journal_resumed_by_this_build_stays_format_1() {
    // The schema-4 session without its `session/close`, then closed by this build's writer,
    // in segments small enough that the close starts a new one.
    let mut payloads = session(4);
    payloads.pop();
    let storage = SimStorage::new();
    storage.put_file(&format!("{:020}.segment", 0), segment(&payloads));
    let options = Options {
        limits: Limits {
            segment_size_bytes_max: 48,
            ..Limits::default()
        },
        ..Options::default()
    };
    let (journal, report) = Journal::open(Arc::new(storage.clone()), options).expect("open");
    assert_eq!(report.next_seq, payloads.len() as u64 + 1);
    let close = runtime::event::Record {
        at_ms: 1_600_000_000_999,
        event: runtime::event::Event::SessionClose,
    };
    journal.append(&close).expect("append");
    journal.close().expect("close");

    // Segment 1, by the document: a format-1 header, and `session/close` as at_ms (8 bytes)
    // and the index 6 as a `u32`.
    let seg1 = storage
        .read_file(&format!("{:020}.segment", 1))
        .expect("segment 1");
    assert_eq!(seg1[8..12], 1u32.to_le_bytes(), "format_version");
    let mut want = 1_600_000_000_999u64.to_le_bytes().to_vec();
    want.extend(6u32.to_le_bytes());
    assert_eq!(seg1[48 + 16..], want[..]);
    let (replay, end) = replay_storage(Arc::new(storage), Limits::default()).expect("replays");
    assert!(matches!(end, ReadEnd::Clean), "{end:?}");
    assert!(replay.closed);
    assert_eq!(replay.last_seq, payloads.len() as u64 + 1);
}
