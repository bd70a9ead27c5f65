//! `docs/FORMAT.md` against the bytes: an independent reader written from that document alone
//! (std and `crc32fast` only, no `tooljournal_journal::{framing, segment, codec, Reader}`), run over journals
//! made by the public writer API, in both format versions: 2, what a new journal is written in,
//! and 1, what a writer keeps writing when it appends to a version-1 journal (the tests get one
//! by giving the writer an empty version-1 segment 0, written by hand).

use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use tooljournal_journal::{
    FsStorage, Journal, JournalError, Limits, Options, ReadEnd, Reader, SimStorage, Storage,
};

// ---- The independent reader (FORMAT.md only) ----

const HEADER: usize = 48;

/// How a payload's integers and lengths are laid out: the journal's format version decides
/// (FORMAT.md, *Payload encoding*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Format 1: fixed-width integers, `u64` lengths, `u32` variant indexes.
    Fixint,
    /// Format 2: varints for lengths, variant indexes and integers of 16 bits or more.
    Varint,
}

impl Layout {
    fn of(format_version: u32) -> Layout {
        match format_version {
            1 => Layout::Fixint,
            2 => Layout::Varint,
            v => panic!("format version {v}"),
        }
    }
}

fn crc(parts: &[&[u8]]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    parts.iter().for_each(|p| h.update(p));
    h.finalize()
}
fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// `NNNNNNNNNNNNNNNNNNNN.segment`, exactly 20 decimal digits.
fn segment_number(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".segment")?;
    (digits.len() == 20 && digits.bytes().all(|c| c.is_ascii_digit()))
        .then(|| digits.parse().ok())?
}

/// How a journal ends: clean, or torn / corrupt at (segment, offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Clean,
    Torn(u64, u64),
    Corrupt(u64, u64),
}

#[derive(Debug, Default)]
struct Parsed {
    journal_id: Option<[u8; 16]>,
    /// Segment 0's format version: every segment has it.
    format_version: Option<u32>,
    first_seqs: Vec<u64>,
    frames: Vec<(u64, Vec<u8>)>,         // (seq, payload)
    frames_per_segment: Vec<Vec<usize>>, // frame lengths (8 + length)
}

/// A valid frame at `at` (rule 2 of "Reading"): its seq, payload and total length.
fn frame_at(b: &[u8], at: usize, limit: u32) -> Option<(u64, &[u8], usize)> {
    let length = (b.len() - at >= 8).then(|| le32(b, at))?;
    let end = at + 8 + length as usize;
    let valid = (8..=limit).contains(&length)
        && end <= b.len()
        && crc(&[&b[at..at + 4], &b[at + 8..end]]) == le32(b, at + 4);
    valid.then(|| (le64(b, at + 8), &b[at + 16..end], end - at))
}

/// The header checks, in the documented order.
fn header_ok(b: &[u8], number: u64, p: &Parsed, first_seq: u64) -> bool {
    b.len() >= HEADER
        && b[0..8] == *b"TJRNSEG\0"
        && matches!(le32(b, 8), 1 | 2)
        && crc(&[&b[0..44]]) == le32(b, 44)
        && le64(b, 28) == number
        && p.journal_id.is_none_or(|id| id == b[12..28])
        && p.format_version.is_none_or(|v| v == le32(b, 8))
        && le64(b, 36) == first_seq
}

fn read_journal(files: &[(String, Vec<u8>)], limit: u32) -> (Parsed, End) {
    let mut segs: Vec<(u64, &[u8])> = files
        .iter()
        .filter_map(|(n, b)| Some((segment_number(n)?, b.as_slice())))
        .collect();
    segs.sort_by_key(|s| s.0);
    let mut p = Parsed::default();
    let mut expected = 1u64;
    for (i, &(number, b)) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        let corrupt = |offset: usize| End::Corrupt(number, offset as u64);
        if number != i as u64 {
            return (p, End::Corrupt(i as u64, 0)); // a missing segment
        }
        if last && b.len() < HEADER {
            return (p, End::Torn(number, 0));
        }
        if !header_ok(b, number, &p, expected) {
            return (p, corrupt(0));
        }
        p.journal_id = Some(b[12..28].try_into().unwrap());
        p.format_version = Some(le32(b, 8));
        p.first_seqs.push(le64(b, 36));
        p.frames_per_segment.push(Vec::new());
        let mut at = HEADER;
        while at < b.len() {
            match frame_at(b, at, limit) {
                Some((seq, _, _)) if seq != expected => return (p, corrupt(at)),
                Some((seq, payload, len)) => {
                    p.frames.push((seq, payload.to_vec()));
                    p.frames_per_segment.last_mut().unwrap().push(len);
                    expected += 1;
                    at += len;
                }
                // *Preallocated tail*: in format 2, zeros to the end of the file end a segment's
                // records, in any segment (the next one's first_seq is checked as usual).
                None if le32(b, 8) >= 2 && b[at..].iter().all(|&x| x == 0) => break,
                None if !last => return (p, corrupt(at)),
                None if (at + 1..b.len()).any(|y| frame_at(b, y, limit).is_some()) => {
                    return (p, corrupt(at))
                }
                None => return (p, End::Torn(number, at as u64)),
            }
        }
    }
    (p, End::Clean)
}

