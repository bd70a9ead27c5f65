//! Bytes read so far, segments laid end to end, for people watching a long journal: shared by
//! the whole-session and the streaming readers.

use events::replay::ReplayError;
use journal::{Backend, JournalError};

/// Bytes read so far (segments laid end to end), told every MiB and at the end.
pub(super) struct Progress<'a> {
    /// Each segment's number and the bytes of the segments before it.
    starts: Vec<(u64, u64)>,
    total: u64,
    last_report: u64,
    /// The segment of the last record and where it starts.
    current: (u64, u64),
    report: &'a dyn Fn(u64, u64),
}

impl<'a> Progress<'a> {
    pub(super) fn new(
        backend: &Backend,
        report: &'a dyn Fn(u64, u64),
    ) -> Result<Progress<'a>, ReplayError> {
        let mut sizes = std::collections::BTreeMap::new();
        // A record store's size is not known before it is read: its total stays 0.
        if let Some(storage) = backend.files() {
            let names = storage.list().map_err(|e| {
                ReplayError::Journal(JournalError::Io {
                    location: storage.location(),
                    op: "list",
                    file: ".".into(),
                    source: e,
                })
            })?;
            for name in names {
                if let Some(number) = journal::segment::parse_file_name(&name) {
                    let len = storage
                        .open_read(&name)
                        .and_then(|f| f.len_bytes())
                        .unwrap_or(0);
                    sizes.insert(number, len);
                }
            }
        }
        let mut starts = Vec::with_capacity(sizes.len());
        let mut total = 0;
        for (number, len) in sizes {
            starts.push((number, total));
            total += len;
        }
        Ok(Progress {
            starts,
            total,
            last_report: 0,
            current: (u64::MAX, 0),
            report,
        })
    }

    pub(super) fn record(&mut self, position: journal::Position, frame_bytes: u64) {
        let segment = position.segment;
        if self.current.0 != segment {
            // The bytes before `segment`: where the first segment at or after it starts.
            let before = self
                .starts
                .iter()
                .find(|(n, _)| *n >= segment)
                .map_or(self.total, |&(_, s)| s);
            self.current = (segment, before);
        }
        let done = self.current.1 + position.offset + frame_bytes;
        if done - self.last_report >= 1 << 20 || done == self.total {
            (self.report)(done, self.total);
            self.last_report = done;
        }
    }
}
