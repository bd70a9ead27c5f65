// A binary exports nothing: `pub` in its modules only shares items between them.
#![allow(unreachable_pub)]
//! `tooljournal`: the command-line face of the runtime.
//!
//! This file parses arguments and is the one place that turns errors into exit codes
//! (DESIGN.md §10): 0 success, 1 usage or I/O error, 2 corrupt journal, 3 a journal written by
//! a newer tooljournal (docs/FORMAT.md, *Versioning*). `fuzz` becomes `tooljournal-fuzz`
//! (`fuzz_cmd`), which says 1 also when it found a violation, and 2 when its transcript or
//! workspace template cannot be used.

/// `println!` for a person: returns [`CliError::StdoutClosed`] instead of panicking on a
/// closed pipe, and shows control, bidi and invisible characters as escapes
/// (`runtime::display`).
macro_rules! outln {
    ($($arg:tt)*) => { $crate::out(format_args!($($arg)*)) };
}

/// [`outln!`] for a line of data (JSON): written as it is.
macro_rules! dataln {
    ($($arg:tt)*) => { $crate::out_data(format_args!($($arg)*)) };
}

mod agent_run;
mod approval;
mod chat;
mod config;
mod demo;
mod fuzz_cmd;
mod journal_cmd;
mod journal_copy;
mod location;
mod model_cli;
mod policy;
mod printer;
mod rerun;
mod resume;
mod run;
mod sandbox_cli;
mod sessions;
mod system_prompt;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "tooljournal",
    version,
    about = "An event-sourced, crash-truthful runtime for LLM agents' tool calls"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a bundled agent session on a fresh temporary workspace (reads, an edit, a spilled
    /// result, refusals, a parallel batch, a stopped `bash` call), leave a copy of its journal
    /// cut as a crash would have left it, and say what to try on both. The newcomer's first
    /// command.
    Demo,
    /// Run a session on a workspace: a live model given prompts (`--model`, `--prompt`), or a
    /// transcript (`--script`: JSON lines of user messages and model responses).
    Run {
        /// The transcript (DESIGN.md §10 format).
        #[arg(long, required_unless_present_any = ["model", "prompt"], conflicts_with_all = ["model", "prompt", "base_url", "max_steps"])]
        script: Option<PathBuf>,
        /// The live model, PROVIDER:MODEL (openai-chat, openai-responses, anthropic, gemini);
        /// default: `[model]` in the configuration.
        #[arg(long, value_name = "PROVIDER:MODEL")]
        model: Option<String>,
        /// What the user says: each --prompt is one turn, in order.
        #[arg(long, value_name = "TEXT")]
        prompt: Vec<String>,
        /// Steps (model requests) per turn at most.
        #[arg(long, value_name = "N")]
        max_steps: Option<u32>,
        /// The provider's API base URL (an OpenAI-compatible server, a proxy).
        #[arg(long, value_name = "URL")]
        base_url: Option<String>,
        /// The directory file tools may touch (default: the current directory).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// The session's journal directory (default: a new one under the state directory).
        #[arg(long)]
        journal: Option<PathBuf>,
        /// Most concurrency-safe calls running at once.
        #[arg(long, default_value_t = policy::PARALLEL_MAX_DEFAULT)]
        max_parallel: usize,
        /// When records are made durable (`never` is unsafe: benchmarks only).
        #[arg(long, default_value = "group")]
        fsync: journal::FsyncPolicy,
        /// `allow`: nothing asks (questions are answered yes); `deny`: every bash call asks and
        /// unanswered questions are denied; `ask` (live model): every call that may change
        /// something asks on the terminal.
        #[arg(long, value_enum, default_value = "allow")]
        approve: policy::Approve,
        /// Print the journal's events as JSON lines instead of the table (`--script` only).
        #[arg(long, conflicts_with = "model")]
        json: bool,
        /// The configuration file: MCP servers, tool exposure (default:
        /// $XDG_CONFIG_HOME/tooljournal/config.toml, if it exists).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Start in plan mode: only read-only tools run until the user approves the plan (by choosing
        /// the `plan_option` of an `ask`).
        #[arg(long)]
        plan_mode: bool,
        #[command(flatten)]
        sandbox: sandbox_cli::SandboxFlags,
    },
    /// Continue a session from its journal: recovery first, then a live model from the rebuilt
    /// history (`--model`, default the one the journal records; `--prompt`, default a
    /// "continue" turn when the crash interrupted the last one), or the script's first
    /// unconsumed line. The session's journaled policy (approval, parallelism, fsync,
    /// configuration file) is reapplied; a flag given here changes it, and the change is
    /// journaled.
    Resume {
        /// The session's journal: a directory, or a session in PostgreSQL
        /// (`postgres://USER@HOST[:PORT]/DB?session=ID`).
        #[arg(long)]
        journal: PathBuf,
        #[arg(long)]
        script: Option<PathBuf>,
        /// The live model, PROVIDER:MODEL (default: the one the journal records).
        #[arg(long, value_name = "PROVIDER:MODEL")]
        model: Option<String>,
        /// What the user says: each --prompt is one turn.
        #[arg(long, value_name = "TEXT")]
        prompt: Vec<String>,
        /// Steps (model requests) per turn at most.
        #[arg(long, value_name = "N")]
        max_steps: Option<u32>,
        /// The provider's API base URL.
        #[arg(long, value_name = "URL")]
        base_url: Option<String>,
        /// The configuration file (default: the one the session was started with).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Most concurrency-safe calls running at once (default: as journaled).
        #[arg(long)]
        max_parallel: Option<usize>,
        /// When records are made durable (default: as journaled).
        #[arg(long)]
        fsync: Option<journal::FsyncPolicy>,
        /// How unanswered asks are answered (default: as journaled; `deny` for a journal that
        /// records no policy).
        #[arg(long, value_enum)]
        approve: Option<policy::Approve>,
        /// Turn plan mode on (it stays as journaled otherwise).
        #[arg(long)]
        plan_mode: bool,
        /// Kill process groups that calls of the crashed run left running (journaled);
        /// without it a resume refuses to go on while one runs.
        #[arg(long)]
        kill_orphans: bool,
        /// What of the interrupted step runs again, same call ids and arguments, before the
        /// model goes on: `not-started` its approved calls that provably never started;
        /// `safe` those and its calls of unknown outcome whose tool declares itself idempotent
        /// or read-only; `none` nothing.
        #[arg(long, value_enum, default_value = "not-started")]
        rerun: rerun::RerunFlag,
        /// A session in PostgreSQL held by another worker's live lease: take it now. The
        /// holder is fenced off (its next append fails and it stops) and the takeover is
        /// journaled (`writer/stolen`). Without it, a resume waits for the lease to expire.
        #[arg(long)]
        steal: bool,
        /// How long to wait for a live lease to expire before giving up (without --steal).
        #[arg(long, value_name = "MS", default_value_t = session::LEASE_WAIT_MS_DEFAULT)]
        lease_wait_ms: u64,
        #[command(flatten)]
        sandbox: sandbox_cli::SandboxFlags,
    },
    /// Talk with a live model on a workspace, interactively: its text streams as it arrives,
    /// each call shows a status line, questions are asked here. Ctrl-C stops the running turn
    /// (twice within a second: ends the session); Ctrl-D or /exit ends the session.
    Chat {
        /// PROVIDER:MODEL (default: `[model]` in the configuration).
        #[arg(long, value_name = "PROVIDER:MODEL")]
        model: Option<String>,
        /// The directory file tools may touch (default: the current directory).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// The session's journal directory (default: a new one under the state directory).
        #[arg(long)]
        journal: Option<PathBuf>,
        /// `ask`: every call that may change something asks first; `deny`: every bash call
        /// asks; `allow`: nothing asks.
        #[arg(long, value_enum, default_value = "ask")]
        approve: policy::Approve,
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Start in plan mode: only read-only tools run until an `ask` is answered yes.
        #[arg(long)]
        plan_mode: bool,
        /// The provider's API base URL (an OpenAI-compatible server, a proxy).
        #[arg(long, value_name = "URL")]
        base_url: Option<String>,
        /// Steps (model requests) per turn at most.
        #[arg(long, value_name = "N")]
        max_steps: Option<u32>,
        #[command(flatten)]
        sandbox: sandbox_cli::SandboxFlags,
    },
    /// Fuzz a transcript: run it many times with the real built-in and MCP tools, varying
    /// where the user stops a step, how approvals are answered and where the journal's disk
    /// fails; check the invariants and that the journal's word on every call agrees with the
    /// workspace's files.
    ///
    /// Each case runs on a fresh copy of the template workspace (empty without one), with the
    /// journal on a simulated disk that may fail or lose power at any I/O operation; then
    /// recovery, maybe a resume (`--rerun`), and the checks: the runtime's invariants, and the
    /// truth property over the files the transcript's `write` and `edit` calls name (by
    /// sha256): a call the journal says succeeded took effect, one it says never ran did not.
    /// A step is stopped at its start or the moment one of its bodies begins, never after a
    /// number of ms (real tools take real time: events, not times, make one seed give one
    /// report; a `cancel_after_ms` the transcript writes is kept, and may vary).
    ///
    /// Prints the first seed, then per call which final words were reached and how often (ok,
    /// each error code, ABORTED, ABORTED_BEFORE_DISPATCH, TOOL_NOT_STARTED,
    /// TOOL_OUTCOME_UNKNOWN), then `cases: N, violations: V`. The first violation stops the
    /// campaign; it is shrunk and printed as a transcript, and the exit status is 1. Exit 2:
    /// the transcript or the template cannot be used.
    ///
    /// Limits: a `bash` call, or an MCP call not declared read-only, may have changed any
    /// watched file, so after one the check knows those files only as far as later `write` and
    /// `edit` calls set them; the workspace's files are real, so a simulated power loss does not
    /// reach them; MCP servers start afresh for every session (in the workspace unless the
    /// configuration says where), so a case costs their start; tool exposure settings of the
    /// configuration are not applied.
    Fuzz {
        /// The transcript (DESIGN.md §10 format).
        #[arg(long, value_name = "FILE")]
        script: PathBuf,
        /// The directory every case's workspace starts as a copy of (default: empty).
        #[arg(long, value_name = "DIR")]
        workspace_template: Option<PathBuf>,
        /// A budget of this many seconds (with --cases: whichever ends first). No case begins
        /// after it; a case still running then is stopped as the user's stop would stop it,
        /// reported as cancelled, and counted as neither passed nor a violation. The campaign
        /// ends within S + 10 s: the runtime's 5 s cancel grace for the stopped bodies (`bash`:
        /// SIGTERM, then SIGKILL 2 s later) and the report; with MCP servers, plus a server
        /// start already under way (its startup timeout) and their stopping.
        #[arg(long, value_name = "S")]
        seconds: Option<u64>,
        /// Most cases (default: 100 when --seconds is not given).
        #[arg(long, value_name = "N")]
        cases: Option<u64>,
        /// The first case's seed; case k has seed + k (default: from the clock).
        #[arg(long, value_name = "S")]
        seed: Option<u64>,
        /// The configuration file, for its MCP servers (default:
        /// $XDG_CONFIG_HOME/tooljournal/config.toml, if it exists).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// List the sessions under the state directory, or in a store.
    Sessions {
        #[arg(long)]
        json: bool,
        /// Where the sessions are: a directory holding one journal directory per session
        /// (default: the state directory), or a PostgreSQL store (`postgres://USER@HOST/DB`).
        #[arg(long, value_name = "DIR|URL")]
        store: Option<PathBuf>,
    },
    /// Inspect a journal's records, or copy one.
    Journal {
        #[command(subcommand)]
        command: JournalCommand,
    },
    /// Manage a PostgreSQL store of journals.
    Store {
        #[command(subcommand)]
        command: StoreCommand,
    },
}

#[derive(Subcommand)]
enum StoreCommand {
    /// Create the store's tables, or migrate them to this build's schema version (idempotent;
    /// a store of a newer schema is refused).
    Init {
        /// The store: `postgres://USER@HOST[:PORT]/DB` (libpq URL syntax; `?host=/socket/dir`
        /// for a Unix socket).
        url: String,
    },
}

#[derive(Subcommand)]
enum JournalCommand {
    /// Check every record, frames and events (as `recover` reads them): exit 0 when clean or
    /// torn (printing the bytes a resume would drop), 2 on corruption (naming seq, segment and
    /// offset), 3 when written by a newer tooljournal.
    Verify {
        /// The journal: a directory, or `postgres://USER@HOST/DB?session=ID`.
        dir: PathBuf,
    },
    /// One line per record: seq, segment, offset, length (bytes on disk, frame included; for
    /// a journal in PostgreSQL, where the frame would sit in one segment).
    Dump {
        /// The journal: a directory, or `postgres://USER@HOST/DB?session=ID`.
        dir: PathBuf,
        /// Print JSON objects, one per line.
        #[arg(long)]
        json: bool,
    },
    /// Copy a journal record by record between a directory and PostgreSQL (either way),
    /// checking every record; the destination must hold nothing yet. A torn tail is not
    /// copied (it is no record); a corrupt source is refused at the damage (exit 2).
    Copy {
        /// The journal copied: a directory, or `postgres://USER@HOST/DB?session=ID`.
        src: PathBuf,
        /// Where the copy goes (a directory is created if missing).
        dst: PathBuf,
    },
}

/// Every failure the binary reports, by exit code.
#[derive(Debug)]
pub enum CliError {
    /// Bad arguments, or an I/O error: exit 1.
    Failed(String),
    /// The journal is corrupt (not merely torn): exit 2.
    Corrupt(String),
    /// The journal was written by a newer tooljournal (a newer event schema): exit 3.
    Newer(String),
    /// Whoever reads our stdout went away (`| head`): stop quietly, exit 0.
    StdoutClosed,
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Failed(m) | CliError::Corrupt(m) | CliError::Newer(m) => f.write_str(m),
            CliError::StdoutClosed => f.write_str("stdout closed"),
        }
    }
}

