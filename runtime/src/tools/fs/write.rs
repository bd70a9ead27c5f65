//! `write` and `edit`. Every step goes through a directory handle: the target's directory is
//! opened through the workspace root's handle (or created below it, one `mkdirat` at a time),
//! the old file is opened and hashed relative to that directory, and the new content goes to a
//! temporary file created in it and renamed over the target with `renameat` within it. A
//! symlink swapped into the path after the check makes the call fail; a symlink swapped in at
//! the target's name is itself replaced (a rename never follows it).
//!
//! Both tools record, before they act, what they will do: the file's hash now and the hash of
//! the bytes they will write ([`Evidence::FileReplace`], journaled in `started`). The body
//! works out the same two hashes again, with the same code, right before it writes, and writes
//! nothing when they differ from the recorded ones: a probe after a crash can then trust that
//! the file holds either the recorded before or the recorded after, unless something else
//! changed it.

use super::{
    aborted, blocking, failed, io_failed, opened, path_resources, required_str, schema, shown,
    stale, Access, Opened, CHUNK_BYTES, EDIT_BYTES_MAX, READ_FLAGS,
};
use crate::args::Args;
use crate::event::{Evidence, Resources, SideEffect};
use crate::tool::{EvidenceFuture, Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
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
// Evidence: recorded before the act, honoured by the act.

/// The file evidence of a call that will replace `rel`.
fn file_replace(rel: &str, before: Option<&str>, after: &str) -> Evidence {
    Evidence::FileReplace {
        path: rel.to_owned(),
        before_sha256: before.map(str::to_owned),
        after_sha256: after.to_owned(),
    }
}

/// Whether the path shown for `absolute` names it exactly: a path that is not UTF-8 is shown
/// lossily, and evidence naming another path than the one written would mislead a probe, so
/// such a call records none.
fn names_exactly(ws: &Workspace, absolute: &Path) -> bool {
    ws.relative(absolute).to_str().is_some()
}

/// A file's hash for a message (`absent` when there is none).
fn said(sha256: Option<&str>) -> String {
    match sha256 {
        Some(hash) => format!("sha256 {hash}"),
        None => "absent".to_owned(),
    }
}

/// Refuses to act against what the call's `started` recorded: if `evidence` names `rel`, the
/// file must still be as recorded (`before`: its hash now, `None` when absent) and the bytes
/// about to be written must hash as recorded (`after`). Otherwise nothing may be written: a
/// probe reading the journal would take the world for something it is not. No evidence for
/// `rel` (none was recorded): nothing to honour.
fn honour_evidence(
    evidence: &[Evidence],
    rel: &str,
    before: Option<&str>,
    after: &str,
) -> Result<(), ToolError> {
    let mut files = 0;
    for item in evidence {
        #[allow(unreachable_patterns)]
        let (path, recorded_before, recorded_after) = match item {
            Evidence::FileReplace {
                path,
                before_sha256,
                after_sha256,
            } => (path, before_sha256.as_deref(), after_sha256),
            // Evidence of another kind says nothing about this file.
            _ => continue,
        };
        files += 1;
        if path != rel {
            continue;
        }
        files = 0;
        if recorded_before != before {
            return Err(stale(format!(
                "{rel} changed after this call's start was journaled (it was {}, it is now {}); \
                 nothing was written: read it again before writing",
                said(recorded_before),
                said(before)
            )));
        }
        if recorded_after != after {
            return Err(stale(format!(
                "{rel}: the content this call would write (sha256 {after}) is not what its \
                 journaled start recorded (sha256 {recorded_after}); nothing was written"
            )));
        }
    }
    if files > 0 {
        // The path now leads to another file than the one the start recorded (a directory
        // on the way was swapped): acting would make the recorded evidence false.
        return Err(stale(format!(
            "{rel} is not the file this call's journaled start named (a directory on its path \
             changed since); nothing was written"
        )));
    }
    Ok(())
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

/// What a write finds before it writes: where, and the file there now.
struct WritePlan {
    target: Target,
    /// sha256 of the file there now; `None` when there is none.
    before: Option<String>,
    /// The existing file's mode, kept by the new one.
    mode: Option<RawMode>,
}

/// Looks at the target of a write without changing anything; fails where the write must
/// (a directory there, a file this session read that changed since, ...). Used by the body and
/// by `evidence`, so the two agree.
fn plan_write(ws: &Workspace, absolute: &Path) -> Result<WritePlan, ToolError> {
    let target = Target::open(ws, absolute)?;
    let (before, mode) = match target.existing()? {
        Some(old) => (
            Some(hash_file(&old.file).map_err(|e| io_failed("read", &target.rel, e))?),
            Some(old.stat.st_mode),
        ),
        None => (None, None),
    };
    if let (Some(before), Some(seen)) = (&before, ws.last_read(absolute)) {
        if *before != seen {
            return Err(stale(format!(
                "{} changed since it was read; read it again before writing",
                target.rel
            )));
        }
    }
    Ok(WritePlan {
        target,
        before,
        mode,
    })
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
    /// The path, the file's hash now (or that it is absent) and the hash of `content`; nothing
    /// when the write would fail.
    fn evidence<'a>(&'a self, args: &'a Args) -> EvidenceFuture<'a> {
        let ws = self.ws.clone();
        let parsed = required_str(args, "path").and_then(|path| {
            let content = required_str(args, "content")?;
            Ok((ws.resolve(&path)?, content))
        });
        Box::pin(async move {
            let Ok((absolute, content)) = parsed else {
                return Vec::new();
            };
            if !names_exactly(&ws, &absolute) {
                return Vec::new();
            }
            blocking(move || {
                let plan = plan_write(&ws, &absolute)?;
                let after = sha256_hex(content.as_bytes());
                Ok(vec![file_replace(
                    &plan.target.rel,
                    plan.before.as_deref(),
                    &after,
                )])
            })
            .await
            .unwrap_or_default()
        })
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        let ws = self.ws.clone();
        Box::pin(async move {
            let path = required_str(&args, "path")?;
            let content = required_str(&args, "content")?;
            let absolute = ws.resolve(&path)?;
            if ctx.cancel().is_cancelled() {
                return Err(aborted());
            }
            blocking(move || {
                let WritePlan {
                    mut target,
                    before,
                    mode,
                } = plan_write(&ws, &absolute)?;
                let rel = target.rel.clone();
                let after = sha256_hex(content.as_bytes());
                honour_evidence(ctx.evidence(), &rel, before.as_deref(), &after)?;
                let mut effects = target.create_parents(&ws)?;
                if let Err(mut e) = target.replace(content.as_bytes(), mode, ctx.cancel()) {
                    e.side_effects.splice(0..0, effects);
                    return Err(e);
                }
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

impl EditRequest {
    /// The call's arguments: the path, and what to replace.
    fn from_args(args: &Args) -> Result<(String, EditRequest), ToolError> {
        let path = required_str(args, "path")?;
        let request = EditRequest {
            old: required_str(args, "old_string")?,
            new: required_str(args, "new_string")?,
            replace_all: args
                .get("replace_all")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        };
        Ok((path, request))
    }
}

/// An edit worked out in full before anything is written.
struct EditPlan {
    target: Target,
    /// The file's mode, kept.
    mode: RawMode,
    /// sha256 of the file as read.
    before: String,
    /// The whole new content.
    edited: String,
    /// How many occurrences are replaced.
    count: usize,
    /// The line of the first replaced occurrence, from 1.
    first_line: usize,
}

/// Reads the file, checks it may be edited (it exists, this session read it and it has not
/// changed since, it is text and small enough, `old_string` occurs as required) and computes
/// the new content, without changing anything. Used by the body and by `evidence`, so the two
/// agree.
fn plan_edit(
    ws: &Workspace,
    absolute: &Path,
    request: &EditRequest,
) -> Result<EditPlan, ToolError> {
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
    let edited = if *replace_all {
        text.replace(old.as_str(), new)
    } else {
        text.replacen(old.as_str(), new, 1)
    };
    Ok(EditPlan {
        target,
        mode: old_file.stat.st_mode,
        before,
        edited,
        count,
        first_line,
    })
}

fn edit_blocking(
    ws: &Workspace,
    absolute: &Path,
    request: &EditRequest,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let EditPlan {
        target,
        mode,
        before,
        edited,
        count,
        first_line,
    } = plan_edit(ws, absolute, request)?;
    let rel = target.rel.clone();
    let after = sha256_hex(edited.as_bytes());
    honour_evidence(ctx.evidence(), &rel, Some(&before), &after)?;
    target.replace(edited.as_bytes(), Some(mode), ctx.cancel())?;
    ws.record_read(absolute, after.clone());
    let effect = SideEffect::FsWrite {
        path: rel.clone(),
        before_sha256: Some(before.clone()),
        after_sha256: after.clone(),
    };
    let plural = if count == 1 { "" } else { "s" };
    let out = ToolOutput::text(format!(
        "edited {rel}: {count} replacement{plural} (first at line {first_line})"
    ))
    .with_value(json!({
        "path": rel,
        "replacements": count,
        "before_sha256": before,
        "after_sha256": after,
    }));
    Ok(out.with_side_effect(effect))
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
    /// The path, the file's hash now and the hash of the edited content; nothing when the
    /// edit would fail.
    fn evidence<'a>(&'a self, args: &'a Args) -> EvidenceFuture<'a> {
        let ws = self.ws.clone();
        let parsed = EditRequest::from_args(args)
            .and_then(|(path, request)| Ok((ws.resolve(&path)?, request)));
        Box::pin(async move {
            let Ok((absolute, request)) = parsed else {
                return Vec::new();
            };
            if !names_exactly(&ws, &absolute) {
                return Vec::new();
            }
            blocking(move || {
                let plan = plan_edit(&ws, &absolute, &request)?;
                let after = sha256_hex(plan.edited.as_bytes());
                Ok(vec![file_replace(
                    &plan.target.rel,
                    Some(&plan.before),
                    &after,
                )])
            })
            .await
            .unwrap_or_default()
        })
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        let ws = self.ws.clone();
        Box::pin(async move {
            let (path, request) = EditRequest::from_args(&args)?;
            let absolute = ws.resolve(&path)?;
            if ctx.cancel().is_cancelled() {
                return Err(aborted());
            }
            blocking(move || edit_blocking(&ws, &absolute, &request, &ctx)).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aa";
    const B: &str = "bb";

    fn code(r: Result<(), ToolError>) -> Option<crate::code::ErrorCode> {
        r.err().map(|e| e.code)
    }

    #[test]
    fn a_body_honours_the_evidence_of_its_path_and_refuses_another_path() {
        let stale = Some(crate::code::ErrorCode::FsStaleVersion);
        let recorded = [file_replace("f", Some(A), B)];
        // As recorded.
        assert_eq!(code(honour_evidence(&recorded, "f", Some(A), B)), None);
        // The file changed, appeared or vanished since.
        assert_eq!(code(honour_evidence(&recorded, "f", Some(B), B)), stale);
        assert_eq!(code(honour_evidence(&recorded, "f", None, B)), stale);
        let absent = [file_replace("f", None, B)];
        assert_eq!(code(honour_evidence(&absent, "f", None, B)), None);
        assert_eq!(code(honour_evidence(&absent, "f", Some(A), B)), stale);
        // Other bytes than recorded.
        assert_eq!(code(honour_evidence(&recorded, "f", Some(A), A)), stale);
        // Evidence of another path only: the path now leads elsewhere than recorded.
        assert_eq!(code(honour_evidence(&recorded, "g", Some(B), A)), stale);
        // Of this path among others: this one decides.
        let both = [file_replace("g", None, A), file_replace("f", Some(A), B)];
        assert_eq!(code(honour_evidence(&both, "f", Some(A), B)), None);
        // None recorded: nothing to honour.
        assert_eq!(code(honour_evidence(&[], "f", Some(B), A)), None);
    }

    #[test]
    fn the_refusal_says_what_changed() {
        let e = honour_evidence(&[file_replace("f", Some(A), B)], "f", None, B).unwrap_err();
        assert!(
            e.message
                .contains("changed after this call's start was journaled")
                && e.message.contains("sha256 aa")
                && e.message.contains("absent")
                && e.message.contains("nothing was written"),
            "{}",
            e.message
        );
    }
}
