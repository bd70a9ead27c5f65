//! The plain ways a user would otherwise make tool calls durable, each writing the same six
//! transition records per call that the runtime journals: JSON lines with an fdatasync per
//! record (`jsonl`), SQLite in WAL mode with synchronous=FULL (`sqlite`), sled with a flush per
//! record (`sled`). One module each, so that each states its own durability settings.

pub(super) mod jsonl;
pub(super) mod sled;
pub(super) mod sqlite;

use super::session::NOOP_ARGS;

/// The session the baselines' records belong to (their `started` carries a key derived from it,
/// as the runtime's does).
const BASELINE_SESSION_ID: &str = "baseline";
use runtime::event::{
    Approval, CallRef, CommittedResult, Event, Outcome, OutcomeStatus, Resources, Text,
};

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The six transition records of call `n` (a no-op call, step `n` of turn 1) as the
/// runtime journals them, each pointing back at the one before; `seq` is the first one's.
fn call_events(n: u64, seq: u64) -> [Event; 6] {
    let call = CallRef {
        turn: 1,
        step: n as u32,
        call_id: format!("call_{n}"),
    };
    [
        Event::Received {
            call: call.clone(),
            index: 0,
            tool: "noop".into(),
            raw_arguments: NOOP_ARGS.into(),
            source_seqs: vec![seq.saturating_sub(1)],
        },
        Event::Parsed {
            call: call.clone(),
            arguments: NOOP_ARGS.into(),
            source_seqs: vec![seq],
        },
        Event::Approved {
            call: call.clone(),
            approval: Approval::Default,
            source_seqs: vec![seq + 1],
        },
        Event::Started(runtime::event::CallStarted {
            call: call.clone(),
            attempt: 1,
            resources: Resources::default(),
            idempotency_key: runtime::event::idempotency_key(BASELINE_SESSION_ID, &call),
            evidence: Vec::new(),
            source_seqs: vec![seq + 2],
        }),
        Event::Settled {
            call: call.clone(),
            outcome: Outcome {
                status: OutcomeStatus::Success,
                content: Text::Inline("ok".into()),
                value: None,
                details: None,
                side_effects: Vec::new(),
                attempts: 1,
                duration_ms: 0,
            },
            source_seqs: vec![seq + 3],
        },
        Event::Committed {
            call,
            result: CommittedResult {
                content: "ok".into(),
                is_error: false,
                code: None,
                value: None,
            },
            source_seqs: vec![seq + 4],
        },
    ]
}
