//! Resuming a crashed session from your own program: the library does what
//! `tooljournal resume` does (recovery under the writer lock, the journaled policy, orphans,
//! the re-run choice).
//!
//! ```text
//! cargo run --example resume
//! ```
//!
//! The model asks for two notes at once. The first call writes its line and hangs; the
//! process "crashes" (the runtime is dropped) with the second call approved and queued behind
//! it. The resume classifies the first `TOOL_OUTCOME_UNKNOWN` (it may have run: it is not run
//! again) and runs the second once, with its journaled id, because it provably never started.
//! `cargo test` runs this example too (the test at the bottom).

use runtime::event::{ModelCall, ModelResponse, RerunPolicy, StopReason};
use runtime::Args;
use runtime::{ErrorCode, Session, SessionBuilder};
use runtime::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use session::{Location, Resume, ResumeError, Resumed, Settings};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Appends its `text` to `notes.txt`; the text "hang" hangs after writing, like a process that
/// dies mid-call.
struct AppendNote(PathBuf);

impl Tool for AppendNote {
    fn name(&self) -> &str {
        "append_note"
    }
    fn description(&self) -> &str {
        "Appends one line to notes.txt."
    }
    fn input_schema(&self) -> serde_json::Value {
        serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}}})
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let text = args.str("text").unwrap_or_default().to_owned();
            let failed = |e: std::io::Error| ToolError::new(ErrorCode::ToolFailed, e.to_string());
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.0)
                .map_err(failed)?;
            writeln!(file, "{text}").map_err(failed)?;
            if text == "hang" {
                ctx.cancel().cancelled().await;
            }
            Ok(ToolOutput::text(format!("noted: {text}")))
        })
    }
}

/// The session's tools: on the first run, and again on the resume, through its one hook here
/// (the library sets the policy itself).
struct MyTools(PathBuf);

impl session::Hooks for MyTools {
    fn wire(&mut self, b: SessionBuilder, _: &Settings) -> Result<SessionBuilder, ResumeError> {
        Ok(self.add(b))
    }
}

impl MyTools {
    fn add(&self, builder: SessionBuilder) -> SessionBuilder {
        builder
            .without_builtins()
            .tool(Arc::new(AppendNote(self.0.clone())))
    }
}

fn call(id: &str, text: &str) -> ModelCall {
    let arguments = serde_json::json!({ "text": text }).to_string();
    ModelCall {
        call_id: id.into(),
        name: "append_note".into(),
        arguments,
    }
}

/// Crashes a session in `root` mid-call, resumes it, and returns what `notes.txt` holds and
/// the results the re-run gave.
fn run(root: &Path) -> Result<(String, Vec<String>), Box<dyn std::error::Error>> {
    let (workspace, journal) = (root.join("workspace"), root.join("journal"));
    std::fs::create_dir_all(&workspace)?;
    let notes = workspace.join("notes.txt");
    let rt = tokio::runtime::Runtime::new()?;
    let mut hooks = MyTools(notes.clone());
    let mut crashed = hooks.add(Session::builder(&workspace, &journal)).open()?;
    crashed.begin_turn("note two things")?;
    crashed.begin_step()?;
    let calls = vec![call("call_1", "hang"), call("call_2", "the build is green")];
    let batch = crashed.run_batch(ModelResponse {
        text: String::new(),
        tool_calls: calls,
        stop_reason: StopReason::ToolUse,
    });
    let timed_out = rt.block_on(async {
        tokio::time::timeout(std::time::Duration::from_millis(300), batch).await
    });
    assert!(timed_out.is_err(), "call_1 hangs until the crash");
    rt.shutdown_background(); // the crash: call_1 in its body, call_2 queued behind it
    drop(crashed);

    // Its defaults are `tooljournal resume`'s: approved calls that never started run again.
    let resume = Resume::at(Location::Dir(journal)).rerun(Some(RerunPolicy::NotStarted));
    let Resumed::Session(mut opened) = resume.open(&mut hooks)? else {
        return Err("nothing to resume".into());
    };
    let rt = tokio::runtime::Runtime::new()?;
    let ran = rt.block_on(opened.run_again())?;
    let ran = ran
        .iter()
        .map(|(call, r)| format!("{}: {}", call.call_id, r.content))
        .collect();
    rt.block_on(opened.session.close())?;
    Ok((std::fs::read_to_string(&notes)?, ran))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = tempfile::tempdir()?;
    let (notes, ran) = run(root.path())?;
    println!("ran again: {ran:?}\nnotes.txt:\n{notes}");
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_crashed_session_resumes_running_only_the_call_that_never_started() {
        let root = tempfile::tempdir().unwrap();
        let (notes, ran) = super::run(root.path()).unwrap();
        // call_1 wrote before the crash and was not run again; call_2 ran once, after it.
        assert_eq!(notes, "hang\nthe build is green\n");
        assert_eq!(ran, vec!["call_2: noted: the build is green".to_owned()]);
        let classified = recover::Recovery::of(root.path().join("journal"))
            .run()
            .unwrap();
        let call_1 = classified
            .analysis
            .calls
            .iter()
            .find(|c| c.call.call_id == "call_1");
        let content = &call_1.unwrap().result.content;
        assert!(content.contains("TOOL_OUTCOME_UNKNOWN"), "{content}");
    }
}
