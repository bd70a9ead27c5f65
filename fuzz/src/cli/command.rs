//! `tooljournal fuzz --script FILE`: a transcript run many times with the real built-in and MCP
//! tools, each time on a fresh copy of a template workspace, with what goes wrong around it
//! drawn by the user fuzz harness (`tooljournal_fuzz::Harness`): the user stopping a step, the
//! approvals' answers, the journal's (simulated) disk failing or losing power, a resume. Every
//! case is checked against the runtime's invariants and the truth property over the files the
//! transcript's `write` and `edit` calls name ([`WorkspaceWorld`]).
//!
//! Why the real clock with cancels at events only: real tools take real time, so a cancel "after
//! 20 ms" would land at a different point of a real command from one run to the next; a cancel
//! at step start or the moment a body begins lands at the same point every time, so one seed
//! gives one report (DESIGN.md §12, *Real tools, real clock*).
//!
//! Limits, said in `--help` and README too: a `bash` call, or an MCP call the configuration does
//! not declare read-only, may have changed any watched file, so after one the check knows those
//! files only as far as later `write` and `edit` calls set them; the workspace's files are real,
//! so they are not subject to the simulated power loss. MCP servers start afresh for every
//! session, in the workspace unless the configuration says where (`world`).

use crate::config;
use crate::world::{CaseWorld, Servers};
use crate::{failed, CliError};
use runtime::event::ToolSource;
use runtime::Tool;
use runtime::Workspace;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tooljournal_fuzz::{
    turns_of, written_paths, Budget, Clock, Harness, Progress, ToolFactory, Turn, WorkspaceWorld,
};

/// Cases a campaign runs when neither `--cases` nor `--seconds` bounds it.
pub const CASES_DEFAULT: u64 = 100;

pub struct FuzzArgs {
    /// The transcript.
    pub script: PathBuf,
    /// What each case's workspace starts as (None: empty).
    pub workspace_template: Option<PathBuf>,
    /// No case begins after this long.
    pub seconds: Option<u64>,
    /// Most cases.
    pub cases: Option<u64>,
    /// The first case's seed (None: from the clock).
    pub seed: Option<u64>,
    /// The configuration file, for its MCP servers.
    pub config: Option<PathBuf>,
}

/// Bad input: the transcript or the template cannot be used (exit 2).
fn bad_input(message: String) -> CliError {
    CliError::BadInput(message)
}

