//! `tooljournal resume --rerun not-started|safe|none` end to end, through the binaries: a run
//! SIGKILLed in the middle of a parallel batch, each policy on its own copy of the killed
//! journal and workspace; an MCP tool declared read-only run again under `safe`; a second crash
//! in the middle of the re-run; and the first request a live model gets after a re-run.
//!
//! `recover verify`, `classify --dry-run --json` and `rebuild --format F --dry-run` are called
//! through `recover`'s library (what its binary prints): this package's tests cannot run that
//! binary.

use crate::common;

use crate::common::rerun as rerun_common;

use crate::common::mcp_support;

use recover::CallReport;
use rerun_common::*;
use runtime::event::{idempotency_key, CallRef, Classification, Event, RerunPolicy};
use runtime::state::CallState;
use runtime::ErrorCode;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

fn report<'a>(r: &'a recover::Recovered, id: &str) -> &'a CallReport {
    r.analysis
        .calls
        .iter()
        .find(|c| c.call.call_id == id)
        .unwrap_or_else(|| panic!("no call {id}"))
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Calls before the barrier run two at a time (`--max-parallel 2`); `b1` is a `bash` barrier
/// that marks, then sleeps; the calls after it are approved and never start before the kill.
/// `r2` reads what `w3` writes: run again, it must still come after it. Turn 2 shows the
/// session goes on after the resume.
fn parallel_batch() -> Vec<Value> {
    vec![
        json!({"user": "batch"}),
        batch(vec![
            call("w1", "write", json!({"path": "w1.txt", "content": "one\n"})),
            call("r1", "read", json!({"path": "notes.txt"})),
            call("w2", "write", json!({"path": "w2.txt", "content": "two\n"})),
            call("b1", "bash", marking("b1", 30)),
            call(
                "w3",
                "write",
                json!({"path": "w3.txt", "content": "three\n"}),
            ),
            call("r2", "read", json!({"path": "w3.txt"})),
            call(
                "w4",
                "write",
                json!({"path": "w4.txt", "content": "four\n"}),
            ),
            call("b2", "bash", marking("b2", 0)),
        ]),
        end("batch done"),
        json!({"user": "next"}),
        batch(vec![call("n1", "bash", marking("n1", 0))]),
        end("bye"),
    ]
}

const BEFORE: [&str; 3] = ["w1", "r1", "w2"];
const NOT_STARTED: [&str; 4] = ["w3", "r2", "w4", "b2"];
const EVERY_CALL: [(&str, &str); 9] = [
    ("w1", "write"),
    ("r1", "read"),
    ("w2", "write"),
    ("b1", "bash"),
    ("w3", "write"),
    ("r2", "read"),
    ("w4", "write"),
    ("b2", "bash"),
    ("n1", "bash"),
];

/// The killed journal is as the test means it: the calls before the barrier finished, the
/// barrier started and never settled, the calls after it approved and never started.
fn check_killed(journal: &Path) {
    let (r, _) = classify_dry(journal);
    for id in BEFORE {
        let c = report(&r, id);
        assert!(
            matches!(c.state, CallState::Settled | CallState::Committed) && !c.result.is_error,
            "{id}: {:?} {:?}",
            c.state,
            c.result
        );
    }
    let b1 = report(&r, "b1");
    assert_eq!(
        (b1.state, b1.classification),
        (CallState::Started, Some(Classification::ToolOutcomeUnknown))
    );
    for id in NOT_STARTED {
        let c = report(&r, id);
        assert_eq!(
            (c.state, c.classification),
            (CallState::Approved, Some(Classification::ToolNotStarted)),
            "{id}"
        );
    }
}

