//! A session's lifecycle through the binaries, the way a user meets it: `run` on a directory
//! that already holds a session, two `resume`s at once (with and without a slow MCP server).
//! The promise under test: nothing ever runs twice, and nothing makes a recoverable journal
//! unrecoverable.

use crate::common::mcp_support as support;

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn tooljournal() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tooljournal"));
    c.env_remove("XDG_CONFIG_HOME").env("HOME", "/nonexistent");
    c
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    )
}

struct Fixture {
    dir: tempfile::TempDir,
    ws: PathBuf,
    journal: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    Fixture {
        journal: dir.path().join("journal"),
        ws,
        dir,
    }
}

impl Fixture {
    fn script(&self, name: &str, lines: &[Value]) -> PathBuf {
        let path = self.dir.path().join(name);
        let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        std::fs::write(&path, lines.join("\n")).unwrap();
        path
    }

    fn run(&self, script: &Path) -> Command {
        let mut c = tooljournal();
        c.arg("run")
            .arg("--script")
            .arg(script)
            .arg("--workspace")
            .arg(&self.ws)
            .arg("--journal")
            .arg(&self.journal);
        c
    }

    fn resume(&self, script: &Path, config: Option<&Path>) -> Command {
        let mut c = tooljournal();
        c.arg("resume")
            .arg("--journal")
            .arg(&self.journal)
            .arg("--script")
            .arg(script);
        if let Some(config) = config {
            c.arg("--config").arg(config);
        }
        c
    }

    fn lines_of(&self, file: &str) -> Vec<String> {
        std::fs::read_to_string(self.ws.join(file))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Every file in the journal directory and its bytes.
    fn journal_files(&self) -> BTreeMap<String, Vec<u8>> {
        let mut files = BTreeMap::new();
        let mut stack = vec![self.journal.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let name = path
                        .strip_prefix(&self.journal)
                        .unwrap()
                        .display()
                        .to_string();
                    files.insert(name, std::fs::read(&path).unwrap());
                }
            }
        }
        files
    }

    /// Starts `run` (with `extra` flags) on a script whose first call appends to `marker.txt`
    /// and sleeps, and SIGKILLs it once the call has begun.
    fn crash_mid_bash(&self, script: &Path, extra: &[&std::ffi::OsStr]) {
        let mut child = self
            .run(script)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for(&self.ws.join("marker.txt"), &mut child);
        child.kill().unwrap(); // SIGKILL: no chance to clean up
        child.wait().unwrap();
    }
}

