//! Running your own agent on tooljournal: a tool of your own, a model of your own, a session
//! built with `Session::builder`, a crash in the middle of a call, and what recovery then says.
//!
//! ```text
//! cargo run --example embed
//! ```
//!
//! The tool appends a line to `notes.txt`. The second time it is called it writes its line and
//! then hangs, and the example drops the whole runtime while it hangs: a crash after the tool
//! had started. Recovery reads the journal and classifies that call `TOOL_OUTCOME_UNKNOWN`
//! ("may have run"). It never says the call did not run, because its `started` record was on
//! disk before the body ran, and the file shows that the line was in fact written.
//!
//! `cargo test` runs this example too (see the test at the bottom).

use futures_util::future::BoxFuture;
use recover::providers::{history, Format};
use runtime::event::{Classification, Resources, StopReason};
use runtime::model::{Model, ModelError, ModelEvent, ModelRequest, ModelStream};
use runtime::Args;
use runtime::{Agent, AgentConfig, AgentEvent, AgentObserver};
use runtime::{ErrorCode, Session};
use runtime::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The note text that makes the tool hang after writing (standing in for a process that dies
/// mid-call).
const HANG: &str = "hang after writing";

/// A tool of the embedding: appends its `text` argument as a line of `notes.txt`.
struct AppendNote {
    notes: PathBuf,
}

impl Tool for AppendNote {
    fn name(&self) -> &str {
        "append_note"
    }
    fn description(&self) -> &str {
        "Appends one line to notes.txt."
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": false
        })
    }
    /// What recovery names if the outcome of a call is ever unknown.
    fn resources(&self, _args: &Args) -> Resources {
        Resources {
            writes: vec!["notes.txt".into()],
            ..Resources::default()
        }
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            // The schema was checked before the call started: `text` is a string.
            let text = args.str("text").unwrap_or_default().to_owned();
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.notes)
                .map_err(|e| ToolError::new(ErrorCode::ToolFailed, format!("notes.txt: {e}")))?;
            writeln!(file, "{text}")
                .map_err(|e| ToolError::new(ErrorCode::ToolFailed, format!("notes.txt: {e}")))?;
            if text == HANG {
                ctx.cancel().cancelled().await;
                return Err(ToolError::new(ErrorCode::Aborted, "stopped"));
            }
            Ok(ToolOutput::text(format!("noted: {text}")))
        })
    }
}

/// A model of the embedding: fixed answers, streamed as a provider's adapter would stream
/// them (a real one sends `body` to a provider; `tooljournal-llm` has adapters for OpenAI,
/// Anthropic and Gemini).
struct Canned(VecDeque<Vec<ModelEvent>>);

/// An answer: `text`, then one `append_note` call per note, then why the model stopped.
fn answer(text: &str, calls: &[(&str, &str)], stop_reason: StopReason) -> Vec<ModelEvent> {
    let mut events = vec![ModelEvent::TextDelta(text.into())];
    for (index, (id, note)) in calls.iter().enumerate() {
        let index = index as u32;
        events.push(ModelEvent::CallBegin {
            index,
            id: (*id).into(),
            name: "append_note".into(),
        });
        events.push(ModelEvent::CallArgumentsDelta {
            index,
            delta: json!({ "text": note }).to_string(),
        });
        events.push(ModelEvent::CallEnd { index });
    }
    events.push(ModelEvent::Stop(stop_reason));
    events
}

impl Canned {
    fn new() -> Canned {
        Canned(VecDeque::from([
            answer("", &[("call_1", "build is green")], StopReason::ToolUse),
            answer("Noted.", &[], StopReason::EndTurn),
            answer("", &[("call_2", HANG)], StopReason::ToolUse),
        ]))
    }
}

impl Model for Canned {
    fn provider(&self) -> &str {
        "canned"
    }
    fn model(&self) -> &str {
        "example"
    }
    /// What would be sent: here the conversation in OpenAI's shape, so its hash in the
    /// journal names what the model was asked.
    fn body(&mut self, request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
        Ok(history(&request.conversation, Format::OpenAiChat)
            .to_json()
            .into_bytes())
    }
    fn send(&mut self, _body: Vec<u8>) -> BoxFuture<'_, Result<ModelStream<'_>, ModelError>> {
        let events = self.0.pop_front().unwrap_or_default();
        Box::pin(async move {
            let stream: ModelStream<'_> =
                Box::pin(futures_util::stream::iter(events.into_iter().map(Ok)));
            Ok(stream)
        })
    }
}