/// What a resume that ran `NOT_STARTED` again under `policy` left: each ran once, in order,
/// under its own id, attempt 1 and its key; `b1` never again; the journal says which.
fn check_rerun(case: &Case, journal: &Path, policy: RerunPolicy, out: &std::process::Output) {
    let how = policy.as_str();
    assert_eq!(out.status.code(), Some(0), "{how}: {}", shown(out));
    let said = stdout(out);
    assert!(
        said.contains(&format!(
            "recovered: 1 call(s) classified; may have run, not re-run: b1; running again \
             (--rerun {how}): w3, r2, w4, b2"
        )),
        "{how}: {said}"
    );
    for id in NOT_STARTED {
        assert!(
            said.contains(&format!("ran again: call {id} (turn 1, step 1): ok")),
            "{how}: {said}"
        );
    }

    // The world: each not-started call ran exactly once; the unknown one never again.
    assert_eq!(case.marks(), ["b1", "b2", "n1"], "{how}");
    for (file, content) in [
        ("w1.txt", "one\n"),
        ("w2.txt", "two\n"),
        ("w3.txt", "three\n"),
        ("w4.txt", "four\n"),
    ] {
        assert_eq!(
            std::fs::read_to_string(case.ws.join(file)).ok().as_deref(),
            Some(content),
            "{how}: {file}"
        );
    }

    // The journal: same ids, attempt 1, the key every attempt of the call gets.
    let events = journal_events(journal);
    let session = session_id(&events);
    for id in NOT_STARTED {
        let started = started_of(&events, id);
        assert_eq!(started.len(), 1, "{how}: {id}: {started:?}");
        let s = &started[0];
        let call = CallRef {
            turn: 1,
            step: 1,
            call_id: id.into(),
        };
        assert_eq!(s.call, call, "{how}");
        assert_eq!(s.attempt, 1, "{how}: {id}");
        assert_eq!(
            s.idempotency_key,
            idempotency_key(&session, &call),
            "{how}: {id}"
        );
    }
    assert_eq!(started_of(&events, "b1").len(), 1, "{how}: b1 never again");
    let reruns = reruns(&events);
    assert_eq!(reruns.len(), 1, "{how}: {reruns:?}");
    assert_eq!(reruns[0].policy, policy);
    assert_eq!(ids(&reruns[0].calls), NOT_STARTED, "{how}");
    // The recovery before it closes b1 alone and leaves the step open for the re-run.
    let recovery = events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::Recovery(r) => Some(r.clone()),
            _ => None,
        })
        .expect("a recovery");
    let closed: Vec<&str> = recovery
        .calls
        .iter()
        .map(|c| c.call.call_id.as_str())
        .collect();
    assert_eq!(closed, ["b1"], "{how}");
    assert_eq!(
        (recovery.interrupted_step, recovery.interrupted_turn),
        (None, None),
        "{how}"
    );
    // Run again as the journaled policy allows: two at a time at most.
    assert!(
        most_at_once(&events, &NOT_STARTED) <= 2,
        "{how}: more than --max-parallel 2 at once"
    );

    // Replay says which calls ran again, under which policy.
    let (r, listing) = classify_dry(journal);
    for c in r.analysis.replay.calls() {
        let expected = NOT_STARTED
            .contains(&c.call.call_id.as_str())
            .then_some(policy);
        assert_eq!(c.rerun, expected, "{how}: {}", c.call);
    }
    // classify --dry-run --json: real results, no classification; b1 unknown.
    for id in NOT_STARTED {
        let c = listed(&listing, id);
        assert_eq!(c["classification"], Value::Null, "{how}: {c}");
        assert_eq!(c["state"], "committed", "{how}: {c}");
        let c = report(&r, id);
        assert!(
            !c.result.is_error && !c.recovered,
            "{how}: {id}: {:?}",
            c.result
        );
    }
    assert!(
        report(&r, "r2").result.content.contains("three"),
        "{how}: r2 read w3's file after w3 wrote it: {:?}",
        report(&r, "r2").result
    );
    assert_eq!(
        listed(&listing, "b1")["classification"],
        "TOOL_OUTCOME_UNKNOWN",
        "{how}"
    );
    assert_eq!(
        report(&r, "b1").result.code,
        Some(ErrorCode::ToolOutcomeUnknown)
    );
    assert!(r.analysis.recovery.is_none(), "{how}: balanced");
    finished_and_stable(journal, how);
}

/// The journal verifies clean, its four rebuilds validate with one result per call, and
/// another `recover classify` appends nothing.
fn finished_and_stable(journal: &Path, how: &str) {
    verify_clean(journal);
    let verify = std::process::Command::new(env!("CARGO_BIN_EXE_tooljournal"))
        .args(["journal", "verify"])
        .arg(journal)
        .output()
        .unwrap();
    assert_eq!(verify.status.code(), Some(0), "{how}: {}", shown(&verify));
    rebuild_all(journal, &EVERY_CALL);
    let before = segments(journal);
    let again = recover::Recovery::of(journal)
        .write(true)
        .run()
        .unwrap_or_else(|e| panic!("{how}: recover classify: {e}"));
    assert!(!again.appended, "{how}: a second classify appended");
    assert_eq!(segments(journal), before, "{how}: not a byte changed");
}

