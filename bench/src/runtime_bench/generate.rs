//! The journal that `runtime` measures recovery on: a realistic session written straight
//! through the journal API (no runtime in the way, so 1 GiB takes seconds), deterministic so that
//! every run recovers the same bytes. Also the hidden `generate-journal` subcommand, which
//! writes it and keeps it, for profiling recovery.

use crate::disk::{segment_bytes, segment_count};
use crate::{BoxError, MB, MIB};
use journal::{FsStorage, FsyncPolicy, Journal, Options, Storage};
use runtime::event::{
    Approval, CallRef, CommittedResult, Event, ModelCall, ModelResponse, Outcome, OutcomeStatus,
    Record, Resources, SessionOpen, SideEffect, StepOutcome, StopReason, Text, ToolDescriptor,
    ToolSource, TurnOutcome, EVENT_SCHEMA_VERSION,
};
use runtime::ErrorCode;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// What [`generate`] wrote.
/// The generated session's id (its calls' idempotency keys derive from it).
const SESSION_ID: &str = "00000000-bench-4000-8000-000000000000";

pub(super) struct GenStats {
    pub(super) bytes: u64,
    pub(super) segments: u64,
    pub(super) records: u64,
    pub(super) turns: u64,
    pub(super) steps: u64,
    pub(super) calls: u64,
    pub(super) seconds: f64,
}

/// The hidden `generate-journal` subcommand.
pub(crate) fn generate_only(dir: &Path, mib: u64) -> Result<(), BoxError> {
    let g = generate(dir, mib * MIB)?;
    eprintln!(
        "bench: {:.1} MB, {} records, {} calls in {:.1} s",
        g.bytes as f64 / MB,
        g.records,
        g.calls,
        g.seconds
    );
    Ok(())
}

/// xorshift64*: deterministic, so every run generates the same journal.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// In `lo..hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo)
    }
    fn hex64(&mut self) -> String {
        format!(
            "{:016x}{:016x}{:016x}{:016x}",
            self.next(),
            self.next(),
            self.next(),
            self.next()
        )
    }
}

const WORDS: &[&str] = &[
    "the",
    "file",
    "function",
    "returns",
    "error",
    "test",
    "value",
    "config",
    "journal",
    "call",
    "session",
    "step",
    "fn",
    "let",
    "mut",
    "impl",
    "struct",
    "pub",
    "use",
    "self",
    "match",
    "Some",
    "None",
    "Ok",
    "Err",
    "result",
    "String",
    "Vec",
    "u64",
    "path",
    "src",
    "line",
    "warning:",
    "passed",
    "failed",
    "assert_eq!",
    "=>",
    "{",
    "}",
    "();",
    "->",
    "async",
    "await",
    "tool",
    "model",
    "request",
    "response",
    "build",
    "cargo",
    "crate",
];
const TOOLS: [&str; 6] = [
    "read_file",
    "write_file",
    "edit_file",
    "bash",
    "grep",
    "list_dir",
];

