//! The probe after a real SIGKILL: `tooljournal run` is killed in the middle
//! of a batch, and recovery, read only and probing the workspace (what `recover classify
//! --dry-run --json --probe WS` runs), is asked what the workspace says about the calls whose
//! outcome is unknown.
//!
//! Two batches, because one cannot hold both an unknown `write` and a running `bash`: `bash`
//! is a barrier (it starts alone, after every earlier call settled), and its `started` is
//! synced with the earlier calls' `settled` records behind it, so a `write` before it in the
//! batch is never unknown once the `bash` runs (checked below). So:
//! - two writes start together: `a.txt` (small) and `big.bin` (over a file large enough that
//!   hashing it takes a while); the run is killed as soon as `a.txt` holds its new content, so
//!   its `settled` is still in the writer's memory: `a.txt`'s call is TOOL_OUTCOME_UNKNOWN,
//!   and the probe says `applied`, then `not_applied` once the test restores the old content,
//!   then `changed`;
//! - a `write` and a `bash` that sleeps in the background: the run is killed while it sleeps;
//!   the shell dies with the runtime (by design), but the sleeping child keeps the call's
//!   process group alive (`running`, with the journaled pgid) until the test kills the group
//!   (`no_evidence` then).

use crate::common;

use common::kill::{Case, Script};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use runtime::event::{CallRef, Classification};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

const BEFORE: &str = "line0\nline1\nline2\n";
const AFTER: &str = "written after the kill?\n";
const OTHER: &str = "changed by someone else\n";
/// `big.bin`'s size: hashing it (twice: for its evidence, then in the body) keeps the second
/// write running well after the first has replaced `a.txt`.
const BIG_BYTES: u64 = 32 << 20;
/// Longest wait for something the run is about to do.
const WAIT: Duration = Duration::from_secs(60);

fn sha(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// A transcript of one step with these calls.
fn script(calls: Vec<Value>) -> Script {
    let lines = [
        json!({"user": "change the files"}),
        json!({"assistant": {"text": "on it", "tool_calls": calls.clone(), "stop_reason": "tool_use"}}),
        json!({"assistant": {"text": "done", "stop_reason": "end_turn"}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    Script {
        text,
        calls: calls.len(),
        bash_calls: 0,
    }
}

fn tool_call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "name": name, "arguments": arguments.to_string()})
}

/// Kills what a test left running, whatever happened: the run and the shell's process group.
struct Leftovers {
    run: Option<Child>,
    pgid: Option<u32>,
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        if let Some(mut run) = self.run.take() {
            let _ = run.kill();
            let _ = run.wait();
        }
        if let Some(pgid) = self.pgid.take() {
            let _ = killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL);
        }
    }
}

fn wait_for(what: &str, case: &Case, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; {}",
            case.logs("run")
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// SIGKILLs the run and reaps it; it must have been killed, not have ended by itself.
fn kill(leftovers: &mut Leftovers, case: &Case) {
    use std::os::unix::process::ExitStatusExt;
    let mut run = leftovers.run.take().expect("the run is running");
    run.kill().unwrap();
    let status = run.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "{}", case.logs("run"));
}

/// What `recover classify JOURNAL --dry-run --json --probe WS` prints, and the call `id`'s
/// object. A test of this package cannot run another package's binary, so this runs what that
/// command runs: the streamed recovery, read only, probing the workspace, into the JSON
/// listing (the binary itself is run by `recover/cli/tests/cli/probe.rs`).
fn classify(case: &Case, id: &str) -> Value {
    use recover::JsonListing;
    // A killed writer's lock may be held a moment longer by a child not yet exec'd.
    common::kill::wait_for_lock(&case.journal).unwrap();
    let mut out = Vec::new();
    let mut listing = JsonListing::new(&mut out, "j");
    let s = recover::Recovery::of(&case.journal)
        .probe(Some(&case.ws))
        .stream(&mut listing)
        .unwrap();
    assert!(s.output_error.is_none());
    listing.finish(s.end, s.live, None).unwrap();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["live"], false, "{v}");
    v["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["call_id"] == id)
        .unwrap_or_else(|| panic!("{id} in {v}"))
        .clone()
}

