//! Process-kill tests: `tooljournal run` is SIGKILLed at random moments, then
//! the journal it left is recovered and the session resumed, and what recovery says is checked
//! against what really happened in the workspace.
//!
//! Every generated transcript's `bash` calls append their own call id to `marker.txt` before
//! anything else, and every call id is unique in the transcript, so the marker file is the
//! outside record of which bodies ran. After each kill:
//! - every id in the marker file is, in the recovered journal, `TOOL_OUTCOME_UNKNOWN` or a call
//!   with its real result; never `TOOL_NOT_STARTED` (I1), and never absent from the journal;
//! - a `bash` call whose real success recovery reports did write its id (I4: nothing fabricated);
//! - the rebuilt conversation passes all four providers' validators (I6), and recovering twice
//!   (and read-only first) gives the same bodies, the second appending nothing (I5);
//! - `tooljournal resume` exits 0, runs no marked call a second time (no id twice in the marker
//!   file), closes the session, and leaves nothing for a later recovery to append;
//! - before that resume, a third of the iterations SIGKILL a resume at a random moment and a
//!   third start two resumes at once (each proceeds or says the session is live, at least one
//!   proceeds): still no id twice in the marker file.
//!
//! When to kill is drawn from a seeded generator, scaled by uninterrupted calibration runs: a
//! fifth of the kills come a random time after spawn (start-up: before the first record, or
//! before the journal even exists), the rest a random time after the journal reached a random
//! size (anywhere in the session: mid-batch, between steps, between turns, or after the session
//! ended by itself). Iterations go on, two at a time, until at least [`KILLS_TARGET`] kills
//! interrupted a running process (or [`ITERATIONS_MAX`] ran); at least [`KILLS_REQUIRED`] must.
//! No clock ends them: a loaded machine takes longer, and kills as many sessions.
//!
//! The seed is printed; `KILL_SEED=S` replays its transcripts and kill points, and
//! `KILL_ITER=I` runs only iteration `I` (a few times). Timing on a real machine still varies,
//! so a replay hits nearby moments, not the same byte. `KILL_STRICT_LOCK=1` fails on the known
//! lock hand-over delay described at [`wait_for_lock`] instead of waiting it out.
//!
//! This file holds the test and its policy (how many kills, when to kill, what to check after
//! each); the machinery it drives (transcripts, a run's directory and processes, the lock wait,
//! the checks against the marker file) is in `common/kill.rs`.
//!
//! Why a binary of its own, not a module of `tests/cli/main.rs`: every child this process starts
//! goes through `common::kill::SPAWN_GATE`, held for writing across the spawn while a recovery
//! in this process holds a journal's lock for reading, so that no child inherits that lock
//! until its `exec`. The other tests of the package start their children without the gate (and
//! `postgres_kill.rs`'s server, `pg::testing`, starts `pg_ctl` without it): beside them a child
//! could hold a killed session's lock a moment longer, and a resume here would be refused.
// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test crate exports nothing: `pub` only shares helpers between its modules.
#![allow(unreachable_pub)]

mod common;

use common::kill::*;
use proptest::test_runner::TestRng;
use runtime::event::Classification;
use runtime::state::CallState;
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Kills that must interrupt a running session, per run of this test.
const KILLS_REQUIRED: usize = 50;
/// Iterations stop once this many kills interrupted a session (a margin over the requirement).
const KILLS_TARGET: usize = 60;
/// Most iterations, whatever the count.
const ITERATIONS_MAX: usize = 150;
/// Iterations run side by side.
const WORKERS: usize = 2;
/// Kills after start-up wait for a journal size drawn from an uninterrupted run's opening to
/// this much of the rest of it (so some land after the session ended by itself).
const BYTES_SPAN_PERCENT: u64 = 110;
/// Kills drawn during start-up (before the first record, mostly), in percent.
const START_UP_KILL_PERCENT: u64 = 20;

const SIGKILL: i32 = nix::sys::signal::Signal::SIGKILL as i32;

#[derive(Default)]
struct Tally {
    interrupted: usize,
    finished_first: usize,
    points: BTreeMap<&'static str, usize>,
    torn: usize,
    unknown_calls: usize,
    marked_calls: usize,
    lock_waits: usize,
    lock_wait_max: Duration,
    /// What happened before the resume that finishes the session, by kind.
    disturbances: BTreeMap<&'static str, usize>,
}

