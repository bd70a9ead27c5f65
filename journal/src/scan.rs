//! Finding the first valid frame after a bad one, in time linear in the bytes scanned.
//!
//! Why: rule 3 of `docs/FORMAT.md` (a bad frame followed by any valid frame is corruption)
//! makes the reader look for a valid frame at every later offset. Checksumming each candidate
//! from scratch costs its length, so a crafted tail whose every offset holds a plausible length
//! field costs the square of its size (minutes for 8 MiB).
//!
//! How: CRC-32 is linear over GF(2). Let `G(i)` be the CRC register (no pre- or post-
//! conditioning) run over the segment's bytes from a fixed origin to offset `i`. Then the
//! register after running the bytes `a..e` from any state `J` is
//! `(J ⊕ G(a))·x^(8(e−a)) ⊕ G(e)` (mod the CRC polynomial). The scan runs the register once over
//! every byte it reads and keeps `G` at every [`SAMPLE_BYTES`]-th offset, so a candidate costs
//! at most 4 + 2·[`SAMPLE_BYTES`] bytes of CRC and a few multiplications, whatever its length.
//! Candidates are still tried in offset order, so the answer is the first valid frame, as before.

use crate::framing::{self, FRAME_BYTES_MIN, FRAME_PREFIX_BYTES, SEQ_BYTES};
use crate::storage::{read_full_at, ReadAt};
use std::sync::OnceLock;

/// `G` is kept at every this many offsets.
const SAMPLE_BYTES: u64 = 32;
/// Bytes read from the file at a time.
const READ_CHUNK_BYTES: u64 = 1 << 20;

/// The reflected CRC-32 polynomial (IEEE 802.3).
const POLY: u32 = 0xEDB8_8320;
/// `x^0` in the reflected representation (bit 31 is the coefficient of `x^0`).
const ONE: u32 = 1 << 31;

/// How much work tail scans did: what a test counts to show the scan is linear.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanWork {
    /// Bytes read from the segment by scans.
    pub bytes_scanned: u64,
    /// Byte steps of CRC computed by scans (each byte read once, plus a bounded number per
    /// candidate).
    pub bytes_checksummed: u64,
    /// Offsets whose length field was plausible and whose frame fits in the segment.
    pub candidates: u64,
}

impl ScanWork {
    pub(crate) fn add(&mut self, other: ScanWork) {
        self.bytes_scanned += other.bytes_scanned;
        self.bytes_checksummed += other.bytes_checksummed;
        self.candidates += other.candidates;
    }
}

const fn crc_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

static CRC_TABLE: [u32; 256] = crc_table();

/// One byte through the CRC register.
fn step(state: u32, byte: u8) -> u32 {
    CRC_TABLE[((state ^ u32::from(byte)) & 0xff) as usize] ^ (state >> 8)
}

