//! The workspace: the one directory tree file tools may touch, and what this session last read.
//!
//! Why so strict: a model's path is untrusted input. `..` and absolute paths are refused
//! outright (no "it stays inside after normalising" cleverness), and the deepest existing
//! ancestor of a path is canonicalised, so a symlink that leads outside (or loops) is refused
//! too. The runtime's own state directories (journals, spill stores) are never reachable, even
//! when they sit inside the workspace.
//!
//! A check by name is only a check: between it and the open another process may swap a
//! directory for a symlink. So `resolve` returns the path with every symlink already replaced
//! by its target, and `Workspace::open` opens that path relative to a handle on the root,
//! following no symlink at all (`beneath.rs`): a swap makes the open fail, never reach out.

use crate::beneath;
use events::ErrorCode;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use std::collections::HashMap;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

/// Most paths whose last-read version a session remembers (for `edit`'s stale check).
pub const READ_VERSIONS_MAX: usize = 100_000;
/// Longest name (one path component) a file tool accepts, in bytes: Linux's `NAME_MAX`.
pub const NAME_BYTES_MAX: usize = 255;
/// Longest path a file tool accepts, in bytes: Linux's `PATH_MAX` less its NUL.
pub const PATH_BYTES_MAX: usize = 4095;

/// A path refused or not resolvable, with the code a tool's result carries for it
/// (`FS_OUTSIDE_WORKSPACE`, or `TOOL_FAILED` for a path no file system could hold).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What kind of refusal.
    pub code: ErrorCode,
    /// What was wrong with the path, for the model.
    pub message: String,
}

impl Refusal {
    fn new(code: ErrorCode, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Refusal {}

#[derive(Debug)]
/// The directory the file tools (and `bash`'s working directory) are confined to: paths are
/// resolved and opened beneath its root's handle, never through a symlink out, never into a
/// forbidden directory. Also remembers the version (sha256) of each file read, for `edit`'s stale
/// check.
pub struct Workspace {
    root: PathBuf,
    /// The handle every file tool opens through.
    root_fd: OwnedFd,
    forbidden: Vec<PathBuf>,
    read_versions: Mutex<HashMap<PathBuf, String>>,
}

fn outside(path: &str, why: &str) -> Refusal {
    Refusal::new(
        ErrorCode::FsOutsideWorkspace,
        format!("{:?} is outside the workspace: {why}", clipped(path)),
    )
}

/// A path for a message: whole when short, its start and length when not (a 5,000-byte name
/// in every message helps nobody).
pub fn clipped(path: &str) -> String {
    const SHOWN_BYTES_MAX: usize = 100;
    if path.len() <= SHOWN_BYTES_MAX {
        return path.to_owned();
    }
    let mut end = SHOWN_BYTES_MAX;
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &path[..end], path.len())
}

/// Refuses a path the file system could not hold (named, with the limit), before any
/// lookup: the kernel's `ENAMETOOLONG` would otherwise surface as a confusing refusal.
fn check_length(path: &str) -> Result<(), Refusal> {
    let too_long = |what: String| {
        Refusal::new(
            ErrorCode::ToolFailed,
            format!("path too long: {:?}: {what}", clipped(path)),
        )
    };
    if let Some(name) = Path::new(path)
        .components()
        .map(|c| c.as_os_str().as_bytes().len())
        .find(|&n| n > NAME_BYTES_MAX)
    {
        return Err(too_long(format!(
            "a name of {name} bytes is over the limit of {NAME_BYTES_MAX} bytes per name"
        )));
    }
    if path.len() > PATH_BYTES_MAX {
        return Err(too_long(format!(
            "{} bytes is over the limit of {PATH_BYTES_MAX} bytes per path",
            path.len()
        )));
    }
    Ok(())
}

impl Workspace {
    /// A workspace rooted at `root` (which must exist). `forbidden` are directories file tools
    /// must never reach (the runtime's state), inside the workspace or not.
    pub fn new(root: &Path, forbidden: &[PathBuf]) -> io::Result<Workspace> {
        let root = root.canonicalize()?;
        let root_fd = beneath::open_root(&root)?;
        let forbidden = forbidden
            .iter()
            .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
            .collect();
        Ok(Workspace {
            root,
            root_fd,
            forbidden,
            read_versions: Mutex::new(HashMap::new()),
        })
    }

