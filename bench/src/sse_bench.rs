//! `sse`: the model adapters' stream decoding in MB/s, on a recorded stream of about
//! 10 MB (2 MB quick) per provider format, against a target of 100 MB/s.
//!
//! The streams are recorded, not made up here: `mockllm`'s loopback server, which writes each
//! provider's documented wire format, answers a real request (the body the adapter itself
//! would send) with a few tool calls whose arguments are large (a `write` of a long file, as
//! agents send them) after some text, and the raw response body is read over loopback with
//! reqwest and kept in memory. The server streams text and arguments in 7-byte deltas (Gemini
//! sends each call whole, one `data:` line each, as Google does), so most of a stream is the
//! envelope of many small events, which is what decoding spends its time on.
//!
//! Each timed run hands the recording to `tooljournal_llm::decode` (`llm` here) in 16 KiB
//! chunks, as a network delivers a body, and consumes every event. Before the runs, one decode
//! is checked to give back exactly the recorded text and calls, argument bytes included, so the
//! figure is that of a correct decode. The target is held to the median run.

use crate::bar::Bar;
use crate::{say, BoxError, Common, MB};
use bytes::Bytes;
use futures_util::{stream, StreamExt};
use llm::Format;
use mockllm::{Answer, MockServer};
use runtime::event::StopReason;
use runtime::model::{Conversation, Message, ModelEvent, ModelRequest, ModelSettings, ToolSpec};
use serde::Serialize;
use serde_json::json;
use std::convert::Infallible;
use std::time::{Duration, Instant};

/// The decode rate every format is held to.
const DECODE_MB_PER_S_TARGET: f64 = 100.0;
/// The size the recording is handed over in: about what a socket read gives.
const CHUNK_BYTES: usize = 16 * 1024;
/// The calls' arguments are sized from a probe recording with this much file content.
const PROBE_CONTENT_BYTES: usize = 64 * 1024;
const MODEL: &str = "bench-model";

const FORMATS: [Format; 4] = [
    Format::OpenAiChat,
    Format::OpenAiResponses,
    Format::Anthropic,
    Format::Gemini,
];

struct Plan {
    mode: &'static str,
    /// The size each recorded stream is made to have (within a few per cent).
    stream_bytes: usize,
    runs_min: usize,
    runs_max: usize,
    /// Runs stop once they have taken this long (and `runs_min` are done).
    budget: Duration,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                mode: "quick",
                stream_bytes: 2_000_000,
                runs_min: 3,
                runs_max: 7,
                budget: Duration::from_secs(2),
            }
        } else {
            Plan {
                mode: "full",
                stream_bytes: 10_000_000,
                runs_min: 3,
                runs_max: 15,
                budget: Duration::from_secs(6),
            }
        }
    }
}

/// One format's figures, as `--json` prints them.
#[derive(Serialize)]
struct FormatRun {
    format: &'static str,
    stream_bytes: usize,
    /// Model events one decode gives (text and argument deltas, begins, ends, usage, stop...).
    events: u64,
    argument_delta_events: u64,
    text_bytes: usize,
    argument_bytes: usize,
    runs: usize,
    best_mb_per_s: f64,
    median_mb_per_s: f64,
    /// Median over the target.
    vs_target: f64,
}

#[derive(Serialize)]
struct Target {
    name: String,
    value: f64,
    target: f64,
    met: bool,
}

#[derive(Serialize)]
struct Report {
    mode: &'static str,
    chunk_bytes: usize,
    formats: Vec<FormatRun>,
    targets: Vec<Target>,
}

pub(crate) fn run(common: &Common) -> Result<(), BoxError> {
    let plan = Plan::new(common.quick);
    let report = measure(&plan)?;
    if common.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report, &plan);
    }
    Ok(())
}

