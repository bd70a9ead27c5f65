//! `tooljournal run` and `tooljournal resume`: a scripted session on a real workspace, every
//! transition journaled.

use crate::config::{self, FileConfig};
use crate::policy;
use crate::printer::Printer;
use crate::CliError;
use journal::{FsStorage, FsyncPolicy, Storage};
use runtime::event::{AskAnswer, CallRef, Record};
use runtime::hooks::{CallInfo, Decision, Observer, PreExecute};
use runtime::replay::{replay_storage, SessionReplay};
use runtime::transcript::{
    consumed_lines, drive, read_script, DriveReport, ScriptedApprover, ScriptedModel,
};
use runtime::{BuildError, LockedJournal, Session, SessionBuilder};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Most concurrency-safe calls at once, unless the user or the journal says otherwise.
pub const PARALLEL_MAX_DEFAULT: usize = 10;

/// How `ask` decisions not answered by the script are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Approve {
    Allow,
    Deny,
}

pub struct RunArgs {
    pub script: PathBuf,
    pub workspace: Option<PathBuf>,
    pub journal: Option<PathBuf>,
    pub max_parallel: usize,
    pub fsync: FsyncPolicy,
    pub approve: Approve,
    pub json: bool,
    /// The configuration file (MCP servers, tool exposure); default: the user's, if any.
    pub config: Option<PathBuf>,
    /// Start in plan mode.
    pub plan_mode: bool,
}

/// Where sessions live by default: `$XDG_STATE_HOME/tooljournal/sessions`, else
/// `~/.local/state/tooljournal/sessions`.
pub fn state_root() -> Result<PathBuf, CliError> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").ok_or_else(|| {
                CliError::Failed("neither XDG_STATE_HOME nor HOME is set: give --journal".into())
            })?;
            PathBuf::from(home).join(".local/state")
        }
    };
    Ok(base.join("tooljournal/sessions"))
}

fn failed(what: impl std::fmt::Display) -> CliError {
    CliError::Failed(what.to_string())
}

/// With `--approve deny`, `bash` needs an approval (which the script may still give).
struct BashNeedsApproval;

impl PreExecute for BashNeedsApproval {
    fn name(&self) -> &str {
        "approve-deny"
    }
    fn decide(&self, call: &CallInfo) -> Decision {
        if call.tool == "bash" {
            Decision::Ask {
                reason: format!(
                    "run `{}`?",
                    call.args.str("command").unwrap_or("(no command)")
                ),
            }
        } else {
            Decision::Pass
        }
    }
}

struct Prepared {
    rt: tokio::runtime::Runtime,
    journal_dir: PathBuf,
    session: Session,
    approver: Arc<ScriptedApprover>,
    servers: Vec<mcp::McpServer>,
    printer: Arc<Printer>,
}

/// What a session is set up with, beyond where it lives.
struct Setup<'a> {
    approve: Approve,
    max_parallel: usize,
    /// Only recorded here (`session/policy`): the journal was opened with it already.
    fsync: FsyncPolicy,
    json: bool,
    config: &'a FileConfig,
    config_file: Option<runtime::event::ConfigFile>,
    /// Process groups this resume killed before continuing, to journal.
    killed: Vec<(CallRef, u32)>,
    plan_mode: bool,
}

/// Starts every configured MCP server (its stderr goes to `mcp-<server>.stderr` in the journal
/// directory) and registers its tools. On any failure the servers already started are stopped.
fn start_servers(
    rt: &tokio::runtime::Runtime,
    config: &FileConfig,
    journal_dir: &Path,
    registry: &mut runtime::registry::Registry,
) -> Result<Vec<mcp::McpServer>, CliError> {
    let mut servers = Vec::new();
    for (name, server_config) in &config.mcp_servers {
        let log = journal_dir.join(format!("mcp-{}.stderr", mcp::naming::sanitize(name)));
        // Appended to: a resumed session keeps what the server said in earlier runs.
        let started = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| failed(format!("{}: {e}", log.display())))
            .and_then(|log| {
                rt.block_on(mcp::McpServer::start(name, server_config, log.into()))
                    .map_err(failed)
            })
            .and_then(|server| {
                mcp::register(&server, registry).map_err(failed)?;
                Ok(server)
            });
        match started {
            Ok(server) => servers.push(server),
            Err(e) => {
                rt.block_on(async {
                    for s in servers {
                        s.shutdown().await;
                    }
                });
                return Err(e);
            }
        }
    }
    Ok(servers)
}

