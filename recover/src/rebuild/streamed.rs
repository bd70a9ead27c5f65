//! `recover rebuild` written as the journal is read: the bytes [`super::body`] gives, in
//! memory that does not grow with the journal.
//!
//! A body prints its header (system prompt, tools, settings) and reduces its history by what
//! the journal says last, so the journal is read twice:
//!
//! 1. [`first_reading`] is the recovery itself (checked whole; with `write`, the torn tail
//!    cut and the `recovery` appended, exactly as before) with a classifier in
//!    [`Mode::Survey`], keeping only small things: the latest `session/model`, the tools the
//!    last step showed and the `tool/schema`s, the latest `context/compacted`, how many turns
//!    there are, a fixed-size survey of the call ids ([`IdSurvey`]), and the result of every
//!    call that was not final when its step closed (an orphan classified at the end, a call a
//!    later `recovery` committed): a few calls.
//! 2. [`write()`] reads the same records again (no more: not the `recovery` the first appended)
//!    in [`Mode::Write`]: each turn's user message and each step's assistant message with one
//!    result per call go to a [`BodyWriter`] as their step closes, laid out by
//!    [`Layout`] as [`Analysis::conversation`](crate::classify::Analysis::conversation) lays
//!    them out. What is held at a time is one step (its calls and results) and, for Anthropic
//!    and Gemini, the one turn being merged.
//!
//! A corrupt journal, a newer one, or a live session fail in the first reading, before
//! anything is written, with the messages they always had. The body is not checked against
//! its validator here (that would need it whole): it is the whole body's by construction (the
//! same message-by-message code), which the tests check byte for byte against [`super::body`],
//! whose body they check against the validator. Anthropic's rule that a body with tool blocks
//! needs tools is the journal's limit, said in a note as before.

use super::{tools_missing_note, tools_shown};
use crate::classify::not_started_text;
use crate::conversation::{ConvCall, ConvResult, ProviderState};
use crate::layout::{Layout, StepView};
use crate::providers::{BodyWriter, Format, Header, IdSurvey};
use crate::session::{RecoverError, RereadError, Streamed};
use crate::stream::{Classifier, ClosedStep, Mode, Notice};
use events::event::{CallRef, ContextCompacted, SessionModel, ToolSchema, VisibleTool};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

/// What the first reading keeps for the second.
#[derive(Debug)]
struct Survey {
    model: Option<SessionModel>,
    schemas: BTreeMap<(String, String), ToolSchema>,
    compaction: Option<ContextCompacted>,
    turns: u32,
    shown: Option<Vec<VisibleTool>>,
    any_step: bool,
    ids: IdSurvey,
    /// The last step the model answered: refused (`llm/refusal`), or not.
    last_refusal: Option<events::event::LlmRefusal>,
}

impl Survey {
    fn notice(&mut self, notice: Notice) {
        match notice {
            Notice::Model(m) => self.model = Some(m),
            Notice::Schema(s) => {
                self.schemas
                    .insert((s.name.clone(), s.schema_hash.clone()), s);
            }
            Notice::Compacted(c) => self.compaction = Some(c),
            Notice::TurnBegun { turn, .. } => self.turns = turn,
            Notice::Step(step) => {
                self.any_step = true;
                if step.response.is_some() {
                    self.last_refusal = step.refusal.clone();
                }
                if step.tools.is_some() {
                    self.shown = step.tools;
                }
                for m in step.response.iter().flat_map(|r| &r.tool_calls) {
                    self.ids.call(step.turn, &m.call_id);
                }
            }
            // Moments are the audit's only.
            Notice::Opened(_) | Notice::Moment(_) | Notice::Imported(_) | Notice::Sandbox(_) => {}
        }
    }
}

/// What the first reading found: the recovery, and what the second reading needs.
#[derive(Debug)]
pub struct FirstReading {
    /// The streamed recovery (its notes are for stderr; `live` refuses a rebuild).
    pub streamed: Streamed,
    format: Format,
    survey: Survey,
    late: HashMap<CallRef, (String, bool)>,
}

/// The first reading: the recovery `recover rebuild` always made (with `write`, the journal
/// balanced; `workspace` probed for `TOOL_OUTCOME_UNKNOWN` calls, whose results then state
/// the evidence), keeping what [`write()`] needs for a `format` body.
pub fn first_reading(
    at: impl Into<crate::Place>,
    format: Format,
    write: bool,
    progress: &dyn Fn(u64, u64),
    workspace: Option<&Path>,
) -> Result<FirstReading, RecoverError> {
    let mut survey = Survey {
        model: None,
        schemas: BTreeMap::new(),
        compaction: None,
        turns: 0,
        shown: None,
        any_step: false,
        ids: IdSurvey::new(format),
        last_refusal: None,
    };
    let (streamed, mut classifier) = crate::Recovery::of(at)
        .write(write)
        .progress(progress)
        .probe(workspace)
        .stream_observing(&mut std::io::sink(), Mode::Survey, &mut |c| {
            c.take_notices().for_each(|n| survey.notice(n))
        })?;
    Ok(FirstReading {
        streamed,
        format,
        survey,
        late: classifier.late_results(),
    })
}

