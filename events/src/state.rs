//! The per-call state machine (DESIGN.md §2). One place says which transitions exist; the
//! runtime asks it before writing an event, and replay asks it for every event it reads back.
//!
//! ```text
//! received → parsed → approved → started → settled → committed
//!     ├──── rejected ─────────────────────────────────────┤
//!     └──── cancelled-before-start ───────────────────────┘
//! ```
//!
//! `rejected` is reachable from `received` (unknown tool, syntax, schema, truncated call) and
//! from `parsed` (policy); `cancelled-before-start` from anything before `started`. `started`
//! may repeat with a higher attempt number (a retry). `outcome-unknown` is not a state a call
//! can be put in: only recovery says it, about a call left in `started`.

use crate::event::CallRef;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
/// Where a call is in its life: the state its latest journaled event put it in. Variants are in
/// journal index order; new ones are appended.
pub enum CallState {
    #[serde(rename = "received")]
    /// Taken from the model's message; nothing checked yet.
    Received,
    #[serde(rename = "parsed")]
    /// The tool exists and the arguments are valid JSON matching its input schema.
    Parsed,
    #[serde(rename = "approved")]
    /// The pre-execute chain, any question and the guards let it run.
    Approved,
    #[serde(rename = "started")]
    /// Its `started` is durable: the body may be running (or may have run, after a crash).
    Started,
    #[serde(rename = "settled")]
    /// The body finished; its real outcome is journaled.
    Settled,
    #[serde(rename = "committed")]
    /// The model was given its result. Final.
    Committed,
    #[serde(rename = "rejected")]
    /// Refused before it ran; it never will.
    Rejected,
    #[serde(rename = "cancelled-before-start")]
    /// Stopped before its body started; it never ran.
    CancelledBeforeStart,
}

impl CallState {
    /// The state's name as DESIGN.md spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            CallState::Received => "received",
            CallState::Parsed => "parsed",
            CallState::Approved => "approved",
            CallState::Started => "started",
            CallState::Settled => "settled",
            CallState::Committed => "committed",
            CallState::Rejected => "rejected",
            CallState::CancelledBeforeStart => "cancelled-before-start",
        }
    }

    /// Whether `self → to` is a transition of the machine.
    pub fn allows(self, to: CallState) -> bool {
        use CallState::*;
        matches!(
            (self, to),
            (Received, Parsed | Rejected | CancelledBeforeStart)
                | (Parsed, Approved | Rejected | CancelledBeforeStart)
                | (Approved, Started | CancelledBeforeStart)
                | (Started, Started | Settled)
                | (Settled | Rejected | CancelledBeforeStart, Committed)
        )
    }
}

impl std::fmt::Display for CallState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A transition the machine does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call}: illegal transition {from} → {to}")]
pub struct IllegalTransition {
    /// The call.
    pub call: CallRef,
    /// The state it is in.
    pub from: CallState,
    /// The state it was asked to move to.
    pub to: CallState,
}

/// A call's position in the machine. Only [`CallMachine::advance`] moves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallMachine {
    call: CallRef,
    state: CallState,
    /// The attempt number of the last `started`.
    attempt: u32,
}

impl CallMachine {
    /// A call that was just received.
    pub fn received(call: CallRef) -> CallMachine {
        CallMachine {
            call,
            state: CallState::Received,
            attempt: 0,
        }
    }

    /// A call a resume runs again (`recovery/rerun`): approved, its approval journaled, after
    /// `attempts` attempts an earlier run started (0: it never started). Its next `started`
    /// carries attempt `attempts + 1`, as the journal's machine expects.
    ///
    /// For the runtime's call tracker only (it skips the transitions a replayed call already
    /// made): hidden from the vocabulary's documented face.
    #[doc(hidden)]
    pub fn approved_for_rerun(call: CallRef, attempts: u32) -> CallMachine {
        CallMachine {
            call,
            state: CallState::Approved,
            attempt: attempts,
        }
    }

    /// The current state.
    pub fn state(&self) -> CallState {
        self.state
    }

