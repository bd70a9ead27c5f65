//! Reading the command's one output pipe while waiting for something else: the shell's exit,
//! a stop (cancel, timeout), or, once the shell is reaped, a short drain. What is read goes to
//! the bounded capture and the progress line (`output.rs`).

use super::output::{Capture, Progress};
use super::{ms, sleep_until, DRAIN_MS};
use std::future::Future;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, ChildStdout};
use tokio::time::Instant;

/// What [`Streams::pump`] stopped for.
pub(super) enum Pumped<T> {
    /// The shell exited (its status is now known).
    Exited,
    /// The shell's status is known and the pipe is at its end.
    Eof,
    /// The `stop` future completed.
    Stopped(T),
}

/// The command's output pipe (stdout and stderr) and what was read from it.
pub(super) struct Streams {
    pub(super) out: Option<ChildStdout>,
    pub(super) buf: Vec<u8>,
    pub(super) capture: Capture,
    pub(super) progress: Progress,
}

impl Streams {
    /// After the shell is reaped: reads what is left in the pipe, for at most [`DRAIN_MS`].
    /// Returns the note to add when a process outside the group still held it open.
    pub(super) async fn drain(&mut self, child: &mut Child) -> Option<String> {
        let drain_end = Instant::now() + ms(DRAIN_MS);
        // The shell is reaped: with its status "known", `pump` only reads.
        let mut reaped = Some(Ok(ExitStatus::from_raw(0)));
        match self
            .pump(child, &mut reaped, sleep_until(Some(drain_end)))
            .await
        {
            Pumped::Stopped(()) => Some(format!(
                "[stopped reading output {DRAIN_MS} ms after the command ended: a process \
                 outside its process group still holds the output open]"
            )),
            Pumped::Exited | Pumped::Eof => None,
        }
    }

    /// Reads output until `stop` completes, the shell exits (when `status` is still unknown), or
    /// there is nothing left to wait for (status known, the pipe at its end).
    pub(super) async fn pump<F: Future>(
        &mut self,
        child: &mut Child,
        status: &mut Option<io::Result<ExitStatus>>,
        stop: F,
    ) -> Pumped<F::Output> {
        tokio::pin!(stop);
        loop {
            if status.is_some() && self.out.is_none() {
                return Pumped::Eof;
            }
            let waiting = status.is_none();
            // Not biased: a command that prints without pause must not starve the stop.
            tokio::select! {
                why = &mut stop => return Pumped::Stopped(why),
                exited = child.wait(), if waiting => {
                    *status = Some(exited);
                    return Pumped::Exited;
                }
                read = read_some(&mut self.out, &mut self.buf), if self.out.is_some() => {
                    took(&mut self.out, read, &self.buf, &mut self.capture, &mut self.progress);
                }
            }
        }
    }
}

async fn read_some<R: AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buf: &mut [u8],
) -> io::Result<usize> {
    match pipe {
        Some(pipe) => pipe.read(buf).await,
        None => std::future::pending().await,
    }
}

/// Keeps what a read got; an end of file or a read error closes that pipe.
fn took<R>(
    pipe: &mut Option<R>,
    read: io::Result<usize>,
    buf: &[u8],
    capture: &mut Capture,
    progress: &mut Progress,
) {
    match read {
        Ok(0) => *pipe = None,
        Ok(n) => {
            capture.push(&buf[..n]);
            progress.saw(&buf[..n]);
        }
        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
        Err(e) => {
            tracing::warn!("cannot read the command's output: {e}");
            *pipe = None;
        }
    }
}
