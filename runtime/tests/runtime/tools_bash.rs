//! The `bash` tool through the runtime (DESIGN.md §5, §9): a session with `bash` registered as a
//! built-in, a real workspace in a temp directory, real processes and real time, the journal on
//! a simulated disk. Every wait is bounded by a deadline, and each test takes at most a few
//! seconds.

use crate::common;

use common::*;
use journal::SimStorage;
use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tooljournal_runtime::bash::{Bash, KILL_GRACE_MS, OUTPUT_BYTES_MAX, PROGRESS_INTERVAL_MS};
use tooljournal_runtime::event::{
    CallRef, OutcomeStatus, SideEffect, StepOutcome, ToolSource, TurnOutcome,
};
use tooljournal_runtime::replay::CallReplay;
use tooljournal_runtime::Hooks;
use tooljournal_runtime::Registry;
use tooljournal_runtime::Tool;
use tooljournal_runtime::Workspace;
use tooljournal_runtime::{Config, ErrorCode, Session, ToolResult};

/// The longest any one batch may take here before the test fails instead of hanging.
const BATCH_DEADLINE: Duration = Duration::from_secs(60);

/// Room on every upper time bound for a loaded machine (CI shares two cores with other builds:
/// spawning a shell can take seconds). An upper bound here only says that something did not
/// wait for what it must never wait for (a whole grace period, a process that holds a pipe for
/// a minute), which the slack leaves well apart; what stopped a process is asserted from its
/// exit signal, not from the clock.
const LOADED_MACHINE_SLACK: Duration = Duration::from_secs(8);

struct Setup {
    dir: tempfile::TempDir,
    storage: SimStorage,
    session: Session,
}

fn setup(config: Config) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = Arc::new(Workspace::new(dir.path(), &[]).unwrap());
    let mut registry = Registry::new();
    registry
        .register(Arc::new(Bash::new(ws)), ToolSource::BuiltIn)
        .unwrap();
    let storage = SimStorage::new();
    let session = session_on(&storage, Arc::new(registry), Hooks::default(), config);
    Setup {
        dir,
        storage,
        session,
    }
}

fn bash_call(id: &str, args: serde_json::Value) -> tooljournal_runtime::event::ModelCall {
    call(id, "bash", &args.to_string())
}

/// Runs one call in a turn of its own; `cancel_when` (if any) cancels the batch once it
/// returns true (polled every 10 ms).
async fn run_one(
    s: &mut Session,
    c: tooljournal_runtime::event::ModelCall,
    cancel_when: Option<&(dyn Fn() -> bool + Sync)>,
) -> ToolResult {
    s.begin_turn("go").unwrap();
    s.begin_step().unwrap();
    let cancel = CancellationToken::new();
    let batch = s.run_batch_cancellable(response(vec![c]), cancel.clone());
    let canceller = async {
        let Some(when) = cancel_when else { return };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !when() {
            assert!(Instant::now() < deadline, "the cancel condition never held");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        cancel.cancel();
    };
    let (results, ()) =
        tokio::time::timeout(BATCH_DEADLINE, async { tokio::join!(batch, canceller) })
            .await
            .expect("the batch settles");
    let mut results = results.expect("batch");
    let outcome = if cancel.is_cancelled() {
        (StepOutcome::Cancelled, TurnOutcome::Cancelled)
    } else {
        (StepOutcome::Completed, TurnOutcome::Completed)
    };
    s.end_step(outcome.0).unwrap();
    s.end_turn(outcome.1).await.unwrap();
    assert_eq!(results.len(), 1);
    results.pop().unwrap()
}

/// The one `ProcExit` the call's `settled` confirms: (pid, status, signal).
fn proc_exit(c: &CallReplay) -> (u32, Option<i32>, Option<i32>) {
    let outcome = c.outcome.as_ref().expect("settled");
    let exits: Vec<_> = outcome
        .side_effects
        .iter()
        .filter_map(|e| match e {
            SideEffect::ProcExit {
                pid,
                status,
                signal,
            } => Some((*pid, *status, *signal)),
            _ => None,
        })
        .collect();
    assert_eq!(exits.len(), 1, "{outcome:?}");
    exits[0]
}

fn settled_code(c: &CallReplay) -> Option<ErrorCode> {
    match &c.outcome.as_ref().expect("settled").status {
        OutcomeStatus::Success => None,
        OutcomeStatus::Error { code, .. } => Some(*code),
    }
}

/// Whether `pid` is gone: no such process, or only a corpse waiting for a reaper that is not
/// us (a killed orphan belongs to init, which may take its time).
fn gone(pid: i32) -> bool {
    if kill(Pid::from_raw(pid), None) == Err(Errno::ESRCH) {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after = &stat[stat.rfind(')')? + 1..];
            after.split_whitespace().next().map(|s| s == "Z")
        })
        .unwrap_or(false)
}

