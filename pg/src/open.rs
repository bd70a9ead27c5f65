//! Opening a [`Location`]: the one place either kind of journal location becomes a backend.
//!
//! Why here: a directory opens with `journal` alone, but a URL needs this crate's store, and
//! `journal` (the floor below) cannot link a database driver. Both binaries and the session
//! layer open locations through [`open`], so the two kinds are told apart in one place.

use crate::PgStore;
use journal::{Backend, FsStorage, JournalError, Location};
use std::sync::Arc;

/// The journal at `location`, opened for reading: an existing directory's segment files, or
/// the session's rows in its store. Errors name the location (a URL without its secrets).
pub fn open(location: &Location) -> Result<Backend, JournalError> {
    match location {
        Location::Dir(dir) => {
            let storage = FsStorage::open(dir).map_err(|source| JournalError::Io {
                location: dir.display().to_string(),
                op: "open journal directory",
                file: ".".to_owned(),
                source,
            })?;
            Ok(Backend::Files(Arc::new(storage)))
        }
        Location::Postgres(url) => Ok(Backend::Records(Arc::new(PgStore::open(url)?))),
    }
}
