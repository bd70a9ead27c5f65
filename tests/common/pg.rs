//! The machinery of `postgres_kill.rs`: a kill case whose journal is a PostgreSQL session
//! (`kill::Case` with a URL for its journal), the `recover` binary, the session's records read
//! back through the journal crate, and waits on a session's lease and its calls.
//!
//! Why its own module: `kill.rs`'s machinery reads a journal directory (its bytes, its lock);
//! a session in PostgreSQL is read through its store, and its writer is fenced by a lease.
#![allow(dead_code)]

use super::kill::{spawn, Case, Script};
use journal::{Backend, Limits, WriterState};
use runtime::event::{Event, Record};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest a test waits for a journal to show something.
pub const WAIT_MAX: Duration = Duration::from_secs(30);

/// `url` with its session's lease set to `lease_ms`.
pub fn with_lease(url: &str, lease_ms: u64) -> String {
    format!("{url}&lease_ms={lease_ms}")
}

/// A kill case (workspace, transcript) whose journal is `url`.
pub fn pg_case(script: &Script, url: &str) -> Case {
    let mut case = Case::new(script);
    case.journal = PathBuf::from(url);
    case
}

/// A transcript from JSON lines.
pub fn script_of(lines: &[Value]) -> Script {
    let mut text = String::new();
    for line in lines {
        text.push_str(&line.to_string());
        text.push('\n');
    }
    Script {
        text,
        calls: 0,
        bash_calls: 0,
    }
}

/// The journal's backend: the PostgreSQL session for a URL, else the directory.
pub fn backend(journal: &Path) -> Backend {
    match journal.to_str().filter(|s| pg::is_url(s)) {
        Some(url) => {
            let store = pg::PgStore::open(url).unwrap_or_else(|e| panic!("open {url}: {e}"));
            Backend::Records(Arc::new(store))
        }
        None => {
            let storage = journal::FsStorage::open(journal)
                .unwrap_or_else(|e| panic!("open {}: {e}", journal.display()));
            Backend::Files(Arc::new(storage))
        }
    }
}

/// Every record of the journal, with its seq; empty while the session has none.
pub fn records(journal: &Path) -> Vec<(u64, Record)> {
    if !journal.exists() && journal.to_str().is_none_or(|s| !pg::is_url(s)) {
        return Vec::new();
    }
    let Ok(reader) = journal::Reader::open_backend(&backend(journal), Limits::default()) else {
        return Vec::new();
    };
    reader
        .map(|r| {
            let r = r.unwrap_or_else(|e| panic!("read {}: {e}", journal.display()));
            let record = r
                .decode::<Record>()
                .unwrap_or_else(|e| panic!("decode seq {}: {e}", r.seq));
            (r.seq, record)
        })
        .collect()
}

/// Whether `call_id` has a `started` record.
pub fn started(journal: &Path, call_id: &str) -> bool {
    records(journal).iter().any(|(_, r)| {
        matches!(&r.event, Event::Started(runtime::event::CallStarted { call, .. }) if call.call_id == call_id)
    })
}

