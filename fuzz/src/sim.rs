//! One simulated session: the runtime on an in-memory disk, on tokio's paused clock, with the
//! faults the case asks for. Everything that happens is a function of the case: the same case
//! gives the same bytes.

use crate::case::{CallSpec, Cancel, Case, StepSpec, StorageFault};
use crate::counted::{Counted, Ops};
use crate::parts::{model_call, session_parts};
use crate::person::{Said, SimPerson};
use crate::tools::Shared;
use crate::world::World;
use crate::Locked;
use crate::Mutant;
use journal::storage::{Fault, Op, TailLoss};
use journal::{Journal, Options, SimStorage};
use runtime::event::{ModelCall, ModelResponse, StepOutcome, StopReason, TurnOutcome};
use runtime::Hooks;
use runtime::ManualClock;
use runtime::Registry;
use runtime::{Config, Session, SessionOptions, ToolResult};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub(crate) use crate::parts::declared;
pub(crate) use crate::tools::{Body, BodyEnd};

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
    /// The simulated world as the session left it (and the case changed it after), with its
    /// history (outside the journal).
    pub world: World,
    /// What calls to tools other than the simulated ones declared they would touch, by call id
    /// (a user's tools, as the harness asked them): what a `TOOL_OUTCOME_UNKNOWN` names.
    pub declared: HashMap<String, runtime::event::Resources>,
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

    /// The body of `call_id`'s last attempt that started (what its result tells of); `None`
    /// if none started.
    pub fn body(&self, call_id: &str) -> Option<&Body> {
        self.bodies.iter().rfind(|b| b.call_id == call_id)
    }
}

fn call_id(t: usize, s: usize, i: usize) -> String {
    format!("t{t}s{s}c{i}")
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
/// runs twice: a dry run counts its operations, then the fault lands among them.
pub fn run(case: &Case, mutant: Option<Mutant>) -> Run {
    let (mut run, report) = with_fault(
        case.fault,
        |inject| session(case, mutant, inject),
        |run| &run.image,
    );
    run.fault = report;
    run
}

/// Runs a session (`session`, given the fault to inject) with `fault` inside it: a dry run
/// counts the session's operations (and notes the event each one follows), then the real run
/// has the fault at the case's point among them. The simulation is deterministic, so the faulted
/// run makes the same operations up to the fault. `image` is the disk a run left.
pub(crate) fn with_fault<R>(
    fault: StorageFault,
    mut session: impl FnMut(Option<(Op, u64, Fault)>) -> (R, Ops),
    image: impl Fn(&R) -> &SimStorage,
) -> (R, Option<FaultReport>) {
    let (Some((op, kind)), Some(at)) = (fault_op(fault), fault.at()) else {
        return (session(None).0, None);
    };
    let (dry, dry_ops) = session(None);
    let count = dry_ops.count(op);
    let nth = at.nth(count);
    let (run, ops) = session(Some((op, nth, kind)));
    let fired = ops.count(op) >= nth;
    let seqs = dry_ops.seqs_at(op, nth);
    let kinds = match seqs {
        Some((appended, durable)) => event_kinds(image(&dry), &[appended, durable + 1]),
        None => HashMap::new(),
    };
    let kind_of = |seq: u64| {
        kinds
            .get(&seq)
            .map_or_else(|| format!("seq {seq}"), |k| (*k).to_owned())
    };
    let (event_before, first_at_risk) = match seqs {
        None => ("none".to_owned(), "none".to_owned()),
        Some((0, _)) => ("open".to_owned(), "open".to_owned()),
        Some((appended, durable)) if durable >= appended => (kind_of(appended), "none".to_owned()),
        Some((appended, durable)) => (kind_of(appended), kind_of(durable + 1)),
    };
    let report = FaultReport {
        kind: fault.kind(),
        nth,
        count,
        fired,
        event_before,
        first_at_risk,
    };
    (run, Some(report))
}

/// The kind of the events on `image` whose seqs are among `seqs`, by seq (only those decoded).
fn event_kinds(image: &SimStorage, seqs: &[u64]) -> HashMap<u64, &'static str> {
    let Ok(reader) = journal::Reader::open(
        Arc::new(image.clone()) as Arc<dyn journal::Storage>,
        journal::Limits::default(),
    ) else {
        return HashMap::new();
    };
    reader
        .map_while(Result::ok)
        .filter(|r| seqs.contains(&r.seq))
        .filter_map(|r| {
            let record = r.decode::<runtime::event::Record>().ok()?;
            Some((r.seq, record.event.kind()))
        })
        .collect()
}