/// A [`CliError::Failed`] saying `what`.
pub(crate) fn failed(what: impl std::fmt::Display) -> CliError {
    CliError::Failed(what.to_string())
}

/// Writes one line for a person to stdout (hidden characters shown, `runtime::display`); a
/// closed pipe ends the command quietly instead of panicking.
pub fn out(line: std::fmt::Arguments) -> Result<(), CliError> {
    out_data(format_args!(
        "{}",
        runtime::display::visible(&line.to_string())
    ))
}

/// Writes one line of data to stdout as it is; a closed pipe ends the command quietly.
pub fn out_data(line: std::fmt::Arguments) -> Result<(), CliError> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{line}") {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(CliError::StdoutClosed),
        Err(e) => Err(CliError::Failed(format!("cannot write to stdout: {e}"))),
    }
}

impl From<journal::JournalError> for CliError {
    fn from(e: journal::JournalError) -> CliError {
        match e.root() {
            journal::JournalError::Corrupt { .. } => CliError::Corrupt(e.to_string()),
            _ => CliError::Failed(e.to_string()),
        }
    }
}

/// The session layer's refusals as exit codes.
impl From<session::ResumeError> for CliError {
    fn from(e: session::ResumeError) -> CliError {
        match e {
            session::ResumeError::Corrupt(m) => CliError::Corrupt(m),
            session::ResumeError::Newer(m) => CliError::Newer(m),
            other => CliError::Failed(other.to_string()),
        }
    }
}

