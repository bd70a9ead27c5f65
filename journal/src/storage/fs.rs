//! The real thing: a directory on a local file system.

use super::{FileSystem, ReadAt, Storage, WriteFile};
use std::any::Any;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

mod mapped;

/// The lock file's name inside a journal directory. It holds no data; its OS lock is the point:
/// a writer holds it exclusively; [`Storage::writer_lock_held`] asks with a shared one.
pub const LOCK_FILE: &str = "LOCK";

/// A journal directory on disk. Files are created 0600 and the directory 0700: a journal holds
/// tool arguments and results, which are nobody else's business.
#[derive(Debug, Clone)]
pub struct FsStorage {
    dir: PathBuf,
}

impl FsStorage {
    /// Uses `dir`, creating it (and its parents) if needed.
    pub fn create(dir: impl Into<PathBuf>) -> io::Result<FsStorage> {
        let dir = dir.into();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| match e.kind() {
                // A recursive create fails so only when something else has the name.
                io::ErrorKind::AlreadyExists => io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "something that is not a directory has that name",
                ),
                _ => e,
            })?;
        Ok(FsStorage { dir })
    }

    /// Uses an existing directory; fails if it is not one.
    pub fn open(dir: impl Into<PathBuf>) -> io::Result<FsStorage> {
        let dir = dir.into();
        let meta = fs::metadata(&dir)?;
        if !meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory",
            ));
        }
        Ok(FsStorage { dir })
    }

    /// The journal directory this storage reads and writes.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

struct FsRead(File);

impl ReadAt for FsRead {
    fn len_bytes(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        FileExt::read_at(&self.0, buf, offset)
    }
}

struct FsWrite {
    file: File,
    /// This handle created the file: all its bytes are ones it wrote.
    created: bool,
    /// Set by [`WriteFile::map_writes`] on ext2/3/4: writes inside what this handle wrote are
    /// copies.
    mapped: Option<mapped::Mapped>,
}

impl FsWrite {
    fn new(file: File, created: bool) -> FsWrite {
        FsWrite {
            file,
            created,
            mapped: None,
        }
    }
}

