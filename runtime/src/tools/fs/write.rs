//! `write` and `edit`. Every step goes through a directory handle: the target's directory is
//! opened through the workspace root's handle (or created below it, one `mkdirat` at a time),
//! the old file is opened and hashed relative to that directory, and the new content goes to a
//! temporary file created in it and renamed over the target with `renameat` within it. A
//! symlink swapped into the path after the check makes the call fail; a symlink swapped in at
//! the target's name is itself replaced (a rename never follows it).

use super::{
    aborted, blocking, failed, io_failed, opened, path_resources, required_str, schema, shown,
    stale, Access, Opened, CHUNK_BYTES, EDIT_BYTES_MAX, READ_FLAGS,
};
use crate::args::Args;
use crate::event::{Resources, SideEffect};
use crate::tool::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use crate::tools::workspace::{sha256_hex, Workspace};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawMode};
use rustix::io::Errno;
use serde_json::{json, Value};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Flags for opening a directory to work in (`O_RDONLY`, not `O_PATH`: it is fsynced).
const DIR_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY);

/// Names temporary files uniquely within this process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// sha256 of an open file's bytes, streamed.
fn hash_file(file: &File) -> io::Result<String> {
    use sha2::Digest;
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
    Ok(hex::encode(hasher.finalize()))
}

/// Where a file is written: its directory (opened through the workspace's handle; `None` while
/// it does not exist) and its name there.
struct Target {
    /// The directory, workspace-relative (empty: the root).
    parent_rel: PathBuf,
    parent: Option<OwnedFd>,
    name: OsString,
    /// The target, workspace-relative, for messages and side effects.
    rel: String,
}