/// Every file under `root` and its bytes.
fn files_in(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.strip_prefix(root).unwrap().display().to_string();
                files.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

fn user(text: &str) -> Value {
    json!({ "user": text })
}

fn bash(id: &str, command: &str, stop: &str) -> Value {
    json!({"assistant": {"text": "", "tool_calls": [
        {"id": id, "name": "bash", "arguments": json!({ "command": command }).to_string()}
    ], "stop_reason": stop}})
}

fn end() -> Value {
    json!({"assistant": {"text": "done", "tool_calls": [], "stop_reason": "end_turn"}})
}

/// Waits until `file` holds a whole line (a tool call has begun and written its mark; the
/// file alone may exist before its line, and the shell dies with a killed runtime), failing if
/// `child` exits first.
fn wait_for(file: &Path, child: &mut Child) {
    // A limit on the wait, not a timing assertion: a stuck child fails the test, it does not
    // hang it.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !std::fs::read_to_string(file).is_ok_and(|t| t.ends_with('\n')) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the session exited ({status}) before {} appeared",
                file.display()
            );
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn session_id(journal: &Path) -> String {
    let storage = journal::FsStorage::open(journal).unwrap();
    let (replay, _) =
        runtime::replay::replay_storage(std::sync::Arc::new(storage), journal::Limits::default())
            .unwrap();
    replay.open.expect("a session").session_id
}

/// `run` on a directory that holds a session, in each state a user can leave one in.
fn assert_run_refused(f: &Fixture, script: &Path, state: &str) {
    let before = f.journal_files();
    let out = f.run(script).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = text(&out.stderr);
    let id = session_id(&f.journal);
    assert!(stderr.contains(&id), "names the session: {stderr}");
    assert!(stderr.contains(state), "says it is {state}: {stderr}");
    assert!(
        stderr.contains(&format!(
            "tooljournal resume --journal {}",
            f.journal.display()
        )),
        "points to resume: {stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        f.lines_of("second-run.txt").is_empty(),
        "no tool of the refused run ran"
    );
    assert!(
        f.journal_files() == before,
        "the refused run changed nothing in the journal directory"
    );
}

#[test]
fn run_refuses_a_directory_that_already_holds_a_session_in_any_state() {
    let f = fixture();
    let first = f.script(
        "first.jsonl",
        &[
            user("long job"),
            bash("k1", "echo k1 >> marker.txt; sleep 60", "tool_use"),
            end(),
            user("and then"),
            bash("k2", "echo k2 >> marker.txt", "end_turn"),
        ],
    );
    let second = f.script(
        "second.jsonl",
        &[
            user("another session"),
            bash("s1", "echo s1 >> second-run.txt", "end_turn"),
        ],
    );

    f.crash_mid_bash(&first, &[]);
    assert_run_refused(&f, &second, "interrupted");

    // Still recoverable: recovery balances it and classifies the call that was running.
    let recovered = recover::Recovery::of(&f.journal)
        .write(true)
        .run()
        .expect("recoverable");
    assert!(recovered.appended);
    let k1 = recovered
        .analysis
        .calls
        .iter()
        .find(|c| c.call.call_id == "k1");
    assert_eq!(
        k1.and_then(|c| c.classification),
        Some(runtime::event::Classification::ToolOutcomeUnknown)
    );
    assert_run_refused(&f, &second, "not finished");

    let out = f.resume(&first, None).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(f.lines_of("marker.txt"), ["k1", "k2"], "k1 never ran twice");
    assert_run_refused(&f, &second, "finished");
}

/// A script that resumes into a long bash call, so that a second resume meets a live session.
fn resume_script(f: &Fixture) -> PathBuf {
    f.script(
        "session.jsonl",
        &[
            user("long job"),
            bash("k1", "echo k1 >> marker.txt; sleep 60", "tool_use"),
            end(),
            user("continue"),
            bash("r1", "echo r1 >> resumed.txt; sleep 2", "tool_use"),
            end(),
        ],
    )
}

/// Two resumes started together: exactly one continues the session, the other exits 1 naming
/// the first's pid, and the continued call runs once.
fn two_resumes_at_once(f: &Fixture, config: Option<&Path>) {
    let script = resume_script(f);
    f.crash_mid_bash(&script, &[]);

    let spawn = || {
        f.resume(&script, config)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = spawn();
    std::thread::sleep(Duration::from_millis(100));
    let b = spawn();
    let (a_pid, b_pid) = (a.id(), b.id());
    let a = a.wait_with_output().unwrap();
    let b = b.wait_with_output().unwrap();

    let (winner, loser, winner_pid) = match (a.status.code(), b.status.code()) {
        (Some(0), Some(1)) => (&a, &b, a_pid),
        (Some(1), Some(0)) => (&b, &a, b_pid),
        _ => panic!(
            "exactly one resume proceeds:\nfirst: {}\nsecond: {}",
            describe(&a),
            describe(&b)
        ),
    };
    assert!(
        text(&winner.stdout).contains("resuming session"),
        "{}",
        describe(winner)
    );
    let stderr = text(&loser.stderr);
    assert!(
        stderr.contains(&format!("session is live (writer pid {winner_pid})")),
        "{}",
        describe(loser)
    );
    assert!(!stderr.contains("WouldBlock"), "{stderr}");
    assert_eq!(f.lines_of("resumed.txt"), ["r1"], "r1 ran exactly once");
    assert_eq!(f.lines_of("marker.txt"), ["k1"], "k1 never ran again");

    // The journal is whole and finished: recovery reads it, a third resume has nothing to do.
    let recovered = recover::Recovery::of(&f.journal).run().expect("readable");
    assert!(!recovered.analysis.live);
    let out = f.resume(&script, config).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        text(&out.stdout).contains("already finished"),
        "{}",
        describe(&out)
    );
    assert_eq!(f.lines_of("resumed.txt"), ["r1"]);
}

#[test]
fn two_resumes_at_once_exactly_one_proceeds() {
    two_resumes_at_once(&fixture(), None);
}

#[test]
fn two_resumes_at_once_with_a_slow_starting_mcp_server_exactly_one_proceeds() {
    let f = fixture();
    let server = support::filesystem_server();
    // The server takes two seconds to start: the window in which a resume that replayed
    // before taking the lock would go stale.
    let config = f.dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[mcp_servers.fs]\ncommand = \"sh\"\nargs = [\"-c\", \"sleep 2; exec {} {}\"]\n",
            server.display(),
            f.ws.display()
        ),
    )
    .unwrap();
    two_resumes_at_once(&f, Some(&config));
}

