//! tooljournal for a host language: one session's journal driven with plain values, its
//! tools' bodies in the host (Python, JavaScript), its readings as JSON.
//!
//! Why a floor of its own: the Python and Node packages must give the same guarantees as the
//! CLI (every transition journaled, `started` durable before a body runs, recovery under the
//! lock) without each re-implementing them against the runtime. This crate is that contract
//! once, in Rust; the packages only convert values and call functions.
//!
//! - [`Journal`]: create or resume, [`Journal::tool`], [`Journal::turn`], [`Journal::step`],
//!   [`Journal::history`], [`Journal::close`].
//! - [`HostTool`]: a body the host runs; [`CallCtx`] is what it is told.
//! - [`read_response`]: a provider's response body (any of the four formats) as a step's
//!   batch.
//! - [`classify`], [`rebuild`], [`audit`]: the reader's answers, reading only unless asked.
//! - [`EmbedError`]: one [`ErrorKind`] per host exception, with the CLI's exit code.

mod error;
mod host;
mod journal;
mod reading;
mod response;

pub use ::journal::FsyncPolicy;
pub use error::{EmbedError, ErrorKind};
pub use host::{CallCtx, Failure, HostTool, Later, Reply, Stopper, ToolDecl};
pub use journal::{
    CreateOptions, Journal, ResumeOptions, Resuming, StepResult, Stepped, WATCH_INTERVAL_MS,
};
pub use reading::{audit, classify, rebuild};
pub use response::{read as read_response, Answer, Call};
pub use session::RerunPolicy;
