//! What a session is given: its limits ([`Config`]) and who it is ([`SessionOptions`]).
//!
//! Why a module of its own: the session, the scheduler and the pipeline all read the limits.
//! Kept here, below all three, the data flows one way (session → scheduler → pipeline → config)
//! and none of them has to import another to learn a timeout.

use crate::eventlog::{Clock, SystemClock};
use crate::failpoint::Failpoints;
use crate::spill::SpillStore;
use std::sync::Arc;

/// Limits and defaults of a session.
#[derive(Clone)]
pub struct Config {
    /// A call's body is cancelled after this long (then awaited until it settles).
    pub timeout_ms: u64,
    /// Attempts for a retry-safe tool whose failure says it is retryable (1 = no retry).
    pub attempts_max: u32,
    /// Pause before retry n is n × this.
    pub retry_backoff_ms: u64,
    /// Content larger than this is journaled in `settled` as head + tail + sha256.
    pub content_inline_bytes_max: usize,
    /// What happens when no pre-execute listener decides: allow (true) or deny.
    pub default_allow: bool,
    /// Most calls one assistant message may carry.
    pub calls_per_batch_max: usize,
    /// Most concurrency-safe calls running at once.
    pub parallel_max: usize,
    /// After cancelling a call, how long before it is reported as ignoring cancellation (it is
    /// still awaited: its resources are released only when it settles).
    pub cancel_grace_ms: u64,
    /// Faults a test can inject into the runtime itself.
    pub failpoints: Failpoints,
    /// Results longer than this reach the model as head + tail + locator when a spill store is
    /// set; without one they reach it whole up to 4 MiB, and beyond that as a preview marked
    /// "not kept".
    pub model_inline_bytes_max: usize,
    /// Where spilled results are kept in full; `None`: no spilling.
    pub spill: Option<Arc<dyn SpillStore>>,
    /// Start a new session in plan mode: only read-only tools run until the user approves a
    /// plan (chooses the `plan_option` of an `ask`).
    pub plan_mode: bool,
    /// A question (an approval or an `ask`) nobody answered in this long is journaled
    /// `ask/expired`, never taken as an answer; `None`: the session waits as long as the
    /// approver does.
    pub question_timeout_ms: Option<u64>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("timeout_ms", &self.timeout_ms)
            .field("attempts_max", &self.attempts_max)
            .field("parallel_max", &self.parallel_max)
            .field("model_inline_bytes_max", &self.model_inline_bytes_max)
            .field("spill", &self.spill.is_some())
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Refuses limits under which the journal would say something untrue: with `parallel_max`
    /// 0 no call could start, and each would be recorded as stopped before it started although
    /// nobody stopped it.
    pub fn check(&self) -> Result<(), crate::RuntimeError> {
        if self.parallel_max == 0 {
            return Err(crate::RuntimeError::Misuse(
                "Config::parallel_max is 0: at least one call must be able to run".into(),
            ));
        }
        Ok(())
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            timeout_ms: 120_000,
            attempts_max: 3,
            retry_backoff_ms: 50,
            content_inline_bytes_max: 1 << 20,
            default_allow: true,
            calls_per_batch_max: 128,
            parallel_max: 10,
            cancel_grace_ms: 5_000,
            failpoints: Failpoints::default(),
            model_inline_bytes_max: 32 << 10,
            spill: None,
            plan_mode: false,
            question_timeout_ms: None,
        }
    }
}

/// Who the session is and where its clock comes from.
#[derive(Clone)]
pub struct SessionOptions {
    /// Defaults to a random UUID.
    pub session_id: Option<String>,
    /// The directory the session works in, as recorded in `session/open`.
    pub workspace: String,
    /// Where every event's timestamp comes from.
    pub clock: Arc<dyn Clock>,
}

impl Default for SessionOptions {
    fn default() -> SessionOptions {
        SessionOptions {
            session_id: None,
            workspace: ".".to_owned(),
            clock: Arc::new(SystemClock),
        }
    }
}
