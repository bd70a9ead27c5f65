#![warn(missing_docs)]
//! `runtime`: runs an agent's tool calls and journals every transition of every call.
//!
//! A call travels a fixed pipeline (DESIGN.md §3): frozen arguments → pre-execute chain →
//! guard → execute wrapper (write-ahead `started`, timeout, retry) → tool body → contract check
//! → post-execute → `finalize_content` → frozen result → observers. Each transition is an
//! [`event::Event`] in the session's journal, checked against the [`state`] machine, and
//! [`replay`] folds a journal back into the same states: it is what `recover` uses.

pub mod args;
pub mod builder;
pub mod code;
mod config;
mod error;
pub mod event;
pub mod eventlog;
pub mod failpoint;
pub mod hooks;
pub mod model;
mod pipeline;
pub mod process;
pub mod registry;
pub mod replay;
pub mod result;
mod scheduler;
pub mod session;
pub mod spill;
pub mod state;
mod stats;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tool;
pub mod tools;
mod track;
pub mod transcript;

pub use builder::{BuildError, LockedJournal, PreparedSession, SessionBuilder};
pub use code::ErrorCode;
pub use error::RuntimeError;
pub use pipeline::inline_or_preview;
pub use result::ToolResult;
pub use session::{Config, Session, SessionOptions};
