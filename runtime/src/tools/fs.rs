//! The file tools (DESIGN.md §9): `read`, `write`, `edit`, `ls`, `glob`, `grep`.
//!
//! Every path a model gives goes through [`Workspace::resolve`], so `..`, absolute paths,
//! symlinks that lead out, loops and the runtime's own state are refused with
//! `FS_OUTSIDE_WORKSPACE` before anything is opened. Walks (`glob`, `grep`) never follow
//! symlinks, never descend into the state directories or `.git`, honour `.gitignore` files
//! inside the workspace (and none outside it), and stop between files when the call is
//! cancelled.
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
use crate::event::{Resources, SideEffect};
use crate::tool::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use crate::tools::workspace::{sha256_hex, Workspace};
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::BinaryHeap;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

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

fn io_failed(what: &str, rel: &str, e: io::Error) -> ToolError {
    if e.kind() == io::ErrorKind::NotFound {
        failed(format!("{rel} does not exist"))
    } else {
        failed(format!("cannot {what} {rel}: {e}"))
    }
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

/// sha256 of a file's bytes, streamed; `None` when it does not exist.
fn hash_file(path: &Path) -> io::Result<Option<String>> {
    use sha2::Digest;
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut reader = BufReader::with_capacity(CHUNK_BYTES, file);
    let mut hasher = sha2::Sha256::new();
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        hasher.update(buf);
        let n = buf.len();
        reader.consume(n);
    }
    Ok(Some(hex::encode(hasher.finalize())))
}

/// Names temporary files uniquely within this process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Creates the missing directories above `target`, outermost first, and returns them (each a
/// side effect the journal should know about).
fn create_parents(ws: &Workspace, target: &Path) -> Result<Vec<SideEffect>, ToolError> {
    let Some(parent) = target.parent() else {
        return Ok(Vec::new());
    };
    let mut missing = Vec::new();
    let mut dir = parent;
    while fs::symlink_metadata(dir).is_err() {
        missing.push(dir.to_owned());
        match dir.parent() {
            Some(p) => dir = p,
            None => break,
        }
    }
    let mut effects = Vec::new();
    for dir in missing.into_iter().rev() {
        match fs::create_dir(&dir) {
            Ok(()) => effects.push(SideEffect::Other {
                kind: "fs/mkdir".into(),
                detail: shown(ws, &dir),
            }),
            // Another call created it meanwhile: fine.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {}
            Err(e) => {
                let mut err = io_failed("create directory", &shown(ws, &dir), e);
                err.side_effects = effects;
                return Err(err);
            }
        }
    }
    Ok(effects)
}