/// A session's builder with the CLI's listeners, and handles to the two it drives itself.
struct Wired {
    builder: SessionBuilder,
    approver: Arc<ScriptedApprover>,
    printer: Arc<Printer>,
}

/// Everything `run` and `resume` set on the library's builder: the approver the script
/// answers through, `bash` behind an ask with `--approve deny`, the printer, the state root
/// kept out of the tools' reach.
fn wire(workspace: &Path, journal_dir: &Path, setup: &Setup<'_>, resuming: bool) -> Wired {
    let default = match setup.approve {
        Approve::Allow => AskAnswer::AllowedOnce,
        Approve::Deny => AskAnswer::Denied,
    };
    let approver = Arc::new(ScriptedApprover::new(default));
    let printer = Arc::new(Printer::new());
    let mut builder = Session::builder(workspace, journal_dir)
        .fsync(setup.fsync)
        .parallel_max(setup.max_parallel)
        // A resumed session keeps the journal's plan mode; `prepare` turns it on if asked.
        .plan_mode(!resuming && (setup.plan_mode || setup.config.plan_mode))
        .approver(approver.clone());
    if let Ok(root) = state_root() {
        builder = builder.forbid(root);
    }
    if setup.approve == Approve::Deny {
        builder = builder.pre_execute(Arc::new(BashNeedsApproval));
    }
    if !setup.json {
        builder = builder.observer(printer.clone() as Arc<dyn Observer>);
    }
    Wired {
        builder,
        approver,
        printer,
    }
}

/// The library's refusals, worded as the CLI always worded them.
fn build_error(e: BuildError) -> CliError {
    match e {
        BuildError::Journal(e) => e.into(),
        BuildError::Corrupt { .. } => CliError::Corrupt(e.to_string()),
        BuildError::Replay { source, .. } => failed(source),
        BuildError::Spill { message, .. } => failed(message),
        e => failed(e),
    }
}

/// Takes the journal's writer lock (creating the directory for a new session). This comes
/// before the spill store, MCP servers or any replay: a second writer is refused here, naming
/// the pid that holds the session. Anything read from the journal after this point is its real
/// state.
fn lock(builder: SessionBuilder) -> Result<LockedJournal, CliError> {
    builder.lock().map_err(build_error)
}

/// What opening the journal cut, said once the session is open.
fn note_torn_tail(report: &journal::OpenReport) {
    if let Some(torn) = &report.torn {
        eprintln!(
            "note: dropped a torn tail of {} bytes at {} (kept in {})",
            torn.dropped_bytes,
            torn.position,
            report.quarantine_file.as_deref().unwrap_or("?")
        );
    }
}

/// The one message for "another process is this session's writer".
fn session_is_live(journal_dir: &Path, holder_pid: Option<u32>) -> CliError {
    failed(BuildError::Live {
        dir: journal_dir.to_owned(),
        holder_pid,
    })
}

