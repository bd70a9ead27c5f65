//! Test machinery, compiled only with the `testing` feature: what a test or a simulation needs
//! to make a session deterministic or to break it on purpose, kept out of the production API.
//!
//! - [`ManualClock`]: event timestamps that move only when told to.
//! - Arming failpoints: [`crate::failpoint::Failpoints::armable`], `arm` and `enable` exist
//!   only with this feature; a production build's failpoints can never fire.
//!
//! The deliberately broken variants the fuzz campaign must catch are a separate feature,
//! `mutant`, so that no test build carries them unless it asks.

use crate::eventlog::Clock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A clock that only moves when told to: for deterministic tests and simulations.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock that reads `start_ms` until advanced.
    pub fn new(start_ms: u64) -> ManualClock {
        ManualClock(AtomicU64::new(start_ms))
    }

    /// Moves the clock `ms` forward.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::AcqRel);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}
