//! Text from a journal shown to a person: what is on the screen is what the bytes say.
//!
//! Why: arguments, outputs, prompts and file names are the model's and the tools' text, and
//! some characters change how the text around them looks without showing themselves. A right
//! to left override (U+202E) makes `report\u{202E}txt.exe` read as `reportexe.txt`; a
//! zero-width space hides a difference between two names; a terminal escape rewrites the
//! screen. Every human display (terminal tables and lines, `chat`, an `ask`'s menu, the audit
//! page) shows such characters as visible escapes (`\u{202E}`), and nothing else changes: the
//! journal and the model's history keep the bytes as they are.

use std::borrow::Cow;
use std::io::{self, Write};

/// The bidirectional controls and invisible formatting characters, as inclusive ranges of code
/// points: the Unicode bidi controls (embeddings, overrides, isolates, marks), zero-width and
/// joining characters, line and paragraph separators, invisible operators, the byte order
/// mark, soft hyphen, fillers and tag characters. The audit page's script gets this list, so
/// that it shows what the terminal shows.
pub const HIDDEN_RANGES: [(u32, u32); 16] = [
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF9, 0xFFFB),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE007F),
];

/// Whether `c` is in [`HIDDEN_RANGES`]. (Plain control characters are [`char::is_control`].)
pub fn is_hidden(c: char) -> bool {
    let c = c as u32;
    HIDDEN_RANGES.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

/// `text` with every hidden character ([`is_hidden`]) and every control character but a
/// newline and a tab written as `\u{XXXX}`: for text shown on several lines.
pub fn visible(text: &str) -> Cow<'_, str> {
    escape(text, |c| c == '\n' || c == '\t')
}

/// `text` on one line, cut to `chars_max` characters (`…` marks a cut): newlines, tabs and
/// carriage returns as spaces, every other control and hidden character as `\u{XXXX}`.
pub fn one_line(text: &str, chars_max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| {
            if matches!(c, '\n' | '\r' | '\t') {
                ' '
            } else {
                c
            }
        })
        .collect();
    let shown = escape(&flat, |_| false);
    match shown.char_indices().nth(chars_max) {
        Some((at, _)) => format!("{}…", &shown[..at]),
        None => shown.into_owned(),
    }
}

/// A writer that shows what is written to it as [`visible`] does: for a stream of text meant
/// for a person (a table printed as a journal is read, a model's text as it streams). A
/// character split between two writes is kept until it is whole; bytes that are not UTF-8 are
/// passed on as they are.
#[derive(Debug)]
pub struct VisibleWriter<W: Write> {
    inner: W,
    /// The start of a character the last write ended inside (at most 3 bytes).
    partial: Vec<u8>,
}

impl<W: Write> VisibleWriter<W> {
    /// Shows what is written through `inner`.
    pub fn new(inner: W) -> VisibleWriter<W> {
        VisibleWriter {
            inner,
            partial: Vec::new(),
        }
    }

    /// The writer underneath (a character left unfinished is dropped).
    pub fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: Write> Write for VisibleWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let joined;
        let mut bytes: &[u8] = if self.partial.is_empty() {
            buf
        } else {
            self.partial.extend_from_slice(buf);
            joined = std::mem::take(&mut self.partial);
            &joined
        };
        while !bytes.is_empty() {
            match std::str::from_utf8(bytes) {
                Ok(text) => {
                    self.inner.write_all(visible(text).as_bytes())?;
                    break;
                }
                Err(e) => {
                    let (good, rest) = bytes.split_at(e.valid_up_to());
                    // from_utf8 checked `good`.
                    let text = std::str::from_utf8(good).unwrap_or_default();
                    self.inner.write_all(visible(text).as_bytes())?;
                    match e.error_len() {
                        Some(n) => {
                            self.inner.write_all(&rest[..n])?;
                            bytes = &rest[n..];
                        }
                        None => {
                            self.partial = rest.to_vec();
                            break;
                        }
                    }
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn escape(text: &str, kept: impl Fn(char) -> bool) -> Cow<'_, str> {
    let needs = |c: char| (c.is_control() && !kept(c)) || is_hidden(c);
    if !text.chars().any(needs) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if needs(c) {
            out.push_str(&format!("\\u{{{:04X}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_override_shows_as_an_escape_and_plain_text_is_unchanged() {
        assert_eq!(visible("report\u{202E}txt.exe"), "report\\u{202E}txt.exe");
        assert!(matches!(visible("plain é 漢字\n\tline"), Cow::Borrowed(_)));
        assert_eq!(visible("a\u{1b}[2Jb\u{200B}c"), "a\\u{001B}[2Jb\\u{200B}c");
        assert_eq!(visible("tag\u{E0041}"), "tag\\u{E0041}");
    }

    #[test]
    fn one_line_flattens_escapes_and_cuts_by_characters() {
        assert_eq!(one_line("a\nb\tc\rd", 10), "a b c d");
        assert_eq!(one_line("x\u{2066}y", 10), "x\\u{2066}y");
        assert_eq!(one_line("ééééé", 3), "ééé…");
    }

    #[test]
    fn the_writer_keeps_a_character_split_between_writes_whole() {
        let text = "a\u{202E}b é\u{1b}";
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let mut w = VisibleWriter::new(Vec::new());
            w.write_all(&bytes[..cut]).unwrap();
            w.write_all(&bytes[cut..]).unwrap();
            assert_eq!(
                String::from_utf8(w.into_inner()).unwrap(),
                "a\\u{202E}b é\\u{001B}",
                "cut at {cut}"
            );
        }
        let mut w = VisibleWriter::new(Vec::new());
        w.write_all(b"x\xffy").unwrap();
        assert_eq!(w.into_inner(), b"x\xffy");
    }

    #[test]
    fn every_bidi_control_is_hidden() {
        for c in ['\u{061C}', '\u{200E}', '\u{200F}']
            .into_iter()
            .chain('\u{202A}'..='\u{202E}')
            .chain('\u{2066}'..='\u{2069}')
        {
            assert!(is_hidden(c), "{:04X}", c as u32);
        }
        for c in ['a', ' ', 'é', '\u{FE0F}', '\u{0301}'] {
            assert!(!is_hidden(c), "{:04X}", c as u32);
        }
    }
}
