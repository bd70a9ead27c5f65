//! The machinery of `rerun.rs`: transcripts of one interrupted batch, the `tooljournal` binary
//! run and SIGKILLed in a case directory, copies of a killed journal and workspace (one per
//! `--rerun` policy), and readers of what the journal and `recover`'s library say afterwards.
#![allow(dead_code)]
// A module of `common`, so its sibling `models` is `super::models`.

use super::models::{calls_in, events, files_under, results_for, FORMATS};
use recover::providers::Format;
use runtime::event::{CallRef, CallStarted, Event, RecoveryRerun};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longest wait for a marker, a journal record or a child: a failure, never a hang.
pub const WAIT: Duration = Duration::from_secs(30);
pub const MARKER: &str = "marker.txt";

/// A transcript call: `(id, tool, arguments)`.
pub fn call(id: &str, tool: &str, args: Value) -> Value {
    json!({"id": id, "name": tool, "arguments": args.to_string()})
}

pub fn batch(calls: Vec<Value>) -> Value {
    json!({"assistant": {"text": "", "tool_calls": calls, "stop_reason": "tool_use"}})
}

pub fn end(text: &str) -> Value {
    json!({"assistant": {"text": text, "tool_calls": [], "stop_reason": "end_turn"}})
}

/// A bash command that appends `id` to the marker file, then sleeps `sleep_s` (0: none).
pub fn marking(id: &str, sleep_s: u32) -> Value {
    if sleep_s == 0 {
        json!({"command": format!("echo {id} >> {MARKER}")})
    } else {
        json!({"command": format!("echo {id} >> {MARKER}; sleep {sleep_s}")})
    }
}

/// A case directory: the workspace `ws`, the transcript, the killed journal `journal`, and
/// the logs of every command run in it.
pub struct Case {
    pub dir: tempfile::TempDir,
    pub ws: PathBuf,
    pub script: PathBuf,
    pub journal: PathBuf,
}

impl Case {
    pub fn new(lines: &[Value]) -> Case {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).expect("the workspace");
        let ws = ws.canonicalize().expect("the workspace resolves");
        std::fs::write(ws.join("notes.txt"), "line0\nline1\n").expect("notes.txt");
        let script = dir.path().join("script.jsonl");
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        std::fs::write(&script, text.join("\n") + "\n").expect("the transcript");
        Case {
            journal: dir.path().join("journal"),
            ws,
            script,
            dir,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `tooljournal` with its state directory inside the case.
    pub fn tooljournal(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tooljournal"));
        c.env("XDG_STATE_HOME", self.path("state"))
            .env("XDG_CONFIG_HOME", self.path("no-config"))
            .stdin(Stdio::null());
        c
    }

    /// `tooljournal run` of the transcript, stdout and stderr to `run.out` / `run.err`.
    pub fn spawn_run(&self, extra: &[&str]) -> Child {
        let mut c = self.tooljournal();
        c.arg("run")
            .arg("--script")
            .arg(&self.script)
            .arg("--workspace")
            .arg(&self.ws)
            .arg("--journal")
            .arg(&self.journal)
            .args(extra)
            .stdout(std::fs::File::create(self.path("run.out")).unwrap())
            .stderr(std::fs::File::create(self.path("run.err")).unwrap());
        c.spawn().expect("tooljournal starts")
    }

    /// `tooljournal resume --journal JOURNAL --script … --kill-orphans EXTRA…`.
    pub fn resume_command(&self, journal: &Path, extra: &[&str]) -> Command {
        let mut c = self.tooljournal();
        c.arg("resume")
            .arg("--journal")
            .arg(journal)
            .arg("--script")
            .arg(&self.script)
            .arg("--kill-orphans")
            .args(extra);
        c
    }

    /// A resume run to its end, bounded by [`WAIT`].
    pub fn resume(&self, journal: &Path, extra: &[&str]) -> Output {
        let child = self
            .resume_command(journal, extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tooljournal resume starts");
        wait_output(child)
    }

    /// The marker file's lines.
    pub fn marks(&self) -> Vec<String> {
        std::fs::read_to_string(self.ws.join(MARKER))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// How many times `id` marked.
    pub fn marked(&self, id: &str) -> usize {
        self.marks().iter().filter(|l| *l == id).count()
    }

    /// Waits until `id` marked, then SIGKILLs `child` and reaps it. Nothing is left of it but
    /// the process groups its bash calls started (the caller's resume kills those).
    pub fn kill_when_marked(&self, child: &mut Child, id: &str) {
        let deadline = Instant::now() + WAIT;
        while self.marked(id) == 0 {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "ended ({status}) before {id} marked; stdout/stderr in {}",
                    self.dir.path().display()
                );
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{id} never marked within {WAIT:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        kill9(child);
    }

    /// Keeps the killed journal and workspace as they are, to start each policy from.
    pub fn snapshot(&self) {
        copy_dir(&self.journal, &self.path("journal.killed"));
        copy_dir(&self.ws, &self.path("ws.killed"));
    }

    /// A fresh copy of the killed journal at `journal.NAME`, and the workspace put back as the
    /// kill left it (at its own path: the journal names it).
    pub fn fresh_copy(&self, name: &str) -> PathBuf {
        let journal = self.path(&format!("journal.{name}"));
        copy_dir(&self.path("journal.killed"), &journal);
        std::fs::remove_dir_all(&self.ws).expect("the workspace is removed");
        copy_dir(&self.path("ws.killed"), &self.ws);
        journal
    }
}

pub fn kill9(child: &mut Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL delivered");
    let status = child.wait().expect("the child is reaped");
    assert!(!status.success(), "killed, not finished: {status:?}");
}

/// A child's output, killed and reported after [`WAIT`].
pub fn wait_output(mut child: Child) -> Output {
    let deadline = Instant::now() + WAIT;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("reaped");
            panic!("did not finish within {WAIT:?}: {}", shown(&out));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("its output")
}

pub fn shown(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Copies a directory tree (regular files and directories only).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("{}: {e}", entry.path().display()));
        }
    }
}

/// Every file's name (relative) and bytes under `dir`.
pub fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = files_under(dir)
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p.strip_prefix(dir).unwrap().to_owned(), bytes)
        })
        .collect();
    files.sort();
    files
}

