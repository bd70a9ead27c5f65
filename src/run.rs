//! `tooljournal run` and `tooljournal resume`: a scripted session on a real workspace, every
//! transition journaled.

use crate::config::{self, FileConfig};
use crate::CliError;
use journal::{FsStorage, FsyncPolicy, Journal, Options, Storage};
use runtime::driver::{drive, DriveReport, ScriptedApprover};
use runtime::event::{AskAnswer, CallRef, Record};
use runtime::eventlog::SystemClock;
use runtime::hooks::{CallInfo, Decision, Hooks, Observer, PreExecute};
use runtime::model::{consumed_lines, parse_script, ScriptedModel};
use runtime::replay::{replay_storage, SessionReplay};
use runtime::spill::SledSpill;
use runtime::tools::{builtin_registry, Workspace};
use runtime::{Config, Session, SessionOptions, ToolResult};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Cache for a session's spill store: small, it only holds what is being written.
const SPILL_CACHE_BYTES: u64 = 8 << 20;

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

/// Shows calls to people: on a terminal, a live line per running tool (its latest progress),
/// replaced by its verdict when it is committed; elsewhere, one line per committed call.
struct Printer {
    live: Option<indicatif::MultiProgress>,
    lines: std::sync::Mutex<std::collections::HashMap<CallRef, indicatif::ProgressBar>>,
}

impl Printer {
    fn new() -> Printer {
        use std::io::IsTerminal;
        Printer {
            live: std::io::stdout()
                .is_terminal()
                .then(indicatif::MultiProgress::new),
            lines: Default::default(),
        }
    }

    fn label(call: &CallRef, tool: &str) -> String {
        format!(
            "  turn {} step {}  {:<12} {:<8}",
            call.turn, call.step, call.call_id, tool
        )
    }
}

