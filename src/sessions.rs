//! `tooljournal sessions`: what lives under the state directory (or another directory of
//! journals, or a PostgreSQL store), read from each journal.

use crate::location::state_root;
use crate::CliError;
use journal::{Limits, Reader};
use runtime::event::Record;
use runtime::replay::Replayer;
use runtime::state::CallState;

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
        dir: crate::location::shown(dir),
        workspace: String::new(),
        started_ms: 0,
        last_ms: 0,
        status: "unreadable",
        calls: 0,
        orphans: 0,
        note: String::new(),
    };
    let backend = match crate::location::backend(dir) {
        Ok(b) => b,
        Err(e) => {
            row.note = e.to_string();
            return row;
        }
    };
    // A live writer holds the lock or the lease; asking creates and writes nothing (a listing
    // must not).
    let running = backend.writer_state().is_ok_and(|w| w.live());
    let mut replayer = Replayer::new();
    let reader = match Reader::open_backend(&backend, Limits::default()) {
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

/// The journals in a PostgreSQL store, each as its session's URL.
fn store_sessions(url: &str) -> Result<Vec<std::path::PathBuf>, CliError> {
    let mut sessions: Vec<_> = pg::sessions(url)?
        .into_iter()
        .map(|s| std::path::PathBuf::from(pg::session_url(url, &s.session)))
        .collect();
    sessions.sort();
    Ok(sessions)
}

pub fn list(json: bool, store: Option<&std::path::Path>) -> Result<(), CliError> {
    let root = match store {
        Some(store) => {
            crate::location::check(store)?;
            store.to_path_buf()
        }
        None => state_root()?,
    };
    let mut dirs: Vec<_> = match store.and_then(crate::location::url) {
        Some(url) => store_sessions(url)?,
        None => match std::fs::read_dir(&root) {
            Ok(entries) => entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                return Err(CliError::Failed(format!(
                    "{}: {e}",
                    crate::location::shown(&root)
                )))
            }
        },
    };
    dirs.sort();
    let rows: Vec<Row> = dirs.iter().map(|d| read_session(d)).collect();
    if json {
        for r in &rows {
            dataln!(
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
    outln!("sessions under {}", crate::location::shown(&root))?;
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
