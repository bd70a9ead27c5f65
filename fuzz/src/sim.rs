//! One simulated session: the runtime on an in-memory disk, on tokio's paused clock, with the
//! faults the case asks for. Everything that happens is a function of the case: the same case
//! gives the same bytes.

use crate::case::{CallSpec, Cancel, Case, Kind, StepSpec, StorageFault};
use crate::counted::{Counted, Ops};
use crate::person::{ask_arguments, AsksForApproval, Said, SimPerson, QUESTION_TIMEOUT_MS};
use crate::Mutant;
use journal::storage::{Fault, Op, TailLoss};
use journal::{Journal, Options, SimStorage};
use runtime::event::{
    CallRef, ModelCall, ModelResponse, Resources, SideEffect, StepOutcome, StopReason, ToolSource,
    TurnOutcome,
};
use runtime::hooks::{Hooks, Observer};
use runtime::registry::Registry;
use runtime::spill::SpillStore;
use runtime::testing::ManualClock;
use runtime::tool::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use runtime::{Config, ErrorCode, Session, SessionOptions, ToolResult};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A body that ran, as the tool saw it (outside the journal).
#[derive(Debug, Clone)]
pub struct Body {
    /// The id of the call the body ran for.
    pub call_id: String,
    /// When the body started, in simulated ms since the run began.
    pub started_ms: u64,
    /// What the body returned; `None` if it never finished (it was dropped while running).
    pub end: Option<BodyEnd>,
}

/// What a body returned, as the tool recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyEnd {
    /// The body succeeded with this content.
    Ok(String),
    /// The body failed with this code and message.
    Err(ErrorCode, String),
    /// The body panicked.
    Panicked,
}

/// One step's model response as the model sent it: its calls, in model order.
#[derive(Debug, Clone)]
pub struct SentStep {
    /// The turn number the session gave.
    pub turn: u32,
    /// The step number within the turn the session gave.
    pub step: u32,
    /// The response stopped at its length limit.
    pub truncated: bool,
    /// (call id, raw arguments, what the case made it).
    pub calls: Vec<(String, String, CallSpec)>,
    /// The results the model got back, in the order it got them (a batch that finished).
    pub results: Option<Vec<ToolResult>>,
}

/// The fault a run drew, and what became of it.
#[derive(Debug, Clone)]
pub struct FaultReport {
    /// The fault's kind, as [`crate::case::StorageFault::kind`] names it.
    pub kind: &'static str,
    /// The operation of its kind it was set on (1-based).
    pub nth: u64,
    /// How many operations of that kind the session makes without the fault.
    pub count: u64,
    /// Whether the fault fired (the session reached the `nth` operation).
    pub fired: bool,
    /// The last event the runtime had appended when the fault fired ("open" while the journal
    /// and session are being opened). The runtime touches the disk only to make records durable
    /// (group commit), so this is always the record that asked for the sync: `session/open`'s
    /// ("open"), a start group's `started`, `turn/end` or `session/close`.
    pub event_before: String,
    /// The first event that was not yet durable when the fault fired: where what recovery may
    /// lose begins ("none" when everything appended was durable).
    pub first_at_risk: String,
}

/// Everything a run leaves behind for the checks.
#[derive(Debug)]
pub struct Run {
    /// The disk as recovery will find it.
    pub image: SimStorage,
    /// Every tool body that started, in the order they started.
    pub bodies: Vec<Body>,
    /// What the model sent, step by step, in order.
    pub steps: Vec<SentStep>,
    /// When each step's cancel fired, by (turn, step), in simulated ms.
    pub cancels: HashMap<(u32, u32), u64>,
    /// Violations seen while running (a body starting after the journal failed).
    pub live_violations: Vec<String>,
    /// The fault the case drew and what became of it; `None` when the case drew none.
    pub fault: Option<FaultReport>,
    /// What the simulated person said, by call id (outside the journal).
    pub said: HashMap<String, Said>,
}

impl Run {
    /// Where each call id was sent: its step and its place in the step.
    pub fn sent(&self, call_id: &str) -> Option<(&SentStep, usize)> {
        self.steps.iter().find_map(|s| {
            s.calls
                .iter()
                .position(|(id, _, _)| id == call_id)
                .map(|i| (s, i))
        })
    }

