//! `recover repair --from codex|pi FILE --out FILE2`: another agent's session file made
//! resumable, as a copy beside it.
//!
//! The original is never opened for writing, and nothing that exists is overwritten: the copy
//! and its `.quarantine` are new files, each written whole unnamed beside its destination and
//! then linked in (`crate::output`), so a failed run leaves neither half written. What the copy
//! says is `import`'s ([`import::repair_into`]), checked before it is given its name: read
//! again, it leaves no call the agent replays without an output.
//!
//! Why streamed: a session file may hold 1 GiB. The original is read where it lies, a line at
//! a time, and the copy written as it is made, so a repair holds the file's index, never the
//! file (`bench bounds`: `repair_file`).

use crate::output::{Kind, Output, OutputError};
use import::{Agent, CopyError, Input, Repair};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// What a repair wrote.
#[derive(Debug)]
pub struct RepairReport {
    /// The repair itself.
    pub repaired: Repair,
    /// The quarantine file, when lines were moved out.
    pub quarantine: Option<PathBuf>,
}

/// Why a repair wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum RepairError {
    /// The session file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file could not be read as a session file: too large, a line too long, changed
    /// while it was read, or its texts could not be kept aside.
    #[error("{}: {source}", path.display())]
    Refused {
        /// The file.
        path: PathBuf,
        /// Why.
        source: import::ReadError,
    },
    /// The session file is not a regular file (a directory, a FIFO, a device).
    #[error("{}: not a regular file", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// `--out` names the session file itself.
    #[error("{}: --out names the session file itself; the original is never modified", path.display())]
    SameFile {
        /// The file.
        path: PathBuf,
    },
    /// A file to be written exists already.
    #[error("{}: exists; a repair never overwrites a file (remove it or choose another --out)", path.display())]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// Writing failed.
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        /// The file asked for.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Creating, naming or syncing the copy failed (the message names what and where).
    #[error(transparent)]
    Output(OutputError),
    /// The repair broke its own promise (a bug).
    #[error("{}: the repaired copy was not written: {why} (a bug: please report it)", path.display())]
    Unkept {
        /// The file.
        path: PathBuf,
        /// The promise broken.
        why: String,
    },
}

/// `out`'s quarantine: `FILE2.quarantine`.
pub fn quarantine_path(out: &Path) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(".quarantine");
    out.with_file_name(name)
}

/// Repairs `file`, a session file of `agent`, into `out` (and `out.quarantine` when lines are
/// moved out).
pub fn repair_file(agent: Agent, file: &Path, out: &Path) -> Result<RepairReport, RepairError> {
    if same_file(file, out) {
        return Err(RepairError::SameFile {
            path: out.to_owned(),
        });
    }
    let quarantine = quarantine_path(out);
    for path in [out, quarantine.as_path()] {
        if path.symlink_metadata().is_ok() {
            return Err(RepairError::Exists {
                path: path.to_owned(),
            });
        }
    }
    let original = open_session_file(file)?;
    let input = Input::file(&original).map_err(|e| refused(file, e))?;
    let made_copy = |source| RepairError::Write {
        path: out.to_owned(),
        source,
    };
    let moved_error = |source| RepairError::Write {
        path: quarantine.clone(),
        source,
    };
    let mut copy = Output::create(out, Kind::New).map_err(not_written)?;
    let mut moved_out = Output::create(&quarantine, Kind::New).map_err(not_written)?;
    let repaired = {
        let mut c = BufWriter::new(&mut copy);
        let mut q = BufWriter::new(&mut moved_out);
        let made = import::repair_into(agent, input, &mut c, &mut q).map_err(|e| match e {
            CopyError::Read(e) => refused(file, e),
            CopyError::Copy(source) => made_copy(source),
            CopyError::Quarantine(source) => moved_error(source),
        })?;
        c.flush().map_err(made_copy)?;
        q.flush().map_err(moved_error)?;
        made
    };
    let written = Input::File {
        file: copy.file(),
        len_bytes: repaired.copy_bytes,
    };
    import::check_repair_input(agent, written).map_err(|why| RepairError::Unkept {
        path: out.to_owned(),
        why,
    })?;
    let quarantine = (repaired.quarantine_bytes > 0).then_some(quarantine);
    // An empty quarantine is given up: its unnamed file vanishes.
    let moved_out = match &quarantine {
        Some(_) => Some(moved_out.commit().map_err(not_written)?),
        None => None,
    };
    if let Err(e) = copy.commit().map_err(not_written) {
        if let Some(q) = moved_out {
            // Ours, written a moment ago (and only while it still is): no half result is left.
            q.remove();
        }
        return Err(e);
    }
    Ok(RepairReport {
        repaired,
        quarantine,
    })
}

fn refused(file: &Path, source: import::ReadError) -> RepairError {
    match source {
        import::ReadError::Io(source) => RepairError::Read {
            path: file.to_owned(),
            source,
        },
        source => RepairError::Refused {
            path: file.to_owned(),
            source,
        },
    }
}

/// A session file opened for reading: only a regular file, never one past
/// [`import::FILE_BYTES_MAX`] (what it holds is read through [`Input::file`], which reads only
/// the size it has now: a file that grows while it is read is never read without bound).
pub fn open_session_file(file: &Path) -> Result<std::fs::File, RepairError> {
    let read_error = |source| RepairError::Read {
        path: file.to_owned(),
        source,
    };
    let meta = std::fs::metadata(file).map_err(read_error)?;
    // A FIFO would block and a device would not end: only a regular file is a session file.
    if !meta.is_file() {
        return Err(RepairError::NotAFile {
            path: file.to_owned(),
        });
    }
    if meta.len() > import::FILE_BYTES_MAX {
        return Err(refused(
            file,
            import::ReadError::TooLarge {
                size_bytes: meta.len(),
            },
        ));
    }
    std::fs::File::open(file).map_err(read_error)
}

/// Whether `out` names `file` (a link to it included).
fn same_file(file: &Path, out: &Path) -> bool {
    match (std::fs::canonicalize(file), std::fs::canonicalize(out)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// A destination refused or not written, in a repair's words (`crate::output` creates each
/// new file unnamed beside it, then links it in, which fails if anything has the name).
fn not_written(e: OutputError) -> RepairError {
    match e {
        OutputError::Exists { path }
        | OutputError::Symlink { path }
        | OutputError::NotAFile { path } => RepairError::Exists { path },
        e @ OutputError::Io { .. } => RepairError::Output(e),
    }
}