// ---- Values appended through the public writer API ----

#[derive(Serialize, Debug, Clone, PartialEq)]
struct Call {
    id: u64,
    name: String,
    retries: Option<u32>,
    ok: bool,
    delta: i32,
    tags: BTreeMap<String, u16>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
enum Ev {
    Started { at: u64 },
    Note(String),
    Stopped,
}

/// Serialized as its inner value (untagged), so each appended record is a different type.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(untagged)]
enum Val {
    Bytes(Vec<u8>),
    Str(String),
    U64(u64),
    Call(Call),
    Strings(Vec<String>),
    Ev(Ev),
}

/// Decodes `payload`, laid out as `layout`, as the same type as `like`; the payload must be
/// exactly one value.
fn decode(like: &Val, payload: &[u8], layout: Layout) -> Val {
    let mut seen = Default::default();
    let mut c = events::Cur::new(payload, layout, &mut seen);
    let c = &mut c;
    let bytes = |c: &mut events::Cur| {
        let n = c.count().unwrap() as usize;
        c.take(n).unwrap().to_vec()
    };
    let string = |c: &mut events::Cur| String::from_utf8(bytes(c)).expect("UTF-8");
    let u8 = |c: &mut events::Cur| c.take(1).unwrap()[0];
    let v = match like {
        Val::Bytes(_) => Val::Bytes(bytes(c)),
        Val::Str(_) => Val::Str(string(c)),
        Val::U64(_) => Val::U64(c.u64().unwrap()),
        Val::Call(_) => Val::Call(Call {
            id: c.u64().unwrap(),
            name: string(c),
            retries: match u8(c) {
                0 => None,
                1 => Some(c.u32().unwrap()),
                t => panic!("option tag {t}"),
            },
            ok: match u8(c) {
                b @ (0 | 1) => b == 1,
                b => panic!("bool byte {b}"),
            },
            delta: c.i32().unwrap(),
            tags: (0..c.count().unwrap())
                .map(|_| (string(c), c.u16().unwrap()))
                .collect(),
        }),
        Val::Strings(_) => Val::Strings((0..c.count().unwrap()).map(|_| string(c)).collect()),
        Val::Ev(_) => Val::Ev(match c.index().unwrap() {
            0 => Ev::Started {
                at: c.u64().unwrap(),
            },
            1 => Ev::Note(string(c)),
            2 => Ev::Stopped,
            i => panic!("variant {i}"),
        }),
    };
    assert!(
        c.rest().is_empty(),
        "{} trailing payload bytes",
        c.rest().len()
    );
    v
}

fn values() -> Vec<Val> {
    let call = |retries, tags: &[(&str, u16)]| Call {
        id: 0x0102_0304_0506_0708,
        name: "grep".into(),
        retries,
        ok: retries.is_none(),
        delta: -5,
        tags: tags.iter().map(|&(k, v)| (k.to_owned(), v)).collect(),
    };
    let mut v = vec![
        Val::Bytes(vec![]),
        Val::Bytes(vec![7]),
        Val::Str("héllo {\"json\": true}".into()),
        Val::U64(u64::MAX - 1),
        Val::Call(call(None, &[])),
        Val::Call(call(Some(3), &[("a", 1), ("bb", 0xBEEF)])),
        Val::Strings(vec![]),
        Val::Strings(vec!["x".into(), String::new(), "yz".into()]),
        Val::Ev(Ev::Started { at: 42 }),
        Val::Ev(Ev::Note("n".into())),
        Val::Ev(Ev::Stopped),
        Val::Bytes((0..400).map(|i| i as u8).collect()), // larger than a segment
    ];
    for i in 0..12u8 {
        v.push(Val::Bytes(vec![i; i as usize * 9]));
    }
    v
}

const LIMITS: Limits = Limits {
    record_size_bytes_max: 1 << 16,
    segment_size_bytes_max: 300,
};

/// Makes the journal in `storage` one of format `version`: an empty segment 0 of that version,
/// by hand (*Segment header*). A writer opening it continues in that version; without it, a
/// writer creates a journal of the current version, 2.
fn seed(storage: &SimStorage, version: u32) {
    let mut b = b"TJRNSEG\0".to_vec();
    b.extend(version.to_le_bytes());
    b.extend([0x5A; 16]); // journal_id
    b.extend(0u64.to_le_bytes()); // segment_number
    b.extend(1u64.to_le_bytes()); // first_seq
    let header_crc = crc(&[&b[0..44]]);
    b.extend(header_crc.to_le_bytes());
    storage.put_file(&format!("{:020}.segment", 0), b);
}

/// A simulated journal of format `version` (1 seeded by hand, 2 as the writer creates it).
fn storage_of_version(version: u32) -> SimStorage {
    let storage = SimStorage::new();
    if version == 1 {
        seed(&storage, 1);
    }
    storage
}

fn write_journal(storage: Arc<dyn Storage>, vals: &[Val]) {
    let (j, _) = Journal::open(
        storage,
        Options {
            limits: LIMITS,
            ..Default::default()
        },
    )
    .expect("open");
    for (i, v) in vals.iter().enumerate() {
        assert_eq!(j.append(v).expect("append"), i as u64 + 1, "seq");
    }
    j.sync_through_blocking(vals.len() as u64).expect("sync");
    j.close().expect("close");
}

fn sim_files(s: &SimStorage) -> Vec<(String, Vec<u8>)> {
    s.file_names()
        .into_iter()
        .map(|n| (n.clone(), s.read_file(&n).unwrap()))
        .collect()
}

// ---- Tests ----

#[test]
fn independent_reader_reads_every_byte_the_writer_wrote() {
    for version in [1, 2] {
        reads_every_byte(version);
    }
}

fn reads_every_byte(version: u32) {
    let storage = storage_of_version(version);
    let vals = values();
    write_journal(Arc::new(storage.clone()), &vals);
    let files = sim_files(&storage);
    let (p, end) = read_journal(&files, LIMITS.record_size_bytes_max);
    assert_eq!(end, End::Clean, "version {version}");
    assert_eq!(p.format_version, Some(version));
    let layout = Layout::of(version);

    let segs: Vec<_> = files
        .iter()
        .filter(|(n, _)| segment_number(n).is_some())
        .collect();
    assert!(segs.len() >= 4, "several segments: {}", segs.len());
    assert_eq!(segs.len(), p.frames_per_segment.len());
    for (i, (name, b)) in segs.iter().enumerate() {
        assert_eq!(name, &format!("{i:020}.segment"));
        assert_eq!(&b[0..8], &[0x54, 0x4A, 0x52, 0x4E, 0x53, 0x45, 0x47, 0x00]);
        assert_eq!(
            le32(b, 8),
            version,
            "every segment has the journal's version"
        );
        assert_eq!(le64(b, 28), i as u64);
        let frames = &p.frames_per_segment[i];
        assert!(!frames.is_empty(), "segment {i} holds records");
        assert_eq!(HEADER + frames.iter().sum::<usize>(), b.len()); // ends at a frame
                                                                    // Segment size limit: at most 300 bytes unless a single record needs more; and a new
                                                                    // segment is started only when the next record would grow this one past the limit.
        assert!(b.len() as u64 <= LIMITS.segment_size_bytes_max || frames.len() == 1);
        if let Some(next) = p.frames_per_segment.get(i + 1) {
            assert!((b.len() + next[0]) as u64 > LIMITS.segment_size_bytes_max);
        }
    }
    assert!(p.journal_id.is_some_and(|id| id != [0; 16]));

    // first_seq: 1, then the last seq of the previous segment + 1.
    let mut next = 1;
    for (i, frames) in p.frames_per_segment.iter().enumerate() {
        assert_eq!(p.first_seqs[i], next, "first_seq of segment {i}");
        next += frames.len() as u64;
    }

    assert_eq!(p.frames.len(), vals.len());
    for (i, ((seq, payload), want)) in p.frames.iter().zip(&vals).enumerate() {
        assert_eq!(*seq, i as u64 + 1);
        assert_eq!(&decode(want, payload, layout), want, "seq {seq}");
    }
    // Hand-checked payloads, byte for byte: Ev::Note("n"), the `Call` with its tags.
    let (note, call): (&[u8], &[u8]) = match layout {
        Layout::Fixint => (&[1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, b'n'], &[]),
        Layout::Varint => (
            &[1, 1, b'n'],
            &[
                253, 8, 7, 6, 5, 4, 3, 2, 1, // id: a u64 over 2^32
                4, b'g', b'r', b'e', b'p', // name
                1, 3, // retries: Some(3)
                0, // ok: false
                9, // delta: -5, zigzag 9
                2, 1, b'a', 1, 2, b'b', b'b', 251, 0xEF, 0xBE, // tags
            ],
        ),
    };
    assert_eq!(p.frames[9].1, note);
    if layout == Layout::Varint {
        assert_eq!(p.frames[5].1, call);
    }
}

#[test]
fn crc32_check_value_from_the_doc() {
    assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
    assert_eq!(crc(&[b"1234", b"56789"]), 0xCBF4_3926);
}

#[test]
fn directory_layout_on_a_real_file_system() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("j");
    let vals = values();
    write_journal(Arc::new(FsStorage::create(&dir).unwrap()), &vals);