/// Replaces `target` with `bytes` atomically: a temporary file in the same directory, written
/// and fsynced, renamed over the target, then the directory fsynced. Keeps an existing file's
/// permissions. Returns the directories it had to create. If `cancel` fires before the rename,
/// nothing is replaced and the call is `ABORTED`.
fn write_atomic(
    ws: &Workspace,
    target: &Path,
    bytes: &[u8],
    cancel: &CancellationToken,
) -> Result<Vec<SideEffect>, ToolError> {
    let rel = shown(ws, target);
    let effects = create_parents(ws, target)?;
    let with_effects = |mut e: ToolError| {
        e.side_effects.splice(0..0, effects.iter().cloned());
        e
    };
    let parent = target.parent().unwrap_or(ws.root());
    let temp = parent.join(format!(
        ".tooljournal-tmp-{}-{}",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let permissions = fs::metadata(target).ok().map(|m| m.permissions());
    let attempt = (|| -> io::Result<bool> {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.write_all(bytes)?;
        if let Some(p) = permissions {
            file.set_permissions(p)?;
        }
        file.sync_all()?;
        drop(file);
        if cancel.is_cancelled() {
            return Ok(false);
        }
        fs::rename(&temp, target)?;
        Ok(true)
    })();
    match attempt {
        Ok(true) => {
            // Make the rename durable; a directory that cannot be fsynced (some file systems)
            // still has the new file.
            if let Ok(dir) = File::open(parent) {
                let _ = dir.sync_all();
            }
            Ok(effects)
        }
        Ok(false) => {
            let _ = fs::remove_file(&temp);
            Err(with_effects(aborted()))
        }
        Err(e) => {
            let _ = fs::remove_file(&temp);
            Err(with_effects(io_failed("write", &rel, e)))
        }
    }
}

/// `value` with the workspace-relative path of every file a walk below `base` visits, in file
/// name order. Walks from the workspace root down to `base` so `.gitignore` files between them
/// apply (none outside the workspace is read; the global git excludes neither), pruning `.git`,
/// the runtime's state directories and everything off the way to `base`. Symlinks are reported
/// as entries but never followed. A `base` that is itself ignored is walked on its own (it was
/// asked for by name). Returns how many entries could not be read.
fn walk(
    ws: &Arc<Workspace>,
    base: &Path,
    cancel: &CancellationToken,
    mut visit: impl FnMut(&ignore::DirEntry) -> ControlFlow<()>,
) -> Result<u64, ToolError> {
    let build = |start: &Path| {
        let ws = ws.clone();
        let base = base.to_owned();
        let mut builder = ignore::WalkBuilder::new(start);
        builder
            .follow_links(false)
            .hidden(false)
            .parents(false)
            .git_global(false)
            .require_git(false)
            .sort_by_file_name(|a, b| a.cmp(b))
            .filter_entry(move |e| {
                let p = e.path();
                if e.depth() > 0 && e.file_name() == ".git" {
                    return false;
                }
                !ws.is_forbidden(p) && (base.starts_with(p) || p.starts_with(&base))
            });
        builder.build()
    };
    let mut unreadable = 0;
    let mut saw_base = false;
    let root = ws.root().to_owned();
    for start in [root.as_path(), base] {
        if saw_base {
            break;
        }
        for entry in build(start) {
            if cancel.is_cancelled() {
                return Err(aborted());
            }
            let entry = match entry {
                Ok(e) => e,
                Err(_) => {
                    unreadable += 1;
                    continue;
                }
            };
            if entry.path() == base {
                saw_base = true;
            }
            if entry.path().starts_with(base) && visit(&entry).is_break() {
                return Ok(unreadable);
            }
        }
    }
    Ok(unreadable)
}

fn schema(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

// ---------------------------------------------------------------------------------------------
// read

/// `read {path, offset?, limit?}`: a text file's content (lines `offset..offset+limit`, from 1).
pub struct ReadTool {
    ws: Arc<Workspace>,
}

impl ReadTool {
    pub fn new(ws: Arc<Workspace>) -> ReadTool {
        ReadTool { ws }
    }
}

/// What reading a file produced.
struct ReadText {
    text: String,
    lines: u64,
    sha256: String,
}

/// Streams `path` once: hashes all of it, counts its lines, keeps the selected ones.
fn read_text(
    path: &Path,
    rel: &str,
    offset: u64,
    limit: Option<u64>,
    cancel: &CancellationToken,
) -> Result<ReadText, ToolError> {
    use sha2::Digest;
    let meta = fs::metadata(path).map_err(|e| io_failed("read", rel, e))?;
    if meta.is_dir() {
        return Err(failed(format!("{rel} is a directory; use ls to list it")));
    }
    if !meta.is_file() {
        // A FIFO or a device would block or never end.
        return Err(failed(format!("{rel} is not a regular file")));
    }
    let file = File::open(path).map_err(|e| io_failed("read", rel, e))?;
    let mut reader = BufReader::with_capacity(CHUNK_BYTES, file);
    let mut hasher = sha2::Sha256::new();
    let in_range = |line: u64| line >= offset && limit.is_none_or(|l| line - offset < l);
    let mut out: Vec<u8> = Vec::new();
    // The line the next byte belongs to, and whether it has begun.
    let mut line: u64 = 1;
    let mut line_begun = false;
    loop {
        if cancel.is_cancelled() {
            return Err(aborted());
        }
        let buf = reader.fill_buf().map_err(|e| io_failed("read", rel, e))?;
        if buf.is_empty() {
            break;
        }
        if buf.contains(&0) {
            return Err(failed(format!("{rel} is a binary file")));
        }
        hasher.update(buf);
        let mut rest = buf;
        while !rest.is_empty() {
            let (piece, ends_line) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..=i], true),
                None => (rest, false),
            };
            if in_range(line) {
                out.extend_from_slice(piece);
            }
            rest = &rest[piece.len()..];
            if ends_line {
                line += 1;
                line_begun = false;
            } else {
                line_begun = true;
            }
        }
        if out.len() > READ_BYTES_MAX {
            return Err(failed(format!(
                "the selection is larger than {READ_BYTES_MAX} bytes; \
                 read a smaller range with offset and limit"
            )));
        }
        let n = buf.len();
        reader.consume(n);
    }
    let lines = line - 1 + u64::from(line_begun);
    if offset > lines.max(1) {
        return Err(failed(format!(
            "offset {offset} is past the end of {rel} ({lines} lines)"
        )));
    }
    let text = String::from_utf8(out)
        .map_err(|_| failed(format!("{rel} is a binary file (not UTF-8 text)")))?;
    Ok(ReadText {
        text,
        lines,
        sha256: hex::encode(hasher.finalize()),
    })
}

