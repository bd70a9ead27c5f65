//! The probe (`recover classify --probe WORKSPACE`): for a call whose outcome is unknown, a look
//! at the world, compared with what the call recorded before it acted (its `started`'s
//! evidence, its process groups), and a verdict with that evidence in plain words.
//!
//! Evidence is not proof (a file can be changed back, a process can have finished its work and
//! lingered), so the call stays `TOOL_OUTCOME_UNKNOWN` whatever the verdict. The probe never
//! runs anything and never writes or creates anything: it reads only the paths the journal
//! names, confined like the file tools (the path resolved by [`Workspace::resolve`], which
//! refuses `..`, absolute paths and symlinks that lead out, then opened below a handle on the
//! workspace's root following no symlink at all), and hashes what it finds, streamed, up to
//! [`PROBE_FILE_BYTES_MAX`] bytes. What is not a plain file (a directory, a special file) is
//! `changed`, with the reason in the probe's `detail`: it is neither of the two states the call
//! recorded. A path the probe refuses to look at (one that leads out of the workspace, a
//! symlink in its way: the file tools follow a symlink that stays inside, the probe follows
//! none) is `not_looked`, saying why: nothing was seen, so nothing is claimed. A plain file it
//! cannot compare (unreadable, too large) is `no_evidence`, saying why: it may still be either.

use crate::bound::{who_could_write, Among};
use confine::{beneath, Workspace};
use events::event::{CallRef, Evidence};
use events::replay::CallReplay;
use events::ErrorCode;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Largest file the probe hashes, in bytes (1 GiB: a few seconds of hashing). A larger file is
/// not compared and is reported `no_evidence`, saying so: it may be the state before (a write
/// that replaces a large file), and reading more than this to find out is not worth it.
pub(crate) const PROBE_FILE_BYTES_MAX: u64 = 1 << 30;

/// Bytes read at a time while hashing.
const CHUNK_BYTES: usize = 64 << 10;

/// What the probe found, as `classify --json` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every file the call would replace holds exactly what the call would have written.
    Applied,
    /// Every file the call would replace still holds what it held before the call started (or
    /// is still absent).
    NotApplied,
    /// Neither: something else changed a file since (or it is no longer a plain file).
    Changed,
    /// The probe refused to look at a file (its path leads out of the workspace, or a symlink
    /// stands in it), so it says nothing of it either way.
    NotLooked,
    /// A process group the call started is still alive.
    Running,
    /// The call recorded nothing that can be checked.
    NoEvidence,
}

impl Verdict {
    /// As `--json` and the table spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Applied => "applied",
            Verdict::NotApplied => "not_applied",
            Verdict::Changed => "changed",
            Verdict::NotLooked => "not_looked",
            Verdict::Running => "running",
            Verdict::NoEvidence => "no_evidence",
        }
    }
}

/// One call's probe: the verdict and the evidence it rests on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// What the probe found.
    pub verdict: Verdict,
    /// The file compared (workspace-relative, as the journal has it); for several, the one the
    /// verdict rests on (the first that differs, else the first).
    pub path: Option<String>,
    /// sha256 (hex) the file would have after the call.
    pub expected_sha256: Option<String>,
    /// sha256 (hex) the file had before the call started; `None` when it was absent (or when
    /// there is no file).
    pub before_sha256: Option<String>,
    /// sha256 (hex) of what the file holds now; `None` when it is absent or not a readable
    /// plain file (`detail` says which).
    pub found_sha256: Option<String>,
    /// The call's process group that is still running (`running`).
    pub pgid: Option<u32>,
    /// What was found, in plain words.
    pub detail: String,
    /// Each file found changed (as journaled), with the other calls of unknown outcome whose
    /// journaled bound it lies outside of: what `detail` says in words, kept for checks that
    /// hold it to the truth (the fuzz harness's world). Not in `--json`: the words carry it.
    #[serde(skip)]
    pub ruled_out: Vec<(String, Vec<CallRef>)>,
}

impl Probe {
    /// The evidence as the model is told it, in the result of a call whose outcome is unknown,
    /// with the caution that evidence is not proof (where there is any).
    pub fn words(&self) -> String {
        const NOT_PROOF: &str = "this is evidence, not proof, so the outcome is still unknown";
        match self.verdict {
            Verdict::Applied | Verdict::NotApplied | Verdict::Changed => format!(
                "a probe of the workspace found that {}; {NOT_PROOF}",
                self.detail
            ),
            Verdict::Running => format!("a probe found that {}; {NOT_PROOF}", self.detail),
            Verdict::NotLooked | Verdict::NoEvidence => {
                format!("no probe was possible: {}", self.detail)
            }
        }
    }
}