    let mut files = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        assert!(!name.ends_with(".tmp"), "leftover temp file {name}");
        let mode = e.metadata().unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{name} mode");
        files.push((name, std::fs::read(e.path()).unwrap()));
    }
    files.sort();
    assert!(
        files.iter().any(|(n, b)| n == "LOCK" && b.is_empty()),
        "an empty LOCK"
    );
    let mut numbers = Vec::new();
    for (name, _) in files.iter().filter(|(n, _)| n != "LOCK") {
        let n = segment_number(name).unwrap_or_else(|| panic!("unexpected file {name}"));
        assert_eq!(name.len(), 20 + ".segment".len());
        numbers.push(n);
    }
    assert!(numbers.len() > 1);
    assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>());
    let dir_mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(dir_mode & 0o777, 0o700, "directory mode");

    let (p, end) = read_journal(&files, LIMITS.record_size_bytes_max);
    assert_eq!((end, p.frames.len()), (End::Clean, vals.len()));
}

/// The crate's own reader's verdict, in the independent reader's terms.
fn crate_verdict(storage: &SimStorage) -> End {
    let drained = Reader::open(Arc::new(storage.clone()), LIMITS).and_then(|r| r.drain());
    match drained {
        Ok((ReadEnd::Clean, _)) => End::Clean,
        Ok((ReadEnd::TornTail(t), _)) => End::Torn(t.position.segment, t.position.offset),
        Ok((ReadEnd::Corrupt(c), _)) | Err(JournalError::Corrupt { corruption: c, .. }) => {
            End::Corrupt(c.position.segment, c.position.offset)
        }
        Err(e) => panic!("reader: {e}"),
    }
}