impl Tool for ReadTool {
    fn name(&self) -> &str {
        "read"
    }
    fn description(&self) -> &str {
        "Read a UTF-8 text file in the workspace. `path` is relative to the workspace; `offset` \
         (first line, from 1) and `limit` (number of lines) select a range. Records the version \
         read, which `edit` requires."
    }
    fn input_schema(&self) -> Value {
        schema(
            json!({
                "path": {"type": "string", "minLength": 1, "description": "relative to the workspace"},
                "offset": {"type": "integer", "minimum": 1, "description": "first line to return, from 1"},
                "limit": {"type": "integer", "minimum": 1, "description": "most lines to return"},
            }),
            &["path"],
        )
    }
    fn output_schema(&self) -> Option<Value> {
        Some(schema(
            json!({
                "path": {"type": "string"},
                "lines": {"type": "integer", "minimum": 0},
                "sha256": {"type": "string"},
            }),
            &["path", "lines", "sha256"],
        ))
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn is_concurrency_safe(&self, _args: &Args) -> bool {
        true
    }
    fn is_retry_safe(&self) -> bool {
        true
    }
    fn resources(&self, args: &Args) -> Resources {
        path_resources(&self.ws, args.str("path"), Access::Read)
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        let ws = self.ws.clone();
        let cancel = ctx.cancel().clone();
        Box::pin(async move {
            let path = required_str(&args, "path")?;
            let offset = optional_count(&args, "offset")?.unwrap_or(1);
            let limit = optional_count(&args, "limit")?;
            let absolute = ws.resolve(&path)?;
            if cancel.is_cancelled() {
                return Err(aborted());
            }
            blocking(move || {
                let rel = shown(&ws, &absolute);
                let read = read_text(&absolute, &rel, offset, limit, &cancel)?;
                ws.record_read(&absolute, read.sha256.clone());
                Ok(ToolOutput::text(read.text).with_value(json!({
                    "path": rel,
                    "lines": read.lines,
                    "sha256": read.sha256,
                })))
            })
            .await
        })
    }
}

// ---------------------------------------------------------------------------------------------
// write

/// `write {path, content}`: creates or replaces a file, atomically.
pub struct WriteTool {
    ws: Arc<Workspace>,
}

impl WriteTool {
    pub fn new(ws: Arc<Workspace>) -> WriteTool {
        WriteTool { ws }
    }
}

/// Refuses to replace a directory or a special file.
fn check_writable(path: &Path, rel: &str) -> Result<bool, ToolError> {
    match fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(failed(format!("{rel} is a directory"))),
        Ok(m) if !m.is_file() => Err(failed(format!("{rel} is not a regular file"))),
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_failed("inspect", rel, e)),
    }
}

