//! `tooljournal resume`: recovery first (nothing re-run), then the session goes on under its
//! journaled policy with a live model (from the history recovery rebuilt) or a transcript's
//! next line.

use crate::agent_run;
use crate::policy;
use crate::run::{load_script, lock, play, prepare, session_is_live, wire, Opening, Setup, Wired};
use crate::{failed, CliError};
use journal::{FsStorage, Storage};
use runtime::event::{CallRef, RerunPolicy};
use runtime::replay::SessionReplay;
use runtime::transcript::consumed_lines;
use std::path::{Path, PathBuf};

/// What `tooljournal resume` was asked to do.
pub struct ResumeArgs<'a> {
    pub journal_dir: &'a Path,
    pub script: Option<&'a Path>,
    pub flags: policy::ResumeFlags,
    /// Turn plan mode on.
    pub plan_mode: bool,
    /// Kill process groups the crashed run left running instead of refusing to go on.
    pub kill_orphans: bool,
    /// What of the interrupted step runs again (`--rerun`; `None`: nothing).
    pub rerun: Option<RerunPolicy>,
    /// The live model to go on with (default: the one the journal records).
    pub model: crate::model_cli::ModelFlags,
    /// The turns to run with it.
    pub prompts: Vec<String>,
    /// Take a PostgreSQL session from a holder whose lease is live (`--steal`).
    pub steal: bool,
    /// How long to wait for a live lease to expire before giving up (without `--steal`).
    pub lease_wait_ms: u64,
}

/// Most looks a resume takes at the journal: it looks again when, under the writer lock, the
/// journal is no longer the one it looked at (another process held the lock meanwhile, wrote,
/// and let it go: each look again follows another process's progress).
const LOOKS_MAX: u32 = 3;

pub fn resume(args: ResumeArgs<'_>) -> Result<(), CliError> {
    if args.script.is_some() && (args.model.spec.is_some() || !args.prompts.is_empty()) {
        return Err(failed(
            "--script plays a transcript: it goes with neither --model nor --prompt",
        ));
    }
    // Process groups killed by an earlier look, journaled by the one that goes on.
    let mut killed = Vec::new();
    let mut looks = 1;
    loop {
        let changed = match resume_once(&args, &mut killed)? {
            Attempt::Done => return Ok(()),
            Attempt::Changed(changed) => changed,
        };
        // A steal is not taken again: the process that wrote meanwhile took the session
        // after it.
        let stealing = args.steal && crate::location::url(args.journal_dir).is_some();
        if looks >= LOOKS_MAX || stealing {
            return Err(failed(format!(
                "{}: {changed}; run `tooljournal resume` again",
                crate::location::shown(args.journal_dir)
            )));
        }
        eprintln!(
            "note: {}: {changed}; looking at it again",
            crate::location::shown(args.journal_dir)
        );
        looks += 1;
    }
}

/// How one look at the journal ended.
enum Attempt {
    /// The resume went on, or said why there was nothing to resume.
    Done,
    /// Under the lock, the journal was no longer the one looked at: what another process
    /// changed, in words.
    Changed(String),
}

