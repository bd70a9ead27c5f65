//! A JSONL file as lines: each one JSON, or quarantined with where and why.
//!
//! Why bytes and not text: both agents write UTF-8 a line at a time without `fsync`, so a crash
//! can tear the last line anywhere, inside a character too. Read as one string, such a file
//! fails whole (codex) or silently changes (pi); read as bytes, only that line is bad.

use crate::input::{Input, LONG_LINE_BYTES};
use crate::session::{Damage, Quarantined, Session, Source};
use crate::{ReadError, INDEX_BYTES_MAX};
use serde_json::Value;

/// One line that parsed as JSON.
#[derive(Debug)]
pub(crate) struct Line {
    pub(crate) at: Source,
    pub(crate) value: Value,
}

/// What [`each`] kept out, and where the first JSON line was.
pub(crate) struct Lines {
    /// In file order, each told whether a line read well comes after it.
    pub(crate) quarantined: Vec<Quarantined>,
    pub(crate) first_json: Option<Source>,
    /// Lines read with bytes that are not UTF-8 replaced (U+FFFD).
    pub(crate) lossy_lines: Vec<Source>,
    /// Each JSON line's `timestamp` that reads as RFC 3339, as (line, milliseconds since the
    /// Unix epoch), in line order.
    pub(crate) times: Vec<(u64, u64)>,
    /// The sum of the reading ([`crate::input::Sum`]).
    pub(crate) crc: u32,
}

/// Hands each line of `input` that parses as JSON to `take`, one at a time (no line is kept);
/// a line that does not parse, or that `take` refuses with its reason, is quarantined.
///
/// The session's index is held whole while the file is read: past [`INDEX_BYTES_MAX`] (what
/// `s` holds, and what this reading keeps of each line) the file is refused at that line.
pub(crate) fn each(
    input: &Input<'_>,
    s: &mut Session,
    mut take: impl FnMut(&mut Session, &mut Line) -> Result<(), String>,
) -> Result<Lines, ReadError> {
    let mut bad: Vec<Quarantined> = Vec::new();
    let mut lossy_lines = Vec::new();
    let mut times = Vec::new();
    let mut first_json = None;
    let mut last_good = None;
    let mut reading = input.lines();
    let mut text = Vec::new();
    // What this reading keeps of its lines, in bytes (strings counted by their length).
    let mut kept_bytes = 0u64;
    while let Some(line) = reading.next_line(&mut text)? {
        let (at, ended) = (line.at, line.ended);
        if kept_bytes + s.held_bytes() > INDEX_BYTES_MAX {
            return Err(ReadError::IndexFull {
                line: at.line,
                offset: at.offset,
            });
        }
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let len_bytes = text.len() as u64;
        let parsed = object(&text, at.offset == 0);
        if text.capacity() > LONG_LINE_BYTES {
            // A long line's bytes are let go once parsed: its value is all that is used.
            text = Vec::new();
        }
        let damage = match parsed {
            Ok((value, lossy)) => {
                first_json.get_or_insert(at);
                if lossy {
                    lossy_lines.push(at);
                    kept_bytes += SOURCE_BYTES;
                }
                if let Some(ms) = timestamp_ms(&value) {
                    times.push((at.line, ms));
                    kept_bytes += SOURCE_BYTES;
                }
                match take(s, &mut Line { at, value }) {
                    Ok(()) => {
                        last_good = Some(at);
                        continue;
                    }
                    Err(why) => Damage::Shape { why },
                }
            }
            Err(_) if !ended => Damage::Torn,
            Err(why) => Damage::NotJson { why },
        };
        kept_bytes += QUARANTINED_BYTES
            + match &damage {
                Damage::NotJson { why } | Damage::Shape { why } => why.len() as u64,
                Damage::Torn => 0,
            };
        bad.push(Quarantined {
            at,
            len_bytes,
            damage,
            followed_by_good: false,
        });
    }
    for q in bad.iter_mut() {
        q.followed_by_good = last_good.is_some_and(|g| g > q.at);
    }
    Ok(Lines {
        quarantined: bad,
        first_json,
        lossy_lines,
        times,
        crc: reading.crc(),
    })
}

/// What a place in the file takes in a list (a [`Source`], or a line and a time).
const SOURCE_BYTES: u64 = 16;
/// What a quarantined line takes, its reason's text aside.
const QUARANTINED_BYTES: u64 = std::mem::size_of::<Quarantined>() as u64;

/// A line's top-level `timestamp` (all three agents write one, RFC 3339 in UTC), in
/// milliseconds since the Unix epoch; `None` when it is missing, not RFC 3339, or before 1970.
fn timestamp_ms(value: &Value) -> Option<u64> {
    let text = value.get("timestamp")?.as_str()?;
    let at =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    u64::try_from(at.unix_timestamp_nanos() / 1_000_000).ok()
}