impl Tool for WriteTool {
    fn name(&self) -> &str {
        "write"
    }
    fn description(&self) -> &str {
        "Create or replace a file in the workspace with `content` (parent directories are \
         created). Fails with FS_STALE_VERSION if this session read the file and it changed \
         since."
    }
    fn input_schema(&self) -> Value {
        schema(
            json!({
                "path": {"type": "string", "minLength": 1, "description": "relative to the workspace"},
                "content": {"type": "string", "description": "the whole new content"},
            }),
            &["path", "content"],
        )
    }
    fn output_schema(&self) -> Option<Value> {
        Some(schema(
            json!({
                "path": {"type": "string"},
                "bytes": {"type": "integer", "minimum": 0},
                "before_sha256": {"type": ["string", "null"]},
                "after_sha256": {"type": "string"},
            }),
            &["path", "bytes", "before_sha256", "after_sha256"],
        ))
    }
    /// True: writes to different paths may overlap. Writes to the same path (or a read and a
    /// write of it) are still serialised, in model order, by the scheduler's path locks, since
    /// `resources` names the resolved path as written.
    fn is_concurrency_safe(&self, _args: &Args) -> bool {
        true
    }
    fn resources(&self, args: &Args) -> Resources {
        path_resources(&self.ws, args.str("path"), Access::Write)
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        let ws = self.ws.clone();
        let cancel = ctx.cancel().clone();
        Box::pin(async move {
            let path = required_str(&args, "path")?;
            let content = required_str(&args, "content")?;
            let absolute = ws.resolve(&path)?;
            if cancel.is_cancelled() {
                return Err(aborted());
            }
            blocking(move || {
                let rel = shown(&ws, &absolute);
                let before = if check_writable(&absolute, &rel)? {
                    hash_file(&absolute).map_err(|e| io_failed("read", &rel, e))?
                } else {
                    None
                };
                if let (Some(before), Some(seen)) = (&before, ws.last_read(&absolute)) {
                    if *before != seen {
                        return Err(stale(format!(
                            "{rel} changed since it was read; read it again before writing"
                        )));
                    }
                }
                let mut effects = write_atomic(&ws, &absolute, content.as_bytes(), &cancel)?;
                let after = sha256_hex(content.as_bytes());
                ws.record_read(&absolute, after.clone());
                effects.push(SideEffect::FsWrite {
                    path: rel.clone(),
                    before_sha256: before.clone(),
                    after_sha256: after.clone(),
                });
                let message = match before {
                    None => format!("created {rel} ({} bytes)", content.len()),
                    Some(_) => format!("wrote {} bytes to {rel}", content.len()),
                };
                let mut out = ToolOutput::text(message).with_value(json!({
                    "path": rel,
                    "bytes": content.len(),
                    "before_sha256": before,
                    "after_sha256": after,
                }));
                out.side_effects = effects;
                Ok(out)
            })
            .await
        })
    }
}

// ---------------------------------------------------------------------------------------------
// edit

/// `edit {path, old_string, new_string, replace_all?}`: replaces text in a file this session
/// read, if it has not changed since.
pub struct EditTool {
    ws: Arc<Workspace>,
}

impl EditTool {
    pub fn new(ws: Arc<Workspace>) -> EditTool {
        EditTool { ws }
    }
}

struct EditRequest {
    old: String,
    new: String,
    replace_all: bool,
}

fn edit_blocking(
    ws: &Workspace,
    absolute: &Path,
    request: EditRequest,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let rel = shown(ws, absolute);
    if !check_writable(absolute, &rel)? {
        return Err(failed(format!(
            "{rel} does not exist; use write to create it"
        )));
    }
    let Some(seen) = ws.last_read(absolute) else {
        return Err(stale(format!(
            "{rel} has not been read in this session; read it first"
        )));
    };
    let file = File::open(absolute).map_err(|e| io_failed("read", &rel, e))?;
    let mut bytes = Vec::new();
    file.take(EDIT_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_failed("read", &rel, e))?;
    if bytes.len() as u64 > EDIT_BYTES_MAX {
        return Err(failed(format!(
            "{rel} is larger than {EDIT_BYTES_MAX} bytes; too large to edit"
        )));
    }
    let before = sha256_hex(&bytes);
    if before != seen {
        return Err(stale(format!(
            "{rel} changed since it was read; read it again before editing"
        )));
    }
    if bytes.contains(&0) {
        return Err(failed(format!("{rel} is a binary file")));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| failed(format!("{rel} is a binary file (not UTF-8 text)")))?;
    let EditRequest {
        old,
        new,
        replace_all,
    } = request;
    if old.is_empty() {
        return Err(failed("old_string is empty"));
    }
    if old == new {
        return Err(failed(
            "old_string and new_string are the same; nothing to change",
        ));
    }
    let count = text.matches(old.as_str()).count();
    let Some(first) = text.find(old.as_str()) else {
        return Err(failed(format!("old_string was not found in {rel}")));
    };
    if count > 1 && !replace_all {
        return Err(failed(format!(
            "old_string occurs {count} times in {rel}; include more context to make it unique, \
             or set replace_all"
        )));
    }
    let first_line = text[..first].matches('\n').count() + 1;
    let edited = if replace_all {
        text.replace(old.as_str(), &new)
    } else {
        text.replacen(old.as_str(), &new, 1)
    };
    let mut effects = write_atomic(ws, absolute, edited.as_bytes(), cancel)?;
    let after = sha256_hex(edited.as_bytes());
    ws.record_read(absolute, after.clone());
    effects.push(SideEffect::FsWrite {
        path: rel.clone(),
        before_sha256: Some(before.clone()),
        after_sha256: after.clone(),
    });
    let plural = if count == 1 { "" } else { "s" };
    let mut out = ToolOutput::text(format!(
        "edited {rel}: {count} replacement{plural} (first at line {first_line})"
    ))
    .with_value(json!({
        "path": rel,
        "replacements": count,
        "before_sha256": before,
        "after_sha256": after,
    }));
    out.side_effects = effects;
    Ok(out)
}

