//! `recover`: what happened, after any crash, told truthfully.
//!
//! `recover` reads a journal (live, finished or crashed, torn tail and all) and never runs a
//! tool. [`Recovery`] is its one entry: [`Recovery::run`] classifies every orphaned call as
//! `TOOL_NOT_STARTED` (provably never started) or `TOOL_OUTCOME_UNKNOWN` (may have run) and,
//! when asked to [`write`](Recovery::write), balances the journal with one `recovery` event;
//! [`classify::Analysis::conversation`] then gives the conversation, which
//! [`providers::history`] lays out for OpenAI, Anthropic or Gemini, and [`rebuild::body`] makes
//! a whole request body of (system prompt, tools, settings). [`Recovery::probe`] also looks at
//! the workspace for each `TOOL_OUTCOME_UNKNOWN` call ([`probe`]: `applied`, `not_applied`,
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

pub mod audit;
mod call_fields;
pub mod classify;
pub mod import_journal;
pub mod listing;
#[cfg(feature = "mutant")]
pub mod mutant;
pub mod output;
pub mod place;
pub mod probe;
pub mod rebuild;
pub mod repair_copy;
pub mod report;
pub mod rerun;
pub mod session;
pub mod stream;
pub mod timeline;
pub mod verify;

pub use place::Place;
pub use session::{RecoverError, Recovered, Recovery};

/// Whether this build has recovery's deliberately broken variants (the test-only `mutant`
/// feature, which also makes the `mutant` module exist).
pub const MUTANTS_COMPILED: bool = cfg!(feature = "mutant");