/// One look at the journal, and the resume it decides, checked under the writer lock.
/// `killed`: the process groups killed so far (by this look or an earlier one), for the
/// journal.
fn resume_once(
    args: &ResumeArgs<'_>,
    killed: &mut Vec<(CallRef, u32)>,
) -> Result<Attempt, CliError> {
    let &ResumeArgs {
        journal_dir,
        script,
        ref flags,
        plan_mode,
        kill_orphans,
        rerun,
        ref model,
        ref prompts,
        steal,
        lease_wait_ms,
    } = args;
    // A session in PostgreSQL may be held by another worker's lease: wait for it to expire,
    // or (`--steal`) take it, but only once everything that could refuse has been checked
    // (below): a steal fences the holder off, and a resume that then refused would have
    // stopped a healthy writer for nothing.
    let stealing = steal && crate::location::url(journal_dir).is_some();
    if !stealing {
        take_or_wait(journal_dir, steal, lease_wait_ms)?;
    }
    // Read first, writing nothing: what the journal says decides what this resume does.
    let mut looked = recover_checked(journal_dir, false, None, false, stealing)?;
    // Another agent ran an imported journal's calls: refused before recovery writes anything.
    if let Some(source) = &looked.analysis.replay.imported {
        return Err(failed(format!(
            "{}: imported from {}'s session file {}: it is a record of that session and cannot \
             be resumed here (nothing was written)",
            crate::location::shown(journal_dir),
            source.agent,
            source.file
        )));
    }
    // The policy the journal holds decides how the journal is opened (its fsync), so it is
    // read before the lock, and checked again under it; what was said of it is said once it
    // is known to hold (a look another process overtook says nothing of a stale journal).
    let journaled = looked.analysis.replay.policy.clone();
    let resolved = policy::for_resume(journaled.as_ref(), flags.clone())?;
    let mut setup = Setup {
        journal: journal_dir,
        person: None,
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
    // Decided (and the model connected) before the lock: a missing key changes nothing.
    let live = match script {
        Some(_) => agent_run::Live::NoModel,
        None => agent_run::live(
            model,
            prompts.clone(),
            &resolved.config.config.model,
            &looked.analysis,
        )?,
    };
    // Calls run again only in a session that goes on; otherwise recovery balances the journal
    // as `recover` would, and nothing runs.
    let going_on = script.is_some() || matches!(live, agent_run::Live::Go(_));
    let rerun = rerun.filter(|_| going_on);
    if stealing {
        if looked.analysis.replay.closed && !matches!(live, agent_run::Live::Go(_)) {
            // Nothing to take it for: said as `still_resumable` says it, the holder untouched.
            if let Some(open) = &looked.analysis.replay.open {
                outln!(
                    "{}: session {} already finished; nothing to resume (nothing was taken)",
                    crate::location::shown(journal_dir),
                    open.session_id
                )?;
                return Ok(Attempt::Done);
            }
        }
        // The holder's running calls become orphans the moment it is fenced off.
        if going_on && !kill_orphans {
            refuse_running(journal_dir, &looked.analysis.replay)?;
        }
        // The session goes on in its own workspace, which must be here to go on in.
        if let Some(open) = &looked.analysis.replay.open {
            let here = std::fs::metadata(&open.workspace).map(|m| m.is_dir());
            if !matches!(here, Ok(true)) {
                return Err(failed(format!(
                    "{}: the session's workspace {} is not a directory here; nothing was taken",
                    crate::location::shown(journal_dir),
                    open.workspace
                )));
            }
        }
        take_or_wait(journal_dir, true, lease_wait_ms)?;
        looked = recover_checked(journal_dir, false, None, false, false)?;
    }
    // Groups killed before recovery probes the workspace: what it journals of them is then
    // true (they ended), not what it would have seen a moment before the kill.
    if kill_orphans && going_on {
        killed.extend(stop_orphans(journal_dir, &looked.analysis.replay, true)?);
    }
    let recovered = recover_first(journal_dir, looked, rerun)?;
    if matches!(live, agent_run::Live::Go(_)) {
        setup.person = agent_run::resume_person(resolved.approve);
    }
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
    } = wire(&workspace, journal_dir, &setup, true)?;
    // From here the writer lock is held: the replay below is the journal as it really ends,
    // and no other process can append before this session does (or finish it meanwhile).
    let locked = lock(builder)?;
    let replay = locked.replay();
    if replay.policy != journaled {
        // Another resume held the lock between the look and this lock, and journaled the
        // policy it ran with: the look is stale, the settings decided from it too.
        return Ok(Attempt::Changed(
            "another process changed the session's policy while this resume started".to_owned(),
        ));
    }
    for note in &resolved.notes {
        eprintln!("note: {note}");
    }
    // A finished session goes on only with new turns for a live model (`session/reopen`).
    let finished = match (script, &live) {
        (_, agent_run::Live::Go(_)) => Finished::GoesOn,
        (None, agent_run::Live::NeedsPrompt(_)) => Finished::StaysWithoutPrompt,
        _ => Finished::Stays,
    };
    let open = match still_resumable(journal_dir, replay, rerun.is_some(), finished)? {
        Resumable::Yes(open) => open,
        Resumable::Nothing => return Ok(Attempt::Done),
        Resumable::Changed(changed) => return Ok(Attempt::Changed(changed)),
    };
    let script = match (script, live) {
        (Some(script), _) => script,
        (None, agent_run::Live::Go(mut go)) => {
            killed.extend(stop_orphans(journal_dir, replay, kill_orphans)?);
            setup.killed = std::mem::take(killed);
            if let Some(note) =
                crate::withdrawn::withdrawal_note(replay, Path::new(&open.workspace))
            {
                eprintln!("note: questions withdrawn by the crash; the resumed turn says so");
                go.prepend_to_first_prompt(&note);
            }
            agent_run::resume(locked, setup, approver, printer, go, rerun)?;
            return Ok(Attempt::Done);
        }
        (None, agent_run::Live::NeedsPrompt(spec)) => {
            outln!(
                "{}: session {} is balanced; give --prompt TEXT to continue it with {spec}",
                crate::location::shown(journal_dir),
                open.session_id
            )?;
            return Ok(Attempt::Done);
        }
        (None, agent_run::Live::NoModel) => {
            outln!(
                "{}: session {} is balanced; give --script, or --model PROVIDER:MODEL with \
                 --prompt TEXT, to continue it",
                crate::location::shown(journal_dir),
                open.session_id
            )?;
            return Ok(Attempt::Done);
        }
    };
    killed.extend(stop_orphans(journal_dir, replay, kill_orphans)?);
    setup.killed = std::mem::take(killed);
    let mut model = load_script(script)?;
    let consumed = consumed_lines(model.lines(), replay)
        .map_err(|e| failed(format!("{}: {e}", script.display())))?;
    model.skip(consumed);
    let session_id = open.session_id.clone();
    let prepared = prepare(locked, setup, approver, printer, Opening::Resume { rerun })?;
    outln!("resuming session {session_id} after {consumed} script lines")?;
    play(prepared, model, false)?;
    Ok(Attempt::Done)
}

