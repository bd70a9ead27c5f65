//! The machinery of `kill.rs`: seeded transcripts whose `bash` calls mark a file, one
//! iteration's directory with the real `tooljournal` binary run, killed and resumed in it, the
//! wait for a killed writer's journal lock, and the checks of what recovery says against the
//! marker file (I1, I4, I6).
#![allow(dead_code)]

use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};
use recover::providers::{request_body, stand_in_tools, validate, Format};
use recover::Recovered;
use recover::Recovery;
use runtime::event::Classification;
use runtime::state::CallState;
use runtime::ErrorCode;
use serde_json::{json, Value};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::RwLock;
use std::time::{Duration, Instant};

/// Longest a killed writer's not-yet-exec'd child may keep the journal locked.
pub const LOCK_GRACE: Duration = Duration::from_secs(2);
/// Longest a `resume` may take before it counts as hung.
pub const RESUME_TIMEOUT: Duration = Duration::from_secs(30);
pub const MARKER: &str = "marker.txt";

/// Held for reading while this process holds a journal's lock (inside `recover`), for writing
/// while it starts a child. A child inherits every open file until its `exec` closes them, so a
/// child started from one worker while another holds a journal's lock would hold that lock a
/// little longer, and a recovery right after would see the journal as live. `Command::spawn`
/// returns only once the child has exec'd, so holding the gate across it is enough.
pub static SPAWN_GATE: RwLock<()> = RwLock::new(());

pub fn spawn(cmd: &mut Command) -> Child {
    let _gate = SPAWN_GATE.write().unwrap_or_else(|p| p.into_inner());
    cmd.spawn().expect("the binary starts")
}

pub fn recover_gated(journal: &Path, write: bool) -> Result<Recovered, recover::RecoverError> {
    let _gate = SPAWN_GATE.read().unwrap_or_else(|p| p.into_inner());
    Recovery::of(journal).write(write).run()
}

pub fn rng_for(seed: u64, iteration: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&iteration.to_le_bytes());
    bytes[16..24].copy_from_slice(b"killtest");
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// Uniform enough in `0..n` for test delays and shapes.
pub fn below(rng: &mut TestRng, n: u64) -> u64 {
    rng.next_u64() % n.max(1)
}

pub fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
    )
}

/// A generated transcript.
pub struct Script {
    pub text: String,
    pub calls: usize,
    pub bash_calls: usize,
}

/// Two or three turns of one or two tool-using steps, each a batch of one to four calls mixing
/// exclusive `bash` calls (which mark) with parallel-safe reads and exclusive writes and edits;
/// every call id unique in the transcript.
pub fn generate_script(rng: &mut TestRng) -> Script {
    let mut lines: Vec<Value> = Vec::new();
    let mut calls = 0usize;
    let mut bash_calls = 0usize;
    let turns = 2 + below(rng, 2);
    for turn in 1..=turns {
        lines.push(json!({ "user": format!("turn {turn}: carry on") }));
        let steps = 1 + below(rng, 2);
        for step in 1..=steps {
            let batch = 1 + below(rng, 4);
            let mut tool_calls = Vec::new();
            for _ in 0..batch {
                calls += 1;
                let id = format!("k{calls}");
                // The first call of a turn's first step always marks, so every turn has one.
                let kind = if step == 1 && tool_calls.is_empty() {
                    0
                } else {
                    below(rng, 10)
                };
                let file = format!("w{}.txt", below(rng, 3));
                let (name, arguments) = match kind {
                    0..=3 => {
                        bash_calls += 1;
                        let sleep = below(rng, 3);
                        (
                            "bash",
                            json!({"command": format!("echo {id} >> {MARKER}; sleep 0.0{sleep}")}),
                        )
                    }
                    4 => ("read", json!({"path": "notes.txt"})),
                    5 => ("read", json!({"path": file})),
                    6 => (
                        "write",
                        json!({"path": file, "content": format!("written by {id}\n")}),
                    ),
                    7 => {
                        let old = format!("line{}", below(rng, 3));
                        let new = format!("line{} ({id})", below(rng, 3));
                        (
                            "edit",
                            json!({"path": "notes.txt", "old_string": old, "new_string": new}),
                        )
                    }
                    8 => ("ls", json!({})),
                    _ => ("grep", json!({"pattern": "line", "path": "notes.txt"})),
                };
                tool_calls.push(json!({
                    "id": id,
                    "name": name,
                    "arguments": arguments.to_string(),
                }));
            }
            lines.push(json!({"assistant": {
                "text": format!("turn {turn} step {step}"),
                "tool_calls": tool_calls,
                "stop_reason": "tool_use",
            }}));
        }
        lines.push(json!({"assistant": {
            "text": format!("turn {turn} done"),
            "stop_reason": "end_turn",
        }}));
    }
    let mut text = String::new();
    for line in &lines {
        text.push_str(&line.to_string());
        text.push('\n');
    }
    Script {
        text,
        calls,
        bash_calls,
    }
}