    /// The body that ran for `call_id`; `None` if none started.
    pub fn body(&self, call_id: &str) -> Option<&Body> {
        self.bodies.iter().find(|b| b.call_id == call_id)
    }
}

struct Shared {
    epoch: Instant,
    bodies: Mutex<Vec<Body>>,
    journal: OnceLock<Arc<Journal>>,
    violations: Mutex<Vec<String>>,
}

/// The simulated tool: what it does is in its arguments.
struct Sim(Arc<Shared>);

impl Tool for Sim {
    fn name(&self) -> &str {
        "sim"
    }
    fn description(&self) -> &str {
        "a simulated tool"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn is_concurrency_safe(&self, args: &runtime::args::Args) -> bool {
        args.get("parallel").and_then(Value::as_bool) == Some(true)
    }
    fn resources(&self, args: &runtime::args::Args) -> Resources {
        let list = |k: &str| -> Vec<String> {
            args.get(k)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        Resources {
            reads: list("reads"),
            writes: list("writes"),
            intents: vec![format!("simulate {}", args.str("kind").unwrap_or("?"))],
        }
    }
    fn execute(&self, args: runtime::args::Args, ctx: ToolContext) -> ToolFuture<'_> {
        let shared = self.0.clone();
        let started_ms = shared.epoch.elapsed().as_millis() as u64;
        if let Some(j) = shared.journal.get() {
            if let Some(cause) = j.poisoned() {
                shared.violations.lock().unwrap().push(format!(
                    "I10 fail-stop: the body of {} started after the journal failed ({cause})",
                    ctx.call_id()
                ));
            }
        }
        let index = {
            let mut bodies = shared.bodies.lock().unwrap();
            bodies.push(Body {
                call_id: ctx.call_id().to_owned(),
                started_ms,
                end: None,
            });
            bodies.len() - 1
        };
        Box::pin(async move {
            let kind = args.str("kind").unwrap_or("ok").to_owned();
            let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
            if kind == "panics" {
                shared.bodies.lock().unwrap()[index].end = Some(BodyEnd::Panicked);
                panic!("simulated panic");
            }
            let result = body(&kind, ms, &ctx).await;
            // Recorded when the body returns, not before: a body dropped while running has no end.
            shared.bodies.lock().unwrap()[index].end = Some(match &result {
                Ok(output) => BodyEnd::Ok(output.content.clone()),
                Err(e) => BodyEnd::Err(e.code, e.message.clone()),
            });
            result
        })
    }
}

/// What the simulated tool does, by its `kind` argument.
async fn body(kind: &str, ms: u64, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let effect = SideEffect::Other {
        kind: "sim".into(),
        detail: ctx.call_id().to_owned(),
    };
    match kind {
        "ignores_cancel" => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(ToolOutput::text("finished regardless").with_side_effect(effect))
        }
        _ => {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
                _ = ctx.cancel().cancelled() => {
                    // Stopping takes a moment (a write to finish), as in a real tool.
                    tokio::time::sleep(Duration::from_millis(1 + ms % 4)).await;
                    return Err(ToolError::new(ErrorCode::Aborted, "stopped").with_side_effect(effect));
                }
            }
            match kind {
                "fails" => Err(ToolError::new(ErrorCode::ToolFailed, "simulated failure")
                    .with_side_effect(effect)),
                "big" => Ok(ToolOutput::text("x".repeat(2000)).with_side_effect(effect)),
                "late_progress" => {
                    let sink = ctx.progress().clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        let _ = sink.report("too late");
                    });
                    Ok(ToolOutput::text("done").with_side_effect(effect))
                }
                _ => Ok(
                    ToolOutput::text(format!("done {}", ctx.call_id())).with_side_effect(effect)
                ),
            }
        }
    }
}

/// A spill store in memory, or one that always fails.
struct MemSpill {
    fails: bool,
    blobs: Mutex<HashMap<String, String>>,
}

impl SpillStore for MemSpill {
    fn put(&self, text: &str) -> Result<String, String> {
        if self.fails {
            return Err("simulated spill failure".into());
        }
        let locator = format!(
            "spill:sha256:{}",
            runtime::tools::sha256_hex(text.as_bytes())
        );
        self.blobs
            .lock()
            .unwrap()
            .insert(locator.clone(), text.to_owned());
        Ok(locator)
    }
    fn get(&self, locator: &str) -> Result<Option<String>, String> {
        Ok(self.blobs.lock().unwrap().get(locator).cloned())
    }
}