#[test]
fn torn_tail_and_corruption_agree_with_the_crate() {
    for version in [1, 2] {
        torn_and_corrupt_agree(version);
    }
}

fn torn_and_corrupt_agree(version: u32) {
    let base = storage_of_version(version);
    // Two small records last, so that the last segment holds at least two in either version.
    let mut vals = values();
    vals.extend([Val::U64(1), Val::U64(2)]);
    write_journal(Arc::new(base.clone()), &vals);
    let files = sim_files(&base);
    let (p, end) = read_journal(&files, LIMITS.record_size_bytes_max);
    assert_eq!((end, crate_verdict(&base)), (End::Clean, End::Clean));
    let last = p.frames_per_segment.len() as u64 - 1;
    let name = |s: u64| format!("{s:020}.segment");
    // Frame start offsets in segment `s`.
    let starts = |s: u64| -> Vec<usize> {
        let lens = &p.frames_per_segment[s as usize];
        (0..=lens.len())
            .map(|k| HEADER + lens[..k].iter().sum::<usize>())
            .collect()
    };
    let (ls, s1) = (starts(last), starts(1));
    assert!(ls.len() >= 3, "need two records in the last segment");
    // ls[k]: start of frame k; its last entry is the end of the file.
    let (mid, tail, eof) = (ls[0], ls[ls.len() - 2], ls[ls.len() - 1] as u64);

    // [independent reader, crate reader] on a copy whose segment `seg` is damaged (or, if
    // emptied, removed).
    let both = |seg: u64, damage: &dyn Fn(&mut Vec<u8>)| -> [End; 2] {
        let storage = SimStorage::new();
        let mut damaged = files.clone();
        damaged
            .iter_mut()
            .filter(|f| f.0 == name(seg))
            .for_each(|f| damage(&mut f.1));
        damaged.retain(|(n, b)| !b.is_empty() || !n.ends_with(".segment"));
        damaged
            .iter()
            .for_each(|(n, b)| storage.put_file(n, b.clone()));
        let (_, ours) = read_journal(&damaged, LIMITS.record_size_bytes_max);
        [ours, crate_verdict(&storage)]
    };
    let t = tail as u64;
    use End::{Corrupt, Torn};
    // Torn tails: cut mid-record, cut inside a length field, zeros, garbage, a short header.
    assert_eq!(both(last, &|b| b.truncate(tail + 11)), [Torn(last, t); 2]);
    assert_eq!(both(last, &|b| b.truncate(tail + 2)), [Torn(last, t); 2]);
    // Zeros to the end of the file: torn bytes in format 1; in format 2, where records end
    // (*Preallocated tail*): the zeroed last record is gone, the journal clean.
    let (zeros_after, zeros_over) = match version {
        1 => (Torn(last, eof), Torn(last, t)),
        _ => (End::Clean, End::Clean),
    };
    assert_eq!(
        both(last, &|b| b.resize(b.len() + 512, 0)),
        [zeros_after; 2]
    );
    assert_eq!(both(last, &|b| b[tail..].fill(0)), [zeros_over; 2]);
    // Format 2: zeros over the end of a sealed segment hide its last records from the reader,
    // and the next segment's first_seq says so.
    if version >= 2 {
        let hide = |b: &mut Vec<u8>| {
            let from = s1[s1.len() - 2];
            b[from..].fill(0)
        };
        assert_eq!(both(1, &hide), [Corrupt(2, 0); 2]);
    }
    let garbage = |b: &mut Vec<u8>| {
        b.extend((0..999u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8))
    };
    assert_eq!(both(last, &garbage), [Torn(last, eof); 2]);
    assert_eq!(both(last, &|b| b.truncate(20)), [Torn(last, 0); 2]);
    // Corruption: a bad frame followed by a valid one; a valid frame with the wrong seq; a bad
    // frame in a segment that is not the last; bad headers; a missing segment.
    assert_eq!(
        both(last, &|b| b[mid + 17] ^= 0x40),
        [Corrupt(last, mid as u64); 2]
    );
    let repeat = |b: &mut Vec<u8>| b.extend_from_within(tail..);
    assert_eq!(both(last, &repeat), [Corrupt(last, eof); 2]);
    let s1_cut = |b: &mut Vec<u8>| b.truncate(s1[0] + 11);
    assert_eq!(both(1, &s1_cut), [Corrupt(1, s1[0] as u64); 2]);
    assert_eq!(both(last, &|b| b[20] ^= 1), [Corrupt(last, 0); 2]);
    assert_eq!(both(0, &|b| b[0] = b'X'), [Corrupt(0, 0); 2]);
    // An unknown format version; a known one that is not the journal's (its CRC made right).
    assert_eq!(both(last, &|b| b[8] = 3), [Corrupt(last, 0); 2]);
    let other_version = |b: &mut Vec<u8>| {
        b[8] = 3 - version as u8;
        let header_crc = crc(&[&b[0..44]]);
        b[44..48].copy_from_slice(&header_crc.to_le_bytes());
    };
    assert_eq!(both(last, &other_version), [Corrupt(last, 0); 2]);
    assert_eq!(both(1, &other_version), [Corrupt(1, 0); 2]);
    assert_eq!(both(1, &|b| b.clear()), [Corrupt(1, 0); 2]);
}

