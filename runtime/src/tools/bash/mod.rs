//! `bash`: runs a shell command in the workspace, in a process group of its own (DESIGN.md §5, §9).
//!
//! Why a process group: a command is rarely one process (`make` forks compilers, `cmd &` leaves
//! a job behind), and stopping only the shell would orphan the rest, still running and still
//! changing the workspace after the call said it was over. So the shell is started as the
//! leader of a new group (`process_group(0)`) and every signal goes to the whole group:
//!
//! - **cancel** (user stop, or the session's timeout) **or the call's own `timeout_ms`**:
//!   SIGTERM to the group; wait up to [`KILL_GRACE_MS`] until the shell has exited and the group
//!   is empty (reading output all the while, so nobody blocks on a full pipe); SIGKILL to the
//!   group if anything is left; reap the shell; if our signal ended the shell, return `ABORTED`
//!   (or `TIMEOUT`) with the output so far and a confirmed [`SideEffect::ProcExit`]. A shell
//!   that ignored SIGTERM and exited by itself with a status was not stopped: the call keeps its
//!   own outcome (output, `exit status N`), with a note that a stop was requested, when, and
//!   how long the command went on.
//! - **the shell exits by itself**: SIGKILL to the group at once. Whatever the command left
//!   running in it (`server &`, `nohup job &`) is killed: a call's processes do not outlive the
//!   call. The result carries the output and ends with the line `exit status N`.
//!
//! No zombie: the shell is our child and is always reaped (`Child::wait`) before `execute`
//! returns. The group's other members are the shell's children; once it is gone they are
//! re-parented to init (or the nearest subreaper), which reaps them after our SIGKILL. If the
//! future is dropped instead of awaited, a guard SIGKILLs the group and tokio reaps the shell in
//! the background (`kill_on_drop`).
//!
//! Limits, said plainly: a process that leaves the group on purpose (`setsid`, `set -m` job
//! control, a double-forking daemon) is out of reach of these signals. If such a process keeps
//! the output pipe open, reading stops [`DRAIN_MS`] after the shell's end and the content says
//! so. After the shell is reaped, the group is signalled by its id; Linux does not hand out a
//! pid while a group of that id still has members, so the only race is with a brand-new group
//! that got the same id after ours emptied, which would need the pid space to wrap around in
//! between (microseconds): accepted.
//!
//! Identity: the command's environment names the call (`TOOLJOURNAL_IDEMPOTENCY_KEY`,
//! `TOOLJOURNAL_SESSION_ID`, `TOOLJOURNAL_CALL_ID`), so a script can hand the key to a service
//! that deduplicates requests: a retry or a resume's re-run then cannot act twice there.
//!
//! Output: stdout and stderr are one pipe (the shell starts with its stderr a copy of its
//! stdout, exactly as `2>&1` would make it), so the transcript interleaves the two in the order
//! they were written. At most [`OUTPUT_BYTES_MAX`] bytes are kept: the first half and the last
//! half, with a marker line saying how many bytes were cut between them. Invalid UTF-8 is shown
//! lossily.

use crate::args::Args;
use crate::code::ErrorCode;
use crate::event::{Resources, SideEffect};
use crate::tool::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use crate::tools::Workspace;
use nix::sys::signal::Signal;
use sandbox::Sandbox;
use serde_json::{json, Value};
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::process::{Child, ChildStdout, Command};
use tokio::time::Instant;

mod group;
mod output;
mod streams;

use group::{die_with_the_runtime, Group};
use output::{Capture, Progress};
use streams::{Pumped, Streams};

