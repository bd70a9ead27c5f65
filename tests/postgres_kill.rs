//! Process kills, takeovers and server failures with the journal in PostgreSQL, through the
//! real `tooljournal` and `recover` binaries against a real server (`pg::testing`).
//!
//! Why its own binary: `kill.rs` proves the file backend truthful under SIGKILL; these prove
//! the record store tells the same truth (same calls, states and classifications as a
//! directory killed at the same point), that a killed writer's lease is waited out and a live
//! one stolen only on purpose (the old writer fenced: nothing of its lands after
//! `writer/stolen`), and that a server restart or a killed backend mid-session never makes a
//! call run twice. Every `bash` call appends its own id to `marker.txt`: the outside record of
//! which bodies ran.
//!
//! Why not a module of `tests/cli/main.rs` (nor of `kill.rs`): as in `kill.rs`, the children it
//! starts and its in-process recoveries go through `common::kill::SPAWN_GATE`, which holds only
//! if no other test of the binary starts a child outside it; the other tests do. And the
//! servers it starts, restarts and disturbs (`pg::testing`) start `pg_ctl` outside the gate,
//! which is why it is not in `kill.rs`'s binary either.
// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test crate exports nothing: `pub` only shares helpers between its modules.
#![allow(unreachable_pub)]

mod common;
use common::mcp_support as support;

use common::kill::{below, check_marked, check_no_fabricated_bash, env_u64, rng_for, Case};
use common::pg::*;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use runtime::event::{Event, Record};
use serde_json::{json, Value};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

fn tool_call(id: &str, name: &str, args: Value) -> Value {
    json!({"id": id, "name": name, "arguments": args.to_string()})
}

fn mark(id: &str) -> Value {
    tool_call(
        id,
        "bash",
        json!({"command": format!("echo {id} >> marker.txt")}),
    )
}

/// Marks, writes the name of its parent process to `killer.txt`, and SIGKILLs it: the bash
/// tool's shell is the `tooljournal` process's own child (no shell in between).
fn killer(id: &str) -> Value {
    let command =
        format!("echo {id} >> marker.txt; cat /proc/$PPID/comm > killer.txt; kill -9 $PPID");
    tool_call(id, "bash", json!({ "command": command }))
}

fn step(calls: Vec<Value>) -> Value {
    json!({"assistant": {"text": "", "tool_calls": calls, "stop_reason": "tool_use"}})
}

fn end() -> Value {
    json!({"assistant": {"text": "done", "stop_reason": "end_turn"}})
}

fn kill_point_script(batch: Vec<Value>) -> Vec<Value> {
    vec![
        json!({"user": "go"}),
        step(vec![mark("s1")]),
        step(batch),
        end(),
    ]
}

/// Runs `case` until its own `killer` call SIGKILLs it; checks it died that way.
fn run_until_killed(case: &Case, max_parallel: u64) {
    // The killer signals the runtime from its command: only outside the sandbox, whose
    // Landlock scope keeps a command's signals inside it.
    let mut child = spawn_run(case, max_parallel, &["--sandbox", "danger-full-access"]);
    let status = wait_child(&mut child, "the run");
    assert_eq!(
        status.signal(),
        Some(9),
        "the run was to be SIGKILLed by its own call; {status}: {}",
        case.logs("run")
    );
    let comm = std::fs::read_to_string(case.ws.join("killer.txt")).unwrap_or_default();
    assert_eq!(comm.trim(), "tooljournal", "the killer call's parent");
}

fn no_twice(case: &Case, what: &str) {
    let twice = twice(case);
    assert!(
        twice.is_empty(),
        "{what}: marker ids written twice: {twice:?}"
    );
}

/// Records `recover classify --json` appends (it appends one `recovery` when it has work).
fn classify_appends(journal: &Path) -> usize {
    let before = records(journal).len();
    let _ = classify_calls(journal);
    records(journal).len() - before
}

