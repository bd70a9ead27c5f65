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

// Rooms are private; what an embedder reaches is re-exported below, by what it is for.
mod agent;
mod args;
mod builder;
mod config;
mod error;
mod eventlog;
mod failpoint;
mod hooks;
mod pipeline;
mod registry;
mod registry_rules;
mod scheduler;
mod secrets;
mod session;
mod spill;
mod stats;
mod takeover;
#[cfg(feature = "testing")]
mod testing;
mod tool;
mod tools;
mod track;
mod transcript;

/// The journal's vocabulary (`tooljournal-events`), re-exported where the runtime's users
/// have always found it.
pub use events::{code, display, event, model, process, replay, result, state};

// A session: built, locked, prepared, opened or resumed, and driven turn by turn.
pub use builder::{BuildError, LockedJournal, PreparedSession, SessionBuilder};
pub use code::ErrorCode;
pub use error::RuntimeError;
pub use eventlog::{Clock, EventLog, SystemClock};
pub use result::ToolResult;
pub use session::{Config, Phase, Session, SessionOptions, Stats, ASK_TOOL};
// Tools: the trait, the arguments they get, the registry, the built-ins.
pub use args::{parse as parse_args, Args};
pub use registry::{Exposure, Registry, RegistryError, RESERVED_NAMES};
pub use tool::{
    EvidenceFuture, ProgressSink, Tool, ToolContext, ToolError, ToolFuture, ToolOutput,
};
pub use tools::{ask, bash, builtin_registry, builtins, fs, sha256_hex, todo, Workspace};
// What an embedder plugs in: approvals, listeners, observers.
pub use hooks::{
    Approver, AskFuture, CallInfo, Decision, Draft, Guard, Hooks, Observer, PostDecision,
    PostExecute, PreExecute, QuestionFuture, QuestionOutcome,
};
// The agent loop with a live model.
pub use agent::{Agent, AgentConfig, AgentEvent, Observer as AgentObserver, TurnEnd};
// A transcript played as the model (`tooljournal run --script`, the fuzz harness).
pub use transcript::{
    consumed_lines, drive, parse_script, read_script, DriveReport, ModelStep, ScriptLine,
    ScriptedApprover, ScriptedModel, NO_SCRIPTED_ANSWER,
};
// Where big results go, the process's secrets, a PostgreSQL session taken over.
pub use failpoint::{Failpoints, MUTANTS_COMPILED};
pub use secrets::{
    before_exec as secrets_before_exec, seal_process,
    take_from_environment as take_secrets_from_environment, var as secret_var, SECRET_VARS,
};
pub use spill::{SledSpill, SpillStore};
pub use takeover::steal;
#[cfg(feature = "testing")]
pub use testing::ManualClock;