/// Sets up the workspace, tools and servers on a locked journal, then opens or resumes its
/// session and journals the CLI's policy and what the resume did before continuing.
fn prepare(
    locked: LockedJournal,
    setup: Setup<'_>,
    approver: Arc<ScriptedApprover>,
    printer: Arc<Printer>,
    resuming: bool,
) -> Result<Prepared, CliError> {
    let Setup {
        approve,
        max_parallel,
        fsync,
        json: _,
        config: file_config,
        config_file,
        killed,
        plan_mode,
    } = setup;
    let journal_dir = locked.journal_dir().to_owned();
    let mut prepared = locked.prepare().map_err(build_error)?;
    config::apply_builtin_exposure(file_config, prepared.registry_mut())?;
    let rt = tokio_runtime()?;
    let servers = start_servers(&rt, file_config, &journal_dir, prepared.registry_mut())?;
    let mut policy = policy::record(
        approve,
        max_parallel,
        fsync,
        config_file,
        prepared.registry(),
        "session opened",
    );
    let journaled_policy = prepared.replay().policy.clone();
    // Everything after the servers started: if it fails, they are stopped inside the runtime
    // (their transports' cleanup needs one).
    let opened = (|| {
        let (mut session, report) = if resuming {
            prepared.resume_reporting()
        } else {
            prepared.open_reporting()
        }
        .map_err(build_error)?;
        note_torn_tail(&report);
        let changed = if resuming {
            policy::changes(journaled_policy.as_ref(), &policy)
        } else {
            Some(policy.reason.clone())
        };
        if let Some(reason) = changed {
            policy.reason = reason;
            session
                .record_policy(&policy)
                .map_err(|e| failed(e.to_string()))?;
        }
        for (call, pgid) in &killed {
            session
                .record_process_killed(call, *pgid, nix::sys::signal::Signal::SIGKILL as i32)
                .map_err(|e| failed(e.to_string()))?;
        }
        if plan_mode && !session.plan_mode() {
            // Only `resume --plan-mode` gets here (a new session starts in it already).
            session
                .set_plan_mode(true, "resumed with --plan-mode")
                .map_err(|e| failed(e.to_string()))?;
        }
        printer.watch(session.event_log().journal().clone());
        Ok::<_, CliError>(session)
    })();
    let session = match opened {
        Ok(session) => session,
        Err(e) => {
            rt.block_on(async {
                for s in servers {
                    s.shutdown().await;
                }
            });
            return Err(e);
        }
    };
    Ok(Prepared {
        rt,
        journal_dir,
        session,
        approver,
        servers,
        printer,
    })
}

fn tokio_runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| failed(format!("cannot start the async runtime: {e}")))
}

fn play(prepared: Prepared, mut model: ScriptedModel, json: bool) -> Result<(), CliError> {
    let Prepared {
        rt,
        journal_dir,
        mut session,
        approver,
        servers,
        printer,
    } = prepared;
    let report = rt.block_on(async {
        let report = drive(&mut session, &mut model, &approver).await;
        let report = match report {
            Ok(report) => session.close().await.map(|()| report),
            Err(e) => Err(e),
        };
        for server in servers {
            server.shutdown().await;
        }
        report
    });
    // After the close's sync every verdict is durable; after a failure, only those shown.
    printer.show_durable();
    let report: DriveReport = report.map_err(|e| match e {
        // These name the journal's files already.
        runtime::RuntimeError::Journal(_) | runtime::RuntimeError::Spill(_) => failed(e),
        e => failed(format!("{}: {e}", journal_dir.display())),
    })?;
    if json {
        print_json(&journal_dir)?;
    } else {
        print_table(&journal_dir)?;
        if report.skipped > 0 {
            outln!(
                "({} responses skipped: their turn was stopped)",
                report.skipped
            )?;
        }
    }
    Ok(())
}

/// Every record as a JSON line.
fn print_json(journal_dir: &Path) -> Result<(), CliError> {
    let storage: Arc<dyn Storage> = Arc::new(FsStorage::open(journal_dir).map_err(failed)?);
    for record in journal::Reader::open(storage, journal::Limits::default())? {
        let record = record?;
        let decoded: Record = record.decode().map_err(failed)?;
        let line =
            serde_json::json!({"seq": record.seq, "at_ms": decoded.at_ms, "event": decoded.event});
        outln!("{line}")?;
    }
    Ok(())
}

/// A table of every call: tool, state, duration, error code.
pub fn print_table(journal_dir: &Path) -> Result<(), CliError> {
    let storage: Arc<dyn Storage> = Arc::new(FsStorage::open(journal_dir).map_err(failed)?);
    let (replay, _) = replay_storage(storage, journal::Limits::default()).map_err(failed)?;
    outln!(
        "\n{:<5} {:<5} {:<12} {:<8} {:<34} {:>7}  code",
        "turn",
        "step",
        "call",
        "tool",
        "state",
        "ms"
    )?;
    for c in replay.calls() {
        // The way the call went, not just where it ended (every finished call is committed).
        let state = if c.recovered {
            "recovered"
        } else if c.rejection.is_some() {
            "rejected"
        } else if c.cancel_reason.is_some() {
            "cancelled-before-start"
        } else if c.outcome.is_some() {
            "settled"
        } else {
            c.state.as_str()
        };
        let state = if c.state == runtime::state::CallState::Committed {
            format!("{state}, committed")
        } else {
            state.to_owned()
        };
        let ms = c
            .outcome
            .as_ref()
            .map(|o| o.duration_ms.to_string())
            .unwrap_or_else(|| "-".into());
        let code = c
            .committed
            .as_ref()
            .and_then(|r| r.code)
            .map(|c| c.as_str())
            .unwrap_or("");
        outln!(
            "{:<5} {:<5} {:<12} {:<8} {:<34} {:>7}  {code}",
            c.call.turn,
            c.call.step,
            c.call.call_id,
            c.tool,
            state,
            ms
        )?;
    }
    Ok(())
}