/// One iteration's directory: workspace, transcript, journal.
pub struct Case {
    pub dir: tempfile::TempDir,
    pub ws: PathBuf,
    pub script: PathBuf,
    pub journal: PathBuf,
    pub state: PathBuf,
}

impl Case {
    pub fn new(script: &Script) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        let ws = root.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("notes.txt"), "line0\nline1\nline2\n").unwrap();
        let script_path = root.join("script.jsonl");
        std::fs::write(&script_path, &script.text).unwrap();
        Case {
            journal: root.join("journal"),
            state: root.join("state"),
            script: script_path,
            ws,
            dir,
        }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn command(&self, args: &[&str], log: &str) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tooljournal"));
        cmd.args(args)
            .env("XDG_STATE_HOME", &self.state)
            .stdin(Stdio::null())
            .stdout(File::create(self.root().join(format!("{log}.out"))).unwrap())
            .stderr(File::create(self.root().join(format!("{log}.err"))).unwrap());
        cmd
    }

    pub fn spawn_run(&self, fsync: &str, max_parallel: u64) -> Child {
        spawn(&mut self.command(
            &[
                "run",
                "--script",
                self.script.to_str().unwrap(),
                "--workspace",
                self.ws.to_str().unwrap(),
                "--journal",
                self.journal.to_str().unwrap(),
                "--fsync",
                fsync,
                "--max-parallel",
                &max_parallel.to_string(),
            ],
            "run",
        ))
    }

    pub fn spawn_resume(&self, log: &str, extra: &[&str]) -> Child {
        let mut args = vec![
            "resume",
            "--journal",
            self.journal.to_str().unwrap(),
            "--script",
            self.script.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        spawn(&mut self.command(&args, log))
    }

    /// Waits for a resume, killed and reported as hung after [`RESUME_TIMEOUT`].
    pub fn wait_resume(&self, mut child: Child, log: &str) -> Result<ExitStatus, String> {
        let deadline = Instant::now() + RESUME_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "resume did not finish within {RESUME_TIMEOUT:?}; {}",
                    self.logs(log)
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// `tooljournal resume`. A killed run's command may outlive it by its `sleep` (a few tens
    /// of ms): a resume that meets it refuses ("still running"), and is repeated with
    /// `--kill-orphans`, as a user would.
    pub fn resume(&self) -> Result<ExitStatus, String> {
        let status = self.wait_resume(self.spawn_resume("resume", &[]), "resume")?;
        if status.code() == Some(1) && self.logs("resume").contains("still running: process group")
        {
            return self.wait_resume(self.spawn_resume("resume", &["--kill-orphans"]), "resume");
        }
        Ok(status)
    }

    pub fn logs(&self, log: &str) -> String {
        let read = |ext: &str| {
            std::fs::read_to_string(self.root().join(format!("{log}.{ext}"))).unwrap_or_default()
        };
        format!(
            "{log} stdout:\n{}\n{log} stderr:\n{}",
            read("out").trim_end(),
            read("err").trim_end()
        )
    }

    /// The ids in the marker file, with how many times each appears, in file order.
    pub fn marks(&self) -> Vec<(String, usize)> {
        let text = std::fs::read_to_string(self.ws.join(MARKER)).unwrap_or_default();
        let mut counts: Vec<(String, usize)> = Vec::new();
        for id in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            match counts.iter_mut().find(|(i, _)| i == id) {
                Some((_, n)) => *n += 1,
                None => counts.push((id.to_owned(), 1)),
            }
        }
        counts
    }
}

