//! The paths a policy opens: the system's directories and the workspace to read, the workspace
//! and the session's temporary directory to write, resolved once (symlinks followed) so that
//! what is journaled is what Landlock was given.

use crate::{SandboxError, SandboxPolicy, Spec};
use std::path::{Path, PathBuf};

/// Directories every sandboxed command may read (those that exist): programs, their libraries
/// and configuration, and the kernel's views of processes (another process's memory or
/// environment stays closed: Landlock refuses a sandboxed process ptrace access to anything
/// outside its domain). Not `/home`, `/root`, `/tmp`, `/var` or `/run`: a user's files, other
/// sessions' and the system's state. Not `/dev`: a disk's device file would give a root
/// command every byte on it; only [`DEVICES_WRITABLE`] are open.
pub const SYSTEM_READABLE: [&str; 12] = [
    "/bin",
    "/sbin",
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/proc",
    "/sys",
    "/nix/store",
];

/// The only devices a sandboxed command may open, to read and write: writing them changes
/// nothing anyone keeps.
pub const DEVICES_WRITABLE: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The resolved roots of one sandbox.
#[derive(Debug)]
pub(crate) struct Roots {
    /// Read (and execute) beneath each; the writable ones are here too.
    pub readable: Vec<PathBuf>,
    /// Everything beneath each (create, change, remove).
    pub writable: Vec<PathBuf>,
    /// Read and write, files only.
    pub devices: Vec<PathBuf>,
}

impl Roots {
    pub(crate) fn resolve(spec: &Spec, temp_dir: Option<&Path>) -> Result<Roots, SandboxError> {
        let workspace = resolved(&spec.workspace)?;
        let mut writable = Vec::new();
        if spec.policy == SandboxPolicy::WorkspaceWrite {
            writable.push(workspace.clone());
            if let Some(dir) = temp_dir {
                writable.push(resolved(dir)?);
            }
            for extra in &spec.writable {
                writable.push(resolved(extra)?);
            }
        }
        let mut readable: Vec<PathBuf> = SYSTEM_READABLE
            .iter()
            .map(Path::new)
            .filter(|p| p.exists())
            .filter_map(|p| p.canonicalize().ok())
            .collect();
        readable.push(workspace);
        for extra in &spec.readable {
            readable.push(resolved(extra)?);
        }
        readable.extend(writable.iter().cloned());
        dedup(&mut readable);
        dedup(&mut writable);
        let devices = DEVICES_WRITABLE
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect();
        Ok(Roots {
            readable,
            writable,
            devices,
        })
    }

    /// Refuses a hidden path that lies in (or holds) a readable root: Landlock allows a whole
    /// tree or none of it.
    pub(crate) fn refuse_exposed(&self, hidden: &[PathBuf]) -> Result<(), SandboxError> {
        for path in hidden {
            // A path that does not exist yet: its nearest existing ancestor resolved (a
            // symlink there would otherwise hide where it lies), the rest as written.
            let path = resolved_as_far_as_it_exists(path);
            for root in &self.readable {
                if path.starts_with(root) || root.starts_with(&path) {
                    return Err(SandboxError::Exposed {
                        hidden: path.display().to_string(),
                        root: root.display().to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    pub(crate) fn writable_strings(&self) -> Vec<String> {
        strings(&self.writable)
    }

    pub(crate) fn readable_strings(&self) -> Vec<String> {
        strings(&self.readable)
    }
}

/// The per-session temporary directory, 0700, removed with the sandbox.
pub(crate) fn make_temp_dir(label: &str) -> Result<tempfile::TempDir, SandboxError> {
    let dir = std::env::temp_dir();
    tempfile::Builder::new()
        .prefix(&format!("tooljournal-{label}-"))
        .tempdir_in(&dir)
        .map_err(|source| SandboxError::TempDir {
            dir: dir.display().to_string(),
            source,
        })
}

fn resolved(path: &Path) -> Result<PathBuf, SandboxError> {
    path.canonicalize().map_err(|source| SandboxError::Root {
        path: path.display().to_string(),
        source,
    })
}

fn resolved_as_far_as_it_exists(path: &Path) -> PathBuf {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut rest = Vec::new();
    let mut at = path.as_path();
    loop {
        if let Ok(resolved) = at.canonicalize() {
            return rest.iter().rev().fold(resolved, |p, c| p.join(c));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                at = parent;
            }
            _ => return path,
        }
    }
}

/// Drops roots that another root already holds, keeping the order.
fn dedup(roots: &mut Vec<PathBuf>) {
    let all = roots.clone();
    let mut kept: Vec<PathBuf> = Vec::new();
    for root in all {
        let held = roots_hold(&kept, &root);
        if !held {
            kept.retain(|k| !k.starts_with(&root));
            kept.push(root);
        }
    }
    *roots = kept;
}

fn roots_hold(roots: &[PathBuf], path: &Path) -> bool {
    roots.iter().any(|r| path.starts_with(r))
}

fn strings(paths: &[PathBuf]) -> Vec<String> {
    paths.iter().map(|p| p.display().to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_inside_the_workspace_is_refused_and_one_beside_it_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join(".journal")).unwrap();
        std::fs::create_dir_all(dir.path().join("journal")).unwrap();
        let spec = Spec::new(SandboxPolicy::WorkspaceWrite, &ws);
        let roots = Roots::resolve(&spec, None).unwrap();
        let inside = roots.refuse_exposed(&[ws.join(".journal")]).unwrap_err();
        assert!(
            inside.to_string().contains(".journal lies inside"),
            "{inside}"
        );
        roots.refuse_exposed(&[dir.path().join("journal")]).unwrap();
        // A hidden directory holding the workspace exposes nothing less.
        assert!(roots.refuse_exposed(&[dir.path().to_owned()]).is_err());
        // Nor one not made yet behind a link that leads into it.
        std::os::unix::fs::symlink(&ws, dir.path().join("link")).unwrap();
        let behind = roots.refuse_exposed(&[dir.path().join("link/new/journal")]);
        assert!(behind.is_err(), "{behind:?}");
    }

    #[test]
    fn read_only_writes_nothing_and_nested_roots_are_merged() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = Spec::new(SandboxPolicy::ReadOnly, dir.path());
        spec.readable.push(dir.path().join("."));
        let roots = Roots::resolve(&spec, None).unwrap();
        assert!(roots.writable.is_empty());
        let ws = dir.path().canonicalize().unwrap();
        assert_eq!(roots.readable.iter().filter(|r| **r == ws).count(), 1);
        assert!(roots
            .readable
            .iter()
            .all(|r| !r.starts_with("/tmp") || *r == ws));
    }
}