/// The workspace to probe could not be opened (it does not exist, is not a directory, cannot
/// be read).
#[derive(Debug, thiserror::Error)]
#[error("{}: cannot probe this workspace: {source}", workspace.display())]
pub struct WorkspaceError {
    /// The workspace asked for.
    pub workspace: PathBuf,
    /// Why it could not be opened.
    #[source]
    pub source: std::io::Error,
}

/// A workspace opened for probing: its root resolved once, and a handle on it every read goes
/// through.
#[derive(Debug)]
pub struct Prober {
    ws: Workspace,
    root_fd: OwnedFd,
}

/// What stands at a journaled path now.
enum Found {
    /// Nothing (nor its directory).
    Absent,
    /// A plain file with these contents' sha256.
    File(String),
    /// Something that is neither state: not a plain file.
    Other(String),
    /// Beyond where the probe looks (outside the workspace, behind a symlink), and why: it was
    /// not looked at, so nothing can be said of it either way.
    NotLooked(String),
    /// A plain file the probe could not compare (too large, unreadable), and why: nothing can
    /// be said of it either way.
    Uncompared(String),
}

/// One evidence item's own verdict and what it rests on.
struct Item {
    verdict: Verdict,
    path: String,
    before: Option<String>,
    after: String,
    found: Option<String>,
    detail: String,
    /// The calls whose bound rules out having written the file, when it changed.
    ruled_out: Vec<CallRef>,
}

impl Prober {
    /// Opens the workspace at `root` for probing (nothing is created).
    pub fn open(root: &Path) -> Result<Prober, WorkspaceError> {
        let failed = |source| WorkspaceError {
            workspace: root.to_path_buf(),
            source,
        };
        let ws = Workspace::new(root, &[]).map_err(failed)?;
        let root_fd = beneath::open_root(ws.root()).map_err(failed)?;
        Ok(Prober { ws, root_fd })
    }

    /// The workspace's root, canonicalized.
    pub fn root(&self) -> &Path {
        self.ws.root()
    }

    /// The call's probe: `running` while a process group it started lives; else, with file
    /// evidence, `applied`, `not_applied` or `changed`; else `no_evidence`.
    pub fn probe(&self, call: &CallReplay) -> Probe {
        self.probe_among(call, Among::default())
    }

    /// [`Prober::probe`], naming which of `peers` (other calls of unknown outcome that ran a
    /// process, with their bounds) could have written a file found changed. A path is compared
    /// with the bounds beneath the workspace the session ran in, not the probed copy's root
    /// (the roots name the former), unless the journal does not say where that was.
    pub(crate) fn probe_among(&self, call: &CallReplay, peers: Among<'_>) -> Probe {
        for process in &call.processes {
            if let Some(members) = events::process::still_running(process) {
                let plural = if members == 1 { "" } else { "es" };
                return Probe {
                    verdict: Verdict::Running,
                    path: None,
                    expected_sha256: None,
                    before_sha256: None,
                    found_sha256: None,
                    pgid: Some(process.pgid),
                    detail: format!(
                        "its process group {} is still running ({members} process{plural}), so \
                         it may still be changing the workspace",
                        process.pgid
                    ),
                    ruled_out: Vec::new(),
                };
            }
        }
        let items: Vec<Item> = call
            .evidence
            .iter()
            .filter_map(|e| match e {
                Evidence::FileReplace {
                    path,
                    before_sha256,
                    after_sha256,
                } => {
                    let mut item = self.compare(path, before_sha256.as_deref(), after_sha256);
                    if item.verdict == Verdict::Changed {
                        let root = peers.workspace.unwrap_or(self.ws.root());
                        let at = root.join(relative(path));
                        if let Some(who) = who_could_write(&at, &call.call, peers.calls) {
                            item.detail = format!("{}; {}", item.detail, who.words);
                            item.ruled_out = who.could_not;
                        }
                    }
                    Some(item)
                }
                Evidence::Sandbox(_) => None,
            })
            .collect();
        if items.is_empty() {
            let mut detail = if call.processes.is_empty() {
                "the call recorded nothing that can be checked".to_owned()
            } else {
                "the call recorded nothing that can be checked, and the process group it \
                 started has ended"
                    .to_owned()
            };
            // What it could have touched is all a bash call recorded: said, as no probe can.
            if let Some(bound) = crate::bound::of_call(call) {
                detail = format!("{detail}; as journaled before it ran, {}", bound.in_words());
            }
            return Probe {
                verdict: Verdict::NoEvidence,
                path: None,
                expected_sha256: None,
                before_sha256: None,
                found_sha256: None,
                pgid: None,
                detail,
                ruled_out: Vec::new(),
            };
        }
        combine(items)
    }