impl Tool for EditTool {
    fn name(&self) -> &str {
        "edit"
    }
    fn description(&self) -> &str {
        "Replace `old_string` with `new_string` in a file this session has read. `old_string` \
         must occur exactly once unless `replace_all` is true. Fails with FS_STALE_VERSION if \
         the file changed since it was read (read it again)."
    }
    fn input_schema(&self) -> Value {
        schema(
            json!({
                "path": {"type": "string", "minLength": 1, "description": "relative to the workspace"},
                "old_string": {"type": "string", "minLength": 1, "description": "exact text to replace"},
                "new_string": {"type": "string", "description": "the replacement"},
                "replace_all": {"type": "boolean", "description": "replace every occurrence (default false)"},
            }),
            &["path", "old_string", "new_string"],
        )
    }
    fn output_schema(&self) -> Option<Value> {
        Some(schema(
            json!({
                "path": {"type": "string"},
                "replacements": {"type": "integer", "minimum": 1},
                "before_sha256": {"type": "string"},
                "after_sha256": {"type": "string"},
            }),
            &["path", "replacements", "before_sha256", "after_sha256"],
        ))
    }
    /// True for the same reason as `write`: the path lock (`resources.writes`) serialises
    /// calls on the same file; edits of different files may overlap.
    fn is_concurrency_safe(&self, _args: &Args) -> bool {
        true
    }
    fn resources(&self, args: &Args) -> Resources {
        path_resources(&self.ws, args.str("path"), Access::Write)
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        let ws = self.ws.clone();
        let cancel = ctx.cancel().clone();
        Box::pin(async move {
            let path = required_str(&args, "path")?;
            let request = EditRequest {
                old: required_str(&args, "old_string")?,
                new: required_str(&args, "new_string")?,
                replace_all: args
                    .get("replace_all")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            };
            let absolute = ws.resolve(&path)?;
            if cancel.is_cancelled() {
                return Err(aborted());
            }
            blocking(move || edit_blocking(&ws, &absolute, request, &cancel)).await
        })
    }
}

// ---------------------------------------------------------------------------------------------
// ls

/// `ls {path?}`: a directory's entries, sorted, directories with a trailing `/`.
pub struct LsTool {
    ws: Arc<Workspace>,
}

impl LsTool {
    pub fn new(ws: Arc<Workspace>) -> LsTool {
        LsTool { ws }
    }
}

fn ls_blocking(
    ws: &Workspace,
    dir: &Path,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let rel = shown(ws, dir);
    let meta = fs::metadata(dir).map_err(|e| io_failed("list", &rel, e))?;
    if !meta.is_dir() {
        return Err(failed(format!("{rel} is not a directory")));
    }
    let mut entries = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| io_failed("list", &rel, e))? {
        if cancel.is_cancelled() {
            return Err(aborted());
        }
        let entry = entry.map_err(|e| io_failed("list", &rel, e))?;
        if ws.is_forbidden(&entry.path()) {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        // Symlinks are not followed: a link to a directory is listed as a plain name.
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        entries.push(if is_dir { format!("{name}/") } else { name });
    }
    entries.sort();
    let total = entries.len();
    entries.truncate(LS_ENTRIES_MAX);
    let mut content = if entries.is_empty() {
        "(empty directory)".to_owned()
    } else {
        entries.join("\n")
    };
    if total > entries.len() {
        content.push_str(&format!(
            "\n[... {} more entries not shown]",
            total - entries.len()
        ));
    }
    Ok(ToolOutput::text(content).with_value(json!({
        "path": rel,
        "entries": entries,
        "total": total,
    })))
}