pub fn fuzz(args: FuzzArgs) -> Result<(), CliError> {
    let turns = load_turns(&args.script)?;
    if let Some(template) = &args.workspace_template {
        match std::fs::metadata(template) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(bad_input(format!(
                    "{}: the workspace template is not a directory",
                    template.display()
                )))
            }
            Err(e) => {
                return Err(bad_input(format!(
                    "{}: cannot read the workspace template: {e}",
                    template.display()
                )))
            }
        }
    }
    let configured = config::load(args.config.as_deref())?;
    let seed = args.seed.unwrap_or_else(seed_from_clock);
    // First, so that a campaign stopped halfway can still be replayed.
    outln!("first seed {seed}")?;

    let temp = tempfile::Builder::new()
        .prefix("tooljournal-fuzz-")
        .tempdir()
        .map_err(|e| failed(format!("cannot make a temporary directory: {e}")))?;
    let dir = temp.path().join("workspace");
    let world = WorkspaceWorld::new(
        args.workspace_template.clone(),
        dir.clone(),
        written_paths(&turns),
    );
    // Once here, so that a template that cannot be copied is reported, not met mid-campaign.
    world
        .try_reset()
        .map_err(|e| match &args.workspace_template {
            Some(t) => bad_input(format!(
                "cannot copy the workspace template {}: {e}",
                t.display()
            )),
            None => failed(format!("cannot make the workspace {}: {e}", dir.display())),
        })?;

    // The servers' transports run on this runtime, kept alive for the whole campaign; each case
    // runs on a runtime of its own and talks to them through it.
    let rt = tokio_runtime()?;
    let servers = Arc::new(Servers::new(
        rt.handle().clone(),
        configured,
        temp.path().to_owned(),
        dir.clone(),
    ));
    let forbidden: Vec<PathBuf> = config::state_root().into_iter().collect();

    let mut harness = Harness::new();
    let settings = harness.settings_mut();
    settings.clock = Clock::Real;
    settings.plan.timed_cancels = false;
    // A call's time limit as `tooljournal run` has it: real tools, real time.
    settings.timeout_ms = runtime::Config::default().timeout_ms;
    // And as long to stop after a cancel: a real command takes real time to stop.
    settings.cancel_grace_ms = runtime::Config::default().cancel_grace_ms;
    let factory_dir = dir.clone();
    let factory_servers = servers.clone();
    // Every session gets its own servers, as every run of `tooljournal` does.
    let factory: ToolFactory = Arc::new(move || {
        let ws = Workspace::new(&factory_dir, &forbidden)
            .map_err(|e| format!("the workspace {}: {e}", factory_dir.display()))?;
        let mut tools: Vec<(Arc<dyn Tool>, ToolSource)> = runtime::builtins(&Arc::new(ws))
            .into_iter()
            .map(|t| (t, ToolSource::BuiltIn))
            .collect();
        tools.extend(factory_servers.restart()?);
        Ok(tools)
    });
    // Every tool acts on the workspace as far as the check knows, save those that say they
    // only read: a `bash` or MCP call may have changed any watched file.
    // (Its servers starting is also where a server that cannot start is reported.)
    let tools = factory().map_err(failed)?;
    let read_only = tools
        .iter()
        .filter(|(t, _)| t.is_read_only())
        .map(|(t, _)| t.name().to_owned());
    let world = CaseWorld {
        files: world.reading_only(read_only),
        servers: servers.clone(),
    };
    let names: Vec<String> = tools.iter().map(|(t, _)| t.name().to_owned()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    harness.tools_each_session(factory);
    harness.observe(world, &names);
    // Calls of unknown outcome are probed in the workspace as the crash left it, as
    // `recover --probe` would, and the verdicts held to what the bodies did.
    harness.probe(&dir);

    let budget = Budget {
        first_seed: seed,
        cases: match (args.cases, args.seconds) {
            (Some(n), _) => n,
            (None, Some(_)) => u64::MAX,
            (None, None) => CASES_DEFAULT,
        },
        deadline: args
            .seconds
            .map(|s| Instant::now() + Duration::from_secs(s)),
    };
    let bar = progress_bar(budget.cases);
    let report = harness.campaign_with(&harness.script_cases(turns), budget, &mut |p: Progress| {
        if let Some(bar) = &bar {
            bar.set_position(p.ran);
            bar.set_message(format!("violations: {}", p.violations));
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    servers.stop();

    // The report opens with the seed, already printed.
    let text = report.to_string();
    let first = format!("first seed {seed}\n");
    outln!("{}", text.strip_prefix(&first).unwrap_or(&text))?;
    match &report.found {
        Some(found) => Err(failed(format!(
            "a violation at seed {} (replay it: --seed {} --cases 1)",
            found.seed, found.seed
        ))),
        None => Ok(()),
    }
}

/// The transcript's turns; every way it cannot be used names the file (and the line).
fn load_turns(path: &Path) -> Result<Vec<Turn>, CliError> {
    let file = std::fs::File::open(path).map_err(|e| {
        bad_input(format!(
            "{}: cannot read the transcript: {e}",
            path.display()
        ))
    })?;
    // Read line by line: a line over the limit is refused before it is all in memory.
    let lines = runtime::read_script(std::io::BufReader::new(file), &path.display().to_string())
        .map_err(bad_input)?;
    let turns = turns_of(&lines).map_err(|e| bad_input(format!("{}: {e}", path.display())))?;
    if turns.is_empty() {
        return Err(bad_input(format!(
            "{}: no user line: there is nothing to run",
            path.display()
        )));
    }
    Ok(turns)
}

/// The runtime the MCP servers' transports run on, as `tooljournal run` has it.
fn tokio_runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| failed(format!("cannot start the async runtime: {e}")))
}

/// A seed nobody chose: the clock's nanoseconds.
fn seed_from_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        // Truncated: any 64 bits of it make a seed.
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A bar on stderr when it is a terminal (a spinner when only `--seconds` bounds the campaign);
/// nothing otherwise.
fn progress_bar(cases: u64) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let (bar, template) = if cases == u64::MAX {
        (
            indicatif::ProgressBar::new_spinner(),
            "{spinner} {pos} cases, {msg} [{elapsed}]",
        )
    } else {
        (
            indicatif::ProgressBar::new(cases),
            "{wide_bar} {pos}/{len} cases, {msg} [{elapsed}, {eta} left]",
        )
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    Some(bar)
}
