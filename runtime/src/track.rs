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
    /// Shared: the call's body borrows it while the track is lent mutably to the pipeline.
    info: Option<Arc<CallInfo>>,
    result: Option<ToolResult>,
    /// What the current attempt's `started` recorded (key and evidence), for its body.
    start: StartInfo,
    /// The `source_seqs` the call's next event is lent (one seq), taken back after: one buffer
    /// per call, not one per event.
    sources: Vec<u64>,
}

/// What a call's machine holds while its call is lent to an event being journaled.
fn vacant_call() -> CallRef {
    CallRef {
        turn: 0,
        step: 0,
        call_id: String::new(),
    }
}

impl Track {
    /// A call just journaled as `received` (at `seq`), asking for `tool`; `sources` is that
    /// event's `source_seqs`, kept as the buffer the call's next events are lent. Boxed, as the
    /// scheduler holds every track (see its `Slot`).
    pub(crate) fn received(call: CallRef, seq: u64, tool: String, sources: Vec<u64>) -> Box<Track> {
        Box::new(Track {
            machine: CallMachine::received(call),
            last_seq: seq,
            tool,
            entry: None,
            info: None,
            result: None,
            start: StartInfo::default(),
            sources,
        })
    }

    /// Advances the machine and appends the event that records it, pointing back at the call's
    /// previous event. `event` is given the call and the `source_seqs` to put in it.
    pub(crate) fn transition(
        &mut self,
        log: &EventLog,
        to: CallState,
        attempt: u32,
        event: impl FnOnce(CallRef, Vec<u64>) -> Event,
    ) -> Result<u64, RuntimeError> {
        self.transition_with(log, to, attempt, event, drop)
            .map(|(seq, ())| seq)
    }

    /// [`Track::transition`], handing the journaled event (its call and `source_seqs` taken out
    /// of it) to `back`, for the caller to move back out what else it lent it. Not called when
    /// the append fails: what the event held goes with it.
    ///
    /// Why lent and not cloned: a call's id was copied into each of its six events, on the
    /// per-call hot path; now the one `CallRef` moves into each event and back. Why a closure
    /// and not the event returned: an event is ~300 bytes, copied out on every return.
    #[inline]
    pub(crate) fn transition_with<T>(
        &mut self,
        log: &EventLog,
        to: CallState,
        attempt: u32,
        event: impl FnOnce(CallRef, Vec<u64>) -> Event,
        back: impl FnOnce(Event) -> T,
    ) -> Result<(u64, T), RuntimeError> {
        self.machine.advance_attempt(to, attempt)?;
        let mut sources = std::mem::take(&mut self.sources);
        sources.clear();
        sources.push(self.last_seq);
        let call = std::mem::replace(self.machine.call_mut(), vacant_call());
        let mut event = event(call, sources);
        let appended = log.append(&event);
        // assert: every transition's event is a per-call event (the closures above build one),
        // so its call comes back; a match per event.
        #[allow(clippy::expect_used)]
        let (call, sources) = event
            .call_parts_mut()
            .expect("a call's state change is recorded by an event that names the call");
        *self.machine.call_mut() = std::mem::replace(call, vacant_call());
        self.sources = std::mem::take(sources);
        let seq = appended?;
        self.last_seq = seq;
        Ok((seq, back(event)))
    }

    /// Appends an event of the call that is no state change (an ask and its answer): what the
    /// call records next points back at it.
    pub(crate) fn note(&mut self, log: &EventLog, event: &Event) -> Result<u64, RuntimeError> {
        let seq = log.append(event)?;
        self.last_seq = seq;
        Ok(seq)
    }

    /// What the current attempt's `started` recorded, moved out for its body (the next
    /// attempt's `started` records its own).
    pub(crate) fn take_start(&mut self) -> StartInfo {
        std::mem::take(&mut self.start)
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
    pub(crate) fn rerun(call: CallRef, tool: String, attempts: u32, last_seq: u64) -> Box<Track> {
        Box::new(Track {
            machine: CallMachine::approved_for_rerun(call, attempts),
            last_seq,
            tool,
            entry: None,
            info: None,
            result: None,
            start: StartInfo::default(),
            sources: Vec::with_capacity(1),
        })
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
        self.info.as_deref()
    }

    /// The call's frozen arguments, shared.
    pub(crate) fn info_shared(&self) -> Option<&Arc<CallInfo>> {
        self.info.as_ref()
    }

    /// The call's frozen arguments, once parsed and checked.
    pub(crate) fn set_info(&mut self, info: impl Into<Arc<CallInfo>>) {
        self.info = Some(info.into());
    }

    pub(crate) fn result(&self) -> Option<&ToolResult> {
        self.result.as_ref()
    }

    /// The result, for its content to be lent to `committed` and taken back.
    pub(crate) fn result_mut(&mut self) -> Option<&mut ToolResult> {
        self.result.as_mut()
    }

    pub(crate) fn set_result(&mut self, result: ToolResult) {
        debug_assert!(self.result.is_none(), "a call gets one result");
        self.result = Some(result);
    }

    pub(crate) fn into_result(self) -> Option<ToolResult> {
        self.result
    }
}
