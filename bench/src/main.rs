//! `bench`: measures tooljournal against the disk it runs on.
//!
//! Every durable figure is set against the raw fdatasync rate of the same disk, measured in the
//! same run: absolute numbers vary by orders of magnitude between machines, the ratio does not.
//! Missed targets are reported, never turned into a failing exit code: a slow CI disk or a noisy
//! neighbour is not a bug, and the numbers are worth seeing either way.
//!
//! Usage: `cargo run --release -p tooljournal-bench --features sqlite -- journal|runtime|sse|bounds
//! [--quick] [--json] [--dir DIR]`, or `chart --out FILE [--quick] [--dir DIR]` (the binary
//! requires the package's `sqlite` feature, which brings in the SQLite baseline, so that `cargo
//! test --workspace` never compiles SQLite). docs/PERFORMANCE.md has the figures and what each
//! means.
//!
//! - `journal`: the raw fdatasync rate, durable appends (always/group), unsynced appends, reader,
//!   and the reader on a crafted torn tail (the tail scan's worst case, 1-8 MiB).
//! - `runtime`: durable tool calls/s through the whole runtime, side by side with what a user
//!   would otherwise pick (JSON lines with an fsync per record, SQLite WAL with
//!   synchronous=FULL, sled with a flush per record; JSON lines and SQLite also with the
//!   runtime's own plan, one sync per call at `started`), the raw append and overwrite rates,
//!   1, 8 and 64 sessions at once beside as many raw writers, the pipeline's own cost with fsync
//!   off, and recovery speed and peak memory on a generated journal of 1 GiB (100 MiB quick);
//!   and seq and par16 with the journal in PostgreSQL (a server the bench starts, with fsync
//!   on), and 64 sessions over 4 worker processes on PostgreSQL and on files.
//! - `sse`: the model adapters' stream decoding (`tooljournal_llm::decode`) in MB/s, per
//!   provider format, on a stream of tool-call deltas of about 10 MB (2 MB quick) recorded from
//!   the `mockllm` loopback server; target 100 MB/s. No disk: `--dir` is not used.
//! - `bounds`: peak memory of what a hostile provider or file can make tooljournal hold: a
//!   300 MB event, a 100 MB session-file line, `recover import` and `repair` of a 1 GiB rollout
//!   (128 MiB quick), each in a child process of its own.
//! - `sandbox`: `bash -c true` started under a `workspace-write` sandbox and without one, in
//!   alternating rounds: the sandbox's cost per `bash` call (`bash_sandboxed_vs_unsandboxed`).
//! - `chart`: the four above, one after the other, and every figure that has a target drawn as
//!   its ratio to that target, into one SVG (`chart`).
//!
//! This file is the command line and its dispatch; `journal_bench`, `runtime_bench`,
//! `sse_bench` and `bounds_bench` are the four benchmarks, `chart` the picture of them, and
//! `disk` what the first two measure with (the raw fdatasync loop, segment sizes, scratch
//! directories).

mod bar;
mod bounds_bench;
mod chart;
mod disk;
mod journal_bench;
mod runtime_bench;
mod sandbox_bench;
mod sse_bench;
mod usage;

use clap::{Args, Parser, Subcommand};
use journal::FsyncPolicy;
use std::path::PathBuf;
use std::process::ExitCode;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Megabytes as every table prints them: 10^6 bytes.
const MB: f64 = 1e6;
const MIB: u64 = 1 << 20;

/// Progress goes to stderr so that `--json` output stays one clean object on stdout.
fn say(msg: &str) {
    eprintln!("bench: {msg}");
}

#[derive(Parser)]
#[command(name = "bench", about = "Benchmarks for tooljournal")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    common: Common,
}