/// A resume that looked at the journal before another resume took it, and gets the lock only
/// once that one has finished the session, looks again: it says the session is finished. It
/// neither fails on the policy the other journaled meanwhile nor says anything of the journal
/// it first looked at (which had no policy yet: a session stopped right after `session/open`).
#[test]
fn a_resume_overtaken_between_its_look_and_its_lock_looks_again() {
    let f = fixture();
    // `session/open` and nothing else, as a `run` killed before it journaled its policy.
    drop(runtime::Session::builder(&f.ws, &f.journal).open().unwrap());
    let script = f.script("s.jsonl", &[user("hi"), end()]);
    // The late resume reads its configuration from a FIFO after its look and before its lock:
    // it waits there until the FIFO's writer closes it.
    let config = f.dir.path().join("config.toml");
    nix::unistd::mkfifo(&config, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let late = f
        .resume(&script, Some(&config))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Returns once the late resume opened the FIFO to read: it has looked.
    let gate = std::fs::OpenOptions::new()
        .write(true)
        .open(&config)
        .unwrap();
    // Its next look reads a plain file (the same empty configuration) at that path.
    let plain = f.dir.path().join("plain.toml");
    std::fs::write(&plain, "").unwrap();
    std::fs::rename(&plain, &config).unwrap();

    let first = f.resume(&script, None).output().unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", describe(&first));
    assert!(
        text(&first.stdout).contains("resuming session"),
        "{}",
        describe(&first)
    );
    assert!(
        text(&first.stderr).contains("the journal records no policy"),
        "{}",
        describe(&first)
    );
    drop(gate);
    let late = late.wait_with_output().unwrap();
    assert_eq!(late.status.code(), Some(0), "{}", describe(&late));
    let said = text(&late.stderr);
    // The race was run: the late resume's first look was overtaken.
    assert!(
        said.contains("another process changed the session's policy while this resume started; looking at it again"),
        "{}",
        describe(&late)
    );
    assert!(!said.contains("records no policy"), "{}", describe(&late));
    assert!(
        text(&late.stdout).contains("already finished"),
        "{}",
        describe(&late)
    );
    // Only the first resume wrote: one policy, the session finished once.
    assert_eq!(policies(&f.journal).len(), 1);
    let recovered = recover::Recovery::of(&f.journal).run().expect("readable");
    assert!(recovered.analysis.replay.closed);
    assert!(!recovered.appended);
}

fn bash_approved(id: &str, command: &str, stop: &str) -> Value {
    let mut line = bash(id, command, stop);
    line["assistant"]["approvals"] = json!({ id: "allow" });
    line
}

/// Every `session/policy` the journal holds, in order.
fn policies(journal: &Path) -> Vec<runtime::event::SessionPolicy> {
    let storage: std::sync::Arc<dyn journal::Storage> =
        std::sync::Arc::new(journal::FsStorage::open(journal).unwrap());
    journal::Reader::open(storage, journal::Limits::default())
        .unwrap()
        .map(|r| r.unwrap().decode::<runtime::event::Record>().unwrap().event)
        .filter_map(|e| match e {
            runtime::event::Event::SessionPolicy(p) => Some(p),
            _ => None,
        })
        .collect()
}

fn committed_code(journal: &Path, id: &str) -> Option<runtime::ErrorCode> {
    let storage = journal::FsStorage::open(journal).unwrap();
    let (replay, _) =
        runtime::replay::replay_storage(std::sync::Arc::new(storage), journal::Limits::default())
            .unwrap();
    let call = replay
        .calls()
        .find(|c| c.call.call_id == id)
        .expect("the call");
    call.committed.as_ref().expect("committed").code
}

/// A session started with `--approve deny` (its first bash call approved by the script)
/// crashes mid-call; its next turn has a bash call nobody approved.
fn crashed_deny_session(f: &Fixture) -> PathBuf {
    let script = f.script(
        "deny.jsonl",
        &[
            user("long job"),
            bash_approved("k1", "echo k1 >> marker.txt; sleep 60", "tool_use"),
            end(),
            user("next"),
            bash("r1", "echo r1 >> unapproved.txt", "end_turn"),
        ],
    );
    let flags = [
        "--approve",
        "deny",
        "--max-parallel",
        "3",
        "--fsync",
        "always",
    ]
    .map(std::ffi::OsStr::new);
    f.crash_mid_bash(&script, &flags);
    script
}

#[test]
fn a_resume_keeps_the_sessions_policy() {
    let f = fixture();
    let script = crashed_deny_session(&f);
    let journaled = policies(&f.journal);
    assert_eq!(journaled.len(), 1, "{journaled:?}");
    let p = &journaled[0];
    assert_eq!(p.approval, runtime::event::ApprovalPolicy::Deny);
    assert_eq!(p.parallel_max, 3);
    assert_eq!(p.fsync, runtime::event::SyncPolicy::Always);
    assert_eq!(p.config, None);

    let out = f.resume(&script, None).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        !f.ws.join("unapproved.txt").exists(),
        "the unapproved bash call did not run after the resume"
    );
    assert_eq!(
        committed_code(&f.journal, "r1"),
        Some(runtime::ErrorCode::PolicyDenied)
    );
    assert_eq!(
        policies(&f.journal).len(),
        1,
        "nothing changed: nothing journaled"
    );
}