/// Most bytes of output a call keeps: the first half and the last half of what it printed.
pub const OUTPUT_BYTES_MAX: usize = 1 << 20;
/// After SIGTERM, how long the group has to stop before it gets SIGKILL.
pub const KILL_GRACE_MS: u64 = 2_000;
/// After the shell is gone and its group killed, how long to keep reading output still in the
/// pipes (a process outside the group may hold them open forever).
pub const DRAIN_MS: u64 = 500;
/// Least time between two progress reports of one call.
pub const PROGRESS_INTERVAL_MS: u64 = 250;
/// Longest line a progress report carries (characters).
const PROGRESS_LINE_CHARS_MAX: usize = 200;
/// While waiting for a signalled group to empty, how often to look.
const GROUP_POLL_MS: u64 = 20;
const READ_CHUNK: usize = 64 * 1024;
/// The environment variable that carries the call's idempotency key to the command.
pub const ENV_IDEMPOTENCY_KEY: &str = "TOOLJOURNAL_IDEMPOTENCY_KEY";
/// The environment variable that carries the session's id to the command.
pub const ENV_SESSION_ID: &str = "TOOLJOURNAL_SESSION_ID";
/// The environment variable that carries the model's id for the call to the command.
pub const ENV_CALL_ID: &str = "TOOLJOURNAL_CALL_ID";

/// The `bash` tool. Exclusive: a shell command may touch anything, so it never overlaps others.
pub struct Bash {
    ws: Arc<Workspace>,
    shell: PathBuf,
    /// The session's sandbox, and the no-sandbox an approved escalation runs under; `None`
    /// when the embedding configured none (no bound is journaled then).
    sandbox: Option<Sandboxes>,
}

/// The sandbox a command runs under, and the one it escalates to.
struct Sandboxes {
    session: Arc<Sandbox>,
    escalated: Sandbox,
}

/// The argument by which a call asks to run outside the session's sandbox.
pub const UNSANDBOXED_ARG: &str = "unsandboxed";

impl Bash {
    /// Runs commands with `/bin/bash -c`, or `/bin/sh -c` where there is no bash, in the
    /// workspace's root, with no sandbox.
    pub fn new(ws: Arc<Workspace>) -> Bash {
        let bash = Path::new("/bin/bash");
        let shell = if bash.is_file() {
            bash.to_owned()
        } else {
            PathBuf::from("/bin/sh")
        };
        Bash {
            ws,
            shell,
            sandbox: None,
        }
    }

    /// [`Bash::new`], every command run under `sandbox` and its bound journaled in its
    /// `started`. When the sandbox confines, a call may ask to run outside it
    /// ([`UNSANDBOXED_ARG`]), which a person must approve ([`Tool::escalation`]).
    pub fn sandboxed(ws: Arc<Workspace>, sandbox: Arc<Sandbox>) -> Bash {
        Bash {
            sandbox: Some(Sandboxes {
                session: sandbox,
                escalated: Sandbox::unconfined(true),
            }),
            ..Bash::new(ws)
        }
    }

    /// The sandbox this call runs under: the session's, or none when it asked to leave it
    /// (and was approved: the runtime runs no escalation unapproved).
    fn sandbox_for(&self, args: &Args) -> Option<&Sandbox> {
        let sandboxes = self.sandbox.as_ref()?;
        Some(if self.escalates(args) {
            &sandboxes.escalated
        } else {
            &sandboxes.session
        })
    }

    /// Whether the call asks to run outside a sandbox that confines.
    fn escalates(&self, args: &Args) -> bool {
        self.sandbox
            .as_ref()
            .is_some_and(|s| s.session.bound().confines())
            && args.get(UNSANDBOXED_ARG).and_then(Value::as_bool) == Some(true)
    }

    /// Whether the session's sandbox confines (the schema then offers the escalation).
    fn confined(&self) -> bool {
        self.sandbox
            .as_ref()
            .is_some_and(|s| s.session.bound().confines())
    }

    /// The shell commands run with.
    pub fn shell(&self) -> &Path {
        &self.shell
    }
}