/// `a·b` modulo the CRC polynomial, reflected representation (zlib's `multmodp`).
fn mul(a: u32, mut b: u32) -> u32 {
    let mut product = 0;
    let mut m = ONE;
    while m != 0 {
        if a & m != 0 {
            product ^= b;
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    product
}

/// `POWERS[j][d]` = `x^(8·d·256^j)`: the register shift for `d·256^j` zero bytes.
fn powers() -> &'static [[u32; 256]; 4] {
    static POWERS: OnceLock<[[u32; 256]; 4]> = OnceLock::new();
    POWERS.get_or_init(|| {
        let mut powers = [[ONE; 256]; 4];
        // x^8: one byte.
        let mut base = ONE >> 8;
        for table in powers.iter_mut() {
            for d in 1..256 {
                table[d] = mul(table[d - 1], base);
            }
            // x^(8·256^(j+1)) = (x^(8·256^j))^256: eight squarings.
            for _ in 0..8 {
                base = mul(base, base);
            }
        }
        powers
    })
}

/// The register `state` followed by `bytes` zero bytes: `state·x^(8·bytes)`.
fn shift(state: u32, bytes: u32) -> u32 {
    let powers = powers();
    let mut v = state;
    for (j, table) in powers.iter().enumerate() {
        let digit = ((bytes >> (8 * j)) & 0xff) as usize;
        if digit != 0 {
            v = mul(v, table[digit]);
        }
    }
    v
}

/// A scan's read-ahead over one segment: bytes `base..base + buf.len()`, and `G` at every
/// [`SAMPLE_BYTES`]-th offset from `base`.
pub(crate) struct Scan {
    base: u64,
    buf: Vec<u8>,
    /// `samples[k]` = `G(base + k·SAMPLE_BYTES)`.
    samples: Vec<u32>,
    /// `G` at the end of `buf`.
    register: u32,
    pub(crate) work: ScanWork,
}

impl Scan {
    /// A scan whose origin is `base`.
    pub(crate) fn new(base: u64) -> Scan {
        Scan {
            base,
            buf: Vec::new(),
            samples: vec![0],
            register: 0,
            work: ScanWork::default(),
        }
    }

    /// Whether a scan from `offset` can go on with what this one holds.
    pub(crate) fn covers(&self, offset: u64) -> bool {
        offset >= self.base
    }

    fn end(&self) -> u64 {
        self.base + self.buf.len() as u64
    }

    /// Reads on until the buffer holds bytes up to `to` (at most `len_bytes`).
    fn fill(&mut self, file: &dyn ReadAt, to: u64, len_bytes: u64) -> std::io::Result<()> {
        while self.end() < to.min(len_bytes) {
            let from = self.end();
            let want = READ_CHUNK_BYTES.max(to - from).min(len_bytes - from);
            let old_len = self.buf.len();
            self.buf.resize(old_len + want as usize, 0);
            let got = read_full_at(file, from, &mut self.buf[old_len..])?;
            self.buf.truncate(old_len + got);
            if got == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("segment shorter than its length of {len_bytes} bytes"),
                ));
            }
            for (i, &byte) in self.buf[old_len..].iter().enumerate() {
                self.register = step(self.register, byte);
                if ((old_len + i + 1) as u64).is_multiple_of(SAMPLE_BYTES) {
                    self.samples.push(self.register);
                }
            }
            self.work.bytes_scanned += got as u64;
            self.work.bytes_checksummed += got as u64;
        }
        Ok(())
    }

    /// Drops what lies before `offset` (in whole samples) once that is at least half the buffer.
    fn drop_before(&mut self, offset: u64) {
        let samples = (offset - self.base) / SAMPLE_BYTES;
        let bytes = samples * SAMPLE_BYTES;
        if bytes >= READ_CHUNK_BYTES && bytes * 2 >= self.buf.len() as u64 {
            self.buf.drain(..bytes as usize);
            self.samples.drain(..samples as usize);
            self.base += bytes;
        }
    }

    /// `G(offset)`, for `base <= offset <= end()`.
    fn register_at(&mut self, offset: u64) -> u32 {
        let from_base = offset - self.base;
        let k = from_base / SAMPLE_BYTES;
        let mut g = self.samples[k as usize];
        let start = (k * SAMPLE_BYTES) as usize;
        for &byte in &self.buf[start..from_base as usize] {
            g = step(g, byte);
        }
        self.work.bytes_checksummed += from_base - k * SAMPLE_BYTES;
        g
    }

    /// Where the first valid frame (by `framing::check`, whatever its seq) starting at or after
    /// `from` lies, if any does in a segment of `len_bytes`.
    pub(crate) fn first_valid_from(
        &mut self,
        file: &dyn ReadAt,
        from: u64,
        len_bytes: u64,
        length_max: u32,
    ) -> std::io::Result<Option<u64>> {
        let mut p = from;
        while p + FRAME_BYTES_MIN as u64 <= len_bytes {
            self.drop_before(p);
            self.fill(file, p + FRAME_BYTES_MIN as u64, len_bytes)?;
            let at = (p - self.base) as usize;
            let head = &self.buf[at..at + FRAME_BYTES_MIN];
            let length = framing::length_field(head).unwrap_or(0);
            let frame_end = p + FRAME_PREFIX_BYTES as u64 + u64::from(length);
            // Cheap checks first: a frame needs a plausible length and must fit in the segment.
            if (SEQ_BYTES as u32..=length_max).contains(&length) && frame_end <= len_bytes {
                self.work.candidates += 1;
                let stored = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
                let mut j = u32::MAX;
                for &byte in &head[..4] {
                    j = step(j, byte);
                }
                self.work.bytes_checksummed += 4;
                self.fill(file, frame_end, len_bytes)?;
                let body_start = p + FRAME_PREFIX_BYTES as u64;
                let g_start = self.register_at(body_start);
                let g_end = self.register_at(frame_end);
                let computed = shift(j ^ g_start, length) ^ g_end ^ u32::MAX;
                if computed == stored {
                    return Ok(Some(p));
                }
            }
            p += 1;
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shift_is_running_zero_bytes() {
        for (state, n) in [
            (0xdead_beefu32, 1u32),
            (1, 255),
            (0x1234_5678, 256),
            (7, 70_001),
        ] {
            let mut expected = state;
            for _ in 0..n {
                expected = step(expected, 0);
            }
            assert_eq!(shift(state, n), expected, "state {state:#x}, {n} bytes");
        }
    }

    #[test]
    fn range_checksum_from_two_registers_matches_crc32() {
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7919 % 251) as u8).collect();
        let mut g = vec![0u32];
        for &b in &bytes {
            let last = *g.last().expect("starts non-empty");
            g.push(step(last, b));
        }
        for (a, e) in [
            (0usize, 5000usize),
            (13, 14),
            (100, 4099),
            (4000, 4001),
            (1, 4999),
        ] {
            let crc = shift(u32::MAX ^ g[a], (e - a) as u32) ^ g[e] ^ u32::MAX;
            assert_eq!(crc, crc32fast::hash(&bytes[a..e]), "bytes {a}..{e}");
        }
    }
}