struct PanickyObserver;

impl Observer for PanickyObserver {
    fn name(&self) -> &str {
        "panicky"
    }
    fn on_result(&self, _: &CallRef, _: &str, _: &ToolResult) -> Result<(), String> {
        panic!("simulated observer panic")
    }
}

fn call_id(t: usize, s: usize, i: usize) -> String {
    format!("t{t}s{s}c{i}")
}

/// The simulated tool's `kind` argument for a call.
fn kind_arg(kind: Kind) -> &'static str {
    match kind {
        Kind::Ok => "ok",
        Kind::Fails => "fails",
        Kind::Panics => "panics",
        Kind::IgnoresCancel => "ignores_cancel",
        Kind::LateProgress => "late_progress",
        Kind::Big => "big",
        Kind::Unknown | Kind::BadJson | Kind::Ask(_) | Kind::Approval(_) => "ok",
    }
}

/// What the simulated tool declares a call will touch (what its `started` records).
pub fn declared(spec: &CallSpec) -> Resources {
    Resources {
        reads: spec.reads.iter().map(|p| (*p).to_owned()).collect(),
        writes: spec.writes.iter().map(|p| (*p).to_owned()).collect(),
        intents: vec![format!("simulate {}", kind_arg(spec.kind))],
    }
}

fn model_call(id: &str, spec: &CallSpec) -> ModelCall {
    let kind = kind_arg(spec.kind);
    let approval = matches!(spec.kind, Kind::Approval(_));
    let args = json!({"kind": kind, "ms": spec.duration_ms, "parallel": spec.parallel,
                      "reads": spec.reads, "writes": spec.writes, "approval": approval});
    match spec.kind {
        Kind::Unknown => ModelCall {
            call_id: id.into(),
            name: "nope".into(),
            arguments: args.to_string(),
        },
        Kind::BadJson => ModelCall {
            call_id: id.into(),
            name: "sim".into(),
            arguments: "{\"kind\": ".into(),
        },
        Kind::Ask(ask) => ModelCall {
            call_id: id.into(),
            name: "ask".into(),
            arguments: ask_arguments(id, &ask).to_string(),
        },
        _ => ModelCall {
            call_id: id.into(),
            name: "sim".into(),
            arguments: args.to_string(),
        },
    }
}

/// The registry, hooks and config a case runs with.
fn session_parts(
    case: &Case,
    shared: &Arc<Shared>,
    mutant: Option<Mutant>,
) -> (Arc<Registry>, Hooks, Config, Arc<SimPerson>) {
    let mut registry = Registry::new();
    registry
        .register(Arc::new(Sim(shared.clone())), ToolSource::BuiltIn)
        .expect("sim registers");
    registry
        .register(Arc::new(runtime::tools::ask::Ask), ToolSource::BuiltIn)
        .expect("ask registers");
    let approver = Arc::new(SimPerson::default());
    let mut observers: Vec<Arc<dyn Observer>> = Vec::new();
    if case.observer_panics {
        observers.push(Arc::new(PanickyObserver));
    }
    let hooks = Hooks {
        pre_execute: vec![Arc::new(AsksForApproval)],
        approver: Some(approver.clone()),
        observers,
        ..Hooks::default()
    };
    let failpoints = runtime::failpoint::Failpoints::armable();
    if let Some(name) = mutant.and_then(Mutant::failpoint) {
        failpoints.enable(name);
    }
    let config = Config {
        parallel_max: case.parallel_max,
        timeout_ms: 1_000,
        cancel_grace_ms: 50,
        model_inline_bytes_max: 256,
        spill: Some(Arc::new(MemSpill {
            fails: case.spill_fails,
            blobs: Mutex::default(),
        })),
        failpoints,
        question_timeout_ms: Some(QUESTION_TIMEOUT_MS),
        ..Config::default()
    };
    (Arc::new(registry), hooks, config, approver)
}

/// The operation a fault is counted on, and what it does there.
fn fault_op(fault: StorageFault) -> Option<(Op, Fault)> {
    match fault {
        StorageFault::None => None,
        StorageFault::PowerLoss { .. } => Some((Op::Any, Fault::PowerLoss)),
        StorageFault::SyncFails { .. } => Some((Op::Sync, Fault::Error)),
        StorageFault::NoSpace { .. } => Some((Op::Write, Fault::NoSpace)),
        StorageFault::ShortWrite { .. } => Some((Op::Write, Fault::ShortWrite { bytes: 3 })),
    }
}

