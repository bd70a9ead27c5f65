//! `tooljournal._native`: the embedding layer (`tooljournal-embed`) as Python classes. The
//! package's Python half (`python/tooljournal/`) gives it its friendly face: decorators,
//! dicts, async. Values cross as Python objects or JSON text; nothing here decides anything
//! the embedding layer does not.

// pyo3's macros generate items the workspace's doc and visibility lints cannot see into.
#![allow(missing_docs, unreachable_pub)]

mod errors;
mod journal;
mod tool;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::add(m)?;
    m.add_class::<journal::NativeJournal>()?;
    m.add_class::<tool::NativeCallCtx>()?;
    m.add_function(wrap_pyfunction!(journal::classify, m)?)?;
    m.add_function(wrap_pyfunction!(journal::rebuild, m)?)?;
    m.add_function(wrap_pyfunction!(journal::audit, m)?)?;
    m.add_function(wrap_pyfunction!(journal::read_response, m)?)?;
    m.add("WATCH_INTERVAL_MS", embed::WATCH_INTERVAL_MS)?;
    Ok(())
}