/// `chart`: the figures that have a target (each format's median MB/s, a floor).
pub(crate) fn bars(common: &Common) -> Result<Vec<Bar>, BoxError> {
    let report = measure(&Plan::new(common.quick))?;
    Ok(report
        .targets
        .iter()
        .map(|t| Bar::at_least("sse", &t.name, t.value, t.target))
        .collect())
}

fn measure(plan: &Plan) -> Result<Report, BoxError> {
    // Decoding needs no runtime of its own; this one drives the recording's client and the
    // decode futures.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let server = MockServer::start();
    let mut formats = Vec::new();
    for format in FORMATS {
        say(&format!(
            "{format}: recording a stream of about {:.0} MB from mockllm",
            plan.stream_bytes as f64 / MB
        ));
        let (answer, recorded) = record_sized(&rt, &server, format, plan.stream_bytes)?;
        let chunks = chunked(recorded);
        let stream_bytes: usize = chunks.iter().map(Bytes::len).sum();
        let counts = verify(&rt, format, &chunks, &answer)?;
        say(&format!(
            "{format}: {:.2} MB, {} events, decoded correctly; timing",
            stream_bytes as f64 / MB,
            counts.events
        ));
        let rates = time_runs(&rt, format, &chunks, plan)?;
        let best = rates.iter().copied().fold(0.0, f64::max);
        let median = median(&rates);
        formats.push(FormatRun {
            format: format.as_str(),
            stream_bytes,
            events: counts.events,
            argument_delta_events: counts.argument_deltas,
            text_bytes: answer.text.len(),
            argument_bytes: answer.calls.iter().map(|(_, _, a)| a.len()).sum(),
            runs: rates.len(),
            best_mb_per_s: best,
            median_mb_per_s: median,
            vs_target: median / DECODE_MB_PER_S_TARGET,
        });
    }
    let targets = formats
        .iter()
        .map(|f| Target {
            name: format!("{}_decode_mb_per_s", f.format.replace('-', "_")),
            value: f.median_mb_per_s,
            target: DECODE_MB_PER_S_TARGET,
            met: f.median_mb_per_s >= DECODE_MB_PER_S_TARGET,
        })
        .collect();
    Ok(Report {
        mode: plan.mode,
        chunk_bytes: CHUNK_BYTES,
        formats,
        targets,
    })
}

/// A recording of `format` of about `stream_bytes`. A stream's size is a fixed part (the text,
/// the events around the calls) plus a part in proportion to the file contents; two probes
/// (no content, then [`PROBE_CONTENT_BYTES`]) give both, and the content is sized from them.
fn record_sized(
    rt: &tokio::runtime::Runtime,
    server: &MockServer,
    format: Format,
    stream_bytes: usize,
) -> Result<(Answer, Vec<u8>), BoxError> {
    let fixed = rt.block_on(record(server, format, &answer(0)))?.len() as f64;
    let probe = rt
        .block_on(record(server, format, &answer(PROBE_CONTENT_BYTES)))?
        .len() as f64;
    let per_content_byte = (probe - fixed) / PROBE_CONTENT_BYTES as f64;
    let content = ((stream_bytes as f64 - fixed) / per_content_byte).max(0.0);
    let answer = answer(content.round() as usize);
    let recorded = rt.block_on(record(server, format, &answer))?;
    Ok((answer, recorded))
}

/// What the model answers: a sentence of text, then three `write` calls sharing
/// `content_bytes` of file content (half, three tenths, a fifth) around a small `bash` call.
fn answer(content_bytes: usize) -> Answer {
    let write = |path: &str, share: f64| {
        let content = file_content((content_bytes as f64 * share) as usize);
        json!({"path": path, "content": content}).to_string()
    };
    Answer::calls(vec![])
        .with_text(
            "I'll add the parser with its tests, run them, and then document the new module \
             in the README.",
        )
        .with_call("call_w1", "write", &write("src/parser.rs", 0.5))
        .with_call("call_w2", "write", &write("tests/parser.rs", 0.3))
        .with_call(
            "call_b1",
            "bash",
            &json!({"command": "cargo test -p parser -- --nocapture"}).to_string(),
        )
        .with_call("call_w3", "write", &write("README.md", 0.2))
        .with_usage(2_400, 180_000, 1_024)
}

