//! Where timestamps come from: every event's `at_ms` is read from one [`Clock`], so a fixed
//! clock makes a simulated session's journal byte-identical run after run.

/// Where timestamps come from.
pub trait Clock: Send + Sync {
    /// Now, in milliseconds since the Unix epoch (or whatever origin a test clock uses).
    fn now_ms(&self) -> u64;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        // CLOCK_REALTIME, as `SystemTime::now` reads it, in whole milliseconds since the epoch
        // (0 before it), without `SystemTime`'s checked subtraction and 128-bit arithmetic:
        // this runs once per event.
        match nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME) {
            Ok(now) => match u64::try_from(now.tv_sec()) {
                Ok(secs) => secs * 1000 + now.tv_nsec() as u64 / 1_000_000,
                Err(_) => 0,
            },
            // Never for this clock; `SystemTime::now` would panic here.
            Err(_) => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
        }
    }
}
