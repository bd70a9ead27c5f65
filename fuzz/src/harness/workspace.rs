//! A real workspace directory as an [`Observer`]'s world: what `tooljournal fuzz` checks the
//! truth property against when it runs a transcript with the real built-in tools.
//!
//! The world is the content (sha256) of the files the transcript's `write` and `edit` calls
//! name, nothing else. The model of a call's effect is its journaled evidence: a started
//! `write` or `edit` records [`Evidence::FileReplace`] (the path, and the hash of the bytes it
//! will write), so applying the call sets that file to that hash. Limits, said plainly:
//!
//! - a call the model cannot see into (`bash`, an MCP tool that is not read-only) may have
//!   changed any watched file: applying it leaves every watched file in [`FileState::AnyState`],
//!   which equals whatever is there, until a later `write` or `edit` sets it again (the check
//!   after such a call is only as strong as the calls after it);
//! - a crash is a process crash for the files: what the tools handed the operating system
//!   stays. The workspace's power loss is not simulated (the journal's is, on the simulated
//!   disk), so [`Observer::crash`] drops nothing;
//! - a path is checked where the transcript names it, below a handle on the workspace and
//!   following no symlink, as the file tools are confined: a symlink is recorded as the link (a
//!   write through it lands on, and is recorded by evidence for, its target), a path through
//!   one as reached through a symlink, never read; a file larger than the tools edit is told
//!   by its size, never read. The template is copied the same way: links as links, nothing
//!   outside it read.

use super::observe::{CallView, Observer};
use confine::beneath::{is_symlink_refusal, open_beneath, open_root};
use runtime::event::Evidence;
use runtime::fs::EDIT_BYTES_MAX;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

/// The tools whose calls name the files a [`WorkspaceWorld`] watches.
pub const FILE_TOOLS: [&str; 2] = ["write", "edit"];

/// A workspace directory, reset from a template before every session and observed by the
/// content of some of its files.
#[derive(Debug, Clone)]
pub struct WorkspaceWorld {
    template: Option<PathBuf>,
    dir: PathBuf,
    /// Workspace-relative, normalised (see [`normalise`]), sorted, without duplicates.
    paths: Vec<String>,
    /// Tools that change nothing: applying their calls leaves the files as they are.
    read_only: Vec<String>,
}

/// The files a [`WorkspaceWorld`] compares: each watched path and what it holds.
pub type Files = BTreeMap<String, FileState>;

/// What a watched path holds, as the truth property compares it.
#[derive(Debug, Clone, Eq)]
pub enum FileState {
    /// Nothing is there.
    Absent,
    /// A regular file; the sha256 (hex) of its content.
    Sha256(String),
    /// Something else, in words (a directory, a symlink, a file that cannot be read): never
    /// equal to a file.
    Other(String),
    /// A call the model cannot see into may have changed it: equal to any state (only ever
    /// made by [`Observer::apply`], never found on disk).
    AnyState,
}

impl PartialEq for FileState {
    fn eq(&self, other: &FileState) -> bool {
        match (self, other) {
            (FileState::AnyState, _) | (_, FileState::AnyState) => true,
            (FileState::Absent, FileState::Absent) => true,
            (FileState::Sha256(a), FileState::Sha256(b)) => a == b,
            (FileState::Other(a), FileState::Other(b)) => a == b,
            _ => false,
        }
    }
}

impl WorkspaceWorld {
    /// The workspace `dir`, which [`Observer::reset`] fills with a copy of `template`'s tree (an
    /// empty directory without one), watching `paths` (relative to the workspace; a path that
    /// could not be in it, absolute or with `..`, is left out: the file tools refuse it).
    pub fn new(template: Option<PathBuf>, dir: PathBuf, paths: Vec<String>) -> WorkspaceWorld {
        let mut paths: Vec<String> = paths.iter().filter_map(|p| normalise(p)).collect();
        paths.sort();
        paths.dedup();
        WorkspaceWorld {
            template,
            dir,
            paths,
            read_only: Vec::new(),
        }
    }

    /// The tools (besides `write` and `edit`) that change nothing: every other tool's call may
    /// have changed any watched file ([`FileState::AnyState`]).
    pub fn reading_only(mut self, tools: impl IntoIterator<Item = String>) -> WorkspaceWorld {
        self.read_only = tools.into_iter().collect();
        self
    }

