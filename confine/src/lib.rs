//! `confine`: the one directory tree a session's tools may touch.
//!
//! A model's path is untrusted input. [`Workspace::resolve`] refuses `..`, absolute paths,
//! symlinks that lead out and the runtime's own state; [`Workspace::open`] then opens the
//! resolved path beneath a handle on the root following no symlink ([`beneath`]), so a swap
//! between the check and the open fails instead of reaching out.
//!
//! Why a crate of its own: the file tools (in `runtime`) and `recover`'s probe, which looks at
//! the workspace after a crash and never runs a tool, must confine paths the same way; neither
//! should link the other.

#![warn(missing_docs)]

pub mod beneath;
pub mod workspace;

pub use workspace::{sha256_hex, Refusal, Workspace};
