//! The storage seam: every byte the journal reads or writes goes through [`Storage`].
//!
//! Why a trait and not `std::fs` directly: so that tests and the fuzz crate can make any single
//! I/O step fail (a write, a short write, ENOSPC, an fsync, a rename, a directory sync) or lose
//! power at any point, and then look at exactly the bytes that would have survived. The real
//! implementation is [`FsStorage`]; [`SimStorage`] is an in-memory disk with a page cache.
//!
//! The seam is deliberately small: one flat directory, whole-file names, writers that write at
//! an offset (the journal appends, and overwrites the zeros of a preallocated segment).

mod fs;
mod sim;

pub use fs::{FsStorage, LOCK_FILE};
pub use sim::{Fault, Op, SimStats, SimStorage, TailLoss};

use std::any::Any;
use std::io;
use std::sync::Arc;

/// A journal directory.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// Where this storage lives, for error messages (a path, or `sim:` for the simulation).
    fn location(&self) -> String;
    /// Names of the files in the directory, in no particular order.
    fn list(&self) -> io::Result<Vec<String>>;
    /// Opens an existing file for positional reads.
    fn open_read(&self, name: &str) -> io::Result<Box<dyn ReadAt>>;
    /// Creates a file that must not exist yet, for writing.
    fn create_new(&self, name: &str) -> io::Result<Box<dyn WriteFile>>;
    /// Opens an existing file for writing; nothing is written until [`WriteFile::write_at`].
    fn open_write(&self, name: &str) -> io::Result<Box<dyn WriteFile>>;
    /// Renames `from` to `to`, replacing `to` if it exists.
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;
    /// Removes a file.
    fn remove(&self, name: &str) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self) -> io::Result<()>;
    /// Takes the directory's exclusive writer lock. `Ok(None)` when another writer holds it.
    /// The lock is held until the returned guard is dropped.
    fn try_lock(&self) -> io::Result<Option<Box<dyn Any + Send + Sync>>>;
    /// Whether a writer holds the directory's lock, found without creating, opening for
    /// writing or changing anything, so that a read-only journal can be asked too. No lock
    /// file means no writer. An error means it cannot be told. The default cannot tell.
    fn writer_lock_held(&self) -> io::Result<bool> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this storage cannot check its writer lock without taking it",
        ))
    }
    /// The pid of the process holding the writer lock, where the storage can tell (a real
    /// directory, from the kernel's list of locks). Asking writes nothing.
    fn lock_holder_pid(&self) -> Option<u32> {
        None
    }
    /// Whether this storage's calls may block the thread for long (a real disk). The journal
    /// moves such calls off the async executor; the simulation runs them inline, which keeps
    /// simulated runs deterministic.
    fn blocks(&self) -> bool {
        true
    }
    /// The file system this directory is on, when one sync of it (`syncfs`) can make this
    /// journal durable together with every other journal of the process there (the writer's
    /// `shared_sync`). `None`: every sync is the journal's own. The default shares nothing.
    fn file_system(&self) -> Option<Arc<dyn FileSystem>> {
        None
    }
}

/// A file system that one call makes durable as a whole: every file's written data, sizes and
/// the device's cache.
pub trait FileSystem: Send + Sync + std::fmt::Debug {
    /// Which file system: journals whose ids are equal share their syncs.
    fn id(&self) -> u64;
    /// Makes everything written to the file system before the call durable (`syncfs`), and
    /// reports a failure to (Linux 5.8 and later report any write-back error on the file system
    /// since the handle was opened or last asked).
    fn sync_all(&self) -> io::Result<()>;
}

/// A file opened for reading.
pub trait ReadAt: Send {
    /// The file's current size in bytes.
    fn len_bytes(&self) -> io::Result<u64>;
    /// Reads into `buf` from `offset`; returns how many bytes were read (0 at end of file).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize>;
}

/// A file opened for writing.
pub trait WriteFile: Send {
    /// Writes some prefix of `buf` at `offset` (over what is there, or extending the file);
    /// returns how many bytes were taken. Writing past the end leaves zeros in between.
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<usize>;
    /// Makes the file's data durable (fdatasync), and its size when that changed.
    fn sync_data(&mut self) -> io::Result<()>;
    /// Cuts the file to `len_bytes`.
    fn truncate(&mut self, len_bytes: u64) -> io::Result<()>;
    /// The file's current size in bytes.
    fn len_bytes(&self) -> io::Result<u64>;
    /// After a [`FileSystem::sync_all`]: reports a write-back of this file that failed since
    /// this file's last sync or check, without writing or syncing anything. The file system's
    /// sync says whether the device was flushed; only this says whether this file's pages got
    /// there. The default cannot tell (`Unsupported`): such a file syncs on its own.
    fn check_written(&mut self) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this storage cannot check a file's write-back on its own",
        ))
    }
    /// Asks that later writes over bytes this handle wrote be copies into a shared mapping of
    /// the file (a journal that never syncs: no syscall per step). What a killed process leaves
    /// is the same as with writes. Only a hint: a storage that cannot, or a file system where a
    /// copy could fail, keeps writing (the default).
    fn map_writes(&mut self) {}
}

/// Writes all of `buf` at `offset`, looping over short writes. A write that takes nothing is an
/// error, so a misbehaving storage cannot spin us forever.
pub(crate) fn write_all_at(
    file: &mut dyn WriteFile,
    mut offset: u64,
    mut buf: &[u8],
) -> io::Result<()> {
    while !buf.is_empty() {
        match file.write_at(offset, buf) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "storage accepted no bytes",
                ))
            }
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes at `offset`, or fewer only at end of file; returns the count.
pub(crate) fn read_full_at(file: &dyn ReadAt, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(offset + done as u64, &mut buf[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}
