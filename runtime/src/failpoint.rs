//! Failpoints: named places where a test can make the runtime itself fail.
//!
//! Why: the storage seam makes every I/O path fail on demand (journal's `SimStorage`); the
//! runtime's own faults (a scheduler task that dies, say) need the same, so that "a fault is not
//! a cancel" is tested, not hoped. Unarmed failpoints cost one branch on a `None`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Whether this build has the deliberately broken variants (`mutant.*` failpoints) at all: only
/// with the test-only `mutant` feature.
pub const MUTANTS_COMPILED: bool = cfg!(feature = "mutant");

/// A set of armed failpoints. Cheap to clone; clones share the set.
#[derive(Debug, Clone, Default)]
pub struct Failpoints(Option<Arc<Mutex<HashMap<String, u32>>>>);

impl Failpoints {
    /// A set a test can arm.
    #[cfg(feature = "testing")]
    pub fn armable() -> Failpoints {
        Failpoints(Some(Arc::default()))
    }

    /// Makes the `nth` (1-based) pass through `name` fail, counted from now.
    #[cfg(feature = "testing")]
    pub fn arm(&self, name: &str, nth: u32) {
        // A test arming failpoints it did not make armable is a bug in that test: panic there.
        #[allow(clippy::expect_used)]
        let set = self.0.as_ref().expect("arm needs Failpoints::armable()");
        set.lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned(), nth);
    }

    /// Turns `name` on for good (a mode, not a one-off fault).
    #[cfg(feature = "testing")]
    pub fn enable(&self, name: &str) {
        self.arm(name, 0);
    }

    /// Whether `name` was turned on (with `Failpoints::enable`, a `testing` build's).
    #[cfg_attr(not(feature = "mutant"), allow(dead_code))]
    pub(crate) fn enabled(&self, name: &str) -> bool {
        let Some(set) = &self.0 else { return false };
        set.lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .is_some_and(|&n| n == 0)
    }

    /// Whether the deliberately broken variant `name` is on: only with the test-only `mutant`
    /// feature, and then only when a test enabled it (the fuzz campaign must catch each one).
    pub(crate) fn mutant(&self, name: &str) -> bool {
        #[cfg(feature = "mutant")]
        {
            self.enabled(name)
        }
        #[cfg(not(feature = "mutant"))]
        {
            let _ = name;
            false
        }
    }

    /// Whether this pass through `name` should fail.
    pub(crate) fn hit(&self, name: &str) -> bool {
        let Some(set) = &self.0 else { return false };
        let mut set = set.lock().unwrap_or_else(|p| p.into_inner());
        match set.get_mut(name) {
            Some(1) => {
                set.remove(name);
                true
            }
            Some(n) => {
                *n -= 1;
                false
            }
            None => false,
        }
    }
}