impl Tool for Bash {
    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        "Runs a shell command in the workspace's root directory (stdin is empty) and returns its \
         output (stdout and stderr together; very long output keeps its beginning and end) \
         followed by a last line `exit status N`. A non-zero status is reported, not treated as \
         a failure. Processes the command leaves running are killed when it ends. Optional \
         `timeout_ms` stops the command (and everything it started) after that long. The \
         environment has TOOLJOURNAL_IDEMPOTENCY_KEY (the same for every attempt of this call; \
         pass it to services that deduplicate requests), TOOLJOURNAL_SESSION_ID and \
         TOOLJOURNAL_CALL_ID."
    }

    fn input_schema(&self) -> Value {
        let mut schema = json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "minLength": 1},
                "timeout_ms": {"type": "integer", "minimum": 1}
            },
            "required": ["command"],
            "additionalProperties": false
        });
        if self.confined() {
            schema["properties"][UNSANDBOXED_ARG] = json!({
                "type": "boolean",
                "description": "Run outside the sandbox, with the user's full access to files \
                                and the network. Only when the same command failed because the \
                                sandbox refused it; the user is asked first."
            });
        }
        schema
    }

    fn escalation(&self, args: &Args) -> Option<String> {
        if !self.escalates(args) {
            return None;
        }
        let policy = self
            .sandbox
            .as_ref()
            .map_or("the sandbox", |s| s.session.bound().policy.as_str());
        Some(format!(
            "run `{}` OUTSIDE the sandbox ({policy}): unsandboxed, with your full access to \
             files and the network",
            args.str("command").unwrap_or_default()
        ))
    }

    fn evidence<'a>(&'a self, args: &'a Args) -> crate::tool::EvidenceFuture<'a> {
        let bound = self
            .sandbox_for(args)
            .map(|s| crate::event::Evidence::Sandbox(s.bound().clone()));
        Box::pin(std::future::ready(bound.into_iter().collect()))
    }

    fn output_schema(&self) -> Option<Value> {
        Some(json!({
            "type": "object",
            "properties": {
                "exit_status": {"type": ["integer", "null"]},
                "signal": {"type": ["integer", "null"]}
            },
            "required": ["exit_status", "signal"]
        }))
    }

    /// Never: a command may read or write anything, so it runs alone (a barrier in its batch).
    fn is_concurrency_safe(&self, _args: &Args) -> bool {
        false
    }

    fn resources(&self, args: &Args) -> Resources {
        Resources {
            intents: args
                .str("command")
                .map(|c| vec![c.to_owned()])
                .unwrap_or_default(),
            ..Resources::default()
        }
    }

    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let command = args.str("command").unwrap_or_default().to_owned();
            if command.is_empty() {
                return Err(ToolError::new(
                    ErrorCode::ToolFailed,
                    "`command` must be a non-empty string",
                ));
            }
            let timeout_ms = args.get("timeout_ms").and_then(Value::as_u64);
            let sandbox = self.sandbox_for(&args);
            self.run(&command, timeout_ms, sandbox, &ctx).await
        })
    }
}

/// What a command that failed under a confining sandbox is told when its output reads like a
/// refusal (a failure the sandbox may have caused): what the sandbox allows, and how to ask to
/// run outside it. A heuristic on the words of the output, so it says "may".
fn refusal_note(sandbox: &Sandbox, output: &str) -> Option<String> {
    const REFUSALS: [&str; 5] = [
        "Permission denied",
        "Operation not permitted",
        "Network is unreachable",
        "Read-only file system",
        "Temporary failure in name resolution",
    ];
    let bound = sandbox.bound();
    if !REFUSALS.iter().any(|r| output.contains(r)) {
        return None;
    }
    Some(format!(
        "the sandbox may have refused this: {}. To run the command outside the sandbox, call \
         bash again with \"{UNSANDBOXED_ARG}\": true; the user is asked first",
        bound.in_words()
    ))
}

/// Why a running command was stopped.
#[derive(Debug, Clone, Copy)]
enum Stop {
    Cancelled,
    TimedOut(u64),
}

/// How a command ended, for its result.
struct Ended {
    status: ExitStatus,
    /// Why and when we stopped it, when we did.
    stopped: Option<(Stop, Duration)>,
    /// When the shell was reaped, from the command's start.
    ended_after: Duration,
    /// Lines said after the output.
    notes: Vec<String>,
}

