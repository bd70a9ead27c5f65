//! `tooljournal run --model` and `tooljournal resume` with a live model: turns of the agent
//! loop (`runtime::agent`) against a session, the model's text streamed to stdout as it
//! arrives, one line per call (the printer), the user's Ctrl-C as the turn's stop.
//!
//! Exit status: 0 when every turn ended (completed, stopped by the user, or ended by a provider
//! error that was shown); 1 when the session could not go on (no key or a refused one, a
//! server that cannot be reached or whose answers cannot be read, attempts exhausted, the
//! journal failing). A session that could not go on is not closed: once the cause is fixed,
//! `tooljournal resume --journal DIR --prompt ...` continues it.

use crate::approval::TerminalApprover;
use crate::config;
use crate::model_cli::{self, ModelFlags};
use crate::policy::Approve;
use crate::printer::Printer;
use crate::run::{self, Prepared, Setup};
use crate::CliError;
use journal::FsyncPolicy;
use runtime::model::{Model, ModelError, ModelErrorKind, ModelEvent};
use runtime::Session;
use runtime::{Agent, AgentEvent, AgentObserver, TurnEnd};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The user text of the turn a resume opens when it is given no `--prompt` and the session's
/// last turn was interrupted by the crash.
pub const CONTINUE_PROMPT: &str = "(resumed after an interruption) Continue the task you were \
working on. Check the effect of any call whose result is TOOL_OUTCOME_UNKNOWN before redoing it.";

/// A second Ctrl-C this soon after the first ends the session instead of only the turn.
const DOUBLE_PRESS_MS: u64 = 1_000;

/// The user's Ctrl-C: the first stops the running turn (its stream or batch), a second within
/// a second asks to end the session once the turn has stopped.
#[derive(Clone)]
pub struct Interrupts {
    state: Arc<Mutex<Presses>>,
}

struct Presses {
    token: CancellationToken,
    last: Option<Instant>,
    quit: bool,
}

impl Interrupts {
    pub fn new() -> Interrupts {
        Interrupts {
            state: Arc::new(Mutex::new(Presses {
                token: CancellationToken::new(),
                last: None,
                quit: false,
            })),
        }
    }

    /// Listens for SIGINT on `rt` from now on (SIGINT no longer ends the process).
    pub fn listen(&self, rt: &tokio::runtime::Runtime) {
        let me = self.clone();
        rt.spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                me.press();
            }
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Presses> {
        // Nothing a panic could leave half-done in three fields.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A Ctrl-C: stops the turn; the second within a second also asks to quit.
    pub fn press(&self) {
        let mut s = self.lock();
        let now = Instant::now();
        if s.last
            .is_some_and(|t| now.duration_since(t) < Duration::from_millis(DOUBLE_PRESS_MS))
        {
            s.quit = true;
        }
        s.last = Some(now);
        s.token.cancel();
    }

    /// The stop token of a new turn (a press before it does not stop it).
    pub fn turn_token(&self) -> CancellationToken {
        let mut s = self.lock();
        s.token = CancellationToken::new();
        s.token.clone()
    }

    pub fn quit_requested(&self) -> bool {
        self.lock().quit
    }
}

/// Shows the loop's events: streamed text on stdout as it arrives, failed attempts and their
/// retries on stderr; keeps the last failure to tell a shown provider error from a session
/// that cannot go on.
pub struct StreamOut {
    printer: Arc<Printer>,
    mid_line: bool,
    last_failure: Option<ModelError>,
    /// A step began and its request's sync has not been seen yet.
    request_pending: bool,
}

impl StreamOut {
    pub fn new(printer: Arc<Printer>) -> StreamOut {
        StreamOut {
            printer,
            mid_line: false,
            last_failure: None,
            request_pending: false,
        }
    }

    fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut out = std::io::stdout().lock();
        // A closed stdout stops the showing, never the session. What the model wrote is shown
        // as its bytes say (`runtime::display`: a delta is whole characters).
        let shown = runtime::display::visible(text);
        let _ = out.write_all(shown.as_bytes()).and_then(|()| out.flush());
        self.mid_line = !text.ends_with('\n');
    }