struct Iteration {
    interrupted: bool,
    disturbance: &'static str,
    /// The journal stayed locked this long after the writer was reaped.
    lock_wait: Option<Duration>,
    point: &'static str,
    torn: bool,
    unknown_calls: usize,
    marked_calls: usize,
}

/// What an uninterrupted run looks like, measured on runs side by side (as the workers run).
#[derive(Debug, Clone, Copy)]
struct Timing {
    /// From spawn to the journal's first record.
    startup: Duration,
    /// From the first record to the process's exit, per call of the transcript.
    per_call: Duration,
    /// The records' bytes when they were first seen: `session/open` and what was written with
    /// it, whatever the transcript (its tools' schemas make most of it).
    opening_bytes: u64,
    /// The records' bytes after the opening, at the end, per call of the transcript.
    bytes_per_call: u64,
}

fn kill_at(rng: &mut TestRng, timing: Timing, calls: usize) -> KillAt {
    let micros = |d: Duration| d.as_micros() as u64;
    if below(rng, 100) < START_UP_KILL_PERCENT {
        let span = micros(timing.startup) * 120 / 100;
        KillAt::AfterSpawn(Duration::from_micros(below(rng, span + 1)))
    } else {
        // The opening is the same for every transcript; the rest grows with its calls.
        let bytes = timing.bytes_per_call * calls as u64 * BYTES_SPAN_PERCENT / 100;
        let then = below(rng, 2 * micros(timing.per_call) + 1);
        KillAt::AtJournalBytes(
            timing.opening_bytes + below(rng, bytes + 1),
            Duration::from_micros(then),
        )
    }
}

