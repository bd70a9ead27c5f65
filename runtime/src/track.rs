//! One call of the current batch as the runtime tracks it: its state machine, its last event,
//! and what is known of it so far (tool, arguments, result).
//!
//! Why a module of its own: the session admits calls, the scheduler starts and commits them and
//! the pipeline runs them, and all three move the same [`Track`] along. Kept below all three,
//! the track knows nothing of any of them: it only advances its machine and journals the step.

use crate::event::{CallRef, Event};
use crate::eventlog::EventLog;
use crate::hooks::CallInfo;
use crate::registry::Entry;
use crate::result::ToolResult;
use crate::state::{CallMachine, CallState};
use crate::tool::StartInfo;
use crate::RuntimeError;
use std::sync::Arc;

/// One call of the current batch: its machine, its last event, and what is known of it.
pub(crate) struct Track {
    machine: CallMachine,
    last_seq: u64,
    tool: String,
    entry: Option<Arc<Entry>>,
    info: Option<CallInfo>,
    result: Option<ToolResult>,
    /// What the current attempt's `started` recorded (key and evidence), for its body.
    start: StartInfo,
}

impl Track {
    /// A call just journaled as `received` (at `seq`), asking for `tool`.
    pub(crate) fn received(call: CallRef, seq: u64, tool: String) -> Track {
        Track {
            machine: CallMachine::received(call),
            last_seq: seq,
            tool,
            entry: None,
            info: None,
            result: None,
            start: StartInfo::default(),
        }
    }

    /// Advances the machine and appends the event that records it, pointing back at the call's
    /// previous event.
    pub(crate) fn transition(
        &mut self,
        log: &EventLog,
        to: CallState,
        attempt: u32,
        event: impl FnOnce(Vec<u64>) -> Event,
    ) -> Result<u64, RuntimeError> {
        self.machine.advance_attempt(to, attempt)?;
        let seq = log.append(&event(vec![self.last_seq]))?;
        self.last_seq = seq;
        Ok(seq)
    }

    /// Appends an event of the call that is no state change (an ask and its answer): what the
    /// call records next points back at it.
    pub(crate) fn note(&mut self, log: &EventLog, event: &Event) -> Result<u64, RuntimeError> {
        let seq = log.append(event)?;
        self.last_seq = seq;
        Ok(seq)
    }

    /// What the current attempt's `started` recorded.
    pub(crate) fn start(&self) -> &StartInfo {
        &self.start
    }

    /// Keeps what the attempt's `started` records, for its body.
    pub(crate) fn set_start(&mut self, start: StartInfo) {
        self.start = start;
    }

    /// The attempt of the call's last `started`; 0 before any.
    pub(crate) fn attempt(&self) -> u32 {
        self.machine.attempt()
    }

    /// A call of a crashed run that a resume runs again: received earlier, approved, and
    /// started `attempts` times before (0: never), its last event at `last_seq` (the
    /// `recovery/rerun` that names it). It waits to start like any approved call; nothing is
    /// journaled here: the journal already says all this.
    pub(crate) fn rerun(call: CallRef, tool: String, attempts: u32, last_seq: u64) -> Track {
        Track {
            machine: CallMachine::approved_for_rerun(call, attempts),
            last_seq,
            tool,
            entry: None,
            info: None,
            result: None,
            start: StartInfo::default(),
        }
    }

    /// The seq of the call's last event.
    pub(crate) fn last_seq(&self) -> u64 {
        self.last_seq
    }

    pub(crate) fn call(&self) -> &CallRef {
        self.machine.call()
    }

    pub(crate) fn state(&self) -> CallState {
        self.machine.state()
    }

    pub(crate) fn tool(&self) -> &str {
        &self.tool
    }

    pub(crate) fn entry(&self) -> Option<&Arc<Entry>> {
        self.entry.as_ref()
    }

    /// The tool the call resolved to (from then on, its errors pass its `finalize_content`).
    pub(crate) fn set_entry(&mut self, entry: Arc<Entry>) {
        self.entry = Some(entry);
    }

    pub(crate) fn info(&self) -> Option<&CallInfo> {
        self.info.as_ref()
    }

    /// The call's frozen arguments, once parsed and checked.
    pub(crate) fn set_info(&mut self, info: CallInfo) {
        self.info = Some(info);
    }

    pub(crate) fn result(&self) -> Option<&ToolResult> {
        self.result.as_ref()
    }

    pub(crate) fn set_result(&mut self, result: ToolResult) {
        debug_assert!(self.result.is_none(), "a call gets one result");
        self.result = Some(result);
    }

    pub(crate) fn into_result(self) -> Option<ToolResult> {
        self.result
    }
}