impl Bash {
    async fn run(
        &self,
        command: &str,
        timeout_ms: Option<u64>,
        sandbox: Option<&Sandbox>,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        if ctx.cancel().is_cancelled() {
            return Err(ToolError::new(
                ErrorCode::Aborted,
                "stopped before the command was started; it did not run",
            ));
        }
        let began = Instant::now();
        let (mut child, pid, reader) = self.spawn(command, sandbox, ctx)?;
        let mut group = Group::new(pid);
        // Journaled before the command may do anything we wait for: if the runtime dies from
        // here on, recovery can find the group and resume can refuse to go on beside it.
        let recorded = match crate::process::identify(pid, pid) {
            Some(process) => ctx.record_process(process).await,
            // The shell is already gone (it exited at once): nothing can outlive us.
            None => Ok(()),
        };
        if let Err(e) = recorded {
            return Err(e.with_side_effect(kill_and_reap(&mut group, &mut child, pid).await));
        }
        let out = std::process::ChildStdout::from(std::os::fd::OwnedFd::from(reader));
        let out = match ChildStdout::from_std(out) {
            Ok(out) => out,
            Err(e) => {
                // Its output cannot be read: stop it at once. It did start, so say how it ended.
                let effect = kill_and_reap(&mut group, &mut child, pid).await;
                return Err(ToolError::new(
                    ErrorCode::ToolFailed,
                    format!("cannot read the command's output ({e}); it was killed"),
                )
                .with_side_effect(effect));
            }
        };
        let mut streams = Streams {
            out: Some(out),
            buf: vec![0; READ_CHUNK],
            capture: Capture::new(OUTPUT_BYTES_MAX),
            progress: Progress::new(ctx.progress().clone()),
        };
        let mut status = None;

        let own_deadline = timeout_ms.map(|ms| began + Duration::from_millis(ms));
        let stop = async {
            tokio::select! {
                _ = ctx.cancel().cancelled() => Stop::Cancelled,
                _ = sleep_until(own_deadline) => Stop::TimedOut(timeout_ms.unwrap_or_default()),
            }
        };
        let stopped = match streams.pump(&mut child, &mut status, stop).await {
            Pumped::Stopped(why) => Some((why, began.elapsed())),
            Pumped::Exited | Pumped::Eof => None,
        };

        let mut notes = Vec::new();
        if stopped.is_some() {
            notes.extend(terminate(&group, &mut streams, &mut child, &mut status).await);
        } else {
            // The shell exited by itself: kill whatever it left running in its group, so
            // nothing it started outlives the call.
            group.signal(Signal::SIGKILL);
        }
        // Reap the shell (already done if it exited while we watched).
        let status = match status {
            Some(status) => status,
            None => child.wait().await,
        };
        let ended_after = began.elapsed();
        group.done();
        notes.extend(streams.drain(&mut child).await);

        let status = match status {
            Ok(status) => status,
            Err(e) => {
                return Err(ToolError::new(
                    ErrorCode::ToolFailed,
                    format!("the command's exit status could not be read: {e}"),
                )
                .with_side_effect(SideEffect::ProcExit {
                    pid,
                    status: None,
                    signal: None,
                }));
            }
        };
        let confined_failure = sandbox.filter(|s| s.bound().confines() && !status.success());
        if let Some(note) =
            confined_failure.and_then(|s| refusal_note(s, &streams.capture.render()))
        {
            notes.push(note);
        }
        let ended = Ended {
            status,
            stopped,
            ended_after,
            notes,
        };
        self.outcome(pid, ended, &streams, began)
    }