/// After the writer was killed and reaped: waits until nothing holds the journal's lock, up to
/// [`LOCK_GRACE`]. Returns how long it waited, if at all.
///
/// Known product behaviour (reported with these tests): a `bash` call's shell that the writer
/// had forked but that had not yet exec'd when the writer was killed still holds the journal's
/// lock, through the descriptor it inherited, until its `exec` closes it: a few milliseconds,
/// tens under load. Meanwhile recovery reads the journal as live (read-only) and `tooljournal
/// resume` refuses it. This waits that out, boundedly, and the test counts it;
/// `KILL_STRICT_LOCK=1` fails on it instead.
pub fn wait_for_lock(journal: &Path) -> Result<Option<Duration>, String> {
    let since = Instant::now();
    let mut holders = None;
    loop {
        let live = recover_gated(journal, false).is_ok_and(|r| r.analysis.live);
        if !live {
            return Ok(holders.map(|_| since.elapsed()));
        }
        let seen = holders.get_or_insert_with(|| lock_holders(&journal.join("LOCK")));
        if std::env::var_os("KILL_STRICT_LOCK").is_some() || since.elapsed() > LOCK_GRACE {
            return Err(format!(
                "the killed (and reaped) session's journal is still locked (recovery sees it \
                 live) {:?} after the kill; processes holding its LOCK file when first seen: \
                 {seen:?}",
                since.elapsed()
            ));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Processes with `lock` open, as `pid: command line` (for failure messages).
pub fn lock_holders(lock: &Path) -> Vec<String> {
    let mut holders = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return holders;
    };
    for p in procs.flatten() {
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == lock))
        {
            let cmdline = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
            holders.push(format!(
                "{}: {}",
                p.file_name().to_string_lossy(),
                String::from_utf8_lossy(&cmdline).replace('\0', " ")
            ));
        }
    }
    holders
}

/// Where the kill landed, as the journal tells it.
pub fn kill_point(r: &Recovered) -> &'static str {
    let a = &r.analysis;
    if a.replay.open.is_none() {
        "before the first record"
    } else if a.replay.closed {
        "after session/close"
    } else if a
        .calls
        .iter()
        .any(|c| c.classification == Some(Classification::ToolOutcomeUnknown))
    {
        "mid-call (started, not settled)"
    } else if a
        .recovery
        .as_ref()
        .is_some_and(|r| r.interrupted_step.is_some())
    {
        "mid-step (no call running)"
    } else if a.replay.open_turn().is_some() {
        "mid-turn (between steps)"
    } else {
        "between turns"
    }
}

/// The four providers' bodies of a recovered conversation, each validated.
pub fn rebuild_all(r: &Recovered) -> Result<Vec<Value>, String> {
    let conv = r.analysis.conversation();
    let mut bodies = Vec::new();
    for format in Format::ALL {
        // Stand-ins for the tools called: Anthropic takes no tool calls without tools.
        let tools = stand_in_tools(&conv);
        let body = request_body(&conv, &tools, &Default::default(), format).value();
        validate(format, &body)
            .map_err(|v| format!("the {format} rebuild does not validate: {v}\n{body:#}"))?;
        bodies.push(body);
    }
    Ok(bodies)
}

pub fn recover_ok(journal: &Path, write: bool, what: &str) -> Result<Recovered, String> {
    recover_gated(journal, write)
        .map_err(|e| format!("{what}: recover(write: {write}) failed: {e}"))
}

/// A marked call's standing in a recovery: it may have run (`TOOL_OUTCOME_UNKNOWN`) or it has
/// its real result; anything else is a lie about a body that ran.
pub fn check_marked(r: &Recovered, id: &str, when: &str) -> Result<(), String> {
    let Some(c) = r.analysis.calls.iter().find(|c| c.call.call_id == id) else {
        return Err(format!(
            "call {id} wrote its marker but is not in the journal {when} (its `started` was not \
             durable before its body ran: I1)"
        ));
    };
    let truthful = match c.classification {
        Some(Classification::ToolOutcomeUnknown) => true,
        Some(Classification::ToolNotStarted) => false,
        // Its real result: it settled (perhaps committed), and the result is not "not started".
        None => {
            matches!(c.state, CallState::Settled | CallState::Committed)
                && c.result.code != Some(ErrorCode::ToolNotStarted)
        }
    };
    if truthful {
        Ok(())
    } else {
        Err(format!(
            "call {id} wrote its marker, but {when} it is {:?} in state {} with result {:?} \
             (a call whose body ran must be TOOL_OUTCOME_UNKNOWN or have its real result: I1)",
            c.classification,
            c.state.as_str(),
            c.result
        ))
    }
}