/// Runs one iteration: generate, run, kill, recover, check, resume, check.
fn iteration(seed: u64, index: u64, timing: Timing) -> Result<Iteration, String> {
    let mut rng = rng_for(seed, index);
    let script = generate_script(&mut rng);
    let fsync = ["always", "group", "never"][below(&mut rng, 3) as usize];
    let max_parallel = 1 + below(&mut rng, 4);
    let at = kill_at(&mut rng, timing, script.calls);
    let case = Case::new(&script);
    // When the kill was sent (from spawn), and whether it ended the run.
    let killed = Mutex::new((Duration::ZERO, "not run yet"));
    let context = |point: &str, message: String| {
        let (sent, how) = *killed.lock().unwrap();
        format!(
            "seed {seed} (KILL_SEED={seed} KILL_ITER={index}), iteration {index}, kill {at} \
             (sent {:.1} ms after spawn, {}; {point}), --fsync {fsync} --max-parallel \
             {max_parallel}, {} calls: {message}\n  transcript:\n{}",
            sent.as_secs_f64() * 1e3,
            how,
            script.calls,
            script.text
        )
    };

    let mut child = case.spawn_run(fsync, max_parallel);
    let sent = kill_run(&mut child, &case.journal, at);
    let status = child.wait().unwrap();
    let interrupted = status.signal() == Some(SIGKILL);
    *killed.lock().unwrap() = (
        sent,
        if interrupted {
            "it killed the run"
        } else {
            "the run had ended by itself"
        },
    );
    if !interrupted && !status.success() {
        return Err(context(
            "not killed",
            format!(
                "the run ended on its own with {status}; {}",
                case.logs("run")
            ),
        ));
    }
    // The marker file as the killed run left it (a shell started just before the kill may
    // still add its id: it is then in the journal as started, and checked below).
    let marks_at_kill = case.marks();

    if !case.journal.exists() {
        // Killed before the journal directory was made: nothing ran, nothing to resume.
        let point = "before the journal existed";
        if !marks_at_kill.is_empty() {
            return Err(context(
                point,
                format!("no journal, yet calls ran: {marks_at_kill:?}"),
            ));
        }
        let status = case.resume().map_err(|e| context(point, e))?;
        if status.code() != Some(1) || !case.logs("resume").contains("cannot open the journal") {
            return Err(context(
                point,
                format!(
                    "resume of a journal that does not exist: expected exit 1 naming it, got \
                     {status}; {}",
                    case.logs("resume")
                ),
            ));
        }
        return Ok(Iteration {
            interrupted,
            disturbance: "none",
            lock_wait: None,
            point,
            torn: false,
            unknown_calls: 0,
            marked_calls: 0,
        });
    }

    let lock_wait = wait_for_lock(&case.journal).map_err(|e| context("after the kill", e))?;
    let dry = recover_ok(&case.journal, false, "after the kill")
        .map_err(|e| context("after the kill", e))?;
    let first = recover_ok(&case.journal, true, "after the kill")
        .map_err(|e| context(kill_point(&dry), e))?;
    let point = kill_point(&first);
    let fail = |message: String| context(point, message);
    if dry.analysis.live || first.analysis.live {
        return Err(fail(format!(
            "the killed (and reaped) session's journal is locked again (live); processes \
             holding its LOCK file: {:?}",
            lock_holders(&case.journal.join("LOCK"))
        )));
    }
    if !interrupted && point != "after session/close" {
        return Err(fail(format!(
            "the run exited 0 but its journal is not closed; {}",
            case.logs("run")
        )));
    }
    if interrupted && point == "after session/close" && first.appended {
        return Err(fail(
            "a closed session's journal got a recovery appended".into(),
        ));
    }
    let bodies = rebuild_all(&first).map_err(&fail)?;
    let dry_bodies = rebuild_all(&dry).map_err(&fail)?;
    if bodies != dry_bodies {
        return Err(fail(
            "the read-only recovery and the writing one rebuild different histories (I5)".into(),
        ));
    }
    let second = recover_ok(&case.journal, true, "recovering a second time").map_err(&fail)?;
    if second.appended {
        return Err(fail(
            "a second recovery appended again (I5: recovery is idempotent)".into(),
        ));
    }
    if rebuild_all(&second).map_err(&fail)? != bodies {
        return Err(fail(
            "a second recovery rebuilds a different history (I5)".into(),
        ));
    }
    for (id, n) in &marks_at_kill {
        if *n > 1 {
            return Err(fail(format!("call {id} ran {n} times before the kill")));
        }
        check_marked(&first, id, "after the kill").map_err(&fail)?;
    }
    check_no_fabricated_bash(&first, &marks_at_kill, "after the kill").map_err(&fail)?;

    // Before the resume that must finish the session: sometimes a resume SIGKILLed at a random
    // moment, sometimes two resumes at once. Neither may run a call twice (checked below on
    // the marker file), and the journal must stay recoverable.
    let disturbance = disturb_resume(&case, &mut rng, timing, script.calls).map_err(&fail)?;

    // Resume: finishes the session, never running a marked call again.
    let status = case.resume().map_err(&fail)?;
    if !status.success() {
        return Err(fail(format!(
            "resume exited with {status}; {}",
            case.logs("resume")
        )));
    }
    let marks = case.marks();
    for (id, n) in &marks {
        if *n > 1 {
            return Err(fail(format!(
                "call {id} ran {n} times (marker file: {marks:?}); resume must never run a \
                 call a second time; {}",
                case.logs("resume")
            )));
        }
    }
    for (id, _) in &marks_at_kill {
        if !marks.iter().any(|(m, _)| m == id) {
            return Err(fail(format!("call {id}'s marker disappeared")));
        }
    }
    for (id, _) in &marks {
        // A call in the killed run's journal that had not started must not run later.
        if first.analysis.calls.iter().any(|c| c.call.call_id == *id) {
            check_marked(&first, id, "after the kill (its marker appeared later)")
                .map_err(&fail)?;
        }
    }

    let last = recover_ok(&case.journal, true, "after resume").map_err(&fail)?;
    if last.appended {
        return Err(fail(format!(
            "recovery after a finished resume appended (resume left the journal unbalanced); {}",
            case.logs("resume")
        )));
    }
    rebuild_all(&last).map_err(&fail)?;
    if first.analysis.replay.open.is_some() {
        if !last.analysis.replay.closed {
            return Err(fail(format!(
                "the resumed session is not closed; {}",
                case.logs("resume")
            )));
        }
        if let Some(c) = last
            .analysis
            .replay
            .calls()
            .find(|c| c.state != CallState::Committed)
        {
            return Err(fail(format!(
                "after resume, call {} is left in state {}",
                c.call.call_id,
                c.state.as_str()
            )));
        }
        for (id, _) in &marks {
            check_marked(&last, id, "after resume").map_err(&fail)?;
        }
        check_no_fabricated_bash(&last, &marks, "after resume").map_err(&fail)?;
    } else if !marks.is_empty() {
        return Err(fail(format!(
            "the journal holds no session, yet calls ran: {marks:?}"
        )));
    }

    Ok(Iteration {
        interrupted,
        disturbance,
        lock_wait,
        point,
        torn: first.analysis.end.torn,
        unknown_calls: first
            .analysis
            .calls
            .iter()
            .filter(|c| c.classification == Some(Classification::ToolOutcomeUnknown))
            .count(),
        marked_calls: marks_at_kill.len(),
    })
}