/// Recovery first: balances the journal so a resume continues a balanced session, probing the
/// session's workspace for calls that may have run (their results say what it found); refuses
/// one recovery could not write to. `looked` is the journal read without writing: when calls
/// of the interrupted step may run again (`--rerun`) it is left as it is, and the resume
/// recovers it under its own lock, its tools known (`run::Opening::Resume`).
fn recover_first(
    journal_dir: &Path,
    looked: recover::session::Recovered,
    rerun: Option<RerunPolicy>,
) -> Result<recover::session::Recovered, CliError> {
    if let Some(policy) = rerun {
        if !recover::rerun::candidates(&looked.analysis, policy).is_empty() {
            return Ok(looked);
        }
    }
    let workspace = crate::rerun::probe_target(&looked.analysis);
    let recovered = recover_checked(journal_dir, true, workspace.as_deref(), true, false)?;
    if recovered.appended {
        print_recovered(&recovered)?;
    }
    Ok(recovered)
}

/// Recovery, read-only or not (probing `workspace` when given), refusing a live session
/// (unless `live_ok`: a look before a steal) and one it could not write to; with `say`, its
/// notes go to stderr.
fn recover_checked(
    journal_dir: &Path,
    write: bool,
    workspace: Option<&Path>,
    say: bool,
    live_ok: bool,
) -> Result<recover::session::Recovered, CliError> {
    let recovered = recover::Recovery::of(crate::location::place(journal_dir)?)
        .write(write)
        .probe(workspace)
        .run()
        .map_err(|e| match e {
            recover::session::RecoverError::Corrupt(m) => CliError::Corrupt(m),
            recover::session::RecoverError::Newer(m) => CliError::Newer(m),
            // The rest are I/O failures: exit 1.
            other => CliError::Failed(other.to_string()),
        })?;
    if say {
        for note in recovered.notes() {
            eprintln!("note: {}: {note}", crate::location::shown(journal_dir));
        }
    }
    if recovered.analysis.live && !live_ok {
        if crate::location::url(journal_dir).is_some() {
            return Err(lease_is_live(journal_dir));
        }
        let storage = FsStorage::open(journal_dir).map_err(failed)?;
        return Err(session_is_live(journal_dir, storage.lock_holder_pid()));
    }
    if let Some(why) = &recovered.read_only_because {
        return Err(failed(format!(
            "{}: {why}; cannot resume",
            crate::location::shown(journal_dir)
        )));
    }
    Ok(recovered)
}

/// What becomes of a finished session: it goes on (a live model with prompts), or stays
/// finished (a model was given no prompt; a transcript, or no model at all, has no new turn).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Finished {
    GoesOn,
    Stays,
    StaysWithoutPrompt,
}

/// What the journal under the writer lock leaves a resume to do.
enum Resumable<'r> {
    /// Go on with this session.
    Yes(&'r runtime::event::SessionOpen),
    /// Nothing to resume (said on stdout).
    Nothing,
    /// Another process wrote to it after this resume's recovery: what, in words.
    Changed(String),
}