/// Runs the case's session and returns what survives and what was seen. A case with a fault
/// runs twice: a dry run counts the session's operations (and notes the event each one follows),
/// then the real run has the fault at the case's point among them.
pub fn run(case: &Case, mutant: Option<Mutant>) -> Run {
    let (Some((op, fault)), Some(at)) = (fault_op(case.fault), case.fault.at()) else {
        return session(case, mutant, None).0;
    };
    let (dry, dry_ops) = session(case, mutant, None);
    let count = dry_ops.count(op);
    let nth = at.nth(count);
    let (mut run, ops) = session(case, mutant, Some((op, nth, fault)));
    let fired = ops.count(op) >= nth;
    let kinds = event_kinds(&dry.image);
    let kind_of = |seq: u64| {
        kinds
            .get(&seq)
            .map_or_else(|| format!("seq {seq}"), |k| (*k).to_owned())
    };
    let (event_before, first_at_risk) = match dry_ops.seqs_at(op, nth) {
        None => ("none".to_owned(), "none".to_owned()),
        Some((0, _)) => ("open".to_owned(), "open".to_owned()),
        Some((appended, durable)) if durable >= appended => (kind_of(appended), "none".to_owned()),
        Some((appended, durable)) => (kind_of(appended), kind_of(durable + 1)),
    };
    run.fault = Some(FaultReport {
        kind: case.fault.kind(),
        nth,
        count,
        fired,
        event_before,
        first_at_risk,
    });
    run
}

/// The kind of every event on `image`, by seq.
fn event_kinds(image: &SimStorage) -> HashMap<u64, &'static str> {
    let Ok(reader) = journal::Reader::open(
        Arc::new(image.clone()) as Arc<dyn journal::Storage>,
        journal::Limits::default(),
    ) else {
        return HashMap::new();
    };
    reader
        .map_while(Result::ok)
        .filter_map(|r| {
            let record = r.decode::<runtime::event::Record>().ok()?;
            Some((r.seq, record.event.kind()))
        })
        .collect()
}

