//! `tooljournal resume`'s re-running path against its normal path (`--rerun none`): they must
//! agree on what they journal, and each must keep the session's promises (plan mode, a journal
//! said balanced, an edit of a file read before the crash). Found in review; each test failed
//! before its fix.

use crate::common::rerun as rerun_common;

use rerun_common::*;
use runtime::event::{CallRef, Event};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `b1` (bash) marks, then sleeps in its process group; `r1` (read) waits behind it (bash is
/// a barrier), approved and never started. The run is SIGKILLed while `b1` sleeps, so its
/// group outlives the run.
fn killed_with_a_running_group() -> Case {
    let case = Case::new(&[
        json!({"user": "go"}),
        batch(vec![
            // The shell dies with the runtime (its parent-death signal); its background
            // child keeps the call's process group alive.
            call(
                "b1",
                "bash",
                json!({"command": format!("echo b1 >> {MARKER}; sleep 30 & wait")}),
            ),
            call("r1", "read", json!({"path": "notes.txt"})),
        ]),
        end("done"),
    ]);
    let mut run = case.spawn_run(&[]);
    // Killed once b1's process group is in the journal (read without writing).
    let b1 = CallRef {
        turn: 1,
        step: 1,
        call_id: "b1".into(),
    };
    let deadline = Instant::now() + WAIT;
    loop {
        let journaled = case.marked("b1") > 0
            && recover::Recovery::of(&case.journal)
                .run()
                .ok()
                .and_then(|r| r.analysis.replay.call(&b1).cloned())
                .is_some_and(|c| !c.processes.is_empty());
        if journaled {
            break;
        }
        assert!(Instant::now() < deadline, "b1's group was never journaled");
        std::thread::sleep(Duration::from_millis(10));
    }
    kill9(&mut run);
    case.snapshot();
    case
}

/// Kills b1's process group if a test left it running.
fn kill_group(journal: &Path) {
    if let Ok(r) = recover::Recovery::of(journal).run() {
        for c in r.analysis.replay.calls() {
            for p in &c.processes {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(p.pgid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// The result the journal's `recovery` events give call `id`.
fn recovered_text(journal: &Path, id: &str) -> String {
    journal_events(journal)
        .into_iter()
        .filter_map(|e| match e {
            Event::Recovery(r) => Some(r),
            _ => None,
        })
        .flat_map(|r| r.calls)
        .find(|rc| rc.call.call_id == id)
        .unwrap_or_else(|| panic!("{}: {id} was not recovered", journal.display()))
        .result
        .content
}

/// Both resumes get `--kill-orphans` (the helper adds it): each kills `b1`'s group before the
/// model goes on. The re-running resume (the default) probes after the kill, so `b1`'s result
/// says its group has ended; the normal path (`--rerun none`) lets `recover` probe first,
/// before the kill, so the result journaled for good (and sent to the model) says the group
/// "is still running, so it may still be changing the workspace", though the same resume
/// killed it before anything else happened. One journal, two truths, by the flag.
#[test]
fn both_resume_paths_word_a_killed_orphan_alike() {
    let case = killed_with_a_running_group();
    let mut texts = Vec::new();
    // `none` first, while the group still runs (its resume kills it).
    for policy in ["none", "not-started"] {
        let journal = case.fresh_copy(policy);
        let out = case.resume(&journal, &["--rerun", policy]);
        kill_group(&journal);
        assert_eq!(out.status.code(), Some(0), "{policy}: {}", shown(&out));
        if policy == "none" {
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("killed process group"),
                "the resume killed b1's group: {}",
                shown(&out)
            );
        }
        texts.push((policy, recovered_text(&journal, "b1")));
    }
    for (policy, text) in &texts {
        assert!(
            !text.contains("still running"),
            "{policy}: the resume killed b1's group, yet its result says: {text}"
        );
    }
    assert_eq!(
        texts[0].1, texts[1].1,
        "b1's result depends on --rerun: {texts:#?}"
    );
}

/// `tooljournal resume --journal J` with neither a script nor a model (a scripted session's
/// journal records no model): with `--rerun none` the journal is recovered and the session
/// said balanced. With the default (`not-started`), because a call could run again, recovery is
/// skipped and left to a resume that never comes, yet the resume still says the session "is
/// balanced": the journal is left unrecovered (its turn still open) under a message that says
/// otherwise.
#[test]
fn a_resume_that_says_balanced_has_balanced_the_journal() {
    let case = killed_with_a_running_group();
    for policy in ["none", "not-started"] {
        let journal = case.fresh_copy(policy);
        let mut cmd = case.tooljournal();
        cmd.arg("resume")
            .arg("--journal")
            .arg(&journal)
            .arg("--kill-orphans")
            .args(["--rerun", policy]);
        let out = wait_output(
            cmd.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("tooljournal resume starts"),
        );
        kill_group(&journal);
        assert_eq!(out.status.code(), Some(0), "{policy}: {}", shown(&out));
        let said = stdout(&out);
        assert!(said.contains("is balanced"), "{policy}: {}", shown(&out));
        let (r, _) = classify_dry(&journal);
        assert!(
            r.analysis.recovery.is_none() && r.analysis.replay.open_turn().is_none(),
            "{policy}: the resume said {said:?}, but the journal still needs recovery \
             (open turn: {:?})",
            r.analysis.replay.open_turn().map(|t| t.turn)
        );
    }
}

/// `tooljournal resume --plan-mode` after a crash whose batch left a `write` approved and never
/// started: plan mode is how a person says "look, change nothing" (only read-only tools run,
/// README *plan mode*), yet the default re-run (`not-started`) runs the write first and turns
/// plan mode on only after it (`run::prepare`). With `--plan-mode`, a call that is not
/// read-only must not be run again (it gets `TOOL_NOT_STARTED`, or `POLICY_DENIED`, and the
/// model may ask again under plan mode).
#[test]
fn a_resume_in_plan_mode_runs_no_write_again() {
    let case = Case::new(&[
        json!({"user": "go"}),
        batch(vec![
            call("b1", "bash", marking("b1", 30)),
            call("w1", "write", json!({"path": "w1.txt", "content": "one\n"})),
        ]),
        end("done"),
    ]);
    let mut run = case.spawn_run(&[]);
    case.kill_when_marked(&mut run, "b1");
    assert!(!case.ws.join("w1.txt").exists(), "w1 never started");
    let out = case.resume(&case.journal, &["--plan-mode"]);
    kill_group(&case.journal);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    assert!(
        !case.ws.join("w1.txt").exists(),
        "resumed with --plan-mode, yet w1 wrote w1.txt: {}",
        shown(&out)
    );
}

/// A batch that reads a file, then (behind a bash barrier) edits it; killed while the barrier
/// runs, so the edit is approved and never started. The default re-run runs the edit again
/// ("what was decided before the crash", DESIGN.md §6b), but in the new process the workspace
/// has no record of the read (read versions live in memory, `Workspace::record_read`), so the
/// edit's evidence is empty and its body refuses with FS_STALE_VERSION ("has not been read in
/// this session"): a re-run edit can never succeed. The resume should know what the session
/// read (from the journal's settled `read` results) or not offer to run an `edit` again.
#[test]
fn a_rerun_edit_of_a_file_read_before_the_crash_succeeds() {
    let case = Case::new(&[
        json!({"user": "go"}),
        batch(vec![
            call("r1", "read", json!({"path": "notes.txt"})),
            call("b1", "bash", marking("b1", 30)),
            call(
                "e1",
                "edit",
                json!({"path": "notes.txt", "old_string": "line0", "new_string": "LINE0"}),
            ),
        ]),
        end("done"),
    ]);
    let mut run = case.spawn_run(&[]);
    case.kill_when_marked(&mut run, "b1");
    let out = case.resume(&case.journal, &[]);
    kill_group(&case.journal);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    assert!(
        stdout(&out).contains("running again (--rerun not-started): e1"),
        "{}",
        shown(&out)
    );
    assert_eq!(
        std::fs::read_to_string(case.ws.join("notes.txt")).unwrap(),
        "LINE0\nline1\n",
        "the re-run edit did not apply: {}",
        shown(&out)
    );
}