/// A resume killed at a random moment, or two resumes started together, or nothing; returns
/// which. Orphans of the killed run are killed (`--kill-orphans`), as the final resume may
/// need them gone anyway.
fn disturb_resume(
    case: &Case,
    rng: &mut TestRng,
    timing: Timing,
    calls: usize,
) -> Result<&'static str, String> {
    match below(rng, 3) {
        0 => Ok("none"),
        1 => {
            let span = timing.startup + timing.per_call * calls as u32;
            let delay = Duration::from_micros(below(rng, span.as_micros() as u64 + 1));
            let mut child = case.spawn_resume("killed-resume", &["--kill-orphans"]);
            std::thread::sleep(delay);
            let _ = child.kill();
            child.wait().unwrap();
            wait_for_lock(&case.journal)?;
            Ok("a resume killed")
        }
        _ => {
            let a = case.spawn_resume("resume-a", &["--kill-orphans"]);
            let b = case.spawn_resume("resume-b", &["--kill-orphans"]);
            // Both are waited for before either result is looked at.
            let (a, b) = (
                case.wait_resume(a, "resume-a"),
                case.wait_resume(b, "resume-b"),
            );
            let statuses = [(a?, "resume-a"), (b?, "resume-b")];
            for (status, log) in &statuses {
                let lost = status.code() == Some(1) && case.logs(log).contains("session is live");
                if !status.success() && !lost {
                    return Err(format!(
                        "of two resumes at once, one exited {status} without saying the \
                         session is live; {}",
                        case.logs(log)
                    ));
                }
            }
            if !statuses.iter().any(|(s, _)| s.success()) {
                return Err(format!(
                    "neither of two resumes at once proceeded; {}; {}",
                    case.logs("resume-a"),
                    case.logs("resume-b")
                ));
            }
            Ok("two resumes at once")
        }
    }
}

/// Fewest calls of the transcript [`calibrate`] runs: its opening's bytes and time are shared
/// by few calls otherwise, and a transcript of two calls measured most of a call as opening.
const CALIBRATION_CALLS_MIN: usize = 6;

/// Uninterrupted runs of a generated transcript, [`WORKERS`] side by side, twice: how long
/// they take (the lower median) sets the kill delays' spans.
fn calibrate(seed: u64) -> Timing {
    let mut rng = rng_for(seed, u64::MAX);
    let script = std::iter::repeat_with(|| generate_script(&mut rng))
        .find(|s| s.calls >= CALIBRATION_CALLS_MIN)
        .expect("most transcripts have that many calls (six in seven)");
    let cases: Vec<Case> = (0..WORKERS).map(|_| Case::new(&script)).collect();
    let mut startups = Vec::new();
    let mut rests = Vec::new();
    let mut openings = Vec::new();
    let mut bytes = 0;
    for _ in 0..2 {
        for case in &cases {
            let _ = std::fs::remove_dir_all(&case.journal);
            let _ = std::fs::remove_file(case.ws.join(MARKER));
        }
        let began = Instant::now();
        // Each run: its child, when its first record was seen (and its bytes then), its end.
        type Watched = (Child, Option<(Duration, u64)>, Option<Duration>);
        let mut children: Vec<Watched> = cases
            .iter()
            .map(|c| (c.spawn_run("group", 4), None, None))
            .collect();
        while children.iter().any(|(_, _, end)| end.is_none()) {
            assert!(
                began.elapsed() < RESUME_TIMEOUT,
                "seed {seed}: calibration hangs"
            );
            for ((child, first, end), case) in children.iter_mut().zip(&cases) {
                if first.is_none() {
                    let opening = journal_bytes(&case.journal);
                    if opening > 0 {
                        *first = Some((began.elapsed(), opening));
                    }
                }
                if end.is_none() {
                    if let Some(status) = child.try_wait().unwrap() {
                        assert!(
                            status.success(),
                            "seed {seed}: calibration run failed: {}",
                            case.logs("run")
                        );
                        *end = Some(began.elapsed());
                    }
                }
            }
            std::thread::sleep(Duration::from_micros(300));
        }
        for ((_, first, end), case) in children.iter().zip(&cases) {
            let (first, opening) = first.unwrap_or_default();
            startups.push(first);
            rests.push(end.unwrap() - first);
            openings.push(opening);
            bytes = bytes.max(journal_bytes(&case.journal));
            let marks = case.marks();
            assert_eq!(
                marks.len(),
                script.bash_calls,
                "seed {seed}: every bash call of an uninterrupted run marks once: {marks:?}"
            );
            assert!(marks.iter().all(|(_, n)| *n == 1), "{marks:?}");
            let r = recover_gated(&case.journal, true).unwrap();
            assert!(!r.appended, "a closed session needs no recovery");
            assert!(r.analysis.replay.closed);
        }
    }
    // The lower median: a load spike during calibration should not push most kills past the
    // end of the runs (a kill too early still interrupts; one too late does not).
    startups.sort();
    rests.sort();
    openings.sort();
    let opening_bytes = openings[(openings.len() - 1) / 2];
    Timing {
        startup: startups[(startups.len() - 1) / 2],
        per_call: rests[(rests.len() - 1) / 2] / script.calls as u32,
        opening_bytes,
        bytes_per_call: bytes.saturating_sub(opening_bytes) / script.calls as u64,
    }
}

