//! `tooljournal run` and `tooljournal resume`: a scripted session on a real workspace, every
//! transition journaled.

use crate::config::{self, FileConfig};
use crate::location::state_root;
use crate::policy::{self, Approve};
use crate::printer::Printer;
use crate::{failed, CliError};
use journal::{FsStorage, FsyncPolicy};
use runtime::event::{AskAnswer, CallRef, Record};
use runtime::replay::replay_backend;
use runtime::Observer;
use runtime::{drive, read_script, DriveReport, ScriptedApprover, ScriptedModel};
use runtime::{BuildError, LockedJournal, Session, SessionBuilder};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    /// The sandbox `bash` runs under (`--sandbox` and friends).
    pub sandbox: crate::sandbox_cli::SandboxFlags,
}

pub(crate) struct Prepared {
    pub rt: tokio::runtime::Runtime,
    pub journal_dir: PathBuf,
    pub session: Session,
    pub approver: Arc<ScriptedApprover>,
    pub servers: Vec<mcp::McpServer>,
    pub printer: Arc<Printer>,
    /// The names of the tools the model may be shown (not hidden), for the system prompt.
    pub tools: Vec<String>,
    /// The workspace's root, as `session/open` records it.
    pub workspace: String,
    /// Calls of the crashed run this resume ran again (`--rerun`), each with its one result,
    /// in model order: the model's history gets these results instead of recovery's.
    pub rerun: Vec<(CallRef, runtime::ToolResult)>,
    /// The analysis a resume that recovered the journal itself appended its recovery from:
    /// the history's results (probed texts included) are its.
    pub recovered: Option<recover::Analysis>,
}

/// What a session is set up with, beyond where it lives.
pub(crate) struct Setup<'a> {
    /// The journal as the user named it (a URL with its password): what the CLI opens again
    /// (MCP logs beside it, the table printed at the end), never the location messages show.
    pub journal: &'a Path,
    /// Who answers questions instead of the script's approver (a person at the terminal).
    pub person: Option<Arc<dyn runtime::Approver>>,
    pub approve: Approve,
    pub max_parallel: usize,
    /// Only recorded here (`session/policy`): the journal was opened with it already.
    pub fsync: FsyncPolicy,
    pub json: bool,
    pub config: &'a FileConfig,
    pub config_file: Option<runtime::event::ConfigFile>,
    pub plan_mode: bool,
    /// The sandbox `bash` runs under; `None`: unsandboxed, nothing journaled.
    pub sandbox: Option<sandbox::Spec>,
}

/// Starts every configured MCP server (its stderr goes to `mcp-<server>.stderr` in the journal
/// directory) and registers its tools. On any failure the servers already started are stopped.
fn start_servers(
    rt: &tokio::runtime::Runtime,
    config: &FileConfig,
    side_dir: &Path,
    prepared: &mut runtime::PreparedSession,
) -> Result<Vec<mcp::McpServer>, CliError> {
    start_all(rt.handle(), config, |name, server_config| {
        let sandbox = server_sandbox(prepared, name, server_config)?;
        let log = side_dir.join(format!("mcp-{}.stderr", mcp::naming::sanitize(name)));
        // Appended to: a resumed session keeps what the server said in earlier runs.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&log)
            .map_err(|e| failed(format!("{}: {e}", log.display())))?;
        let server = rt
            .block_on(mcp::McpServer::start_in(
                name,
                server_config,
                log.into(),
                sandbox.map(Arc::new),
            ))
            .map_err(failed)?;
        mcp::register(&server, prepared.registry_mut()).map_err(failed)?;
        Ok(server)
    })
}

/// The sandbox of server `name` (`sandbox = POLICY` in its table), built from the session's;
/// `None` when its table names none. A policy the session cannot build (no sandbox at all, a
/// kernel that lacks it) refuses the session, naming the server.
fn server_sandbox(
    prepared: &runtime::PreparedSession,
    name: &str,
    config: &mcp::ServerConfig,
) -> Result<Option<sandbox::Sandbox>, CliError> {
    let Some(policy) = &config.sandbox else {
        return Ok(None);
    };
    let policy = runtime::event::SandboxPolicy::parse(policy).ok_or_else(|| {
        failed(format!(
            "MCP server {name}: no sandbox policy {policy:?}: read-only, workspace-write or \
             danger-full-access"
        ))
    })?;
    match prepared.sandbox_under(policy, &format!("mcp-{}", mcp::naming::sanitize(name))) {
        Some(Ok(sandbox)) => Ok(Some(sandbox)),
        Some(Err(e)) => Err(failed(format!("MCP server {name}: {e}"))),
        None => Err(failed(format!(
            "MCP server {name} asks for a sandbox, and this session has none"
        ))),
    }
}

