//! `recover repair --from codex|pi FILE --out FILE2`: another agent's session file made
//! resumable, as a copy beside it.
//!
//! The original is never opened for writing, and nothing that exists is overwritten: the copy
//! and its `.quarantine` are new files, each written whole unnamed beside its destination and
//! then linked in (`crate::output`), so a failed run leaves neither half written. What the copy says is `import`'s
//! ([`import::repair`]), checked before it is written: read again, it leaves no call the agent
//! replays without an output.

use crate::output::{Kind, Output, OutputError, Written};
use import::{Agent, Repaired};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What a repair wrote.
#[derive(Debug)]
pub struct RepairReport {
    /// The repair itself.
    pub repaired: Repaired,
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
    /// The file is too large to read.
    #[error("{}: {source}", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit it passed.
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
    let bytes = read_session_file(file)?;
    let repaired = import::repair(agent, &bytes).map_err(|source| RepairError::TooLarge {
        path: file.to_owned(),
        source,
    })?;
    import::check_repair(agent, &repaired).map_err(|why| RepairError::Unkept {
        path: out.to_owned(),
        why,
    })?;
    let quarantine = (!repaired.quarantine.is_empty()).then_some(quarantine);
    let moved_out = match &quarantine {
        Some(q) => Some(write_new(q, &repaired.quarantine)?),
        None => None,
    };
    if let Err(e) = write_new(out, &repaired.bytes) {
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

/// A session file's bytes, read whole: only a regular file, never past
/// [`import::FILE_BYTES_MAX`] (a file that grows while it is read included).
pub fn read_session_file(file: &Path) -> Result<Vec<u8>, RepairError> {
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
    let too_large = |size_bytes| RepairError::TooLarge {
        path: file.to_owned(),
        source: import::ReadError::TooLarge { size_bytes },
    };
    if meta.len() > import::FILE_BYTES_MAX {
        return Err(too_large(meta.len()));
    }
    let bytes = match read_bounded(file, meta.len()).map_err(read_error)? {
        Ok(bytes) => bytes,
        Err(source) => {
            return Err(RepairError::TooLarge {
                path: file.to_owned(),
                source,
            })
        }
    };
    if bytes.len() as u64 > import::FILE_BYTES_MAX {
        // It grew past the limit after its size was read.
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// At most one byte more than [`import::FILE_BYTES_MAX`] of `file`, read a line at a time: a
/// line longer than [`import::LINE_BYTES_MAX`] is refused once that much of it is read, and a
/// file that grows while it is read is never read without bound. `size_bytes` (the size the
/// file had) is reserved at once, so the bytes are held once, not grown by doubling.
fn read_bounded(
    file: &Path,
    size_bytes: u64,
) -> std::io::Result<Result<Vec<u8>, import::ReadError>> {
    use std::io::{BufRead, BufReader, Read};
    let mut bytes = Vec::new();
    // Under FILE_BYTES_MAX, checked by the caller: it fits a usize on every supported target.
    bytes.reserve_exact(usize::try_from(size_bytes).unwrap_or(0));
    let mut reader = BufReader::new(std::fs::File::open(file)?.take(import::FILE_BYTES_MAX + 1));
    let mut line = 0u64;
    loop {
        let offset = bytes.len() as u64;
        line += 1;
        let read = (&mut reader)
            .take(import::LINE_BYTES_MAX + 1)
            .read_until(b'\n', &mut bytes)?;
        if read == 0 {
            return Ok(Ok(bytes));
        }
        let text_bytes = read as u64 - u64::from(bytes.last() == Some(&b'\n'));
        if text_bytes > import::LINE_BYTES_MAX {
            return Ok(Err(import::ReadError::LineTooLong { line, offset }));
        }
    }
}

/// Whether `out` names `file` (a link to it included).
fn same_file(file: &Path, out: &Path) -> bool {
    match (std::fs::canonicalize(file), std::fs::canonicalize(out)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Writes `bytes` to `path`, which must not exist (`crate::output`: written unnamed beside it,
/// then linked in, which fails if anything has the name; no link followed, nothing removed).
fn write_new(path: &Path, bytes: &[u8]) -> Result<Written, RepairError> {
    let not_written = |e: OutputError| match e {
        OutputError::Exists { path }
        | OutputError::Symlink { path }
        | OutputError::NotAFile { path } => RepairError::Exists { path },
        e @ OutputError::Io { .. } => RepairError::Output(e),
    };
    let mut file = Output::create(path, Kind::New).map_err(not_written)?;
    file.write_all(bytes).map_err(|source| RepairError::Write {
        path: path.to_owned(),
        source,
    })?;
    file.commit().map_err(not_written)
}
