//! What a session reports besides its journal: counters of failures that do not change a result
//! (an observer that failed, a store that could not spill, a tool that ignored its cancel).
//!
//! Why a module of its own: the session hands the counters out, but the pipeline and the
//! scheduler are where the failures happen; kept below all three, each counts without
//! importing the others.

use crate::error::panic_message;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters a caller can read; failures of observers land here (and in the log).
#[derive(Debug, Default)]
pub struct Stats {
    observer_failures: AtomicU64,
    ignored_cancellations: AtomicU64,
    spill_failures: AtomicU64,
}

impl Stats {
    /// Observer callbacks that returned an error or panicked.
    pub fn observer_failures(&self) -> u64 {
        self.observer_failures.load(Ordering::Acquire)
    }

    /// Calls that were still running `cancel_grace_ms` after being cancelled.
    pub fn ignored_cancellations(&self) -> u64 {
        self.ignored_cancellations.load(Ordering::Acquire)
    }

    /// Results that should have spilled but stayed inline because the store failed.
    pub fn spill_failures(&self) -> u64 {
        self.spill_failures.load(Ordering::Acquire)
    }

    pub(crate) fn spill_failed(&self) {
        self.spill_failures.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn ignored_cancellation(&self) {
        self.ignored_cancellations.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn observer_outcome(
        &self,
        observer: &str,
        outcome: std::thread::Result<Result<(), String>>,
    ) {
        let message = match outcome {
            Ok(Ok(())) => return,
            Ok(Err(message)) => message,
            Err(panic) => format!("panicked: {}", panic_message(panic.as_ref())),
        };
        self.observer_failures.fetch_add(1, Ordering::AcqRel);
        tracing::warn!(observer, %message, "observer failed; the result is unchanged");
    }
}