    /// The watched paths, normalised.
    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    /// [`Observer::reset`], saying what went wrong: empties `dir` (creating it if it is
    /// missing; the directory itself stays, so a tool holding a handle on it keeps working)
    /// and copies the template's tree into it.
    pub fn try_reset(&self) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                fs::remove_dir_all(entry.path())?;
            } else {
                fs::remove_file(entry.path())?;
            }
        }
        match &self.template {
            Some(template) => copy_tree(template, &self.dir),
            None => Ok(()),
        }
    }
}

impl Observer for WorkspaceWorld {
    type Snapshot = Files;

    /// # Panics
    ///
    /// When the workspace cannot be emptied or the template copied: a case run on a world
    /// other than the template's would check nothing true. Call [`WorkspaceWorld::try_reset`]
    /// first to report such an error instead.
    fn reset(&self) {
        if let Err(e) = self.try_reset() {
            panic!(
                "cannot reset the workspace {} from {}: {e}",
                self.dir.display(),
                self.template
                    .as_deref()
                    .map_or("nothing".into(), |t| t.display().to_string())
            );
        }
    }

    fn snapshot(&self) -> Files {
        let root = match open_root(&self.dir) {
            Ok(root) => root,
            Err(e) => {
                let gone = FileState::Other(format!("the workspace cannot be opened: {e}"));
                return self
                    .paths
                    .iter()
                    .map(|p| (p.clone(), gone.clone()))
                    .collect();
            }
        };
        self.paths
            .iter()
            .map(|p| (p.clone(), file_state(root.as_fd(), p)))
            .collect()
    }

    fn apply(&self, state: &mut Files, call: &CallView<'_>) {
        if self.read_only.iter().any(|t| t == call.tool) {
            return;
        }
        if !FILE_TOOLS.contains(&call.tool) {
            for watched in state.values_mut() {
                *watched = FileState::AnyState;
            }
            return;
        }
        // A file tool's call that recorded no evidence (a path that is not UTF-8, a file it
        // could not read first): whatever it did to the path it names is unknown.
        if call.evidence.is_empty() {
            let named = call
                .args
                .get("path")
                .and_then(|p| p.as_str())
                .and_then(normalise);
            if let Some(watched) = named.and_then(|p| state.get_mut(&p)) {
                *watched = FileState::AnyState;
            }
        }
        for evidence in call.evidence {
            #[allow(unreachable_patterns)] // Evidence may grow kinds that touch no file.
            let (path, after) = match evidence {
                Evidence::FileReplace {
                    path, after_sha256, ..
                } => (path, after_sha256),
                _ => continue,
            };
            // Evidence paths are relative to the workspace, as the tools show them.
            if let Some(watched) = normalise(path).and_then(|p| state.get_mut(&p)) {
                *watched = FileState::Sha256(after.clone());
            }
        }
    }

    // `crash`: the default (nothing lost). The files are real: a process crash keeps what the
    // tools handed the OS, and the workspace's power loss is not simulated.
}