/// A line's JSON object: what the agents' own readers take it for. A byte-order mark before the
/// file's first line is skipped (JavaScript's `trim` drops it), and bytes that are not UTF-8 are
/// read as U+FFFD, as Node.js decodes them (`lossy`: the line is good, but codex, which reads
/// strict UTF-8, could not read it as it is). A value that is not an object (`null`, `1`, `[]`)
/// is no line any agent writes, and breaks their readers.
pub(crate) fn object(text: &[u8], first: bool) -> Result<(Value, bool), String> {
    let text = match text.strip_prefix(b"\xef\xbb\xbf") {
        Some(rest) if first => rest,
        _ => text,
    };
    let (value, lossy) = match serde_json::from_slice::<Value>(text) {
        Ok(value) => (value, false),
        Err(strict) => match std::str::from_utf8(text) {
            Ok(_) => return Err(strict.to_string()),
            Err(_) => match serde_json::from_str(&String::from_utf8_lossy(text)) {
                Ok(value) => (value, true),
                Err(_) => return Err(strict.to_string()),
            },
        },
    };
    if !value.is_object() {
        return Err(format!("a JSON {}, not an object", kind(&value)));
    }
    Ok((value, lossy))
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `value` read as `T`; the error names `what` and the field.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(
    value: &Value,
    what: &str,
) -> Result<T, String> {
    T::deserialize(value).map_err(|e| format!("{what}: {e}"))
}

/// `value` read as `T`, taking its strings rather than copying them (a line's value is read
/// once, and a line may hold 64 MiB); the error names `what` and the field.
pub(crate) fn parse_owned<T: serde::de::DeserializeOwned>(
    value: Value,
    what: &str,
) -> Result<T, String> {
    serde_json::from_value(value).map_err(|e| format!("{what}: {e}"))
}

/// The text of content blocks: each block's `text`, another block (an image…) named in
/// brackets by its `type`; made in one string, the blocks' texts copied once.
pub(crate) fn blocks_text(blocks: &[Value]) -> String {
    fn part(b: &Value) -> std::borrow::Cow<'_, str> {
        match b.get("text").and_then(Value::as_str) {
            Some(text) => std::borrow::Cow::Borrowed(text),
            None => std::borrow::Cow::Owned(format!(
                "[{}]",
                b.get("type").and_then(Value::as_str).unwrap_or("")
            )),
        }
    }
    let len_bytes: usize = blocks.iter().map(|b| part(b).len() + 1).sum();
    let mut out = String::with_capacity(len_bytes);
    for (i, b) in blocks.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&part(b));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(bytes: &[u8]) -> (Vec<Source>, Lines) {
        let mut good = Vec::new();
        let mut s = Session::new(crate::Agent::Codex, crate::text::Store::Memory(Vec::new()));
        let lines = each(&Input::Bytes(bytes), &mut s, |_, l: &mut Line| {
            good.push(l.at);
            Ok(())
        })
        .unwrap();
        (good, lines)
    }

    #[test]
    fn a_torn_tail_and_a_bad_middle_line_are_told_apart() {
        let file = b"{\"a\":1}\nnot json\n\n{\"b\":2}\n{\"c\":";
        let (good, lines) = read_all(file);
        let bad = lines.quarantined;
        assert_eq!(good.len(), 2);
        assert_eq!(
            good[1],
            Source {
                line: 4,
                offset: 18
            }
        );
        assert_eq!(bad.len(), 2);
        assert_eq!(bad[0].at, Source { line: 2, offset: 8 });
        assert!(matches!(bad[0].damage, Damage::NotJson { .. }));
        assert!(bad[0].followed_by_good);
        assert_eq!(bad[1].damage, Damage::Torn);
        assert_eq!((bad[1].at.line, bad[1].len_bytes), (5, 5));
        assert!(!bad[1].followed_by_good);
    }

    #[test]
    fn a_line_torn_inside_a_character_is_one_bad_line() {
        let mut file = b"{\"a\":\"\xc3\xa9\"}\n{\"b\":\"".to_vec();
        file.push(0xc3);
        let (good, lines) = read_all(&file);
        assert_eq!(good.len(), 1);
        assert_eq!(lines.quarantined.len(), 1);
        assert_eq!(lines.quarantined[0].damage, Damage::Torn);
    }

    #[test]
    fn a_line_its_reader_refuses_is_quarantined_by_shape_with_its_length() {
        let file = b"{\"a\":1}\n{\"b\":2}\n{\"a\":3}\n";
        let mut s = Session::new(crate::Agent::Codex, crate::text::Store::Memory(Vec::new()));
        let lines = each(&Input::Bytes(file), &mut s, |_, l: &mut Line| {
            match l.value.get("a") {
                Some(_) => Ok(()),
                None => Err("no a".into()),
            }
        })
        .unwrap();
        let q = &lines.quarantined[0];
        assert_eq!((q.at.line, q.len_bytes), (2, 7));
        assert_eq!(q.damage, Damage::Shape { why: "no a".into() });
        assert!(q.followed_by_good);
        assert_eq!(lines.first_json, Some(Source { line: 1, offset: 0 }));
    }
}