#[test]
fn a_resume_flag_that_loosens_the_policy_is_journaled_as_a_change() {
    let f = fixture();
    let script = crashed_deny_session(&f);
    let out = f
        .resume(&script, None)
        .args(["--approve", "allow"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(f.lines_of("unapproved.txt"), ["r1"], "the user allowed it");
    let journaled = policies(&f.journal);
    assert_eq!(journaled.len(), 2, "{journaled:?}");
    let change = &journaled[1];
    assert_eq!(change.approval, runtime::event::ApprovalPolicy::Allow);
    assert!(change.reason.contains("--approve"), "{}", change.reason);
    // Everything the flag did not name stays as it was.
    assert_eq!(change.parallel_max, 3);
    assert_eq!(change.fsync, runtime::event::SyncPolicy::Always);
}

#[test]
fn a_resume_refuses_a_configuration_file_that_changed_unless_it_is_named() {
    let f = fixture();
    let config = f.dir.path().join("config.toml");
    std::fs::write(&config, "[tools.grep]\nexposure = \"hidden\"\n").unwrap();
    let script = f.script(
        "config.jsonl",
        &[
            user("long job"),
            bash("k1", "echo k1 >> marker.txt; sleep 60", "tool_use"),
            end(),
            user("next"),
            bash("r1", "echo r1 >> after.txt", "end_turn"),
        ],
    );
    f.crash_mid_bash(&script, &["--config".as_ref(), config.as_os_str()]);
    let journaled = policies(&f.journal);
    assert_eq!(
        journaled[0].exposure,
        [("grep".to_owned(), "hidden".to_owned())]
    );
    let recorded = journaled[0].config.clone().expect("the file is recorded");
    assert_eq!(recorded.path, config.display().to_string());

    // The file changed while the session was down: a resume with no --config refuses.
    std::fs::write(&config, "[tools.grep]\nexposure = \"direct\"\n").unwrap();
    let out = f.resume(&script, None).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("configuration changed") && stderr.contains("--config"),
        "{stderr}"
    );
    assert!(!f.ws.join("after.txt").exists());

    // Named explicitly, it is accepted and the change journaled.
    let out = f.resume(&script, Some(&config)).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(f.lines_of("after.txt"), ["r1"]);
    let journaled = policies(&f.journal);
    assert_eq!(journaled.len(), 2, "{journaled:?}");
    assert!(journaled[1].exposure.is_empty());
    assert_ne!(journaled[1].config, journaled[0].config);
    assert!(
        journaled[1].reason.contains("--config"),
        "{}",
        journaled[1].reason
    );
}

#[test]
fn an_mcp_server_that_cannot_start_leaves_no_interrupted_session_and_a_missing_cwd_is_named() {
    let f = fixture();
    let state = f.dir.path().join("state");
    let missing = f.dir.path().join("no-such-dir");
    let config = f.dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[mcp_servers.fs]\ncommand = \"sh\"\nargs = [\"-c\", \"exit 3\"]\ncwd = {:?}\n",
            missing.display().to_string()
        ),
    )
    .unwrap();
    let script = f.script("s.jsonl", &[user("hi"), end()]);
    let out = tooljournal()
        .args(["run", "--script"])
        .arg(&script)
        .arg("--workspace")
        .arg(&f.ws)
        .arg("--config")
        .arg(&config)
        .env("XDG_STATE_HOME", &state)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("cwd {}", missing.display())) && stderr.contains("fs"),
        "names the missing cwd and the server: {stderr}"
    );
    assert!(
        !stderr.contains("\"sh\""),
        "does not blame the command: {stderr}"
    );

    let out = tooljournal()
        .args(["sessions", "--json"])
        .env("XDG_STATE_HOME", &state)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let rows: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["status"], "never started", "{rows:?}");
}

