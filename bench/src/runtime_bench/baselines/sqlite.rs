//! SQLite (bundled) in WAL mode with synchronous=FULL: each commit fsyncs the WAL. One
//! transaction per record, or (`per_call`) one per call's six records.

use super::{call_events, now_ms};
use crate::runtime_bench::measured::Measured;
use crate::BoxError;
use runtime::event::{Event, Record};
use std::path::Path;
use std::time::{Duration, Instant};

const INSERT: &str =
    "INSERT INTO events (seq, at_ms, kind, call_id, body) VALUES (?1, ?2, ?3, ?4, ?5)";

pub(in crate::runtime_bench) fn run(
    dir: &Path,
    per_call: bool,
    time: Duration,
) -> Result<Measured, BoxError> {
    let mut conn = open(dir)?;
    let (mut seq, mut calls) = (1u64, 0u64);
    let start = Instant::now();
    while start.elapsed() < time {
        calls += 1;
        let events = call_events(calls, seq);
        if per_call {
            let tx = conn.transaction()?;
            {
                let mut stmt = tx.prepare_cached(INSERT)?;
                for event in events {
                    put(&mut stmt, seq, event)?;
                    seq += 1;
                }
            }
            tx.commit()?;
        } else {
            // Autocommit: every insert is a transaction of its own.
            let mut stmt = conn.prepare_cached(INSERT)?;
            for event in events {
                put(&mut stmt, seq, event)?;
                seq += 1;
            }
        }
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