/// Writes a realistic session straight into a journal (policy never): many turns, each
/// of several steps with one to four committed calls and a final answer, tool outputs of
/// a few bytes to tens of kilobytes; the last turn is left open with one call started and
/// Writes a realistic session straight into a journal (policy never): many turns, each
/// of several steps with one to four committed calls and a final answer, tool outputs of
/// a few bytes to tens of kilobytes; the last turn is left open with one call started and
/// one not (a crash), as `recover` finds it. Stops past `target_bytes` of segments.
pub(super) fn generate(dir: &Path, target_bytes: u64) -> Result<GenStats, BoxError> {
    let start = Instant::now();
    let storage: Arc<dyn Storage> = Arc::new(FsStorage::create(dir)?);
    let options = Options {
        fsync: FsyncPolicy::Never,
        ..Options::default()
    };
    let (journal, _) = Journal::open(storage, options)?;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let corpus = corpus(&mut rng);
    let mut g = Gen {
        journal,
        rng,
        corpus,
        at_ms: 1_750_000_000_000,
        turns: 0,
        steps: 0,
        calls: 0,
    };
    g.session_open()?;
    let mut turn = 0u32;
    loop {
        if turn.is_multiple_of(16) && segment_bytes(dir)? >= target_bytes {
            break;
        }
        turn += 1;
        g.turn(turn, false)?;
    }
    g.turn(turn + 1, true)?;
    let records = g.journal.close()?;
    Ok(GenStats {
        bytes: segment_bytes(dir)?,
        segments: segment_count(dir)?,
        records,
        turns: g.turns,
        steps: g.steps,
        calls: g.calls,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// 256 KiB of words to cut every text from: arguments, outputs and answers read like code and
/// its tools' output, and cost nothing to make.
fn corpus(rng: &mut Rng) -> String {
    let mut corpus = String::with_capacity(300 << 10);
    while corpus.len() < 256 << 10 {
        corpus.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        corpus.push(if rng.below(12) == 0 { '\n' } else { ' ' });
    }
    corpus
}

struct Gen {
    journal: Journal,
    rng: Rng,
    corpus: String,
    at_ms: u64,
    turns: u64,
    steps: u64,
    calls: u64,
}

/// One call of a generated step.
struct GenCall {
    call: CallRef,
    tool: &'static str,
    arguments: String,
    resources: Resources,
    last_seq: u64,
}

impl Gen {
    fn put(&mut self, event: Event) -> Result<u64, BoxError> {
        self.at_ms += self.rng.range(1, 50);
        Ok(self.journal.append(&Record {
            at_ms: self.at_ms,
            event,
        })?)
    }

    /// `len` bytes of text (the corpus is ASCII).
    fn text(&mut self, lo: u64, hi: u64) -> String {
        let len = self.rng.range(lo, hi) as usize;
        let at = self.rng.below((self.corpus.len() - len) as u64) as usize;
        self.corpus[at..at + len].to_owned()
    }

    fn word(&mut self) -> &'static str {
        WORDS[self.rng.below(WORDS.len() as u64) as usize]
    }

    fn path(&mut self) -> String {
        format!("src/{}/{}.rs", self.word(), self.word())
            .replace(['{', '}', '(', ')', ';', '!', '=', '>', ':', '-'], "x")
    }

    /// A tool output: mostly small, some large, a few very large (kept inline: under
    /// the runtime's 1 MiB inline limit).
    fn output_len(&mut self) -> (u64, u64) {
        match self.rng.below(100) {
            0..=49 => (20, 400),
            50..=84 => (400, 3_000),
            85..=97 => (3_000, 12_000),
            _ => (12_000, 30_000),
        }
    }

    fn new_call(&mut self, turn: u32, step: u32) -> GenCall {
        let tool = TOOLS[self.rng.below(TOOLS.len() as u64) as usize];
        let path = self.path();
        let (arguments, resources) = match tool {
            "read_file" => (
                json!({ "path": path }),
                Resources {
                    reads: vec![path],
                    ..Resources::default()
                },
            ),
            "write_file" => (
                json!({ "path": path, "content": self.text(50, 2_000) }),
                Resources {
                    writes: vec![path],
                    ..Resources::default()
                },
            ),
            "edit_file" => (
                json!({ "path": path, "old": self.text(10, 200), "new": self.text(10, 300) }),
                Resources {
                    writes: vec![path],
                    ..Resources::default()
                },
            ),
            "bash" => {
                let command = format!("cargo test -p {} -- {}", self.word(), self.word());
                (
                    json!({ "command": command, "timeout_ms": 120_000 }),
                    Resources {
                        intents: vec![command],
                        ..Resources::default()
                    },
                )
            }
            "grep" => (
                json!({ "pattern": self.word(), "path": "src" }),
                Resources {
                    reads: vec!["src".into()],
                    ..Resources::default()
                },
            ),
            _ => (
                json!({ "path": "src" }),
                Resources {
                    reads: vec!["src".into()],
                    ..Resources::default()
                },
            ),
        };
        GenCall {
            call: CallRef {
                turn,
                step,
                call_id: format!("toolu_{:016x}", self.rng.next()),
            },
            tool,
            arguments: arguments.to_string(),
            resources,
            last_seq: 0,
        }
    }

    /// One call's event after `c`'s last one.
    fn call_event(
        &mut self,
        c: &mut GenCall,
        make: impl FnOnce(CallRef, Vec<u64>) -> Event,
    ) -> Result<(), BoxError> {
        c.last_seq = self.put(make(c.call.clone(), vec![c.last_seq]))?;
        Ok(())
    }

    /// The session's first record: the six tools it offers.
    fn session_open(&mut self) -> Result<(), BoxError> {
        let tools = TOOLS
            .iter()
            .map(|name| ToolDescriptor {
                name: (*name).to_owned(),
                source: ToolSource::BuiltIn,
                version: "1".into(),
                schema_hash: self.rng.hex64(),
            })
            .collect();
        self.put(Event::SessionOpen(SessionOpen {
            schema_version: EVENT_SCHEMA_VERSION,
            session_id: SESSION_ID.into(),
            workspace: "/home/dev/project".into(),
            tools,
        }))?;
        Ok(())
    }

    /// One turn: 1 to 8 steps of calls, then the final answer. With `crash`, one step of two
    /// calls that ends with the first call started and the second not, and nothing after.
    fn turn(&mut self, turn: u32, crash: bool) -> Result<(), BoxError> {
        self.turns += 1;
        let user_text = self.text(20, 400);
        self.put(Event::TurnStart { turn, user_text })?;
        let tool_steps = if crash {
            1
        } else {
            self.rng.range(1, 9) as u32
        };
        for step in 1..=tool_steps {
            if self.tool_step(turn, step, crash)? {
                return Ok(());
            }
        }
        self.final_answer(turn, tool_steps + 1)
    }

    /// One step of one, two or four calls: the model's response, every call received, parsed
    /// and approved, then each started, settled and committed. Returns true if the step
    /// crashed (`crash`: the first call started, then nothing more was written).
    fn tool_step(&mut self, turn: u32, step: u32, crash: bool) -> Result<bool, BoxError> {
        self.steps += 1;
        self.put(Event::StepStart { turn, step })?;
        // Drawn even for a crash, so that the draws that follow stay where they were.
        let n = match self.rng.below(10) {
            _ if crash => 2,
            0..=5 => 1,
            6..=8 => 2,
            _ => 4,
        };
        let mut calls: Vec<GenCall> = (0..n).map(|_| self.new_call(turn, step)).collect();
        let text = self.text(0, 300);
        let response_seq = self.put(Event::LlmResponse {
            turn,
            step,
            response: ModelResponse {
                text,
                tool_calls: calls
                    .iter()
                    .map(|c| ModelCall {
                        call_id: c.call.call_id.clone(),
                        name: c.tool.into(),
                        arguments: c.arguments.clone(),
                    })
                    .collect(),
                stop_reason: StopReason::ToolUse,
            },
        })?;
        for (index, c) in calls.iter_mut().enumerate() {
            self.receive(c, index, response_seq)?;
        }
        for (i, c) in calls.iter_mut().enumerate() {
            self.calls += 1;
            let resources = c.resources.clone();
            // As the runtime writes it: the key, and for file writes what they expect
            // (hashes derived from the call, so that the draws that follow stay put).
            let evidence = match c.tool {
                "write_file" | "edit_file" => vec![runtime::event::Evidence::FileReplace {
                    path: c.resources.writes[0].clone(),
                    before_sha256: (c.tool == "edit_file")
                        .then(|| runtime::sha256_hex(c.resources.writes[0].as_bytes())),
                    after_sha256: runtime::sha256_hex(c.call.call_id.as_bytes()),
                }],
                _ => Vec::new(),
            };
            self.call_event(c, |call, source_seqs| {
                Event::Started(runtime::event::CallStarted {
                    idempotency_key: runtime::event::idempotency_key(SESSION_ID, &call),
                    call,
                    attempt: 1,
                    resources,
                    evidence,
                    source_seqs,
                })
            })?;
            if crash && i == 0 {
                // The process died while the first call ran; the second never started.
                self.calls += 1;
                return Ok(true);
            }
            self.settle(c)?;
        }
        self.put(Event::StepEnd {
            turn,
            step,
            outcome: StepOutcome::Completed,
        })?;
        Ok(false)
    }

    /// Call `c` (the `index`th of the response at `response_seq`) received, parsed, approved.
    fn receive(
        &mut self,
        c: &mut GenCall,
        index: usize,
        response_seq: u64,
    ) -> Result<(), BoxError> {
        c.last_seq = self.put(Event::Received {
            call: c.call.clone(),
            index: index as u32,
            tool: c.tool.into(),
            raw_arguments: c.arguments.clone(),
            source_seqs: vec![response_seq],
        })?;
        let arguments = c.arguments.clone();
        self.call_event(c, |call, source_seqs| Event::Parsed {
            call,
            arguments,
            source_seqs,
        })?;
        self.call_event(c, |call, source_seqs| Event::Approved {
            call,
            approval: Approval::Default,
            source_seqs,
        })
    }

    /// A started call's outcome (1 in 20 fails) and its commit.
    fn settle(&mut self, c: &mut GenCall) -> Result<(), BoxError> {
        let (lo, hi) = self.output_len();
        let content = self.text(lo, hi);
        let failed = self.rng.below(20) == 0;
        let status = if failed {
            OutcomeStatus::Error {
                code: ErrorCode::ToolFailed,
                message: content.clone(),
            }
        } else {
            OutcomeStatus::Success
        };
        let side_effects = self.side_effects(c, failed);
        let duration_ms = self.rng.range(1, 5_000);
        let committed = CommittedResult {
            content: if failed {
                format!("TOOL_FAILED: {content}")
            } else {
                content.clone()
            },
            is_error: failed,
            code: failed.then_some(ErrorCode::ToolFailed),
            value: None,
        };
        self.call_event(c, |call, source_seqs| Event::Settled {
            call,
            outcome: Outcome {
                status,
                content: Text::Inline(content),
                value: None,
                details: None,
                side_effects,
                attempts: 1,
                duration_ms,
            },
            source_seqs,
        })?;
        self.call_event(c, |call, source_seqs| Event::Committed {
            call,
            result: committed,
            source_seqs,
        })
    }

    /// What call `c` did to the world: a file written (with its hashes), or a process exit.
    fn side_effects(&mut self, c: &GenCall, failed: bool) -> Vec<SideEffect> {
        match c.tool {
            "write_file" | "edit_file" if !failed => vec![SideEffect::FsWrite {
                path: c.resources.writes[0].clone(),
                before_sha256: (c.tool == "edit_file").then(|| self.rng.hex64()),
                after_sha256: self.rng.hex64(),
            }],
            "bash" => vec![SideEffect::ProcExit {
                pid: self.rng.range(1_000, 60_000) as u32,
                status: Some(i32::from(failed)),
                signal: None,
            }],
            _ => Vec::new(),
        }
    }

    /// The turn's last step: the final answer, with no calls, and the turn's end.
    fn final_answer(&mut self, turn: u32, step: u32) -> Result<(), BoxError> {
        self.steps += 1;
        self.put(Event::StepStart { turn, step })?;
        let text = self.text(100, 2_000);
        self.put(Event::LlmResponse {
            turn,
            step,
            response: ModelResponse {
                text,
                tool_calls: Vec::new(),
                stop_reason: StopReason::EndTurn,
            },
        })?;
        self.put(Event::StepEnd {
            turn,
            step,
            outcome: StepOutcome::Completed,
        })?;
        self.put(Event::TurnEnd {
            turn,
            outcome: TurnOutcome::Completed,
        })?;
        Ok(())
    }
}
