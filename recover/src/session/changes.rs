//! What a run changed on disk, or found changed by an earlier one: a cut no event records
//! (found again by its quarantine file), and the notes for stderr that say what was cut,
//! recorded or left alone. Shared by the whole-session, salvaging and streaming recoveries.

use journal::Storage;

/// A cut that no event records, found again by its quarantine file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarlierCut {
    /// The file the torn bytes were kept in.
    pub quarantine_file: String,
    /// How many bytes were cut.
    pub dropped_bytes: u64,
}

/// The newest quarantine file of the last segment, when that segment ends exactly where the
/// file's bytes were cut: nothing was written after the cut, so no event records it (a repair
/// stopped between its cut and its recovery event, or a closed session, which takes no event).
/// Once anything follows the cut, the event that follows it (a recovery) records it.
pub(super) fn unrecorded_cut(storage: &dyn Storage) -> std::io::Result<Option<EarlierCut>> {
    use journal::segment::{file_name, parse_file_name, quarantine_name};
    let names: std::collections::HashSet<String> = storage.list()?.into_iter().collect();
    let Some(last) = names.iter().filter_map(|n| parse_file_name(n)).max() else {
        return Ok(None);
    };
    let len_bytes = storage.open_read(&file_name(last))?.len_bytes()?;
    // The writer numbers a cut's quarantine files from 0 up, taking the first free number.
    let newest = (0..)
        .map(|attempt| quarantine_name(last, len_bytes, attempt))
        .take_while(|name| names.contains(name))
        .last();
    let Some(name) = newest else {
        return Ok(None);
    };
    let dropped_bytes = storage.open_read(&name)?.len_bytes()?;
    Ok((dropped_bytes > 0).then_some(EarlierCut {
        quarantine_file: name,
        dropped_bytes,
    }))
}

/// What a run did or found, as its notes tell it.
pub(super) struct Changes<'a> {
    pub(super) quarantine_file: Option<&'a str>,
    pub(super) earlier_cut: Option<&'a EarlierCut>,
    pub(super) appended: bool,
    pub(super) closed: bool,
    pub(super) read_only_because: Option<&'a str>,
}

/// The notes for stderr: what was cut and where it was kept, what was recorded, and why not.
pub(super) fn notes(c: &Changes<'_>) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(why) = c.read_only_because {
        notes.push(format!("{why}: read only, nothing cut or appended"));
    }
    if let Some(q) = c.quarantine_file {
        notes.push(format!("torn bytes kept in {q} before the tail was cut"));
    }
    if let Some(cut) = c.earlier_cut {
        notes.push(format!(
            "an earlier run cut {} torn bytes (kept in {}) and no event records it{}",
            cut.dropped_bytes,
            cut.quarantine_file,
            if c.appended { "; recorded now" } else { "" }
        ));
    }
    if c.closed && (c.quarantine_file.is_some() || c.earlier_cut.is_some()) {
        notes.push(
            "the session was closed and nothing may follow its session/close: the quarantine \
             file is the record of the cut"
                .into(),
        );
    }
    if c.appended {
        notes.push("recovery appended; the journal is balanced".into());
    }
    notes
}