/// Starts every configured MCP server with `start`, in the configuration's order; on the first
/// failure, the servers already started are stopped and the failure returned.
fn start_all<E>(
    rt: &tokio::runtime::Handle,
    config: &FileConfig,
    mut start: impl FnMut(&str, &mcp::ServerConfig) -> Result<mcp::McpServer, E>,
) -> Result<Vec<mcp::McpServer>, E> {
    let mut servers = Vec::new();
    for (name, server_config) in &config.mcp_servers {
        match start(name, server_config) {
            Ok(server) => servers.push(server),
            Err(e) => {
                rt.block_on(shutdown(servers));
                return Err(e);
            }
        }
    }
    Ok(servers)
}

/// A session's builder with the CLI's listeners, and handles to the two it drives itself.
pub(crate) struct Wired {
    pub builder: SessionBuilder,
    pub approver: Arc<ScriptedApprover>,
    pub printer: Arc<Printer>,
}

/// Everything `run` and `resume` set on the library's builder: the approver the script
/// answers through, the printer, the state root kept out of the tools' reach; for a new
/// session also its policy (a resume's is the library's to set: the journaled one, reapplied).
pub(crate) fn wire(
    builder: SessionBuilder,
    setup: &Setup<'_>,
    resuming: bool,
) -> Result<Wired, CliError> {
    let default = match setup.approve {
        Approve::Allow => AskAnswer::AllowedOnce,
        Approve::Deny | Approve::Ask => AskAnswer::Denied,
    };
    let approver = Arc::new(ScriptedApprover::new(default));
    let printer = Arc::new(Printer::new());
    let mut builder = builder
        // First: `config` replaces what the settings below set.
        .config(runtime::Config {
            question_timeout_ms: setup.config.question_timeout_ms,
            ..runtime::Config::default()
        })
        .approver(match &setup.person {
            Some(person) => person.clone(),
            None => approver.clone(),
        });
    if !resuming {
        builder = builder
            .fsync(setup.fsync)
            .parallel_max(setup.max_parallel)
            .plan_mode(setup.plan_mode || setup.config.plan_mode);
        match setup.approve {
            Approve::Deny => builder = builder.pre_execute(Arc::new(session::BashNeedsApproval)),
            Approve::Ask => builder = builder.pre_execute(Arc::new(session::AskBeforeChanges)),
            Approve::Allow => {}
        }
    }
    if let Ok(root) = state_root() {
        builder = builder.forbid(root);
    }
    if let Some(spec) = &setup.sandbox {
        builder = builder.sandbox(spec.clone());
    }
    if !setup.json {
        builder = builder.observer(printer.clone() as Arc<dyn Observer>);
    }
    Ok(Wired {
        builder,
        approver,
        printer,
    })
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
pub(crate) fn lock(builder: SessionBuilder) -> Result<LockedJournal, CliError> {
    builder.lock().map_err(build_error)
}

/// What opening the journal cut, said once the session is open.
fn note_torn_tail(report: &journal::OpenReport) {
    if let Some(note) = session::torn_note(report) {
        eprintln!("note: {note}");
    }
}

/// What the CLI adds to a prepared session before it opens or resumes: the configuration's
/// built-in exposure, its MCP servers (their tools registered), and the async runtime they run
/// on.
pub(crate) struct Tooled {
    pub rt: tokio::runtime::Runtime,
    pub servers: Vec<mcp::McpServer>,
    /// The names of the tools the model may be shown (not hidden), for the system prompt.
    pub tools: Vec<String>,
    /// The workspace's root, as `session/open` records it.
    pub workspace: String,
}

impl Tooled {
    /// Stops the servers (after a failure: their transports' cleanup needs the runtime).
    pub fn stop_servers(&mut self) {
        self.rt
            .block_on(shutdown(std::mem::take(&mut self.servers)));
    }
}

/// Stops `servers`, one after the other.
pub(crate) async fn shutdown(servers: Vec<mcp::McpServer>) {
    for s in servers {
        s.shutdown().await;
    }
}

/// Applies the configuration to `prepared`'s registry and starts its MCP servers.
pub(crate) fn add_tools(
    prepared: &mut runtime::PreparedSession,
    file_config: &FileConfig,
    journal: &Path,
) -> Result<Tooled, CliError> {
    config::apply_builtin_exposure(file_config, prepared.registry_mut())?;
    let rt = tokio_runtime()?;
    let side_dir = crate::location::side_dir(journal)?;
    let servers = start_servers(&rt, file_config, &side_dir, prepared)?;
    let tools = prepared
        .registry()
        .entries()
        .into_iter()
        .filter(|e| e.exposure != runtime::Exposure::Hidden)
        .map(|e| e.tool.name().to_owned())
        .collect();
    let workspace = prepared.workspace().root().display().to_string();
    Ok(Tooled {
        rt,
        servers,
        tools,
        workspace,
    })
}

/// Sets up the workspace, tools and servers on a locked journal, then opens its new session
/// and journals the CLI's policy.
pub(crate) fn prepare(
    locked: LockedJournal,
    setup: Setup<'_>,
    approver: Arc<ScriptedApprover>,
    printer: Arc<Printer>,
) -> Result<Prepared, CliError> {
    let Setup {
        journal,
        person: _,
        approve,
        max_parallel,
        fsync,
        json: _,
        config: file_config,
        config_file,
        plan_mode: _,
        sandbox: _,
    } = setup;
    let journal_dir = journal.to_owned();
    let mut prepared = locked.prepare().map_err(build_error)?;
    let mut tooled = add_tools(&mut prepared, file_config, &journal_dir)?;
    let policy = policy::record(
        approve,
        max_parallel,
        fsync,
        config_file,
        prepared.registry(),
        "session opened",
    );
    let opened = (|| {
        let (mut session, report) = prepared.open_reporting().map_err(build_error)?;
        note_torn_tail(&report);
        session
            .record_policy(&policy)
            .map_err(|e| failed(e.to_string()))?;
        printer.watch(session.event_log().journal().clone());
        Ok::<_, CliError>(session)
    })();
    let session = match opened {
        Ok(session) => session,
        Err(e) => {
            tooled.stop_servers();
            return Err(e);
        }
    };
    Ok(Prepared::of(
        tooled,
        session,
        journal_dir,
        approver,
        printer,
    ))
}

impl Prepared {
    /// A session opened (or resumed) with what [`add_tools`] added, nothing run again yet.
    pub(crate) fn of(
        tooled: Tooled,
        session: Session,
        journal_dir: PathBuf,
        approver: Arc<ScriptedApprover>,
        printer: Arc<Printer>,
    ) -> Prepared {
        let Tooled {
            rt,
            servers,
            tools,
            workspace,
        } = tooled;
        Prepared {
            rt,
            journal_dir,
            session,
            approver,
            servers,
            printer,
            tools,
            workspace,
            rerun: Vec::new(),
            recovered: None,
        }
    }

    /// Stops the servers after a failure (their transports' cleanup needs the runtime).
    pub(crate) fn stop_servers(self) {
        let Prepared { rt, servers, .. } = self;
        rt.block_on(shutdown(servers));
    }
}

pub(crate) fn tokio_runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| failed(format!("cannot start the async runtime: {e}")))
}

