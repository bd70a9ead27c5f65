//! `verify`: the whole journal checked as `recover` reads it, frames and events, writing nothing.
//!
//! Why not frames alone: a journal whose frames check but whose events do not decode, or do not
//! fit the session, is one `recover` refuses (exit 2). A verify that called it clean would
//! promise a recovery that then fails. So verify reads every record through the same streaming
//! checks as `recover classify` ([`Classifier`]): the same verdict, naming the same record.

use crate::session::error::RecoverError;
use crate::stream::Classifier;
use crate::Place;
use events::replay::ReplayError;
use journal::{Limits, ReadEnd, Reader};

/// A journal whose records all decode and fit: how it ends (clean, torn, or corrupt frames
/// after `records` good records).
#[derive(Debug)]
pub struct Verified {
    /// How the bytes end.
    pub end: ReadEnd,
    /// Records read and found to fit.
    pub records: u64,
}

/// Reads the journal in `dir` through: frames, then each record's event (decoded by the
/// versioning rule and checked as replay checks it). An event that does not decode or fit is an
/// error (`Corrupt`, or `Newer` for a newer schema) naming its seq, segment and offset exactly as
/// `recover` does; corrupt frames are in [`Verified::end`]. Never writes, takes no lock.
pub fn verify(at: impl Into<Place>) -> Result<Verified, RecoverError> {
    let place = at.into();
    let label = place.label();
    let dir = label.as_path();
    let backend = place.open()?;
    verify_backend(&backend, dir)
}

/// [`verify`] on an opened backend, `dir` naming it in errors.
pub(crate) fn verify_backend(
    backend: &journal::Backend,
    dir: &std::path::Path,
) -> Result<Verified, RecoverError> {
    let replay_error = |e: ReplayError| RecoverError::from_replay(dir, e);
    let mut reader =
        Reader::open_backend(backend, Limits::default()).map_err(|e| replay_error(e.into()))?;
    let mut classifier = Classifier::new(false);
    while let Some(record) = reader.next_ref() {
        let record = record.map_err(|e| replay_error(e.into()))?;
        classifier.apply(record).map_err(replay_error)?;
        // Reports are not wanted here; drop them so memory stays bounded.
        classifier.take_ready().for_each(drop);
    }
    let records = reader.records_read();
    let end = reader
        .end()
        .cloned()
        .ok_or_else(|| RecoverError::NoVerdict {
            dir: dir.to_path_buf(),
        })?;
    Ok(Verified { end, records })
}