/// One session of the case on a fresh disk, with `inject`'s fault; returns the run (no fault
/// report yet) and the operations it made.
fn session(case: &Case, mutant: Option<Mutant>, inject: Option<(Op, u64, Fault)>) -> (Run, Ops) {
    let storage = SimStorage::new();
    if let Some((op, nth, fault)) = inject {
        storage.inject(op, nth, fault);
    }
    let counted = Counted {
        inner: storage.clone(),
        journal: Arc::default(),
        ops: Arc::default(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds");
    let shared = Arc::new(Shared {
        epoch: rt.block_on(async { Instant::now() }),
        bodies: Mutex::default(),
        journal: OnceLock::new(),
        violations: Mutex::default(),
    });
    let (registry, hooks, config, approver) = session_parts(case, &shared, mutant);
    let mut play = Play {
        shared: &shared,
        approver: &approver,
        sent_steps: Vec::new(),
        cancels: Arc::new(Mutex::new(HashMap::new())),
    };
    rt.block_on(async {
        let Some(mut session) = open_session(&counted, &shared, registry, hooks, config) else {
            return;
        };
        for (t, steps) in case.turns.iter().enumerate() {
            if !play.turn(&mut session, t, steps).await {
                break;
            }
        }
        if !session.turn_open() {
            let _ = session.close().await;
        }
    });
    let image = surviving_image(&storage, case.fault);
    let bodies = shared.bodies.lock().unwrap().clone();
    let live_violations = shared.violations.lock().unwrap().clone();
    let cancels = play.cancels.lock().unwrap().clone();
    let ops = counted.ops.lock().unwrap().clone();
    let run = Run {
        image,
        bodies,
        steps: play.sent_steps,
        cancels,
        live_violations,
        fault: None,
        said: approver.said(),
    };
    (run, Ops(ops))
}

/// Opens the journal (id fixed, so the bytes are a function of the case) and a session on it,
/// and lets the simulated tool and the operation counter see the journal. `None` when either
/// fails to open (a fault can fire this early): the session then never starts.
fn open_session(
    counted: &Counted,
    shared: &Shared,
    registry: Arc<Registry>,
    hooks: Hooks,
    config: Config,
) -> Option<Session> {
    let options = Options {
        journal_id: Some([7; 16]),
        ..Options::default()
    };
    let (journal, _) = Journal::open(Arc::new(counted.clone()), options).ok()?;
    let session = Session::open(
        journal,
        registry,
        hooks,
        config,
        SessionOptions {
            session_id: Some("fuzz".into()),
            workspace: "/sim".into(),
            clock: Arc::new(ManualClock::new(1)),
        },
    )
    .ok()?;
    let _ = shared.journal.set(session.event_log().journal().clone());
    let _ = counted
        .journal
        .set(Arc::downgrade(session.event_log().journal()));
    Some(session)
}

/// What the disk holds after the run: if the fault cut the power, the unsynced tail is lost
/// as the case says.
fn surviving_image(storage: &SimStorage, fault: StorageFault) -> SimStorage {
    match fault {
        StorageFault::PowerLoss {
            granule_bytes,
            granules,
            zero,
            ..
        } if storage.is_powered_off() => storage.power_loss(if zero {
            TailLoss::ZeroFilled {
                granule_bytes,
                granules,
            }
        } else {
            TailLoss::Torn {
                granule_bytes,
                granules,
            }
        }),
        // Otherwise the process dies now: what it wrote survives, synced or not.
        _ => storage.process_crash(),
    }
}

/// The model's side of a session: plays the case's turns and steps, and notes what it sent
/// and when it cancelled, for the checks.
struct Play<'a> {
    shared: &'a Shared,
    approver: &'a SimPerson,
    sent_steps: Vec<SentStep>,
    cancels: Arc<Mutex<HashMap<(u32, u32), u64>>>,
}

/// How a step left its turn.
enum StepEnd {
    /// The step completed; the turn goes on to its next step.
    Completed,
    /// The step was cancelled and so was its turn; the next turn comes.
    TurnCancelled,
    /// The session refused to go on (the journal failed): no more turns.
    Stop,
}

impl Play<'_> {
    /// Plays turn `t`. False when the session refused to go on: no more turns.
    async fn turn(&mut self, session: &mut Session, t: usize, steps: &[StepSpec]) -> bool {
        let Ok(turn) = session.begin_turn(&format!("turn {t}")) else {
            return false;
        };
        for (s, step) in steps.iter().enumerate() {
            match self.step(session, turn, (t, s), step).await {
                StepEnd::Completed => {}
                StepEnd::TurnCancelled => return true,
                StepEnd::Stop => return false,
            }
        }
        !(session.turn_open() && session.end_turn(TurnOutcome::Completed).await.is_err())
    }

    /// Plays step `s` of turn `t` (the case's indices; `turn` is the session's number): sends
    /// its calls as one model response, cancelling it as the case says, and ends it.
    async fn step(
        &mut self,
        session: &mut Session,
        turn: u32,
        (t, s): (usize, usize),
        step: &StepSpec,
    ) -> StepEnd {
        let Ok(step_no) = session.begin_step() else {
            return StepEnd::Stop;
        };
        if step.cancel == Some(Cancel::AtStepStart) {
            return cancel_turn(session).await;
        }
        let calls: Vec<ModelCall> = step
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| model_call(&call_id(t, s, i), c))
            .collect();
        self.approver.plan_step(step, |i| call_id(t, s, i));
        self.sent_steps.push(sent_step(turn, step_no, step, &calls));
        let token = CancellationToken::new();
        let timer = self.arm_cancel(step.cancel, (turn, step_no), &token);
        let response = ModelResponse {
            text: format!("step {s}"),
            tool_calls: calls,
            stop_reason: if step.truncated {
                StopReason::Length
            } else {
                StopReason::ToolUse
            },
        };
        let outcome = session.run_batch_cancellable(response, token.clone()).await;
        if let Some(timer) = timer {
            timer.abort();
        }
        let Ok(batch) = outcome else {
            return StepEnd::Stop;
        };
        if let Some(sent) = self.sent_steps.last_mut() {
            sent.results = Some(batch);
        }
        if token.is_cancelled() {
            return cancel_turn(session).await;
        }
        if session.end_step(StepOutcome::Completed).is_err() {
            return StepEnd::Stop;
        }
        StepEnd::Completed
    }

    /// Arranges the step's cancel: now (after 0 ms), or by a timer task after its ms, noting
    /// in `cancels` when it fired. Returns the timer, to stop once the batch is done.
    fn arm_cancel(
        &self,
        cancel: Option<Cancel>,
        at: (u32, u32),
        token: &CancellationToken,
    ) -> Option<tokio::task::JoinHandle<()>> {
        match cancel {
            Some(Cancel::AfterMs(0)) => {
                self.cancels
                    .lock()
                    .unwrap()
                    .insert(at, self.shared.epoch.elapsed().as_millis() as u64);
                token.cancel();
                None
            }
            Some(Cancel::AfterMs(ms)) => {
                let (token, cancels, epoch) =
                    (token.clone(), self.cancels.clone(), self.shared.epoch);
                Some(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    cancels
                        .lock()
                        .unwrap()
                        .insert(at, epoch.elapsed().as_millis() as u64);
                    token.cancel();
                }))
            }
            _ => None,
        }
    }
}

