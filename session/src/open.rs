//! A [`Location`] opened as the executor and the reader take it.

use crate::ResumeError;
use journal::{Backend, Location};
use runtime::{Session, SessionBuilder};
use std::path::Path;

/// The journal as `recover`'s [`recover::Recovery`] takes it: a directory as it is (its errors
/// name it), a PostgreSQL session opened.
pub fn place(location: &Location) -> Result<recover::Place, ResumeError> {
    Ok(match location {
        Location::Dir(dir) => recover::Place::Dir(dir.clone()),
        Location::Postgres(_) => recover::Place::Backend(pg::open(location)?),
    })
}

/// The runtime's builder for a session on `workspace` journaled at `location` (a directory is
/// created by the lock if missing; a URL's session is created by its first writer).
pub fn builder(location: &Location, workspace: &Path) -> Result<SessionBuilder, ResumeError> {
    Ok(match location {
        Location::Dir(dir) => Session::builder(workspace, dir),
        Location::Postgres(_) => {
            let backend: Backend = pg::open(location)?;
            Session::builder_on(workspace, backend)
        }
    })
}
