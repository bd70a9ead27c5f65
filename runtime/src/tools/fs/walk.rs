//! Walking the workspace through directory handles: each directory is opened relative to the
//! handle of the one above it (from the root's), with `O_NOFOLLOW`, and its entries' kinds come
//! from the directory itself, so a symlink is an entry, never a way in, and a directory swapped
//! for a symlink mid-walk is counted as unreadable rather than followed.

use super::{aborted, io_failed, shown};
use crate::tool::ToolError;
use crate::tools::workspace::Workspace;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::ops::ControlFlow;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// Deepest a walk goes below its base; deeper directories are counted as unreadable (each
/// level holds one open directory handle).
pub(crate) const WALK_DEPTH_MAX: usize = 256;
/// Largest `.gitignore` / `.ignore` file read, in bytes (a larger one is not applied).
const IGNORE_FILE_BYTES_MAX: u64 = 1 << 20;
/// Flags for opening a directory to list (`O_RDONLY`: `O_PATH` cannot be read).
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// What an entry is, as its directory says (a symlink is a symlink, whatever it points at).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

/// One entry a walk visits.
pub(crate) struct Entry<'a> {
    /// The directory holding it, opened through the workspace's handle.
    pub dir: BorrowedFd<'a>,
    pub name: &'a OsStr,
    /// Workspace-relative.
    pub rel: &'a Path,
    pub kind: Kind,
}

/// The entries of the directory open at `dir` (without `.` and `..`), unsorted.
pub(crate) fn read_entries(dir: BorrowedFd<'_>) -> io::Result<Vec<(OsString, Kind)>> {
    let mut out = Vec::new();
    for entry in Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = OsString::from_vec(name.to_vec());
        let file_type = match entry.file_type() {
            FileType::Unknown => rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW)
                .map(|s| FileType::from_raw_mode(s.st_mode))
                .unwrap_or(FileType::Unknown),
            t => t,
        };
        let kind = match file_type {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
            _ => Kind::Other,
        };
        out.push((name, kind));
    }
    Ok(out)
}

/// The ignore files of one directory: `.ignore` (which wins) and `.gitignore`.
struct Ignores {
    ignore: Option<Gitignore>,
    git: Option<Gitignore>,
}

/// Reads `name` in `dir` (a regular file, not through a symlink) as an ignore file rooted at
/// `absolute` (the directory's path, which the matcher strips from the paths it is asked about).
fn ignore_file(dir: BorrowedFd<'_>, absolute: &Path, name: &str) -> Option<Gitignore> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let file = std::fs::File::from(rustix::fs::openat(dir, name, flags, Mode::empty()).ok()?);
    let stat = rustix::fs::fstat(&file).ok()?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(IGNORE_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > IGNORE_FILE_BYTES_MAX {
        return None;
    }
    let mut builder = GitignoreBuilder::new(absolute);
    for line in String::from_utf8_lossy(&bytes).lines() {
        // A bad line is skipped, as git does.
        let _ = builder.add_line(None, line);
    }
    builder.build().ok()
}

fn ignores(dir: BorrowedFd<'_>, absolute: &Path) -> Ignores {
    Ignores {
        ignore: ignore_file(dir, absolute, ".ignore"),
        git: ignore_file(dir, absolute, ".gitignore"),
    }
}

/// Whether `absolute` is ignored: the deepest `.ignore` with an opinion decides, else the
/// deepest `.gitignore` with one (the `ignore` crate's precedence).
fn is_ignored(stack: &[Ignores], absolute: &Path, is_dir: bool) -> bool {
    let kinds: [fn(&Ignores) -> Option<&Gitignore>; 2] =
        [|i| i.ignore.as_ref(), |i| i.git.as_ref()];
    for kind in kinds {
        for matcher in stack.iter().rev().filter_map(kind) {
            match matcher.matched(absolute, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
    }
    false
}

/// One directory being walked: its handle, its sorted entries, the next one to visit.
struct Frame {
    fd: OwnedFd,
    rel: PathBuf,
    entries: Vec<(OsString, Kind)>,
    next: usize,
}

impl Frame {
    fn open(fd: OwnedFd, rel: PathBuf) -> io::Result<Frame> {
        let mut entries = read_entries(fd.as_fd())?;
        entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        Ok(Frame {
            fd,
            rel,
            entries,
            next: 0,
        })
    }
}

/// Visits every entry below the directory `base` (resolved, absolute), depth first, in file
/// name order. Goes from the workspace root down to `base` first, through handles, so the
/// ignore files between them apply (none outside the workspace is read; no global git
/// excludes). Prunes `.git`, the runtime's state directories and ignored entries. Symlinks are
/// visited as entries and never followed. A `base` that is itself ignored (or inside `.git`) is
/// walked on its own, with only its own ignore files and those below (it was asked for by
/// name). Returns how many entries could not be read.
pub(crate) fn walk(
    ws: &Workspace,
    base: &Path,
    cancel: &CancellationToken,
    mut visit: impl FnMut(&Entry<'_>) -> ControlFlow<()>,
) -> Result<u64, ToolError> {
    let root = ws.root();
    let base_rel = ws.relative(base).to_owned();
    let failed_at = |e: io::Error| io_failed("search", &shown(ws, base), e);
    let mut dir = ws.open(root, DIR_FLAGS, Mode::empty()).map_err(failed_at)?;
    let mut stack: Vec<Ignores> = Vec::new();
    let mut on_its_own = false;
    let mut at = PathBuf::new();
    for name in base_rel.iter() {
        if !on_its_own {
            stack.push(ignores(dir.as_fd(), &root.join(&at)));
        }
        at.push(name);
        if name == ".git" || is_ignored(&stack, &root.join(&at), true) {
            on_its_own = true;
            stack.clear();
        }
        dir = rustix::fs::openat(&dir, name, DIR_FLAGS, Mode::empty())
            .map_err(|e| failed_at(e.into()))?;
    }
    stack.push(ignores(dir.as_fd(), base));
    let mut frames = vec![Frame::open(dir, base_rel).map_err(failed_at)?];
    let mut unreadable = 0;
    loop {
        let depth = frames.len();
        let Some(frame) = frames.last_mut() else {
            break;
        };
        if cancel.is_cancelled() {
            return Err(aborted());
        }
        let Some((name, kind)) = frame.entries.get(frame.next).cloned() else {
            frames.pop();
            stack.pop();
            continue;
        };
        frame.next += 1;
        if name == ".git" {
            continue;
        }
        let rel = frame.rel.join(&name);
        let absolute = root.join(&rel);
        if ws.is_forbidden(&absolute) || is_ignored(&stack, &absolute, kind == Kind::Dir) {
            continue;
        }
        let entry = Entry {
            dir: frame.fd.as_fd(),
            name: &name,
            rel: &rel,
            kind,
        };
        if visit(&entry).is_break() {
            return Ok(unreadable);
        }
        if kind != Kind::Dir {
            continue;
        }
        if depth > WALK_DEPTH_MAX {
            unreadable += 1;
            continue;
        }
        let child = rustix::fs::openat(&frame.fd, &name, DIR_FLAGS, Mode::empty())
            .map_err(io::Error::from)
            .and_then(|fd| {
                let ignores = ignores(fd.as_fd(), &absolute);
                Ok((Frame::open(fd, rel)?, ignores))
            });
        match child {
            Ok((frame, ignores)) => {
                frames.push(frame);
                stack.push(ignores);
            }
            Err(_) => unreadable += 1,
        }
    }
    Ok(unreadable)
}
