//! A provider's response, as its SDK returns it, read into the batch a step runs: the text, the
//! calls in the model's order, and why the model stopped. The four formats are told apart by
//! their own fields (`choices`, `output`, `content`, `candidates`).

use crate::error::EmbedError;
use runtime::event::StopReason;
use serde_json::Value;

/// One call the model asked for. `id` is `None` only where the format lets a model leave it
/// out (Gemini): the journal then names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The model's id for it.
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text, byte for byte as the model sent them where the format
    /// carries text (OpenAI), or serialized from the object it carries.
    pub arguments: String,
}

/// What one model answer asks of a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The assistant's text.
    pub text: String,
    /// The calls, in model order.
    pub calls: Vec<Call>,
    /// Why it stopped; `None` when the response does not say (then: calls mean tool use).
    pub stop: Option<StopReason>,
}

/// Reads `response`, a response body in any of the four formats.
pub fn read(response: &Value) -> Result<Answer, EmbedError> {
    let object = response
        .as_object()
        .ok_or_else(|| bad("", "a response is a JSON object"))?;
    if object.contains_key("choices") {
        openai_chat(response)
    } else if object.contains_key("candidates") {
        gemini(response)
    } else if object.contains_key("output") {
        openai_responses(response)
    } else if object.contains_key("content") {
        anthropic(response)
    } else {
        Err(bad(
            "",
            "not a response of openai-chat (`choices`), openai-responses (`output`), \
             anthropic (`content`) or gemini (`candidates`)",
        ))
    }
}

fn bad(field: &str, what: &str) -> EmbedError {
    if field.is_empty() {
        EmbedError::usage(format!("response: {what}"))
    } else {
        EmbedError::usage(format!("response: {field}: {what}"))
    }
}

/// The string at `field` of `v`, which must be there.
fn string(v: &Value, key: &str, at: &str) -> Result<String, EmbedError> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| bad(&format!("{at}.{key}"), "missing, or not a string"))
}

/// Arguments as text: OpenAI's are text already; an object is serialized.
fn arguments(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) | None => "{}".to_owned(),
        Some(other) => other.to_string(),
    }
}

fn array<'a>(v: &'a Value, key: &str, at: &str) -> Result<&'a [Value], EmbedError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(bad(&format!("{at}.{key}"), "not an array")),
    }
}

fn openai_chat(response: &Value) -> Result<Answer, EmbedError> {
    let choice = array(response, "choices", "")?
        .first()
        .ok_or_else(|| bad("choices", "empty: the response has no message"))?;
    let message = choice
        .get("message")
        .ok_or_else(|| bad("choices[0].message", "missing"))?;
    let text = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut calls = Vec::new();
    for (i, call) in array(message, "tool_calls", "choices[0].message")?
        .iter()
        .enumerate()
    {
        let at = format!("choices[0].message.tool_calls[{i}]");
        let function = call
            .get("function")
            .ok_or_else(|| bad(&format!("{at}.function"), "missing"))?;
        calls.push(Call {
            id: Some(string(call, "id", &at)?),
            name: string(function, "name", &format!("{at}.function"))?,
            arguments: arguments(function.get("arguments")),
        });
    }
    let stop = match choice.get("finish_reason").and_then(Value::as_str) {
        Some("tool_calls") | Some("function_call") => Some(StopReason::ToolUse),
        Some("stop") => Some(StopReason::EndTurn),
        Some("length") => Some(StopReason::Length),
        Some("content_filter") => Some(StopReason::Refusal),
        _ => None,
    };
    Ok(Answer { text, calls, stop })
}

fn openai_responses(response: &Value) -> Result<Answer, EmbedError> {
    let (mut text, mut calls) = (String::new(), Vec::new());
    for (i, item) in array(response, "output", "")?.iter().enumerate() {
        let at = format!("output[{i}]");
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in array(item, "content", &at)? {
                    if part.get("type").and_then(Value::as_str) == Some("output_text") {
                        text.push_str(part.get("text").and_then(Value::as_str).unwrap_or(""));
                    }
                }
            }
            Some("function_call") => calls.push(Call {
                id: Some(string(item, "call_id", &at)?),
                name: string(item, "name", &at)?,
                arguments: arguments(item.get("arguments")),
            }),
            // Reasoning, web searches and the like are the provider's own: not calls of ours.
            _ => {}
        }
    }
    let incomplete = response.get("status").and_then(Value::as_str) == Some("incomplete");
    let stop = if incomplete {
        Some(StopReason::Length)
    } else {
        None
    };
    Ok(Answer { text, calls, stop })
}

fn anthropic(response: &Value) -> Result<Answer, EmbedError> {
    let (mut text, mut calls) = (String::new(), Vec::new());
    for (i, block) in array(response, "content", "")?.iter().enumerate() {
        let at = format!("content[{i}]");
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => calls.push(Call {
                id: Some(string(block, "id", &at)?),
                name: string(block, "name", &at)?,
                arguments: arguments(block.get("input")),
            }),
            _ => {}
        }
    }
    let stop = match response.get("stop_reason").and_then(Value::as_str) {
        Some("tool_use") => Some(StopReason::ToolUse),
        Some("end_turn") | Some("stop_sequence") => Some(StopReason::EndTurn),
        Some("max_tokens") => Some(StopReason::Length),
        Some("refusal") => Some(StopReason::Refusal),
        _ => None,
    };
    Ok(Answer { text, calls, stop })
}

