//! Runs one case of a user's harness: the session on the simulated disk with the case's fault
//! (twice when it has one: a dry run counts the I/O operations), the worlds reset before it and
//! crashed after it as the fault says; then the resume the case plans.

use super::case::{Approval, CancelAt, Resume, Step, UserCase};
use super::observe::{AnySnapshot, Crash};
use super::stop::Stop;
use super::watch::{AsksWhenPlanned, Ground, Watched};
use super::{Clock, Harness};
use crate::case::{CallSpec, Kind};
use crate::counted::{Counted, Ops};
use crate::parts::MemSpill;
use crate::person::SimPerson;
use crate::sim::{
    cancel_turn, end_batch, surviving_image, with_fault, FaultReport, Run, SentStep, StepEnd,
};
use crate::tools::Body;
use crate::world::World;
use journal::storage::{Fault, Op};
use journal::{Journal, Options, ReadEnd, SimStorage};
use recover::{analyze_probing, Analysis};
use recover::{choose_reruns, recovery_events};
use runtime::event::{
    AskAnswer, ModelCall, ModelResponse, RerunPolicy, Resources, StopReason, TurnOutcome,
};
use runtime::Hooks;
use runtime::ManualClock;
use runtime::Registry;
use runtime::{Config, Session, SessionOptions};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How far a case's journal is zero-filled ahead: 4 KiB, as most of the campaign's cases, which
/// the records outgrow (zeros written ahead again as they pass). The default's MiB costs every
/// read of a case's journal a MiB of zeros.
const PREALLOCATE_BYTES: u64 = 4096;

/// Results longer than this are spilled (to the harness's store in memory), in bytes.
const MODEL_INLINE_BYTES_MAX: usize = 4096;

/// What one session of a case left.
pub(crate) struct Played {
    /// What the invariants are checked on (no fault report yet).
    pub(crate) run: Run,
    /// Each world's snapshot before the session.
    pub(crate) initial: Vec<AnySnapshot>,
    /// How the session ended abruptly, if it did.
    pub(crate) crash: Option<Crash>,
}

/// Runs `case`'s session with its fault; the fault's report, if it drew one. `stop` reached
/// (the campaign's deadline) stops the session as the user's stop would, and starts no other.
pub(crate) fn first_run(
    harness: &Harness,
    case: &UserCase,
    stop: &Stop,
) -> (Played, Option<FaultReport>) {
    let (mut played, report) = with_fault(
        case.fault,
        |inject| session(harness, case, inject, stop),
        |played| &played.run.image,
    );
    played.run.fault = report.clone();
    (played, report)
}

/// The tokio runtime a session runs on.
#[allow(clippy::expect_used)]
fn tokio_runtime(clock: Clock) -> tokio::runtime::Runtime {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    if clock == Clock::Simulated {
        builder.start_paused(true);
    }
    // A current-thread runtime with its drivers builds unless the process is out of resources,
    // where nothing the harness could do would help.
    builder
        .build()
        .expect("a current-thread tokio runtime builds")
}

/// What every session of a case is wired with.
struct Parts {
    registry: Arc<Registry>,
    hooks: Hooks,
    config: Config,
    person: Arc<SimPerson>,
    asks: Arc<AsksWhenPlanned>,
}

/// The registry (every tool watched by `ground`), hooks and config of a session of `case`.
fn parts(harness: &Harness, parallel_max: usize, ground: &Arc<Ground>) -> Result<Parts, String> {
    let mut registry = Registry::new();
    let mut tools: Vec<_> = harness
        .tools
        .iter()
        .map(|r| (r.tool.clone(), r.source.clone()))
        .collect();
    if let Some(factory) = &harness.factory {
        tools.extend(factory()?);
    }
    for (tool, source) in tools {
        let watched = Watched {
            inner: tool,
            ground: ground.clone(),
        };
        registry
            .register(Arc::new(watched), source)
            .map_err(|e| format!("the harness's tools do not register: {e}"))?;
    }
    let person = Arc::new(SimPerson::default());
    let asks = Arc::new(AsksWhenPlanned::default());
    let hooks = Hooks {
        pre_execute: vec![asks.clone()],
        approver: Some(person.clone()),
        ..Hooks::default()
    };
    let failpoints = runtime::Failpoints::armable();
    if let Some(name) = harness.mutant.and_then(crate::Mutant::failpoint) {
        failpoints.enable(name);
    }
    let config = Config {
        parallel_max,
        timeout_ms: harness.settings.timeout_ms,
        cancel_grace_ms: harness.settings.cancel_grace_ms,
        model_inline_bytes_max: MODEL_INLINE_BYTES_MAX,
        spill: Some(Arc::new(MemSpill::new(false))),
        failpoints,
        question_timeout_ms: Some(harness.settings.question_timeout_ms),
        ..Config::default()
    };
    Ok(Parts {
        registry: Arc::new(registry),
        hooks,
        config,
        person,
        asks,
    })
}