impl Tool for LsTool {
    fn name(&self) -> &str {
        "ls"
    }
    fn description(&self) -> &str {
        "List a directory of the workspace (default: its root), sorted; directories end with `/`."
    }
    fn input_schema(&self) -> Value {
        schema(
            json!({
                "path": {"type": "string", "minLength": 1, "description": "relative to the workspace (default \".\")"},
            }),
            &[],
        )
    }
    fn output_schema(&self) -> Option<Value> {
        Some(schema(
            json!({
                "path": {"type": "string"},
                "entries": {"type": "array", "items": {"type": "string"}},
                "total": {"type": "integer", "minimum": 0},
            }),
            &["path", "entries", "total"],
        ))
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn is_concurrency_safe(&self, _args: &Args) -> bool {
        true
    }
    fn is_retry_safe(&self) -> bool {
        true
    }
    fn resources(&self, args: &Args) -> Resources {
        path_resources(
            &self.ws,
            Some(args.str("path").unwrap_or(".")),
            Access::Read,
        )
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        let ws = self.ws.clone();
        let cancel = ctx.cancel().clone();
        Box::pin(async move {
            let path = optional_str(&args, "path")?.unwrap_or_else(|| ".".into());
            let absolute = ws.resolve(&path)?;
            if cancel.is_cancelled() {
                return Err(aborted());
            }
            blocking(move || ls_blocking(&ws, &absolute, &cancel)).await
        })
    }
}

// ---------------------------------------------------------------------------------------------
// glob

/// `glob {pattern, path?}`: the files below `path` whose path relative to it matches.
pub struct GlobTool {
    ws: Arc<Workspace>,
}

impl GlobTool {
    pub fn new(ws: Arc<Workspace>) -> GlobTool {
        GlobTool { ws }
    }
}

fn glob_blocking(
    ws: &Arc<Workspace>,
    base: &Path,
    pattern: &str,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let rel = shown(ws, base);
    let meta = fs::metadata(base).map_err(|e| io_failed("search", &rel, e))?;
    if !meta.is_dir() {
        return Err(failed(format!("{rel} is not a directory")));
    }
    let matcher = globset::GlobBuilder::new(pattern.strip_prefix("./").unwrap_or(pattern))
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| failed(format!("invalid glob pattern: {e}")))?
        .compile_matcher();
    // The smallest GLOB_RESULTS_MAX paths seen so far (a max-heap: its top is dropped first).
    let mut kept: BinaryHeap<String> = BinaryHeap::new();
    let mut total: u64 = 0;
    let unreadable = walk(ws, base, cancel, |entry| {
        let ft = entry.file_type();
        let is_file = ft.is_some_and(|t| t.is_file() || t.is_symlink());
        if is_file {
            if let Ok(below) = entry.path().strip_prefix(base) {
                if matcher.is_match(below) {
                    total += 1;
                    kept.push(shown(ws, entry.path()));
                    if kept.len() > GLOB_RESULTS_MAX {
                        kept.pop();
                    }
                }
            }
        }
        ControlFlow::Continue(())
    })?;
    let files = kept.into_sorted_vec();
    let mut content = if files.is_empty() {
        format!("no files match {pattern:?}")
    } else {
        files.join("\n")
    };
    if total > files.len() as u64 {
        content.push_str(&format!(
            "\n[... {} more matches not shown (limit {GLOB_RESULTS_MAX}); narrow the pattern]",
            total - files.len() as u64
        ));
    }
    if unreadable > 0 {
        content.push_str(&format!("\n[{unreadable} entries could not be read]"));
    }
    Ok(ToolOutput::text(content).with_value(json!({
        "files": files,
        "total": total,
    })))
}