#[test]
fn sigkill_at_random_moments_never_lies_and_resume_never_reruns() {
    let seed = env_u64("KILL_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    let only = env_u64("KILL_ITER");
    println!("kill test seed: {seed} (replay with KILL_SEED={seed})");
    let began = Instant::now();
    let timing = calibrate(seed);
    println!(
        "uninterrupted runs, {WORKERS} side by side: {:.0} ms to the journal's first record ({} \
         bytes), then {:.1} ms and {} journal bytes per call",
        timing.startup.as_secs_f64() * 1e3,
        timing.opening_bytes,
        timing.per_call.as_secs_f64() * 1e3,
        timing.bytes_per_call
    );

    if let Some(index) = only {
        // Replaying one iteration: its transcript and delay, a few times (timing varies).
        for attempt in 1..=10 {
            let it = iteration(seed, index, timing).unwrap_or_else(|e| panic!("{e}"));
            println!(
                "attempt {attempt}: {} ({})",
                it.point,
                if it.interrupted {
                    "killed"
                } else {
                    "ended first"
                }
            );
        }
        return;
    }

    let next = AtomicUsize::new(0);
    let interrupted = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let tally = Mutex::new(Tally::default());
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| loop {
                if stop.load(Ordering::SeqCst) || interrupted.load(Ordering::SeqCst) >= KILLS_TARGET
                {
                    return;
                }
                let index = next.fetch_add(1, Ordering::SeqCst);
                if index >= ITERATIONS_MAX {
                    return;
                }
                match iteration(seed, index as u64, timing) {
                    Ok(it) => {
                        if it.interrupted {
                            interrupted.fetch_add(1, Ordering::SeqCst);
                        }
                        let mut t = tally.lock().unwrap();
                        if it.interrupted {
                            t.interrupted += 1;
                            *t.points.entry(it.point).or_default() += 1;
                        } else {
                            t.finished_first += 1;
                        }
                        t.torn += it.torn as usize;
                        *t.disturbances.entry(it.disturbance).or_default() += 1;
                        t.unknown_calls += it.unknown_calls;
                        t.marked_calls += it.marked_calls;
                        if let Some(wait) = it.lock_wait {
                            t.lock_waits += 1;
                            t.lock_wait_max = t.lock_wait_max.max(wait);
                        }
                    }
                    Err(e) => {
                        stop.store(true, Ordering::SeqCst);
                        failures.lock().unwrap().push(e);
                    }
                }
            });
        }
    });

    let failures = failures.into_inner().unwrap();
    if let Some(first) = failures.first() {
        panic!(
            "{} iteration(s) failed (seed {seed}); the first:\n{first}",
            failures.len()
        );
    }
    let t = tally.into_inner().unwrap();
    println!(
        "seed {seed}: {} iterations in {:.1} s; {} kills interrupted a session, {} runs ended \
         before their kill; kill points: {:?}; torn tails: {}; calls left TOOL_OUTCOME_UNKNOWN: \
         {}; marked calls at kill time: {}; journal still locked after the writer was reaped \
         (a forked child not yet exec'd): {} times, longest {:?}; before the final resume: {:?}",
        t.interrupted + t.finished_first,
        began.elapsed().as_secs_f64(),
        t.interrupted,
        t.finished_first,
        t.points,
        t.torn,
        t.unknown_calls,
        t.marked_calls,
        t.lock_waits,
        t.lock_wait_max,
        t.disturbances
    );
    assert!(
        t.interrupted >= KILLS_REQUIRED,
        "seed {seed}: only {} kills interrupted a session (need {KILLS_REQUIRED}); {} runs \
         ended first; kill points {:?}",
        t.interrupted,
        t.finished_first,
        t.points
    );
}
