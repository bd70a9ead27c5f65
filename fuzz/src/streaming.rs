//! `recover classify` streams: on the same bytes it must say what the full analysis says and
//! append the same, reading only and writing. Each runs on its own copy of the journal.

use crate::read::{copy_of, same_events};
use journal::SimStorage;
use recover::{CallReport, RecoverError, Recovered, Recovery, Streamed};
use runtime::event::Event;
use std::sync::Arc;

/// What the streaming classifier gave on a copy of a journal: the copy (as it left it) and
/// its summary with the call reports it streamed.
pub(crate) type StreamedCopy = (
    SimStorage,
    Result<(Streamed, Vec<CallReport>), RecoverError>,
);

/// The streaming classifier on its own copy of `image`, writing or not.
pub(crate) fn streaming(image: &SimStorage, write: bool) -> StreamedCopy {
    let disk = copy_of(image);
    let mut reports: Vec<CallReport> = Vec::new();
    let summary = Recovery::of(journal::Backend::Files(Arc::new(disk.clone())))
        .write(write)
        .stream(&mut reports);
    (disk, summary.map(|s| (s, reports)))
}

/// Where the streaming classifier and the full analysis disagree on `image`, read only (each on
/// its own copy); and the copy the full analysis read without writing, as `image` was.
pub(crate) fn streaming_read_only(image: &SimStorage) -> (Vec<String>, SimStorage) {
    let full_disk = copy_of(image);
    let full = Recovery::of(journal::Backend::Files(Arc::new(full_disk.clone())))
        .write(false)
        .run();
    let (stream_disk, streamed) = streaming(image, false);
    let v = disagreement(
        false,
        (full.as_ref(), &full_disk, None),
        (streamed.as_ref(), &stream_disk),
    );
    (v, full_disk)
}

/// What the full analysis gave, the disk it left, and that disk's events if already decoded.
pub(crate) type Full<'a> = (
    Result<&'a Recovered, &'a RecoverError>,
    &'a SimStorage,
    Option<&'a Option<Vec<Event>>>,
);

/// Where the streaming classifier (`streamed`, which left `stream_disk`) and the full analysis
/// disagree, both run on the same bytes and writing as `write` says.
pub(crate) fn disagreement(
    write: bool,
    (full, full_disk, full_events): Full<'_>,
    (streamed, stream_disk): (
        Result<&(Streamed, Vec<CallReport>), &RecoverError>,
        &SimStorage,
    ),
) -> Vec<String> {
    let mut v = Vec::new();
    match (full, streamed) {
        (Ok(full), Ok((s, reports))) => {
            let a = &full.analysis;
            if reports != &a.calls {
                v.push(format!("streaming (write {write}): the reports differ"));
            }
            if (s.end, s.live, &s.recovery, &s.pending_asks, s.appended)
                != (a.end, a.live, &a.recovery, &a.pending_asks, full.appended)
            {
                v.push(format!(
                    "streaming (write {write}): the recovery differs: {:?} vs {:?}",
                    s.recovery, a.recovery
                ));
            }
            if !same_events(stream_disk, full_disk, full_events) {
                v.push(format!(
                    "streaming (write {write}): the appended events differ"
                ));
            }
        }
        (Err(f), Err(s)) if f.to_string() == s.to_string() => {}
        (f, s) => v.push(format!(
            "streaming (write {write}): full {:?}, streamed {:?}",
            f.err().map(|e| e.to_string()),
            s.err().map(|e| e.to_string())
        )),
    }
    v
}