/// About `bytes` of source text, as a model writes a file: indentation, quotes, backslashes,
/// tabs and some non-ASCII, so that the JSON holds escapes (twice over inside the deltas).
fn file_content(bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 200);
    let mut i = 0u64;
    while s.len() < bytes {
        let lines = [
            format!("/// Parses token {i} — «{}» ✓", i % 97),
            format!("pub fn parse_{i}(input: &str) -> Result<Token, Error> {{"),
            "\tlet t = input.trim_start_matches(\"\\\\\");".to_string(),
            format!("    if t.is_empty() {{ return Err(Error::at({i}, \"empty \\\"{i}\\\"\")); }}"),
            format!("    Ok(Token::new(t, {}))", i * 31 % 1_000),
            "}\n".to_string(),
        ];
        for line in lines {
            s.push_str(&line);
            s.push('\n');
        }
        i += 1;
    }
    s
}

fn request() -> ModelRequest {
    let tool = |name: &str, description: &str, properties: serde_json::Value| ToolSpec {
        name: name.into(),
        description: description.into(),
        input_schema: json!({"type": "object", "properties": properties}),
    };
    ModelRequest {
        turn: 1,
        step: 1,
        conversation: Conversation {
            system: Some("You are a careful coding agent.".into()),
            messages: vec![Message::User {
                text: "Write the parser module and its tests, then run them.".into(),
            }],
        },
        tools: vec![
            tool(
                "write",
                "Writes a file.",
                json!({"path": {"type": "string"}, "content": {"type": "string"}}),
            ),
            tool(
                "bash",
                "Runs a shell command.",
                json!({"command": {"type": "string"}}),
            ),
        ],
        settings: ModelSettings {
            max_tokens: Some(200_000),
            temperature: None,
        },
    }
}

/// The raw body `server` streams for `answer` to the request the `format` adapter sends.
async fn record(server: &MockServer, format: Format, answer: &Answer) -> Result<Vec<u8>, BoxError> {
    server.push(format, answer.clone().into());
    let base = server.base_url(format);
    let url = match format {
        Format::OpenAiChat => format!("{base}/chat/completions"),
        Format::OpenAiResponses => format!("{base}/responses"),
        Format::Anthropic => format!("{base}/v1/messages"),
        Format::Gemini => format!("{base}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"),
    };
    let key = "sk-bench";
    let body = llm::request_body(format, MODEL, &request())?;
    let request = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .body(body);
    let request = match format {
        Format::OpenAiChat | Format::OpenAiResponses => request.bearer_auth(key),
        Format::Anthropic => request
            .header("x-api-key", key)
            .header("anthropic-version", "2023-06-01"),
        Format::Gemini => request.header("x-goog-api-key", key),
    };
    let response = request.send().await?;
    let status = response.status();
    let bytes = response.bytes().await?;
    if !status.is_success() {
        return Err(format!(
            "{format}: mockllm answered {status}: {}",
            String::from_utf8_lossy(&bytes)
        )
        .into());
    }
    Ok(bytes.to_vec())
}

/// `recorded` in [`CHUNK_BYTES`] pieces (cheap slices of one buffer; a piece may end inside a
/// character or an event, as a network's do).
fn chunked(recorded: Vec<u8>) -> Vec<Bytes> {
    let all = Bytes::from(recorded);
    (0..all.len())
        .step_by(CHUNK_BYTES)
        .map(|at| all.slice(at..all.len().min(at + CHUNK_BYTES)))
        .collect()
}

fn byte_stream(
    chunks: &[Bytes],
) -> impl futures_util::Stream<Item = Result<Bytes, Infallible>> + Send + '_ {
    stream::iter(chunks.iter().cloned().map(Ok))
}

