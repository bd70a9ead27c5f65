//! The simulation's shared state behind a mutex, taken as the simulation always took it.

use std::sync::{Mutex, MutexGuard};

/// `Mutex::lock` that panics on a poisoned mutex, as the simulation always has.
pub(crate) trait Locked<T> {
    /// The guard; a poisoned mutex panics.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        // A mutex here is poisoned only by a panic while it was held, in a case that is already
        // failing; going on with half-updated simulation state would misreport that case.
        #[allow(clippy::expect_used)]
        self.lock()
            .expect("no panic while the simulation's state was held")
    }
}
