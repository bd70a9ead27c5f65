//! The transcript behind the model seam: each request answered by the transcript's next
//! assistant line, streamed as a provider's adapter would stream it, so the agent loop
//! (`crate::agent`) can be driven, journaled and tested without a network.

use super::{ModelStep, ScriptedModel};

/// The transcript as a model: each request is answered by the next assistant line, streamed as
/// its text, then each call begun, given its arguments whole and ended, then the stop reason.
/// A request where the transcript has no assistant line (a user line, or the end) fails.
impl crate::model::Model for ScriptedModel {
    fn provider(&self) -> &str {
        "scripted"
    }

    fn model(&self) -> &str {
        "transcript"
    }

    fn body(
        &mut self,
        request: &crate::model::ModelRequest,
    ) -> Result<Vec<u8>, crate::model::ModelError> {
        // What a provider would be sent, in one provider's shape: the hash in `llm/request`
        // then names the conversation the transcript answered.
        let body = history::providers::request_body(
            &request.conversation,
            &request.tools,
            &request.settings,
            history::providers::Format::OpenAiChat,
        );
        Ok(body.to_json().into_bytes())
    }

    fn send(
        &mut self,
        _body: Vec<u8>,
    ) -> futures_util::future::BoxFuture<
        '_,
        Result<crate::model::ModelStream<'_>, crate::model::ModelError>,
    > {
        use crate::model::{ModelError, ModelErrorKind, ModelEvent};
        let answer = match self.line_at_position().map(|l| &l.step) {
            Some(ModelStep::Respond(respond)) => Ok(respond.response.clone()),
            Some(ModelStep::User { .. }) | None => Err(ModelError {
                kind: ModelErrorKind::Config,
                status: None,
                retry_after_ms: None,
                message: format!(
                    "the transcript has no assistant line at line {}",
                    self.position() + 1
                ),
            }),
        };
        if answer.is_ok() {
            self.advance();
        }
        Box::pin(async move {
            let response = answer?;
            let mut events = vec![ModelEvent::TextDelta(response.text)];
            for (index, call) in response.tool_calls.into_iter().enumerate() {
                let index = index as u32;
                events.push(ModelEvent::CallBegin {
                    index,
                    id: call.call_id,
                    name: call.name,
                });
                events.push(ModelEvent::CallArgumentsDelta {
                    index,
                    delta: call.arguments,
                });
                events.push(ModelEvent::CallEnd { index });
            }
            events.push(ModelEvent::Stop(response.stop_reason));
            let stream: crate::model::ModelStream<'_> =
                Box::pin(futures_util::stream::iter(events.into_iter().map(Ok)));
            Ok(stream)
        })
    }
}
