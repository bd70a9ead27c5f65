//! The `import/source` record: the file (its size and sha256) and what reading it found, every
//! line kept out with where and why, and the notes; each text and each list bounded so that
//! the record fits. And the same for people, a line each (`source_lines`), as `recover import`
//! prints them and `audit` shows them.

use events::event::{ImportNote, ImportSource, ImportedDamage};
use import::{Input, Session, Source};
use std::collections::HashMap;

/// What reading the file found, a line each for people: every line kept out, with where and
/// why, then the notes (`note_lines`). `recover import` prints them; `audit` shows them.
pub fn source_lines(damaged: &[ImportedDamage], notes: &[ImportNote]) -> Vec<String> {
    let kept_out = damaged.iter().map(|d| {
        let follows = if d.followed {
            "good lines follow it"
        } else {
            "nothing good follows it"
        };
        format!(
            "kept out line {} (byte {}, {} bytes): {}; {follows}",
            d.line, d.offset, d.bytes, d.reason
        )
    });
    let notes = note_lines(notes).into_iter().map(|n| format!("note: {n}"));
    kept_out.chain(notes).collect()
}

/// The most line numbers a grouped note names before it says how many more.
const NOTE_LINES_MAX: usize = 8;

/// Notes for people: those with the same text grouped into one line that names where each
/// was (`line 4`, `lines 4, 12 and 30`, or the first few and how many in all), in the order
/// of each text's first line. A file with a line type repeated throughout reads as one line.
fn note_lines(notes: &[ImportNote]) -> Vec<String> {
    let mut order: Vec<&str> = Vec::new();
    let mut lines: HashMap<&str, Vec<u64>> = HashMap::new();
    for n in notes {
        let at = lines.entry(n.text.as_str()).or_insert_with(|| {
            order.push(n.text.as_str());
            Vec::new()
        });
        at.push(n.line);
    }
    order
        .into_iter()
        .map(|text| {
            let at = &lines[text];
            let shown: Vec<String> = at.iter().take(NOTE_LINES_MAX).map(u64::to_string).collect();
            let place = match (at.len(), shown.as_slice()) {
                (1, [one]) => format!("line {one}"),
                (n, _) if n > NOTE_LINES_MAX => {
                    format!("lines {}, … ({n} lines in all)", shown.join(", "))
                }
                (_, [first @ .., last]) => format!("lines {} and {last}", first.join(", ")),
                (_, []) => String::new(),
            };
            format!("{place}: {text}")
        })
        .collect()
}

/// `import/source`: the file and what reading it found.
pub(super) fn import_source(
    session: &Session,
    file: &str,
    input: Input<'_>,
) -> Result<ImportSource, import::ReadError> {
    use sha2::Digest;
    let mut sha = sha2::Sha256::new();
    input.read_again(session, |bytes| sha.update(bytes))?;
    let damaged: Vec<ImportedDamage> = session.quarantined.iter().map(damage).collect();
    let mut notes: Vec<(Source, String)> = session.notes.clone();
    notes.extend(
        (session.unknown.iter()).map(|(kind, at)| (*at, format!("an item of unknown type {kind}"))),
    );
    notes.extend(session.lossy.iter().map(|at| {
        (
            *at,
            "bytes that are not UTF-8, read as U+FFFD (as Node.js reads them)".to_owned(),
        )
    }));
    notes.extend(session.orphan_outputs.iter().map(|o| {
        (
            o.at,
            format!(
                "an output for call {}, which no call before it has: kept out",
                o.call_id
            ),
        )
    }));
    notes.sort_by_key(|(at, _)| *at);
    let notes = notes.into_iter().map(|(at, text)| ImportNote {
        line: at.line,
        offset: at.offset,
        text: bounded(text),
    });
    let (damaged, damaged_left) = within(damaged, |d| d.reason.len());
    let (mut notes, notes_left) = within(notes.collect(), |n| n.text.len());
    for (what, left) in [("lines kept out", damaged_left), ("notes", notes_left)] {
        if let Some((count, line, offset)) = left {
            notes.push(ImportNote {
                line,
                offset,
                text: format!(
                    "{count} more {what}, from this line on, are not listed here: the list \
                     would not fit in one record (`recover import` printed every line kept out)"
                ),
            });
        }
    }
    Ok(ImportSource {
        agent: session.agent.name().to_owned(),
        file: file.to_owned(),
        size_bytes: input.len_bytes(),
        sha256: hex::encode(sha.finalize()),
        source_session_id: session.session_id.clone(),
        damaged,
        notes,
    })
}

/// A line kept out, as `import/source` lists it (its reason within [`TEXT_BYTES_MAX`]).
pub(super) fn damage(q: &import::Quarantined) -> ImportedDamage {
    ImportedDamage {
        line: q.at.line,
        offset: q.at.offset,
        bytes: q.len_bytes,
        reason: bounded(match &q.damage {
            import::Damage::Torn => "torn: the last line, cut short".to_owned(),
            import::Damage::NotJson { why } => format!("not a JSON object: {why}"),
            import::Damage::Shape { why } => format!("not the shape its type has: {why}"),
        }),
        followed: q.followed_by_good,
    }
}

/// The most bytes of one reason or note `import/source` keeps: they quote the file (an
/// unknown type's name, a parser's words), which may be as long as a line.
const TEXT_BYTES_MAX: usize = 2048;

/// The most bytes each of `import/source`'s lists takes, so that the record fits with room to
/// spare: the rest is counted in a note.
const LIST_BYTES_MAX: usize = 4 << 20;

/// `text` within [`TEXT_BYTES_MAX`], cut at a character boundary, saying how much was cut.
fn bounded(mut text: String) -> String {
    if text.len() <= TEXT_BYTES_MAX {
        return text;
    }
    let mut cut = TEXT_BYTES_MAX;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let more = text.len() - cut;
    text.truncate(cut);
    text.push_str(&format!("… ({more} bytes more)"));
    text
}

/// Something `import/source` lists with where it is.
trait Listed {
    fn at(&self) -> (u64, u64);
}

impl Listed for ImportedDamage {
    fn at(&self) -> (u64, u64) {
        (self.line, self.offset)
    }
}

impl Listed for ImportNote {
    fn at(&self) -> (u64, u64) {
        (self.line, self.offset)
    }
}

/// The first items of `list` within [`LIST_BYTES_MAX`] (each counted with `text_bytes` and
/// room for its numbers), and, when some are left out, how many and where the first is.
fn within<T: Listed>(
    mut list: Vec<T>,
    text_bytes: impl Fn(&T) -> usize,
) -> (Vec<T>, Option<(usize, u64, u64)>) {
    let mut total = 0;
    let kept = list
        .iter()
        .position(|item| {
            total += text_bytes(item) + 64;
            total > LIST_BYTES_MAX
        })
        .unwrap_or(list.len());
    let left = list.split_off(kept);
    let first = left.first().map(|item| {
        let (line, offset) = item.at();
        (left.len(), line, offset)
    });
    (list, first)
}
