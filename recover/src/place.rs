//! Where a journal is, as a caller names it: a directory of segment files, or a backend the
//! caller opened (a PostgreSQL session, through `tooljournal-pg`).
//!
//! Why here and not a `Backend` everywhere: most callers (and the tests) hold a directory;
//! every entry point takes `impl Into<Place>`, so a path works as before and a record store
//! works the same way, and nothing below the entry points knows which it has.

use crate::session::RecoverError;
use journal::{Backend, FsStorage};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A journal's place: a directory, opened on first use, or an opened backend.
#[derive(Debug, Clone)]
pub enum Place {
    /// A journal directory (segment files).
    Dir(PathBuf),
    /// A backend already opened (segment files or a record store).
    Backend(Backend),
}

impl Place {
    /// The journal's backend: the directory opened (an error names it), or the one given.
    pub fn open(&self) -> Result<Backend, RecoverError> {
        match self {
            Place::Dir(dir) => {
                let storage = FsStorage::open(dir).map_err(|source| RecoverError::OpenDir {
                    dir: dir.clone(),
                    source,
                })?;
                Ok(Backend::Files(Arc::new(storage)))
            }
            Place::Backend(backend) => Ok(backend.clone()),
        }
    }

    /// How messages name the journal: its directory, or its backend's location (a URL).
    pub fn label(&self) -> PathBuf {
        match self {
            Place::Dir(dir) => dir.clone(),
            Place::Backend(backend) => PathBuf::from(backend.location()),
        }
    }
}

impl From<&Path> for Place {
    fn from(dir: &Path) -> Place {
        Place::Dir(dir.to_path_buf())
    }
}

impl From<&PathBuf> for Place {
    fn from(dir: &PathBuf) -> Place {
        Place::Dir(dir.clone())
    }
}

impl From<PathBuf> for Place {
    fn from(dir: PathBuf) -> Place {
        Place::Dir(dir)
    }
}

impl From<Backend> for Place {
    fn from(backend: Backend) -> Place {
        Place::Backend(backend)
    }
}

impl From<&Backend> for Place {
    fn from(backend: &Backend) -> Place {
        Place::Backend(backend.clone())
    }
}

impl From<&Place> for Place {
    fn from(place: &Place) -> Place {
        place.clone()
    }
}