/// Waits until `call_id` has started; panics after [`WAIT_MAX`] or when `child` ends first.
pub fn wait_started(journal: &Path, call_id: &str, child: &mut Child) {
    let deadline = Instant::now() + WAIT_MAX;
    while !started(journal, call_id) {
        assert!(
            child.try_wait().ok().flatten().is_none(),
            "the run ended before {call_id} started"
        );
        assert!(Instant::now() < deadline, "{call_id} never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The session's holder, when its lease is live.
pub fn live_holder(journal: &Path) -> Option<journal::Holder> {
    match backend(journal).writer_state() {
        Ok(WriterState::Leased(holder)) if holder.live() => Some(holder),
        _ => None,
    }
}

/// Waits until nobody holds the session's lease (a killed writer's lease runs out).
pub fn wait_lease_expired(journal: &Path) {
    let deadline = Instant::now() + WAIT_MAX;
    while let Some(holder) = live_holder(journal) {
        assert!(
            Instant::now() < deadline,
            "the lease of {} never expired",
            holder.name
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub use super::recover_bin::recover_bin;

/// `recover ARGS` (its output, whatever its exit).
pub fn recover_cli(args: &[&str], journal: &Path) -> Output {
    let _gate = super::kill::SPAWN_GATE
        .write()
        .unwrap_or_else(|p| p.into_inner());
    Command::new(recover_bin())
        .args(args)
        .arg(journal)
        .stdin(Stdio::null())
        .output()
        .expect("recover runs")
}

/// `recover classify --json` of `journal`: what must agree between backends — its calls, and
/// its other fields but the journal's name (the listing holds no session id nor time) — and
/// its output as printed.
pub fn classify_calls(journal: &Path) -> (Vec<Value>, String) {
    let out = recover_cli(&["classify", "--json"], journal);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "recover classify --json {} exited {}:\n{stdout}\n{}",
        journal.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let mut listing = Vec::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let mut v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: not JSON: {line}"));
        if let Some(fields) = v.as_object_mut() {
            fields.remove("journal");
            if let Some(Value::Array(calls)) = fields.remove("calls") {
                listing.extend(calls);
            }
        }
        listing.push(v);
    }
    (listing, stdout)
}

/// `tooljournal run` of the case's transcript on its journal.
pub fn spawn_run(case: &Case, max_parallel: u64, extra: &[&str]) -> Child {
    let mut args = vec![
        "run",
        "--script",
        case.script.to_str().expect("utf-8 path"),
        "--workspace",
        case.ws.to_str().expect("utf-8 path"),
        "--journal",
        case.journal.to_str().expect("utf-8 path"),
    ];
    let parallel = max_parallel.to_string();
    args.extend(["--max-parallel", &parallel]);
    args.extend_from_slice(extra);
    spawn(&mut case.command(&args, "run"))
}

/// Waits for `child` up to [`WAIT_MAX`].
pub fn wait_child(child: &mut Child, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + WAIT_MAX;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not end within {WAIT_MAX:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Resumes the case (waiting up to `lease_wait_ms` for a killed writer's lease); the resume
/// must exit 0, leave the session closed, and a later recovery must append nothing.
pub fn resume_to_close(case: &Case, lease_wait_ms: u64) -> Result<(), String> {
    let wait = lease_wait_ms.to_string();
    let mut status = case.wait_resume(
        case.spawn_resume("resume", &["--lease-wait-ms", &wait]),
        "resume",
    )?;
    if status.code() == Some(1) && case.logs("resume").contains("still running: process group") {
        status = case.wait_resume(
            case.spawn_resume("resume", &["--lease-wait-ms", &wait, "--kill-orphans"]),
            "resume",
        )?;
    }
    if !status.success() {
        return Err(format!("resume exited {status}: {}", case.logs("resume")));
    }
    let again = recover_at(&case.journal, true)?;
    if !again.analysis.replay.closed {
        return Err(format!(
            "the session is not closed after resume: {}",
            case.logs("resume")
        ));
    }
    if again.appended {
        return Err("a recovery after the resume appended records".into());
    }
    Ok(())
}

/// Recovery of a directory or a PostgreSQL session (holding the spawn gate, as
/// `kill::recover_gated` does).
pub fn recover_at(journal: &Path, write: bool) -> Result<recover::Recovered, String> {
    let _gate = super::kill::SPAWN_GATE
        .read()
        .unwrap_or_else(|p| p.into_inner());
    recover::Recovery::of(recover::Place::Backend(backend(journal)))
        .write(write)
        .run()
        .map_err(|e| format!("recover(write: {write}) {}: {e}", journal.display()))
}

/// The marker ids written more than once.
pub fn twice(case: &Case) -> Vec<(String, usize)> {
    case.marks().into_iter().filter(|(_, n)| *n > 1).collect()
}
