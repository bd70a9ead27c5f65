//! Recorded provider streams (`real-streams/<provider>/*.sse`), replayed through the binary.
//!
//! The expectation comes from a reader written here from the providers' documented event
//! shapes, not from `llm`'s decoders: the text, each client-side call (id, name, argument
//! text), the stop reason, an in-stream error's status, and the provider state the next
//! request must carry back verbatim (Anthropic's blocks other than text and `tool_use`,
//! Responses' items other than messages and calls, Gemini's parts other than text and calls
//! and their signatures). Each capture is served twice from a loopback server: one write per
//! SSE event, then in 7-byte pieces.

use crate::common::models::{Case, FORMATS};
use mockllm::{Answer, Format, Reply};
use runtime::event::Event;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// What the stream says, as the independent reader reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A whole answer.
    Answer {
        text: String,
        calls: Vec<Call>,
        /// `tool_use`, `end_turn`, `length` or `refusal`.
        stop: String,
        /// Provider state that must go back verbatim (see the module doc).
        state: Vec<Value>,
    },
    /// The provider reported an error in the stream: its HTTP status, and whether another
    /// attempt is worth making (408, 409, 429, 5xx).
    Error { status: u16, retry: bool },
}

/// A client-side call.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The provider's id (Gemini gives none before Gemini 3).
    pub id: Option<String>,
    pub name: String,
    /// The argument text as the provider streamed it (for Gemini, its `args` object).
    pub arguments: String,
}

/// One SSE event: its name (`message` when none) and its data lines joined by `\n`.
fn events(bytes: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(bytes)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut name = None;
        let mut data: Vec<&str> = Vec::new();
        for line in block.lines() {
            if let Some(rest) = line.strip_prefix("data:") {
                data.push(rest.strip_prefix(' ').unwrap_or(rest));
            } else if let Some(rest) = line.strip_prefix("event:") {
                name = Some(rest.trim().to_owned());
            }
        }
        if !data.is_empty() {
            out.push((name.unwrap_or_else(|| "message".into()), data.join("\n")));
        }
    }
    out
}

fn retryable(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || status >= 500
}

