//! `tooljournal-fuzz`: what `tooljournal fuzz` runs (DESIGN.md §12, *the CLI*). The same
//! command line: `tooljournal fuzz ARGS` checks the configuration file and replaces itself with
//! `tooljournal-fuzz ARGS`, the binary beside it.
//!
//! Why a binary of its own: the harness is test machinery (proptest's strategies and
//! shrinking, the runtime's `testing` feature, tokio's `test-util`), and a binary that links it
//! builds the runtime with that feature on for every session it runs. The `tooljournal` binary
//! links none of it (`tests/cli/release_deps.rs`); this one is the harness.
//!
//! Exit status: 0 no violation, 1 a violation found (or a usage or I/O error), 2 a transcript
//! or workspace template that cannot be used.

// A binary exports nothing: `pub` in its modules only shares items between them.
#![allow(unreachable_pub)]

/// `println!` for a person: returns [`CliError::StdoutClosed`] instead of panicking on a
/// closed pipe, and shows control, bidi and invisible characters as escapes
/// (`runtime::display`).
macro_rules! outln {
    ($($arg:tt)*) => { $crate::out(format_args!($($arg)*)) };
}

mod command;
mod config;
mod world;

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// The arguments of `tooljournal fuzz` (its `--help` says what each does in full).
#[derive(Parser)]
#[command(
    name = "tooljournal-fuzz",
    version,
    about = "Fuzz a transcript with the real tools: what `tooljournal fuzz` runs (see `tooljournal \
             fuzz --help`)"
)]
struct Cli {
    /// The transcript (DESIGN.md §10 format).
    #[arg(long, value_name = "FILE")]
    script: PathBuf,
    /// The directory every case's workspace starts as a copy of (default: empty).
    #[arg(long, value_name = "DIR")]
    workspace_template: Option<PathBuf>,
    /// A budget of this many seconds (with --cases: whichever ends first).
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
}

/// Every failure the binary reports, by exit code.
#[derive(Debug)]
pub enum CliError {
    /// Bad arguments, an I/O error, or a violation found: exit 1.
    Failed(String),
    /// The transcript or template cannot be used, so nothing was fuzzed: exit 2, apart from 1
    /// (a violation found), so a pipeline tells "found a bug" from "could not run".
    BadInput(String),
    /// Whoever reads our stdout went away (`| head`): stop quietly, exit 0.
    StdoutClosed,
}

pub(crate) fn failed(what: impl std::fmt::Display) -> CliError {
    CliError::Failed(what.to_string())
}

/// Writes one line for a person to stdout (hidden characters shown, `runtime::display`); a
/// closed pipe ends the command quietly instead of panicking.
pub fn out(line: std::fmt::Arguments) -> Result<(), CliError> {
    use std::io::Write;
    let text = line.to_string();
    let line = runtime::display::visible(&text);
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{line}") {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(CliError::StdoutClosed),
        Err(e) => Err(failed(format!("cannot write to stdout: {e}"))),
    }
}

/// The secrets this process was given taken out of every tool's reach before anything else
/// runs, as `tooljournal` does (`runtime::secrets`). Run through `tooljournal fuzz`, there are
/// none left to take (it took them before it ran this binary); run alone, there may be.
fn keep_secrets() -> Result<(), String> {
    runtime::take_secrets_from_environment(&runtime::SECRET_VARS).map_err(|e| e.to_string())?;
    runtime::seal_process().map_err(|e| {
        format!("cannot keep this process's memory from its tools (PR_SET_DUMPABLE): {e}")
    })
}

fn main() -> ExitCode {
    if let Err(e) = keep_secrets() {
        eprintln!("error: {e}");
        return ExitCode::from(1);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout and succeed; everything else is a usage error (1),
            // not clap's default of 2, which means a transcript that cannot be used here.
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = command::fuzz(command::FuzzArgs {
        script: cli.script,
        workspace_template: cli.workspace_template,
        seconds: cli.seconds,
        cases: cli.cases,
        seed: cli.seed,
        config: cli.config,
    });
    match result {
        Ok(()) | Err(CliError::StdoutClosed) => ExitCode::SUCCESS,
        Err(CliError::Failed(message)) => {
            eprintln!("error: {}", runtime::display::visible(&message));
            ExitCode::from(1)
        }
        Err(CliError::BadInput(message)) => {
            eprintln!("error: {}", runtime::display::visible(&message));
            ExitCode::from(2)
        }
    }
}
