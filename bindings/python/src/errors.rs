//! The exceptions: one per failure kind of the embedding layer, each with the exit code the
//! CLI gives the same failure (`code`) and the CLI's message.

use embed::{EmbedError, ErrorKind};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    tooljournal,
    Error,
    PyException,
    "A tooljournal failure; `code` is the CLI's exit code."
);
create_exception!(
    tooljournal,
    JournalLocked,
    Error,
    "Another process holds the journal."
);
create_exception!(
    tooljournal,
    Corrupt,
    Error,
    "The journal's bytes are damaged (exit code 2)."
);
create_exception!(
    tooljournal,
    NewerSchema,
    Error,
    "A newer tooljournal wrote the journal (exit code 3)."
);
create_exception!(
    tooljournal,
    Refused,
    Error,
    "The journal cannot be resumed as it is."
);
create_exception!(tooljournal, UsageError, Error, "The API was used wrongly.");
create_exception!(
    tooljournal,
    Failed,
    Error,
    "I/O, the store or the runtime failed."
);

pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    for (name, class, kind) in [
        ("Error", py.get_type::<Error>(), ErrorKind::Failed),
        (
            "JournalLocked",
            py.get_type::<JournalLocked>(),
            ErrorKind::Locked,
        ),
        ("Corrupt", py.get_type::<Corrupt>(), ErrorKind::Corrupt),
        (
            "NewerSchema",
            py.get_type::<NewerSchema>(),
            ErrorKind::NewerSchema,
        ),
        ("Refused", py.get_type::<Refused>(), ErrorKind::Refused),
        ("UsageError", py.get_type::<UsageError>(), ErrorKind::Usage),
        ("Failed", py.get_type::<Failed>(), ErrorKind::Failed),
    ] {
        class.setattr("code", kind.exit_code())?;
        m.add(name, class)?;
    }
    Ok(())
}

/// The exception for `e`, carrying its message.
pub(crate) fn to_py(e: EmbedError) -> PyErr {
    let message = e.message;
    match e.kind {
        ErrorKind::Locked => JournalLocked::new_err(message),
        ErrorKind::Corrupt => Corrupt::new_err(message),
        ErrorKind::NewerSchema => NewerSchema::new_err(message),
        ErrorKind::Refused => Refused::new_err(message),
        ErrorKind::Usage => UsageError::new_err(message),
        ErrorKind::Failed => Failed::new_err(message),
    }
}