/// Waits (bounded) until every pid is gone; false if some pid outlives the deadline.
async fn all_gone(pids: &[i32], within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if pids.iter().all(|p| gone(*p)) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The shell's pid and its background child's pid, from the file the command wrote.
fn read_pids(path: &Path) -> (i32, i32) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut it = text.split_whitespace().map(|p| p.parse::<i32>().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

/// A command that starts a background sleeper, records `$$ $!` in `pids` (atomically), then
/// sleeps in the foreground.
const SLEEPER_FAMILY: &str = r#"sleep 30 & echo "$$ $!" > pids.tmp && mv pids.tmp pids; sleep 30"#;

#[tokio::test]
async fn bash_runs_in_the_workspace_and_confirms_its_exit_status() {
    let mut t = setup(Config::default());
    let root = t.dir.path().canonicalize().unwrap();
    let command = "pwd -P; echo to-stderr >&2; echo to-stdout; exit 3";
    let r = run_one(
        &mut t.session,
        bash_call("c1", json!({ "command": command })),
        None,
    )
    .await;

    // A non-zero exit is the command's answer, not the tool's failure.
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.code, None);
    let lines: Vec<&str> = r.content.lines().collect();
    assert_eq!(lines[0], root.to_str().unwrap(), "{:?}", r.content);
    // stderr is captured with stdout, in the order they were written.
    assert_eq!(
        lines[1..],
        ["to-stderr", "to-stdout", "exit status 3"],
        "{:?}",
        r.content
    );
    assert_eq!(r.value, Some(json!({"exit_status": 3, "signal": null})));

    let c = replayed(&t.storage, "c1");
    assert_eq!(settled_code(&c), None);
    let (pid, status, signal) = proc_exit(&c);
    assert!(pid > 0);
    assert_eq!((status, signal), (Some(3), None));
    assert_eq!(
        c.resources.as_ref().expect("started").intents,
        vec![command.to_owned()],
        "the started event names the command"
    );
    assert!(gone(pid as i32), "the shell was reaped");
}

#[tokio::test]
async fn bash_cancel_kills_the_whole_process_group() {
    let mut t = setup(Config::default());
    let pid_file = t.dir.path().join("pids");
    let exists = {
        let pid_file = pid_file.clone();
        move || pid_file.exists()
    };
    let began = Instant::now();
    let r = run_one(
        &mut t.session,
        bash_call("c1", json!({ "command": SLEEPER_FAMILY })),
        Some(&exists),
    )
    .await;
    let took = began.elapsed();

    let (shell, child) = read_pids(&pid_file);
    assert!(r.is_error, "{r:?}");
    assert_eq!(r.code, Some(ErrorCode::Aborted), "{r:?}");
    assert!(r.content.starts_with("ABORTED: "), "{:?}", r.content);
    // Both were stopped by SIGTERM (the exit signal below says so), not left running.
    assert!(
        took < Duration::from_millis(KILL_GRACE_MS) + LOADED_MACHINE_SLACK,
        "cancel took {took:?}"
    );
    assert!(
        gone(shell),
        "the shell is gone (and reaped) when the batch returns"
    );
    assert!(
        all_gone(&[shell, child], Duration::from_secs(10)).await,
        "the background child {child} survived the cancel"
    );

    let c = replayed(&t.storage, "c1");
    assert_eq!(settled_code(&c), Some(ErrorCode::Aborted));
    let (pid, status, signal) = proc_exit(&c);
    assert_eq!(pid as i32, shell, "ProcExit names the shell");
    assert_eq!((status, signal), (None, Some(libc_sigterm())), "{c:?}");
}

#[tokio::test]
async fn bash_timeout_kills_and_reports_timeout() {
    // The call's own timeout_ms.
    let mut t = setup(Config::default());
    let began = Instant::now();
    let r = run_one(
        &mut t.session,
        bash_call(
            "c1",
            json!({ "command": SLEEPER_FAMILY, "timeout_ms": 300 }),
        ),
        None,
    )
    .await;
    let took = began.elapsed();
    assert_eq!(r.code, Some(ErrorCode::Timeout), "{r:?}");
    assert!(r.content.starts_with("TIMEOUT: "), "{:?}", r.content);
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(
        took < Duration::from_millis(300 + KILL_GRACE_MS) + LOADED_MACHINE_SLACK,
        "{took:?}"
    );
    let (shell, child) = read_pids(&t.dir.path().join("pids"));
    assert!(all_gone(&[shell, child], Duration::from_secs(10)).await);
    let c = replayed(&t.storage, "c1");
    assert_eq!(settled_code(&c), Some(ErrorCode::Timeout));
    let (pid, _, signal) = proc_exit(&c);
    assert_eq!((pid as i32, signal), (shell, Some(libc_sigterm())));

    // The session's timeout: the runtime cancels the body, which stops and reports it.
    let mut t = setup(Config {
        timeout_ms: 300,
        ..Config::default()
    });
    let r = run_one(
        &mut t.session,
        bash_call("c2", json!({ "command": SLEEPER_FAMILY })),
        None,
    )
    .await;
    assert_eq!(r.code, Some(ErrorCode::Timeout), "{r:?}");
    let (shell, child) = read_pids(&t.dir.path().join("pids"));
    assert!(all_gone(&[shell, child], Duration::from_secs(10)).await);
    let c = replayed(&t.storage, "c2");
    assert_eq!(settled_code(&c), Some(ErrorCode::Timeout));
    assert_eq!(proc_exit(&c).0 as i32, shell);

    // A command that prints without pause does not hold the timeout off, and what it printed
    // is capped.
    let mut t = setup(Config::default());
    let began = Instant::now();
    let r = run_one(
        &mut t.session,
        bash_call("c3", json!({ "command": "yes", "timeout_ms": 300 })),
        None,
    )
    .await;
    assert!(began.elapsed() < Duration::from_millis(300 + KILL_GRACE_MS) + LOADED_MACHINE_SLACK);
    assert_eq!(r.code, Some(ErrorCode::Timeout), "{}", &r.content[..100]);
    assert!(r.content.contains("bytes of output cut here"));
    assert!(
        r.content.len() <= OUTPUT_BYTES_MAX + 500,
        "{}",
        r.content.len()
    );
}

#[tokio::test]
async fn bash_escalates_to_sigkill_when_sigterm_is_ignored() {
    let mut t = setup(Config::default());
    // Ignored signals stay ignored across fork and exec: the sleepers ignore SIGTERM too.
    let command = format!("trap '' TERM; {SLEEPER_FAMILY}");
    let began = Instant::now();
    let r = run_one(
        &mut t.session,
        bash_call("c1", json!({ "command": command, "timeout_ms": 200 })),
        None,
    )
    .await;
    let took = began.elapsed();
    assert_eq!(r.code, Some(ErrorCode::Timeout), "{r:?}");
    assert!(r.content.contains("SIGKILL"), "{:?}", r.content);
    assert!(
        took >= Duration::from_millis(200 + KILL_GRACE_MS),
        "SIGKILL came only after the grace: {took:?}"
    );
    assert!(
        took < Duration::from_millis(200 + KILL_GRACE_MS) + LOADED_MACHINE_SLACK,
        "{took:?}"
    );
    let (shell, child) = read_pids(&t.dir.path().join("pids"));
    assert!(all_gone(&[shell, child], Duration::from_secs(10)).await);
    let (_, status, signal) = proc_exit(&replayed(&t.storage, "c1"));
    assert_eq!((status, signal), (None, Some(9)));
}

#[tokio::test]
async fn bash_a_stop_the_command_outlives_keeps_its_own_outcome() {
    let mut t = setup(Config::default());
    // A witness started before the trap keeps the default SIGTERM: the command waits until the
    // stop has really reached its group (no race with the cancel), then goes on and ends by
    // itself with status 0.
    let command = "sleep 30 & w=$!; trap '' TERM; touch started; wait $w; sleep 0.2; echo done";
    let started = t.dir.path().join("started");
    let r = run_one(
        &mut t.session,
        bash_call("c1", json!({ "command": command })),
        Some(&|| started.exists()),
    )
    .await;
    assert!(!r.is_error, "its own outcome, not ABORTED: {r:?}");
    assert_eq!(r.code, None, "{r:?}");
    assert!(
        r.content.starts_with("done\n[a stop was requested "),
        "{:?}",
        r.content
    );
    assert!(
        r.content.contains("ended by itself"),
        "the note says the command outlived the stop: {:?}",
        r.content
    );
    assert!(r.content.ends_with("]\nexit status 0"), "{:?}", r.content);
    assert_eq!(
        r.value,
        Some(json!({"exit_status": 0, "signal": null})),
        "{r:?}"
    );
    let c = replayed(&t.storage, "c1");
    assert_eq!(settled_code(&c), None, "committed as success: {c:?}");
    let (_, status, signal) = proc_exit(&c);
    assert_eq!((status, signal), (Some(0), None));

    // The same for the call's own timeout_ms: a command that outlives it is not a TIMEOUT.
    let mut t = setup(Config::default());
    let command = "sleep 30 & w=$!; trap '' TERM; wait $w; echo done";
    let r = run_one(
        &mut t.session,
        bash_call("c3", json!({ "command": command, "timeout_ms": 200 })),
        None,
    )
    .await;
    assert!(!r.is_error, "{r:?}");
    assert!(
        r.content
            .starts_with("done\n[its timeout_ms (200 ms) passed "),
        "{:?}",
        r.content
    );
    assert!(r.content.ends_with("]\nexit status 0"), "{:?}", r.content);
    assert_eq!(settled_code(&replayed(&t.storage, "c3")), None);

    // A command the stop really ended (here by SIGKILL, after the grace) stays ABORTED.
    let mut t = setup(Config::default());
    let started = t.dir.path().join("started");
    let r = run_one(
        &mut t.session,
        bash_call(
            "c2",
            json!({ "command": "trap '' TERM; touch started; sleep 30; echo never" }),
        ),
        Some(&|| started.exists()),
    )
    .await;
    assert_eq!(r.code, Some(ErrorCode::Aborted), "{r:?}");
    assert!(r.content.starts_with("ABORTED: "), "{:?}", r.content);
    assert!(!r.content.contains("ended by itself"), "{:?}", r.content);
    let c = replayed(&t.storage, "c2");
    assert_eq!(settled_code(&c), Some(ErrorCode::Aborted));
    assert_eq!(proc_exit(&c).2, Some(9), "{c:?}");
}

#[tokio::test]
async fn bash_kills_what_the_command_leaves_behind() {
    let mut t = setup(Config::default());
    let r = run_one(
        &mut t.session,
        bash_call(
            "c1",
            json!({ "command": r#"sleep 30 >/dev/null 2>&1 & echo "$$ $!" > pids; echo started"# }),
        ),
        None,
    )
    .await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.content, "started\nexit status 0");
    let (shell, child) = read_pids(&t.dir.path().join("pids"));
    assert!(
        all_gone(&[shell, child], Duration::from_secs(10)).await,
        "the background job {child} outlived the call"
    );
}

#[tokio::test]
async fn bash_stops_reading_output_held_open_outside_its_group() {
    let mut t = setup(Config::default());
    // `setsid` leaves the group (out of reach of its signals) and keeps the pipe open.
    let began = Instant::now();
    let r = run_one(
        &mut t.session,
        bash_call(
            "c1",
            json!({ "command": r#"setsid sh -c 'echo $$ > escaped; exec sleep 40' & while [ ! -s escaped ]; do sleep 0.01; done; echo hi"# }),
        ),
        None,
    )
    .await;
    let took = began.elapsed();
    let escaped: i32 = std::fs::read_to_string(t.dir.path().join("escaped"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _ = kill(Pid::from_raw(escaped), nix::sys::signal::Signal::SIGKILL);
    assert!(!r.is_error, "{r:?}");
    assert!(
        r.content.starts_with("hi\n[stopped reading output"),
        "{:?}",
        r.content
    );
    assert!(r.content.ends_with("]\nexit status 0"), "{:?}", r.content);
    // The escaped process holds the pipe for 40 s: the call did not wait for it.
    assert!(
        took < Duration::from_millis(2_000) + LOADED_MACHINE_SLACK,
        "{took:?}"
    );
}

#[tokio::test]
async fn bash_output_is_capped_head_and_tail() {
    let mut t = setup(Config::default());
    let printed = 3_000_000;
    let command = format!(
        "echo FIRST; yes 0123456789abcdef | head -c {printed}; echo; echo to-stderr-last >&2"
    );
    let r = run_one(
        &mut t.session,
        bash_call("c1", json!({ "command": command })),
        None,
    )
    .await;
    assert!(!r.is_error, "{r:?}");
    let total = "FIRST\n".len() + printed + "\n".len() + "to-stderr-last\n".len();
    assert!(r.content.starts_with("FIRST\n0123456789abcdef\n"));
    assert!(
        r.content.ends_with("\nto-stderr-last\nexit status 0"),
        "{:?}",
        &r.content[r.content.len() - 100..]
    );
    let marker = format!("bytes of output cut here: {total} in all");
    assert!(r.content.contains(&marker), "the cut is marked");
    assert!(
        r.content.len() <= OUTPUT_BYTES_MAX + 300,
        "{}",
        r.content.len()
    );
    assert!(
        r.content.len() >= OUTPUT_BYTES_MAX - 16,
        "{}",
        r.content.len()
    );
    let details = r.details.as_ref().expect("details");
    assert_eq!(details["output_bytes"], json!(total));
    assert_eq!(
        details["omitted_bytes"],
        json!(total - OUTPUT_BYTES_MAX),
        "{details}"
    );
}

/// Keeps the progress messages of every call.
#[derive(Default)]
struct Recorder(std::sync::Mutex<Vec<String>>);

impl tooljournal_runtime::Observer for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn on_result(&self, _: &CallRef, _: &str, _: &ToolResult) -> Result<(), String> {
        Ok(())
    }
    fn on_progress(&self, _: &CallRef, _: &str, message: &str) -> Result<(), String> {
        self.0.lock().unwrap().push(message.to_owned());
        Ok(())
    }
}

#[tokio::test]
async fn bash_reports_its_latest_output_line_as_progress_rate_limited() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Arc::new(Workspace::new(dir.path(), &[]).unwrap());
    let mut registry = Registry::new();
    registry
        .register(Arc::new(Bash::new(ws)), ToolSource::BuiltIn)
        .unwrap();
    let recorder = Arc::new(Recorder::default());
    let hooks = Hooks {
        observers: vec![recorder.clone()],
        ..Hooks::default()
    };
    let storage = SimStorage::new();
    let mut s = session_on(&storage, Arc::new(registry), hooks, Config::default());
    let command = "for i in $(seq 1 20); do echo line-$i; sleep 0.02; done";
    let r = run_one(&mut s, bash_call("c1", json!({ "command": command })), None).await;
    assert!(!r.is_error, "{r:?}");
    let seen = recorder.0.lock().unwrap().clone();
    assert_eq!(seen.first().map(String::as_str), Some("line-1"), "{seen:?}");
    let numbers: Vec<u32> = seen
        .iter()
        .map(|m| m.strip_prefix("line-").unwrap().parse().unwrap())
        .collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert!(
        seen.len() < 20,
        "one report per {PROGRESS_INTERVAL_MS} ms at most: {seen:?}"
    );
}

#[tokio::test]
async fn bash_is_exclusive() {
    let dir = tempfile::tempdir().unwrap();
    let bash = Bash::new(Arc::new(Workspace::new(dir.path(), &[]).unwrap()));
    let args = tooljournal_runtime::parse_args(r#"{"command":"true"}"#).unwrap();
    assert!(!bash.is_concurrency_safe(&args));
    assert_eq!(bash.name(), "bash");
    assert_eq!(bash.resources(&args).intents, vec!["true".to_owned()]);

    // And the scheduler keeps it alone: the second call starts after the first has ended.
    let mut t = setup(Config::default());
    t.session.begin_turn("go").unwrap();
    t.session.begin_step().unwrap();
    let calls = vec![
        bash_call("c1", json!({"command": "sleep 0.2; touch one.end"})),
        bash_call(
            "c2",
            json!({"command": "test -e one.end && echo after || echo overlapped"}),
        ),
    ];
    let results = tokio::time::timeout(BATCH_DEADLINE, t.session.run_batch(response(calls)))
        .await
        .expect("the batch settles")
        .unwrap();
    assert_eq!(results[1].content, "after\nexit status 0", "{results:?}");
}

fn libc_sigterm() -> i32 {
    nix::sys::signal::Signal::SIGTERM as i32
}