    /// The call this machine tracks.
    pub fn call(&self) -> &CallRef {
        &self.call
    }

    /// The call, to be lent to the event that records a step and taken back after (no copy of
    /// its id per event). For the runtime's call tracker only: hidden from the documented face.
    #[doc(hidden)]
    pub fn call_mut(&mut self) -> &mut CallRef {
        &mut self.call
    }

    /// The attempt number of the last `started`; 0 before the first.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Moves to `to`, or says why not. A repeated `started` must carry the next attempt number.
    pub fn advance(&mut self, to: CallState) -> Result<(), IllegalTransition> {
        self.advance_attempt(to, self.attempt + 1)
    }

    /// An imported call's `import/outcome`: from `received` straight to `committed`, a move the
    /// runtime's own machine never makes (an imported call was run by another agent, so this
    /// journal saw none of its steps between).
    pub(crate) fn commit_imported(&mut self) -> Result<(), IllegalTransition> {
        if self.state != CallState::Received {
            return Err(IllegalTransition {
                call: self.call.clone(),
                from: self.state,
                to: CallState::Committed,
            });
        }
        self.state = CallState::Committed;
        Ok(())
    }

    /// As [`CallMachine::advance`], with the attempt number a `started` event carries.
    pub fn advance_attempt(
        &mut self,
        to: CallState,
        attempt: u32,
    ) -> Result<(), IllegalTransition> {
        let legal =
            self.state.allows(to) && (to != CallState::Started || attempt == self.attempt + 1);
        if !legal {
            return Err(IllegalTransition {
                call: self.call.clone(),
                from: self.state,
                to,
            });
        }
        if to == CallState::Started {
            self.attempt = attempt;
        }
        self.state = to;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CallState::*;

    const ALL: [CallState; 8] = [
        Received,
        Parsed,
        Approved,
        Started,
        Settled,
        Committed,
        Rejected,
        CancelledBeforeStart,
    ];

    fn call() -> CallRef {
        CallRef {
            turn: 1,
            step: 2,
            call_id: "call_7".into(),
        }
    }

    #[test]
    fn exactly_the_designed_transitions_are_allowed() {
        let allowed: Vec<(CallState, CallState)> = ALL
            .iter()
            .flat_map(|&a| ALL.iter().map(move |&b| (a, b)))
            .filter(|&(a, b)| a.allows(b))
            .collect();
        assert_eq!(
            allowed,
            vec![
                (Received, Parsed),
                (Received, Rejected),
                (Received, CancelledBeforeStart),
                (Parsed, Approved),
                (Parsed, Rejected),
                (Parsed, CancelledBeforeStart),
                (Approved, Started),
                (Approved, CancelledBeforeStart),
                (Started, Started),
                (Started, Settled),
                (Settled, Committed),
                (Rejected, Committed),
                (CancelledBeforeStart, Committed),
            ]
        );
    }

    #[test]
    fn illegal_transition_names_the_call_and_both_states() {
        let mut m = CallMachine::received(call());
        let err = m.advance(Started).unwrap_err();
        assert_eq!(err.from, Received);
        assert_eq!(err.to, Started);
        assert_eq!(
            err.to_string(),
            "call call_7 (turn 1, step 2): illegal transition received → started"
        );
        assert_eq!(m.state(), Received, "a refused transition changes nothing");
    }

    #[test]
    fn a_retry_must_carry_the_next_attempt_number() {
        let mut m = CallMachine::received(call());
        for s in [Parsed, Approved, Started] {
            m.advance(s).unwrap();
        }
        assert_eq!(m.attempt(), 1);
        assert!(m.advance_attempt(Started, 3).is_err());
        m.advance_attempt(Started, 2).unwrap();
        m.advance(Settled).unwrap();
        m.advance(Committed).unwrap();
        assert!(m.advance(Committed).is_err(), "committed is final");
    }

    #[test]
    fn states_serialize_with_their_design_names() {
        for s in ALL {
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
        }
    }
}