fn options(clock_start_ms: u64) -> SessionOptions {
    SessionOptions {
        session_id: Some("harness".into()),
        workspace: "/harness".into(),
        clock: Arc::new(ManualClock::new(clock_start_ms)),
    }
}

/// One session of `case` on a fresh disk, with `inject`'s fault, the worlds reset first; none
/// once `stop` is cancelled (neither the worlds reset nor the tools made).
fn session(
    harness: &Harness,
    case: &UserCase,
    inject: Option<(Op, u64, Fault)>,
    stop: &Stop,
) -> (Played, Ops) {
    // Once stopped, nothing of the case is checked: the worlds are not worth resetting.
    for w in harness.worlds.iter().filter(|_| !stop.is_stopped()) {
        w.world.reset();
    }
    let initial: Vec<AnySnapshot> = harness.worlds.iter().map(|w| w.world.snapshot()).collect();
    let (storage, counted) = Counted::fresh(inject);
    let rt = tokio_runtime(harness.settings.clock);
    let ground = Ground::new(
        rt.block_on(async { tokio::time::Instant::now() }),
        storage.clone(),
    );
    let mut live_violations = Vec::new();
    let mut steps = Vec::new();
    let mut said = HashMap::new();
    let mut declared = HashMap::new();
    match parts_unless(stop, || parts(harness, case.parallel_max, &ground)) {
        None => {}
        Some(Err(e)) => live_violations.push(format!("harness: {e}")),
        Some(Ok(parts)) => {
            declared = declared_resources(case, &parts.registry);
            let mut play = Play {
                ground: &ground,
                parts: &parts,
                stop,
                sent: Vec::new(),
            };
            rt.block_on(play.session(&counted, case));
            steps = play.sent;
            said = parts.person.said();
        }
    }
    // Nothing of the session runs after this: its tasks stop with the runtime.
    drop(rt);
    let ops = Ops(counted.ops.lock().map(|o| o.clone()).unwrap_or_default());
    let crash = inject.and_then(|(op, nth, fault)| {
        if storage.is_powered_off() {
            Some(Crash::PowerLoss)
        } else {
            (ops.count(op) >= nth && !matches!(fault, Fault::ShortWrite { .. }))
                .then_some(Crash::Process)
        }
    });
    if let Some(crash) = crash {
        for w in &harness.worlds {
            w.world.crash(crash);
        }
    }
    let image = surviving_image(&storage, case.fault);
    let bodies = ground.bodies.lock().map(|b| b.clone()).unwrap_or_default();
    live_violations.extend(
        ground
            .violations
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default(),
    );
    let cancels = ground.cancels.lock().map(|c| c.clone()).unwrap_or_default();
    let run = Run {
        image,
        bodies,
        steps,
        cancels,
        live_violations,
        fault: None,
        said,
        world: World::default(),
        declared,
    };
    (
        Played {
            run,
            initial,
            crash,
        },
        ops,
    )
}

/// `make()`, unless the campaign is already stopped.
fn parts_unless<T>(stop: &Stop, make: impl FnOnce() -> T) -> Option<T> {
    (!stop.is_stopped()).then(make)
}

/// What each call whose arguments parse declares it will touch, as its tool says.
fn declared_resources(case: &UserCase, registry: &Registry) -> HashMap<String, Resources> {
    case.calls()
        .filter_map(|(_, call)| {
            let entry = registry.lookup(&call.tool)?;
            let args = runtime::parse_args(&call.arguments).ok()?;
            Some((call.id.clone(), entry.tool.resources(&args)))
        })
        .collect()
}

/// The model's side of a session.
struct Play<'a> {
    ground: &'a Arc<Ground>,
    parts: &'a Parts,
    /// The campaign's deadline: every step's stop is its child, and no turn or step begins
    /// once it is cancelled.
    stop: &'a Stop,
    sent: Vec<SentStep>,
}

