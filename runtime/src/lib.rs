//! `runtime`: runs an agent's tool calls and journals every transition of every call.
//!
//! A call travels a fixed pipeline (DESIGN.md §3): frozen arguments → pre-execute chain →
//! guard → execute wrapper (write-ahead `started`, timeout, retry) → tool body → contract check
//! → post-execute → `finalize_content` → frozen result → observers. Each transition is an
//! [`event::Event`] in the session's journal, checked against the [`state`] machine, and
//! [`replay`] folds a journal back into the same states: it is what `recover` uses.
//!
//! Start at [`Session::builder`]: it wires the journal, the workspace (the journal kept out of
//! the tools' reach), the built-in tools and yours, the approver and the spill store with the
//! safe defaults. Then drive turns and steps; each step is one assistant message's batch.
//!
//! ```
//! use tooljournal_runtime::event::{ModelCall, ModelResponse, StepOutcome, StopReason, TurnOutcome};
//! use tooljournal_runtime::Session;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let (workspace, journal) = (dir.path().join("ws"), dir.path().join("journal"));
//! # std::fs::create_dir(&workspace)?;
//! let mut session = Session::builder(&workspace, &journal).open()?;
//! let results = tokio::runtime::Runtime::new()?.block_on(async {
//!     session.begin_turn("make a plan")?;
//!     session.begin_step()?;
//!     let call = ModelCall {
//!         call_id: "call_1".into(),
//!         name: "todo".into(),
//!         arguments: r#"{"items":[{"text":"read the logs","status":"pending"}]}"#.into(),
//!     };
//!     let response = ModelResponse {
//!         text: String::new(),
//!         tool_calls: vec![call],
//!         stop_reason: StopReason::ToolUse,
//!     };
//!     // `started` is on disk before the tool runs; the result is committed in model order.
//!     let results = session.run_batch(response).await?;
//!     session.end_step(StepOutcome::Completed)?;
//!     session.end_turn(TurnOutcome::Completed).await?;
//!     session.close().await?;
//!     Ok::<_, tooljournal_runtime::RuntimeError>(results)
//! })?;
//! assert_eq!(results[0].code, None);
//! # Ok(()) }
//! ```
//!
//! The test machinery (a manual clock, armable failpoints) is behind the `testing` feature
//! (the `testing` module, present only then); the deliberately broken variants the fuzz
//! campaign must catch are behind `mutant`.

#![warn(missing_docs)]

pub mod agent;
pub mod args;
pub mod builder;
mod config;
mod error;
pub mod eventlog;
pub mod failpoint;
pub mod hooks;
mod pipeline;
pub mod registry;
mod registry_rules;
mod scheduler;
pub mod secrets;
pub mod session;
pub mod spill;
mod stats;
pub mod takeover;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tool;
pub mod tools;
mod track;
pub mod transcript;

/// The journal's vocabulary (`tooljournal-events`), re-exported where the runtime's users
/// have always found it.
pub use events::{code, display, event, model, process, replay, result, state};

pub use builder::{BuildError, LockedJournal, PreparedSession, SessionBuilder};
pub use code::ErrorCode;
pub use error::RuntimeError;
pub use result::ToolResult;
pub use session::{Config, Session, SessionOptions};