/// The journal's segments, name and bytes: what "appends nothing" compares.
pub fn segments(journal: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    tree(journal)
        .into_iter()
        .filter(|(p, _)| p.extension().is_some_and(|e| e == "segment"))
        .collect()
}

pub fn session_id(events: &[Event]) -> String {
    events
        .iter()
        .find_map(|e| match e {
            Event::SessionOpen(open) => Some(open.session_id.clone()),
            _ => None,
        })
        .expect("session/open")
}

/// Every `started` of call `id`, in order.
pub fn started_of(events: &[Event], id: &str) -> Vec<CallStarted> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Started(s) if s.call.call_id == id => Some(s.clone()),
            _ => None,
        })
        .collect()
}

/// Every `recovery/rerun`, in order.
pub fn reruns(events: &[Event]) -> Vec<RecoveryRerun> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::RecoveryRerun(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

pub fn ids(calls: &[CallRef]) -> Vec<&str> {
    calls.iter().map(|c| c.call_id.as_str()).collect()
}

/// The most calls among `ids` that were started and not yet settled at once, by journal order.
pub fn most_at_once(events: &[Event], ids: &[&str]) -> usize {
    let mut running = 0usize;
    let mut most = 0usize;
    for e in events {
        match e {
            Event::Started(s) if ids.contains(&s.call.call_id.as_str()) => {
                running += 1;
                most = most.max(running);
            }
            Event::Settled { call, .. } if ids.contains(&call.call_id.as_str()) => {
                running = running.saturating_sub(1);
            }
            _ => {}
        }
    }
    most
}

/// The recovery `recover classify --dry-run` makes of `journal` (its library: this package's
/// tests cannot run `recover`'s binary), with its `--json` output.
pub fn classify_dry(journal: &Path) -> (recover::Recovered, Value) {
    let r = recover::Recovery::of(journal)
        .run()
        .unwrap_or_else(|e| panic!("{}: recover classify --dry-run: {e}", journal.display()));
    let json = recover::classify_json("j", &r.analysis);
    (r, json)
}

/// One call of a `classify --json` listing.
pub fn listed<'a>(json: &'a Value, id: &str) -> &'a Value {
    json["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .find(|c| c["call_id"] == id)
        .unwrap_or_else(|| panic!("{id} is not listed: {json:#}"))
}

/// `recover verify`: the journal reads clean to its end.
pub fn verify_clean(journal: &Path) {
    let verified = recover::verify(journal)
        .unwrap_or_else(|e| panic!("{}: recover verify: {e}", journal.display()));
    assert_eq!(
        verified.end,
        journal::ReadEnd::Clean,
        "{}: recover verify",
        journal.display()
    );
}

/// `recover rebuild --format F --dry-run` for the four formats: each body validates, carries
/// each of `ids` exactly once as a call with exactly one result. Returns the bodies.
pub fn rebuild_all(journal: &Path, ids: &[(&str, &str)]) -> Vec<(Format, Value)> {
    let r = recover::Recovery::of(journal)
        .run()
        .unwrap_or_else(|e| panic!("{}: recover rebuild --dry-run: {e}", journal.display()));
    let mut bodies = Vec::new();
    for format in FORMATS {
        let rebuilt = recover::rebuild_body(&r.analysis, format)
            .unwrap_or_else(|e| panic!("the {format} rebuild: {e}"));
        let body = rebuilt.body.value();
        recover::providers::validate(format, &body)
            .unwrap_or_else(|v| panic!("the {format} rebuild does not validate: {v}\n{body:#}"));
        one_result_each(format, &body, ids);
        bodies.push((format, body));
    }
    bodies
}

/// Each of `ids` (id, tool) is called exactly once in `body`'s history and has exactly one
/// result, and no other call is there (the histories name every call id, Gemini's too).
pub fn one_result_each(format: Format, body: &Value, ids: &[(&str, &str)]) {
    let mut calls = calls_in(format, body);
    calls.sort();
    let mut wanted: Vec<(String, String)> = ids
        .iter()
        .map(|(id, tool)| ((*id).to_owned(), (*tool).to_owned()))
        .collect();
    wanted.sort();
    assert_eq!(
        calls, wanted,
        "{format}: the calls in the history\n{body:#}"
    );
    for (id, tool) in ids {
        let results = results_for(format, body, id, tool);
        assert_eq!(
            results.len(),
            1,
            "{format}: results for {id}: {results:?}\n{body:#}"
        );
    }
}

/// The events of `journal`.
pub fn journal_events(journal: &Path) -> Vec<Event> {
    events(journal)
}
