//! The file tools (DESIGN.md §9): `read`, `write`, `edit`, `ls`, `glob`, `grep`.
//!
//! Every path a model gives goes through [`Workspace::resolve`], so `..`, absolute paths,
//! symlinks that lead out, loops and the runtime's own state are refused with
//! `FS_OUTSIDE_WORKSPACE` before anything is opened. Then every open, create, rename and
//! directory listing goes through a handle on the workspace root (`Workspace::open`) or on a
//! directory opened through it, following no symlink: a directory swapped for a symlink after
//! the check makes the call fail (`FS_OUTSIDE_WORKSPACE`), never read or write outside, and the
//! path a result or side effect names is the one really opened. Walks (`glob`, `grep`) never
//! follow symlinks, never descend into the state directories or `.git`, honour `.gitignore` and
//! `.ignore` files inside the workspace (and none outside it), and stop between files when the
//! call is cancelled.
//!
//! Edits are optimistic: `read` records the sha256 of the whole file it saw; `edit` (and a
//! `write` over a file this session read) fails with `FS_STALE_VERSION` when the file's
//! current hash differs, so a model never overwrites changes it has not seen. Writes are
//! atomic (a temporary file in the same directory, fsynced, then renamed over the target) and
//! confirm `fs/write {path, before, after}` so the journal can tell what changed.
//!
//! All file system work runs on tokio's blocking pool, never on the executor.

use crate::args::Args;
use crate::code::ErrorCode;
use crate::event::Resources;
use crate::tool::{Tool, ToolError};
use crate::tools::beneath::is_symlink_refusal;
use crate::tools::workspace::Workspace;
use rustix::fd::OwnedFd;
use rustix::fs::{FileType, Mode, OFlags, Stat};
use serde_json::{json, Value};
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

mod list;
mod read;
mod walk;
mod write;

pub use list::{GlobTool, GrepTool, LsTool};
pub use read::ReadTool;
pub use write::{EditTool, WriteTool};

/// Most bytes of text `read` returns in one call (a larger selection is refused: read a range
/// with `offset`/`limit`). The file itself may be larger: it is streamed to hash it.
pub const READ_BYTES_MAX: usize = 16 << 20;
/// Largest file `edit` loads, in bytes.
pub const EDIT_BYTES_MAX: u64 = 16 << 20;
/// Most entries `ls` lists.
pub const LS_ENTRIES_MAX: usize = 10_000;
/// Most paths `glob` returns (the rest are counted, not shown).
pub const GLOB_RESULTS_MAX: usize = 1_000;
/// Most matching lines `grep` returns.
pub const GREP_MATCHES_MAX: usize = 10_000;
/// Most bytes of output `grep` returns.
pub const GREP_OUTPUT_BYTES_MAX: usize = 1 << 20;
/// Files larger than this many bytes are skipped by `grep` (and counted).
pub const GREP_FILE_BYTES_MAX: u64 = 16 << 20;
/// A matching line longer than this many bytes is cut (minified files would flood the output).
pub const GREP_LINE_BYTES_MAX: usize = 1_000;
/// Most bytes a compiled `grep` regex may take (regex's own size limit).
pub const GREP_REGEX_BYTES_MAX: usize = 10 << 20;
/// Bytes read at a time when streaming a file.
const CHUNK_BYTES: usize = 64 << 10;

/// All six file tools, confined to `ws`.
pub fn file_tools(ws: Arc<Workspace>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ReadTool::new(ws.clone())),
        Arc::new(WriteTool::new(ws.clone())),
        Arc::new(EditTool::new(ws.clone())),
        Arc::new(LsTool::new(ws.clone())),
        Arc::new(GlobTool::new(ws.clone())),
        Arc::new(GrepTool::new(ws)),
    ]
}

// ---------------------------------------------------------------------------------------------
// Helpers shared by the tools.

fn failed(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::ToolFailed, message)
}

fn aborted() -> ToolError {
    ToolError::new(ErrorCode::Aborted, "cancelled")
}

fn stale(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::FsStaleVersion, message)
}

