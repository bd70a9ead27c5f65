//! `recover`: what happened, after any crash, told truthfully.
//!
//! `recover` reads a journal (live, finished or crashed, torn tail and all) and never runs a
//! tool. [`Recovery`] is its one entry: [`Recovery::run`] classifies every orphaned call as
//! `TOOL_NOT_STARTED` (provably never started) or `TOOL_OUTCOME_UNKNOWN` (may have run) and,
//! when asked to [`write`](Recovery::write), balances the journal with one `recovery` event;
//! [`classify::Analysis::conversation`] then gives the conversation, which
//! [`providers::history`] lays out for OpenAI, Anthropic or Gemini, and [`rebuild::body`] makes
//! a whole request body of (system prompt, tools, settings). [`Recovery::probe`] also looks at
//! the workspace for each `TOOL_OUTCOME_UNKNOWN` call (`probe`: `applied`, `not_applied`,
//! `changed`, `running`, `not_looked`, `no_evidence`), reading only, and words the evidence
//! into the result recovery gives it.
//!
//! ```no_run
//! use tooljournal_recover as recover;
//! # fn main() -> Result<(), recover::RecoverError> {
//! let recovered = recover::Recovery::of(std::path::Path::new("/path/to/journal")).run()?;
//! for call in &recovered.analysis.calls {
//!     println!("{}: {:?}", call.call, call.classification);
//! }
//! let body = recover::providers::history(
//!     &recovered.analysis.conversation(),
//!     recover::providers::Format::Anthropic,
//! );
//! println!("{}", body.to_json());
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

/// The conversation and its provider layouts live in `tooljournal-history`, shared with the
/// live runtime; re-exported so that `recover::providers` stays where it was.
pub use history::{conversation, layout, providers};

// Rooms are private; what a user reaches is re-exported below, by what it is for.
mod audit;
mod bound;
mod call_fields;
mod classify;
mod import_journal;
mod listing;
#[cfg(feature = "mutant")]
mod mutant;
mod output;
mod place;
mod probe;
mod rebuild;
mod repair_copy;
mod report;
mod rerun;
mod session;
mod stream;
mod timeline;
mod verify;

// The one entry: a journal read, classified, repaired and balanced.
pub use place::Place;
pub use session::{RecoverError, Recovered, Recovery, ReportSink, RereadError, Streamed};
// What recovery found, and the words it answers an unfinished call with.
pub use classify::{
    analyze, analyze_probing, answer_undelivered_text, not_started_text, outcome_unknown_text,
    outcome_unknown_text_bounded, question_withdrawn_text, Analysis, CallReport, WITHDRAWN_REASON,
};
pub use stream::Classifier;
// The workspace probe: whether a call that may have run left its mark.
pub use probe::{Probe, Prober, Verdict};
// The re-run choice a resume makes.
pub use rerun::{candidates as rerun_candidates, choose as choose_reruns, recovery_events};
// Provider bodies rebuilt.
pub use rebuild::streamed::{
    first_reading as rebuild_first_reading, write as rebuild_write, FirstReading, Written,
};
pub use rebuild::{body as rebuild_body, tools as rebuild_tools, SCHEMA_NOT_JOURNALED};
// What a person reads: the reports, the audit, the HTML timeline, the listings.
pub use audit::{
    first_reading as audit_first_reading, first_reading_probing as audit_first_reading_probing,
    stream as audit_stream,
};
pub use listing::{JsonListing, TextListing};
pub use report::{audit_json, audit_text, classify_json, salvage_json, salvage_text};
pub use timeline::{stream_html, HtmlOptions, HTML_BYTES_MAX_DEFAULT, HTML_BYTES_MIN};
pub use verify::{verify, Verified};
// Other agents' sessions: imported, repaired.
pub use import_journal::{
    import_into, prepare as import_prepare, source_lines as import_source_lines,
    write_into as import_write_into, ImportError,
};
pub use repair_copy::{open_session_file, quarantine_path, repair_file, RepairError};
// Where outputs are written (atomically, or appended).
#[cfg(feature = "mutant")]
pub use mutant::{enable as enable_mutant, STARTED_AS_NOT_STARTED};
pub use output::{Kind as OutputKind, Output, OutputError};

/// Whether this build has recovery's deliberately broken variants (the test-only `mutant`
/// feature, which also makes the `mutant` module exist).
pub const MUTANTS_COMPILED: bool = cfg!(feature = "mutant");