/// mimalloc: the pipeline allocates a few dozen small objects per call (each event owns its
/// text), and glibc's malloc/free were about a third of its instructions.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The secrets this process was given (model keys, the database password) taken out of every
/// tool's reach, before anything else runs: out of the environment (kept for the adapters and
/// the store), wiped from the initial environment the kernel shows, the process sealed
/// (`runtime::secrets`).
fn keep_secrets() -> Result<(), String> {
    runtime::take_secrets_from_environment(&runtime::SECRET_VARS).map_err(|e| e.to_string())?;
    pg::set_default_password(runtime::secret_var("PGPASSWORD"));
    runtime::seal_process().map_err(|e| {
        format!("cannot keep this process's memory from its tools (PR_SET_DUMPABLE): {e}")
    })
}

fn main() -> ExitCode {
    if let Err(e) = keep_secrets() {
        eprintln!("error: {e}");
        return ExitCode::from(1);
    }
    // No umask of our own: tools create the user's files with the user's umask, and every file
    // of ours (journal, spill store, state, logs) is given its mode (0600, 0700) as it is made.
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout and succeed; everything else is a usage error (1),
            // not clap's default of 2, which this CLI reserves for corrupt journals.
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Demo => demo::run(),
        Command::Run {
            script: Some(script),
            workspace,
            journal,
            max_parallel,
            fsync,
            approve,
            json,
            config,
            plan_mode,
            sandbox,
            ..
        } => run::run(run::RunArgs {
            script,
            workspace,
            journal,
            max_parallel,
            fsync,
            approve,
            json,
            config,
            plan_mode,
            sandbox,
        }),
        Command::Run {
            script: None,
            model,
            prompt,
            max_steps,
            base_url,
            workspace,
            journal,
            max_parallel,
            fsync,
            approve,
            json: _,
            config,
            plan_mode,
            sandbox,
        } => agent_run::run(agent_run::RunArgs {
            prompts: prompt,
            flags: model_cli::ModelFlags {
                spec: model,
                base_url,
                steps_max: max_steps,
            },
            workspace,
            journal,
            max_parallel,
            fsync,
            approve,
            config,
            plan_mode,
            sandbox,
        }),
        Command::Chat {
            model,
            workspace,
            journal,
            approve,
            config,
            plan_mode,
            base_url,
            max_steps,
            sandbox,
        } => chat::chat(chat::ChatArgs {
            flags: model_cli::ModelFlags {
                spec: model,
                base_url,
                steps_max: max_steps,
            },
            workspace,
            journal,
            approve,
            config,
            plan_mode,
            sandbox,
        }),
        Command::Resume {
            journal,
            script,
            model,
            prompt,
            max_steps,
            base_url,
            config,
            max_parallel,
            fsync,
            approve,
            plan_mode,
            kill_orphans,
            rerun,
            steal,
            lease_wait_ms,
            sandbox,
        } => resume::resume(resume::ResumeArgs {
            journal_dir: &journal,
            script: script.as_deref(),
            flags: policy::ResumeFlags {
                approve,
                max_parallel,
                fsync,
                config,
            },
            plan_mode,
            kill_orphans,
            rerun: rerun.policy(),
            model: model_cli::ModelFlags {
                spec: model,
                base_url,
                steps_max: max_steps,
            },
            prompts: prompt,
            steal,
            lease_wait_ms,
            sandbox,
        }),
        Command::Fuzz {
            script,
            workspace_template,
            seconds,
            cases,
            seed,
            config,
        } => fuzz_cmd::fuzz(fuzz_cmd::FuzzArgs {
            script,
            workspace_template,
            seconds,
            cases,
            seed,
            config,
        }),
        Command::Sessions { json, store } => sessions::list(json, store.as_deref()),
        Command::Journal { command } => match command {
            JournalCommand::Verify { dir } => journal_cmd::verify(&dir),
            JournalCommand::Dump { dir, json } => journal_cmd::dump(&dir, json),
            JournalCommand::Copy { src, dst } => journal_copy::copy(&src, &dst),
        },
        Command::Store { command } => match command {
            StoreCommand::Init { url } => journal_cmd::store_init(&url),
        },
    };
    match result {
        Ok(()) | Err(CliError::StdoutClosed) => ExitCode::SUCCESS,
        Err(CliError::Failed(message)) => {
            eprintln!("error: {}", runtime::display::visible(&message));
            ExitCode::from(1)
        }
        Err(CliError::Corrupt(message)) => {
            eprintln!("error: {}", runtime::display::visible(&message));
            ExitCode::from(2)
        }
        Err(CliError::Newer(message)) => {
            eprintln!("error: {}", runtime::display::visible(&message));
            ExitCode::from(3)
        }
    }
}