/// A failed file system operation on `rel`, said once: the path, then what went wrong (an
/// `io::Error` from a handle-relative call names no path of its own).
fn io_failed(what: &str, rel: &str, e: io::Error) -> ToolError {
    if is_symlink_refusal(&e) {
        return ToolError::new(
            ErrorCode::FsOutsideWorkspace,
            format!(
                "{rel} changed while it was opened: a symlink appeared in its path (refused; \
                 nothing outside the workspace was touched)"
            ),
        );
    }
    if e.kind() == io::ErrorKind::NotFound {
        failed(format!("{rel} does not exist"))
    } else if e.raw_os_error() == Some(rustix::io::Errno::NAMETOOLONG.raw_os_error()) {
        failed(format!(
            "cannot {what} {rel}: path too long for the file system ({e})"
        ))
    } else {
        failed(format!("cannot {what} {rel}: {e}"))
    }
}

/// Flags of every open for reading: `O_NONBLOCK` so a FIFO cannot block the open itself (it
/// is refused right after, by its type; regular files ignore the flag).
const READ_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK);

/// An opened file, what kind it is, and its metadata (taken from the handle, so it describes
/// what was opened, not whatever the name points at now).
struct Opened {
    file: File,
    kind: FileType,
    stat: Stat,
}

/// The result of an open on `rel`, with its type; errors said as `io_failed` says them.
fn opened(fd: io::Result<OwnedFd>, what: &str, rel: &str) -> Result<Opened, ToolError> {
    let file = File::from(fd.map_err(|e| io_failed(what, rel, e))?);
    let stat = rustix::fs::fstat(&file).map_err(|e| io_failed("inspect", rel, e.into()))?;
    Ok(Opened {
        file,
        kind: FileType::from_raw_mode(stat.st_mode),
        stat,
    })
}

/// Opens `absolute` (resolved) for reading, through the workspace root's handle.
fn open_read(ws: &Workspace, absolute: &Path, what: &str, rel: &str) -> Result<Opened, ToolError> {
    opened(ws.open(absolute, READ_FLAGS, Mode::empty()), what, rel)
}

/// The workspace-relative form of an absolute path, as text (`.` for the root).
fn shown(ws: &Workspace, absolute: &Path) -> String {
    let rel = ws.relative(absolute).to_string_lossy().into_owned();
    if rel.is_empty() {
        ".".to_owned()
    } else {
        rel
    }
}

/// A required string argument (the schema already demands it; this only guards the type).
fn required_str(args: &Args, key: &str) -> Result<String, ToolError> {
    args.str(key)
        .map(str::to_owned)
        .ok_or_else(|| failed(format!("argument {key:?} must be a string")))
}

fn optional_str(args: &Args, key: &str) -> Result<Option<String>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(failed(format!("argument {key:?} must be a string"))),
    }
}

fn optional_count(args: &Args, key: &str) -> Result<Option<u64>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => Ok(Some(n)),
            _ => Err(failed(format!(
                "argument {key:?} must be an integer of at least 1"
            ))),
        },
    }
}

/// The path a resource names for the scheduler's path locks: the resolved workspace-relative
/// form, so `a.txt`, `./a.txt` and a symlink to it inside the workspace lock the same path. A
/// path that does not resolve is reported as given (its call will fail before touching
/// anything).
fn resource_path(ws: &Workspace, path: &str) -> String {
    match ws.resolve(path) {
        Ok(absolute) => shown(ws, &absolute),
        Err(_) => path.to_owned(),
    }
}

#[derive(Clone, Copy)]
enum Access {
    Read,
    Write,
}

/// What a file tool declares it touches: its one path, resolved, read or written.
fn path_resources(ws: &Workspace, path: Option<&str>, access: Access) -> Resources {
    let paths: Vec<String> = path.map(|p| vec![resource_path(ws, p)]).unwrap_or_default();
    match access {
        Access::Read => Resources {
            reads: paths,
            ..Resources::default()
        },
        Access::Write => Resources {
            writes: paths,
            ..Resources::default()
        },
    }
}

/// Runs blocking file system work on tokio's blocking pool. A panic in it is re-raised so the
/// runtime reports `TOOL_PANICKED`.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(failed(format!("the file system task did not finish: {e}"))),
    }
}

fn schema(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}