/// Ends the current step and its turn as cancelled. `Stop` when the session refuses.
async fn cancel_turn(session: &mut Session) -> StepEnd {
    if session.end_step(StepOutcome::Cancelled).is_err()
        || session.end_turn(TurnOutcome::Cancelled).await.is_err()
    {
        return StepEnd::Stop;
    }
    StepEnd::TurnCancelled
}

/// The record of a step as sent: the session's numbers, and each call with what the case
/// made it; its results come later.
fn sent_step(turn: u32, step_no: u32, step: &StepSpec, calls: &[ModelCall]) -> SentStep {
    SentStep {
        turn,
        step: step_no,
        truncated: step.truncated,
        calls: calls
            .iter()
            .zip(&step.calls)
            .map(|(m, c)| (m.call_id.clone(), m.arguments.clone(), c.clone()))
            .collect(),
        results: None,
    }
}

/// Resumes a recovered journal for one more turn with one call, and closes it. Returns the
/// call ids whose bodies ran during the resume.
pub fn resume_one_turn(image: &SimStorage, case: &Case) -> Result<Vec<String>, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let shared = Arc::new(Shared {
            epoch: Instant::now(),
            bodies: Mutex::default(),
            journal: OnceLock::new(),
            violations: Mutex::default(),
        });
        let (registry, hooks, config, _) = session_parts(case, &shared, None);
        let storage: Arc<dyn journal::Storage> = Arc::new(image.clone());
        let (replay, _) =
            runtime::replay::replay_storage(storage.clone(), journal::Limits::default())
                .map_err(|e| e.to_string())?;
        if replay.open.is_none() || replay.closed {
            return Ok(Vec::new());
        }
        let (journal, _) = Journal::open(storage, Options::default()).map_err(|e| e.to_string())?;
        let mut session = Session::resume(
            journal,
            registry,
            hooks,
            config,
            SessionOptions {
                session_id: None,
                workspace: "/sim".into(),
                clock: Arc::new(ManualClock::new(2)),
            },
            &replay,
        )
        .map_err(|e| format!("resume refused a recovered journal: {e}"))?;
        session
            .begin_turn("after the crash")
            .map_err(|e| e.to_string())?;
        session.begin_step().map_err(|e| e.to_string())?;
        let spec = crate::case::CallSpec {
            kind: Kind::Ok,
            parallel: false,
            duration_ms: 1,
            reads: vec![],
            writes: vec![],
        };
        let results = session
            .run_batch(ModelResponse {
                text: "resumed".into(),
                tool_calls: vec![model_call("resumed", &spec)],
                stop_reason: StopReason::EndTurn,
            })
            .await
            .map_err(|e| e.to_string())?;
        if results.len() != 1 || results[0].is_error {
            return Err(format!("the resumed call failed: {results:?}"));
        }
        session
            .end_step(StepOutcome::Completed)
            .map_err(|e| e.to_string())?;
        session
            .end_turn(TurnOutcome::Completed)
            .await
            .map_err(|e| e.to_string())?;
        session.close().await.map_err(|e| e.to_string())?;
        let ran = shared
            .bodies
            .lock()
            .unwrap()
            .iter()
            .map(|b| b.call_id.clone())
            .collect();
        Ok(ran)
    })
}