impl WriteFile for FsWrite {
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<usize> {
        if let Some(mapped) = &mut self.mapped {
            if mapped.write(&self.file, offset, buf)? {
                return Ok(buf.len());
            }
        }
        // A long write (the zeros ahead, a megabyte) at most to the next page boundary: the
        // page cache then holds it in single pages. Whole, it would get a large folio, and
        // every later small write into it costs the kernel a walk over all of its blocks
        // (ext4's `ext4_block_write_begin`: over half of 256 sessions' CPU, measured). A short
        // one (a step's records) whole: one syscall (par16's steps, 8 KB, took 4.8 before).
        // A mapped file's later writes are copies, which walk nothing: its zeros go whole
        // (nosync: 250,000 to 290,000 calls/s, measured).
        let copies = self.mapped.as_ref().is_some_and(mapped::Mapped::copies);
        let take = if buf.len() as u64 <= WHOLE_WRITE_BYTES_MAX || copies {
            buf.len()
        } else {
            let to_boundary = PAGE_BYTES - (offset % PAGE_BYTES);
            buf.len().min(to_boundary as usize)
        };
        // pwrite(2): the file is not in append mode (Linux would ignore the offset).
        let written = FileExt::write_at(&self.file, &buf[..take], offset)?;
        if let Some(mapped) = &mut self.mapped {
            mapped.wrote(offset, written);
        }
        Ok(written)
    }
    fn sync_data(&mut self) -> io::Result<()> {
        // fdatasync writes back the pages copied into, as those written.
        self.file.sync_data()
    }
    fn truncate(&mut self, len_bytes: u64) -> io::Result<()> {
        if let Some(mapped) = &mut self.mapped {
            mapped.cutting(len_bytes);
        }
        self.file.set_len(len_bytes)
    }
    fn len_bytes(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
    fn map_writes(&mut self) {
        if self.mapped.is_none() {
            self.mapped = mapped::Mapped::new(&self.file, self.created);
        }
    }
    fn check_written(&mut self) -> io::Result<()> {
        // WAIT_BEFORE alone writes nothing: it waits for write-back under way and returns the
        // file's write-back error since this descriptor last saw one (errseq, Linux 4.14+),
        // which fdatasync would have returned.
        // SAFETY: a plain syscall on a descriptor this value owns; no memory is passed.
        let rc = unsafe {
            libc::sync_file_range(
                self.file.as_raw_fd(),
                0,
                0,
                libc::SYNC_FILE_RANGE_WAIT_BEFORE,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// The page size the writes keep to (4 KiB on every architecture this runs on; a larger one
/// only makes more writes than needed).
const PAGE_BYTES: u64 = 4096;

/// A write this long or shorter goes out whole: at worst a folio of 16 pages.
const WHOLE_WRITE_BYTES_MAX: u64 = 64 * 1024;

/// The file system of a journal directory, synced as a whole by `syncfs(2)` on the directory.
#[derive(Debug)]
struct FsFileSystem {
    dir: File,
    device: u64,
}

impl FileSystem for FsFileSystem {
    fn id(&self) -> u64 {
        self.device
    }
    fn sync_all(&self) -> io::Result<()> {
        rustix::fs::syncfs(&self.dir).map_err(io::Error::from)
    }
}

/// File systems whose `syncfs` is known to flush the device after writing every dirty page
/// back, whatever else it has to log: ext2/3/4 (one driver, one magic; `ext4_sync_fs` sends the
/// flush itself, with or without a journal). XFS and Btrfs flush through their logs, which a
/// data-only overwrite may leave clean; on a network file system or FUSE what `syncfs` promises
/// is the server's business. Journals there sync on their own.
const SYNCFS_FILE_SYSTEMS: [u64; 1] = [EXT2_3_4_MAGIC];

/// ext2/3/4's `f_type` (one driver, one magic).
const EXT2_3_4_MAGIC: u64 = 0xEF53;

/// The `f_type` of the file system `fd` lies on.
fn file_system_magic(fd: impl std::os::fd::AsFd) -> io::Result<u64> {
    Ok(rustix::fs::fstatfs(fd)?.f_type as u64)
}

/// Whether this kernel's `syncfs` reports write-back errors (Linux 5.8 and later): before, it
/// returned success whatever happened, and a failed write would pass for durable.
fn syncfs_reports_errors() -> bool {
    static REPORTS: OnceLock<bool> = OnceLock::new();
    *REPORTS.get_or_init(|| {
        let uname = rustix::system::uname();
        let release = uname.release().to_string_lossy();
        let mut parts = release
            .split(|c: char| !c.is_ascii_digit())
            .map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        (major, minor) >= (5, 8)
    })
}

/// `dir`'s file system, when a `syncfs` there is a sync this journal can rely on.
fn syncfs_file_system(dir: &Path) -> Option<FsFileSystem> {
    if !syncfs_reports_errors() {
        return None;
    }
    let dir = File::open(dir).ok()?;
    let magic = file_system_magic(&dir).ok()?;
    if !SYNCFS_FILE_SYSTEMS.contains(&magic) {
        return None;
    }
    let device = dir.metadata().ok()?.dev();
    Some(FsFileSystem { dir, device })
}

impl Storage for FsStorage {
    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            if let Some(name) = entry?.file_name().to_str() {
                names.push(name.to_owned());
            }
        }
        Ok(names)
    }

    fn open_read(&self, name: &str) -> io::Result<Box<dyn ReadAt>> {
        Ok(Box::new(FsRead(File::open(self.path(name))?)))
    }

    fn create_new(&self, name: &str) -> io::Result<Box<dyn WriteFile>> {
        // Readable too: a shared mapping (`map_writes`) needs a descriptor open for both.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(self.path(name))?;
        Ok(Box::new(FsWrite::new(file, true)))
    }

    fn open_write(&self, name: &str) -> io::Result<Box<dyn WriteFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.path(name))?;
        Ok(Box::new(FsWrite::new(file, false)))
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        fs::rename(self.path(from), self.path(to))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        fs::remove_file(self.path(name))
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.dir)?.sync_all()
    }

    fn try_lock(&self) -> io::Result<Option<Box<dyn Any + Send + Sync>>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(self.path(LOCK_FILE))?;
        match past_inherited_copies(|| file.try_lock()) {
            Ok(()) => Ok(Some(Box::new(file))),
            Err(fs::TryLockError::WouldBlock) => Ok(None),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }

    fn file_system(&self) -> Option<Arc<dyn FileSystem>> {
        syncfs_file_system(&self.dir).map(|fs| Arc::new(fs) as Arc<dyn FileSystem>)
    }