impl Observer for Printer {
    fn name(&self) -> &str {
        "printer"
    }
    fn on_start(&self, call: &CallRef, tool: &str) -> Result<(), String> {
        if let Some(live) = &self.live {
            let bar = live.add(indicatif::ProgressBar::new_spinner());
            bar.set_prefix(Printer::label(call, tool));
            bar.set_style(
                indicatif::ProgressStyle::with_template("{prefix} {spinner} {elapsed} {wide_msg}")
                    .map_err(|e| e.to_string())?,
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            self.lines
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(call.clone(), bar);
        }
        Ok(())
    }
    fn on_progress(&self, call: &CallRef, _tool: &str, message: &str) -> Result<(), String> {
        if let Some(bar) = self
            .lines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(call)
        {
            bar.set_message(message.to_owned());
        }
        Ok(())
    }
    fn on_result(&self, call: &CallRef, tool: &str, result: &ToolResult) -> Result<(), String> {
        let verdict = match result.code {
            None => "ok".to_owned(),
            Some(code) => code.as_str().to_owned(),
        };
        let line = format!("{} {verdict}", Printer::label(call, tool));
        let bar = self
            .lines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(call);
        match (&self.live, bar) {
            (Some(_), Some(bar)) => {
                bar.set_style(
                    indicatif::ProgressStyle::with_template("{msg}").map_err(|e| e.to_string())?,
                );
                bar.finish_with_message(line);
            }
            (Some(live), None) => {
                let _ = live.println(line);
            }
            (None, _) => {
                let _ = crate::out(format_args!("{line}"));
            }
        }
        Ok(())
    }
}

struct Prepared {
    rt: tokio::runtime::Runtime,
    journal_dir: PathBuf,
    session: Session,
    approver: Arc<ScriptedApprover>,
    servers: Vec<mcp::McpServer>,
}

/// What a session is set up with, beyond where it lives.
struct Setup<'a> {
    approve: Approve,
    max_parallel: usize,
    fsync: FsyncPolicy,
    json: bool,
    config: &'a FileConfig,
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

fn prepare(
    session_id: Option<String>,
    journal_dir: &Path,
    workspace: &Path,
    setup: Setup<'_>,
    resume_from: Option<&SessionReplay>,
) -> Result<Prepared, CliError> {
    let Setup {
        approve,
        max_parallel,
        fsync,
        json,
        config: file_config,
        plan_mode,
    } = setup;
    let storage = FsStorage::create(journal_dir).map_err(|e| {
        failed(format!(
            "{}: cannot create the journal directory: {e}",
            journal_dir.display()
        ))
    })?;
    let storage: Arc<dyn Storage> = Arc::new(storage);
    let mut forbidden = vec![journal_dir.to_owned()];
    forbidden.extend(state_root().ok());
    let ws = Arc::new(Workspace::new(workspace, &forbidden).map_err(|e| {
        failed(format!(
            "{}: cannot use as the workspace: {e}",
            workspace.display()
        ))
    })?);
    let mut registry = builtin_registry(&ws).map_err(failed)?;
    config::apply_builtin_exposure(file_config, &mut registry)?;
    let rt = tokio_runtime()?;
    let servers = start_servers(&rt, file_config, journal_dir, &mut registry)?;
    // Everything after the servers started: if it fails, they are stopped inside the runtime
    // (their transports' cleanup needs one).
    let opened = (|| {
        let registry = Arc::new(registry);
        let default = match approve {
            Approve::Allow => AskAnswer::AllowedOnce,
            Approve::Deny => AskAnswer::Denied,
        };
        let approver = Arc::new(ScriptedApprover::new(default));
        let mut pre_execute: Vec<Arc<dyn PreExecute>> =
            vec![Arc::new(runtime::tools::ask::AskPolicy)];
        if approve == Approve::Deny {
            pre_execute.push(Arc::new(BashNeedsApproval));
        }
        let observers: Vec<Arc<dyn Observer>> = if json {
            vec![]
        } else {
            vec![Arc::new(Printer::new())]
        };
        let hooks = Hooks {
            pre_execute,
            approver: Some(approver.clone()),
            observers,
            ..Hooks::default()
        };
        let spill =
            SledSpill::open(&journal_dir.join("spill"), SPILL_CACHE_BYTES).map_err(failed)?;
        let config = Config {
            parallel_max: max_parallel.max(1),
            spill: Some(Arc::new(spill)),
            plan_mode: plan_mode || file_config.plan_mode,
            ..Config::default()
        };
        let (journal, report) = Journal::open(
            storage,
            Options {
                fsync,
                ..Options::default()
            },
        )?;
        if let Some(torn) = &report.torn {
            eprintln!(
                "note: dropped a torn tail of {} bytes at {} (kept in {})",
                torn.dropped_bytes,
                torn.position,
                report.quarantine_file.as_deref().unwrap_or("?")
            );
        }
        let options = SessionOptions {
            session_id,
            workspace: ws.root().display().to_string(),
            clock: Arc::new(SystemClock),
        };
        let session = match resume_from {
            None => Session::open(journal, registry, hooks, config, options),
            Some(replay) => Session::resume(journal, registry, hooks, config, options, replay),
        }
        .map_err(|e| failed(e.to_string()))?;
        Ok::<_, CliError>((session, approver))
    })();
    let (session, approver) = match opened {
        Ok(opened) => opened,
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
        journal_dir: journal_dir.to_owned(),
        session,
        approver,
        servers,
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
    let report: DriveReport =
        report.map_err(|e| failed(format!("{}: {e}", journal_dir.display())))?;
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
    let text = std::fs::read_to_string(path)
        .map_err(|e| failed(format!("{}: cannot read the script: {e}", path.display())))?;
    Ok(ScriptedModel::new(
        parse_script(&text, &path.display().to_string()).map_err(failed)?,
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
        plan_mode: false,
    };
    let prepared = prepare(None, journal_dir, workspace, setup, None)?;
    play(prepared, model, json)
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
    let file_config = config::load(args.config.as_deref())?;
    let setup = Setup {
        approve: args.approve,
        max_parallel: args.max_parallel,
        fsync: args.fsync,
        json: args.json,
        config: &file_config,
        plan_mode: args.plan_mode,
    };
    let prepared = prepare(Some(session_id), &journal_dir, &workspace, setup, None)?;
    if !args.json {
        outln!("session {}", prepared.session.session_id())?;
        outln!("journal: {}", journal_dir.display())?;
    }
    play(prepared, model, args.json)
}

pub fn resume(
    journal_dir: &Path,
    script: Option<&Path>,
    config_file: Option<&Path>,
) -> Result<(), CliError> {
    // Recovery first: balance the journal (never re-running anything), then continue.
    let recovered = recover::session::recover(journal_dir, true).map_err(|e| match e {
        recover::session::RecoverError::Failed(m) => CliError::Failed(m),
        recover::session::RecoverError::Corrupt(m) => CliError::Corrupt(m),
        recover::session::RecoverError::Newer(m) => CliError::Newer(m),
    })?;
    if recovered.analysis.live {
        return Err(failed(format!(
            "{}: the session is live (another process holds its journal); nothing to resume",
            journal_dir.display()
        )));
    }
    if recovered.appended {
        let unknown: Vec<_> = recovered
            .analysis
            .calls
            .iter()
            .filter(|c| {
                c.classification == Some(runtime::event::Classification::ToolOutcomeUnknown)
            })
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
    }
    let storage: Arc<dyn Storage> = Arc::new(FsStorage::open(journal_dir).map_err(|e| {
        failed(format!(
            "{}: cannot open the journal: {e}",
            journal_dir.display()
        ))
    })?);
    let (replay, end) = replay_storage(storage, journal::Limits::default()).map_err(failed)?;
    if let journal::ReadEnd::Corrupt(c) = end {
        return Err(CliError::Corrupt(format!("{}: {c}", journal_dir.display())));
    }
    let Some(open) = &replay.open else {
        outln!(
            "{}: empty journal: nothing to resume",
            journal_dir.display()
        )?;
        return Ok(());
    };
    if replay.closed {
        outln!(
            "{}: session {} already finished; nothing to resume",
            journal_dir.display(),
            open.session_id
        )?;
        return Ok(());
    }
    if let Some(turn) = replay.open_turn() {
        return Err(failed(format!(
            "{}: turn {} is still open after recovery",
            journal_dir.display(),
            turn.turn
        )));
    }
    let Some(script) = script else {
        outln!(
            "{}: session {} is balanced; give --script to continue it",
            journal_dir.display(),
            open.session_id
        )?;
        return Ok(());
    };
    let mut model = load_script(script)?;
    let consumed = consumed_lines(model.lines(), &replay)
        .map_err(|e| failed(format!("{}: {e}", script.display())))?;
    model.skip(consumed);
    let workspace = PathBuf::from(&open.workspace);
    let file_config = config::load(config_file)?;
    let setup = Setup {
        approve: Approve::Allow,
        max_parallel: 10,
        fsync: FsyncPolicy::Group,
        json: false,
        config: &file_config,
        // A resumed session keeps the plan mode its journal shows.
        plan_mode: false,
    };
    let prepared = prepare(None, journal_dir, &workspace, setup, Some(&replay))?;
    outln!(
        "resuming session {} after {consumed} script lines",
        open.session_id
    )?;
    play(prepared, model, false)
}