fn load_script(path: &Path) -> Result<ScriptedModel, CliError> {
    let file = std::fs::File::open(path)
        .map_err(|e| failed(format!("{}: cannot read the script: {e}", path.display())))?;
    // Read line by line: a line over the limit is refused before it is all in memory.
    let reader = std::io::BufReader::new(file);
    Ok(ScriptedModel::new(
        read_script(reader, &path.display().to_string()).map_err(failed)?,
    ))
}

/// Runs `model` as a new session on `workspace`, journaled in `journal_dir`.
pub fn run_model(
    model: ScriptedModel,
    workspace: &Path,
    journal_dir: &Path,
    approve: Approve,
    max_parallel: usize,
    fsync: FsyncPolicy,
    json: bool,
) -> Result<(), CliError> {
    let no_config = FileConfig::default();
    let setup = Setup {
        approve,
        max_parallel,
        fsync,
        json,
        config: &no_config,
        config_file: None,
        killed: Vec::new(),
        plan_mode: false,
    };
    refuse_existing_session(journal_dir)?;
    let Wired {
        builder,
        approver,
        printer,
    } = wire(workspace, journal_dir, &setup, false);
    let locked = lock(builder)?;
    let prepared = prepare(locked, setup, approver, printer, false)?;
    play(prepared, model, json)
}

/// `run` starts a new session and never writes into a directory that holds one: a second
/// `session/open` would leave the first session's unfinished calls unclassifiable forever.
/// Read-only: the directory is not touched (no lock file, no cut tail), so a crashed session
/// stays exactly as `recover` and `resume` need it. `Session::open` checks again under the lock.
fn refuse_existing_session(journal_dir: &Path) -> Result<(), CliError> {
    let Ok(storage) = FsStorage::open(journal_dir) else {
        return Ok(()); // no directory yet (or not one: creating it will say so)
    };
    let storage: Arc<dyn Storage> = Arc::new(storage);
    let mut replayer = runtime::replay::Replayer::new();
    let mut records = 0u64;
    let mut unreadable = None;
    match journal::Reader::open(storage.clone(), journal::Limits::default()) {
        Err(e) => unreadable = Some(e.to_string()),
        Ok(reader) => {
            for record in reader {
                match record {
                    Ok(record) => {
                        records += 1;
                        if let Err(e) = replayer.apply(&record) {
                            unreadable = Some(e.to_string());
                            break;
                        }
                    }
                    Err(e) => {
                        unreadable = Some(e.to_string());
                        break;
                    }
                }
            }
        }
    }
    let replay = replayer.finish();
    let resume_hint = format!("tooljournal resume --journal {}", journal_dir.display());
    if let Some(open) = &replay.open {
        let state = if matches!(storage.writer_lock_held(), Ok(true)) {
            "live".to_owned()
        } else if replay.closed {
            "finished".to_owned()
        } else if replay.open_turn().is_some() {
            "interrupted, not yet recovered".to_owned()
        } else {
            "not finished".to_owned()
        };
        return Err(failed(format!(
            "{}: already holds session {} ({state}); `run` starts new sessions only: \
             continue it with `{resume_hint}`",
            journal_dir.display(),
            open.session_id
        )));
    }
    if let Some(e) = unreadable {
        return Err(failed(format!(
            "{}: already holds a journal that cannot be read ({e}); `run` starts new sessions only",
            journal_dir.display()
        )));
    }
    if records > 0 {
        return Err(failed(format!(
            "{}: already holds {records} journal records; `run` starts new sessions only",
            journal_dir.display()
        )));
    }
    Ok(())
}

