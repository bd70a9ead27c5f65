//! `docs/FORMAT.md` against the bytes: an independent reader written from that document alone
//! (std and `crc32fast` only, no `journal::{framing, segment, codec, Reader}`), run over journals
//! made by the public writer API.

use journal::{
    FsStorage, Journal, JournalError, Limits, Options, ReadEnd, Reader, SimStorage, Storage,
};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

// ---- The independent reader (FORMAT.md only) ----

const HEADER: usize = 48;

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
fn header_ok(b: &[u8], number: u64, id: Option<[u8; 16]>, first_seq: u64) -> bool {
    b.len() >= HEADER
        && b[0..8] == *b"TJRNSEG\0"
        && le32(b, 8) == 1
        && crc(&[&b[0..44]]) == le32(b, 44)
        && le64(b, 28) == number
        && id.is_none_or(|id| id == b[12..28])
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
        if !header_ok(b, number, p.journal_id, expected) {
            return (p, corrupt(0));
        }
        p.journal_id = Some(b[12..28].try_into().unwrap());
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

/// Payload encoding, by hand.
struct Cur<'a>(&'a [u8]);
impl Cur<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        assert!(self.0.len() >= n, "payload too short");
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
    fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }
    fn u32(&mut self) -> u32 {
        le32(self.take(4), 0)
    }
    fn u64(&mut self) -> u64 {
        le64(self.take(8), 0)
    }
    fn bytes(&mut self) -> Vec<u8> {
        let n = self.u64() as usize;
        self.take(n).to_vec()
    }
    fn string(&mut self) -> String {
        String::from_utf8(self.bytes()).expect("UTF-8")
    }
    fn option<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> Option<T> {
        match self.u8() {
            0 => None,
            1 => Some(f(self)),
            t => panic!("option tag {t}"),
        }
    }
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

/// Decodes `payload` as the same type as `like`; the payload must be exactly one value.
fn decode(like: &Val, payload: &[u8]) -> Val {
    let mut c = Cur(payload);
    let v = match like {
        Val::Bytes(_) => Val::Bytes(c.bytes()),
        Val::Str(_) => Val::Str(c.string()),
        Val::U64(_) => Val::U64(c.u64()),
        Val::Call(_) => Val::Call(Call {
            id: c.u64(),
            name: c.string(),
            retries: c.option(|c| c.u32()),
            ok: match c.u8() {
                b @ (0 | 1) => b == 1,
                b => panic!("bool byte {b}"),
            },
            delta: c.u32() as i32,
            tags: (0..c.u64())
                .map(|_| (c.string(), u16::from_le_bytes([c.u8(), c.u8()])))
                .collect(),
        }),
        Val::Strings(_) => Val::Strings((0..c.u64()).map(|_| c.string()).collect()),
        Val::Ev(_) => Val::Ev(match c.u32() {
            0 => Ev::Started { at: c.u64() },
            1 => Ev::Note(c.string()),
            2 => Ev::Stopped,
            i => panic!("variant {i}"),
        }),
    };
    assert!(c.0.is_empty(), "{} trailing payload bytes", c.0.len());
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
    let storage = SimStorage::new();
    let vals = values();
    write_journal(Arc::new(storage.clone()), &vals);
    let files = sim_files(&storage);
    let (p, end) = read_journal(&files, LIMITS.record_size_bytes_max);
    assert_eq!(end, End::Clean);

    let segs: Vec<_> = files
        .iter()
        .filter(|(n, _)| segment_number(n).is_some())
        .collect();
    assert!(segs.len() >= 4, "several segments: {}", segs.len());
    assert_eq!(segs.len(), p.frames_per_segment.len());
    for (i, (name, b)) in segs.iter().enumerate() {
        assert_eq!(name, &format!("{i:020}.segment"));
        assert_eq!(&b[0..8], &[0x54, 0x4A, 0x52, 0x4E, 0x53, 0x45, 0x47, 0x00]);
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
        assert_eq!(&decode(want, payload), want, "seq {seq}");
    }
    // A hand-checked payload, byte for byte: Ev::Note("n").
    assert_eq!(p.frames[9].1, [1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, b'n']);
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
    let base = SimStorage::new();
    write_journal(Arc::new(base.clone()), &values());
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
    assert_eq!(
        both(last, &|b| b.resize(b.len() + 512, 0)),
        [Torn(last, eof); 2]
    );
    assert_eq!(both(last, &|b| b[tail..].fill(0)), [Torn(last, t); 2]);
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
    assert_eq!(both(last, &|b| b[8] = 2), [Corrupt(last, 0); 2]);
    assert_eq!(both(1, &|b| b.clear()), [Corrupt(1, 0); 2]);
}