/// Checks, under the writer lock, that the journal is still the one recovery balanced and
/// that there is a session to continue.
fn still_resumable<'r>(
    journal_dir: &Path,
    replay: &'r SessionReplay,
    recovering: bool,
    finished: Finished,
) -> Result<Resumable<'r>, CliError> {
    let Some(open) = &replay.open else {
        outln!(
            "{}: empty journal: nothing to resume",
            crate::location::shown(journal_dir)
        )?;
        return Ok(Resumable::Nothing);
    };
    if replay.closed && finished != Finished::GoesOn {
        let hint = match finished {
            Finished::StaysWithoutPrompt => " (give --prompt TEXT to go on with a new turn)",
            _ => "",
        };
        outln!(
            "{}: session {} already finished; nothing to resume{hint}",
            crate::location::shown(journal_dir),
            open.session_id
        )?;
        return Ok(Resumable::Nothing);
    }
    // A re-running resume recovers the journal itself (`prepare`).
    if let Some(turn) = replay.open_turn().filter(|_| !recovering) {
        // Another process was interrupted between our recovery and our lock.
        return Ok(Resumable::Changed(format!(
            "turn {} is open again: another process wrote to the session after its recovery",
            turn.turn
        )));
    }
    Ok(Resumable::Yes(open))
}

/// How often a resume looks at a live lease it waits for.
const LEASE_POLL_MS_MAX: u64 = 200;

/// For a session in PostgreSQL: with `steal`, takes it from a live holder now (fenced off, the
/// steal journaled as `writer/stolen`); without, waits up to `wait_ms` for a live lease to
/// expire (a crashed worker's lease ends on its own; a live worker's does not). A directory
/// has no lease: its writer is a live process here, never stolen.
fn take_or_wait(journal_dir: &Path, steal: bool, wait_ms: u64) -> Result<(), CliError> {
    if crate::location::url(journal_dir).is_none() {
        if steal {
            return Err(failed(format!(
                "{}: --steal takes a PostgreSQL session's lease; a journal directory's writer                  is a live process on this machine, and is never taken over",
                crate::location::shown(journal_dir)
            )));
        }
        return Ok(());
    }
    let backend = crate::location::backend(journal_dir)?;
    if steal {
        let clock = runtime::eventlog::SystemClock;
        if let Some(holder) = runtime::takeover::steal(&backend, &clock)? {
            eprintln!(
                "note: {}: took the session from {} (epoch {}, {} ms of its lease left); \
                 its appends from now on are refused",
                crate::location::shown(journal_dir),
                holder.name,
                holder.epoch,
                holder.expires_in_ms
            );
        }
        return Ok(());
    }
    let started = std::time::Instant::now();
    let mut said = false;
    loop {
        let journal::WriterState::Leased(holder) = backend.writer_state()? else {
            return Ok(());
        };
        if !holder.live() {
            return Ok(());
        }
        let waited_ms = started.elapsed().as_millis() as u64;
        if waited_ms >= wait_ms {
            return Err(lease_is_live(journal_dir));
        }
        if !said {
            eprintln!(
                "note: {}: held by {} (lease expires in {} ms unless renewed); waiting up to \
                 {wait_ms} ms",
                crate::location::shown(journal_dir),
                holder.name,
                holder.expires_in_ms
            );
            said = true;
        }
        let left_ms = u64::try_from(holder.expires_in_ms).unwrap_or(0);
        let nap_ms = left_ms.clamp(1, LEASE_POLL_MS_MAX).min(wait_ms - waited_ms);
        std::thread::sleep(std::time::Duration::from_millis(nap_ms));
    }
}

/// The one message for "another worker holds this PostgreSQL session".
fn lease_is_live(journal_dir: &Path) -> CliError {
    let holder = crate::location::backend(journal_dir)
        .ok()
        .and_then(|b| b.writer_state().ok());
    let who = match holder {
        Some(journal::WriterState::Leased(h)) => format!(
            "{} (epoch {}, lease expires in {} ms unless renewed)",
            h.name, h.epoch, h.expires_in_ms
        ),
        _ => "another worker".to_owned(),
    };
    failed(format!(
        "{}: session is live: held by {who}; wait for its lease to expire, or take it with \
         `tooljournal resume --steal`",
        crate::location::shown(journal_dir)
    ))
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
                crate::location::shown(journal_dir),
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
                    crate::location::shown(journal_dir),
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

/// Before a steal, without `--kill-orphans`: refuses when a call's process group still runs.
/// The holder runs it now; fenced off, it could no longer settle it, and the resume would then
/// refuse to go on beside it: refused first, nothing taken.
fn refuse_running(journal_dir: &Path, replay: &SessionReplay) -> Result<(), CliError> {
    for (call, process) in replay.unsettled_processes() {
        if let Some(members) = runtime::process::still_running(&process) {
            return Err(failed(format!(
                "{}: {call}: still running: process group {} ({members} processes); taking the \
                 session would leave it running unwatched, so nothing was taken: wait for it, or \
                 resume with --steal --kill-orphans",
                crate::location::shown(journal_dir),
                process.pgid
            )));
        }
    }
    Ok(())
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
