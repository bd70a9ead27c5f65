//! The resumes a case may end with, on what its run left behind, each followed by one more turn
//! with one new call: after recovery (the crashed run's calls never run again), or on the
//! journal as the crash left it, running again what a `--rerun` policy picks, as
//! `tooljournal resume --rerun` does (`recover::rerun` chooses on the analysis,
//! `Session::resume_recovering` appends the recovery, `Session::run_rerun` runs the calls).

use crate::case::{CallSpec, Case, Kind};
use crate::parts::{model_call, session_parts};
use crate::sim::journal_options;
use crate::tools::{Body, Shared};
use crate::world::World;
use crate::Locked;
use crate::Mutant;
use journal::{Journal, ReadEnd, SimStorage};
use recover::Prober;
use recover::{analyze_probing, Analysis};
use recover::{choose_reruns, recovery_events};
use runtime::event::{CallRef, ModelResponse, RerunPolicy, StepOutcome, StopReason, TurnOutcome};
use runtime::ManualClock;
use runtime::{RuntimeError, Session, SessionOptions, ToolResult};
use std::sync::Arc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The id of the call the resumed session's extra turn makes.
pub(crate) const RESUMED_CALL: &str = "resumed";

/// What a re-running resume did.
#[derive(Debug, Default)]
pub(crate) struct Resumed {
    /// The analysis the re-run choice was made from; `None` when no turn was open (the session
    /// then resumed as it was) or there was no session to resume.
    pub analysis: Option<Analysis>,
    /// The calls chosen to run again, in the order `choose` gave them.
    pub chosen: Vec<CallRef>,
    /// The ids of the chosen calls whose tool the resume's registry declares retry-safe (the
    /// runtime may run them again within the resume when they fail retryably).
    pub retry_safe: Vec<String>,
    /// What `run_rerun` returned: each call run again with its one result.
    pub results: Vec<(CallRef, ToolResult)>,
    /// The bodies that ran during the resume, in the order they started.
    pub bodies: Vec<Body>,
    /// The world after the resume.
    pub world: World,
    /// A session was resumed (false: the journal holds none, or a closed one).
    pub went_on: bool,
    /// Why the session stopped while running calls again, if it did (its spill store failed,
    /// as the case's does): the journal is left as a crash leaves it, and there is no extra
    /// turn.
    pub stopped: Option<String>,
}

fn paused_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| e.to_string())
}

fn options() -> SessionOptions {
    SessionOptions {
        session_id: None,
        workspace: crate::tools::WORKSPACE.into(),
        clock: Arc::new(ManualClock::new(2)),
    }
}

/// Resumes a recovered journal for one more turn with one call, and closes it. Returns the
/// call ids whose bodies ran during the resume.
pub(crate) fn resume_one_turn(
    image: &SimStorage,
    world: &World,
    case: &Case,
) -> Result<Vec<String>, String> {
    let rt = paused_runtime()?;
    rt.block_on(async {
        let shared = Shared::new(Instant::now(), world.clone(), None);
        let (registry, hooks, config, _) = session_parts(case, &shared, None, false);
        let storage: Arc<dyn journal::Storage> = Arc::new(image.clone());
        let (replay, _) =
            runtime::replay::replay_storage(storage.clone(), journal::Limits::default())
                .map_err(|e| e.to_string())?;
        if replay.open.is_none() || replay.closed {
            return Ok(Vec::new());
        }
        let (journal, _) =
            Journal::open(storage, journal_options(case)).map_err(|e| e.to_string())?;
        let session = Session::resume(journal, registry, hooks, config, options(), &replay)
            .map_err(|e| format!("resume refused a recovered journal: {e}"))?;
        one_more_turn(session).await?;
        let ran = shared
            .bodies
            .locked()
            .iter()
            .map(|b| b.call_id.clone())
            .collect();
        Ok(ran)
    })
}