    /// Ends the line the streamed text left open.
    pub fn end_line(&mut self) {
        if self.mid_line {
            self.text("\n");
        }
    }

    /// Whether a turn that ended `Failed` leaves the session unable to go on: the request could
    /// not be made, the key was refused, the server could not be reached or read, or every
    /// attempt failed. A provider's refusal of this one request (400, 404, ...) is not.
    pub fn failure_is_fatal(&self) -> bool {
        match &self.last_failure {
            None => true,
            Some(e) => match e.kind {
                ModelErrorKind::Status => e.retryable() || matches!(e.status, Some(401 | 403)),
                // This request was too long; a shorter one can still go.
                ModelErrorKind::ContextOverflow => false,
                ModelErrorKind::Transport | ModelErrorKind::Malformed | ModelErrorKind::Config => {
                    true
                }
            },
        }
    }
}

impl AgentObserver for StreamOut {
    fn on(&mut self, event: AgentEvent<'_>) {
        match event {
            AgentEvent::Step { .. } => {
                self.last_failure = None;
                self.request_pending = true;
            }
            AgentEvent::Stream(event) => {
                if self.request_pending {
                    // The request was synced before it was sent: the previous step's verdicts
                    // are durable now, and shown before this step's text.
                    self.request_pending = false;
                    self.printer.show_durable();
                }
                match event {
                    ModelEvent::TextDelta(text) => self.text(text),
                    ModelEvent::Note(note) => {
                        self.end_line();
                        eprintln!("note: {}", runtime::display::visible(note));
                    }
                    _ => {}
                }
            }
            AgentEvent::AttemptFailed {
                attempt,
                error,
                retry_in_ms,
            } => {
                self.end_line();
                if let Some(ms) = retry_in_ms {
                    eprintln!("note: attempt {attempt} failed: {error}; retrying in {ms} ms");
                }
                self.last_failure = Some(error.clone());
            }
            AgentEvent::Response(_) => self.end_line(),
            AgentEvent::Results(_) => self.printer.show_durable(),
            AgentEvent::Reduced(reduced) => {
                self.end_line();
                let how = match (&reduced.summary, reduced.through_turn) {
                    (_, 0) => String::new(),
                    (Some(_), n) => format!("; turns 1-{n} replaced by the model's summary"),
                    (None, n) => format!("; turns 1-{n} left out"),
                };
                eprintln!(
                    "note: the context was reduced (about {} → {} tokens{how}); the journal \
                     keeps everything",
                    reduced.tokens_before, reduced.tokens_after
                );
            }
        }
    }
}

/// How a refused answer is shown: the provider's word and what it said, hidden characters
/// escaped (`runtime::display`).
pub fn refusal_line(refusal: &runtime::event::LlmRefusal) -> String {
    let said = match refusal.explanation.trim() {
        "" => String::new(),
        text => format!(": {}", runtime::display::visible(text)),
    };
    format!(
        "refused: the provider refused the answer ({}){said} (the turn ended)",
        runtime::display::visible(&refusal.reason)
    )
}

/// How a run of turns came out.
pub enum Outcome {
    /// Every turn ended, or the user asked to end the session (a double Ctrl-C).
    Ended,
    /// The session cannot go on: the message says why.
    Fatal(String),
}

/// Runs one turn and says what became of it; `Some(message)` when the session cannot go on.
pub async fn one_turn(
    agent: &mut Agent,
    session: &mut Session,
    prompt: &str,
    out: &mut StreamOut,
    interrupts: &Interrupts,
) -> Result<Option<String>, CliError> {
    let stop = interrupts.turn_token();
    let end = agent
        .run_turn(session, prompt, &stop, out)
        .await
        .map_err(|e| CliError::Failed(e.to_string()))?;
    out.end_line();
    match end {
        TurnEnd::Completed => {}
        TurnEnd::Stopped => eprintln!("(stopped: the turn was cancelled)"),
        TurnEnd::StepsExhausted => {
            eprintln!("note: the turn ended after its step limit (--max-steps); say how to go on")
        }
        TurnEnd::Failed(message) => {
            if out.failure_is_fatal() {
                return Ok(Some(message));
            }
            eprintln!("error: the provider refused the request: {message} (the turn ended)");
        }
        TurnEnd::Refused(refusal) => eprintln!("{}", refusal_line(&refusal)),
    }
    Ok(None)
}