fn verdict(case: &Case, id: &str) -> Value {
    let c = classify(case, id);
    assert_eq!(c["classification"], "TOOL_OUTCOME_UNKNOWN", "{c}");
    c["probe"].clone()
}

/// A run of one batch, `wa` (a.txt: `BEFORE` → `AFTER`), `wb` (replacing a file large enough
/// that hashing it keeps the call busy), then `then`, SIGKILLed as soon as a.txt holds `wa`'s
/// content: `wa`'s `settled` is still in the writer's memory.
fn killed_mid_write(then: Vec<Value>, max_parallel: u64) -> Case {
    let mut calls = vec![
        tool_call("wa", "write", json!({"path": "a.txt", "content": AFTER})),
        tool_call(
            "wb",
            "write",
            json!({"path": "big.bin", "content": "small now\n"}),
        ),
    ];
    calls.extend(then);
    let case = Case::new(&script(calls));
    std::fs::write(case.ws.join("a.txt"), BEFORE).unwrap();
    let big = std::fs::File::create(case.ws.join("big.bin")).unwrap();
    big.set_len(BIG_BYTES).unwrap();
    drop(big);
    let mut leftovers = Leftovers {
        run: Some(case.spawn_run("group", max_parallel)),
        pgid: None,
    };
    let a = case.ws.join("a.txt");
    wait_for("a.txt to hold the write's content", &case, || {
        std::fs::read_to_string(&a).is_ok_and(|t| t == AFTER)
    });
    kill(&mut leftovers, &case);
    case
}

#[test]
fn a_write_killed_before_its_settled_was_synced_is_probed_against_its_file() {
    let case = killed_mid_write(vec![], 4);
    let a = case.ws.join("a.txt");
    // The second write was still hashing: big.bin is as it was.
    let big_len = std::fs::metadata(case.ws.join("big.bin")).unwrap().len();
    assert_eq!(big_len, BIG_BYTES, "the second write was still running");

    let p = verdict(&case, "wa");
    assert_eq!(p["verdict"], "applied", "{p}");
    assert_eq!(p["path"], "a.txt");
    assert_eq!(p["expected_sha256"], sha(AFTER));
    assert_eq!(p["before_sha256"], sha(BEFORE));
    assert_eq!(p["found_sha256"], sha(AFTER));

    std::fs::write(&a, BEFORE).unwrap();
    let p = verdict(&case, "wa");
    assert_eq!(p["verdict"], "not_applied", "{p}");
    assert_eq!(p["found_sha256"], sha(BEFORE));

    std::fs::write(&a, OTHER).unwrap();
    let p = verdict(&case, "wa");
    assert_eq!(p["verdict"], "changed", "{p}");
    assert_eq!(p["found_sha256"], sha(OTHER));

    // The other write never replaced its file.
    let p = verdict(&case, "wb");
    assert_eq!(p["verdict"], "not_applied", "{p}");
    assert_eq!(p["path"], "big.bin");
}