/// The killer call may have run (`TOOL_OUTCOME_UNKNOWN`), the batch's calls before it have
/// their results, those after it never started.
fn expect_kill_point(listing: &[Value], ids: &[String], killer_at: usize, out: &str) {
    for (i, id) in ids.iter().enumerate() {
        let call = listing.iter().find(|c| c["call_id"] == id.as_str());
        let call = call.unwrap_or_else(|| panic!("no {id} in:\n{out}"));
        let expected = match i.cmp(&killer_at) {
            std::cmp::Ordering::Less => Value::Null,
            std::cmp::Ordering::Equal => json!("TOOL_OUTCOME_UNKNOWN"),
            std::cmp::Ordering::Greater => json!("TOOL_NOT_STARTED"),
        };
        assert_eq!(call["classification"], expected, "{id}:\n{out}");
    }
}

#[test]
fn sigkill_mid_batch_on_postgres_tells_the_same_truth_as_files_and_resumes_once() {
    let server = pg::testing::shared();
    let points: [(&str, u64, Vec<Value>); 3] = [
        ("first", 1, vec![killer("k1"), mark("k2"), mark("k3")]),
        ("middle", 1, vec![mark("k1"), killer("k2"), mark("k3")]),
        (
            "last-parallel",
            4,
            vec![
                tool_call("r1", "read", json!({"path": "notes.txt"})),
                tool_call("r2", "ls", json!({})),
                mark("k3"),
                tool_call(
                    "r4",
                    "grep",
                    json!({"pattern": "line", "path": "notes.txt"}),
                ),
                killer("k5"),
            ],
        ),
    ];
    for (name, max_parallel, batch) in points {
        kill_point(server, name, max_parallel, batch);
    }
}

/// One kill point: a directory and two PostgreSQL sessions killed by the same call; the
/// listings agree; resumes (one waiting out the killed writer's live lease) close them all.
fn kill_point(
    server: &pg::testing::TempPostgres,
    name: &str,
    max_parallel: u64,
    batch: Vec<Value>,
) {
    let bash_calls = 1 + batch.iter().filter(|c| c["name"] == "bash").count();
    let ids: Vec<String> = batch
        .iter()
        .map(|c| c["id"].as_str().unwrap_or("").to_owned())
        .collect();
    let killer_at = batch
        .iter()
        .position(|c| {
            c["arguments"]
                .as_str()
                .is_some_and(|a| a.contains("kill -9"))
        })
        .expect("a killer call");
    let script = script_of(&kill_point_script(batch));
    let dir = Case::new(&script);
    // `live`: resumed while the killed writer's lease still runs; `dead`: classified once
    // its lease ran out (a live session is only read, not classified).
    let live = pg_case(
        &script,
        &with_lease(&server.url(&format!("kp-{name}")), 1500),
    );
    let dead = pg_case(
        &script,
        &with_lease(&server.url(&format!("kp-{name}-d")), 100),
    );
    for case in [&dir, &live, &dead] {
        run_until_killed(case, max_parallel);
    }
    assert!(
        live_holder(&live.journal).is_some(),
        "{name}: the killed writer's lease is live"
    );
    let (live_calls, live_out) = classify_calls(&live.journal);
    assert!(live_out.contains("\"live\":true"), "{name}: {live_out}");
    std::thread::scope(|s| {
        let resumed = s.spawn(|| resume_to_close(&live, 20_000));
        wait_lease_expired(&dead.journal);
        let (dir_calls, dir_out) = classify_calls(&dir.journal);
        let (pg_calls, pg_out) = classify_calls(&dead.journal);
        expect_kill_point(&dir_calls, &ids, killer_at, &dir_out);
        assert_eq!(
            dir_calls, pg_calls,
            "{name}: recover classify --json differs between a directory and PostgreSQL\n\
             directory:\n{dir_out}\npostgres:\n{pg_out}"
        );
        let states = |calls: &[Value]| -> Vec<(Value, Value)> {
            calls
                .iter()
                .map(|c| (c["call_id"].clone(), c["state"].clone()))
                .collect()
        };
        assert_eq!(
            states(&dir_calls),
            states(&live_calls),
            "{name}: live listing"
        );
        resume_to_close(&dir, 0).unwrap_or_else(|e| panic!("{name} (directory): {e}"));
        resume_to_close(&dead, 20_000).unwrap_or_else(|e| panic!("{name} (postgres): {e}"));
        let resumed = resumed.join().expect("the resume thread");
        resumed.unwrap_or_else(|e| panic!("{name} (postgres, live lease): {e}"));
    });
    assert!(
        live.logs("resume").contains("waiting up to"),
        "{name}: the resume did not wait for the live lease: {}",
        live.logs("resume")
    );
    for case in [&dir, &live, &dead] {
        no_twice(case, name);
    }
    assert_eq!(dir.marks(), dead.marks(), "{name}: the same bodies ran");
    // A resume that recovers the journal itself runs the never-started calls once
    // (`--rerun not-started`, the default); after `recover classify` they are final.
    let every: Vec<(String, usize)> = live.marks().iter().map(|(id, _)| (id.clone(), 1)).collect();
    assert_eq!(live.marks(), every, "{name}: every bash call ran once");
    assert_eq!(
        every.len(),
        bash_calls,
        "{name}: every bash call ran: {every:?}"
    );
    for case in [&live, &dead] {
        assert_eq!(
            classify_appends(&case.journal),
            0,
            "{name}: a second classify appended"
        );
    }
}

