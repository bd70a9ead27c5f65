//! `tooljournal resume --rerun`: the flag, the calls run again said on stdout, their results put
//! into the model's history. What runs again, and why, is the library's
//! (`tooljournal_session`'s `rerun` room, docs/DESIGN.md §6b); `none` runs nothing again (every
//! orphan gets its classification).

use runtime::event::{CallRef, RerunPolicy};

/// `--rerun`, as the command line takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RerunFlag {
    /// The interrupted step's approved calls that provably never started (the default).
    NotStarted,
    /// Those, and calls of unknown outcome whose tool declares itself idempotent or read-only.
    Safe,
    /// Nothing: every interrupted call gets its classification.
    None,
}

impl RerunFlag {
    /// The policy, or `None` for `none`.
    pub fn policy(self) -> Option<RerunPolicy> {
        match self {
            RerunFlag::NotStarted => Some(RerunPolicy::NotStarted),
            RerunFlag::Safe => Some(RerunPolicy::Safe),
            RerunFlag::None => None,
        }
    }
}

/// Runs the calls the recovering resume left to run again, if any, and says how each ended.
pub(crate) fn run_again(
    rt: &tokio::runtime::Runtime,
    opened: &mut session::Opened,
) -> Result<Vec<(CallRef, runtime::ToolResult)>, crate::CliError> {
    // Not stoppable by Ctrl-C: an interrupted re-run is a crash like any other, and recovery
    // tells its truth.
    let results = rt
        .block_on(opened.run_again())
        .map_err(crate::CliError::from)?;
    for (call, result) in &results {
        let how = match result.code {
            None => "ok".to_owned(),
            Some(code) => code.as_str().to_owned(),
        };
        outln!("ran again: {call}: {how}")?;
    }
    Ok(results)
}

/// Puts the results of the calls that ran again into the history the model is sent, in place
/// of what recovery would have said (one result per call id either way).
pub(crate) fn put_results(
    turns: &mut [recover::layout::TurnView],
    results: &[(CallRef, runtime::ToolResult)],
) {
    for (call, result) in results {
        let step = turns
            .iter_mut()
            .filter(|t| t.turn == call.turn)
            .flat_map(|t| t.steps.iter_mut())
            .find(|s| s.step == call.step);
        let Some(step) = step else { continue };
        if let Some(slot) = step.results.iter_mut().find(|r| r.id == call.call_id) {
            slot.content = result.content.clone();
            slot.is_error = result.is_error;
        }
    }
}