/// What [`write()`] wrote, and what it could not say in the body.
#[derive(Debug)]
pub struct Written<W> {
    /// The output, flushed.
    pub out: W,
    /// For people, one line each: tools left out and why, a body a provider would refuse as
    /// it is (`super::Rebuilt::notes`).
    pub notes: Vec<String>,
}

/// The second reading: the body written to `out` as the journal is read again. An error
/// writing stops it.
pub fn write<W: Write>(
    at: impl Into<crate::Place>,
    first: FirstReading,
    out: W,
) -> Result<Written<W>, RereadError> {
    let place = at.into();
    let label = place.label();
    let dir = label.as_path();
    let FirstReading {
        streamed,
        format,
        survey,
        late,
    } = first;
    let (tools, mut notes) = tools_shown(survey.shown.as_deref(), survey.any_step, &survey.schemas);
    if let Some(refusal) = &survey.last_refusal {
        notes.push(super::refusal_note(refusal));
    }
    let turns = survey.turns as usize;
    let compaction = survey.compaction.as_ref().map(|c| c.compaction());
    // Turns 1..=through_turn are left out, but never the last: `layout` counts as many.
    let dropped = compaction.as_ref().map_or(0, |c| {
        (c.through_turn as usize).min(turns.saturating_sub(1))
    });
    let mut layout = Layout::new(compaction, turns, dropped);
    let ids = {
        let layout = &layout;
        survey.ids.plan(|turn| !left_out(layout, turn))
    };
    let header = Header {
        system: survey.model.as_ref().and_then(|m| m.system.clone()),
        tools,
        settings: survey.model.map(|m| m.settings).unwrap_or_default(),
    };
    let mut body = BodyWriter::new(out, format, header, ids).map_err(RereadError::Output)?;
    let classifier = Classifier::with_mode(streamed.live, None, Mode::Write);
    crate::Recovery::of(&place).reread(
        streamed.records,
        classifier,
        &mut |c: &mut Classifier| {
            for notice in c.take_notices() {
                match notice {
                    Notice::TurnBegun { turn, user_text } => {
                        let index = (turn as usize).saturating_sub(1);
                        if let Some(user) = layout.user(index, turn, &user_text) {
                            body.message(&user).map_err(RereadError::Output)?;
                        }
                    }
                    Notice::Step(step) if !left_out(&layout, step.turn) => {
                        let turn = step.turn;
                        let Some(view) =
                            step_view(step, &late).map_err(|what| RecoverError::Changed {
                                dir: dir.to_path_buf(),
                                what,
                            })?
                        else {
                            continue;
                        };
                        for m in layout.step(turn, view) {
                            body.message(&m).map_err(RereadError::Output)?;
                        }
                    }
                    _ => {}
                }
            }
            Ok(())
        },
    )?;
    let (out, tools_missing) = body.finish().map_err(RereadError::Output)?;
    notes.extend(tools_missing.as_ref().map(tools_missing_note));
    Ok(Written { out, notes })
}

/// Whether turn `turn` is left out of the layout.
fn left_out(layout: &Layout, turn: u32) -> bool {
    layout.left_out((turn as usize).saturating_sub(1), turn)
}

/// A closed step as the layout takes it, each call with its one result: its own when it was
/// final as the step closed, else the one the first reading found; a call the journal never
/// received and no report names did not start. `None` for a step the model never answered.
fn step_view(
    step: ClosedStep,
    late: &HashMap<CallRef, (String, bool)>,
) -> Result<Option<StepView>, String> {
    let ClosedStep {
        turn,
        step,
        response,
        detail,
        mut results,
        ..
    } = step;
    let Some(response) = response else {
        return Ok(None);
    };
    // Each call's result, its first call with the id giving it (as the full analysis finds
    // the first report); a result used twice is copied.
    let mut made: Vec<ConvResult> = Vec::with_capacity(response.tool_calls.len());
    let mut given: Vec<Option<usize>> = vec![None; results.len()];
    for m in &response.tool_calls {
        let at = results.iter().position(|(id, _)| *id == m.call_id);
        let call = || CallRef {
            turn,
            step,
            call_id: m.call_id.clone(),
        };
        let (content, is_error) = match at {
            Some(at) => match (given[at], results[at].1.take()) {
                (Some(earlier), _) => (made[earlier].content.clone(), made[earlier].is_error),
                (None, Some(own)) => own,
                (None, None) => late
                    .get(&call())
                    .cloned()
                    .ok_or_else(|| format!("{}: not classified by the first reading", call()))?,
            },
            None => late
                .get(&call())
                .cloned()
                .unwrap_or_else(|| (not_started_text(), true)),
        };
        if let Some(at) = at {
            given[at].get_or_insert(made.len());
        }
        made.push(ConvResult {
            id: m.call_id.clone(),
            name: m.name.clone(),
            content,
            is_error,
        });
    }
    Ok(Some(StepView {
        step,
        text: response.text,
        calls: response
            .tool_calls
            .into_iter()
            .map(|m| ConvCall {
                id: m.call_id,
                name: m.name,
                arguments: m.arguments,
            })
            .collect(),
        state: detail
            .and_then(|d| d.provider_state)
            .map(|(format, items)| ProviderState { format, items }),
        results: made,
    }))
}
