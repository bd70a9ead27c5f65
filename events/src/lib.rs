//! `events`: the journal's vocabulary, shared by everything that writes or reads a journal.
//!
//! What a session journals ([`event::Event`]), the per-call state machine every state change is
//! checked against ([`state`]), the fold of a journal back into turns, steps and calls with the
//! structural rules it refuses to break ([`replay`]), the error codes a result carries
//! ([`code`]), the model seam the runtime drives and the provider adapters implement
//! ([`model`]), and the small facts a reader needs (a [`clock`], a tool's [`schema`] hash,
//! whether a call's process group still runs: [`process`]).
//!
//! Why a floor of its own: a reader of a journal (`recover`, the provider adapters, an audit)
//! needs the words and the rules, never the executor that runs tools. Nothing here runs a tool,
//! spawns a process or writes a journal.

#![warn(missing_docs)]

pub mod clock;
pub mod code;
pub mod display;
pub mod event;
pub mod model;
pub mod process;
pub mod replay;
pub mod result;
pub mod schema;
pub mod state;
pub mod tool;

pub use code::ErrorCode;
pub use result::ToolResult;

/// The built-in tool whose calls are questions to the user.
pub const ASK_TOOL: &str = "ask";