pub fn run(args: RunArgs) -> Result<(), CliError> {
    let model = load_script(&args.script)?;
    let workspace = match args.workspace {
        Some(w) => w,
        None => {
            std::env::current_dir().map_err(|e| failed(format!("no current directory: {e}")))?
        }
    };
    let session_id = uuid::Uuid::new_v4().to_string();
    let journal_dir = match args.journal {
        Some(j) => j,
        None => state_root()?.join(&session_id),
    };
    refuse_existing_session(&journal_dir)?;
    let loaded = config::load(args.config.as_deref())?;
    let setup = Setup {
        approve: args.approve,
        max_parallel: args.max_parallel,
        fsync: args.fsync,
        json: args.json,
        config: &loaded.config,
        config_file: loaded.file.clone(),
        killed: Vec::new(),
        plan_mode: args.plan_mode,
    };
    let Wired {
        builder,
        approver,
        printer,
    } = wire(&workspace, &journal_dir, &setup, false);
    let locked = lock(builder.session_id(session_id))?;
    let prepared = prepare(locked, setup, approver, printer, false)?;
    if !args.json {
        outln!("session {}", prepared.session.session_id())?;
        outln!("journal: {}", journal_dir.display())?;
    }
    play(prepared, model, args.json)
}

/// What `tooljournal resume` was asked to do.
pub struct ResumeArgs<'a> {
    pub journal_dir: &'a Path,
    pub script: Option<&'a Path>,
    pub flags: policy::ResumeFlags,
    /// Turn plan mode on.
    pub plan_mode: bool,
    /// Kill process groups the crashed run left running instead of refusing to go on.
    pub kill_orphans: bool,
}

pub fn resume(args: ResumeArgs<'_>) -> Result<(), CliError> {
    let ResumeArgs {
        journal_dir,
        script,
        flags,
        plan_mode,
        kill_orphans,
    } = args;
    let recovered = recover_first(journal_dir)?;
    // The policy the journal holds decides how the journal is opened (its fsync), so it is
    // read before the lock, and checked again under it.
    let journaled = recovered.analysis.replay.policy.clone();
    let resolved = policy::for_resume(journaled.as_ref(), flags)?;
    for note in &resolved.notes {
        eprintln!("note: {note}");
    }
    let mut setup = Setup {
        approve: resolved.approve,
        max_parallel: resolved.max_parallel,
        fsync: resolved.fsync,
        json: false,
        config: &resolved.config.config,
        config_file: resolved.config.file.clone(),
        killed: Vec::new(),
        // A resumed session keeps the plan mode its journal shows; the flag can turn it on.
        plan_mode,
    };
    // The workspace is the one the session was opened on (checked again under the lock).
    let workspace = recovered
        .analysis
        .replay
        .open
        .as_ref()
        .map(|open| PathBuf::from(&open.workspace))
        .unwrap_or_default();
    let Wired {
        builder,
        approver,
        printer,
    } = wire(&workspace, journal_dir, &setup, true);
    // From here the writer lock is held: the replay below is the journal as it really ends,
    // and no other process can append before this session does (or finish it meanwhile).
    let locked = lock(builder)?;
    let replay = locked.replay();
    let Some(open) = still_resumable(journal_dir, replay, journaled.as_ref())? else {
        return Ok(());
    };
    let Some(script) = script else {
        outln!(
            "{}: session {} is balanced; give --script to continue it",
            journal_dir.display(),
            open.session_id
        )?;
        return Ok(());
    };
    setup.killed = stop_orphans(journal_dir, replay, kill_orphans)?;
    let mut model = load_script(script)?;
    let consumed = consumed_lines(model.lines(), replay)
        .map_err(|e| failed(format!("{}: {e}", script.display())))?;
    model.skip(consumed);
    let session_id = open.session_id.clone();
    let prepared = prepare(locked, setup, approver, printer, true)?;
    outln!("resuming session {session_id} after {consumed} script lines")?;
    play(prepared, model, false)
}