    /// One file's comparison: what it holds now against the hashes recorded before the act.
    fn compare(&self, path: &str, before: Option<&str>, after: &str) -> Item {
        let found = self.look(path);
        let shown = |h: &str| format!("sha256 {h}");
        let was = match before {
            Some(h) => format!("what it held before this call started ({})", shown(h)),
            None => "absent, as it was before this call started".to_owned(),
        };
        let (verdict, found_sha256, detail) = match found {
            Found::File(h) if h == after => (
                Verdict::Applied,
                Some(h),
                format!(
                    "{path} now holds exactly the content this call would have produced ({})",
                    shown(after)
                ),
            ),
            Found::File(h) if Some(h.as_str()) == before => (
                Verdict::NotApplied,
                Some(h),
                format!("{path} still holds exactly {was}"),
            ),
            Found::Absent if before.is_none() => {
                (Verdict::NotApplied, None, format!("{path} is still {was}"))
            }
            Found::File(h) => {
                let detail = format!(
                    "{path} holds neither {was} nor what this call would have produced ({}): it \
                     now holds {}, so something else changed it",
                    shown(after),
                    shown(&h)
                );
                (Verdict::Changed, Some(h), detail)
            }
            Found::Absent => (
                Verdict::Changed,
                None,
                format!(
                    "{path} is gone: it held neither {was} nor what this call would have \
                     produced ({}), so something else removed it",
                    shown(after)
                ),
            ),
            Found::Uncompared(why) => (
                Verdict::NoEvidence,
                None,
                format!("{path} could not be compared with what the call recorded: {why}"),
            ),
            Found::NotLooked(why) => (
                Verdict::NotLooked,
                None,
                format!(
                    "{path} was not looked at: {why}; so the probe says nothing of what it holds"
                ),
            ),
            Found::Other(why) => (
                Verdict::Changed,
                None,
                format!(
                    "{path} holds neither {was} nor what this call would have produced ({}): \
                     {why}",
                    shown(after)
                ),
            ),
        };
        Item {
            verdict,
            path: path.to_owned(),
            before: before.map(str::to_owned),
            after: after.to_owned(),
            found: found_sha256,
            detail,
            ruled_out: Vec::new(),
        }
    }

    /// What stands at `path` (workspace-relative, as journaled) now, read without following
    /// any symlink and without writing anything.
    fn look(&self, path: &str) -> Found {
        let rel = relative(path);
        // The tools' own check: `..`, absolute paths, symlinks that lead out are refused.
        match self.ws.resolve(path) {
            Ok(resolved) if resolved != self.ws.root().join(&rel) => {
                return Found::NotLooked(format!(
                    "a symlink stands in its path (it leads to {}), and the probe follows no \
                     symlink",
                    self.ws.relative(&resolved).display()
                ))
            }
            Ok(_) => {}
            Err(e) if e.code == ErrorCode::FsOutsideWorkspace => {
                return Found::NotLooked(format!(
                    "the probe reads only inside the workspace, and {}",
                    e.message
                ))
            }
            // Not a question of confinement (a file where a directory should be, a name too
            // long): the open below, which follows no symlink, finds what stands there.
            Err(_) => {}
        }
        // First a handle that reads nothing, to see what stands there: opening a FIFO or a
        // device to read it could block or act.
        let at = match self.open_below(&rel, OFlags::PATH) {
            Ok(fd) => fd,
            Err(e) => return not_opened(&e),
        };
        let stat = match rustix::fs::fstat(&at) {
            Ok(stat) => stat,
            Err(e) => return Found::Uncompared(format!("it cannot be inspected ({e})")),
        };
        if let Some(other) = not_a_plain_file(&stat) {
            return other;
        }
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
        // Without touching its access time where the file is ours to say so.
        let fd = match self.open_below(&rel, flags | OFlags::NOATIME) {
            Err(e) if e.raw_os_error() == Some(Errno::PERM.raw_os_error()) => {
                self.open_below(&rel, flags)
            }
            other => other,
        };
        let fd = match fd {
            Ok(fd) => fd,
            Err(e) => return not_opened(&e),
        };
        match rustix::fs::fstat(&fd) {
            Ok(now) if now.st_dev == stat.st_dev && now.st_ino == stat.st_ino => {}
            Ok(_) => return Found::Uncompared("it was replaced while the probe looked".into()),
            Err(e) => return Found::Uncompared(format!("it cannot be inspected ({e})")),
        }
        match hash_bounded(std::fs::File::from(fd)) {
            Ok(Some(hash)) => Found::File(hash),
            Ok(None) => Found::Uncompared(too_large()),
            Err(e) => Found::Uncompared(format!("it cannot be read ({e})")),
        }
    }