#[test]
fn random_sigkills_on_postgres_never_lose_or_rerun_a_marked_call() {
    // Iterations go on until enough kills interrupted an open session, as in `kill.rs`: a fixed
    // count of random kill points fell short by chance about once in a dozen runs (a kill
    // drawn past the session's end, or before it opened, interrupts nothing).
    /// Kills that must interrupt an open session.
    const KILLS_REQUIRED: usize = 6;
    /// Iterations stop once this many did.
    const KILLS_TARGET: usize = 8;
    /// Most iterations, whatever the count.
    const ITERATIONS_MAX: u64 = 40;
    let seed = env_u64("PG_KILL_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(7)
    });
    eprintln!("random_sigkills_on_postgres: seed {seed} (PG_KILL_SEED={seed} replays it)");
    let server = pg::testing::shared();
    // Calibration: how many records an uninterrupted run writes per call.
    let mut rng = rng_for(seed, 0);
    let calib_script = common::kill::generate_script(&mut rng);
    let calib = pg_case(&calib_script, &server.url(&format!("calib-{seed}")));
    let mut child = spawn_run(&calib, 2, &[]);
    assert!(
        wait_child(&mut child, "calibration").success(),
        "{}",
        calib.logs("run")
    );
    let records_per_call = records(&calib.journal).len() as u64 / calib_script.calls as u64;

    let mut interrupted = 0;
    let mut ran = 0;
    for i in 1..=ITERATIONS_MAX {
        if interrupted >= KILLS_TARGET {
            break;
        }
        ran = i;
        let mut rng = rng_for(seed, i);
        let script = common::kill::generate_script(&mut rng);
        let max_parallel = 1 + below(&mut rng, 4);
        // Once the session holds a random number of records (up to a little past its end),
        // a random moment later: anywhere in the session, however loaded the machine is.
        let at_records = below(
            &mut rng,
            records_per_call * script.calls as u64 * 11 / 10 + 1,
        );
        let delay = Duration::from_micros(below(&mut rng, 20_000));
        let url = with_lease(&server.url(&format!("rand-{seed}-{i}")), 300);
        let case = pg_case(&script, &url);
        let mut child = spawn_run(&case, max_parallel, &[]);
        let deadline = Instant::now() + WAIT_MAX;
        while (records(&case.journal).len() as u64) < at_records
            && child.try_wait().ok().flatten().is_none()
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(delay);
        let _ = child.kill();
        let status = wait_child(&mut child, "the run");
        let delay = format!("{delay:?} after record {at_records}");
        let what = format!("seed {seed} iteration {i} (killed {delay})");
        wait_lease_expired(&case.journal);
        let r = recover_at(&case.journal, false).unwrap_or_else(|e| panic!("{what}: {e}"));
        let mid_session = r.analysis.replay.open.is_some() && !r.analysis.replay.closed;
        if status.signal() == Some(9) && mid_session {
            interrupted += 1;
        }
        eprintln!(
            "{what}: {}, {} marked",
            common::kill::kill_point(&r),
            case.marks().len()
        );
        let marks = case.marks();
        if r.analysis.replay.open.is_none() {
            assert!(
                marks.is_empty(),
                "{what}: bodies ran, no session: {marks:?}"
            );
            continue;
        }
        for (id, _) in &marks {
            check_marked(&r, id, "after the kill").unwrap_or_else(|e| panic!("{what}: {e}"));
        }
        check_no_fabricated_bash(&r, &marks, "after the kill")
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        resume_to_close(&case, 10_000).unwrap_or_else(|e| panic!("{what}: {e}"));
        no_twice(&case, &what);
    }
    assert!(
        interrupted >= KILLS_REQUIRED,
        "seed {seed}: only {interrupted} of {ran} kills interrupted an open session (need \
         {KILLS_REQUIRED})"
    );
}