/// Resumes the journal `image` holds as the crash left it (appending to it), as
/// `tooljournal resume --rerun POLICY` does: if a turn is open, the analysis (probing with
/// `prober`, as a resume probes its workspace), the calls `policy` picks, the recovery that
/// leaves them open, the resume that appends it, and the calls run again; otherwise a plain
/// resume. Then one more turn, and the session closes. `mutant`: the simulation's own, if any.
pub(crate) fn resume_rerunning(
    image: &SimStorage,
    world: &World,
    case: &Case,
    policy: RerunPolicy,
    prober: Option<&Prober>,
    mutant: Option<Mutant>,
) -> Result<Resumed, String> {
    let rt = paused_runtime()?;
    rt.block_on(async {
        let shared = Shared::new(Instant::now(), world.clone(), mutant);
        let sim_lies = shared.plants(Mutant::RerunsUnknownNonIdempotent);
        let (registry, hooks, config, _) = session_parts(case, &shared, None, sim_lies);
        let storage: Arc<dyn journal::Storage> = Arc::new(image.clone());
        let (replay, end) =
            runtime::replay::replay_storage(storage.clone(), journal::Limits::default())
                .map_err(|e| e.to_string())?;
        let mut resumed = Resumed::default();
        if replay.open.is_none() || replay.closed {
            resumed.world = world.clone();
            return Ok(resumed);
        }
        let dropped = match &end {
            ReadEnd::TornTail(torn) => torn.dropped_bytes,
            ReadEnd::Clean => 0,
            ReadEnd::Corrupt(c) => return Err(format!("the journal is corrupt: {c}")),
        };
        // The mutant: the policy asked for lost before the runtime sees it.
        let policy = if shared.plants(Mutant::RerunsUnknownUnderNotStarted) {
            RerunPolicy::Safe
        } else {
            policy
        };
        let session = if replay.open_turn().is_some() {
            let analysis = analyze_probing(replay.clone(), &end, dropped, false, prober);
            resumed.chosen = choose_reruns(
                &analysis,
                |tool| registry.nature(tool),
                policy,
                replay.plan_mode,
            );
            resumed.retry_safe = analysis
                .calls
                .iter()
                .filter(|c| resumed.chosen.contains(&c.call))
                .filter(|c| registry.nature(&c.tool).is_some_and(|n| n.retry_safe))
                .map(|c| c.call.call_id.clone())
                .collect();
            let events = recovery_events(&analysis, &resumed.chosen, policy);
            resumed.analysis = Some(analysis);
            let (journal, _) =
                Journal::open(storage, journal_options(case)).map_err(|e| e.to_string())?;
            let mut session = Session::resume_recovering(
                journal,
                registry,
                hooks,
                config,
                options(),
                &replay,
                events,
            )
            .map_err(|e| format!("a re-running resume was refused: {e}"))?;
            match session.run_rerun(CancellationToken::new()).await {
                Ok(results) => resumed.results = results,
                Err(RuntimeError::Spill(why)) if case.spill_fails => {
                    resumed.stopped = Some(why);
                    resumed.bodies = shared.bodies.locked().clone();
                    resumed.world = shared.world.locked().clone();
                    return Ok(resumed);
                }
                Err(e) => return Err(format!("running again failed: {e}")),
            }
            session
        } else {
            let (journal, _) =
                Journal::open(storage, journal_options(case)).map_err(|e| e.to_string())?;
            Session::resume(journal, registry, hooks, config, options(), &replay)
                .map_err(|e| format!("resume refused a journal with no open turn: {e}"))?
        };
        one_more_turn(session).await?;
        resumed.went_on = true;
        resumed.bodies = shared.bodies.locked().clone();
        resumed.world = shared.world.locked().clone();
        Ok(resumed)
    })
}

/// One more turn with one call that writes nothing, then the session closes.
async fn one_more_turn(mut session: Session) -> Result<(), String> {
    session
        .begin_turn("after the crash")
        .map_err(|e| e.to_string())?;
    session.begin_step().map_err(|e| e.to_string())?;
    let spec = CallSpec {
        kind: Kind::Ok,
        parallel: false,
        duration_ms: 1,
        reads: vec![],
        writes: vec![],
        idempotent: false,
        flaky: None,
    };
    let results = session
        .run_batch(ModelResponse {
            text: "resumed".into(),
            tool_calls: vec![model_call(RESUMED_CALL, &spec)],
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
    session.close().await.map_err(|e| e.to_string())
}
