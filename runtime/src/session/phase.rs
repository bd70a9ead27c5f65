//! Where a session stands between its driver's calls: no turn, a turn, or a step (answered or
//! not). One value instead of three flags, so that a step outside a turn, or an answer with no
//! step, cannot even be stated; each move checks the phase it leaves and says what was wrong.

use crate::RuntimeError;

/// A session's phase. The turn and step numbers are counters beside it (the journal's
/// numbering); this says which of them is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Between turns (and before the first).
    Idle,
    /// A turn is open and none of its steps.
    Turn,
    /// A step is open in the open turn; `answered` once the model's response for it is
    /// journaled (a step takes one response).
    Step {
        /// The step's response (`llm/response`) is journaled.
        answered: bool,
    },
}

impl Phase {
    /// Whether a turn is open (with or without a step).
    pub fn turn_open(self) -> bool {
        self != Phase::Idle
    }

    /// `begin_turn`: from between turns. `turn` is the turn still open, for the message.
    pub(super) fn begin_turn(&mut self, turn: u32) -> Result<(), RuntimeError> {
        if *self != Phase::Idle {
            return Err(RuntimeError::Misuse(format!("turn {turn} is still open")));
        }
        *self = Phase::Turn;
        Ok(())
    }

    /// `begin_step`: from an open turn with no step open.
    pub(super) fn begin_step(&mut self) -> Result<(), RuntimeError> {
        if *self != Phase::Turn {
            return Err(RuntimeError::Misuse(
                "a step begins inside an open turn, after the previous step ended".into(),
            ));
        }
        *self = Phase::Step { answered: false };
        Ok(())
    }

    /// Whether a batch (the step's response) may run now: once, in an open step.
    pub(super) fn check_batch(self) -> Result<(), RuntimeError> {
        if self != (Phase::Step { answered: false }) {
            return Err(RuntimeError::Misuse(
                "a batch runs inside an open step, once per step".into(),
            ));
        }
        Ok(())
    }

    /// The step's response is journaled: [`check_batch`](Phase::check_batch), then answered.
    pub(super) fn answer(&mut self) -> Result<(), RuntimeError> {
        self.check_batch()?;
        *self = Phase::Step { answered: true };
        Ok(())
    }

    /// Something that belongs to an open step before its response (`what`, for the message).
    pub(super) fn check_unanswered(self, what: &str) -> Result<(), RuntimeError> {
        if self != (Phase::Step { answered: false }) {
            return Err(RuntimeError::Misuse(format!(
                "{what} belongs to an open step before its response"
            )));
        }
        Ok(())
    }

    /// `end_step`: from an open step, answered or not.
    pub(super) fn end_step(&mut self) -> Result<(), RuntimeError> {
        if !matches!(self, Phase::Step { .. }) {
            return Err(RuntimeError::Misuse("no step is open".into()));
        }
        *self = Phase::Turn;
        Ok(())
    }

    /// `end_turn`: from an open turn whose last step ended.
    pub(super) fn end_turn(&mut self) -> Result<(), RuntimeError> {
        if *self != Phase::Turn {
            return Err(RuntimeError::Misuse(
                "a turn ends after its last step ended".into(),
            ));
        }
        *self = Phase::Idle;
        Ok(())
    }

    /// `close`: between turns. `turn` is the turn still open, for the message.
    pub(super) fn check_idle(self, turn: u32) -> Result<(), RuntimeError> {
        if self != Phase::Idle {
            return Err(RuntimeError::Misuse(format!("turn {turn} is still open")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_move_is_refused_from_every_phase_it_does_not_start_from() {
        let all = [
            Phase::Idle,
            Phase::Turn,
            Phase::Step { answered: false },
            Phase::Step { answered: true },
        ];
        type Move = fn(&mut Phase) -> Result<(), RuntimeError>;
        let moves: [(&str, Move, &[Phase], Phase); 5] = [
            (
                "begin_turn",
                |p| p.begin_turn(1),
                &[Phase::Idle],
                Phase::Turn,
            ),
            (
                "begin_step",
                |p| p.begin_step(),
                &[Phase::Turn],
                Phase::Step { answered: false },
            ),
            (
                "answer",
                |p| p.answer(),
                &[Phase::Step { answered: false }],
                Phase::Step { answered: true },
            ),
            (
                "end_step",
                |p| p.end_step(),
                &[
                    Phase::Step { answered: false },
                    Phase::Step { answered: true },
                ],
                Phase::Turn,
            ),
            ("end_turn", |p| p.end_turn(), &[Phase::Turn], Phase::Idle),
        ];
        for (name, step, from, to) in moves {
            for start in all {
                let mut phase = start;
                let result = step(&mut phase);
                if from.contains(&start) {
                    assert!(result.is_ok(), "{name} from {start:?}: {result:?}");
                    assert_eq!(phase, to, "{name} from {start:?}");
                } else {
                    assert!(
                        matches!(result, Err(RuntimeError::Misuse(_))),
                        "{name} from {start:?} was not refused"
                    );
                    assert_eq!(phase, start, "a refused {name} changed the phase");
                }
            }
        }
    }
}
