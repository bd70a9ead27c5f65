//! Helpers shared by the journal's integration tests.
#![allow(dead_code)]

use std::sync::Arc;
use tooljournal_journal::{Journal, Limits, Options, ReadEnd, Reader, Record, SimStorage, Storage};

/// A payload of `len` bytes that differs per seq, so misplaced records are caught.
pub fn payload(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seq as usize * 31 + i * 7) as u8)
        .collect()
}

pub fn small_limits(segment_size_bytes_max: u64) -> Options {
    Options {
        limits: Limits {
            record_size_bytes_max: 1 << 16,
            segment_size_bytes_max,
        },
        ..Options::default()
    }
}

/// Writes one record per entry of `sizes` (closing the journal), returns the payloads by seq.
pub fn write_records(storage: &SimStorage, options: Options, sizes: &[usize]) -> Vec<Vec<u8>> {
    let (journal, _) = Journal::open(Arc::new(storage.clone()), options).expect("open");
    let mut written = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        let seq = i as u64 + 1;
        let p = payload(seq, len);
        assert_eq!(journal.append(&p).expect("append"), seq);
        written.push(p);
    }
    journal.close().expect("close");
    written
}

/// Reads everything back: the records and how the journal ends.
pub fn read_all(storage: &dyn StorageClone, options: Options) -> (Vec<Record>, ReadEnd) {
    let mut reader = Reader::open(storage.arc(), options.limits).expect("reader");
    let records: Vec<Record> = reader.by_ref().map(|r| r.expect("io")).collect();
    (records, reader.end().cloned().expect("end"))
}

/// Decodes the payloads of `records` (written as `Vec<u8>`).
pub fn payloads(records: &[Record]) -> Vec<Vec<u8>> {
    records
        .iter()
        .map(|r| r.decode::<Vec<u8>>().expect("decode"))
        .collect()
}

pub trait StorageClone {
    fn arc(&self) -> Arc<dyn Storage>;
}

impl StorageClone for SimStorage {
    fn arc(&self) -> Arc<dyn Storage> {
        Arc::new(self.clone())
    }
}

impl StorageClone for tooljournal_journal::FsStorage {
    fn arc(&self) -> Arc<dyn Storage> {
        Arc::new(self.clone())
    }
}

/// Makes `storage` an empty journal of format version 1, as an older build leaves one: segment
/// 0's header alone. A writer continues it in version 1 (appends, never zeros written ahead).
pub fn seed_version_1(storage: &SimStorage) {
    use tooljournal_journal::segment::{self, SegmentHeader};
    let header = SegmentHeader {
        format_version: 1,
        journal_id: [0x11; 16],
        segment_number: 0,
        first_seq: 1,
    };
    storage.put_file(&segment::file_name(0), header.encode().to_vec());
}

/// The end of the last byte of `bytes` that is not zero (0 when all are).
pub fn nonzero_len(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)
}

/// The segment files of a storage, in order, with their bytes.
pub fn segments(storage: &SimStorage) -> Vec<(String, Vec<u8>)> {
    storage
        .file_names()
        .into_iter()
        .filter(|n| tooljournal_journal::segment::parse_file_name(n).is_some())
        .map(|n| {
            let bytes = storage.read_file(&n).expect("listed");
            (n, bytes)
        })
        .collect()
}
