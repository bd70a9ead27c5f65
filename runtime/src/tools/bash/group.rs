//! The command's process group: signalled as one (`killpg`), known empty when /proc says no
//! live member is left, SIGKILLed if the call's future is dropped mid-run; and the shell's
//! death signal tied to the runtime's thread (`die_with_the_runtime`).

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::io;

/// The command's process group. Dropped without [`Group::done`] (the future was dropped
/// mid-run), it SIGKILLs the group.
pub(super) struct Group {
    pgid: Pid,
    done: bool,
}

impl Group {
    pub(super) fn new(pid: u32) -> Group {
        Group {
            pgid: Pid::from_raw(pid as i32),
            done: false,
        }
    }

    pub(super) fn signal(&self, signal: Signal) {
        match killpg(self.pgid, signal) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => {
                tracing::warn!(pgid = %self.pgid, ?signal, "cannot signal the command's process group: {e}")
            }
        }
    }

    /// Whether no live process is left in the group. A member that already died but was not
    /// reaped yet (an orphan waits for init, which may take seconds) still counts for the
    /// kernel; on Linux, /proc tells dead from alive, so such zombies do not hold us up.
    pub(super) fn is_empty(&self) -> bool {
        if killpg(self.pgid, None) == Err(Errno::ESRCH) {
            return true;
        }
        crate::process::live_members(self.pgid.as_raw()) == Some(0)
    }

    pub(super) fn done(&mut self) {
        self.done = true;
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.done {
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
    }
}

/// In the child, before exec: the shell gets SIGKILL when the runtime's thread that started
/// it dies (a SIGKILLed runtime included), so no shell outlives the runtime by design. Its own
/// children do not inherit this: `call/process` lets recovery and resume find them.
pub(super) fn die_with_the_runtime() -> io::Result<()> {
    let parent = nix::unistd::getppid();
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
    // The parent may have died before the prctl: then nothing would ever send the signal.
    if nix::unistd::getppid() != parent {
        return Err(io::Error::other(
            "the runtime died while the command started",
        ));
    }
    Ok(())
}