/// The paths the `write` and `edit` calls of `turns` name (their `path` argument), as a
/// [`WorkspaceWorld`] watches them.
pub fn written_paths(turns: &[super::Turn]) -> Vec<String> {
    let mut paths: Vec<String> = turns
        .iter()
        .flat_map(|t| &t.steps)
        .flat_map(|s| &s.calls)
        .filter(|c| FILE_TOOLS.contains(&c.tool.as_str()))
        .filter_map(|c| {
            let args: serde_json::Value = serde_json::from_str(&c.arguments).ok()?;
            normalise(args.get("path")?.as_str()?)
        })
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// `path` as the file tools show it: relative, `.` components dropped, `/`-separated. `None`
/// for a path they refuse (empty, absolute, or with `..`).
fn normalise(path: &str) -> Option<String> {
    let mut parts = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str()?),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The largest file the world hashes: what the file tools edit ([`EDIT_BYTES_MAX`]). A larger
/// one is told by its size, never read (a template may hold anything).
const HASHED_BYTES_MAX: u64 = EDIT_BYTES_MAX;

/// What is at `rel` below the workspace `root` (a handle), following no symlink, as the file
/// tools are confined: a file's content's sha256, nothing, or what else is there in words.
fn file_state(root: BorrowedFd<'_>, rel: &str) -> FileState {
    let rel = Path::new(rel);
    let (parent, name) = match (rel.parent(), rel.file_name()) {
        (Some(parent), Some(name)) => (parent, name),
        _ => return FileState::Other("not a path below the workspace".to_owned()),
    };
    let dir = match open_beneath(
        root,
        parent,
        OFlags::PATH | OFlags::DIRECTORY,
        Mode::empty(),
    ) {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return FileState::Absent,
        Err(e) if is_symlink_refusal(&e) => {
            return FileState::Other("reached through a symlink, which is not followed".into())
        }
        Err(e) => return FileState::Other(format!("cannot be inspected: {e}")),
    };
    let stat = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(Errno::NOENT) => return FileState::Absent,
        Err(e) => return FileState::Other(format!("cannot be inspected: {e}")),
    };
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Symlink => {
            return FileState::Other(match rustix::fs::readlinkat(&dir, name, Vec::new()) {
                Ok(target) => format!("a symlink to {}", target.to_string_lossy()),
                Err(e) => format!("a symlink that cannot be read: {e}"),
            })
        }
        _ => return FileState::Other("not a regular file".to_owned()),
    }
    if stat.st_size as u64 > HASHED_BYTES_MAX {
        return FileState::Other(format!(
            "{} bytes, more than the {HASHED_BYTES_MAX} the file tools edit: not read",
            stat.st_size
        ));
    }
    let read = || -> io::Result<Vec<u8>> {
        let fd = rustix::fs::openat(&dir, name, OFlags::RDONLY | OFlags::NOFOLLOW, Mode::empty())?;
        let mut bytes = Vec::new();
        fs::File::from(fd)
            .take(HASHED_BYTES_MAX + 1)
            .read_to_end(&mut bytes)?;
        Ok(bytes)
    };
    match read() {
        Ok(bytes) if bytes.len() as u64 > HASHED_BYTES_MAX => FileState::Other(format!(
            "more than the {HASHED_BYTES_MAX} bytes the file tools edit: not read"
        )),
        Ok(bytes) => FileState::Sha256(runtime::sha256_hex(&bytes)),
        Err(e) => FileState::Other(format!("cannot be read: {e}")),
    }
}

/// Copies the tree under `from` into the existing directory `to`: directories, regular files
/// (with their permissions) and symlinks (as links). Every entry is opened relative to its
/// directory's handle following no symlink, so nothing outside the template is ever read, even
/// if the template changes while it is copied. Anything else (a FIFO, a socket) is refused:
/// copying it would block or mean nothing.
fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    let dir = rustix::fs::open(
        from,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| in_path(from, e.into()))?;
    copy_dir(dir, from, to, 0)
}

/// Deepest a template is copied (each level holds one open directory handle), as the file
/// tools' walk.
const TEMPLATE_DEPTH_MAX: usize = 256;

/// [`copy_tree`] of the directory `dir` (shown as `shown`), `depth` levels below the template.
fn copy_dir(dir: OwnedFd, shown: &Path, to: &Path, depth: usize) -> io::Result<()> {
    if depth > TEMPLATE_DEPTH_MAX {
        return Err(in_path(
            shown,
            io::Error::other(format!("deeper than {TEMPLATE_DEPTH_MAX} directories")),
        ));
    }
    let entries = rustix::fs::Dir::read_from(&dir).map_err(|e| in_path(shown, e.into()))?;
    for entry in entries {
        let entry = entry.map_err(|e| in_path(shown, e.into()))?;
        let name = std::ffi::OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        let source = shown.join(name);
        let target = to.join(name);
        let stat = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| in_path(&source, e.into()))?;
        let at = |flags: OFlags| {
            rustix::fs::openat(
                &dir,
                name,
                flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| in_path(&source, e.into()))
        };
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => {
                let sub = at(OFlags::RDONLY | OFlags::DIRECTORY)?;
                fs::create_dir(&target).map_err(|e| in_path(&target, e))?;
                copy_dir(sub, &source, &target, depth + 1)?;
            }
            FileType::Symlink => {
                let link = rustix::fs::readlinkat(&dir, name, Vec::new())
                    .map_err(|e| in_path(&source, e.into()))?;
                let link = std::ffi::OsStr::from_bytes(link.to_bytes());
                std::os::unix::fs::symlink(link, &target).map_err(|e| in_path(&target, e))?;
            }
            FileType::RegularFile => {
                let mut file = fs::File::from(at(OFlags::RDONLY)?);
                let mut copy = fs::File::create_new(&target).map_err(|e| in_path(&target, e))?;
                io::copy(&mut file, &mut copy).map_err(|e| in_path(&source, e))?;
                let mode = fs::Permissions::from_mode(stat.st_mode & 0o7777);
                copy.set_permissions(mode)
                    .map_err(|e| in_path(&target, e))?;
            }
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{}: not a regular file, directory or symlink",
                        source.display()
                    ),
                ))
            }
        }
    }
    Ok(())
}