/// A `bash` call whose success recovery reports must have written its marker (I4).
pub fn check_no_fabricated_bash(
    r: &Recovered,
    marks: &[(String, usize)],
    when: &str,
) -> Result<(), String> {
    for c in &r.analysis.calls {
        let real_success = c.tool == "bash"
            && c.classification.is_none()
            && matches!(c.state, CallState::Settled | CallState::Committed)
            && !c.result.is_error;
        if real_success && !marks.iter().any(|(id, _)| *id == c.call.call_id) {
            return Err(format!(
                "bash call {} is reported as a success {when}, but it never wrote its marker \
                 (fabricated success: I4); result {:?}",
                c.call.call_id, c.result
            ));
        }
    }
    Ok(())
}

/// The bytes of the journal's records so far (all segments). Not the files' lengths: a live
/// segment (format 2) is zero-filled ahead of its records, from the moment it is created
/// (1 MiB by default), so its length says nothing of how far the session got; its records end
/// where its zero tail begins.
pub fn journal_bytes(journal: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(journal) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| journal::segment::parse_file_name(&e.file_name().to_string_lossy()).is_some())
        .map(|e| records_bytes(&e.path()))
        .sum()
}

/// The bytes of the records of the segment at `path`: from its header to its last byte that
/// is not zero, read a chunk at a time up to the first chunk of zeros only (its zero tail; no
/// record here holds a chunk of zeros). 0 for a segment without records (or gone).
fn records_bytes(path: &Path) -> u64 {
    use std::io::Read;
    const CHUNK_BYTES: usize = 16 << 10;
    let Ok(file) = File::open(path) else {
        return 0;
    };
    let mut chunks = std::io::BufReader::with_capacity(CHUNK_BYTES, file);
    let mut chunk = vec![0u8; CHUNK_BYTES];
    let (mut offset, mut end) = (0u64, 0u64);
    loop {
        let mut filled = 0;
        while filled < CHUNK_BYTES {
            match chunks.read(&mut chunk[filled..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => filled += n,
            }
        }
        let Some(last) = chunk[..filled].iter().rposition(|&b| b != 0) else {
            break;
        };
        end = offset + last as u64 + 1;
        offset += filled as u64;
        if filled < CHUNK_BYTES {
            break;
        }
    }
    end.saturating_sub(journal::segment::HEADER_BYTES as u64)
}

/// When to kill, drawn from the seeded generator.
#[derive(Debug, Clone, Copy)]
pub enum KillAt {
    /// This long after spawn: mostly during start-up, before the first record.
    AfterSpawn(Duration),
    /// Once the journal holds this many bytes (anywhere in the session, or never: a little past
    /// its natural end), then this long after. Counting bytes rather than time keeps the kills
    /// spread over the session however loaded the machine is.
    AtJournalBytes(u64, Duration),
}

impl std::fmt::Display for KillAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KillAt::AfterSpawn(d) => write!(f, "{:.1} ms after spawn", d.as_secs_f64() * 1e3),
            KillAt::AtJournalBytes(bytes, d) => write!(
                f,
                "{:.1} ms after the journal reached {bytes} bytes",
                d.as_secs_f64() * 1e3
            ),
        }
    }
}

/// Waits as `at` says (or until the run ends by itself), then SIGKILLs the run. Returns when
/// the kill was sent, counted from spawn.
pub fn kill_run(child: &mut Child, journal: &Path, at: KillAt) -> Duration {
    let spawned = Instant::now();
    let deadline = match at {
        KillAt::AfterSpawn(d) => spawned + d,
        KillAt::AtJournalBytes(bytes, d) => {
            let give_up = spawned + RESUME_TIMEOUT;
            while journal_bytes(journal) < bytes.max(1)
                && Instant::now() < give_up
                && child.try_wait().ok().flatten().is_none()
            {
                std::thread::sleep(Duration::from_micros(300));
            }
            Instant::now() + d
        }
    };
    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
    let _ = child.kill(); // SIGKILL; does nothing if the run already ended
    spawned.elapsed()
}