pub(crate) fn play(
    prepared: Prepared,
    mut model: ScriptedModel,
    json: bool,
) -> Result<(), CliError> {
    let Prepared {
        rt,
        journal_dir,
        mut session,
        approver,
        servers,
        printer,
        tools: _,
        workspace: _,
        rerun: _,
        recovered: _,
    } = prepared;
    let report = rt.block_on(async {
        let report = drive(&mut session, &mut model, &approver).await;
        let report = match report {
            Ok(report) => session.close().await.map(|()| report),
            Err(e) => Err(e),
        };
        shutdown(servers).await;
        report
    });
    // After the close's sync every verdict is durable; after a failure, only those shown.
    printer.show_durable();
    let report: DriveReport = report.map_err(|e| match e {
        // These name the journal's files already.
        runtime::RuntimeError::Journal(_) | runtime::RuntimeError::Spill(_) => failed(e),
        e => failed(format!("{}: {e}", crate::location::shown(&journal_dir))),
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
    let backend = crate::location::backend(journal_dir)?;
    for record in journal::Reader::open_backend(&backend, journal::Limits::default())? {
        let record = record?;
        let decoded: Record = record.decode().map_err(failed)?;
        let line =
            serde_json::json!({"seq": record.seq, "at_ms": decoded.at_ms, "event": decoded.event});
        dataln!("{line}")?;
    }
    Ok(())
}

/// A table of every call: tool, state, duration, error code.
pub fn print_table(journal_dir: &Path) -> Result<(), CliError> {
    let backend = crate::location::backend(journal_dir)?;
    let (replay, _) = replay_backend(&backend, journal::Limits::default()).map_err(failed)?;
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

pub(crate) fn load_script(path: &Path) -> Result<ScriptedModel, CliError> {
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
        journal: journal_dir,
        person: None,
        approve,
        max_parallel,
        fsync,
        json,
        config: &no_config,
        config_file: None,
        plan_mode: false,
        // The default policy; where the kernel lacks it, the demo still runs, journaled as
        // not enforced (the newcomer's first command needs nothing but cargo).
        sandbox: Some(crate::sandbox_cli::spec(
            &crate::sandbox_cli::SandboxFlags {
                allow_unsandboxed: true,
                ..Default::default()
            },
            &Default::default(),
            None,
        )?),
    };
    refuse_existing_session(journal_dir)?;
    let Wired {
        builder,
        approver,
        printer,
    } = wire(
        crate::location::builder(workspace, journal_dir)?,
        &setup,
        false,
    )?;
    let locked = lock(builder)?;
    let prepared = prepare(locked, setup, approver, printer)?;
    play(prepared, model, json)
}

/// `run` starts a new session and never writes into a directory that holds one: a second
/// `session/open` would leave the first session's unfinished calls unclassifiable forever.
/// Read-only: the directory is not touched (no lock file, no cut tail), so a crashed session
/// stays exactly as `recover` and `resume` need it. `Session::open` checks again under the lock.
pub(crate) fn refuse_existing_session(journal_dir: &Path) -> Result<(), CliError> {
    crate::location::check(journal_dir)?;
    let backend = match crate::location::url(journal_dir) {
        Some(_) => crate::location::backend(journal_dir)?,
        None => match FsStorage::open(journal_dir) {
            Ok(storage) => journal::Backend::Files(Arc::new(storage)),
            Err(_) => return Ok(()), // no directory yet (or not one: creating it will say so)
        },
    };
    let mut replayer = runtime::replay::Replayer::new();
    let mut records = 0u64;
    let mut unreadable = None;
    match journal::Reader::open_backend(&backend, journal::Limits::default()) {
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
    let resume_hint = format!(
        "tooljournal resume --journal {}",
        crate::location::shown(journal_dir)
    );
    if let (Some(open), Some(source)) = (&replay.open, &replay.imported) {
        return Err(failed(format!(
            "{}: already holds session {}, imported from {}'s session file {}; `run` starts \
             new sessions only, and an imported journal is a record that cannot be continued",
            crate::location::shown(journal_dir),
            open.session_id,
            source.agent,
            source.file
        )));
    }
    if let Some(open) = &replay.open {
        let state = if backend.writer_state().is_ok_and(|w| w.live()) {
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
            crate::location::shown(journal_dir),
            open.session_id
        )));
    }
    if let Some(e) = unreadable {
        return Err(failed(format!(
            "{}: already holds a journal that cannot be read ({e}); `run` starts new sessions only",
            crate::location::shown(journal_dir)
        )));
    }
    if records > 0 {
        return Err(failed(format!(
            "{}: already holds {records} journal records; `run` starts new sessions only",
            crate::location::shown(journal_dir)
        )));
    }
    Ok(())
}

/// Where a new session lives: its workspace (the current directory unless given), a new
/// session id, and its journal directory (under the state root unless given), which must not
/// hold a session yet (I11). What `run`, `run --model` and `chat` all begin with.
pub struct NewSession {
    /// The directory the file tools are confined to.
    pub workspace: PathBuf,
    /// A new random id.
    pub session_id: String,
    /// Where its journal goes.
    pub journal_dir: PathBuf,
}

impl NewSession {
    /// Decides the three, and refuses a journal directory that already holds a session.
    pub fn at(
        workspace: Option<PathBuf>,
        journal: Option<PathBuf>,
    ) -> Result<NewSession, CliError> {
        let workspace = match workspace {
            Some(w) => w,
            None => {
                std::env::current_dir().map_err(|e| failed(format!("no current directory: {e}")))?
            }
        };
        let session_id = uuid::Uuid::new_v4().to_string();
        let journal_dir = match journal {
            Some(j) => j,
            None => state_root()?.join(&session_id),
        };
        refuse_existing_session(&journal_dir)?;
        Ok(NewSession {
            workspace,
            session_id,
            journal_dir,
        })
    }

    /// Opens it: wired, locked, prepared (the journal's first records written).
    pub fn open(self, setup: Setup<'_>) -> Result<Prepared, CliError> {
        let Wired {
            builder,
            approver,
            printer,
        } = wire(
            crate::location::builder(&self.workspace, &self.journal_dir)?,
            &setup,
            false,
        )?;
        let locked = lock(builder.session_id(self.session_id))?;
        prepare(locked, setup, approver, printer)
    }
}

pub fn run(args: RunArgs) -> Result<(), CliError> {
    if args.approve == Approve::Ask {
        return Err(failed(
            "--approve ask asks a person about a live model's calls: it goes with --model, \
             not --script",
        ));
    }
    let model = load_script(&args.script)?;
    let new = NewSession::at(args.workspace, args.journal)?;
    let journal_dir = new.journal_dir.clone();
    let loaded = config::load(args.config.as_deref())?;
    let setup = Setup {
        journal: &journal_dir,
        person: None,
        approve: args.approve,
        max_parallel: args.max_parallel,
        fsync: args.fsync,
        json: args.json,
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
    if !args.json {
        outln!("session {}", prepared.session.session_id())?;
        outln!("journal: {}", crate::location::shown(&journal_dir))?;
    }
    play(prepared, model, args.json)
}