/// `e`, naming the path it happened at.
fn in_path(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn sha(text: &str) -> FileState {
        FileState::Sha256(runtime::sha256_hex(text.as_bytes()))
    }

    fn replace(path: &str, after: &str) -> Evidence {
        Evidence::FileReplace {
            path: path.to_owned(),
            before_sha256: None,
            after_sha256: runtime::sha256_hex(after.as_bytes()),
        }
    }

    fn view<'a>(evidence: &'a [Evidence], args: &'a Value) -> CallView<'a> {
        CallView {
            id: "c1",
            tool: "write",
            args,
            evidence,
            idempotency_key: "tj1-x",
        }
    }

    fn template() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        fs::write(t.path().join("notes.txt"), "TODO\n").unwrap();
        fs::create_dir_all(t.path().join("src/deep")).unwrap();
        fs::write(t.path().join("src/deep/lib.rs"), "fn f() {}\n").unwrap();
        std::os::unix::fs::symlink("notes.txt", t.path().join("link")).unwrap();
        t
    }

    #[test]
    fn reset_empties_the_directory_and_copies_the_template_tree() {
        let t = template();
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("ws");
        let world = WorkspaceWorld::new(Some(t.path().to_owned()), dir.clone(), vec![]);
        world.reset();
        fs::write(dir.join("left-over.txt"), "x").unwrap();
        fs::create_dir_all(dir.join("made/by/bash")).unwrap();
        fs::write(dir.join("notes.txt"), "changed").unwrap();
        world.reset();
        let mut names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["link", "notes.txt", "src"]);
        assert_eq!(fs::read_to_string(dir.join("notes.txt")).unwrap(), "TODO\n");
        assert_eq!(
            fs::read_to_string(dir.join("src/deep/lib.rs")).unwrap(),
            "fn f() {}\n"
        );
        assert_eq!(
            fs::read_link(dir.join("link")).unwrap(),
            Path::new("notes.txt")
        );
    }

    #[test]
    fn reset_without_a_template_leaves_an_empty_directory_and_a_bad_template_is_an_error() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("ws");
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("a"), "x").unwrap();
        WorkspaceWorld::new(None, dir.clone(), vec![]).reset();
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
        let missing = root.path().join("no-such-template");
        let e = WorkspaceWorld::new(Some(missing.clone()), dir, vec![])
            .try_reset()
            .unwrap_err();
        assert!(
            e.to_string().contains(&missing.display().to_string()),
            "{e}"
        );
    }

    #[test]
    fn a_snapshot_holds_exactly_the_watched_paths_hashed_or_absent() {
        let t = template();
        let root = tempfile::tempdir().unwrap();
        let world = WorkspaceWorld::new(
            Some(t.path().to_owned()),
            root.path().join("ws"),
            vec![
                "./notes.txt".into(),
                "new/file.txt".into(),
                "notes.txt".into(),
                "../outside".into(),
                "/abs".into(),
                "link".into(),
                "src".into(),
            ],
        );
        world.reset();
        let snapshot = world.snapshot();
        let expected: Files = [
            (
                "link".to_owned(),
                FileState::Other("a symlink to notes.txt".to_owned()),
            ),
            ("new/file.txt".to_owned(), FileState::Absent),
            ("notes.txt".to_owned(), sha("TODO\n")),
            (
                "src".to_owned(),
                FileState::Other("not a regular file".to_owned()),
            ),
        ]
        .into_iter()
        .collect();
        assert_eq!(snapshot, expected);
    }

    #[test]
    fn apply_sets_each_watched_file_its_evidence_names_to_the_hash_written() {
        let root = tempfile::tempdir().unwrap();
        let world = WorkspaceWorld::new(
            None,
            root.path().join("ws"),
            vec!["a.txt".into(), "sub/b.txt".into()],
        );
        world.reset();
        let mut state = world.snapshot();
        assert!(
            state.values().all(|f| matches!(f, FileState::Absent)),
            "{state:?}"
        );
        let args = Value::Null;
        let evidence = [
            replace("a.txt", "one"),
            replace("./sub/b.txt", "two"),
            replace("unwatched.txt", "three"),
        ];
        world.apply(&mut state, &view(&evidence, &args));
        let expected: Files = [
            ("a.txt".to_owned(), sha("one")),
            ("sub/b.txt".to_owned(), sha("two")),
        ]
        .into_iter()
        .collect();
        assert_eq!(state, expected);
        // The model agrees with the files a real write leaves.
        fs::write(root.path().join("ws/a.txt"), "one").unwrap();
        fs::create_dir(root.path().join("ws/sub")).unwrap();
        fs::write(root.path().join("ws/sub/b.txt"), "two").unwrap();
        assert_eq!(world.snapshot(), expected);
        // A write that recorded no evidence leaves the file it names unknown, and only that one.
        let named = serde_json::json!({"path": "a.txt"});
        world.apply(&mut state, &view(&[], &named));
        assert!(matches!(state["a.txt"], FileState::AnyState), "{state:?}");
        assert!(
            matches!(state["sub/b.txt"], FileState::Sha256(_)),
            "{state:?}"
        );
    }

    #[test]
    fn a_call_the_model_cannot_see_into_leaves_every_file_unknown_a_read_only_one_none() {
        let root = tempfile::tempdir().unwrap();
        let world = WorkspaceWorld::new(None, root.path().join("ws"), vec!["a.txt".into()])
            .reading_only(["read".to_owned()]);
        world.reset();
        let initial = world.snapshot();
        let args = Value::Null;
        let call = |tool| CallView {
            tool,
            ..view(&[], &args)
        };
        let mut state = initial.clone();
        world.apply(&mut state, &call("read"));
        assert!(matches!(state["a.txt"], FileState::Absent), "{state:?}");
        world.apply(&mut state, &call("bash"));
        assert!(matches!(state["a.txt"], FileState::AnyState), "{state:?}");
        // Unknown equals whatever is there; a known state does not.
        fs::write(root.path().join("ws/a.txt"), "changed by bash").unwrap();
        assert_eq!(state, world.snapshot());
        assert_ne!(initial, world.snapshot());
    }

    #[test]
    fn written_paths_are_the_path_arguments_of_write_and_edit_calls() {
        use crate::harness::{Call, Step, Turn};
        use runtime::event::StopReason;
        let call = |id: &str, tool: &str, arguments: &str| Call {
            id: id.into(),
            tool: tool.into(),
            arguments: arguments.into(),
            approval: None,
            answer: None,
        };
        let turns = vec![Turn {
            user: "u".into(),
            steps: vec![Step {
                text: String::new(),
                calls: vec![
                    call("1", "write", r#"{"path":"./b.txt","content":"x"}"#),
                    call(
                        "2",
                        "edit",
                        r#"{"path":"a.txt","old_string":"x","new_string":"y"}"#,
                    ),
                    call("3", "read", r#"{"path":"c.txt"}"#),
                    call("4", "write", r#"{"path":"b.txt","content":"y"}"#),
                    call("5", "write", "{not json"),
                    call("6", "bash", r#"{"command":"echo > d.txt","path":"d.txt"}"#),
                ],
                stop_reason: StopReason::ToolUse,
                cancel: None,
            }],
        }];
        assert_eq!(written_paths(&turns), ["a.txt", "b.txt"]);
    }
}
