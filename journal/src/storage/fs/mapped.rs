//! Writes that are copies: a segment of a journal that never syncs, mapped shared, so a write
//! inside the file is a `memcpy` into the page cache instead of a `pwrite`.
//!
//! Why: under `FsyncPolicy::Never` a step cost about 5 µs of CPU, and its one `pwrite` was
//! 1.9 µs of it (docs/PERFORMANCE.md). The promise is unchanged: the mapped pages *are* the
//! file's page-cache pages, so a killed process loses nothing copied, exactly as with a
//! `pwrite`; a machine crash loses what the page cache held, as it always did under `Never`.
//! A journal that syncs keeps `pwrite`: each fdatasync write-protects the pages again, and the
//! next step would pay a page fault instead of the syscall (par16 measured 3 % slower).
//!
//! A copy cannot return an error: where a `pwrite` fails, a copy gets SIGBUS, which ends the
//! whole process. So copies go only where none is expected:
//! - ext2/3/4 (one driver, one magic), not a copy-on-write or memory file system, where a
//!   page's first write allocates;
//! - only over bytes this handle wrote itself (the zeros ahead, `writer/segment_file.rs`), whose blocks are
//!   allocated or reserved: never over zeros an earlier process left, which a sparse copy of
//!   the journal may have made a hole;
//! - and only once `MADV_POPULATE_WRITE` faulted the pages in for writing, which reports as an
//!   error what a copy would meet as SIGBUS (an immutable file, a file system shut down); any
//!   failure there, or of the mapping, sends this file's writes back to `pwrite` for good.
//!
//! What remains (docs/DECISIONS.md, *Segments of a journal that never syncs are written by
//! copies*): a page written back, evicted and unreadable when copied to again, or a segment cut
//! short by another process under the writer's lock, ends the process; its journals then read
//! as any crash leaves them.

use super::{file_system_magic, EXT2_3_4_MAGIC, PAGE_BYTES};
use std::fs::File;
use std::io;

/// A segment file's bytes `[0, len_bytes)`, mapped once a write falls inside the part this
/// handle wrote.
pub(super) struct Mapped {
    map: Option<memmap2::MmapRaw>,
    /// Copies go only to `[own_from, len_bytes)`: bytes this handle wrote itself.
    own_from: u64,
    /// The file's length as this handle made it (the only writer: the directory's lock).
    len_bytes: u64,
    /// Mapping or faulting pages in failed once: this file's writes are `pwrite`s from now on.
    off: bool,
}

impl Mapped {
    /// For `file` on a file system a copy cannot fail on; `None` elsewhere, or when that cannot
    /// be told (the file keeps writing). `created`: this handle made the file and wrote all of
    /// it (else only what it appends is its own).
    pub(super) fn new(file: &File, created: bool) -> Option<Mapped> {
        if file_system_magic(file).ok()? != EXT2_3_4_MAGIC {
            return None;
        }
        let len_bytes = file.metadata().ok()?.len();
        Some(Mapped {
            map: None,
            own_from: if created { 0 } else { len_bytes },
            len_bytes,
            off: false,
        })
    }

    /// Copies `buf` to `offset` when all of it lies in the part of the file this handle wrote;
    /// `false` when it does not (nothing was written, the caller writes).
    pub(super) fn write(&mut self, file: &File, offset: u64, buf: &[u8]) -> io::Result<bool> {
        let end = offset.saturating_add(buf.len() as u64);
        if self.off || offset < self.own_from || end > self.len_bytes {
            return Ok(false);
        }
        if self.map.as_ref().is_none_or(|m| (m.len() as u64) < end) {
            self.map = None;
            self.map = self.map_for(file, offset);
            self.off = self.map.is_none();
        }
        let Some(map) = &self.map else {
            return Ok(false);
        };
        // SAFETY: `[offset, end)` lies inside the mapping (`end` ≤ its length, checked above),
        // which stays mapped while `self` is borrowed; `buf` is ordinary memory, so the ranges
        // do not overlap. Other processes may read these pages; nothing here reads them back.
        unsafe {
            std::ptr::copy_nonoverlapping(
                buf.as_ptr(),
                map.as_mut_ptr().add(offset as usize),
                buf.len(),
            );
        }
        Ok(true)
    }

    /// The file's `[0, len_bytes)` mapped, its pages from `offset` on faulted in for writing;
    /// `None` when either fails.
    fn map_for(&self, file: &File, offset: u64) -> Option<memmap2::MmapRaw> {
        let len = usize::try_from(self.len_bytes).ok()?;
        let map = memmap2::MmapOptions::new().len(len).map_raw(file).ok()?;
        // One call for the pages ahead rather than a fault per page as the steps reach them,
        // and an error here rather than a SIGBUS in a copy.
        let from = (offset - offset % PAGE_BYTES) as usize;
        match map.advise_range(memmap2::Advice::PopulateWrite, from, len - from) {
            Ok(()) => Some(map),
            // A kernel before 5.14 knows no such advice: the copies fault as they go.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Some(map),
            Err(_) => None,
        }
    }

    /// Whether writes inside this handle's part are still copies (no failure sent them back).
    pub(super) fn copies(&self) -> bool {
        !self.off
    }

    /// After this handle wrote `written` bytes at `offset` by `pwrite`: they are its own, and
    /// the file may be longer. Only a write that continues the file counts (one past its end
    /// would leave a hole between).
    pub(super) fn wrote(&mut self, offset: u64, written: usize) {
        if offset <= self.len_bytes {
            self.len_bytes = self.len_bytes.max(offset + written as u64);
        }
    }

    /// Before this handle cuts (or extends) the file to `len_bytes`: no page past the cut may
    /// stay mapped, and what an extension adds is a hole, never copied to.
    pub(super) fn cutting(&mut self, len_bytes: u64) {
        self.map = None;
        self.len_bytes = self.len_bytes.min(len_bytes);
        self.own_from = self.own_from.min(self.len_bytes);
    }
}