#[test]
fn each_policy_after_a_sigkill_in_a_parallel_batch() {
    let case = Case::new(&parallel_batch());
    let mut run = case.spawn_run(&["--max-parallel", "2"]);
    case.kill_when_marked(&mut run, "b1");
    check_killed(&case.journal);
    case.snapshot();

    // The default, and each policy by name: `safe` runs the same calls, as `b1` is a bash
    // call (never idempotent).
    for (name, flag, policy) in [
        ("default", None, RerunPolicy::NotStarted),
        ("not-started", Some("not-started"), RerunPolicy::NotStarted),
        ("safe", Some("safe"), RerunPolicy::Safe),
    ] {
        let journal = case.fresh_copy(name);
        let extra: Vec<&str> = flag.map(|f| vec!["--rerun", f]).unwrap_or_default();
        let out = case.resume(&journal, &extra);
        check_rerun(&case, &journal, policy, &out);
    }

    // none: nothing runs again; the not-started calls are told so.
    let journal = case.fresh_copy("none");
    let out = case.resume(&journal, &["--rerun", "none"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let said = stdout(&out);
    assert!(
        said.contains("recovered: 5 call(s) classified; may have run, not re-run: b1"),
        "{said}"
    );
    assert!(
        !said.contains("running again") && !said.contains("ran again"),
        "{said}"
    );
    assert_eq!(case.marks(), ["b1", "n1"]);
    assert!(!case.ws.join("w3.txt").exists() && !case.ws.join("w4.txt").exists());
    let events = journal_events(&journal);
    assert!(reruns(&events).is_empty());
    for id in NOT_STARTED {
        assert!(started_of(&events, id).is_empty(), "{id}");
    }
    let (r, listing) = classify_dry(&journal);
    for id in NOT_STARTED {
        assert_eq!(
            listed(&listing, id)["classification"],
            "TOOL_NOT_STARTED",
            "{id}"
        );
        let c = report(&r, id);
        assert_eq!(c.result.code, Some(ErrorCode::ToolNotStarted), "{id}");
    }
    assert!(r.analysis.replay.calls().all(|c| c.rerun.is_none()));
    assert_eq!(
        listed(&listing, "b1")["classification"],
        "TOOL_OUTCOME_UNKNOWN"
    );
    finished_and_stable(&journal, "none");
}

const LONG_OP: &str = "mcp__everything__trigger-long-running-operation";

/// server-everything with its long-running operation declared read-only (or not).
fn everything_config(declared_read_only: bool) -> String {
    let mut config = format!(
        "[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
        mcp_support::everything_server().display().to_string()
    );
    if declared_read_only {
        config.push_str(
            "[mcp_servers.everything.tools.trigger-long-running-operation]\nread_only = true\n",
        );
    }
    config
}

/// Waits until the journal holds `started` for `id` (records still being written are passed
/// over).
fn wait_started(journal: &Path, id: &str, child: &mut std::process::Child) {
    let deadline = Instant::now() + WAIT;
    loop {
        let started = journal::FsStorage::open(journal)
            .ok()
            .is_some_and(|storage| {
                journal::Reader::open(std::sync::Arc::new(storage), journal::Limits::default())
                    .map(|reader| {
                        reader.filter_map(Result::ok).any(|r| {
                            matches!(
                                r.decode::<runtime::event::Record>(),
                                Ok(runtime::event::Record { event: Event::Started(s), .. })
                                    if s.call.call_id == id
                            )
                        })
                    })
                    .unwrap_or(false)
            });
        if started {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("ended ({status}) before {id} started");
        }
        assert!(Instant::now() < deadline, "{id} never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A session SIGKILLed while server-everything's long-running operation runs (its `started`
/// durable, no `settled`), with the configurations it can be resumed with: the tool declared
/// read-only, and not. Fails, never skips, when the server cannot be installed.
struct KilledLongOp {
    case: Case,
    /// The tool not declared read-only (the run's configuration, which the journal records,
    /// declares it).
    undeclared: std::path::PathBuf,
}

fn killed_long_op() -> KilledLongOp {
    let case = Case::new(&[
        json!({"user": "slow"}),
        batch(vec![call(
            "c1",
            LONG_OP,
            json!({"duration": 3, "steps": 3}),
        )]),
        end("slow done"),
        json!({"user": "next"}),
        end("bye"),
    ]);
    let declared = case.path("declared.toml");
    std::fs::write(&declared, everything_config(true)).unwrap();
    let undeclared = case.path("undeclared.toml");
    std::fs::write(&undeclared, everything_config(false)).unwrap();
    let mut run = case.spawn_run(&["--config", declared.to_str().unwrap()]);
    wait_started(&case.journal, "c1", &mut run);
    kill9(&mut run);
    let (r, _) = classify_dry(&case.journal);
    let c1 = report(&r, "c1");
    assert_eq!(
        (c1.state, c1.classification),
        (CallState::Started, Some(Classification::ToolOutcomeUnknown)),
        "killed while the operation ran"
    );
    case.snapshot();
    KilledLongOp { case, undeclared }
}

#[test]
fn safe_reruns_an_unknown_call_of_a_tool_declared_read_only_with_its_key() {
    let KilledLongOp { case, .. } = killed_long_op();
    let call = CallRef {
        turn: 1,
        step: 1,
        call_id: "c1".into(),
    };
    let journal = case.fresh_copy("safe");
    let out = case.resume(&journal, &["--rerun", "safe"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let said = stdout(&out);
    assert!(
        said.contains("running again (--rerun safe): c1")
            && said.contains("ran again: call c1 (turn 1, step 1): ok"),
        "{said}"
    );
    // Attempt 2, under the key of attempt 1.
    let events = journal_events(&journal);
    let started = started_of(&events, "c1");
    let attempts: Vec<u32> = started.iter().map(|s| s.attempt).collect();
    assert_eq!(attempts, [1, 2]);
    let key = idempotency_key(&session_id(&events), &call);
    assert_eq!(started[0].idempotency_key, key);
    assert_eq!(started[1].idempotency_key, key);
    let rerun = reruns(&events);
    assert_eq!(rerun.len(), 1);
    assert_eq!(
        (rerun[0].policy, ids(&rerun[0].calls)),
        (RerunPolicy::Safe, vec!["c1"])
    );
    let (r, listing) = classify_dry(&journal);
    let c1 = report(&r, "c1");
    assert!(
        c1.result
            .content
            .contains("Long running operation completed"),
        "its real result: {:?}",
        c1.result
    );
    assert_eq!(listed(&listing, "c1")["classification"], Value::Null);
    assert_eq!(
        r.analysis.replay.calls().next().unwrap().rerun,
        Some(RerunPolicy::Safe)
    );
    verify_clean(&journal);
    rebuild_all(&journal, &[("c1", LONG_OP)]);
}

#[test]
fn an_unknown_mcp_call_is_not_run_again_under_not_started_nor_when_undeclared() {
    let KilledLongOp { case, undeclared } = killed_long_op();
    for (name, extra) in [
        ("not-started", vec!["--rerun", "not-started"]),
        // safe, but the tool no longer declared read-only: never run again.
        (
            "undeclared",
            vec!["--rerun", "safe", "--config", undeclared.to_str().unwrap()],
        ),
    ] {
        let journal = case.fresh_copy(name);
        let out = case.resume(&journal, &extra);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", shown(&out));
        let said = stdout(&out);
        assert!(
            said.contains("recovered: 1 call(s) classified") && !said.contains("ran again"),
            "{name}: {said}"
        );
        let events = journal_events(&journal);
        assert_eq!(started_of(&events, "c1").len(), 1, "{name}");
        assert!(reruns(&events).is_empty(), "{name}");
        let (r, listing) = classify_dry(&journal);
        assert_eq!(
            listed(&listing, "c1")["classification"],
            "TOOL_OUTCOME_UNKNOWN",
            "{name}"
        );
        assert_eq!(
            report(&r, "c1").result.code,
            Some(ErrorCode::ToolOutcomeUnknown)
        );
        verify_clean(&journal);
        rebuild_all(&journal, &[("c1", LONG_OP)]);
    }
}

/// A batch whose second call sleeps (a barrier after the killed barrier, so it never starts),
/// followed by `after` (not-started calls after it, if any).
fn sleeping_rerun(after: Vec<Value>) -> Vec<Value> {
    let mut calls = vec![
        call("b1", "bash", marking("b1", 30)),
        call("s2", "bash", marking("s2", 30)),
    ];
    calls.extend(after);
    vec![
        json!({"user": "batch"}),
        batch(calls),
        end("batch done"),
        json!({"user": "next"}),
        batch(vec![call("n1", "bash", marking("n1", 0))]),
        end("bye"),
    ]
}

/// Runs the case's transcript, kills it when `b1` marked, resumes (not-started: `s2` runs
/// again) and kills the resume when `s2` marked, checking the journal shows `s2` started once.
fn crash_twice(case: &Case) {
    let mut run = case.spawn_run(&[]);
    case.kill_when_marked(&mut run, "b1");
    let mut resume = case
        .resume_command(&case.journal, &[])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("tooljournal resume starts");
    case.kill_when_marked(&mut resume, "s2");
    let events = journal_events(&case.journal);
    let started = started_of(&events, "s2");
    assert_eq!(started.len(), 1, "s2 started once, in the re-run");
    assert_eq!(started[0].attempt, 1);
    let rerun = reruns(&events);
    assert_eq!(rerun.len(), 1);
    assert_eq!(ids(&rerun[0].calls)[0], "s2");
}

/// What a resume after the second crash must leave: `s2` now of unknown outcome and never run
/// a third time, the journal consistent.
fn check_after_second_crash(case: &Case, journal: &Path, out: &std::process::Output, how: &str) {
    assert_eq!(out.status.code(), Some(0), "{how}: {}", shown(out));
    assert_eq!(case.marked("s2"), 1, "{how}: s2 never ran a third time");
    assert_eq!(case.marked("n1"), 1, "{how}: the session went on");
    verify_clean(journal);
    let events = journal_events(journal);
    assert_eq!(started_of(&events, "s2").len(), 1, "{how}");
    let (r, listing) = classify_dry(journal);
    assert_eq!(
        listed(&listing, "s2")["classification"],
        "TOOL_OUTCOME_UNKNOWN",
        "{how}"
    );
    assert_eq!(
        report(&r, "s2").result.code,
        Some(ErrorCode::ToolOutcomeUnknown),
        "{how}"
    );
    assert!(r.analysis.recovery.is_none(), "{how}: balanced");
}

#[test]
fn a_second_crash_during_the_rerun_leaves_the_rerun_call_unknown() {
    let case = Case::new(&sleeping_rerun(vec![]));
    crash_twice(&case);
    case.snapshot();
    for policy in ["not-started", "safe"] {
        let journal = case.fresh_copy(policy);
        let out = case.resume(&journal, &["--rerun", policy]);
        assert!(
            !stdout(&out).contains("ran again"),
            "{policy}: {}",
            shown(&out)
        );
        check_after_second_crash(&case, &journal, &out, policy);
        rebuild_all(&journal, &[("b1", "bash"), ("s2", "bash"), ("n1", "bash")]);
    }
}

#[test]
fn a_second_crash_during_the_rerun_still_runs_what_never_started() {
    let case = Case::new(&sleeping_rerun(vec![call(
        "w1",
        "write",
        json!({"path": "w1.txt", "content": "one\n"}),
    )]));
    crash_twice(&case);
    let out = case.resume(&case.journal, &[]);
    check_after_second_crash(&case, &case.journal, &out, "not-started");
    // w1 never started before: it runs now, once.
    assert_eq!(
        std::fs::read_to_string(case.ws.join("w1.txt"))
            .ok()
            .as_deref(),
        Some("one\n")
    );
    let events = journal_events(&case.journal);
    assert_eq!(started_of(&events, "w1").len(), 1);
    rebuild_all(
        &case.journal,
        &[
            ("b1", "bash"),
            ("s2", "bash"),
            ("w1", "write"),
            ("n1", "bash"),
        ],
    );
}

/// The live model path: killed while `b1` (bash) sleeps, `w1` and `r1` approved and never
/// started; the resume with the model runs them again, and the first request the model gets
/// pairs every call with exactly one result, theirs real (`r1` reads what `w1` wrote).
#[test]
fn a_live_model_is_sent_the_rerun_calls_real_results() {
    use common::models::{self as models, history_of, results_for};
    use mockllm::{Answer, Format};
    // Without a prompt (the interrupted turn goes on) and with one (a new turn).
    for (format, prompt) in [
        (Format::OpenAiChat, None),
        (Format::OpenAiResponses, Some("and now?")),
        (Format::Anthropic, None),
        (Format::Gemini, Some("and now?")),
    ] {
        let case = models::Case::new();
        let server = &case.server;
        let sleep = marking("b1", 30).to_string();
        let write = json!({"path": "w1.txt", "content": "WRITTEN-BY-W1"}).to_string();
        let read = json!({"path": "w1.txt"}).to_string();
        server.push(
            format,
            Answer::calls(vec![
                ("call_b1", "bash", &sleep),
                ("call_w1", "write", &write),
                ("call_r1", "read", &read),
            ])
            .into(),
        );
        let mut run = case
            .command(format)
            .args(case.run_args(format, &["do the three"]))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("tooljournal starts");
        let marker = case.workspace().join(MARKER);
        let deadline = Instant::now() + WAIT;
        while !std::fs::read_to_string(&marker).is_ok_and(|t| t.ends_with('\n')) {
            assert!(Instant::now() < deadline, "{format}: b1 never marked");
            std::thread::sleep(Duration::from_millis(10));
        }
        kill9(&mut run);
        assert!(!case.workspace().join("w1.txt").exists(), "{format}");

        server.push(format, Answer::text("all three accounted for").into());
        let before = case.requests().len();
        let out = case.resume(format, prompt, &["--kill-orphans"]);
        assert_eq!(out.status.code(), Some(0), "{format}: {}", shown(&out));
        assert!(
            stdout(&out).contains("running again (--rerun not-started): call_w1, call_r1"),
            "{format}: {}",
            shown(&out)
        );
        assert_eq!(
            std::fs::read_to_string(&marker).unwrap(),
            "b1\n",
            "{format}: b1 never ran again"
        );
        assert_eq!(
            std::fs::read_to_string(case.workspace().join("w1.txt")).unwrap(),
            "WRITTEN-BY-W1"
        );
        let requests = case.requests().split_off(before);
        assert_eq!(requests.len(), 1, "{format}");
        let body = &requests[0].body;
        assert_eq!(requests[0].violation, None, "{format}: {body:#}");
        one_result_each(
            format,
            body,
            &[
                ("call_b1", "bash"),
                ("call_w1", "write"),
                ("call_r1", "read"),
            ],
        );
        let result = |id: &str, tool: &str| results_for(format, body, id, tool).remove(0);
        let w1 = result("call_w1", "write");
        let r1 = result("call_r1", "read");
        for real in [&w1, &r1] {
            assert!(
                !real.contains("TOOL_NOT_STARTED") && !real.contains("TOOL_OUTCOME_UNKNOWN"),
                "{format}: {real}"
            );
        }
        assert!(r1.contains("WRITTEN-BY-W1"), "{format}: {r1}");
        assert!(
            result("call_b1", "bash").contains("TOOL_OUTCOME_UNKNOWN"),
            "{format}: {body:#}"
        );
        let history = history_of(format, body).to_string();
        assert!(history.contains("do the three"), "{format}: {history}");
        if let Some(prompt) = prompt {
            assert!(history.contains(prompt), "{format}: {history}");
        }
        verify_clean(&case.journal());
        let events = journal_events(&case.journal());
        let rerun = reruns(&events);
        assert_eq!(rerun.len(), 1, "{format}");
        assert_eq!(ids(&rerun[0].calls), ["call_w1", "call_r1"], "{format}");
        rebuild_all(
            &case.journal(),
            &[
                ("call_b1", "bash"),
                ("call_w1", "write"),
                ("call_r1", "read"),
            ],
        );
    }
}

/// A session journaled with fsync `never` runs nothing again, whatever `--rerun` says: a power
/// loss may have dropped a `started` whose body ran, so "approved and never started" proves
/// nothing there (a SIGKILL does not drop it, which is why the calls below are approved).
#[test]
fn a_session_journaled_without_fsync_runs_nothing_again() {
    let case = Case::new(&parallel_batch());
    let mut run = case.spawn_run(&["--max-parallel", "2", "--fsync", "never"]);
    case.kill_when_marked(&mut run, "b1");
    check_killed(&case.journal);
    case.snapshot();
    let journal = case.fresh_copy("never");
    let out = case.resume(&journal, &["--rerun", "not-started"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let said = stdout(&out);
    assert!(!said.contains("ran again"), "{said}");
    assert_eq!(case.marks(), ["b1", "n1"]);
    let events = journal_events(&journal);
    assert!(reruns(&events).is_empty());
    for id in NOT_STARTED {
        assert!(started_of(&events, id).is_empty(), "{id}");
    }
}
