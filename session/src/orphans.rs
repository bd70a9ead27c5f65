//! Process groups a crashed run's calls started that still run: a resume does not go on beside
//! them (they may still be changing the workspace) unless told to kill them.

use crate::{Hooks, ResumeError};
use journal::Location;
use runtime::event::CallRef;
use runtime::replay::SessionReplay;

/// How long a killed process group may take to disappear.
const ORPHAN_KILL_WAIT_MS: u64 = 5_000;

/// Refuses (without `kill`) or kills the process groups still running; returns the groups
/// killed, for the journal (`process/killed`).
pub(crate) fn stop(
    location: &Location,
    replay: &SessionReplay,
    kill: bool,
    hooks: &mut dyn Hooks,
) -> Result<Vec<(CallRef, u32)>, ResumeError> {
    let mut killed = Vec::new();
    for (call, process) in replay.unsettled_processes() {
        let Some(members) = runtime::process::still_running(&process) else {
            continue;
        };
        if !kill {
            return Err(ResumeError::Refused(format!(
                "{location}: {call}: still running: process group {} ({members} processes), \
                 started before the session was interrupted; stop it, or resume with \
                 --kill-orphans",
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
                return Err(ResumeError::Failed(format!(
                    "{location}: {call}: process group {} still runs {ORPHAN_KILL_WAIT_MS} ms \
                     after SIGKILL",
                    process.pgid
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        hooks.note(&format!(
            "{call}: killed process group {} ({members} processes) left running by the crashed run",
            process.pgid
        ));
        killed.push((call, process.pgid));
    }
    Ok(killed)
}

/// Before a steal, without `kill_orphans`: refuses when a call's process group still runs.
/// The holder runs it now; fenced off, it could no longer settle it, and the resume would then
/// refuse to go on beside it: refused first, nothing taken.
pub(crate) fn refuse_running(
    location: &Location,
    replay: &SessionReplay,
) -> Result<(), ResumeError> {
    for (call, process) in replay.unsettled_processes() {
        if let Some(members) = runtime::process::still_running(&process) {
            return Err(ResumeError::Refused(format!(
                "{location}: {call}: still running: process group {} ({members} processes); \
                 taking the session would leave it running unwatched, so nothing was taken: \
                 wait for it, or resume with --steal --kill-orphans",
                process.pgid
            )));
        }
    }
    Ok(())
}
