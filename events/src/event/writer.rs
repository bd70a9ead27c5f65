//! `writer/stolen`: a writer took a record store's journal from a holder whose lease was live.
//!
//! Why it is journaled: a steal is the one moment two processes may both believe they write a
//! session. The store fences the old holder off (its next append fails), and this record says
//! in the journal itself who was fenced, from which epoch, and how much of its lease was left,
//! so an audit sees the takeover where it happened.

use serde::{Deserialize, Serialize};

/// `writer/stolen` (schema 6): appended by the writer that stole the journal, first thing after
/// it opened it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriterStolen {
    /// The epoch this writer holds the journal with (the fencing token).
    pub epoch: u64,
    /// The holder it was taken from (`host:pid`).
    pub holder: String,
    /// The epoch the holder had: none of its appends lands after this record.
    pub holder_epoch: u64,
    /// Milliseconds its lease still had when it was taken.
    pub lease_left_ms: u64,
}