impl Tool for GlobTool {
    fn name(&self) -> &str {
        "glob"
    }
    fn description(&self) -> &str {
        "Find files by glob pattern (e.g. `**/*.rs`; `*` does not cross `/`), matched against \
         paths relative to `path` (default: the workspace root). Honours .gitignore; sorted; at \
         most 1000 results."
    }
    fn input_schema(&self) -> Value {
        schema(
            json!({
                "pattern": {"type": "string", "minLength": 1, "description": "glob, relative to `path`"},
                "path": {"type": "string", "minLength": 1, "description": "directory to search, relative to the workspace (default \".\")"},
            }),
            &["pattern"],
        )
    }
    fn output_schema(&self) -> Option<Value> {
        Some(schema(
            json!({
                "files": {"type": "array", "items": {"type": "string"}},
                "total": {"type": "integer", "minimum": 0},
            }),
            &["files", "total"],
        ))
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn is_concurrency_safe(&self, _args: &Args) -> bool {
        true
    }
    fn is_retry_safe(&self) -> bool {
        true
    }
    fn resources(&self, args: &Args) -> Resources {
        path_resources(
            &self.ws,
            Some(args.str("path").unwrap_or(".")),
            Access::Read,
        )
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        let ws = self.ws.clone();
        let cancel = ctx.cancel().clone();
        Box::pin(async move {
            let pattern = required_str(&args, "pattern")?;
            let path = optional_str(&args, "path")?.unwrap_or_else(|| ".".into());
            let absolute = ws.resolve(&path)?;
            if cancel.is_cancelled() {
                return Err(aborted());
            }
            blocking(move || glob_blocking(&ws, &absolute, &pattern, &cancel)).await
        })
    }
}

// ---------------------------------------------------------------------------------------------
// grep

/// `grep {pattern, path?, glob?}`: lines matching a regex, as `path:line: text`.
pub struct GrepTool {
    ws: Arc<Workspace>,
}

impl GrepTool {
    pub fn new(ws: Arc<Workspace>) -> GrepTool {
        GrepTool { ws }
    }
}

/// `line` cut to at most `max` bytes (on a character boundary), marked when cut.
fn cut(line: &str, max: usize) -> Cow<'_, str> {
    if line.len() <= max {
        return Cow::Borrowed(line);
    }
    let mut end = max;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &line[..end]))
}

#[derive(Default)]
struct GrepState {
    out: String,
    matches: usize,
    files: usize,
    truncated: bool,
    skipped_large: u64,
    unreadable: u64,
}

impl GrepState {
    /// Searches one file; `Break` once the output is full.
    fn search(&mut self, ws: &Workspace, path: &Path, re: &regex::Regex) -> ControlFlow<()> {
        match fs::metadata(path) {
            Ok(m) if !m.is_file() => return ControlFlow::Continue(()),
            Ok(m) if m.len() > GREP_FILE_BYTES_MAX => {
                self.skipped_large += 1;
                return ControlFlow::Continue(());
            }
            Ok(_) => {}
            Err(_) => {
                self.unreadable += 1;
                return ControlFlow::Continue(());
            }
        }
        let mut bytes = Vec::new();
        let read =
            File::open(path).and_then(|f| f.take(GREP_FILE_BYTES_MAX).read_to_end(&mut bytes));
        if read.is_err() {
            self.unreadable += 1;
            return ControlFlow::Continue(());
        }
        if bytes.contains(&0) {
            // Binary: skipped, as ripgrep does.
            return ControlFlow::Continue(());
        }
        let text = String::from_utf8_lossy(&bytes);
        let rel = shown(ws, path);
        let mut matched_here = false;
        for (i, line) in text.lines().enumerate() {
            if !re.is_match(line) {
                continue;
            }
            let entry = format!("{rel}:{}: {}\n", i + 1, cut(line, GREP_LINE_BYTES_MAX));
            if self.matches >= GREP_MATCHES_MAX
                || self.out.len() + entry.len() > GREP_OUTPUT_BYTES_MAX
            {
                self.truncated = true;
                if matched_here {
                    self.files += 1;
                }
                return ControlFlow::Break(());
            }
            self.out.push_str(&entry);
            self.matches += 1;
            matched_here = true;
        }
        if matched_here {
            self.files += 1;
        }
        ControlFlow::Continue(())
    }
}

