//! `tooljournal run` end to end on transcripts under `tests/data/`: the per-call outcome of
//! every call is compared with the `.expected` file beside the transcript (written by hand
//! from the transcript, not from a run), and the workspace is checked for what really happened.

use runtime::replay::{replay_storage, SessionReplay};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

fn tooljournal(args: &[&str], state_home: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tooljournal"))
        .args(args)
        .env("XDG_STATE_HOME", state_home)
        .output()
        .expect("the binary runs")
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    journal: PathBuf,
    state: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    let ws = root.join("ws");
    std::fs::create_dir_all(ws.join("logs")).unwrap();
    std::fs::write(ws.join("notes.txt"), "TODO: tidy\nsecond line\n").unwrap();
    std::fs::write(
        ws.join("logs/app.log"),
        "INFO start\nERROR boom\nINFO end\nERROR again\n",
    )
    .unwrap();
    std::fs::write(root.join("outside.txt"), "private\n").unwrap();
    Fixture {
        journal: root.join("journal"),
        state: root.join("state"),
        ws,
        root,
        _dir: dir,
    }
}

fn run(f: &Fixture, script: &str) -> Output {
    let out = tooljournal(
        &[
            "run",
            "--script",
            data(script).to_str().unwrap(),
            "--workspace",
            f.ws.to_str().unwrap(),
            "--journal",
            f.journal.to_str().unwrap(),
        ],
        &f.state,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn replay(journal: &Path) -> SessionReplay {
    let storage = journal::FsStorage::open(journal).unwrap();
    let (replay, end) = replay_storage(Arc::new(storage), journal::Limits::default()).unwrap();
    assert_eq!(end, journal::ReadEnd::Clean);
    replay
}

/// `call tool path code` for every call: path is the state the call reached before `committed`.
fn outcomes(replay: &SessionReplay) -> Vec<String> {
    replay
        .calls()
        .map(|c| {
            let path = if c.rejection.is_some() {
                "rejected"
            } else if c.cancel_reason.is_some() {
                "cancelled-before-start"
            } else if c.outcome.is_some() {
                "settled"
            } else {
                c.state.as_str()
            };
            let code = c
                .committed
                .as_ref()
                .and_then(|r| r.code)
                .map(|c| c.as_str())
                .unwrap_or("-");
            format!("{} {} {path} {code}", c.call.call_id, c.tool)
        })
        .collect()
}

fn expected(name: &str) -> Vec<String> {
    std::fs::read_to_string(data(name))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn basic_transcript_gives_the_expected_outcomes_and_workspace() {
    let f = fixture();
    run(&f, "basic.jsonl");
    let replay = replay(&f.journal);
    assert!(replay.closed, "the session closed");
    assert_eq!(outcomes(&replay), expected("basic.expected"));
    assert!(replay
        .calls()
        .all(|c| c.state == runtime::state::CallState::Committed));
    // The first edit happened, the stale one did not; the bash append did.
    assert_eq!(
        std::fs::read_to_string(f.ws.join("notes.txt")).unwrap(),
        "DONE: tidy\nsecond line\nappended\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("summary.md")).unwrap(),
        "# Summary\nnotes tidied\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.root.join("outside.txt")).unwrap(),
        "private\n"
    );
    // The plan survives in the journal.
    assert_eq!(
        replay.plan.as_ref().map(|p| p[0].text.as_str()),
        Some("tidy notes")
    );
    // Two turns, both completed.
    let outcomes: Vec<_> = replay.turns.iter().map(|t| t.outcome.clone()).collect();
    assert_eq!(
        outcomes,
        vec![Some(runtime::event::TurnOutcome::Completed); 2]
    );
}

#[test]
fn cancel_transcript_stops_the_turn_and_runs_nothing_after() {
    let f = fixture();
    run(&f, "cancel.jsonl");
    let replay = replay(&f.journal);
    assert_eq!(outcomes(&replay), expected("cancel.expected"));
    assert!(f.ws.join("started.txt").exists(), "the bash call did start");
    assert!(
        !f.ws.join("never.txt").exists(),
        "the stopped turn's next response was skipped"
    );
    use runtime::event::TurnOutcome::*;
    let turns: Vec<_> = replay.turns.iter().map(|t| t.outcome.clone()).collect();
    assert_eq!(
        turns,
        vec![Some(Cancelled), Some(Cancelled), Some(Completed)]
    );
    // The killed shell's exit is confirmed.
    let s1 = replay.calls().find(|c| c.call.call_id == "s1").unwrap();
    let effects = &s1.outcome.as_ref().unwrap().side_effects;
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, runtime::event::SideEffect::ProcExit { .. })),
        "{effects:?}"
    );
}

