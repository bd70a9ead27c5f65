//! A streamed answer put back together: text, calls by index, usage, response id, provider
//! state and stop reason, from the [`ModelEvent`]s as they arrive.

use crate::event::{LlmResponseDetail, ModelCall, ModelResponse, StopReason};
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
            ModelEvent::Stop(reason) => self.stop = Some(reason),
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
    /// A call without an id gets one from its position, so the message can still be journaled
    /// (and the call rejected) rather than dropped.
    pub(crate) fn response(&self, stop: StopReason) -> ModelResponse {
        let stop_reason = self.stop.unwrap_or(stop);
        ModelResponse {
            text: self.text.clone(),
            tool_calls: self
                .calls
                .iter()
                .enumerate()
                .map(|(i, c)| ModelCall {
                    call_id: if c.id.is_empty() {
                        format!("call_{i}")
                    } else {
                        c.id.clone()
                    },
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
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
        assert_eq!(
            a.response(StopReason::Interrupted).stop_reason,
            StopReason::ToolUse
        );
    }
}
