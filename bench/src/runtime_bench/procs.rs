//! Many sessions over several processes: 64 sessions, 16 in each of 4 worker
//! processes, on one PostgreSQL server, or on local segment files for comparison. Several
//! processes is how a fleet of workers shares one store, and what files cannot do for one
//! journal; one process's 64 sessions are `many`'s.
//!
//! The bench runs itself as each worker (the hidden `sessions-worker` subcommand). A worker
//! opens its sessions, warms them up, says `ready` on stdout and waits for `go` on stdin; the
//! parent sends `go` to all once all are ready, so the windows open together. Each worker then
//! runs for the slice and prints one JSON line: its calls, syncs and the seconds until its last
//! turn's end was durable. The aggregate is every worker's calls over the longest window.

use super::many::{sessions_at, sessions_measured, subdirs};
use super::measured::Measured;
use super::postgres::PgServer;
use super::session::At;
use crate::BoxError;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

pub(super) const PROCS: usize = 4;
pub(super) const SESSIONS_PER_PROC: usize = 16;

/// Where the workers' journals go.
pub(super) enum Journals<'a> {
    /// Each worker's in `dir/p<i>/s<j>`.
    Dir(&'a Path),
    /// Each worker's as sessions of their own on this server.
    Store(&'a PgServer),
}

/// One worker's line after its window.
#[derive(Serialize, Deserialize)]
struct WorkerReport {
    calls: u64,
    steps: u64,
    syncs: u64,
    seconds: f64,
    bytes_per_step: Option<f64>,
}

/// A worker process and its pipes.
struct Worker {
    name: String,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    fn line(&mut self) -> Result<String, BoxError> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            return Err(format!("worker {} ended early (its error is above)", self.name).into());
        }
        Ok(line.trim_end().to_owned())
    }
}

/// `procs` worker processes of `per_proc` sessions each, at once, for `time`.
pub(super) fn procs_run(
    journals: Journals,
    procs: usize,
    per_proc: usize,
    time: Duration,
) -> Result<Measured, BoxError> {
    let exe = std::env::current_exe()?;
    let mut workers = Vec::with_capacity(procs);
    let mut started = Ok(());
    for p in 0..procs {
        match spawn(&exe, &journals, p, per_proc, time) {
            Ok(worker) => workers.push(worker),
            Err(e) => {
                started = Err(e);
                break;
            }
        }
    }
    let result = started.and_then(|()| drive(&mut workers));
    finish(workers, result)
}

/// Waits for every worker; on an error, kills them first (they are this process's children).
fn finish(
    mut workers: Vec<Worker>,
    result: Result<Measured, BoxError>,
) -> Result<Measured, BoxError> {
    for w in &mut workers {
        if result.is_err() {
            let _ = w.child.kill();
        }
        let status = w.child.wait()?;
        if result.is_ok() && !status.success() {
            return Err(format!("worker {} exited with {status}", w.name).into());
        }
    }
    result
}

fn spawn(
    exe: &Path,
    journals: &Journals,
    p: usize,
    per_proc: usize,
    time: Duration,
) -> Result<Worker, BoxError> {
    let mut command = Command::new(exe);
    command
        .arg("sessions-worker")
        .args(["--sessions", &per_proc.to_string()])
        .args(["--seconds", &time.as_secs_f64().to_string()]);
    let name = match journals {
        Journals::Dir(dir) => {
            let d = dir.join(format!("p{p}"));
            std::fs::create_dir(&d)?;
            command.arg("--at").arg(&d);
            format!("p{p}")
        }
        Journals::Store(server) => {
            let prefix = server.fresh_session(&format!("procs-p{p}"));
            command
                .args(["--at", &server.url(&prefix)])
                .args(["--prefix", &prefix]);
            prefix
        }
    };
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("worker {name}: no pipes to it").into());
    };
    Ok(Worker {
        name,
        child,
        stdin,
        stdout: BufReader::new(stdout),
    })
}

/// Ready from all, `go` to all, then every report, summed over the longest window.
fn drive(workers: &mut [Worker]) -> Result<Measured, BoxError> {
    for w in workers.iter_mut() {
        let line = w.line()?;
        if line != "ready" {
            return Err(format!("worker {} said {line:?}, not `ready`", w.name).into());
        }
    }
    for w in workers.iter_mut() {
        w.stdin.write_all(b"go\n")?;
        w.stdin.flush()?;
    }
    let mut total: Option<Measured> = None;
    for w in workers.iter_mut() {
        let line = w.line()?;
        let r: WorkerReport = serde_json::from_str(&line)
            .map_err(|e| format!("worker {}'s report {line:?}: {e}", w.name))?;
        total = Some(match total {
            None => Measured {
                calls: r.calls,
                steps: r.steps,
                seconds: r.seconds,
                syncs: Some(r.syncs),
                bytes_per_step: r.bytes_per_step,
                step_us: Vec::new(),
            },
            Some(t) => Measured {
                calls: t.calls + r.calls,
                steps: t.steps + r.steps,
                seconds: t.seconds.max(r.seconds),
                syncs: t.syncs.map(|s| s + r.syncs),
                bytes_per_step: t.bytes_per_step.zip(r.bytes_per_step).map(|(a, b)| {
                    (a * t.steps as f64 + b * r.steps as f64) / (t.steps + r.steps).max(1) as f64
                }),
                step_us: Vec::new(),
            },
        });
    }
    total.ok_or_else(|| "no workers".into())
}

/// The hidden `sessions-worker` subcommand: `sessions` sessions on a runtime of this machine's
/// cores, journals in the directory `at` (`s<i>` in it) or, for a store URL, as sessions
/// `<prefix>-s<i>` of that store; the protocol is the module's.
pub(crate) fn sessions_worker(
    sessions: usize,
    seconds: f64,
    at: &str,
    prefix: &str,
) -> Result<(), BoxError> {
    let ats: Vec<At> = if pg::is_url(at) {
        (0..sessions)
            .map(|i| At::Store(pg::session_url(at, &format!("{prefix}-s{i}"))))
            .collect()
    } else {
        subdirs(&PathBuf::from(at), "s", sessions)?
            .into_iter()
            .map(At::Dir)
            .collect()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let timed = sessions_at(&rt, &ats, Duration::from_secs_f64(seconds), ready_go)?;
    drop(rt);
    let m = sessions_measured(&timed, &ats)?;
    let report = WorkerReport {
        calls: m.calls,
        steps: m.steps,
        syncs: m.syncs.unwrap_or(0),
        seconds: m.seconds,
        bytes_per_step: m.bytes_per_step,
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

/// `ready` to the parent, then its `go`.
fn ready_go() -> Result<(), BoxError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    if line.trim_end() != "go" {
        return Err(format!("expected `go` from the parent, read {line:?}").into());
    }
    Ok(())
}