/// Flags every benchmark takes (global, so they may come before or after the subcommand).
#[derive(Args, Clone, Debug)]
struct Common {
    /// Short runs (well under a minute in total).
    #[arg(long, global = true)]
    quick: bool,
    /// Print one JSON object with every figure instead of the table.
    #[arg(long, global = true)]
    json: bool,
    /// Directory to benchmark in (a temporary directory is made inside it and removed after);
    /// default: the system temporary directory.
    #[arg(long, global = true, value_name = "DIR")]
    dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Raw fdatasync limit, durable appends (always/group), unsynced appends, reader speed.
    Journal,
    /// Durable tool calls/s through the runtime against JSONL, SQLite and sled; 1, 8 and 64
    /// sessions at once; the pipeline's cost with fsync off; recovery MB/s and peak memory.
    Runtime,
    /// The model adapters' stream decoding in MB/s per provider format, on a recorded stream of
    /// tool-call deltas of about 10 MB.
    Sse,
    /// What the sandbox costs a `bash` call: `bash -c true` started confined and unconfined.
    Sandbox,
    /// Peak memory of a 300 MB provider event, a 100 MB session-file line, and `recover
    /// import` / `repair` of a 1 GiB rollout.
    Bounds,
    /// Runs journal, runtime, sse and bounds (each in its quick form with --quick) and draws
    /// every figure that has a target as its ratio to that target, into one SVG file; the
    /// figures go to stdout too.
    Chart {
        /// The SVG file to write (replaced if it exists).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Internal: one measurement of `bounds` (WORK on PATH), printing one JSON line with this
    /// process's peak RSS.
    #[command(hide = true)]
    BoundsChild {
        #[arg(value_enum)]
        work: bounds_bench::ChildWork,
        path: PathBuf,
    },
    /// Internal: recovers (read only) the journal in DIR and prints one JSON line with the time
    /// taken and this process's peak RSS. Run by `runtime` as a child process so that the peak
    /// is the recovery's alone.
    #[command(hide = true)]
    RecoverChild {
        dir: PathBuf,
        /// `classify`, or `rebuild`, `audit` and `audit-html`: which command to measure.
        #[arg(long, value_enum, default_value = "classify")]
        work: runtime_bench::recovery::ChildWork,
    },
    /// Internal, for profiling: writes the `runtime` benchmark's recovery journal into DIR
    /// (which must not hold one) and keeps it.
    #[command(hide = true)]
    GenerateJournal {
        dir: PathBuf,
        #[arg(long, default_value_t = 100)]
        mib: u64,
    },
    /// Internal, for profiling: one `runtime` session run (seq, par16 or nosync) alone.
    #[command(hide = true)]
    SessionLoop {
        #[arg(long, default_value = "never")]
        policy: FsyncPolicy,
        #[arg(long, default_value_t = 1)]
        calls: usize,
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Tokio worker threads (0: a current-thread runtime).
        #[arg(long, default_value_t = 1)]
        workers: usize,
    },
    /// Internal: one of `runtime`'s worker processes: SESSIONS sessions with their
    /// journals in the directory AT or, for a `postgres://` URL, as sessions PREFIX-s<i> of that
    /// store; says `ready` on stdout when warmed up, runs for SECONDS after reading `go` on
    /// stdin, then prints one JSON line of what it measured.
    #[command(hide = true)]
    SessionsWorker {
        #[arg(long)]
        sessions: usize,
        #[arg(long)]
        seconds: f64,
        #[arg(long)]
        at: String,
        #[arg(long, default_value = "w")]
        prefix: String,
    },
    /// Internal, for deciding whether sessions should share fsyncs: N sessions at once on a
    /// runtime of W workers, N raw writer threads, and N files made durable by one syncfs.
    #[command(hide = true)]
    ManyLoop {
        #[arg(long, default_value_t = 64)]
        sessions: usize,
        #[arg(long, default_value_t = 2)]
        workers: usize,
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Each journal syncs on its own (`Options::share_syncs = false`): what sharing wins.
        #[arg(long)]
        own_syncs: bool,
    },
}

/// mimalloc: the pipeline allocates a few dozen small objects per call (each event owns its
/// text), and glibc's malloc/free were about a third of its instructions.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Journal => journal_bench::run(&cli.common),
        Command::Runtime => runtime_bench::run(&cli.common),
        Command::Sse => sse_bench::run(&cli.common),
        Command::Sandbox => sandbox_bench::run(&cli.common),
        Command::Bounds => bounds_bench::run(&cli.common),
        Command::Chart { out } => chart::run(&cli.common, &out),
        Command::BoundsChild { work, path } => bounds_bench::bounds_child(work, &path),
        Command::RecoverChild { dir, work } => runtime_bench::recovery::recover_child(&dir, work),
        Command::GenerateJournal { dir, mib } => runtime_bench::generate::generate_only(&dir, mib),
        Command::SessionLoop {
            policy,
            calls,
            seconds,
            workers,
        } => runtime_bench::session::session_loop(&cli.common, policy, calls, seconds, workers),
        Command::ManyLoop {
            sessions,
            workers,
            seconds,
            own_syncs,
        } => {
            runtime_bench::session::SHARE_SYNCS
                .store(!own_syncs, std::sync::atomic::Ordering::Relaxed);
            runtime_bench::many::many_loop(&cli.common, sessions, workers, seconds)
        }
        Command::SessionsWorker {
            sessions,
            seconds,
            at,
            prefix,
        } => runtime_bench::procs::sessions_worker(sessions, seconds, &at, &prefix),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