// ---- Events and versioning (FORMAT.md, *Events* and *Versioning*) ----

mod events;
mod old_journals;
mod rules;
pub mod sample;
mod v2;

use runtime::event::{Event, Record, EVENT_SCHEMA_VERSION};
use sample::every_event;

/// The payloads of a journal of format `version` written with these records (read back by the
/// independent reader).
fn payloads_of(records: &[Record], version: u32) -> Vec<Vec<u8>> {
    let storage = storage_of_version(version);
    let (j, _) = Journal::open(Arc::new(storage.clone()), Options::default()).expect("open");
    for r in records {
        j.append(r).expect("append");
    }
    j.close().expect("close");
    let (p, end) = read_journal(
        &sim_files(&storage),
        Limits::default().record_size_bytes_max,
    );
    assert_eq!((end, p.format_version), (End::Clean, Some(version)));
    p.frames.into_iter().map(|(_, payload)| payload).collect()
}

/// Every record of [`every_event`], written in format `version`, decodes by the document into
/// what was written, and every variant `counts` lists is in some record.
fn decodes_every_event_and_variant(version: u32, counts: &[(&'static str, u32)]) {
    let layout = Layout::of(version);
    let records = every_event();
    let payloads = payloads_of(&records, version);
    assert_eq!(payloads.len(), records.len());
    assert_eq!(
        events::declared_schema(&payloads[0], layout),
        Some(EVENT_SCHEMA_VERSION)
    );
    let mut seen = std::collections::BTreeSet::new();
    for (record, payload) in records.iter().zip(&payloads) {
        let decoded = events::decode_record(payload, layout, &mut seen)
            .unwrap_or_else(|e| panic!("format {version}, {}: {e:?}", record.event.kind()));
        assert_eq!(decoded.at_ms, record.at_ms);
        assert_eq!(decoded.name, record.event.kind());
        assert_eq!(
            decoded.fields,
            serde_content(&record.event),
            "format {version}, {}",
            decoded.name
        );
    }
    for &(ty, count) in counts {
        for index in 0..count {
            assert!(
                seen.contains(&(ty, index)),
                "{ty} variant {index} never written"
            );
        }
    }
}

/// The variant's content as serde renders it (`{"Name": content}` → content; a unit → null).
fn serde_content(event: &Event) -> serde_json::Value {
    match serde_json::to_value(event).expect("events render as JSON") {
        serde_json::Value::Object(m) => m.into_iter().next().expect("one key").1,
        _ => serde_json::Value::Null,
    }
}

#[test]
fn every_event_and_every_variant_decodes_by_the_document() {
    // A bump of the schema, or a new event, must come with this reader's update.
    assert_eq!(
        EVENT_SCHEMA_VERSION,
        events::DOC_SCHEMA,
        "extend format_doc.rs"
    );
    let counts = events::variant_counts();
    assert_eq!(
        counts[0],
        ("Event", Event::VARIANT_COUNT),
        "extend format_doc.rs"
    );

    for version in [1, 2] {
        decodes_every_event_and_variant(version, &counts);
    }
    // Hand-checked bytes of format 1 (format 2's: `v2::hand_checked_payloads_of_format_2`).
    let records = every_event();
    let payloads = payloads_of(&records, 1);
    // Hand-checked: `ProcExit.status` -1 is four 0xFF bytes (two's complement), a tuple is its
    // elements back to back.
    let settled = &payloads[records
        .iter()
        .position(|r| matches!(r.event, Event::Settled { .. }))
        .unwrap()];
    let pid = 4242u32.to_le_bytes();
    let at = settled.windows(4).position(|w| w == pid).unwrap();
    assert_eq!(settled[at + 4..at + 9], [1, 0xFF, 0xFF, 0xFF, 0xFF]);
    let recovery = &payloads[records
        .iter()
        .position(|r| matches!(r.event, Event::Recovery(_)))
        .unwrap()];
    let tail = &recovery[recovery.len() - 14..];
    assert_eq!(tail, [1, 1, 0, 0, 0, 2, 0, 0, 0, 1, 1, 0, 0, 0]);
    // Hand-checked (schema 3): `settings` of the first `session/model` is `Some(4096)` then
    // `Some(0.5)`, an f64's IEEE 754 bytes little-endian; the second `llm/attempt-failed` has
    // `kind` 1 (`status`) and `status` `Some(503)` as two bytes.
    let payload_of = |kind: &str, nth: usize| {
        let i = records
            .iter()
            .enumerate()
            .filter(|(_, r)| r.event.kind() == kind)
            .nth(nth)
            .unwrap_or_else(|| panic!("no {kind} number {nth}"))
            .0;
        &payloads[i]
    };
    let settings = [1, 0x00, 0x10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xE0, 0x3F];
    let model = payload_of("session/model", 0);
    assert!(
        model.windows(settings.len()).any(|w| w == settings),
        "{model:?}"
    );
    let failed = payload_of("llm/attempt-failed", 1);
    assert_eq!(failed[8..12], 31u32.to_le_bytes());
    assert_eq!(failed[24..31], [1, 0, 0, 0, 1, 0xF7, 0x01]);
    // Hand-checked (schema 4): an `ask/reply` is event 34; after its `CallRef` (turn 1, step 2,
    // "call_1"), `Answered` (0) is its `Answer`'s fields with nothing between; `Declined` (1)
    // without a reason is its index and a `None`.
    let call = [
        &1u32.to_le_bytes()[..],
        &2u32.to_le_bytes(),
        &6u64.to_le_bytes(),
        b"call_1",
    ]
    .concat();
    let answered = payload_of("ask/reply", 1);
    assert_eq!(answered[8..12], 34u32.to_le_bytes());
    let mut want = call.clone();
    want.extend([0, 0, 0, 0]); // Answered
    want.extend(0u64.to_le_bytes()); // no choice
    want.push(0); // text: none
    assert_eq!(answered[12..], want[..]);
    let declined = payload_of("ask/reply", 3);
    let mut want = call.clone();
    want.extend([1, 0, 0, 0, 0]); // Declined, text: none
    assert_eq!(declined[12..], want[..]);
    // Hand-checked (schema 4, the context reduction): the fifth `llm/attempt-failed` has kind 4
    // (`context_overflow`) and `status` `Some(400)`; a `context/compacted` is event 36, its
    // `trigger` a `u32` index, `shortened` a count then each (turn, step) as two `u32`s.
    let overflowed = payload_of("llm/attempt-failed", 4);
    assert_eq!(overflowed[24..31], [4, 0, 0, 0, 1, 0x90, 0x01]);
    let compacted = payload_of("context/compacted", 0);
    assert_eq!(compacted[8..12], 36u32.to_le_bytes());
    let mut want = Vec::new();
    for n in [3u32, 2, 0, 2] {
        want.extend(n.to_le_bytes()); // turn, step, trigger: overflow, through_turn
    }
    want.push(1); // summary: some
    assert_eq!(compacted[12..29], want[..]);
    let mut tail = vec![0]; // summary_note: none
    tail.extend(1u64.to_le_bytes()); // one pair
    tail.extend(3u32.to_le_bytes());
    tail.extend(1u32.to_le_bytes());
    tail.extend(2_000u32.to_le_bytes()); // preview_chars
    tail.extend(210_000u64.to_le_bytes()); // tokens_before
    tail.extend(40_000u64.to_le_bytes()); // tokens_after
    assert!(compacted.ends_with(&tail), "{compacted:?}");
    let threshold = payload_of("context/compacted", 1);
    assert_eq!(threshold[20..24], 1u32.to_le_bytes(), "trigger: threshold");
    let asked = payload_of("context/summary-requested", 0);
    assert_eq!(asked[8..12], 35u32.to_le_bytes());
    // Hand-checked (schema 5): the first `started` is event 10, the old shape; the next is
    // event 37: `CallRef`, `attempt`, `Resources`, then the key as a string, the evidence as a
    // count and each item (`FileReplace` is 0; a `None` before-hash is one 0 byte), then
    // `source_seqs`.
    let old_started = payload_of("started", 0);
    assert_eq!(old_started[8..12], 10u32.to_le_bytes());
    let started = payload_of("started", 1);
    let Some(Event::Started(written)) = records
        .iter()
        .map(|r| &r.event)
        .find(|e| matches!(e, Event::Started(_)))
    else {
        panic!("the sample has a schema-5 started");
    };
    let string = |s: &str| [&(s.len() as u64).to_le_bytes()[..], s.as_bytes()].concat();
    let mut want = 37u32.to_le_bytes().to_vec();
    want.extend(&call);
    want.extend(1u32.to_le_bytes()); // attempt
    want.extend(0u64.to_le_bytes()); // reads: none
    want.extend(2u64.to_le_bytes()); // writes: two
    want.extend(string("new.txt"));
    want.extend(string("src/old.rs"));
    want.extend(0u64.to_le_bytes()); // intents: none
    assert_eq!(written.idempotency_key.len(), 68);
    want.extend(string(&written.idempotency_key));
    want.extend(2u64.to_le_bytes()); // two evidence items
    want.extend(0u32.to_le_bytes()); // FileReplace
    want.extend(string("new.txt"));
    want.push(0); // before_sha256: none (the file does not exist)
    want.extend(string("aa"));
    want.extend(0u32.to_le_bytes()); // FileReplace
    want.extend(string("src/old.rs"));
    want.push(1); // before_sha256: some
    want.extend(string("bb"));
    want.extend(string("cc"));
    want.extend(2u64.to_le_bytes()); // source_seqs
    want.extend(9u64.to_le_bytes());
    want.extend(10u64.to_le_bytes());
    assert_eq!(started[8..], want[..]);
    // `recovery/rerun` is event 38: the policy's index (`not_started` 0), then the calls.
    let rerun = payload_of("recovery/rerun", 0);
    let mut want = 38u32.to_le_bytes().to_vec();
    want.extend(0u32.to_le_bytes());
    want.extend(2u64.to_le_bytes());
    want.extend(&call);
    want.extend(
        [
            &1u32.to_le_bytes()[..],
            &2u32.to_le_bytes(),
            &string("call_2"),
        ]
        .concat(),
    );
    assert_eq!(rerun[8..], want[..]);
    let safe = payload_of("recovery/rerun", 1);
    assert_eq!(safe[12..], [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // safe, no calls
}

/// The runtime's verdict (its `EventDecoder`) in the independent reader's terms.
fn runtime_verdict(payloads: &[Vec<u8>], layout: Layout) -> events::Verdict {
    let encoding = match layout {
        Layout::Fixint => tooljournal_journal::codec::Encoding::Fixint,
        Layout::Varint => tooljournal_journal::codec::Encoding::Varint,
    };
    let mut decoder = runtime::replay::EventDecoder::new();
    for (index, payload) in payloads.iter().enumerate() {
        let record = tooljournal_journal::RecordRef {
            seq: index as u64 + 1,
            position: tooljournal_journal::Position {
                segment: 0,
                offset: 0,
            },
            frame_bytes: 0,
            payload,
            encoding,
        };
        match decoder.decode(record) {
            Ok(_) => {}
            Err(runtime::replay::ReplayError::NewerSchema { schema, .. }) => {
                return events::Verdict::Newer { index, schema }
            }
            Err(_) => return events::Verdict::Corrupt { index },
        }
    }
    events::Verdict::Read(payloads.len())
}

#[test]
fn the_versioning_rule_agrees_with_the_runtime() {
    // In format 1, where the schema's bytes are at a fixed place (format 2: `v2.rs`).
    use events::Verdict;
    let records = every_event();
    let with_schema = |schema: u32| -> Vec<Vec<u8>> {
        let mut p = payloads_of(&records, 1);
        p[0][12..16].copy_from_slice(&schema.to_le_bytes());
        p
    };
    let newer = events::DOC_SCHEMA + 1;
    // Everything decodes: read, whatever the schema says.
    for schema in [events::DOC_SCHEMA, newer] {
        let p = with_schema(schema);
        assert_eq!(
            events::verdict(&p, Layout::Fixint),
            Verdict::Read(records.len())
        );
        assert_eq!(
            runtime_verdict(&p, Layout::Fixint),
            Verdict::Read(records.len())
        );
    }
    // An unknown event type, an unknown variant deep inside (the `SideEffect` of a settled
    // record), trailing bytes: newer with a newer schema, corrupt otherwise.
    let settled = records
        .iter()
        .position(|r| matches!(r.event, Event::Settled { .. }))
        .unwrap();
    type Damage<'a> = &'a dyn Fn(&mut Vec<u8>);
    let damages: [(usize, Damage); 3] = [
        (5, &|p| {
            p[8..12].copy_from_slice(&Event::VARIANT_COUNT.to_le_bytes())
        }),
        (settled, &|p| {
            // The first side effect (index 0, path "a") follows the side-effect count (7).
            let mut first = 7u64.to_le_bytes().to_vec();
            first.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, b'a']);
            let at = p.windows(first.len()).position(|w| w == first).unwrap() + 8;
            p[at..at + 4].copy_from_slice(&5u32.to_le_bytes());
        }),
        (2, &|p| p.push(0)),
    ];
    for (index, damage) in damages {
        for schema in [events::DOC_SCHEMA, newer] {
            let mut p = with_schema(schema);
            damage(&mut p[index]);
            let expected = if schema > events::DOC_SCHEMA {
                Verdict::Newer { index, schema }
            } else {
                Verdict::Corrupt { index }
            };
            assert_eq!(
                events::verdict(&p, Layout::Fixint),
                expected,
                "record {index}, schema {schema}"
            );
            assert_eq!(
                runtime_verdict(&p, Layout::Fixint),
                expected,
                "record {index}, schema {schema}"
            );
        }
    }
}