/// Recovery first: balances the journal (never re-running anything) so a resume continues a
/// balanced session; refuses a live session and one recovery could not write to.
fn recover_first(journal_dir: &Path) -> Result<recover::session::Recovered, CliError> {
    let recovered = recover::session::recover(journal_dir, true).map_err(|e| match e {
        recover::session::RecoverError::Corrupt(m) => CliError::Corrupt(m),
        recover::session::RecoverError::Newer(m) => CliError::Newer(m),
        // The rest are I/O failures: exit 1.
        other => CliError::Failed(other.to_string()),
    })?;
    for note in recovered.notes() {
        eprintln!("note: {}: {note}", journal_dir.display());
    }
    if recovered.analysis.live {
        let storage = FsStorage::open(journal_dir).map_err(failed)?;
        return Err(session_is_live(journal_dir, storage.lock_holder_pid()));
    }
    if let Some(why) = &recovered.read_only_because {
        return Err(failed(format!(
            "{}: {why}; cannot resume",
            journal_dir.display()
        )));
    }
    if recovered.appended {
        print_recovered(&recovered)?;
    }
    Ok(recovered)
}

/// Checks, under the writer lock, that the journal is still the one recovery balanced and
/// that there is a session to continue. `None`: nothing to resume (said on stdout).
fn still_resumable<'r>(
    journal_dir: &Path,
    replay: &'r SessionReplay,
    journaled: Option<&runtime::event::SessionPolicy>,
) -> Result<Option<&'r runtime::event::SessionOpen>, CliError> {
    if replay.policy.as_ref() != journaled {
        return Err(failed(format!(
            "{}: another process changed the session's policy while this resume started; \
             run `tooljournal resume` again",
            journal_dir.display()
        )));
    }
    let Some(open) = &replay.open else {
        outln!(
            "{}: empty journal: nothing to resume",
            journal_dir.display()
        )?;
        return Ok(None);
    };
    if replay.closed {
        outln!(
            "{}: session {} already finished; nothing to resume",
            journal_dir.display(),
            open.session_id
        )?;
        return Ok(None);
    }
    if let Some(turn) = replay.open_turn() {
        // Another process was interrupted between our recovery and our lock.
        return Err(failed(format!(
            "{}: turn {} is open again: another process wrote to the session after its \
             recovery; run `tooljournal resume` again",
            journal_dir.display(),
            turn.turn
        )));
    }
    Ok(Some(open))
}

/// How long a killed process group may take to disappear.
const ORPHAN_KILL_WAIT_MS: u64 = 5_000;

/// Process groups that calls of the crashed run started and that still run: a resume does not
/// go on beside them (they may still be changing the workspace) unless told to kill them.
/// Returns the groups killed, for the journal.
fn stop_orphans(
    journal_dir: &Path,
    replay: &SessionReplay,
    kill: bool,
) -> Result<Vec<(CallRef, u32)>, CliError> {
    let mut killed = Vec::new();
    for (call, process) in replay.unsettled_processes() {
        let Some(members) = runtime::process::still_running(&process) else {
            continue;
        };
        if !kill {
            return Err(failed(format!(
                "{}: {call}: still running: process group {} ({members} processes), started \
                 before the session was interrupted; stop it, or resume with --kill-orphans",
                journal_dir.display(),
                process.pgid
            )));
        }
        let pgid = nix::unistd::Pid::from_raw(process.pgid as i32);
        // ESRCH: it ended on its own meanwhile; that is fine.
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let deadline =
            std::time::Instant::now() + std::time::Duration::from_millis(ORPHAN_KILL_WAIT_MS);
        while runtime::process::still_running(&process).is_some() {
            if std::time::Instant::now() > deadline {
                return Err(failed(format!(
                    "{}: {call}: process group {} still runs {ORPHAN_KILL_WAIT_MS} ms after SIGKILL",
                    journal_dir.display(),
                    process.pgid
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        eprintln!(
            "note: {call}: killed process group {} ({members} processes) left running by the crashed run",
            process.pgid
        );
        killed.push((call, process.pgid));
    }
    Ok(killed)
}

/// What recovery did before a resume, for people.
fn print_recovered(recovered: &recover::session::Recovered) -> Result<(), CliError> {
    let unknown: Vec<_> = recovered
        .analysis
        .calls
        .iter()
        .filter(|c| c.classification == Some(runtime::event::Classification::ToolOutcomeUnknown))
        .map(|c| c.call.call_id.clone())
        .collect();
    outln!(
        "recovered: {} call(s) classified{}",
        recovered
            .analysis
            .recovery
            .as_ref()
            .map(|r| r.calls.len())
            .unwrap_or(0),
        if unknown.is_empty() {
            String::new()
        } else {
            format!("; may have run, not re-run: {}", unknown.join(", "))
        }
    )?;
    Ok(())
}
