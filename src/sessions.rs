//! `tooljournal sessions`: what lives under the state directory, read from each journal.

use crate::run::state_root;
use crate::CliError;
use journal::{FsStorage, Limits, Reader, Storage};
use runtime::event::Record;
use runtime::replay::Replayer;
use runtime::state::CallState;
use std::sync::Arc;

struct Row {
    id: String,
    dir: String,
    workspace: String,
    started_ms: u64,
    last_ms: u64,
    status: &'static str,
    calls: usize,
    orphans: usize,
    note: String,
}

fn read_session(dir: &std::path::Path) -> Row {
    let mut row = Row {
        id: "?".into(),
        dir: dir.display().to_string(),
        workspace: String::new(),
        started_ms: 0,
        last_ms: 0,
        status: "unreadable",
        calls: 0,
        orphans: 0,
        note: String::new(),
    };
    let storage = match FsStorage::open(dir) {
        Ok(s) => s,
        Err(e) => {
            row.note = e.to_string();
            return row;
        }
    };
    // A live writer holds the lock; asking creates and writes nothing (a listing must not).
    let running = matches!(storage.writer_lock_held(), Ok(true));
    let storage: Arc<dyn Storage> = Arc::new(storage);
    let mut replayer = Replayer::new();
    let reader = match Reader::open(storage, Limits::default()) {
        Ok(r) => r,
        Err(e) => {
            row.note = e.to_string();
            return row;
        }
    };
    for record in reader {
        let applied = record.map_err(|e| e.to_string()).and_then(|r| {
            if let Ok(decoded) = r.decode::<Record>() {
                if row.started_ms == 0 {
                    row.started_ms = decoded.at_ms;
                }
                row.last_ms = decoded.at_ms;
            }
            replayer.apply(&r).map_err(|e| e.to_string())
        });
        if let Err(e) = applied {
            row.note = e;
            break;
        }
    }
    let replay = replayer.finish();
    if let Some(open) = &replay.open {
        row.id = open.session_id.clone();
        row.workspace = open.workspace.clone();
    }
    row.calls = replay.calls().count();
    row.orphans = replay
        .calls()
        .filter(|c| c.state != CallState::Committed)
        .count();
    row.status = if running {
        "running"
    } else if replay.closed {
        "finished"
    } else if replay.open.is_none() && row.note.is_empty() {
        // The directory was made, but the session failed before `session/open` (an MCP
        // server that did not start, say): there is nothing to recover or resume.
        "never started"
    } else {
        "interrupted"
    };
    row
}

pub fn list(json: bool) -> Result<(), CliError> {
    let root = state_root()?;
    let mut dirs: Vec<_> = match std::fs::read_dir(&root) {
        Ok(entries) => entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(CliError::Failed(format!("{}: {e}", root.display()))),
    };
    dirs.sort();
    let rows: Vec<Row> = dirs.iter().map(|d| read_session(d)).collect();
    if json {
        for r in &rows {
            outln!(
                "{}",
                serde_json::json!({
                    "id": r.id, "journal": r.dir, "workspace": r.workspace,
                    "started_ms": r.started_ms, "last_activity_ms": r.last_ms,
                    "status": r.status, "calls": r.calls, "orphans": r.orphans, "note": r.note,
                })
            )?;
        }
        return Ok(());
    }
    outln!("sessions under {}", root.display())?;
    outln!(
        "{:<38} {:<12} {:>6} {:>8}  {:<14} {:<14} workspace",
        "id",
        "status",
        "calls",
        "orphans",
        "started",
        "last activity"
    )?;
    for r in &rows {
        outln!(
            "{:<38} {:<12} {:>6} {:>8}  {:<14} {:<14} {}{}",
            r.id,
            r.status,
            r.calls,
            r.orphans,
            r.started_ms,
            r.last_ms,
            r.workspace,
            if r.note.is_empty() {
                String::new()
            } else {
                format!("  ({})", r.note)
            }
        )?;
    }
    Ok(())
}