#[test]
fn listing_sessions_writes_nothing_into_them() {
    let f = fixture();
    let state = f.dir.path().join("state");
    let script = f.script("s.jsonl", &[user("hi"), bash("b1", "true", "end_turn")]);
    let journal = state.join("tooljournal/sessions/one");
    let out = tooljournal()
        .args(["run", "--script"])
        .arg(&script)
        .arg("--workspace")
        .arg(&f.ws)
        .arg("--journal")
        .arg(&journal)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let before = files_in(&journal);
    let out = tooljournal()
        .args(["sessions", "--json"])
        .env("XDG_STATE_HOME", &state)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        text(&out.stdout).contains("\"finished\""),
        "{}",
        describe(&out)
    );
    let after = files_in(&journal);
    assert!(before == after, "sessions changed a journal directory");
}

#[test]
fn an_error_names_the_journal_once() {
    let f = fixture();
    // A segment that cannot be read (a directory where the file should be).
    std::fs::create_dir_all(f.journal.join("00000000000000000000.segment")).unwrap();
    let script = f.script("s.jsonl", &[user("hi"), end()]);
    let out = f.resume(&script, None).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = text(&out.stderr);
    let place = f.journal.display().to_string();
    assert_eq!(stderr.matches(&place).count(), 1, "{stderr}");
    assert!(stderr.contains("Is a directory"), "{stderr}");
}