impl Play<'_> {
    /// Opens the journal and the session, plays every turn, and closes it if it can.
    async fn session(&mut self, counted: &Counted, case: &UserCase) {
        let opts = Options {
            journal_id: Some([9; 16]),
            preallocate_bytes: PREALLOCATE_BYTES,
            ..Options::default()
        };
        let Ok((journal, _)) = Journal::open(Arc::new(counted.clone()), opts) else {
            return;
        };
        let parts = self.parts;
        let Ok(mut session) = Session::open(
            journal,
            parts.registry.clone(),
            parts.hooks.clone(),
            parts.config.clone(),
            options(1),
        ) else {
            return;
        };
        let _ = self
            .ground
            .journal
            .set(session.event_log().journal().clone());
        let _ = counted
            .journal
            .set(Arc::downgrade(session.event_log().journal()));
        for turn in &case.turns {
            if self.stop.is_stopped() || session.begin_turn(&turn.user).is_err() {
                return;
            }
            for step in &turn.steps {
                if self.stop.is_stopped() {
                    return;
                }
                match self.step(&mut session, step).await {
                    StepEnd::Completed => {}
                    StepEnd::TurnCancelled => break,
                    StepEnd::Stop => return,
                }
                if step.stop_reason == StopReason::EndTurn {
                    break;
                }
            }
            if session.turn_open() && session.end_turn(TurnOutcome::Completed).await.is_err() {
                return;
            }
        }
        let _ = session.close().await;
    }

    /// Plays one step: the response, its approvals and its cancel.
    async fn step(&mut self, session: &mut Session, step: &Step) -> StepEnd {
        let Ok(step_no) = session.begin_step() else {
            return StepEnd::Stop;
        };
        let at = (session.turn(), step_no);
        if step.cancel == Some(CancelAt::StepStart) {
            return cancel_turn(session).await;
        }
        self.plan_approvals(step);
        self.sent.push(sent_step(at, step));
        let token = self.stop.child_token();
        let at_body = match step.cancel {
            Some(CancelAt::AtBody(n)) => Some(n),
            _ => None,
        };
        self.ground.arm(at, token.clone(), at_body);
        let timer = self.arm_timer(step.cancel, at, &token);
        let response = ModelResponse {
            text: step.text.clone(),
            tool_calls: step
                .calls
                .iter()
                .map(|c| ModelCall {
                    call_id: c.id.clone(),
                    name: c.tool.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
            stop_reason: step.stop_reason,
        };
        let outcome = session.run_batch_cancellable(response, token.clone()).await;
        if let Some(timer) = timer {
            timer.abort();
        }
        self.ground.disarm();
        end_batch(session, outcome, &token, self.sent.last_mut()).await
    }

    /// Tells the listener which calls to ask about, and the person what to answer.
    fn plan_approvals(&self, step: &Step) {
        let planned: Vec<(String, Option<AskAnswer>)> = step
            .calls
            .iter()
            .filter_map(|c| {
                let answer = match c.approval? {
                    Approval::Allow => Some(AskAnswer::AllowedOnce),
                    Approval::Deny => Some(AskAnswer::Denied),
                    Approval::Expire => Some(AskAnswer::Expired),
                    Approval::Silent => None,
                };
                Some((c.id.clone(), answer))
            })
            .collect();
        if let Ok(mut asked) = self.parts.asks.planned.lock() {
            *asked = planned.iter().map(|(id, _)| id.clone()).collect();
        }
        let questions = step
            .calls
            .iter()
            .filter_map(|c| Some((c.id.clone(), c.answer.clone()?)));
        self.parts.person.plan_answers(planned, questions);
    }

    /// A cancel after some ms: now (0), or by a timer task.
    fn arm_timer(
        &self,
        cancel: Option<CancelAt>,
        at: (u32, u32),
        token: &CancellationToken,
    ) -> Option<tokio::task::JoinHandle<()>> {
        match cancel {
            Some(CancelAt::AfterMs(0)) => {
                self.ground.note_cancel(at);
                token.cancel();
                None
            }
            Some(CancelAt::AfterMs(ms)) => {
                let (token, ground) = (token.clone(), self.ground.clone());
                Some(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    ground.note_cancel(at);
                    token.cancel();
                }))
            }
            _ => None,
        }
    }
}