#[test]
fn a_bash_killed_with_its_runtime_is_running_until_its_group_ends() {
    let case = Case::new(&script(vec![
        tool_call("w1", "write", json!({"path": "w.txt", "content": AFTER})),
        // The shell dies with the runtime (its parent-death signal); its background child,
        // which does not inherit that, keeps the group alive.
        tool_call(
            "b1",
            "bash",
            json!({"command": "echo up > bash-up.txt; sleep 30 & wait"}),
        ),
    ]));
    let mut leftovers = Leftovers {
        run: Some(case.spawn_run("group", 4)),
        pgid: None,
    };
    let b1 = CallRef {
        turn: 1,
        step: 1,
        call_id: "b1".into(),
    };
    // The shell runs, and its process group is journaled (read without writing anything).
    let mut pgid = None;
    wait_for("the shell's process group in the journal", &case, || {
        if !case.ws.join("bash-up.txt").exists() {
            return false;
        }
        pgid = recover::Recovery::of(&case.journal)
            .run()
            .ok()
            .and_then(|r| r.analysis.replay.call(&b1).cloned())
            .and_then(|c| c.processes.first().map(|p| p.pgid));
        pgid.is_some()
    });
    let pgid = pgid.expect("waited for it");
    leftovers.pgid = Some(pgid);
    kill(&mut leftovers, &case);

    // The write settled before the barrier's `started` was synced: it is not unknown, and only
    // unknown calls are probed.
    let w = classify(&case, "w1");
    assert_ne!(w["classification"], "TOOL_OUTCOME_UNKNOWN", "{w}");
    assert!(w.get("probe").is_none(), "{w}");

    // Killing the runtime left the shell's group running.
    let p = verdict(&case, "b1");
    assert_eq!(p["verdict"], "running", "{p}");
    assert_eq!(p["pgid"], pgid);

    killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL).unwrap();
    let journal = case.journal.clone();
    wait_for("the group to end", &case, || !group_runs(&journal, &b1));
    let p = verdict(&case, "b1");
    assert_eq!(p["verdict"], "no_evidence", "{p}");
    assert_eq!(p["pgid"], Value::Null);
    let r = recover::Recovery::of(&case.journal).run().unwrap();
    let c = r.analysis.calls.iter().find(|c| c.call == b1).unwrap();
    assert_eq!(c.classification, Some(Classification::ToolOutcomeUnknown));
}

/// Whether the process group the call journaled still has members.
fn group_runs(journal: &Path, call: &CallRef) -> bool {
    let r = recover::Recovery::of(journal).run().unwrap();
    let c = r.analysis.replay.call(call).unwrap();
    c.processes
        .iter()
        .any(|p| runtime::process::still_running(p).is_some())
}

/// The text recovery gives call `id` in the journal as it now is (a `recovery` event's).
fn recovered_text(case: &Case, id: &str) -> String {
    let r = common::kill::recover_ok(&case.journal, false, "after the resume").unwrap();
    r.analysis
        .replay
        .recoveries
        .iter()
        .flat_map(|rec| rec.calls.iter())
        .find(|rc| rc.call.call_id == id)
        .unwrap_or_else(|| panic!("{id} was not recovered"))
        .result
        .content
        .clone()
}

/// `tooljournal resume` probes the session's own workspace: the recovery it appends says in
/// words what the probe found, both when `recover` balances the journal first (`--rerun none`)
/// and when the resume recovers it itself because a call that never started runs again (the
/// default). The third call, a `bash`, waits for the writes to settle (a barrier), so it never
/// started, and the first write's `settled` is still unsynced when the run is killed.
#[test]
fn a_resume_words_what_the_probe_of_its_workspace_found() {
    for (policy, reran) in [("none", false), ("not-started", true)] {
        let case = killed_mid_write(
            vec![tool_call(
                "wc",
                "bash",
                json!({"command": "printf 'c\\n' > c.txt"}),
            )],
            2,
        );
        common::kill::wait_for_lock(&case.journal).unwrap();
        let status = case
            .wait_resume(case.spawn_resume("resume", &["--rerun", policy]), "resume")
            .unwrap();
        assert!(status.success(), "{policy}: {}", case.logs("resume"));

        let wa = recovered_text(&case, "wa");
        assert!(wa.starts_with("TOOL_OUTCOME_UNKNOWN: "), "{policy}: {wa}");
        assert!(
            wa.contains("a probe of the workspace found that a.txt now holds exactly the content")
                && wa.contains(&sha(AFTER)),
            "{policy}: {wa}"
        );
        let wb = recovered_text(&case, "wb");
        assert!(
            wb.contains("big.bin") && wb.contains("still holds exactly what it held before"),
            "{policy}: {wb}"
        );
        // The third call ran again only under not-started, and said so.
        let c = std::fs::read_to_string(case.ws.join("c.txt")).ok();
        assert_eq!(c.as_deref(), reran.then_some("c\n"), "{policy}");
        let out = case.logs("resume");
        assert_eq!(out.contains("ran again: call wc"), reran, "{policy}: {out}");
    }
}
