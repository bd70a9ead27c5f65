//! Processes that outlive a SIGKILLed runtime: `tooljournal run` is killed while a `bash` call's
//! command runs; the shell dies with the runtime (parent-death signal), the command's other
//! processes are found again from the journal (`call/process`), recovery hands them to
//! `recover classify`'s warning, and `resume` refuses to go on beside them unless
//! `--kill-orphans` (journaled); the library's `Session::builder(..).resume()` refuses the same way.
//! A live run's own running call is no orphan, and `recover classify` does not call it one.

use crate::common::recover_bin;

use runtime::event::{Event, ProcessStarted, Record};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn events(journal: &Path) -> Vec<Event> {
    let storage: std::sync::Arc<dyn journal::Storage> =
        std::sync::Arc::new(journal::FsStorage::open(journal).unwrap());
    journal::Reader::open(storage, journal::Limits::default())
        .unwrap()
        .map(|r| r.unwrap().decode::<Record>().unwrap().event)
        .collect()
}

/// Waits, within a bound that fails the test rather than hang it, until `done` holds.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s[s.rfind(')').unwrap() + 1..].split_whitespace().next();
            !matches!(state, Some("Z" | "X"))
        })
        .unwrap_or(false)
}

/// `tooljournal run` of the transcript `lines` (written to `script`), its output dropped.
fn spawn_run(
    script: &Path,
    lines: &[serde_json::Value],
    ws: &Path,
    journal: &Path,
) -> std::process::Child {
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(script, text.join("\n")).unwrap();
    Command::new(env!("CARGO_BIN_EXE_tooljournal"))
        .args(["run", "--script"])
        .arg(script)
        .arg("--workspace")
        .arg(ws)
        .arg("--journal")
        .arg(journal)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn processes_left_by_a_killed_runtime_are_reported_and_stopped_only_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let journal = tmp.path().join("journal");
    let script = tmp.path().join("s.jsonl");
    // The command's `sleep` is a child of the shell, in its process group: the shell dies with
    // the runtime, the sleep goes on (and `late.txt`, the shell's once the sleep ends, never
    // comes). The sleep is forked before `started.txt` is written: killed between the two, the
    // shell would leave no orphan to find.
    let command = "sleep 300 & echo started > started.txt; wait $!; echo late > late.txt";
    let lines = [
        json!({"user": "long job"}),
        json!({"assistant": {"text": "", "tool_calls": [{"id": "k1", "name": "bash",
            "arguments": json!({ "command": command }).to_string()}], "stop_reason": "tool_use"}}),
        json!({"assistant": {"text": "done", "tool_calls": [], "stop_reason": "end_turn"}}),
        json!({"user": "next"}),
        json!({"assistant": {"text": "", "tool_calls": [{"id": "n1", "name": "bash",
            "arguments": json!({ "command": "echo next > next.txt" }).to_string()}],
            "stop_reason": "end_turn"}}),
    ];
    let mut child = spawn_run(&script, &lines, &ws, &journal);
    // Its line, not only the file: the shell dies with the runtime, maybe between the two.
    wait_until("the command started", || {
        std::fs::read_to_string(ws.join("started.txt")).is_ok_and(|t| t.ends_with('\n'))
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let recorded: Vec<ProcessStarted> = events(&journal)
        .into_iter()
        .filter_map(|e| match e {
            Event::CallProcess { call, process } if call.call_id == "k1" => Some(process),
            _ => None,
        })
        .collect();
    assert_eq!(recorded.len(), 1, "the shell's group is journaled");
    let group = recorded[0].clone();
    assert_eq!(group.pid, group.pgid, "the shell leads its own group");
    wait_until("the shell died with the runtime", || !alive(group.pid));
    let members = runtime::process::still_running(&group);
    assert_eq!(members, Some(1), "the sleep outlived the runtime");

    // What recovery hands `recover classify` for its warning (the warning itself is checked
    // through the binary in recover/cli/tests/cli/cli_commands.rs).
    let dry = recover::Recovery::of(&journal).run().expect("recoverable");
    let unsettled = dry.analysis.replay.unsettled_processes();
    assert_eq!(unsettled.len(), 1, "{unsettled:?}");
    assert_eq!(unsettled[0].1, group);

    // resume refuses to go on beside it…
    let resume = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_tooljournal"))
            .args(["resume", "--journal"])
            .arg(&journal)
            .arg("--script")
            .arg(&script)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = resume(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("still running: process group {}", group.pgid))
            && stderr.contains("--kill-orphans"),
        "{stderr}"
    );
    assert!(!ws.join("next.txt").exists(), "nothing ran");
    assert_eq!(runtime::process::still_running(&group), Some(1));

    // The library's resume (what an embedding calls) refuses the same way, touching nothing.
    let before = std::fs::read_dir(&journal).unwrap().count();
    match runtime::Session::builder(&ws, &journal).resume() {
        Err(runtime::BuildError::StillRunning { call, pgid, .. }) => {
            assert_eq!((call.call_id.as_str(), pgid), ("k1", group.pgid));
        }
        Err(e) => panic!("expected StillRunning, got {e}"),
        Ok(_) => panic!("the library resumed beside a running process group"),
    }
    assert_eq!(std::fs::read_dir(&journal).unwrap().count(), before);
    assert_eq!(runtime::process::still_running(&group), Some(1));

    // …unless told to stop it: then the group is gone, the kill journaled, the session goes on.
    let out = resume(&["--kill-orphans"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(runtime::process::still_running(&group), None);
    assert!(ws.join("next.txt").exists());
    assert!(
        !ws.join("late.txt").exists(),
        "the orphan never got to write"
    );
    assert!(events(&journal).iter().any(|e| matches!(
        e,
        Event::ProcessKilled { call, pgid, signal: 9 } if call.call_id == "k1" && *pgid == group.pgid
    )));
    let after = recover::Recovery::of(&journal).run().expect("recoverable");
    assert!(
        after.analysis.replay.unsettled_processes().is_empty(),
        "the killed group is no longer a candidate"
    );
}

/// The run and its call's process group, both killed when dropped: a failed assertion leaves
/// neither behind.
struct Running {
    run: std::process::Child,
    group: Option<u32>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.run.kill();
        let _ = self.run.wait();
        if let Some(pgid) = self.group {
            let pgid = nix::unistd::Pid::from_raw(pgid as i32);
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

#[test]
fn classify_on_a_live_session_says_its_running_call_is_the_live_runs_not_an_orphan() {
    // Built before the run starts: on a fresh clone the build can outlast the session's
    // 120-second call timeout, which ends the call (and its group) before classify looks.
    let recover = recover_bin::recover_bin();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let journal = tmp.path().join("journal");
    let script = tmp.path().join("s.jsonl");
    let command = "sleep 300 & echo started > started.txt; wait $!";
    let lines = [
        json!({"user": "long job"}),
        json!({"assistant": {"text": "", "tool_calls": [{"id": "k1", "name": "bash",
            "arguments": json!({ "command": command }).to_string()}], "stop_reason": "tool_use"}}),
        json!({"assistant": {"text": "done", "tool_calls": [], "stop_reason": "end_turn"}}),
    ];
    let run = spawn_run(&script, &lines, &ws, &journal);
    let mut running = Running { run, group: None };
    wait_until("the command started", || {
        std::fs::read_to_string(ws.join("started.txt")).is_ok_and(|t| t.ends_with('\n'))
    });
    // The group is journaled right after the shell is spawned, which may be after the command
    // wrote its file.
    let group = || {
        events(&journal).into_iter().find_map(|e| match e {
            Event::CallProcess { call, process } if call.call_id == "k1" => Some(process.pgid),
            _ => None,
        })
    };
    wait_until("the shell's group is journaled", || group().is_some());
    let pgid = group().expect("journaled: waited for above");
    running.group = Some(pgid);
    let classify = || {
        Command::new(recover)
            .args(["classify", "--dry-run"])
            .arg(&journal)
            .output()
            .unwrap()
    };

    // The run holds the session: its call runs in it, and no resume could or should stop it.
    let out = classify();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("call k1 (turn 1, step 1): process group {pgid}"))
            && stderr.contains("the session is live")
            && stderr.contains("live run's"),
        "{stderr}"
    );
    assert!(!stderr.contains("--kill-orphans"), "{stderr}");
    assert!(!stderr.contains("still running: process group"), "{stderr}");

    // Once the run is killed, the same group is an orphan, and said to be one.
    running.run.kill().unwrap(); // SIGKILL
    running.run.wait().unwrap();
    let out = classify();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("still running: process group {pgid}"))
            && stderr.contains("--kill-orphans"),
        "{stderr}"
    );
}
