//! Writes that are copies: a segment of a journal that never syncs, mapped shared, so a write
//! inside the file's length is a `memcpy` into the page cache instead of a `pwrite`.
//!
//! Why: under `FsyncPolicy::Never` a step costs about 5 µs of CPU, and its one `pwrite` was
//! 1.9 µs of it (docs/PERFORMANCE.md). The promise is unchanged: the mapped pages *are* the
//! file's page-cache pages, so a killed process loses nothing copied, exactly as with a
//! `pwrite`; a machine crash loses what the page cache held, as it always did under `Never`.
//! A journal that syncs keeps `pwrite`: each fdatasync write-protects the pages again, and the
//! next step would pay a page fault instead of the syscall (par16 measured 3 % slower).
//!
//! Where: ext4 only. A write into a mapping cannot return an error; the kernel sends SIGBUS
//! instead. On ext4 the bytes copied over are ones the writer already wrote (the zeros ahead,
//! `writer.rs`), so their blocks are allocated or reserved and no copy can meet a full disk.
//! A copy-on-write file system (Btrfs) or tmpfs under memory pressure could, so they write.
//! What remains: a segment cut short by someone else while the writer holds the directory's
//! lock ends the process with SIGBUS, and the journal reads as a crash left it
//! (docs/DECISIONS.md, *Segments of a journal that never syncs are written by copies*).

use std::fs::File;
use std::io;

/// The page size the advice is aligned to.
const PAGE_BYTES: u64 = 4096;

/// ext2/3/4's `f_type`.
const EXT4_MAGIC: u64 = 0xEF53;

/// A segment file's bytes `[0, len_bytes)`, mapped once a write falls inside them.
pub(super) struct Mapped {
    map: Option<memmap2::MmapRaw>,
    /// The file's length as this writer made it (the only writer: the directory's lock).
    len_bytes: u64,
}

impl Mapped {
    /// For `file`, when its file system is one a copy cannot fail on; `None` elsewhere.
    pub(super) fn new(file: &File) -> io::Result<Option<Mapped>> {
        let magic = rustix::fs::fstatfs(file)?.f_type as u64;
        if magic != EXT4_MAGIC {
            return Ok(None);
        }
        Ok(Some(Mapped {
            map: None,
            len_bytes: file.metadata()?.len(),
        }))
    }

    /// Copies `buf` to `offset` when all of it lies inside the file; `false` when it does not
    /// (nothing was written, the caller writes).
    pub(super) fn write(&mut self, file: &File, offset: u64, buf: &[u8]) -> io::Result<bool> {
        let end = offset.saturating_add(buf.len() as u64);
        if end > self.len_bytes {
            return Ok(false);
        }
        if self.map.as_ref().is_none_or(|m| (m.len() as u64) < end) {
            self.map = None;
            let len = usize::try_from(self.len_bytes).map_err(io::Error::other)?;
            let map = memmap2::MmapOptions::new().len(len).map_raw(file)?;
            // Fault the pages from here on in for writing now, in one call, rather than one
            // fault per page as the steps reach them. Only a speed-up: an older kernel
            // (before 5.14) refuses the advice, and the copies fault as they go.
            let from = (offset - offset % PAGE_BYTES) as usize;
            let _ = map.advise_range(memmap2::Advice::PopulateWrite, from, len - from);
            self.map = Some(map);
        }
        let Some(map) = &self.map else {
            return Ok(false); // mapped just above: not reached
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

    /// After this writer wrote `written` bytes at `offset` by itself: the file may be longer.
    pub(super) fn wrote(&mut self, offset: u64, written: usize) {
        self.len_bytes = self.len_bytes.max(offset + written as u64);
    }

    /// Before this writer cuts the file to `len_bytes`: no page past it may stay mapped.
    pub(super) fn cutting(&mut self, len_bytes: u64) {
        self.map = None;
        self.len_bytes = self.len_bytes.min(len_bytes);
    }

    /// After the cut: the file's length.
    pub(super) fn cut(&mut self, len_bytes: u64) {
        self.len_bytes = len_bytes;
    }
}