/// The events of `records` after `writer/stolen`, which must be there once.
fn stolen_at(records: &[(u64, Record)]) -> (usize, runtime::event::WriterStolen) {
    let stolen: Vec<_> = records
        .iter()
        .enumerate()
        .filter_map(|(i, (_, r))| match &r.event {
            Event::WriterStolen(w) => Some((i, w.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(stolen.len(), 1, "one writer/stolen: {stolen:?}");
    stolen.into_iter().next().expect("one")
}

fn gapless(records: &[(u64, Record)]) {
    let seqs: Vec<u64> = records.iter().map(|(s, _)| *s).collect();
    let first = seqs.first().copied().unwrap_or(0);
    let expected: Vec<u64> = (first..first + seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "seqs are gapless");
}

#[test]
fn a_stolen_session_fences_the_stopped_writer_and_nothing_of_it_lands_after_the_steal() {
    let server = pg::testing::shared();
    let script = script_of(&[
        json!({"user": "go"}),
        step(vec![tool_call(
            "a1",
            "bash",
            json!({"command": "echo a1 >> marker.txt; sleep 2"}),
        )]),
        step(vec![mark("a2")]),
        end(),
    ]);
    let case = pg_case(&script, &server.url("fencing"));
    let mut a = spawn_run(&case, 1, &[]);
    wait_started(&case.journal, "a1", &mut a);
    let holder = live_holder(&case.journal).expect("A holds the session");
    assert!(
        holder.name.ends_with(&format!(":{}", a.id())),
        "the holder {} is A (pid {})",
        holder.name,
        a.id()
    );
    kill(Pid::from_raw(a.id() as i32), Signal::SIGSTOP).expect("SIGSTOP A");

    // Without --steal, a live lease is waited for, then refused.
    let refused = case.spawn_resume("refused", &["--lease-wait-ms", "300"]);
    let status = case.wait_resume(refused, "refused").expect("resume ends");
    let logs = case.logs("refused");
    assert_eq!(status.code(), Some(1), "{logs}");
    assert!(
        logs.contains("session is live") && logs.contains(&holder.name),
        "{logs}"
    );

    let b = case.spawn_resume("steal", &["--steal", "--kill-orphans"]);
    let status = case.wait_resume(b, "steal").expect("resume ends");
    assert!(status.success(), "B: {status}: {}", case.logs("steal"));
    let after_b = records(&case.journal);
    let (at, stolen) = stolen_at(&after_b);
    assert_eq!(stolen.holder, holder.name, "writer/stolen names A");
    assert_eq!(
        stolen.holder_epoch, holder.epoch,
        "writer/stolen names A's epoch"
    );
    assert!(
        stolen.epoch > holder.epoch,
        "B's epoch is newer: {stolen:?}"
    );

    kill(Pid::from_raw(a.id() as i32), Signal::SIGCONT).expect("SIGCONT A");
    let status = wait_child(&mut a, "A after SIGCONT");
    let a_logs = case.logs("run");
    eprintln!("fencing: A {status}; {a_logs}\n{}", case.logs("steal"));
    assert!(
        !status.success(),
        "A was fenced off yet exited {status}: {a_logs}"
    );
    assert!(
        a_logs.contains("another writer took this journal")
            && a_logs.contains(&format!("epoch {} is no longer", holder.epoch)),
        "A's message names the fencing: {a_logs}"
    );
    let end = records(&case.journal);
    gapless(&end);
    assert_eq!(
        end.len(),
        after_b.len(),
        "A appended after B's steal: {:?}",
        end[after_b.len().min(end.len())..]
            .iter()
            .map(|(s, r)| (s, r.event.kind()))
            .collect::<Vec<_>>()
    );
    for (seq, r) in &end[at + 1..] {
        if let Event::Settled { call, .. } = &r.event {
            assert_ne!(
                call.call_id, "a1",
                "seq {seq}: A's running call settled after the steal"
            );
        }
    }
    assert!(matches!(
        end.last().map(|(_, r)| &r.event),
        Some(Event::SessionClose)
    ));
    no_twice(&case, "fencing");
}

/// Waits until the journal holds `call_id`'s process group (`call/process`); returns its pgid.
fn wait_process(journal: &Path, call_id: &str) -> u32 {
    let deadline = Instant::now() + WAIT_MAX;
    loop {
        let pgid = records(journal)
            .into_iter()
            .find_map(|(_, r)| match r.event {
                Event::CallProcess { call, process } if call.call_id == call_id => {
                    Some(process.pgid)
                }
                _ => None,
            });
        if let Some(pgid) = pgid {
            return pgid;
        }
        assert!(
            Instant::now() < deadline,
            "{call_id}'s process never journaled"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// a1's command: it runs until the test writes `go` (bounded: a failed test leaves no endless
/// loop).
const HELD_A1: &str =
    "echo a1 >> marker.txt; for i in $(seq 1 600); do [ -f go ] && break; sleep 0.1; done";

#[test]
fn a_steal_that_would_refuse_refuses_before_taking_anything() {
    let server = pg::testing::shared();
    let script = script_of(&[
        json!({"user": "go"}),
        step(vec![tool_call("a1", "bash", json!({ "command": HELD_A1 }))]),
        step(vec![mark("a2")]),
        end(),
    ]);
    let case = pg_case(&script, &server.url("steal-refused"));
    let mut a = spawn_run(&case, 1, &[]);
    wait_started(&case.journal, "a1", &mut a);
    let pgid = wait_process(&case.journal, "a1");
    let holder = live_holder(&case.journal).expect("A holds the session");
    let before = records(&case.journal).len();

    // A healthy writer with a running call: without --kill-orphans the resume would refuse to
    // go on beside that call once A is fenced off, so it refuses first and takes nothing.
    let b = case.spawn_resume("steal", &["--steal"]);
    let status = case.wait_resume(b, "steal").expect("resume ends");
    let logs = case.logs("steal");
    assert_eq!(status.code(), Some(1), "{logs}");
    assert!(
        logs.contains(&format!("still running: process group {pgid}"))
            && logs.contains("nothing was taken")
            && logs.contains("--kill-orphans"),
        "{logs}"
    );
    nothing_taken(&case, &holder);

    // A goes on undisturbed: its call ends, is committed, and the session closes.
    std::fs::write(case.ws.join("go"), "").expect("let a1 end");
    let status = wait_child(&mut a, "A");
    assert!(status.success(), "A: {status}: {}", case.logs("run"));
    let end = records(&case.journal);
    assert!(end.len() > before, "A wrote on");
    assert!(end.iter().any(|(_, r)| matches!(
        &r.event,
        Event::Committed { call, .. } if call.call_id == "a1"
    )));
    assert!(!end
        .iter()
        .any(|(_, r)| matches!(r.event, Event::Recovery(_))));
    assert!(matches!(
        end.last().map(|(_, r)| &r.event),
        Some(Event::SessionClose)
    ));
    no_twice(&case, "steal refused");
}

/// A refused `--steal` took nothing: no `writer/stolen`, and `holder` (A) still holds the
/// session with its epoch.
fn nothing_taken(case: &Case, holder: &journal::Holder) {
    assert!(
        !records(&case.journal)
            .iter()
            .any(|(_, r)| matches!(r.event, Event::WriterStolen(_))),
        "a refused resume stole the session"
    );
    let still = live_holder(&case.journal).expect("A still holds the session");
    assert_eq!((&still.name, still.epoch), (&holder.name, holder.epoch));
}

#[test]
fn a_steal_whose_workspace_is_not_here_refuses_before_taking_anything() {
    let server = pg::testing::shared();
    let script = script_of(&[
        json!({"user": "go"}),
        step(vec![tool_call("a1", "bash", json!({ "command": HELD_A1 }))]),
        end(),
    ]);
    let case = pg_case(&script, &server.url("steal-no-workspace"));
    let mut a = spawn_run(&case, 1, &[]);
    wait_started(&case.journal, "a1", &mut a);
    let holder = live_holder(&case.journal).expect("A holds the session");
    // A works through its open handles; under its journaled path there is nothing now.
    let moved = case.ws.with_extension("moved");
    std::fs::rename(&case.ws, &moved).expect("move the workspace away");
    let b = case.spawn_resume("steal", &["--steal", "--kill-orphans"]);
    let status = case.wait_resume(b, "steal");
    std::fs::rename(&moved, &case.ws).expect("put the workspace back");
    let status = status.expect("resume ends");
    let logs = case.logs("steal");
    assert_eq!(status.code(), Some(1), "{logs}");
    assert!(
        logs.contains("is not a directory here") && logs.contains("nothing was taken"),
        "{logs}"
    );
    nothing_taken(&case, &holder);
    std::fs::write(case.ws.join("go"), "").expect("let a1 end");
    let status = wait_child(&mut a, "A");
    assert!(status.success(), "A: {status}: {}", case.logs("run"));
}

/// Moments after the second call started at which the server is disturbed, one round each.
const DISTURB_AFTER_MS: [u64; 3] = [0, 70, 140];

/// Runs of six sleeping steps on a server of their own, each disturbed by `disturb` a moment
/// after its second call started: each run ends well or names the store it lost; then
/// recovery and a resume close it, no call run twice.
fn server_failure_mid_session(name: &str, disturb: impl Fn(&pg::testing::TempPostgres)) {
    let server = pg::testing::TempPostgres::start();
    let mut lines = vec![json!({"user": "go"})];
    let ids: Vec<String> = (1..=6).map(|i| format!("s{i}")).collect();
    for id in &ids {
        lines.push(step(vec![tool_call(
            id,
            "bash",
            json!({"command": format!("echo {id} >> marker.txt; sleep 0.2")}),
        )]));
    }
    lines.push(end());
    let script = script_of(&lines);
    for (round, after_ms) in DISTURB_AFTER_MS.iter().enumerate() {
        let name = format!("{name}-{round} ({after_ms} ms after s2 started)");
        let url = with_lease(&server.url(&format!("disturbed-{round}")), 1500);
        let case = pg_case(&script, &url);
        let mut run = spawn_run(&case, 1, &[]);
        wait_started(&case.journal, "s2", &mut run);
        std::thread::sleep(Duration::from_millis(*after_ms));
        disturb(&server);
        assert!(
            !started(&case.journal, "s6"),
            "{name}: the disturbance came after the session's last call started"
        );
        let status = wait_child(&mut run, "the run");
        after_disturbed_run(&case, &name, status, &ids);
    }
}

/// A disturbed run exited `status`: a success ran every call once and closed the session; a
/// failure says which store failed. Either way a resume closes it, no call run twice.
fn after_disturbed_run(case: &Case, name: &str, status: std::process::ExitStatus, ids: &[String]) {
    let logs = case.logs("run");
    eprintln!("{name}: the run {status}; {logs}");
    if status.success() {
        let expected: Vec<(String, usize)> = ids.iter().map(|i| (i.clone(), 1)).collect();
        assert_eq!(
            case.marks(),
            expected,
            "{name}: every call ran once: {logs}"
        );
        let r = recover_at(&case.journal, false).expect("recover");
        assert!(
            r.analysis.replay.closed,
            "{name}: exit 0 yet not closed: {logs}"
        );
    } else {
        let stderr = std::fs::read_to_string(case.root().join("run.err")).unwrap_or_default();
        assert!(
            stderr.contains("postgres://") || stderr.to_lowercase().contains("store"),
            "{name}: the run stopped ({status}) without naming the store: {logs}"
        );
    }
    resume_to_close(case, 20_000).unwrap_or_else(|e| panic!("{name}: {e}"));
    no_twice(case, name);
}

#[test]
fn a_server_restarted_immediately_mid_session_never_runs_a_call_twice() {
    server_failure_mid_session("restart", |s| s.restart_immediate());
}

#[test]
fn backends_terminated_mid_session_never_run_a_call_twice() {
    server_failure_mid_session("terminate", |s| {
        assert!(
            s.terminate_backends() > 0,
            "the writer's backend was there to terminate"
        );
    });
}

#[test]
fn an_mcp_call_killed_mid_call_on_postgres_is_classified_as_on_files() {
    let config = format!(
        "[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
        support::everything_server().display().to_string()
    );
    let script = script_of(&[
        json!({"user": "run the long one"}),
        step(vec![tool_call(
            "c1",
            "mcp__everything__trigger-long-running-operation",
            json!({"duration": 30, "steps": 30}),
        )]),
        end(),
        // The crash ends turn 1; the resume goes on with the next turn.
        json!({"user": "again"}),
        step(vec![tool_call(
            "c2",
            "mcp__everything__echo",
            json!({"message": "back"}),
        )]),
        end(),
    ]);
    let server = pg::testing::shared();
    let dir = Case::new(&script);
    let pg = pg_case(&script, &with_lease(&server.url("mcp"), 200));
    let mut listings = Vec::new();
    for case in [&dir, &pg] {
        let config_path = case.root().join("config.toml");
        std::fs::write(&config_path, &config).expect("config");
        let config_arg = config_path.to_str().expect("utf-8").to_owned();
        let mut run = spawn_run(case, 1, &["--config", &config_arg]);
        wait_started(&case.journal, "c1", &mut run);
        run.kill().expect("SIGKILL the run");
        let _ = run.wait();
        // A live session is listed, not classified: its killed writer's lease runs out first.
        wait_lease_expired(&case.journal);
        let (calls, out) = classify_calls(&case.journal);
        let c1 = calls.iter().find(|c| c["call_id"] == "c1").cloned();
        let c1 = c1.unwrap_or_else(|| panic!("no c1 in:\n{out}"));
        assert_eq!(c1["classification"], "TOOL_OUTCOME_UNKNOWN", "{out}");
        listings.push(calls);
        resume_to_close(case, 20_000).unwrap_or_else(|e| panic!("{}: {e}", case.journal.display()));
        let r = recover_at(&case.journal, false).expect("recover");
        let c2 = r.analysis.calls.iter().find(|c| c.call.call_id == "c2");
        let c2 = c2.unwrap_or_else(|| {
            panic!(
                "{}: no c2 after the resume: {}",
                case.journal.display(),
                case.logs("resume")
            )
        });
        assert!(
            !c2.result.is_error,
            "the resumed session's MCP call: {:?}",
            c2.result
        );
    }
    assert_eq!(listings[0], listings[1], "directory vs postgres");
}
