//! Reductions of a history too large for the model's context window: the token estimate, the
//! deterministic fallback planned to a budget, and the request that asks the model for a
//! summary of the earlier turns.
//!
//! Both kinds of reduction end as a [`Compaction`] that [`layout`] applies; calls and results
//! are only ever left out together (a whole turn) or kept together (results cut to a preview).

use crate::conversation::{Conversation, Message, ModelSettings, ToolSpec};
use crate::layout::{layout, Compaction, TurnView};
use crate::providers::{request_body, Format};

/// The last user message of a [`summary_request`]: what the summary must hold.
pub const SUMMARY_INSTRUCTION: &str = "[The conversation above is about to be replaced by a \
summary to fit the model's context window.] Write a concise summary of it for continuing the \
work: the user's goals and constraints; the decisions made; what was done (files changed, \
commands run, and their outcomes); open questions; and what remains to be done. Reply with \
the summary as plain text only, and do not call any tool.";

/// The token estimate of sending `conversation` with `tools`: the bytes of its OpenAI Chat
/// request body ([`request_body`] with default settings) divided by 4, rounded up. A stated,
/// deterministic estimate: the provider's own count is unknown before sending.
pub fn estimate_tokens(conversation: &Conversation, tools: &[ToolSpec]) -> u64 {
    let body = request_body(
        conversation,
        tools,
        &ModelSettings::default(),
        Format::OpenAiChat,
    );
    // usize always fits u64 on the targets Rust supports (at most 64 bits).
    u64::try_from(body.to_json().len())
        .unwrap_or(u64::MAX)
        .div_ceil(4)
}

/// A deterministic reduction (no summary) that brings the layout of `turns` within
/// `budget_tokens` ([`estimate_tokens`] with `tools`), or `Err` with how many tokens the
/// smallest layout it may plan is still over the budget (the caller ends the turn).
///
/// In order, stopping as soon as the estimate is within the budget:
/// 1. nothing (a compaction replacing no turn, shortening nothing);
/// 2. the oldest turns left out, one more at a time (`through_turn` grows), never the last
///    (current) turn, so the layout always keeps a user message;
/// 3. the results of the current turn's steps cut to `preview_chars` ([`crate::layout::shorten`]),
///    oldest step first, never the newest step (the results the model is about to read); a
///    step is named only when cutting its results makes the estimate smaller.
///
/// A plan that replaces no turn and shortens nothing means the history fits as it is.
/// Calls and results go together: a turn is left out whole, a shortened step keeps every
/// call and every result.
pub fn plan_fallback(
    system: Option<&str>,
    turns: &[TurnView],
    tools: &[ToolSpec],
    budget_tokens: u64,
    preview_chars: u32,
) -> Result<Compaction, u64> {
    match plan_toward(system, turns, tools, budget_tokens, preview_chars) {
        (plan, None) => Ok(plan),
        (_, Some(over)) => Err(over),
    }
}

/// [`plan_fallback`]'s plan, or when no plan reaches the budget the smallest layout it may plan
/// (every earlier turn left out, every older step of the current turn that gains shortened)
/// with how many tokens it is still over: a refused request is reduced as far as it can be and
/// the provider decides.
pub fn plan_toward(
    system: Option<&str>,
    turns: &[TurnView],
    tools: &[ToolSpec],
    budget_tokens: u64,
    preview_chars: u32,
) -> (Compaction, Option<u64>) {
    let estimate = |plan: &Compaction| {
        estimate_tokens(
            &layout(system.map(str::to_string), turns, Some(plan)),
            tools,
        )
    };
    let mut plan = Compaction {
        through_turn: 0,
        summary: None,
        shortened: Vec::new(),
        preview_chars,
    };
    let mut tokens = estimate(&plan);
    if tokens <= budget_tokens {
        return (plan, None);
    }
    let Some((current, earlier)) = turns.split_last() else {
        return (plan, Some(tokens - budget_tokens));
    };
    for turn in earlier {
        plan.through_turn = plan.through_turn.max(turn.turn);
        tokens = estimate(&plan);
        if tokens <= budget_tokens {
            return (plan, None);
        }
    }
    let older_steps = current
        .steps
        .split_last()
        .map_or(&[][..], |(_, older)| older);
    for step in older_steps {
        if step.results.is_empty() {
            continue;
        }
        plan.shortened.push((current.turn, step.step));
        let shorter = estimate(&plan);
        if shorter >= tokens {
            // Results already within the preview (or barely over it: the marker is longer
            // than what it would cut) gain nothing.
            plan.shortened.pop();
            continue;
        }
        tokens = shorter;
        if tokens <= budget_tokens {
            return (plan, None);
        }
    }
    (plan, Some(tokens - budget_tokens))
}

/// The `through_turn` a summary would replace: every turn before the last (the number of the
/// last turn but one), or `None` when there are fewer than two turns (nothing to summarize).
pub fn plan_summary_scope(turns: &[TurnView]) -> Option<u32> {
    match turns {
        [.., before_last, _last] => Some(before_last.turn),
        _ => None,
    }
}

/// The conversation to send the model for a summary of the turns numbered `<= through_turn`:
/// those turns laid out as the model last saw them ([`layout`] with the `earlier` reduction,
/// if any; calls and results as they are), then a user message with [`SUMMARY_INSTRUCTION`].
///
/// Send it with the session's tools: its calls stay, and Anthropic rejects a request whose
/// history holds tool calls or results but defines no tools (`anthropic.tools_missing`). The
/// instruction asks for text only; a call in the answer is not to be run.
pub fn summary_request(
    system: Option<String>,
    turns: &[TurnView],
    through_turn: u32,
    earlier: Option<&Compaction>,
) -> Conversation {
    let replaced: Vec<TurnView> = turns
        .iter()
        .filter(|t| t.turn <= through_turn)
        .cloned()
        .collect();
    // As the model last saw them: an earlier reduction's summary and shortened results stay
    // reduced, so a second summary's request is not the long one that overflowed.
    let mut conversation = layout(system, &replaced, earlier);
    conversation.messages.push(Message::User {
        text: SUMMARY_INSTRUCTION.to_string(),
    });
    conversation
}
