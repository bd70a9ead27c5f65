//! The native half of the `tooljournal` Node.js package: `tooljournal-embed` as one class,
//! `NativeJournal`, and four reading functions. The package's JavaScript (`index.js`) gives
//! them their public shape; nothing here is called by users directly.
//!
//! Why everything runs on Node's thread, and the step is a future polled there: `journal.rs`.
//! How bodies are called and answer: `bridge.rs`.

mod bridge;
mod errors;
mod journal;
// napi registers exported functions at load time, a registration compiled out of a test build
// (clippy's `--all-targets` checks one): there they look unused.
#[cfg_attr(test, allow(dead_code))]
mod reading;
