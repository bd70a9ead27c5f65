//! A streamed answer put back together: text, calls by index, usage, response id, provider
//! state and stop reason, from the [`ModelEvent`]s as they arrive.

use crate::event::{LlmNote, LlmRefusal, LlmResponseDetail, ModelCall, ModelResponse, StopReason};
use crate::model::{ModelEvent, Usage};

/// One call as its events built it.
#[derive(Debug, Clone, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// What a stream has said so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct Assembly {
    text: String,
    calls: Vec<PartialCall>,
    usage: Usage,
    response_id: Option<String>,
    provider_state: Option<String>,
    /// The provider's refusal: its word and what it said.
    refusal: Option<(String, String)>,
    notes: Vec<String>,
    stop: Option<StopReason>,
}

impl Assembly {
    /// Folds one event in. A delta for a call never begun begins it with no id or name (the
    /// runtime rejects such a call), so nothing the model sent is lost.
    pub(crate) fn apply(&mut self, event: ModelEvent) {
        match event {
            ModelEvent::TextDelta(delta) => self.text.push_str(&delta),
            ModelEvent::CallBegin { index, id, name } => {
                let call = self.call(index);
                call.id = id;
                call.name = name;
            }
            ModelEvent::CallArgumentsDelta { index, delta } => {
                self.call(index).arguments.push_str(&delta)
            }
            // A call's end changes nothing kept: the answer as a whole decides whether its
            // calls may run (a stop reason arrived), not each call's own end.
            ModelEvent::CallEnd { index } => {
                self.call(index);
            }
            ModelEvent::Usage(usage) => self.usage = usage,
            ModelEvent::ResponseId(id) => self.response_id = Some(id),
            ModelEvent::ProviderState(state) => self.provider_state = Some(state),
            ModelEvent::Refusal {
                reason,
                explanation,
            } => self.refusal = Some((reason, explanation)),
            ModelEvent::Note(note) => self.notes.push(note),
            ModelEvent::Stop(reason) => self.stop = Some(reason),
            ModelEvent::KeepAlive => {}
        }
    }

    fn call(&mut self, index: u32) -> &mut PartialCall {
        let index = index as usize;
        if self.calls.len() <= index {
            self.calls.resize_with(index + 1, PartialCall::default);
        }
        &mut self.calls[index]
    }

    /// The text received so far.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// The message as the step's `llm/response`: `stop` unless the stream said why it stopped.
    /// Call ids are made unique in the message (the session refuses a message that repeats
    /// one, and a provider, or an adapter making ids up, may): a call with no id, or one an
    /// earlier call took, gets `call_{position}` (then `_2`, `_3`… if that is taken too), so
    /// the message is journaled and each call answered rather than the step failing.
    pub(crate) fn response(&self, stop: StopReason) -> ModelResponse {
        let stop_reason = self.stop.unwrap_or(stop);
        let mut taken: std::collections::HashSet<String> = std::collections::HashSet::new();
        let tool_calls = self
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut id = c.id.clone();
                if id.is_empty() || taken.contains(&id) {
                    id = format!("call_{i}");
                    let mut n = 2;
                    while taken.contains(&id) || self.calls.iter().any(|o| o.id == id) {
                        id = format!("call_{i}_{n}");
                        n += 1;
                    }
                }
                taken.insert(id.clone());
                ModelCall {
                    call_id: id,
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                }
            })
            .collect();
        ModelResponse {
            text: self.text.clone(),
            tool_calls,
            stop_reason,
        }
    }

    /// The `llm/response-detail` of this answer.
    pub(crate) fn detail(
        &self,
        turn: u32,
        step: u32,
        attempt: u32,
        provider: &str,
    ) -> LlmResponseDetail {
        LlmResponseDetail {
            turn,
            step,
            attempt,
            response_id: self.response_id.clone(),
            usage: self.usage,
            provider_state: self
                .provider_state
                .clone()
                .map(|state| (provider.to_owned(), state)),
        }
    }

    /// The `llm/refusal` of this answer, when its stop reason is a refusal: the provider's own
    /// word, or `refusal` where an adapter stopped with the reason and gave none.
    pub(crate) fn refusal(&self, turn: u32, step: u32, attempt: u32) -> Option<LlmRefusal> {
        if self.stop != Some(StopReason::Refusal) {
            return None;
        }
        let (reason, explanation) = self
            .refusal
            .clone()
            .unwrap_or_else(|| ("refusal".to_owned(), String::new()));
        Some(LlmRefusal {
            turn,
            step,
            attempt,
            reason,
            explanation,
        })
    }

    /// The `llm/note`s of this answer.
    pub(crate) fn notes(&self, turn: u32, step: u32, attempt: u32) -> Vec<LlmNote> {
        self.notes
            .iter()
            .map(|note| LlmNote {
                turn,
                step,
                attempt,
                note: note.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_deltas_join_by_index_in_model_order() {
        let mut a = Assembly::default();
        for event in [
            ModelEvent::CallBegin {
                index: 1,
                id: "b".into(),
                name: "read".into(),
            },
            ModelEvent::CallBegin {
                index: 0,
                id: "a".into(),
                name: "bash".into(),
            },
            ModelEvent::CallArgumentsDelta {
                index: 0,
                delta: "{\"command\":".into(),
            },
            ModelEvent::CallArgumentsDelta {
                index: 1,
                delta: "{}".into(),
            },
            ModelEvent::CallArgumentsDelta {
                index: 0,
                delta: "\"ls\"}".into(),
            },
            ModelEvent::TextDelta("ok".into()),
        ] {
            a.apply(event);
        }
        let r = a.response(StopReason::Interrupted);
        assert_eq!(r.stop_reason, StopReason::Interrupted);
        assert_eq!(r.text, "ok");
        assert_eq!(r.tool_calls[0].call_id, "a");
        assert_eq!(r.tool_calls[0].arguments, "{\"command\":\"ls\"}");
        assert_eq!(r.tool_calls[1].name, "read");
        a.apply(ModelEvent::Stop(StopReason::ToolUse));
        // A repeated or missing id is made unique, never two calls answered as one.
        a.apply(ModelEvent::CallBegin {
            index: 2,
            id: "a".into(),
            name: "read".into(),
        });
        a.apply(ModelEvent::CallBegin {
            index: 3,
            id: String::new(),
            name: "read".into(),
        });
        let ids: Vec<String> = a
            .response(StopReason::Interrupted)
            .tool_calls
            .into_iter()
            .map(|c| c.call_id)
            .collect();
        assert_eq!(ids, ["a", "b", "call_2", "call_3"]);
        assert_eq!(
            a.response(StopReason::Interrupted).stop_reason,
            StopReason::ToolUse
        );
    }
}