fn gemini(response: &Value) -> Result<Answer, EmbedError> {
    let candidate = array(response, "candidates", "")?
        .first()
        .ok_or_else(|| bad("candidates", "empty: the response has no candidate"))?;
    let (mut text, mut calls) = (String::new(), Vec::new());
    let parts = match candidate.get("content") {
        Some(content) => array(content, "parts", "candidates[0].content")?,
        None => &[],
    };
    for (i, part) in parts.iter().enumerate() {
        let at = format!("candidates[0].content.parts[{i}]");
        // A thought is the model's reasoning, not its answer.
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        if let Some(t) = part.get("text").and_then(Value::as_str) {
            text.push_str(t);
        }
        let call = part
            .get("functionCall")
            .or_else(|| part.get("function_call"));
        if let Some(call) = call {
            let at = format!("{at}.functionCall");
            calls.push(Call {
                id: call
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|id| !id.is_empty())
                    .map(str::to_owned),
                name: string(call, "name", &at)?,
                arguments: arguments(call.get("args")),
            });
        }
    }
    let finish = candidate
        .get("finishReason")
        .or_else(|| candidate.get("finish_reason"))
        .and_then(Value::as_str);
    let stop = match finish {
        Some("MAX_TOKENS") => Some(StopReason::Length),
        Some("SAFETY") | Some("RECITATION") | Some("PROHIBITED_CONTENT") | Some("BLOCKLIST") => {
            Some(StopReason::Refusal)
        }
        _ => None,
    };
    Ok(Answer { text, calls, stop })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: Option<&str>, name: &str, arguments: &str) -> Call {
        Call {
            id: id.map(str::to_owned),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }
    }

    #[test]
    fn an_openai_chat_completion_gives_its_text_calls_and_finish_reason() {
        let response = json!({
            "id": "chatcmpl-1", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Noting it.",
                "tool_calls": [
                    {"id": "call_a", "type": "function",
                     "function": {"name": "append_note", "arguments": "{\"text\": \"hi\"}"}},
                    {"id": "call_b", "type": "function",
                     "function": {"name": "list_notes", "arguments": "{}"}}]}}]});
        let answer = read(&response).unwrap();
        assert_eq!(answer.text, "Noting it.");
        assert_eq!(answer.stop, Some(StopReason::ToolUse));
        assert_eq!(
            answer.calls,
            vec![
                call(Some("call_a"), "append_note", "{\"text\": \"hi\"}"),
                call(Some("call_b"), "list_notes", "{}")
            ]
        );
    }

    #[test]
    fn an_openai_response_gives_its_output_text_and_function_calls_in_order() {
        let response = json!({"id": "resp_1", "object": "response", "status": "completed",
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "message", "role": "assistant", "content": [
                    {"type": "output_text", "text": "Sure.", "annotations": []}]},
                {"type": "function_call", "id": "fc_1", "call_id": "call_1",
                 "name": "append_note", "arguments": "{\"text\":\"x\"}"}]});
        let answer = read(&response).unwrap();
        assert_eq!(answer.text, "Sure.");
        assert_eq!(answer.stop, None);
        assert_eq!(
            answer.calls,
            vec![call(Some("call_1"), "append_note", "{\"text\":\"x\"}")]
        );
    }

    #[test]
    fn an_anthropic_message_gives_text_and_tool_use_inputs_as_json_text() {
        let response = json!({"id": "msg_1", "type": "message", "role": "assistant",
            "stop_reason": "tool_use", "content": [
                {"type": "text", "text": "One moment."},
                {"type": "tool_use", "id": "toolu_1", "name": "append_note",
                 "input": {"text": "hi"}}]});
        let answer = read(&response).unwrap();
        assert_eq!(answer.text, "One moment.");
        assert_eq!(answer.stop, Some(StopReason::ToolUse));
        assert_eq!(
            answer.calls,
            vec![call(Some("toolu_1"), "append_note", "{\"text\":\"hi\"}")]
        );
    }

    #[test]
    fn a_gemini_response_gives_function_calls_with_or_without_ids_and_skips_thoughts() {
        let response = json!({"candidates": [{"finishReason": "STOP", "content": {
            "role": "model", "parts": [
                {"text": "thinking...", "thought": true},
                {"text": "Here."},
                {"functionCall": {"name": "append_note", "args": {"text": "hi"}}},
                {"functionCall": {"id": "g-2", "name": "list_notes"}}]}}]});
        let answer = read(&response).unwrap();
        assert_eq!(answer.text, "Here.");
        assert_eq!(
            answer.calls,
            vec![
                call(None, "append_note", "{\"text\":\"hi\"}"),
                call(Some("g-2"), "list_notes", "{}")
            ]
        );
    }

    #[test]
    fn a_response_of_no_known_format_or_with_a_broken_call_is_refused_naming_the_field() {
        let e = read(&json!({"hello": 1})).unwrap_err();
        assert!(e.message.contains("not a response of"), "{e}");
        let e = read(&json!({"choices": [{"message": {"tool_calls": [
            {"id": "c", "function": {"arguments": "{}"}}]}}]}))
        .unwrap_err();
        assert!(
            e.message
                .contains("choices[0].message.tool_calls[0].function.name"),
            "{e}"
        );
        let e = read(&json!([1])).unwrap_err();
        assert!(e.message.contains("JSON object"), "{e}");
    }
}
