//! `Resume` through the library, after a real crash: a child process (this test binary, run
//! again as `child_session`) is SIGKILLed while a `bash` call's process group runs, with a
//! second call approved and queued behind it. The resume must refuse to go on beside the
//! orphan, kill it when asked (journaled), reapply the journaled policy, and run again only
//! the call that provably never started.
// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]

use runtime::event::{
    ApprovalPolicy, AskAnswer, Classification, ModelCall, ModelResponse, RerunPolicy, StopReason,
};
use runtime::ScriptedApprover;
use runtime::Session;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tooljournal_session::{Location, Resume, ResumeError, Resumed};

/// Where the child's session lives, given by the parent.
const CHILD_ROOT: &str = "TOOLJOURNAL_SESSION_TEST_ROOT";

fn bash(id: &str, command: &str) -> ModelCall {
    ModelCall {
        call_id: id.into(),
        name: "bash".into(),
        arguments: serde_json::json!({ "command": command }).to_string(),
    }
}

fn batch(calls: Vec<ModelCall>) -> ModelResponse {
    ModelResponse {
        text: String::new(),
        tool_calls: calls,
        stop_reason: StopReason::ToolUse,
    }
}

/// The crashing session: policy `deny` journaled, an approver that allows (so the calls run),
/// `call_1` starts a process group that outlives the process, `call_2` waits behind it.
#[test]
#[ignore = "run by the parent test as a child process"]
fn child_session() {
    let root = std::path::PathBuf::from(std::env::var_os(CHILD_ROOT).expect("set by the parent"));
    let workspace = root.join("workspace");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut session = Session::builder(&workspace, root.join("journal"))
        .approver(Arc::new(ScriptedApprover::new(AskAnswer::AllowedOnce)))
        .pre_execute(Arc::new(tooljournal_session::BashNeedsApproval))
        .parallel_max(1)
        .open()
        .unwrap();
    let policy = tooljournal_session::record(
        ApprovalPolicy::Deny,
        1,
        journal::FsyncPolicy::Always,
        None,
        &runtime::Registry::new(),
        "session opened",
    );
    session.record_policy(&policy).unwrap();
    session.begin_turn("go").unwrap();
    session.begin_step().unwrap();
    let calls = vec![
        // The sleep is forked before the flag is written, and outlives the shell (which dies
        // with the runtime): the orphan a resume must find.
        bash("call_1", "sleep 60 & touch started.flag; wait $!"),
        bash("call_2", "echo ran again"),
    ];
    // Never returns: the parent kills this process while call_1 runs.
    let _ = rt.block_on(session.run_batch(batch(calls)));
    unreachable!("call_1 sleeps until the parent's SIGKILL");
}

/// Runs `child_session` in `root` and SIGKILLs it once call_1's command has begun.
fn crash_a_session(root: &Path) {
    std::fs::create_dir_all(root.join("workspace")).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "child_session", "--nocapture"])
        .env(CHILD_ROOT, root)
        .spawn()
        .unwrap();
    let flag = root.join("workspace/started.flag");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !flag.exists() {
        assert!(Instant::now() < deadline, "the child never started call_1");
        assert!(child.try_wait().unwrap().is_none(), "the child ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    // And its process group journaled (the runtime writes it once the shell has started).
    let journaled = || {
        recover::Recovery::of(root.join("journal"))
            .run()
            .is_ok_and(|r| r.analysis.replay.unsettled_processes().len() == 1)
    };
    while !journaled() {
        assert!(
            Instant::now() < deadline,
            "call_1's process group was never journaled"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

#[test]
fn a_resume_refuses_a_live_orphan_kills_it_when_asked_reapplies_the_policy_and_reruns_only_the_unstarted(
) {
    let root = tempfile::tempdir().unwrap();
    crash_a_session(root.path());
    let location = Location::Dir(root.path().join("journal"));

    // Without --kill-orphans: refused, naming the group still running.
    let refused = Resume::at(location.clone()).open(&mut ());
    let Err(ResumeError::Refused(message)) = &refused else {
        match &refused {
            Ok(resumed) => panic!("expected a refusal, got {resumed}"),
            Err(e) => panic!("expected a refusal, got {e:?}"),
        }
    };
    assert!(
        message.contains("call_1") && message.contains("still running: process group"),
        "{message}"
    );

    let resumed = Resume::at(location.clone())
        .kill_orphans(true)
        .rerun(Some(RerunPolicy::NotStarted))
        .open(&mut ())
        .unwrap();
    let Resumed::Session(mut opened) = resumed else {
        panic!("expected the session to go on");
    };
    // The orphan is gone, and the journal will say so.
    assert_eq!(opened.killed.len(), 1, "{:?}", opened.killed);
    assert_eq!(opened.killed[0].0.call_id, "call_1");
    let call_1 = opened
        .at_lock
        .calls()
        .find(|c| c.call.call_id == "call_1")
        .unwrap();
    assert_eq!(call_1.processes.len(), 1);
    assert_eq!(call_1.processes[0].pgid, opened.killed[0].1);
    // Zombies aside (nobody here reaps them): no process of the group runs.
    let left = runtime::process::still_running(&call_1.processes[0]);
    assert_eq!(left, None, "the orphan's group still runs");
    // The journaled policy, not the library's default.
    assert_eq!(opened.settings.approval, ApprovalPolicy::Deny);
    assert_eq!(opened.settings.parallel_max, 1);

    let rt = tokio::runtime::Runtime::new().unwrap();
    let ran = rt.block_on(opened.run_again()).unwrap();
    let ran: Vec<(&str, &str)> = ran
        .iter()
        .map(|(call, r)| (call.call_id.as_str(), r.content.as_str()))
        .collect();
    assert_eq!(ran.len(), 1, "only call_2 never started: {ran:?}");
    assert_eq!(ran[0].0, "call_2");
    assert!(ran[0].1.contains("ran again"), "{ran:?}");

    // `deny` reapplied: a new bash call asks, and nobody here answers yes.
    let session = &mut opened.session;
    session.begin_turn("again").unwrap();
    session.begin_step().unwrap();
    let results = rt
        .block_on(session.run_batch(batch(vec![bash("call_3", "touch denied.flag")])))
        .unwrap();
    assert!(results[0].is_error, "{:?}", results[0]);
    assert!(!root.path().join("workspace/denied.flag").exists());
    rt.block_on(async {
        session
            .end_step(runtime::event::StepOutcome::Completed)
            .unwrap();
        session
            .end_turn(runtime::event::TurnOutcome::Completed)
            .await
            .unwrap();
    });
    let opened = *opened;
    rt.block_on(opened.session.close()).unwrap();

    // The journal: call_1 may have run (never run again), its group's kill recorded.
    let recovered = recover::Recovery::of(root.path().join("journal"))
        .run()
        .unwrap();
    let call_1 = recovered
        .analysis
        .calls
        .iter()
        .find(|c| c.call.call_id == "call_1")
        .unwrap();
    assert_eq!(
        call_1.classification,
        Some(Classification::ToolOutcomeUnknown)
    );
    let backend = pg::open(&location).unwrap();
    let kinds: Vec<&str> = journal::Reader::open_backend(&backend, journal::Limits::default())
        .unwrap()
        .map(|r| {
            r.unwrap()
                .decode::<runtime::event::Record>()
                .unwrap()
                .event
                .kind()
        })
        .collect();
    assert!(kinds.contains(&"process/killed"), "{kinds:?}");
    assert!(kinds.contains(&"session/policy"), "{kinds:?}");
}
