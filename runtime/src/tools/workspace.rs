//! The workspace: the one directory tree file tools may touch, and what this session last read.
//!
//! Why so strict: a model's path is untrusted input. `..` and absolute paths are refused
//! outright (no "it stays inside after normalising" cleverness), and the deepest existing
//! ancestor of a path is canonicalised, so a symlink that leads outside (or loops) is refused
//! too. The runtime's own state directories (journals, spill stores) are never reachable, even
//! when they sit inside the workspace.

use crate::code::ErrorCode;
use crate::tool::ToolError;
use std::collections::HashMap;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

/// Most paths whose last-read version a session remembers (for `edit`'s stale check).
pub const READ_VERSIONS_MAX: usize = 100_000;

#[derive(Debug)]
pub struct Workspace {
    root: PathBuf,
    forbidden: Vec<PathBuf>,
    read_versions: Mutex<HashMap<PathBuf, String>>,
}

fn outside(path: &str, why: &str) -> ToolError {
    ToolError::new(
        ErrorCode::FsOutsideWorkspace,
        format!("{path:?} is outside the workspace: {why}"),
    )
}

impl Workspace {
    /// A workspace rooted at `root` (which must exist). `forbidden` are directories file tools
    /// must never reach (the runtime's state), inside the workspace or not.
    pub fn new(root: &Path, forbidden: &[PathBuf]) -> io::Result<Workspace> {
        let root = root.canonicalize()?;
        let forbidden = forbidden
            .iter()
            .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
            .collect();
        Ok(Workspace {
            root,
            forbidden,
            read_versions: Mutex::new(HashMap::new()),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The absolute path a model-given relative path names, if it is inside the workspace.
    /// The path need not exist (a file about to be written), but its deepest existing ancestor
    /// is resolved through symlinks and must be inside.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        let relative = Path::new(path);
        if path.is_empty() {
            return Err(outside(path, "empty path"));
        }
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
