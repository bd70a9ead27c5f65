//! Deliberately broken variants of recovery, for the fuzz campaign to prove it catches them.
//! The module exists only in a build with the test-only `mutant` feature, and even then a
//! mutant acts only when a test turns it on, for its own thread (recovery runs on the caller's
//! thread; tests beside it on other threads are unaffected).

use std::cell::RefCell;

/// A call whose `started` is the last thing the journal says of it is classified
/// `TOOL_NOT_STARTED` instead of `TOOL_OUTCOME_UNKNOWN`.
pub const STARTED_AS_NOT_STARTED: &str = "mutant.started_as_not_started";

thread_local! {
    static ON: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
}

/// Turns `name` on for this thread until the guard is dropped.
pub fn enable(name: &'static str) -> Enabled {
    ON.with(|on| on.borrow_mut().push(name));
    Enabled(name)
}

/// Whether `name` is on for this thread.
pub(crate) fn on(name: &str) -> bool {
    ON.with(|on| on.borrow().contains(&name))
}

/// Keeps a mutant on; dropping it turns the mutant off again.
pub struct Enabled(&'static str);

impl Drop for Enabled {
    fn drop(&mut self) {
        ON.with(|on| {
            let mut on = on.borrow_mut();
            if let Some(i) = on.iter().position(|n| *n == self.0) {
                on.remove(i);
            }
        });
    }
}
