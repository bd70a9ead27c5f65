//! What both benchmarks measure with: the disk's own limit (append and fdatasync, one at a
//! time; and overwrite and fdatasync in a preallocated file), the bytes of a journal's segment
//! files, and the scratch directories every run writes in. Kept in one place so that `journal`
//! and `runtime` measure the raw rate the same way.

use crate::BoxError;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// The directory a benchmark runs in: a new temporary directory inside `dir` (made if missing)
/// or in the system's temporary directory; removed when dropped.
pub(crate) fn scratch_base(dir: Option<&Path>) -> Result<TempDir, BoxError> {
    Ok(match dir {
        Some(dir) => {
            fs::create_dir_all(dir)?;
            tempfile::tempdir_in(dir)?
        }
        None => tempfile::tempdir()?,
    })
}

/// Runs `f` in a fresh directory `base/name`, removed afterwards.
pub(crate) fn in_dir<T>(
    base: &Path,
    name: &str,
    f: impl FnOnce(&Path) -> Result<T, BoxError>,
) -> Result<T, BoxError> {
    let dir = base.join(name);
    fs::create_dir_all(&dir)?;
    let out = f(&dir)?;
    fs::remove_dir_all(&dir)?;
    Ok(out)
}

/// The ceiling for any durable write path on this disk: appends `write_bytes` to a new file at
/// `path` and fdatasyncs it, one at a time, nothing else, for `time`. Appending (not
/// overwriting) matches what the journal does, so each sync also carries a file-size update, as
/// the journal's do. Returns the syncs and the seconds they took; the file is left in place.
pub(crate) fn append_fdatasync_loop(
    path: &Path,
    write_bytes: usize,
    time: Duration,
) -> Result<(u64, f64), BoxError> {
    let mut file = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(path)?;
    let record = vec![0xA5u8; write_bytes];
    let start = Instant::now();
    let mut syncs = 0u64;
    while start.elapsed() < time {
        file.write_all(&record)?;
        file.sync_data()?;
        syncs += 1;
    }
    Ok((syncs, start.elapsed().as_secs_f64()))
}

/// The file [`overwrite_fdatasync_loop`] overwrites: larger than any slice writes at 100 B a
/// record (wrapping at its end would only overwrite again).
const OVERWRITE_FILE_BYTES: u64 = 8 << 20;
/// Zeros are written in pieces of this size: a page, as the journal writes its own (a larger
/// write gets a large folio in the page cache, and every small overwrite into it then costs the
/// kernel a walk over all its blocks; `journal/src/storage/fs.rs`).
const ZERO_FILL_BYTES: usize = 4096;

/// A new file at `path` of [`OVERWRITE_FILE_BYTES`], allocated (`fallocate`), zero-filled and
/// synced, so that its blocks are written, not merely reserved: on ext4 an fdatasync over
/// unwritten extents still commits the conversion to written.
pub(crate) fn preallocated_file(path: &Path) -> Result<std::fs::File, BoxError> {
    let file = OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(path)?;
    rustix::fs::fallocate(
        &file,
        rustix::fs::FallocateFlags::empty(),
        0,
        OVERWRITE_FILE_BYTES,
    )?;
    let zeros = vec![0u8; ZERO_FILL_BYTES];
    let mut at = 0u64;
    while at < OVERWRITE_FILE_BYTES {
        file.write_all_at(&zeros, at)?;
        at += ZERO_FILL_BYTES as u64;
    }
    file.sync_all()?;
    Ok(file)
}

/// What a journal with preallocated segments would get: a [`preallocated_file`], overwritten
/// `write_bytes` at a time at increasing offsets, each write fdatasynced. No sync carries a
/// file-size update. Returns the syncs and the seconds they took (the preparation not
/// counted); the file is left in place.
pub(crate) fn overwrite_fdatasync_loop(
    path: &Path,
    write_bytes: usize,
    time: Duration,
) -> Result<(u64, f64), BoxError> {
    if write_bytes as u64 > OVERWRITE_FILE_BYTES {
        return Err(format!("{write_bytes}-byte records do not fit the preallocated file").into());
    }
    let file = preallocated_file(path)?;
    let start = Instant::now();
    let syncs = overwrite_fdatasync(&file, write_bytes, || start.elapsed() >= time)?;
    Ok((syncs, start.elapsed().as_secs_f64()))
}

/// Overwrites a [`preallocated_file`] `write_bytes` at a time from its start, each write
/// fdatasynced, until `done`; returns the syncs.
pub(crate) fn overwrite_fdatasync(
    file: &std::fs::File,
    write_bytes: usize,
    done: impl Fn() -> bool,
) -> Result<u64, BoxError> {
    let record = vec![0xA5u8; write_bytes];
    let (mut offset, end) = (0u64, OVERWRITE_FILE_BYTES - write_bytes as u64);
    let mut syncs = 0u64;
    while !done() {
        file.write_all_at(&record, offset)?;
        file.sync_data()?;
        syncs += 1;
        offset += write_bytes as u64;
        if offset > end {
            offset = 0;
        }
    }
    Ok(syncs)
}

fn is_segment(entry: &fs::DirEntry) -> bool {
    entry
        .file_name()
        .to_str()
        .is_some_and(|n| journal::segment::parse_file_name(n).is_some())
}

/// The bytes of the journal's segment files in `dir`: what MB/s figures are counted in.
pub(crate) fn segment_bytes(dir: &Path) -> Result<u64, BoxError> {
    let mut total = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if is_segment(&entry) {
            total += entry.metadata()?.len();
        }
    }
    Ok(total)
}

/// The bytes of the journal in `dir` up to its last record: headers and frames, not the zeros a
/// live format-2 segment holds ahead of its records (a bench measures what the records cost).
pub(crate) fn journal_bytes(dir: &Path) -> Result<u64, BoxError> {
    let storage = std::sync::Arc::new(journal::FsStorage::open(dir)?);
    let mut reader = journal::Reader::open(storage, journal::Limits::default())?;
    let (mut bytes, mut segment) = (0u64, None);
    while let Some(record) = reader.next_ref() {
        let record = record?;
        if segment != Some(record.position.segment) {
            segment = Some(record.position.segment);
            bytes += journal::segment::HEADER_BYTES as u64;
        }
        bytes += record.frame_bytes;
    }
    Ok(bytes)
}

/// How many segment files the journal in `dir` has.
pub(crate) fn segment_count(dir: &Path) -> Result<u64, BoxError> {
    Ok(fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(is_segment)
        .count() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The overwrites land at the start of a file that keeps its preallocated size.
    #[test]
    fn overwrites_keep_the_preallocated_size_and_land_in_order() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("raw");
        let (syncs, _) =
            overwrite_fdatasync_loop(&path, 100, Duration::from_millis(20)).expect("the loop");
        let bytes = fs::read(&path).expect("the file");
        assert_eq!(bytes.len() as u64, OVERWRITE_FILE_BYTES);
        let written = (syncs * 100) as usize;
        assert!(syncs > 0 && written < bytes.len());
        assert!(bytes[..written].iter().all(|&b| b == 0xA5));
        assert!(bytes[written..].iter().all(|&b| b == 0));
    }
}