    fn open_below(&self, rel: &Path, flags: OFlags) -> std::io::Result<OwnedFd> {
        beneath::open_beneath(self.root_fd.as_fd(), rel, flags, Mode::empty())
    }
}

/// A journaled path's plain components: what the probe opens below the workspace's root.
fn relative(path: &str) -> PathBuf {
    Path::new(path)
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect()
}

/// Why a path could not be opened, as a finding (absence is a finding of its own).
fn not_opened(e: &std::io::Error) -> Found {
    if e.kind() == std::io::ErrorKind::NotFound {
        Found::Absent
    } else if beneath::is_symlink_refusal(e) {
        Found::NotLooked(
            "a symlink stands in its path (it appeared while the probe looked), and the probe \
             follows no symlink"
                .into(),
        )
    } else if e.raw_os_error() == Some(Errno::NOTDIR.raw_os_error()) {
        Found::Other("a file stands where its path needs a directory".into())
    } else {
        Found::Uncompared(format!("it cannot be opened ({e})"))
    }
}

/// A finding for what is not a plain file of a size the probe hashes; `None` for one it does.
fn not_a_plain_file(stat: &Stat) -> Option<Found> {
    let why =
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile if stat.st_size as u64 > PROBE_FILE_BYTES_MAX => {
                return Some(Found::Uncompared(too_large()))
            }
            FileType::RegularFile => return None,
            FileType::Directory => "a directory stands there now".into(),
            FileType::Symlink => return Some(Found::NotLooked(
                "a symlink stands there now (it appeared while the probe looked), and the probe \
                 follows no symlink"
                    .into(),
            )),
            _ => "something other than a plain file stands there now".into(),
        };
    Some(Found::Other(why))
}

fn too_large() -> String {
    format!(
        "it is larger than the {PROBE_FILE_BYTES_MAX} bytes the probe hashes, so it was not \
         compared"
    )
}

/// The sha256 (hex) of what `file` holds, streamed; `None` when it holds more than
/// [`PROBE_FILE_BYTES_MAX`] bytes (it may have grown since it was measured).
fn hash_bounded(file: std::fs::File) -> std::io::Result<Option<String>> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    let mut limited = file.take(PROBE_FILE_BYTES_MAX + 1);
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut total: u64 = 0;
    loop {
        let n = match limited.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += n as u64;
        if total > PROBE_FILE_BYTES_MAX {
            return Ok(None);
        }
        hasher.update(&buf[..n]);
    }
    Ok(Some(hex::encode(hasher.finalize())))
}

/// Several items' verdicts as one: all applied, all not applied, or else changed (resting on
/// the first item that is neither, or on the first when they disagree); a file not looked at
/// or not compared leaves nothing to say unless another changed.
fn combine(mut items: Vec<Item>) -> Probe {
    let all = |v: Verdict| items.iter().all(|i| i.verdict == v);
    let any = |v: Verdict| items.iter().any(|i| i.verdict == v);
    // A file in neither state decides; then one not looked at or not compared leaves nothing
    // to say; then the files agree, or they disagree.
    let verdict = if any(Verdict::Changed) {
        Verdict::Changed
    } else if any(Verdict::NotLooked) {
        Verdict::NotLooked
    } else if any(Verdict::NoEvidence) {
        Verdict::NoEvidence
    } else if all(Verdict::Applied) {
        Verdict::Applied
    } else if all(Verdict::NotApplied) {
        Verdict::NotApplied
    } else {
        Verdict::Changed
    };
    let count = items.len();
    let at = items
        .iter()
        .position(|i| i.verdict == verdict && verdict != Verdict::Applied)
        .unwrap_or(0);
    let detail = if count == 1 {
        std::mem::take(&mut items[0].detail)
    } else {
        let each: Vec<String> = items.iter().map(|i| i.detail.clone()).collect();
        let mixed = if verdict == Verdict::Changed && items[at].verdict != Verdict::Changed {
            "the files disagree: "
        } else {
            ""
        };
        format!("{mixed}{}", each.join("; "))
    };
    let ruled_out = items
        .iter_mut()
        .filter(|i| !i.ruled_out.is_empty())
        .map(|i| (i.path.clone(), std::mem::take(&mut i.ruled_out)))
        .collect();
    let item = items.swap_remove(at);
    Probe {
        verdict,
        path: Some(item.path),
        expected_sha256: Some(item.after),
        before_sha256: item.before,
        found_sha256: item.found,
        pgid: None,
        detail,
        ruled_out,
    }
}