    /// The workspace's root, canonicalized.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The absolute path a model-given relative path names, if it is inside the workspace.
    /// The path need not exist (a file about to be written), but its deepest existing ancestor
    /// is resolved through symlinks and must be inside.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, Refusal> {
        let relative = Path::new(path);
        if path.is_empty() {
            return Err(outside(path, "empty path"));
        }
        check_length(path)?;
        if relative.is_absolute() {
            return Err(outside(
                path,
                "absolute paths are refused; give a path relative to the workspace",
            ));
        }
        let mut rest = Vec::new();
        for component in relative.components() {
            match component {
                Component::Normal(c) => rest.push(c.to_owned()),
                Component::CurDir => {}
                Component::ParentDir => return Err(outside(path, "`..` is refused")),
                Component::RootDir | Component::Prefix(_) => {
                    return Err(outside(path, "absolute paths are refused"))
                }
            }
        }
        // Walk down while the path exists, resolving symlinks as we go.
        let mut resolved = self.root.clone();
        let mut remaining = rest.into_iter().peekable();
        while let Some(next) = remaining.peek() {
            let candidate = resolved.join(next);
            match std::fs::symlink_metadata(&candidate) {
                Ok(_) => {
                    resolved = candidate.canonicalize().map_err(|e| {
                        outside(path, &format!("cannot resolve it ({e}); a symlink loop?"))
                    })?;
                    remaining.next();
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                // `a/b` where `a` is a file: not a question of confinement.
                Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
                    return Err(Refusal::new(
                        ErrorCode::ToolFailed,
                        format!(
                            "{:?}: {} is not a directory",
                            clipped(path),
                            self.relative(&resolved).display()
                        ),
                    ))
                }
                Err(e) => return Err(outside(path, &format!("cannot inspect it: {e}"))),
            }
            if !resolved.starts_with(&self.root) {
                return Err(outside(path, "a symlink leads out of it"));
            }
        }
        for c in remaining {
            resolved.push(c);
        }
        if !resolved.starts_with(&self.root) {
            return Err(outside(path, "it resolves outside"));
        }
        if self.forbidden.iter().any(|f| resolved.starts_with(f)) {
            return Err(outside(path, "the runtime's own state is not reachable"));
        }
        Ok(resolved)
    }

    /// Opens `absolute` (a path [`resolve`](Self::resolve) returned) relative to the root's
    /// handle, following no symlink: if one appeared since `resolve` (a concurrent swap), this
    /// fails with `ELOOP` rather than reach outside. `O_NOFOLLOW` and `O_CLOEXEC` are added.
    pub fn open(&self, absolute: &Path, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
        let rel = absolute.strip_prefix(&self.root).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not below the workspace root", absolute.display()),
            )
        })?;
        beneath::open_beneath(self.root_fd.as_fd(), rel, flags, mode)
    }

    /// The workspace-relative form of an absolute path inside it, for messages and journals.
    pub fn relative<'a>(&self, absolute: &'a Path) -> &'a Path {
        absolute.strip_prefix(&self.root).unwrap_or(absolute)
    }

    /// Records the content hash this session saw when it read `path`.
    pub fn record_read(&self, path: &Path, sha256: String) {
        let mut versions = self.read_versions.lock().unwrap_or_else(|p| p.into_inner());
        if versions.len() >= READ_VERSIONS_MAX && !versions.contains_key(path) {
            // Forgetting a version only makes a later edit of that file fail as stale: safe.
            versions.clear();
        }
        versions.insert(path.to_owned(), sha256);
    }

    /// The hash this session last saw for `path`, if it read (or wrote) it.
    pub fn last_read(&self, path: &Path) -> Option<String> {
        self.read_versions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(path)
            .cloned()
    }

    /// Whether a path is one of the runtime's state directories (so listings can skip it).
    pub fn is_forbidden(&self, absolute: &Path) -> bool {
        self.forbidden.iter().any(|f| absolute.starts_with(f))
    }
}

/// sha256 of bytes, hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir_all(ws.join(".state")).unwrap();
        std::fs::write(ws.join("sub/a.txt"), "a").unwrap();
        std::fs::write(dir.path().join("secret"), "s").unwrap();
        let w = Workspace::new(&ws, &[ws.join(".state")]).unwrap();
        (dir, w)
    }

    fn refused(w: &Workspace, p: &str) -> bool {
        matches!(w.resolve(p), Err(e) if e.code == ErrorCode::FsOutsideWorkspace)
    }

    #[test]
    fn plain_relative_paths_resolve_inside() {
        let (_d, w) = setup();
        assert_eq!(w.resolve("sub/a.txt").unwrap(), w.root().join("sub/a.txt"));
        assert_eq!(
            w.resolve("./sub/new.txt").unwrap(),
            w.root().join("sub/new.txt")
        );
        assert_eq!(
            w.resolve("new/dir/file").unwrap(),
            w.root().join("new/dir/file")
        );
    }

    #[test]
    fn parent_absolute_symlinks_out_loops_and_state_are_refused() {
        let (d, w) = setup();
        std::os::unix::fs::symlink(d.path().join("secret"), w.root().join("out")).unwrap();
        std::os::unix::fs::symlink(d.path(), w.root().join("outdir")).unwrap();
        std::os::unix::fs::symlink(w.root().join("loop"), w.root().join("loop")).unwrap();
        for p in [
            "../secret",
            "sub/../../secret",
            "/etc/passwd",
            "out",
            "outdir/secret",
            "outdir/new",
            "loop",
            ".state/x",
            "",
        ] {
            assert!(refused(&w, p), "{p} was not refused");
        }
    }

    #[test]
    fn a_symlink_that_stays_inside_is_fine() {
        let (_d, w) = setup();
        std::os::unix::fs::symlink(w.root().join("sub"), w.root().join("alias")).unwrap();
        assert_eq!(
            w.resolve("alias/a.txt").unwrap(),
            w.root().join("sub/a.txt")
        );
    }
}