/// The status an error object says it has: a numeric `status_code`, `status` or `code`, else
/// the HTTP status its `type` or `status` name stands for.
fn error_status(error: &Value) -> u16 {
    for key in ["status_code", "status", "code"] {
        if let Some(n) = error[key].as_u64().filter(|n| (100..600).contains(n)) {
            return n as u16;
        }
        if let Some(n) = error[key]
            .as_str()
            .and_then(|s| s.parse::<u16>().ok())
            .filter(|n| (100..600).contains(n))
        {
            return n;
        }
    }
    let name = [&error["type"], &error["status"], &error["code"]]
        .iter()
        .find_map(|v| v.as_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    match name.as_str() {
        "invalid_request_error" | "invalid_argument" | "failed_precondition" => 400,
        "authentication_error" | "unauthenticated" => 401,
        "permission_error" | "permission_denied" => 403,
        "not_found_error" | "not_found" => 404,
        "request_too_large" => 413,
        "rate_limit_error" | "resource_exhausted" | "rate_limit_exceeded" => 429,
        "overloaded_error" => 529,
        "unavailable" => 503,
        "deadline_exceeded" | "timeout_error" => 504,
        _ => 500,
    }
}

fn error(status: u16) -> Outcome {
    Outcome::Error {
        status,
        retry: retryable(status),
    }
}

/// OpenAI Chat Completions (and the servers that copy it).
fn openai_chat(bytes: &[u8]) -> Outcome {
    let mut text = String::new();
    let mut calls: Vec<Call> = Vec::new();
    let mut by_index: Vec<(u64, usize)> = Vec::new();
    let mut finish: Option<String> = None;
    let mut refused = false;
    for (name, data) in events(bytes) {
        if data.trim() == "[DONE]" {
            break;
        }
        let Ok(v) = serde_json::from_str::<Value>(&data) else {
            continue;
        };
        if name == "error" || v.get("error").is_some_and(|e| !e.is_null()) {
            return error(error_status(v.get("error").unwrap_or(&v)));
        }
        for choice in v["choices"].as_array().into_iter().flatten() {
            let delta = &choice["delta"];
            if let Some(t) = delta["content"].as_str() {
                text.push_str(t);
            }
            if let Some(r) = delta["refusal"].as_str() {
                text.push_str(r);
                refused = true;
            }
            for tc in delta["tool_calls"].as_array().into_iter().flatten() {
                let index = tc["index"].as_u64().unwrap_or(by_index.len() as u64);
                let at = match by_index.iter().find(|(i, _)| *i == index) {
                    Some((_, at)) => *at,
                    None => {
                        calls.push(Call {
                            id: None,
                            name: String::new(),
                            arguments: String::new(),
                        });
                        by_index.push((index, calls.len() - 1));
                        calls.len() - 1
                    }
                };
                let call = &mut calls[at];
                if let Some(id) = tc["id"].as_str().filter(|s| !s.is_empty()) {
                    call.id = Some(id.to_owned());
                }
                if let Some(n) = tc["function"]["name"].as_str() {
                    call.name.push_str(n);
                }
                if let Some(a) = tc["function"]["arguments"].as_str() {
                    call.arguments.push_str(a);
                }
            }
            if let Some(f) = choice["finish_reason"].as_str() {
                finish = Some(f.to_owned());
            }
        }
    }
    let stop = match finish.as_deref() {
        _ if refused => "refusal",
        Some("length") => "length",
        Some("content_filter") => "refusal",
        _ if !calls.is_empty() => "tool_use",
        _ => "end_turn",
    };
    Outcome::Answer {
        text,
        calls,
        stop: stop.into(),
        state: Vec::new(),
    }
}

/// OpenAI Responses: text from `output_text` deltas, calls and state from the finished items.
fn openai_responses(bytes: &[u8]) -> Outcome {
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut state = Vec::new();
    let mut stop = "end_turn".to_owned();
    for (name, data) in events(bytes) {
        let Ok(v) = serde_json::from_str::<Value>(&data) else {
            continue;
        };
        let kind = v["type"].as_str().unwrap_or(&name).to_owned();
        match kind.as_str() {
            "response.output_text.delta" => text.push_str(v["delta"].as_str().unwrap_or("")),
            "response.refusal.delta" => {
                text.push_str(v["delta"].as_str().unwrap_or(""));
                stop = "refusal".into();
            }
            "response.output_item.done" => {
                let item = &v["item"];
                match item["type"].as_str() {
                    Some("function_call") => calls.push(Call {
                        id: item["call_id"].as_str().map(str::to_owned),
                        name: item["name"].as_str().unwrap_or_default().to_owned(),
                        arguments: item["arguments"].as_str().unwrap_or_default().to_owned(),
                    }),
                    Some("message") => {
                        if item["content"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|c| c["type"] == "refusal")
                        {
                            stop = "refusal".into();
                        }
                    }
                    // With `store: false` (what the adapter asks) a reasoning item can go back
                    // only with its encrypted content: by id alone nothing was kept to find.
                    Some("reasoning") if item["encrypted_content"].as_str().is_none() => {}
                    _ => state.push(item.clone()),
                }
            }
            "response.incomplete" => {
                stop = match v["response"]["incomplete_details"]["reason"].as_str() {
                    Some("content_filter") => "refusal".into(),
                    _ => "length".into(),
                }
            }
            "response.failed" => return error(error_status(&v["response"]["error"])),
            "error" => return error(error_status(v.get("error").unwrap_or(&v))),
            _ => {}
        }
    }
    if stop == "end_turn" && !calls.is_empty() {
        stop = "tool_use".into();
    }
    Outcome::Answer {
        text,
        calls,
        stop,
        state,
    }
}

/// Anthropic Messages: every content block put together from its start and deltas.
fn anthropic(bytes: &[u8]) -> Outcome {
    let mut blocks: Vec<(u64, Value, String)> = Vec::new();
    let mut stop = None;
    for (name, data) in events(bytes) {
        let Ok(v) = serde_json::from_str::<Value>(&data) else {
            continue;
        };
        let kind = v["type"].as_str().unwrap_or(&name).to_owned();
        let index = v["index"].as_u64().unwrap_or(0);
        let block = blocks.iter_mut().find(|(i, _, _)| *i == index);
        match kind.as_str() {
            "content_block_start" => {
                blocks.push((index, v["content_block"].clone(), String::new()))
            }
            "content_block_delta" => {
                let Some((_, block, json)) = block else {
                    continue;
                };
                let d = &v["delta"];
                let append = |block: &mut Value, key: &str, piece: &str| {
                    let old = block[key].as_str().unwrap_or("").to_owned();
                    block[key] = json!(old + piece);
                };
                match d["type"].as_str() {
                    Some("text_delta") => append(block, "text", d["text"].as_str().unwrap_or("")),
                    Some("thinking_delta") => {
                        append(block, "thinking", d["thinking"].as_str().unwrap_or(""))
                    }
                    Some("signature_delta") => {
                        append(block, "signature", d["signature"].as_str().unwrap_or(""))
                    }
                    Some("input_json_delta") => {
                        json.push_str(d["partial_json"].as_str().unwrap_or(""))
                    }
                    Some("citations_delta") => {
                        if !block["citations"].is_array() {
                            block["citations"] = json!([]);
                        }
                        if let Some(c) = block["citations"].as_array_mut() {
                            c.push(d["citation"].clone());
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(s) = v["delta"]["stop_reason"].as_str() {
                    stop = Some(s.to_owned());
                }
            }
            "error" => return error(error_status(&v["error"])),
            _ => {}
        }
    }
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut state = Vec::new();
    for (_, mut block, json) in blocks {
        if !json.is_empty() {
            block["input"] = serde_json::from_str(&json).unwrap_or(Value::Null);
        }
        match block["type"].as_str() {
            Some("text") => {
                text.push_str(block["text"].as_str().unwrap_or(""));
                if block.get("citations").is_some_and(|c| !c.is_null()) {
                    state.push(block);
                }
            }
            Some("tool_use") => calls.push(Call {
                id: block["id"].as_str().map(str::to_owned),
                name: block["name"].as_str().unwrap_or_default().to_owned(),
                arguments: if json.is_empty() {
                    block["input"].to_string()
                } else {
                    json
                },
            }),
            _ => state.push(block),
        }
    }
    let stop = match stop.as_deref() {
        Some("tool_use") => "tool_use",
        Some("max_tokens") | Some("model_context_window_exceeded") => "length",
        Some("refusal") => "refusal",
        _ if !calls.is_empty() => "tool_use",
        _ => "end_turn",
    };
    Outcome::Answer {
        text,
        calls,
        stop: stop.into(),
        state,
    }
}

/// Gemini `streamGenerateContent?alt=sse`: each event a `GenerateContentResponse`.
fn gemini(bytes: &[u8]) -> Outcome {
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut state = Vec::new();
    let mut finish = None;
    for (_, data) in events(bytes) {
        let Ok(v) = serde_json::from_str::<Value>(&data) else {
            continue;
        };
        if v.get("error").is_some() {
            return error(error_status(&v["error"]));
        }
        for candidate in v["candidates"].as_array().into_iter().flatten() {
            for part in candidate["content"]["parts"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if let Some(call) = part.get("functionCall") {
                    calls.push(Call {
                        id: call["id"].as_str().map(str::to_owned),
                        name: call["name"].as_str().unwrap_or_default().to_owned(),
                        arguments: call.get("args").map(Value::to_string).unwrap_or_default(),
                    });
                } else if let Some(t) = part["text"].as_str() {
                    if part["thought"] != json!(true) {
                        text.push_str(t);
                    }
                }
                if let Some(sig) = part.get("thoughtSignature") {
                    state.push(sig.clone());
                }
                let known = ["text", "thought", "thoughtSignature", "functionCall"];
                if part
                    .as_object()
                    .is_some_and(|o| o.keys().any(|k| !known.contains(&k.as_str())))
                {
                    state.push(part.clone());
                }
            }
            if let Some(f) = candidate["finishReason"].as_str() {
                finish = Some(f.to_owned());
            }
        }
    }
    let stop = match finish.as_deref() {
        Some("MAX_TOKENS") => "length",
        Some(
            "SAFETY" | "RECITATION" | "PROHIBITED_CONTENT" | "BLOCKLIST" | "SPII" | "IMAGE_SAFETY"
            | "LANGUAGE",
        ) => "refusal",
        _ if !calls.is_empty() => "tool_use",
        _ => "end_turn",
    };
    Outcome::Answer {
        text,
        calls,
        stop: stop.into(),
        state,
    }
}

/// What the independent reader expects of a capture of `format`.
pub fn expect(format: Format, bytes: &[u8]) -> Outcome {
    match format {
        Format::OpenAiChat => openai_chat(bytes),
        Format::OpenAiResponses => openai_responses(bytes),
        Format::Anthropic => anthropic(bytes),
        Format::Gemini => gemini(bytes),
    }
}

/// How a capture is cut into writes.
#[derive(Debug, Clone, Copy)]
enum Pieces {
    /// One write per SSE event (its blank line included).
    PerEvent,
    /// Writes of this many bytes.
    Bytes(usize),
}

fn pieces(bytes: &[u8], how: Pieces) -> Vec<Vec<u8>> {
    match how {
        Pieces::Bytes(n) => bytes.chunks(n).map(<[u8]>::to_vec).collect(),
        Pieces::PerEvent => {
            let mut out = Vec::new();
            let mut start = 0;
            let mut i = 0;
            while i < bytes.len() {
                let end = if bytes[i..].starts_with(b"\n\n") {
                    Some(i + 2)
                } else if bytes[i..].starts_with(b"\r\n\r\n") {
                    Some(i + 4)
                } else {
                    None
                };
                match end {
                    Some(end) => {
                        out.push(bytes[start..end].to_vec());
                        start = end;
                        i = end;
                    }
                    None => i += 1,
                }
            }
            if start < bytes.len() {
                out.push(bytes[start..].to_vec());
            }
            out
        }
    }
}

/// What the binary journaled for the first attempt of turn 1, step 1: the response (and its
/// provider state), or the failure.
fn journaled(case: &Case, format: Format) -> Result<Outcome, String> {
    let events = case.events();
    let mut state: Vec<Value> = Vec::new();
    for e in &events {
        if let Event::LlmResponseDetail(d) = e {
            if let Some((_, items)) = &d.provider_state {
                state = provider_state_items(format, items);
            }
            break;
        }
    }
    for e in &events {
        match e {
            Event::LlmResponse {
                turn: 1,
                step: 1,
                response,
            } => {
                let stop = serde_json::to_value(response.stop_reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                return Ok(Outcome::Answer {
                    text: response.text.clone(),
                    calls: response
                        .tool_calls
                        .iter()
                        .map(|c| Call {
                            id: Some(c.call_id.clone()),
                            name: c.name.clone(),
                            arguments: c.arguments.clone(),
                        })
                        .collect(),
                    stop,
                    state,
                });
            }
            Event::LlmAttemptFailed(f) if f.turn == 1 && f.step == 1 && f.attempt == 1 => {
                return Ok(Outcome::Error {
                    status: f.status.unwrap_or(0),
                    retry: f.retry,
                });
            }
            _ => {}
        }
    }
    Err(format!(
        "no llm/response or llm/attempt-failed: {:?}",
        crate::common::models::kinds(&events)
    ))
}

/// The journaled provider state as a list of JSON values, whatever its shape.
fn provider_state_items(_format: Format, items: &str) -> Vec<Value> {
    match serde_json::from_str::<Value>(items) {
        Ok(Value::Array(items)) => items,
        Ok(other) => vec![other],
        Err(_) => Vec::new(),
    }
}

/// Whether `found` says what `expected` says: text, stop, calls (names and argument text;
/// ids where the capture has them; arguments as JSON values where both parse), errors by
/// status and retry, and every expected state item present in the journaled state.
fn agrees(expected: &Outcome, found: &Outcome) -> Result<(), String> {
    match (expected, found) {
        (
            Outcome::Answer {
                text,
                calls,
                stop,
                state,
            },
            Outcome::Answer {
                text: t2,
                calls: c2,
                stop: s2,
                state: st2,
            },
        ) => {
            if text != t2 {
                return Err(format!("text: expected {text:?}, journaled {t2:?}"));
            }
            if stop != s2 {
                return Err(format!("stop: expected {stop}, journaled {s2}"));
            }
            if calls.len() != c2.len() {
                return Err(format!("calls: expected {calls:?}, journaled {c2:?}"));
            }
            for (a, b) in calls.iter().zip(c2) {
                let same_args = a.arguments == b.arguments
                    || matches!(
                        (
                            serde_json::from_str::<Value>(&a.arguments),
                            serde_json::from_str::<Value>(&b.arguments)
                        ),
                        (Ok(x), Ok(y)) if x == y
                    )
                    || (a.arguments.is_empty() && b.arguments == "{}");
                let same_id = a.id.is_none() || a.id == b.id;
                if a.name != b.name || !same_args || !same_id {
                    return Err(format!("call: expected {a:?}, journaled {b:?}"));
                }
            }
            let flat = serde_json::to_string(st2).unwrap_or_default();
            for item in state {
                let shown = serde_json::to_string(item).unwrap_or_default();
                if !st2.contains(item) && !flat.contains(&shown) {
                    return Err(format!("provider state: {shown} is not kept verbatim"));
                }
            }
            Ok(())
        }
        (e, f) if e == f => Ok(()),
        (e, f) => Err(format!("expected {e:?}, journaled {f:?}")),
    }
}

/// Replays `file` (a capture of `format`) cut `how`; whether the journal agrees.
fn replay(format: Format, file: &Path, how: Pieces) -> Result<(), String> {
    let bytes = std::fs::read(file).map_err(|e| e.to_string())?;
    let expected = expect(format, &bytes);
    let case = Case::new();
    case.write_config("retry_attempts = 1\nrequest_timeout_ms = 20000");
    case.server
        .push(format, Reply::recorded(pieces(&bytes, how)));
    // A retry, or the step after the calls (each refused: the tools are not ours).
    case.server.push(format, Answer::text("(replayed)").into());
    case.server.push(format, Answer::text("(replayed)").into());
    let mut args = case.run_args(format, &["replay the capture"]);
    args.extend(["--plan-mode".into(), "--approve".into(), "deny".into()]);
    let out = case
        .command(format)
        .args(&args)
        .output()
        .map_err(|e| e.to_string())?;
    let found = journaled(&case, format)
        .map_err(|e| format!("{e}\n{}", crate::common::models::shown(&out)))?;
    agrees(&expected, &found)?;
    if let Outcome::Answer { state, stop, .. } = &expected {
        if stop == "refusal" {
            refused(&case)?;
        }
        if !state.is_empty() {
            sent_back(&case, format, state)?;
        }
    }
    Ok(())
}

/// A refusal is journaled as one: `llm/refusal` after the response.
fn refused(case: &Case) -> Result<(), String> {
    let events = case.events();
    let refusal = events.iter().find_map(|e| match e {
        Event::LlmRefusal(r) => Some(r.clone()),
        _ => None,
    });
    match refusal {
        Some(r) if !r.reason.is_empty() => Ok(()),
        other => Err(format!(
            "no llm/refusal with the provider's reason: {other:?}"
        )),
    }
}

/// `recover rebuild` for the capture's own format sends every state item back as it came (an
/// item of Responses other than reasoning without its `id`, which `store: false` cannot look
/// up).
fn sent_back(case: &Case, format: Format, state: &[Value]) -> Result<(), String> {
    let out = std::process::Command::new(crate::common::recover_bin::recover_bin())
        .args(["rebuild", "--format", format.as_str()])
        .arg(case.journal())
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "recover rebuild --format {format}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let body: Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    for item in state {
        let mut wanted = item.clone();
        if format == Format::OpenAiResponses && wanted["type"] != "reasoning" {
            if let Some(fields) = wanted.as_object_mut() {
                fields.remove("id");
            }
        }
        if !holds(&body, &wanted) {
            return Err(format!(
                "recover rebuild --format {format} does not send back {}",
                clipped(&wanted.to_string())
            ));
        }
    }
    Ok(())
}

/// Whether `needle` is `haystack` or a value anywhere inside it.
fn holds(haystack: &Value, needle: &Value) -> bool {
    haystack == needle
        || match haystack {
            Value::Array(items) => items.iter().any(|v| holds(v, needle)),
            Value::Object(fields) => fields.values().any(|v| holds(v, needle)),
            _ => false,
        }
}

fn format_of(dir: &str) -> Option<Format> {
    FORMATS.into_iter().find(|f| f.as_str() == dir)
}

/// `text` cut to a readable length for a failure's line.
fn clipped(text: &str) -> String {
    const CHARS_MAX: usize = 600;
    match text.char_indices().nth(CHARS_MAX) {
        Some((at, _)) => format!("{}… ({} bytes)", &text[..at], text.len()),
        None => text.to_owned(),
    }
}

/// Replays every capture under `root` both ways; fails naming each that disagrees.
pub fn run_all(root: &Path) {
    let files: Vec<PathBuf> = crate::files(root, ".sse");
    assert!(
        !files.is_empty(),
        "no .sse capture under {}",
        root.display()
    );
    let jobs: Vec<(Format, PathBuf)> = files
        .into_iter()
        .map(|f| {
            let dir = f
                .parent()
                .and_then(Path::file_name)
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            let format = format_of(&dir)
                .unwrap_or_else(|| panic!("{}: not under a provider's directory", f.display()));
            (format, f)
        })
        .collect();
    let total = jobs.len();
    let name = |(_, file): &(Format, PathBuf)| {
        let name = file.strip_prefix(root).unwrap_or(file);
        name.display().to_string()
    };
    let failures = crate::on_two_threads(&jobs, name, |(format, file)| {
        for how in [Pieces::PerEvent, Pieces::Bytes(7)] {
            replay(*format, file, how).map_err(|why| format!("({how:?}): {}", clipped(&why)))?;
        }
        Ok(())
    });
    println!(
        "streams read exactly: {} of {total}",
        total - failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {total} captures disagree with the independent reading:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