/// Runs `prompts` as successive turns, then closes the session; a session that cannot go on is
/// left open for a resume.
fn play(
    prepared: Prepared,
    mut agent: Agent,
    prompts: Vec<String>,
    interrupts: Interrupts,
) -> Result<(), CliError> {
    let Prepared {
        rt,
        journal_dir,
        mut session,
        approver: _,
        servers,
        printer,
        tools: _,
        workspace: _,
        rerun: _,
        recovered: _,
    } = prepared;
    interrupts.listen(&rt);
    let mut out = StreamOut::new(printer.clone());
    let outcome = rt.block_on(async {
        let mut outcome = Ok(Outcome::Ended);
        for prompt in &prompts {
            outln!("> {prompt}")?;
            match one_turn(&mut agent, &mut session, prompt, &mut out, &interrupts).await {
                Ok(None) if interrupts.quit_requested() => break,
                Ok(None) => {}
                Ok(Some(message)) => {
                    outcome = Ok(Outcome::Fatal(message));
                    break;
                }
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        if let Ok(Outcome::Ended) = outcome {
            if let Err(e) = session.close().await {
                outcome = Err(CliError::Failed(e.to_string()));
            }
        } else {
            drop(session);
        }
        crate::run::shutdown(servers).await;
        outcome
    });
    printer.show_durable();
    match outcome? {
        Outcome::Ended => Ok(()),
        Outcome::Fatal(message) => Err(CliError::Failed(format!(
            "{message} (the session stays open: once fixed, continue it with `tooljournal \
             resume --journal {} --prompt ...`)",
            crate::location::shown(&journal_dir)
        ))),
    }
}

/// What `run --model` was asked to do.
pub struct RunArgs {
    pub prompts: Vec<String>,
    pub flags: ModelFlags,
    pub workspace: Option<PathBuf>,
    pub journal: Option<PathBuf>,
    pub max_parallel: usize,
    pub fsync: FsyncPolicy,
    pub approve: Approve,
    pub config: Option<PathBuf>,
    pub plan_mode: bool,
    /// The sandbox `bash` runs under (`--sandbox` and friends).
    pub sandbox: crate::sandbox_cli::SandboxFlags,
}

/// The person who answers questions under `--approve ask`.
fn person_for(approve: Approve) -> Option<Arc<dyn runtime::Approver>> {
    (approve == Approve::Ask).then(|| TerminalApprover::new() as Arc<dyn runtime::Approver>)
}

/// `tooljournal run --model PROVIDER:MODEL --prompt TEXT...`: a new session, one turn a prompt.
pub fn run(args: RunArgs) -> Result<(), CliError> {
    if args.prompts.is_empty() {
        return Err(CliError::Failed(
            "run --model needs at least one --prompt TEXT".into(),
        ));
    }
    let new = run::NewSession::at(args.workspace, args.journal)?;
    let journal_dir = new.journal_dir.clone();
    let loaded = config::load(args.config.as_deref())?;
    let section = &loaded.config.model;
    let spec = model_cli::spec(&args.flags, section, None)?.ok_or_else(|| {
        CliError::Failed(
            "no model: give --model PROVIDER:MODEL (or [model] in the configuration)".into(),
        )
    })?;
    // Before the journal is touched: a bad spec or a missing key leaves nothing behind.
    let model = model_cli::connect(&spec, &args.flags, section, None)?;
    let setup = Setup {
        journal: &journal_dir,
        person: person_for(args.approve),
        approve: args.approve,
        max_parallel: args.max_parallel,
        fsync: args.fsync,
        json: false,
        config: &loaded.config,
        config_file: loaded.file.clone(),
        plan_mode: args.plan_mode,
        sandbox: Some(crate::sandbox_cli::spec(
            &args.sandbox,
            &loaded.config.sandbox,
            None,
        )?),
    };
    let prepared = new.open(setup)?;
    outln!("session {}", prepared.session.session_id())?;
    outln!("journal: {}", crate::location::shown(&journal_dir))?;
    outln!("model: {spec}")?;
    let agent_config = model_cli::agent_config(
        &args.flags,
        section,
        &prepared.workspace,
        &prepared.tools,
        model.model(),
    )?;
    play(
        prepared,
        Agent::new(model, agent_config),
        args.prompts,
        Interrupts::new(),
    )
}

/// What a resume goes on with, when it is not given a transcript.
pub enum Live {
    /// A model, and turns for it.
    Go(Go),
    /// A model, but nothing to say to it: the last turn ended normally and no `--prompt`.
    NeedsPrompt(String),
    /// No model: neither `--model`, nor one the journal records, nor `[model]`.
    NoModel,
}

/// A resume's live model, its turns and the history it continues.
pub struct Go {
    model: Box<dyn Model>,
    spec: String,
    flags: ModelFlags,
    prompts: Vec<String>,
}

impl Go {
    /// Begins the first turn's user text with `note` (journaled in its `turn/start`).
    pub fn prepend_to_first_prompt(&mut self, note: &str) {
        if let Some(first) = self.prompts.first_mut() {
            *first = format!("{note}\n\n{first}");
        }
    }
}

/// Decides how a resume goes on: with `--prompt`s, or, when the crash interrupted the last
/// turn, with one turn of [`CONTINUE_PROMPT`]. Connects the model (a missing key fails here,
/// before the session is touched).
pub fn live(
    flags: &ModelFlags,
    prompts: Vec<String>,
    section: &crate::config::ModelSection,
    analysis: &recover::Analysis,
) -> Result<Live, CliError> {
    let Some(spec) = model_cli::spec(flags, section, analysis.replay.model.as_ref())? else {
        return Ok(Live::NoModel);
    };
    // Recovery closes an interrupted turn: a turn still open here is one it is closing now.
    let interrupted = analysis.replay.turns.last().is_some_and(|t| {
        matches!(
            t.outcome,
            None | Some(runtime::event::TurnOutcome::Interrupted)
        )
    });
    let prompts = match (prompts.is_empty(), interrupted) {
        (false, _) => prompts,
        (true, true) => vec![CONTINUE_PROMPT.to_owned()],
        (true, false) => return Ok(Live::NeedsPrompt(spec)),
    };
    let model = model_cli::connect(&spec, flags, section, analysis.replay.model.as_ref())?;
    Ok(Live::Go(Go {
        model,
        spec,
        flags: flags.clone(),
        prompts,
    }))
}

/// The rest of `tooljournal resume` with a live model: the session continues from the rebuilt
/// history with a new turn. `at_lock`: the journal as it ended under the writer lock, before the
/// resume wrote (another process may have finished a turn since the first look, and the model
/// must be sent the session `recover rebuild` would print now).
pub fn resume(
    prepared: Prepared,
    at_lock: &runtime::replay::SessionReplay,
    section: crate::config::ModelSection,
    go: Go,
) -> Result<(), CliError> {
    let analysis = recover::analyze(at_lock.clone(), &journal::ReadEnd::Clean, 0, false);
    // As the model last saw it: the latest reduction applies (I17).
    let (mut turns, compaction, calibration) = (
        analysis.turns(),
        analysis.replay.compaction.as_ref().map(|c| c.compaction()),
        analysis.replay.calibration.clone(),
    );
    if let Some(analysis) = &prepared.recovered {
        // Recovered under the lock just now: its results are the ones journaled.
        turns = analysis.turns();
    }
    crate::rerun::put_results(&mut turns, &prepared.rerun);
    outln!(
        "resuming session {} with {}",
        prepared.session.session_id(),
        go.spec
    )?;
    let agent_config = model_cli::agent_config(
        &go.flags,
        &section,
        &prepared.workspace,
        &prepared.tools,
        go.model.model(),
    )?;
    // The provider's count of a refused request goes on counting (`context/calibrated`).
    let agent = Agent::new(go.model, agent_config)
        .with_history(turns, compaction)
        .with_calibration(calibration);
    play(prepared, agent, go.prompts, Interrupts::new())
}

/// The person for a resume's approval (`--approve ask` keeps asking at the terminal).
pub fn resume_person(approve: Approve) -> Option<Arc<dyn runtime::Approver>> {
    person_for(approve)
}