    fn writer_lock_held(&self) -> io::Result<bool> {
        // Read-only, never created: works on a read-only mount or an immutable file, and
        // whatever the lock file holds. A shared lock conflicts only with a writer's exclusive
        // one; it is released when `file` is dropped.
        let file = match File::open(self.path(LOCK_FILE)) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        match past_inherited_copies(|| file.try_lock_shared()) {
            Ok(()) => Ok(false),
            Err(fs::TryLockError::WouldBlock) => Ok(true),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }

    fn lock_holder_pid(&self) -> Option<u32> {
        // The kernel lists every lock with its holder's pid and the file's device and inode;
        // asking it writes nothing (the lock file stays empty, a read-only journal can be asked).
        use std::os::unix::fs::MetadataExt;
        let meta = fs::metadata(self.path(LOCK_FILE)).ok()?;
        let locks = fs::read_to_string("/proc/locks").ok()?;
        flock_holder(&locks, meta.dev(), meta.ino())
    }
}

/// How long a lock attempt that would block is retried: long enough to outlast a lock that
/// only a forked child's inherited copy still holds, short enough that a live writer is
/// reported at once to a person.
const INHERITED_LOCK_WAIT_MS_MAX: u64 = 250;

/// Retries `attempt` while it would block, for at most [`INHERITED_LOCK_WAIT_MS_MAX`].
/// Why: an `flock` belongs to the open file description, and a child forked by any thread of
/// the process (a tool, a test spawning a binary) holds a copy of every descriptor until its
/// `exec` closes it. A writer that has just closed its journal can thus still "hold" the lock
/// for a moment through a child that is not even ours to know about; a real writer holds it
/// for the whole session and is still there after the wait.
fn past_inherited_copies(
    mut attempt: impl FnMut() -> Result<(), fs::TryLockError>,
) -> Result<(), fs::TryLockError> {
    let deadline =
        std::time::Instant::now() + std::time::Duration::from_millis(INHERITED_LOCK_WAIT_MS_MAX);
    loop {
        match attempt() {
            Err(fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            outcome => return outcome,
        }
    }
}

/// The pid holding an exclusive `flock` on the file (`dev`, `ino`), from `/proc/locks` lines
/// such as `2: FLOCK  ADVISORY  WRITE 27250 fe:00:11378691 0 EOF` (device as hex major:minor;
/// lines of waiters, `1: -> FLOCK …`, are skipped).
fn flock_holder(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    // Linux's dev_t layout: 12 bits of major above 8 bits of minor, the rest above them.
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let file = format!("{major:02x}:{minor:02x}:{ino}");
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [_, "FLOCK", _, "WRITE", pid, at, ..] if *at == file => pid.parse().ok(),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_write_stops_at_the_next_page_boundary_a_short_one_goes_whole_and_all_lands() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let storage = FsStorage::create(dir.path()).expect("storage");
        let mut file = storage.create_new("f").expect("a new file");
        let long_bytes = WHOLE_WRITE_BYTES_MAX as usize + 1;
        let bytes: Vec<u8> = (0..long_bytes as u32).map(|i| (i % 251) as u8).collect();
        // From 4000, a long write takes only up to 4096; a short one all of its bytes.
        assert_eq!(file.write_at(4000, &bytes).expect("write"), 96);
        let short = &bytes[..10_000];
        assert_eq!(file.write_at(4000, short).expect("write"), short.len());
        crate::storage::write_all_at(file.as_mut(), 4000, &bytes).expect("write all");
        let read = storage.open_read("f").expect("open");
        let mut back = vec![0u8; bytes.len()];
        crate::storage::read_full_at(read.as_ref(), 4000, &mut back).expect("read");
        assert_eq!(back, bytes);
    }

    #[test]
    fn the_holder_is_found_by_device_and_inode() {
        let locks = "1: FLOCK  ADVISORY  READ 11 fe:00:7 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 12 fe:00:7 0 EOF\n\
                     3: FLOCK  ADVISORY  WRITE 13 fe:00:7 0 EOF\n\
                     4: FLOCK  ADVISORY  WRITE 14 08:01:7 0 EOF\n";
        assert_eq!(super::flock_holder(locks, 0xfe00, 7), Some(13));
        assert_eq!(super::flock_holder(locks, 0x0801, 7), Some(14));
        assert_eq!(super::flock_holder(locks, 0xfe00, 8), None);
    }
}
