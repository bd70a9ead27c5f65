//! A campaign's deadline as a stop: a case running when it passes is stopped as the user's stop
//! would stop it, and nothing of the case begins after it.

use std::sync::mpsc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// The campaign's stop: cancelled at its deadline by a thread watching the clock (a session may
/// be blocked in a tool, or run on the paused clock, and must still be stopped on time), or by
/// whoever first asks after the deadline passed (that thread may lag on a loaded machine).
#[derive(Clone, Default)]
pub(crate) struct Stop {
    token: CancellationToken,
    deadline: Option<Instant>,
}

impl Stop {
    /// A stop at `deadline`, watched while the returned [`Watch`] lives; none: never.
    pub(crate) fn at(deadline: Option<Instant>) -> (Stop, Option<Watch>) {
        let stop = Stop {
            token: CancellationToken::new(),
            deadline,
        };
        let watch = deadline.map(|d| Watch::start(d, stop.token.clone()));
        (stop, watch)
    }

    /// Whether the deadline has passed (cancelling what is still running if nobody did yet).
    pub(crate) fn is_stopped(&self) -> bool {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.token.cancel();
        }
        self.token.is_cancelled()
    }

    /// A token cancelled with the stop: a step's, or a resume's.
    pub(crate) fn child_token(&self) -> CancellationToken {
        self.token.child_token()
    }
}

/// The thread that cancels a stop at its deadline. Dropped, it ends.
pub(crate) struct Watch {
    /// Dropped to end the thread early.
    done: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    fn start(deadline: Instant, token: CancellationToken) -> Watch {
        let (done, ended) = mpsc::channel::<()>();
        // Panics only when the process cannot make a thread, where no campaign could run
        // anyway (each case's runtime needs more than this).
        let thread = std::thread::spawn(move || {
            let left = deadline.saturating_duration_since(Instant::now());
            if let Err(mpsc::RecvTimeoutError::Timeout) = ended.recv_timeout(left) {
                token.cancel();
            }
        });
        Watch {
            done: Some(done),
            thread: Some(thread),
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