    /// Starts the shell on `command` as the leader of a new process group, its stdout and stderr
    /// one pipe, with the call's identity in its environment ([`ENV_IDEMPOTENCY_KEY`],
    /// [`ENV_SESSION_ID`], [`ENV_CALL_ID`]); returns it, its pid and the pipe's read end.
    fn spawn(
        &self,
        command: &str,
        sandbox: Option<&Sandbox>,
        ctx: &ToolContext,
    ) -> Result<(Child, u32, io::PipeReader), ToolError> {
        let cannot_start = |e: io::Error| {
            ToolError::new(
                ErrorCode::ToolFailed,
                format!("cannot start {}: {e}", self.shell.display()),
            )
        };
        // One pipe for stdout and stderr, as `2>&1` would make it: the transcript keeps the
        // order in which the two were written.
        let (reader, writer) = io::pipe().map_err(cannot_start)?;
        let mut shell = Command::new(&self.shell);
        shell
            .arg("-c")
            .arg(command)
            .current_dir(self.ws.root())
            // Always set, so a command never sees an outer session's values by inheritance.
            .env(ENV_IDEMPOTENCY_KEY, ctx.idempotency_key())
            .env(ENV_SESSION_ID, ctx.session_id())
            .env(ENV_CALL_ID, ctx.call_id())
            .stdin(Stdio::null())
            .stdout(writer.try_clone().map_err(cannot_start)?)
            .stderr(writer)
            .process_group(0)
            .kill_on_drop(true);
        // First the sandbox: a new user namespace gives the child a full capability set again
        // (inside it), which the runtime's own steps below then cut down as before.
        if let Some(sandbox) = sandbox {
            sandbox.confine(&mut shell).map_err(cannot_start)?;
        }
        // SAFETY: the closure runs in the child between fork and exec and makes only
        // async-signal-safe system calls (prctl, getppid, capget/capset, setrlimit), allocating
        // nothing.
        unsafe {
            shell.pre_exec(|| {
                die_with_the_runtime()?;
                crate::secrets::before_exec()
            });
        }
        let spawned = shell.spawn();
        // The command holds our copies of the pipe's write end: drop them, or the pipe never
        // reaches its end.
        drop(shell);
        let child = spawned.map_err(|e| match sandbox.filter(|s| s.bound().enforced) {
            // The child's own steps fail with a bare errno: say which part it was in.
            Some(s) => ToolError::new(
                ErrorCode::ToolFailed,
                format!(
                    "cannot start {} in the sandbox ({}; entering its namespaces, Landlock \
                     ruleset or seccomp filter): {e}",
                    self.shell.display(),
                    s.bound().policy.as_str()
                ),
            ),
            None => cannot_start(e),
        })?;
        let Some(pid) = child.id() else {
            // Only a child that was already waited for has no id.
            return Err(ToolError::new(
                ErrorCode::ToolFailed,
                "the shell was started but has no process id",
            ));
        };
        Ok((child, pid, reader))
    }

    /// The call's result: the transcript, and an error when our signal ended the command.
    fn outcome(
        &self,
        pid: u32,
        ended: Ended,
        streams: &Streams,
        began: Instant,
    ) -> Result<ToolOutput, ToolError> {
        let Ended {
            status,
            stopped,
            ended_after,
            mut notes,
        } = ended;
        let effect = SideEffect::ProcExit {
            pid,
            status: status.code(),
            signal: status.signal(),
        };
        // Stopped means ended by our signal. A shell that ignored SIGTERM and exited by itself
        // ran to its own end: its outcome is its own, and the stop only a note.
        let stopped = match stopped {
            Some((why, at)) if !ended_by_our_signal(&status) => {
                notes.insert(0, too_late_note(why, at, ended_after));
                None
            }
            stopped => stopped.map(|(why, _)| why),
        };
        let transcript = transcript(&streams.capture, &notes, &status_line(&status));
        match stopped {
            Some(why) => {
                let (code, headline) = match why {
                    Stop::Cancelled => (
                        ErrorCode::Aborted,
                        "the command was stopped (cancelled): its process group was sent SIGTERM"
                            .to_owned(),
                    ),
                    Stop::TimedOut(ms) => (
                        ErrorCode::Timeout,
                        format!(
                            "the command timed out after {ms} ms (its timeout_ms): its process \
                             group was sent SIGTERM"
                        ),
                    ),
                };
                Err(ToolError::new(code, format!("{headline}\n{transcript}"))
                    .with_side_effect(effect))
            }
            // A non-zero exit status is not a tool error: the command ran, and the model reads
            // its status in the content's last line (and in `value`) and decides what it means.
            None => Ok(ToolOutput {
                content: transcript,
                value: Some(json!({
                    "exit_status": status.code(),
                    "signal": status.signal(),
                })),
                details: Some(json!({
                    "pid": pid,
                    "shell": self.shell.display().to_string(),
                    "duration_ms": began.elapsed().as_millis() as u64,
                    "output_bytes": streams.capture.total,
                    "omitted_bytes": streams.capture.omitted(),
                })),
                side_effects: vec![effect],
            }),
        }
    }
}