impl Target {
    /// Opens the directory `absolute` (resolved) goes in, if it exists.
    fn open(ws: &Workspace, absolute: &Path) -> Result<Target, ToolError> {
        let rel = shown(ws, absolute);
        let (Some(parent), Some(name)) = (absolute.parent(), absolute.file_name()) else {
            return Err(failed(format!("{rel} is a directory")));
        };
        if absolute == ws.root() {
            return Err(failed(format!("{rel} is a directory")));
        }
        let parent_fd = match ws.open(parent, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => Some(fd),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_failed("open the directory of", &rel, e)),
        };
        Ok(Target {
            parent_rel: ws.relative(parent).to_owned(),
            parent: parent_fd,
            name: name.to_owned(),
            rel,
        })
    }

    /// The file now at the target, opened relative to its directory; `None` if there is none.
    /// A directory or a special file there is refused.
    fn existing(&self) -> Result<Option<Opened>, ToolError> {
        let Some(parent) = &self.parent else {
            return Ok(None);
        };
        let flags = READ_FLAGS | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(parent, &self.name, flags, Mode::empty()) {
            Err(Errno::NOENT) => return Ok(None),
            other => other.map_err(io::Error::from),
        };
        let opened = opened(fd, "inspect", &self.rel)?;
        match opened.kind {
            FileType::RegularFile => Ok(Some(opened)),
            FileType::Directory => Err(failed(format!("{} is a directory", self.rel))),
            _ => Err(failed(format!("{} is not a regular file", self.rel))),
        }
    }

    /// Creates the missing directories above the target, outermost first, each with `mkdirat`
    /// in the handle of the one above (from the root's), and returns them (each a side effect
    /// the journal should know about).
    fn create_parents(&mut self, ws: &Workspace) -> Result<Vec<SideEffect>, ToolError> {
        if self.parent.is_some() {
            return Ok(Vec::new());
        }
        let root = ws.root().to_owned();
        let mut effects = Vec::new();
        let fail = |what: &str, at: &Path, e: io::Error, effects: &[SideEffect]| {
            let mut err = io_failed(what, &shown(ws, &root.join(at)), e);
            err.side_effects = effects.to_vec();
            err
        };
        let mut dir = ws
            .open(&root, DIR_FLAGS, Mode::empty())
            .map_err(|e| fail("open", Path::new(""), e, &effects))?;
        let mut at = PathBuf::new();
        for name in self.parent_rel.iter() {
            at.push(name);
            let flags = DIR_FLAGS | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let next = match rustix::fs::openat(&dir, name, flags, Mode::empty()) {
                Err(Errno::NOENT) => {
                    match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o777)) {
                        Ok(()) => effects.push(SideEffect::Other {
                            kind: "fs/mkdir".into(),
                            detail: shown(ws, &root.join(&at)),
                        }),
                        // Another call created it meanwhile: fine.
                        Err(Errno::EXIST) => {}
                        Err(e) => return Err(fail("create directory", &at, e.into(), &effects)),
                    }
                    rustix::fs::openat(&dir, name, flags, Mode::empty())
                }
                other => other,
            };
            dir = next.map_err(|e| fail("open directory", &at, e.into(), &effects))?;
        }
        self.parent = Some(dir);
        Ok(effects)
    }

    /// Replaces the target with `bytes` atomically: a temporary file in its directory, written
    /// and fsynced, renamed over the target, then the directory fsynced. `mode` (an existing
    /// file's) is kept. If `cancel` fires before the rename, nothing is replaced and the call is
    /// `ABORTED`. The directory must exist (`create_parents`).
    fn replace(
        &self,
        bytes: &[u8],
        mode: Option<RawMode>,
        cancel: &CancellationToken,
    ) -> Result<(), ToolError> {
        let Some(parent) = &self.parent else {
            return Err(failed(format!(
                "{}: its directory does not exist",
                self.rel
            )));
        };
        let temp = format!(
            ".tooljournal-tmp-{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let attempt = (|| -> io::Result<bool> {
            let flags =
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(parent, &temp, flags, Mode::from_raw_mode(0o666))?;
            let mut file = File::from(fd);
            file.write_all(bytes)?;
            if let Some(mode) = mode {
                rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
            }
            file.sync_all()?;
            drop(file);
            if cancel.is_cancelled() {
                return Ok(false);
            }
            rustix::fs::renameat(parent, &temp, parent, &self.name)?;
            Ok(true)
        })();
        match attempt {
            Ok(true) => {
                // Make the rename durable; a directory that cannot be fsynced (some file
                // systems) still has the new file.
                let _ = rustix::fs::fsync(parent);
                Ok(())
            }
            Ok(false) => {
                let _ = rustix::fs::unlinkat(parent, &temp, AtFlags::empty());
                Err(aborted())
            }
            Err(e) => {
                let _ = rustix::fs::unlinkat(parent, &temp, AtFlags::empty());
                Err(io_failed("write", &self.rel, e))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// write

/// `write {path, content}`: creates or replaces a file, atomically.
pub struct WriteTool {
    ws: Arc<Workspace>,
}

impl WriteTool {
    /// The `write` tool, confined to `ws`.
    pub fn new(ws: Arc<Workspace>) -> WriteTool {
        WriteTool { ws }
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
                let mut target = Target::open(&ws, &absolute)?;
                let rel = target.rel.clone();
                let (before, mode) = match target.existing()? {
                    Some(old) => (
                        Some(hash_file(&old.file).map_err(|e| io_failed("read", &rel, e))?),
                        Some(old.stat.st_mode),
                    ),
                    None => (None, None),
                };
                if let (Some(before), Some(seen)) = (&before, ws.last_read(&absolute)) {
                    if *before != seen {
                        return Err(stale(format!(
                            "{rel} changed since it was read; read it again before writing"
                        )));
                    }
                }
                let mut effects = target.create_parents(&ws)?;
                if let Err(mut e) = target.replace(content.as_bytes(), mode, &cancel) {
                    e.side_effects.splice(0..0, effects);
                    return Err(e);
                }
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
    /// The `edit` tool, confined to `ws`.
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
    let target = Target::open(ws, absolute)?;
    let rel = target.rel.clone();
    let Some(old_file) = target.existing()? else {
        return Err(failed(format!(
            "{rel} does not exist; use write to create it"
        )));
    };
    let Some(seen) = ws.last_read(absolute) else {
        return Err(stale(format!(
            "{rel} has not been read in this session; read it first"
        )));
    };
    let mut bytes = Vec::new();
    (&old_file.file)
        .take(EDIT_BYTES_MAX + 1)
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
    target.replace(edited.as_bytes(), Some(old_file.stat.st_mode), cancel)?;
    let mut effects = Vec::new();
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