/// One session of the case on a fresh disk, with `inject`'s fault; returns the run (no fault
/// report yet) and the operations it made.
fn session(case: &Case, mutant: Option<Mutant>, inject: Option<(Op, u64, Fault)>) -> (Run, Ops) {
    let (storage, counted) = Counted::fresh(inject);
    // Cannot fail short of the process being out of resources, where no case could run.
    #[allow(clippy::expect_used)]
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds");
    let shared = Shared::new(
        rt.block_on(async { Instant::now() }),
        World::new(&case.initial),
        mutant,
    );
    let (registry, hooks, config, approver) = session_parts(case, &shared, mutant, false);
    let mut play = Play {
        shared: &shared,
        approver: &approver,
        sent_steps: Vec::new(),
        cancels: Arc::new(Mutex::new(HashMap::new())),
    };
    rt.block_on(async {
        let Some(mut session) = open_session(case, &counted, &shared, registry, hooks, config)
        else {
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
    let mut world = shared.world.locked().clone();
    if let Some(change) = case.change_back {
        world.change_back(change);
    }
    let bodies = shared.bodies.locked().clone();
    let live_violations = shared.violations.locked().clone();
    let cancels = play.cancels.locked().clone();
    let ops = counted.ops.locked().clone();
    let run = Run {
        image,
        bodies,
        steps: play.sent_steps,
        cancels,
        live_violations,
        fault: None,
        said: approver.said(),
        world,
        declared: HashMap::new(),
    };
    (run, Ops(ops))
}

/// Opens the journal (id fixed, so the bytes are a function of the case) and a session on it,
/// and lets the simulated tool and the operation counter see the journal. `None` when either
/// fails to open (a fault can fire this early): the session then never starts.
fn open_session(
    case: &Case,
    counted: &Counted,
    shared: &Shared,
    registry: Arc<Registry>,
    hooks: Hooks,
    config: Config,
) -> Option<Session> {
    let (journal, _) = Journal::open(Arc::new(counted.clone()), journal_options(case)).ok()?;
    let session = Session::open(
        journal,
        registry,
        hooks,
        config,
        SessionOptions {
            session_id: Some("fuzz".into()),
            workspace: crate::tools::WORKSPACE.into(),
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

/// How every journal of `case` is opened: its id fixed (so the bytes are a function of the case)
/// and zero-filled ahead as far as the case says.
pub(crate) fn journal_options(case: &Case) -> Options {
    Options {
        journal_id: Some([7; 16]),
        preallocate_bytes: case.preallocate_bytes,
        ..Options::default()
    }
}

/// What the disk holds after the run: if the fault cut the power, the unsynced tail is lost
/// as the case says.
pub(crate) fn surviving_image(storage: &SimStorage, fault: StorageFault) -> SimStorage {
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
pub(crate) enum StepEnd {
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
        end_batch(session, outcome, &token, self.sent_steps.last_mut()).await
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
                    .locked()
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
                        .locked()
                        .insert(at, epoch.elapsed().as_millis() as u64);
                    token.cancel();
                }))
            }
            _ => None,
        }
    }
}

/// Ends a batch the model's side ran (`outcome`, stopped by `token` or not): its results noted
/// in `sent`, then its step ended (and its turn, when the user stopped it). `Stop` when the
/// session refused to go on.
pub(crate) async fn end_batch(
    session: &mut Session,
    outcome: Result<Vec<ToolResult>, runtime::RuntimeError>,
    token: &CancellationToken,
    sent: Option<&mut SentStep>,
) -> StepEnd {
    let Ok(results) = outcome else {
        return StepEnd::Stop;
    };
    if let Some(sent) = sent {
        sent.results = Some(results);
    }
    if token.is_cancelled() {
        return cancel_turn(session).await;
    }
    if session.end_step(StepOutcome::Completed).is_err() {
        return StepEnd::Stop;
    }
    StepEnd::Completed
}

/// Ends the current step and its turn as cancelled. `Stop` when the session refuses.
pub(crate) async fn cancel_turn(session: &mut Session) -> StepEnd {
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