/// Kills the group at once and reaps the shell: for a command that started but cannot go on.
/// Returns how the shell ended.
async fn kill_and_reap(group: &mut Group, child: &mut Child, pid: u32) -> SideEffect {
    group.signal(Signal::SIGKILL);
    let status = child.wait().await.ok();
    group.done();
    SideEffect::ProcExit {
        pid,
        status: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()),
    }
}

/// After a stop: SIGTERM to the group, then up to [`KILL_GRACE_MS`] for the shell to exit and
/// the group to empty (reading output all the while, so nobody blocks on a full pipe), then
/// SIGKILL to whatever is left. Returns the note to add when SIGKILL was needed.
async fn terminate(
    group: &Group,
    streams: &mut Streams,
    child: &mut Child,
    status: &mut Option<io::Result<ExitStatus>>,
) -> Option<String> {
    group.signal(Signal::SIGTERM);
    let grace_end = Instant::now() + Duration::from_millis(KILL_GRACE_MS);
    loop {
        if status.is_some() && group.is_empty() {
            break;
        }
        let now = Instant::now();
        if now >= grace_end {
            break;
        }
        let poll = sleep_until(Some(grace_end.min(now + ms(GROUP_POLL_MS))));
        if let Pumped::Eof = streams.pump(child, status, poll).await {
            // Nothing left to read; the group is still there: just wait a little.
            tokio::time::sleep(ms(GROUP_POLL_MS)).await;
        }
    }
    if status.is_some() && group.is_empty() {
        return None;
    }
    group.signal(Signal::SIGKILL);
    Some(format!(
        "[it did not stop within {KILL_GRACE_MS} ms of SIGTERM: its process group was killed \
         with SIGKILL]"
    ))
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Sleeps until `at`, or forever.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Whether the shell died of a signal we send to stop it (SIGTERM, then SIGKILL).
fn ended_by_our_signal(status: &ExitStatus) -> bool {
    status
        .signal()
        .is_some_and(|s| s == Signal::SIGTERM as i32 || s == Signal::SIGKILL as i32)
}

/// The note for a stop the command outlived: what was asked, when (from the command's start),
/// and how long it went on.
fn too_late_note(why: Stop, at: Duration, ended_after: Duration) -> String {
    let asked = match why {
        Stop::Cancelled => "a stop was requested".to_owned(),
        Stop::TimedOut(ms) => format!("its timeout_ms ({ms} ms) passed"),
    };
    format!(
        "[{asked} {} ms after the command started and its process group was sent SIGTERM; the \
         command went on and ended by itself {} ms later: this output and status are its own]",
        at.as_millis(),
        ended_after.saturating_sub(at).as_millis()
    )
}

/// The last line of the content.
fn status_line(status: &ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => {
            let name = Signal::try_from(signal)
                .map(|s| format!(" ({})", s.as_str()))
                .unwrap_or_default();
            format!("terminated by signal {signal}{name}")
        }
        (None, None) => "exit status unknown".to_owned(),
    }
}

/// The output, then any notes, then the status line.
fn transcript(capture: &Capture, notes: &[String], last: &str) -> String {
    let mut text = capture.render();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    for note in notes {
        text.push_str(note);
        text.push('\n');
    }
    text.push_str(last);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        assert_eq!(status_line(&ExitStatus::from_raw(3 << 8)), "exit status 3");
        assert_eq!(
            status_line(&ExitStatus::from_raw(9)),
            "terminated by signal 9 (SIGKILL)"
        );
    }
}