struct Counts {
    events: u64,
    argument_deltas: u64,
}

/// Decodes the recording once and checks it gives back exactly what was recorded: the text,
/// each call's id, name and argument bytes, every call ended, and the stop.
fn verify(
    rt: &tokio::runtime::Runtime,
    format: Format,
    chunks: &[Bytes],
    answer: &Answer,
) -> Result<Counts, BoxError> {
    let events: Vec<_> = rt.block_on(llm::decode(format, byte_stream(chunks)).collect());
    let wrong =
        |what: String| -> BoxError { format!("{format}: the decode is wrong: {what}").into() };
    let mut text = String::new();
    // (id, name, arguments, ended)
    let mut calls: Vec<(String, String, String, bool)> = Vec::new();
    let mut argument_deltas = 0u64;
    let mut stop = None;
    for event in &events {
        let event = event
            .as_ref()
            .map_err(|e| wrong(format!("an error event: {}", e.message)))?;
        match event {
            ModelEvent::TextDelta(t) => text.push_str(t),
            ModelEvent::CallBegin { index, id, name } => {
                if *index as usize != calls.len() {
                    return Err(wrong(format!("call {index} begins after {}", calls.len())));
                }
                calls.push((id.clone(), name.clone(), String::new(), false));
            }
            ModelEvent::CallArgumentsDelta { index, delta } => {
                argument_deltas += 1;
                let call = calls
                    .get_mut(*index as usize)
                    .ok_or_else(|| wrong(format!("arguments of call {index}, not begun")))?;
                call.2.push_str(delta);
            }
            ModelEvent::CallEnd { index } => {
                let call = calls
                    .get_mut(*index as usize)
                    .ok_or_else(|| wrong(format!("end of call {index}, not begun")))?;
                call.3 = true;
            }
            ModelEvent::Stop(reason) => stop = Some(*reason),
            ModelEvent::Refusal { .. } => return Err(wrong("a refusal".into())),
            ModelEvent::Note(note) => return Err(wrong(format!("a note: {note}"))),
            ModelEvent::Usage(_)
            | ModelEvent::ResponseId(_)
            | ModelEvent::ProviderState(_)
            | ModelEvent::KeepAlive => {}
        }
    }
    if text != answer.text {
        return Err(wrong(format!(
            "the text is {} bytes, {} were recorded",
            text.len(),
            answer.text.len()
        )));
    }
    if calls.len() != answer.calls.len() {
        return Err(wrong(format!(
            "{} calls, {} were recorded",
            calls.len(),
            answer.calls.len()
        )));
    }
    for (n, ((id, name, arguments, ended), (want_id, want_name, want_arguments))) in
        calls.iter().zip(&answer.calls).enumerate()
    {
        if id != want_id || name != want_name || !ended {
            return Err(wrong(format!(
                "call {n} is `{name}` ({id}, ended: {ended}), not `{want_name}` ({want_id})"
            )));
        }
        if arguments != want_arguments {
            let same = arguments
                .bytes()
                .zip(want_arguments.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            return Err(wrong(format!(
                "call {n}'s arguments ({} bytes) differ from the recorded {} at byte {same}",
                arguments.len(),
                want_arguments.len()
            )));
        }
    }
    if stop != Some(StopReason::ToolUse) || !matches!(events.last(), Some(Ok(ModelEvent::Stop(_))))
    {
        return Err(wrong(format!(
            "the stream ends with {:?}, not the stop",
            events.last()
        )));
    }
    Ok(Counts {
        events: events.len() as u64,
        argument_deltas,
    })
}

/// Timed decodes of the recording; MB/s of each.
fn time_runs(
    rt: &tokio::runtime::Runtime,
    format: Format,
    chunks: &[Bytes],
    plan: &Plan,
) -> Result<Vec<f64>, BoxError> {
    let bytes: usize = chunks.iter().map(Bytes::len).sum();
    let started = Instant::now();
    let mut rates = Vec::new();
    while rates.len() < plan.runs_max
        && (rates.len() < plan.runs_min || started.elapsed() < plan.budget)
    {
        let input = byte_stream(chunks);
        let t0 = Instant::now();
        let events = rt.block_on(async {
            let mut decoded = llm::decode(format, input);
            let mut events = 0u64;
            while let Some(event) = decoded.next().await {
                // Checked in `verify`; a run that fails now is as wrong.
                event.map_err(|e| format!("{format}: a timed decode failed: {}", e.message))?;
                events += 1;
            }
            Ok::<u64, BoxError>(events)
        })?;
        let seconds = t0.elapsed().as_secs_f64();
        std::hint::black_box(events);
        rates.push(bytes as f64 / MB / seconds);
    }
    Ok(rates)
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn print_table(r: &Report, plan: &Plan) {
    println!(
        "tooljournal bench: sse ({} mode)  [MB = 10^6 bytes]",
        r.mode
    );
    println!();
    println!(
        "Stream decoding (tooljournal_llm::decode of a recorded mockllm stream, {} KiB chunks; \
         {}-{} runs, up to {:.0} s, per format)",
        r.chunk_bytes / 1024,
        plan.runs_min,
        plan.runs_max,
        plan.budget.as_secs_f64()
    );
    println!(
        "  {:<17} {:>9} {:>8} {:>9} {:>8} {:>5} {:>10} {:>12}",
        "format", "stream MB", "events", "arg delta", "args MB", "runs", "best MB/s", "median MB/s"
    );
    for f in &r.formats {
        println!(
            "  {:<17} {:>9.2} {:>8} {:>9} {:>8.2} {:>5} {:>10.1} {:>12.1}",
            f.format,
            f.stream_bytes as f64 / MB,
            f.events,
            f.argument_delta_events,
            f.argument_bytes as f64 / MB,
            f.runs,
            f.best_mb_per_s,
            f.median_mb_per_s
        );
    }
    println!();
    println!("Targets (median run)");
    for (t, f) in r.targets.iter().zip(&r.formats) {
        println!(
            "  {:<34} {:>10.1}  (target >= {}; {:.2}x)  {}",
            t.name,
            t.value,
            t.target,
            f.vs_target,
            if t.met { "met" } else { "MISSED" }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replaces every `from` in `bytes` with `to` (of the same length); how many.
    fn replace_all(bytes: &mut [u8], from: &[u8], to: &[u8]) -> usize {
        let mut n = 0;
        let mut at = 0;
        while at + from.len() <= bytes.len() {
            if &bytes[at..at + from.len()] == from {
                bytes[at..at + from.len()].copy_from_slice(to);
                n += 1;
                at += from.len();
            } else {
                at += 1;
            }
        }
        n
    }

    #[test]
    fn a_recording_verifies_and_a_changed_argument_byte_does_not() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime");
        let server = MockServer::start();
        for format in FORMATS {
            let answer = answer(4_000);
            let recorded = rt
                .block_on(record(&server, format, &answer))
                .expect("mockllm answers");
            let counts = verify(&rt, format, &chunked(recorded.clone()), &answer)
                .unwrap_or_else(|e| panic!("{format}: {e}"));
            // Gemini sends each call whole; the others one delta per 7 bytes.
            let deltas_min = if format == Format::Gemini { 4 } else { 500 };
            assert!(counts.argument_deltas >= deltas_min, "{format}");

            let mut changed = recorded;
            // `Token` is in the file contents only (and stays whole in some 7-byte deltas).
            assert!(
                replace_all(&mut changed, b"Token", b"Tokem") > 0,
                "{format}"
            );
            let error = verify(&rt, format, &chunked(changed), &answer)
                .err()
                .unwrap_or_else(|| panic!("{format}: a changed argument passed"));
            assert!(error.to_string().contains("arguments"), "{format}: {error}");
        }
    }
}
