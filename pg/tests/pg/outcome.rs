//! Appends whose connection is lost mid-way (backends terminated, the server crashed and
//! restarted): each append either returned Ok and its rows are stored exactly once, or returned
//! an error and its rows are absent or the error says the outcome is unknown. Each test has a
//! server of its own, since it kills connections.

use crate::common;

use common::{refs, rows, stored};
use journal::{RecordStore, RecordWriter, Takeover};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tooljournal_pg::testing::TempPostgres;
use tooljournal_pg::PgStore;

/// One append's outcome: its seqs and crcs, and what it returned.
struct Attempt {
    first: u64,
    crcs: Vec<u32>,
    result: Result<(), String>,
}

/// Appends batches until `stop`, continuing after an error from what is stored (as recovery
/// would); returns every attempt.
fn append_until(
    server: &TempPostgres,
    session: &str,
    writer: &mut dyn RecordWriter,
    stop: &AtomicBool,
    batch_rows: u64,
) -> Vec<Attempt> {
    let mut attempts = Vec::new();
    let mut next = 1;
    while !stop.load(Ordering::Relaxed) {
        let batch = rows(next, batch_rows, 512);
        let result = writer
            .append(&refs(&batch), true)
            .map_err(|e| e.to_string());
        attempts.push(Attempt {
            first: next,
            crcs: batch.iter().map(|r| r.1).collect(),
            result: result.clone(),
        });
        next = match result {
            Ok(()) => next + batch_rows,
            // The server may still be coming back: wait for it like recovery would.
            Err(_) => wait_stored(server, session) + 1,
        };
    }
    attempts
}

fn wait_stored(server: &TempPostgres, session: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = std::panic::catch_unwind(|| stored(server, "postgres", session).len());
        match got {
            Ok(n) => return n as u64,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Err(_) => panic!("the test server did not come back"),
        }
    }
}

/// Every Ok append's rows are there once with its crcs; an error's rows are absent unless it
/// said the outcome is unknown; seqs run 1..=n with no duplicate.
fn check(server: &TempPostgres, session: &str, attempts: &[Attempt]) -> (usize, usize) {
    let all = stored(server, "postgres", session);
    for (i, (seq, _, _)) in all.iter().enumerate() {
        assert_eq!(*seq, i as i64 + 1, "seqs are contiguous, no duplicate");
    }
    let (mut ok, mut failed) = (0, 0);
    for a in attempts {
        let slice: Vec<i64> = all
            .iter()
            .filter(|r| r.0 >= a.first as i64 && r.0 < (a.first as usize + a.crcs.len()) as i64)
            .map(|r| r.1)
            .collect();
        match &a.result {
            Ok(()) => {
                ok += 1;
                let want: Vec<i64> = a.crcs.iter().map(|&c| i64::from(c)).collect();
                assert_eq!(slice, want, "append from seq {} returned Ok", a.first);
            }
            Err(e) => {
                failed += 1;
                let ours = slice.iter().zip(&a.crcs).all(|(s, c)| *s == i64::from(*c));
                assert!(
                    e.contains("unknown") || slice.is_empty() || !ours,
                    "append from seq {} failed ({e}) but its rows are stored",
                    a.first
                );
            }
        }
    }
    (ok, failed)
}

fn writer_on(server: &TempPostgres, session: &str) -> Box<dyn RecordWriter> {
    let store = PgStore::open(&server.url(session)).unwrap();
    let mut taken = store.take(Takeover::Refuse).unwrap();
    taken.writer.create(common::META).unwrap();
    taken.writer
}

#[test]
fn terminated_backends_between_and_during_appends_lose_or_double_nothing() {
    let server = Arc::new(TempPostgres::start());
    let mut writer = writer_on(&server, "kill");
    let stop = Arc::new(AtomicBool::new(false));
    let appender = {
        let (server, stop) = (server.clone(), stop.clone());
        std::thread::spawn(move || append_until(&server, "kill", writer.as_mut(), &stop, 300))
    };
    let mut terminated = 0;
    for i in 0..40 {
        std::thread::sleep(Duration::from_millis(20 + (i % 4) * 15));
        terminated += server.terminate_backends();
    }
    stop.store(true, Ordering::Relaxed);
    let attempts = appender.join().unwrap();
    assert!(
        terminated >= 20,
        "the writer's connections were terminated ({terminated})"
    );
    let (ok, _) = check(&server, "kill", &attempts);
    assert!(
        ok >= 10,
        "appends went on after terminations ({ok} Ok of {})",
        attempts.len()
    );
}

#[test]
fn a_server_crash_mid_session_loses_no_acknowledged_row_and_doubles_none() {
    let server = Arc::new(TempPostgres::start());
    let mut writer = writer_on(&server, "crash");
    let stop = Arc::new(AtomicBool::new(false));
    let appender = {
        let (server, stop) = (server.clone(), stop.clone());
        std::thread::spawn(move || append_until(&server, "crash", writer.as_mut(), &stop, 200))
    };
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(300));
        server.restart_immediate();
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let attempts = appender.join().unwrap();
    let (ok, _) = check(&server, "crash", &attempts);
    let store = PgStore::open(&server.url("crash")).unwrap();
    assert_eq!(
        store.holder().unwrap().map(|h| h.live()),
        Some(true),
        "lease held across crashes"
    );
    assert!(
        ok >= 3,
        "appends went on after the crashes ({ok} Ok of {})",
        attempts.len()
    );
}

/// The case a lost connection hides most: the COMMIT happened, its answer never came. A
/// synchronous standby that does not exist holds the COMMIT after it is done locally; the
/// backend is then terminated, so the client sees only a lost connection. The append must
/// find its rows and return Ok, with nothing stored twice.
#[test]
fn a_commit_whose_answer_was_lost_is_found_and_not_redone() {
    let server = TempPostgres::start();
    let mut writer = writer_on(&server, "lost-ack");
    writer.append(&refs(&rows(1, 5, 32)), true).unwrap();
    let mut admin = common::sql(&server, "postgres");
    let standby = |admin: &mut postgres::Client, names: &str| {
        let set = format!("ALTER SYSTEM SET synchronous_standby_names = '{names}'");
        admin.batch_execute(&set).unwrap();
        admin.batch_execute("SELECT pg_reload_conf()").unwrap();
    };
    standby(&mut admin, "nobody");
    std::thread::sleep(Duration::from_millis(200)); // The reload reaches the backends.
    let held = rows(6, 50, 32);
    let appender = std::thread::spawn(move || {
        let result = writer.append(&refs(&held), true);
        (result, writer)
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let waiting = loop {
        let pids: Vec<i32> = admin
            .query(
                "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        if !pids.is_empty() {
            break pids;
        }
        assert!(
            Instant::now() < deadline,
            "the append's COMMIT never waited for the standby"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // Terminated while waiting, the backend finishes its local commit, then the connection
    // ends with no answer for the client.
    for pid in waiting {
        admin
            .execute("SELECT pg_terminate_backend($1)", &[&pid])
            .unwrap();
    }
    let (result, mut writer) = appender.join().unwrap();
    result.expect("the append's rows were found committed");
    standby(&mut admin, "");
    let all = stored(&server, "postgres", "lost-ack");
    assert_eq!(all.len(), 55, "stored once");
    writer.append(&refs(&rows(56, 5, 32)), true).unwrap();
    assert_eq!(stored(&server, "postgres", "lost-ack").len(), 60);
}