/// A step as sent, for the invariants: each call a user's call.
fn sent_step((turn, step): (u32, u32), s: &Step) -> SentStep {
    SentStep {
        turn,
        step,
        truncated: s.stop_reason == StopReason::Length,
        calls: s
            .calls
            .iter()
            .map(|c| {
                let spec = CallSpec {
                    kind: Kind::User {
                        asked: c.approval.is_some(),
                        question: c.tool == "ask",
                    },
                    parallel: false,
                    duration_ms: 0,
                    reads: Vec::new(),
                    writes: Vec::new(),
                    idempotent: false,
                    flaky: None,
                };
                (c.id.clone(), c.arguments.clone(), spec)
            })
            .collect(),
        results: None,
    }
}

/// What a resume that runs calls again did.
pub(crate) struct Resumed {
    /// The analysis the choice was made on.
    pub(crate) analysis: Analysis,
    /// The calls chosen to run again.
    pub(crate) chosen: Vec<String>,
    /// The bodies that began during the resume.
    pub(crate) bodies: Vec<Body>,
    /// The tools that may run a call of unknown outcome again (retry-safe or read-only).
    pub(crate) safe_tools: Vec<String>,
}

/// `tooljournal resume --rerun POLICY` on `image` (the journal as the crash left it; appended
/// to): recovery, the calls the policy picks run again, the session closed. `Ok(None)`: no turn
/// was open, nothing to resume, or `stop` was cancelled first (cancelled later, it stops the
/// calls run again as the user's stop would). The worlds go on as the crash left them.
pub(crate) fn resume(
    harness: &Harness,
    case: &UserCase,
    image: &SimStorage,
    policy: RerunPolicy,
    stop: &Stop,
) -> Result<Option<Resumed>, String> {
    if stop.is_stopped() {
        return Ok(None);
    }
    let storage: Arc<dyn journal::Storage> = Arc::new(image.clone());
    let (replay, end) =
        runtime::replay::replay_storage(storage.clone(), journal::Limits::default())
            .map_err(|e| format!("the journal does not replay: {e}"))?;
    if replay.open.is_none() || replay.closed || replay.open_turn().is_none() {
        return Ok(None);
    }
    let dropped = match &end {
        ReadEnd::TornTail(torn) => torn.dropped_bytes,
        ReadEnd::Clean => 0,
        ReadEnd::Corrupt(c) => return Err(format!("the journal is corrupt: {c}")),
    };
    let rt = tokio_runtime(harness.settings.clock);
    let ground = Ground::new(
        rt.block_on(async { tokio::time::Instant::now() }),
        SimStorage::new(),
    );
    let parts = parts(harness, case.parallel_max, &ground)?;
    let analysis = analyze_probing(replay.clone(), &end, dropped, false, None);
    let chosen = choose_reruns(
        &analysis,
        |tool| parts.registry.nature(tool),
        policy,
        replay.plan_mode,
    );
    let events = recovery_events(&analysis, &chosen, policy);
    rt.block_on(async {
        let opts = Options {
            preallocate_bytes: PREALLOCATE_BYTES,
            ..Options::default()
        };
        let (journal, _) = Journal::open(storage, opts).map_err(|e| e.to_string())?;
        let mut session = Session::resume_recovering(
            journal,
            parts.registry.clone(),
            parts.hooks.clone(),
            parts.config.clone(),
            options(2),
            &replay,
            events,
        )
        .map_err(|e| format!("the re-running resume was refused: {e}"))?;
        let _ = ground.journal.set(session.event_log().journal().clone());
        session
            .run_rerun(stop.child_token())
            .await
            .map_err(|e| format!("running again failed: {e}"))?;
        session
            .close()
            .await
            .map_err(|e| format!("the resumed session does not close: {e}"))
    })?;
    drop(rt);
    let bodies = ground.bodies.lock().map(|b| b.clone()).unwrap_or_default();
    let safe_tools = parts
        .registry
        .descriptors()
        .into_iter()
        .map(|d| d.name)
        .filter(|name| {
            parts
                .registry
                .lookup(name)
                .is_some_and(|e| e.tool.is_retry_safe() || e.tool.is_read_only())
        })
        .collect();
    Ok(Some(Resumed {
        analysis,
        chosen: chosen.into_iter().map(|c| c.call_id).collect(),
        bodies,
        safe_tools,
    }))
}

/// Whether `case` resumes, and how.
pub(crate) fn rerun_policy(case: &UserCase) -> Option<RerunPolicy> {
    match case.resume {
        Resume::No => None,
        Resume::Rerun(policy) => Some(policy),
    }
}
