//! `fuzz`: run a campaign of simulated sessions and check every invariant.
//!
//! `cargo run --release -p tooljournal-fuzz -- --seconds 600` runs for ten minutes from a random seed;
//! `--seed S` starts (or replays) at seed S; `--cases N` bounds the count; `--threads N` runs cases
//! on N threads (the same seeds, the same verdicts; the speed line says `on N threads`). Before
//! the verdict it prints, per fault kind, how many cases drew it and how many it fired in, and
//! how many distinct (fault kind, event before it) pairs the campaign met. The last line is always
//! `cases: N, violations: V`; exit 0 when V is 0, 1 otherwise (with the seed and the
//! shrunk case printed before it).

use clap::Parser;
// The library of this package, by the short name the workspace uses.
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tooljournal_fuzz as fuzz;

/// mimalloc, as the `tooljournal` binary runs with: a case decodes its journal a dozen times and
/// renders its history for every provider, small allocations that glibc's malloc served slowly.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "fuzz",
    about = "Simulate sessions with cancels, crashes and faults; check DESIGN.md §7"
)]
struct Cli {
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// The first seed (default: from the clock, printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Stop after this many cases.
    #[arg(long)]
    cases: Option<u64>,
    /// Run cases on this many threads (the same seeds give the same verdicts and the same
    /// first violation; the speed printed says how many threads made it).
    #[arg(long, default_value_t = 1)]
    threads: usize,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let seed = cli.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    });
    fuzz::quiet_simulated_panics();
    println!("fuzz: first seed {seed}");
    let started = Instant::now();
    let campaign = fuzz::campaign_on(
        cli.threads,
        seed,
        cli.cases.unwrap_or(u64::MAX),
        started + Duration::from_secs(cli.seconds),
        None,
    );
    let cases = campaign.ran;
    let elapsed = started.elapsed().as_secs_f64();
    let on = match cli.threads {
        0 | 1 => String::new(),
        n => format!(" on {n} threads"),
    };
    println!(
        "{:.1} cases/s over {elapsed:.1} s{on}",
        cases as f64 / elapsed.max(1e-9)
    );
    println!("{}", campaign.faults);
    println!("{}", campaign.coverage);
    match campaign.found {
        None => {
            println!("cases: {cases}, violations: 0");
            ExitCode::SUCCESS
        }
        Some(f) => {
            println!(
                "violation at seed {} (replay: --seed {} --cases 1)",
                f.seed, f.seed
            );
            for v in &f.violations {
                println!("  {v}");
            }
            println!("shrunk case: {:#?}", f.case);
            println!("cases: {cases}, violations: 1");
            ExitCode::from(1)
        }
    }
}
