//! SQLite (bundled) in WAL mode with synchronous=FULL: each commit fsyncs the WAL. One
//! transaction per record, one per call's six records, or one per sync point of the runtime's
//! own plan (see [`Commit::AtStarted`]).

use super::{call_events, now_ms};
use crate::runtime_bench::measured::Measured;
use crate::BoxError;
use runtime::event::{Event, Record};
use std::path::Path;
use std::time::{Duration, Instant};

const INSERT: &str =
    "INSERT INTO events (seq, at_ms, kind, call_id, body) VALUES (?1, ?2, ?3, ?4, ?5)";

/// Where the transactions end.
#[derive(Clone, Copy)]
pub(in crate::runtime_bench) enum Commit {
    /// Autocommit: every record a transaction of its own.
    PerRecord,
    /// One transaction per call's six records, committed after `committed`.
    PerCall,
    /// The runtime's plan for a step of one call (`runtime/src/pipeline.rs`, `write_ahead`):
    /// one transaction committed at each `started` (durable before the body would run),
    /// holding every record since the previous commit (the previous call's `settled` and
    /// `committed`, this call's `received` to `started`). The last call's two are committed at
    /// the end, inside the timed window, as the runtime's `end_turn` syncs its last step's.
    AtStarted,
}

pub(in crate::runtime_bench) fn run(
    dir: &Path,
    commit: Commit,
    time: Duration,
) -> Result<Measured, BoxError> {
    let mut conn = open(dir)?;
    let (mut seq, mut calls) = (1u64, 0u64);
    if let Commit::AtStarted = commit {
        conn.execute_batch("BEGIN")?;
    }
    let start = Instant::now();
    while start.elapsed() < time {
        calls += 1;
        let events = call_events(calls, seq);
        match commit {
            Commit::PerCall => {
                let tx = conn.transaction()?;
                {
                    let mut stmt = tx.prepare_cached(INSERT)?;
                    for event in events {
                        put(&mut stmt, seq, event)?;
                        seq += 1;
                    }
                }
                tx.commit()?;
            }
            Commit::PerRecord => {
                let mut stmt = conn.prepare_cached(INSERT)?;
                for event in events {
                    put(&mut stmt, seq, event)?;
                    seq += 1;
                }
            }
            Commit::AtStarted => {
                // A transaction stays open across the calls: BEGIN and COMMIT by hand, since a
                // `rusqlite::Transaction` would borrow the connection across iterations.
                for event in events {
                    let started = matches!(event, Event::Started(_));
                    put(&mut conn.prepare_cached(INSERT)?, seq, event)?;
                    if started {
                        conn.execute_batch("COMMIT; BEGIN")?;
                    }
                    seq += 1;
                }
            }
        }
    }
    if let Commit::AtStarted = commit {
        conn.execute_batch("COMMIT")?;
    }
    let seconds = start.elapsed().as_secs_f64();
    conn.close().map_err(|(_, e)| e)?;
    Ok(Measured::calls_only(calls, seconds))
}

/// A new database with the events table, refused unless SQLite really is in WAL mode with
/// synchronous=FULL (a figure for weaker settings would flatter it).
fn open(dir: &Path) -> Result<rusqlite::Connection, BoxError> {
    let conn = rusqlite::Connection::open(dir.join("session.sqlite"))?;
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    conn.execute_batch(
        "PRAGMA synchronous=FULL;
         CREATE TABLE events (
             seq INTEGER PRIMARY KEY,
             at_ms INTEGER NOT NULL,
             kind TEXT NOT NULL,
             call_id TEXT,
             body TEXT NOT NULL
         );",
    )?;
    let synchronous: i64 = conn.query_row("PRAGMA synchronous", [], |r| r.get(0))?;
    if mode != "wal" || synchronous != 2 {
        return Err(format!("SQLite is in {mode} mode, synchronous={synchronous}").into());
    }
    Ok(conn)
}

fn put(stmt: &mut rusqlite::CachedStatement<'_>, seq: u64, event: Event) -> Result<(), BoxError> {
    let at_ms = now_ms();
    let kind = event.kind();
    let call_id = event.call().map(|c| c.call_id.clone());
    let body = serde_json::to_string(&Record { at_ms, event })?;
    stmt.execute(rusqlite::params![
        seq as i64,
        at_ms as i64,
        kind,
        call_id,
        body
    ])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every call's six rows are committed, the last call's two by the final commit.
    #[test]
    fn every_plan_commits_six_rows_per_call() {
        for commit in [Commit::PerRecord, Commit::PerCall, Commit::AtStarted] {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let m = run(dir.path(), commit, Duration::from_millis(30)).expect("the run");
            let conn = rusqlite::Connection::open(dir.path().join("session.sqlite"))
                .expect("the database");
            let rows: i64 = conn
                .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
                .expect("the count");
            assert!(m.calls > 0);
            assert_eq!(rows as u64, 6 * m.calls);
        }
    }
}