fn grep_blocking(
    ws: &Arc<Workspace>,
    base: &Path,
    pattern: &str,
    glob: Option<&str>,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let rel = shown(ws, base);
    let re = regex::RegexBuilder::new(pattern)
        .size_limit(GREP_REGEX_BYTES_MAX)
        .build()
        .map_err(|e| failed(format!("invalid regex: {e}")))?;
    // A glob without `/` matches file names anywhere (as ripgrep's --glob); with one, the path
    // relative to `path`.
    let filter = match glob {
        None => None,
        Some(g) => {
            let g = g.strip_prefix("./").unwrap_or(g);
            let matcher = globset::GlobBuilder::new(g)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| failed(format!("invalid glob: {e}")))?
                .compile_matcher();
            Some((matcher, g.contains('/')))
        }
    };
    let meta = fs::metadata(base).map_err(|e| io_failed("search", &rel, e))?;
    let mut state = GrepState::default();
    if meta.is_file() {
        // Asked for by name: searched even if ignored.
        let _ = state.search(ws, base, &re);
    } else {
        let unreadable = walk(ws, base, cancel, |entry| {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                // Directories are walked into; symlinks are never followed.
                return ControlFlow::Continue(());
            }
            if let Some((matcher, whole_path)) = &filter {
                let subject = if *whole_path {
                    entry.path().strip_prefix(base).unwrap_or(entry.path())
                } else {
                    Path::new(entry.file_name())
                };
                if !matcher.is_match(subject) {
                    return ControlFlow::Continue(());
                }
            }
            state.search(ws, entry.path(), &re)
        })?;
        state.unreadable += unreadable;
    }
    let mut content = if state.matches == 0 {
        format!("no matches for /{pattern}/")
    } else {
        state.out.trim_end_matches('\n').to_owned()
    };
    if state.truncated {
        content.push_str(&format!(
            "\n[truncated: output limit reached after {} matching lines (at most \
             {GREP_MATCHES_MAX} lines and {GREP_OUTPUT_BYTES_MAX} bytes); narrow the pattern, \
             path or glob]",
            state.matches
        ));
    }
    if state.skipped_large > 0 {
        content.push_str(&format!(
            "\n[skipped {} files larger than {GREP_FILE_BYTES_MAX} bytes]",
            state.skipped_large
        ));
    }
    if state.unreadable > 0 {
        content.push_str(&format!(
            "\n[{} entries could not be read]",
            state.unreadable
        ));
    }
    Ok(ToolOutput::text(content).with_value(json!({
        "matches": state.matches,
        "files": state.files,
        "truncated": state.truncated,
    })))
}

impl Tool for GrepTool {
    fn name(&self) -> &str {
        "grep"
    }
    fn description(&self) -> &str {
        "Search file contents with a regular expression (Rust regex syntax) below `path` \
         (default: the workspace root; a file searches just it), optionally only files matching \
         `glob` (a glob without `/` matches file names). Honours .gitignore, skips binary files. \
         Output: `path:line: text` lines, truncated past 10000 lines or 1 MiB."
    }
    fn input_schema(&self) -> Value {
        schema(
            json!({
                "pattern": {"type": "string", "minLength": 1, "description": "regular expression"},
                "path": {"type": "string", "minLength": 1, "description": "file or directory, relative to the workspace (default \".\")"},
                "glob": {"type": "string", "minLength": 1, "description": "only search files matching this glob"},
            }),
            &["pattern"],
        )
    }
    fn output_schema(&self) -> Option<Value> {
        Some(schema(
            json!({
                "matches": {"type": "integer", "minimum": 0},
                "files": {"type": "integer", "minimum": 0},
                "truncated": {"type": "boolean"},
            }),
            &["matches", "files", "truncated"],
        ))
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn is_concurrency_safe(&self, _args: &Args) -> bool {
        true
    }
    fn is_retry_safe(&self) -> bool {
        true
    }
    fn resources(&self, args: &Args) -> Resources {
        path_resources(
            &self.ws,
            Some(args.str("path").unwrap_or(".")),
            Access::Read,
        )
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        let ws = self.ws.clone();
        let cancel = ctx.cancel().clone();
        Box::pin(async move {
            let pattern = required_str(&args, "pattern")?;
            let path = optional_str(&args, "path")?.unwrap_or_else(|| ".".into());
            let glob = optional_str(&args, "glob")?;
            let absolute = ws.resolve(&path)?;
            if cancel.is_cancelled() {
                return Err(aborted());
            }
            blocking(move || grep_blocking(&ws, &absolute, &pattern, glob.as_deref(), &cancel))
                .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_respects_char_boundaries() {
        assert_eq!(cut("abc", 5), "abc");
        assert_eq!(cut("abcdef", 3), "abc…");
        assert_eq!(cut("aé", 2), "a…");
    }
}