/// Prints each call's result as the batch ends.
struct PrintResults;

impl AgentObserver for PrintResults {
    fn on(&mut self, event: AgentEvent<'_>) {
        if let AgentEvent::Results(results) = event {
            for result in results {
                println!("{}: {}", result.call_id, result.content);
            }
        }
    }
}

/// The agent loop runs each turn: steps until the model stops asking for tools.
async fn play(session: &mut Session, agent: &mut Agent) -> Result<(), runtime::RuntimeError> {
    let stop = CancellationToken::new();
    for user in ["note that the build is green", "note one more thing"] {
        agent
            .run_turn(session, user, &stop, &mut PrintResults)
            .await?;
    }
    Ok(())
}

/// What the example found, for `main` to print and the test to check.
struct Found {
    notes: String,
    classifications: Vec<(String, Option<Classification>)>,
    openai_history: Value,
}

/// Runs the session in `root/workspace` with its journal in `root/journal`, crashes it in the
/// middle of its second call, then recovers the journal.
fn run(root: &Path) -> Result<Found, Box<dyn std::error::Error>> {
    let workspace = root.join("workspace");
    let journal_dir = root.join("journal");
    std::fs::create_dir_all(&workspace)?;
    let notes = workspace.join("notes.txt");

    let mut session = Session::builder(&workspace, &journal_dir)
        .without_builtins()
        .tool(Arc::new(AppendNote {
            notes: notes.clone(),
        }))
        .open()?;
    println!(
        "session {} journaled in {}",
        session.session_id(),
        journal_dir.display()
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut agent = Agent::new(Box::new(Canned::new()), AgentConfig::default());
    let finished = rt.block_on(async {
        tokio::time::timeout(Duration::from_millis(500), play(&mut session, &mut agent)).await
    });
    assert!(finished.is_err(), "the second call hangs until the crash");
    // The crash: the runtime and the session go away with call_2 in the middle of its body.
    rt.shutdown_background();
    drop(session);

    let recovered = recover::Recovery::of(&journal_dir).write(true).run()?;
    let classifications = recovered
        .analysis
        .calls
        .iter()
        .map(|c| (c.call.call_id.clone(), c.classification))
        .collect::<Vec<_>>();
    for c in &recovered.analysis.calls {
        println!(
            "{}: {:?}: {}",
            c.call.call_id, c.classification, c.result.content
        );
    }
    let openai_history = history(&recovered.analysis.conversation(), Format::OpenAiChat).value();
    println!("{}", serde_json::to_string_pretty(&openai_history)?);
    Ok(Found {
        notes: std::fs::read_to_string(&notes)?,
        classifications,
        openai_history,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = tempfile::tempdir()?;
    let found = run(root.path())?;
    for (call_id, classification) in &found.classifications {
        println!("recovered {call_id}: {classification:?}");
    }
    println!(
        "the history to send to OpenAI:\n{}",
        serde_json::to_string_pretty(&found.openai_history)?
    );
    println!("notes.txt:\n{}", found.notes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_embedded_session_crashes_mid_call_and_recovery_says_it_may_have_run() {
        let root = tempfile::tempdir().unwrap();
        let found = run(root.path()).unwrap();
        // Both calls wrote: the second one before it hung.
        assert_eq!(found.notes, format!("build is green\n{HANG}\n"));
        assert_eq!(
            found.classifications,
            vec![
                ("call_1".to_owned(), None),
                (
                    "call_2".to_owned(),
                    Some(Classification::ToolOutcomeUnknown)
                ),
            ]
        );
        // The rebuilt history answers both calls: call_1 with its real result, call_2 with the
        // truth that it may have run.
        let messages = found.openai_history["messages"].as_array().unwrap();
        let tool_messages: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
        assert_eq!(tool_messages.len(), 2, "{messages:#?}");
        assert_eq!(tool_messages[0]["content"], "noted: build is green");
        let unknown = tool_messages[1]["content"].as_str().unwrap();
        assert!(unknown.contains("TOOL_OUTCOME_UNKNOWN"), "{unknown}");
        assert!(unknown.contains("notes.txt"), "{unknown}");
    }
}