#[test]
fn several_runs_at_once_each_keep_their_own_session() {
    let fixtures: Vec<Fixture> = (0..3).map(|_| fixture()).collect();
    let state = tempfile::tempdir().unwrap();
    let spawned: Vec<_> = fixtures
        .iter()
        .map(|f| {
            Command::new(env!("CARGO_BIN_EXE_tooljournal"))
                .args([
                    "run",
                    "--script",
                    data("basic.jsonl").to_str().unwrap(),
                    "--workspace",
                    f.ws.to_str().unwrap(),
                ])
                .env("XDG_STATE_HOME", state.path())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in spawned {
        assert!(child.wait().unwrap().success());
    }
    let sessions = tooljournal(&["sessions", "--json"], state.path());
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&sessions.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3, "one session per run");
    for row in &rows {
        assert_eq!(row["status"], "finished", "{row}");
        assert_eq!(row["calls"], 15);
        assert_eq!(row["orphans"], 0);
    }
    let ids: std::collections::HashSet<_> = rows.iter().map(|r| r["id"].to_string()).collect();
    assert_eq!(ids.len(), 3, "distinct session ids");
    for f in &fixtures {
        assert_eq!(
            std::fs::read_to_string(f.ws.join("notes.txt")).unwrap(),
            "DONE: tidy\nsecond line\nappended\n",
            "each run worked on its own workspace"
        );
    }
}

#[test]
fn a_bad_script_is_refused_naming_its_line() {
    let f = fixture();
    let script = f.root.join("bad.jsonl");
    std::fs::write(
        &script,
        "{\"user\": \"hi\"}\n{\"assistant\": {\"tool_calls\": 3}}\n",
    )
    .unwrap();
    let out = tooljournal(
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            f.ws.to_str().unwrap(),
            "--journal",
            f.journal.to_str().unwrap(),
        ],
        &f.state,
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.jsonl:2:"), "{stderr}");
    assert!(
        !f.journal.exists(),
        "nothing was written for a script that does not parse"
    );
}

#[test]
fn a_session_killed_mid_bash_resumes_without_rerunning_the_unknown_call() {
    let f = fixture();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tooljournal"))
        .args([
            "run",
            "--script",
            data("killed.jsonl").to_str().unwrap(),
            "--workspace",
            f.ws.to_str().unwrap(),
            "--journal",
            f.journal.to_str().unwrap(),
        ])
        .env("XDG_STATE_HOME", &f.state)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let marker = f.ws.join("marker.txt");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    // Its line, not only the file: the shell dies with the runtime (parent-death signal),
    // possibly between creating the file and writing to it.
    while !std::fs::read_to_string(&marker).is_ok_and(|t| t == "k1\n") {
        assert!(
            std::time::Instant::now() < deadline,
            "the bash call never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();

    let out = tooljournal(
        &[
            "resume",
            "--journal",
            f.journal.to_str().unwrap(),
            "--script",
            data("killed.jsonl").to_str().unwrap(),
        ],
        &f.state,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("may have run, not re-run: k1"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "k1\n",
        "k1 ran once; k3 (same, stopped turn) never ran"
    );
    let replay = replay(&f.journal);
    assert!(replay.closed, "the resumed session completed");
    let k1 = replay.calls().find(|c| c.call.call_id == "k1").unwrap();
    assert_eq!(
        k1.committed.as_ref().unwrap().code,
        Some(runtime::ErrorCode::ToolOutcomeUnknown)
    );
    assert!(k1.recovered);
    // k2 was approved and never started (it waited behind the bash barrier): the resume ran
    // it again (`--rerun not-started`, the default), once, with its real result.
    let k2 = replay.calls().find(|c| c.call.call_id == "k2").unwrap();
    assert_eq!(k2.committed.as_ref().unwrap().code, None);
    assert_eq!(k2.rerun, Some(runtime::event::RerunPolicy::NotStarted));
    assert_eq!(k2.attempts, 1);
    assert!(stdout.contains("ran again: call k2"), "{stdout}");
    let k4 = replay.calls().find(|c| c.call.call_id == "k4").unwrap();
    assert!(!k4.committed.as_ref().unwrap().is_error);
    assert!(
        replay.calls().all(|c| c.call.call_id != "k3"),
        "the interrupted turn's next response was not played"
    );
    // Resuming again is fine: nothing runs twice.
    let again = tooljournal(
        &[
            "resume",
            "--journal",
            f.journal.to_str().unwrap(),
            "--script",
            data("killed.jsonl").to_str().unwrap(),
        ],
        &f.state,
    );
    assert_eq!(again.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&again.stdout).contains("already finished"));
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "k1\n");
}
