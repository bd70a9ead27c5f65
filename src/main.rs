//! `tooljournal`: the command-line face of the runtime.
//!
//! This file parses arguments and is the one place that turns errors into exit codes
//! (DESIGN.md §10): 0 success, 1 usage or I/O error, 2 corrupt journal, 3 a journal written by
//! a newer tooljournal (docs/FORMAT.md, *Versioning*).

/// `println!` that returns [`CliError::StdoutClosed`] instead of panicking on a closed pipe.
macro_rules! outln {
    ($($arg:tt)*) => { $crate::out(format_args!($($arg)*)) };
}

mod config;
mod demo;
mod journal_cmd;
mod policy;
mod printer;
mod run;
mod sessions;

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
    /// Run a scripted session (JSON lines: user messages and model responses) on a workspace.
    Run {
        /// The transcript (DESIGN.md §10 format).
        #[arg(long)]
        script: PathBuf,
        /// The directory file tools may touch (default: the current directory).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// The session's journal directory (default: a new one under the state directory).
        #[arg(long)]
        journal: Option<PathBuf>,
        /// Most concurrency-safe calls running at once.
        #[arg(long, default_value_t = run::PARALLEL_MAX_DEFAULT)]
        max_parallel: usize,
        /// When records are made durable (`never` is unsafe: benchmarks only).
        #[arg(long, default_value = "group")]
        fsync: journal::FsyncPolicy,
        /// How asks the script does not answer are answered; `deny` also asks before every bash call.
        #[arg(long, value_enum, default_value = "allow")]
        approve: run::Approve,
        /// Print the journal's events as JSON lines instead of the table.
        #[arg(long)]
        json: bool,
        /// The configuration file: MCP servers, tool exposure (default:
        /// $XDG_CONFIG_HOME/tooljournal/config.toml, if it exists).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Start in plan mode: only read-only tools run until an `ask` is answered allow.
        #[arg(long)]
        plan_mode: bool,
    },
    /// Continue a session from its journal (with the script's first unconsumed line). The
    /// session's journaled policy (approval, parallelism, fsync, configuration file) is
    /// reapplied; a flag given here changes it, and the change is journaled.
    Resume {
        #[arg(long)]
        journal: PathBuf,
        #[arg(long)]
        script: Option<PathBuf>,
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
        approve: Option<run::Approve>,
        /// Turn plan mode on (it stays as journaled otherwise).
        #[arg(long)]
        plan_mode: bool,
        /// Kill process groups that calls of the crashed run left running (journaled);
        /// without it a resume refuses to go on while one runs.
        #[arg(long)]
        kill_orphans: bool,
    },
    /// List the sessions under the state directory.
    Sessions {
        #[arg(long)]
        json: bool,
    },
    /// Inspect a journal directory's bytes.
    Journal {
        #[command(subcommand)]
        command: JournalCommand,
    },
}

#[derive(Subcommand)]
enum JournalCommand {
    /// Check every record, frames and events (as `recover` reads them): exit 0 when clean or
    /// torn (printing the bytes a resume would drop), 2 on corruption (naming seq, segment and
    /// offset), 3 when written by a newer tooljournal.
    Verify {
        /// The journal directory.
        dir: PathBuf,
    },
    /// One line per record: seq, segment, offset, length (bytes on disk, frame included).
    Dump {
        /// The journal directory.
        dir: PathBuf,
        /// Print JSON objects, one per line.
        #[arg(long)]
        json: bool,
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

/// Writes one line to stdout; a closed pipe ends the command quietly instead of panicking.
pub fn out(line: std::fmt::Arguments) -> Result<(), CliError> {
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

/// mimalloc: the pipeline allocates a few dozen small objects per call (each event owns its
/// text), and glibc's malloc/free were about a third of its instructions.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Journals, spill stores and state hold tool arguments and results: nobody else's business.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
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
            script,
            workspace,
            journal,
            max_parallel,
            fsync,
            approve,
            json,
            config,
            plan_mode,
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
        }),
        Command::Resume {
            journal,
            script,
            config,
            max_parallel,
            fsync,
            approve,
            plan_mode,
            kill_orphans,
        } => run::resume(run::ResumeArgs {
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
        }),
        Command::Sessions { json } => sessions::list(json),
        Command::Journal { command } => match command {
            JournalCommand::Verify { dir } => journal_cmd::verify(&dir),
            JournalCommand::Dump { dir, json } => journal_cmd::dump(&dir, json),
        },
    };
    match result {
        Ok(()) | Err(CliError::StdoutClosed) => ExitCode::SUCCESS,
        Err(CliError::Failed(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
        Err(CliError::Corrupt(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
        Err(CliError::Newer(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(3)
        }
    }
}
