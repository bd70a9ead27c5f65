//! `Session::builder`: the wiring an embedding gets, and the safe defaults it promises, checked
//! on real directories (the builder works on segment files, as the CLI does).

use std::path::Path;
use tooljournal_runtime::event::{ModelCall, ModelResponse, StepOutcome, StopReason};
use tooljournal_runtime::{BuildError, Config, ErrorCode, RuntimeError, Session, ToolResult};

fn call(id: &str, tool: &str, args: &str) -> ModelCall {
    ModelCall {
        call_id: id.into(),
        name: tool.into(),
        arguments: args.into(),
    }
}

/// One turn of one step with `calls`; the turn is closed afterwards.
async fn one_step(session: &mut Session, calls: Vec<ModelCall>) -> Vec<ToolResult> {
    session.begin_turn("go").unwrap();
    session.begin_step().unwrap();
    let results = session
        .run_batch(ModelResponse {
            text: String::new(),
            tool_calls: calls,
            stop_reason: StopReason::ToolUse,
        })
        .await
        .unwrap();
    session.end_step(StepOutcome::Completed).unwrap();
    session
        .end_turn(tooljournal_runtime::event::TurnOutcome::Completed)
        .await
        .unwrap();
    results
}

fn dirs() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    // Inside the workspace on purpose: the builder must keep it out of the tools' reach.
    let journal = workspace.join(".journal");
    (root, workspace, journal)
}

fn segment_name(journal: &Path) -> String {
    std::fs::read_dir(journal)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| journal::segment::parse_file_name(n).is_some())
        .expect("a segment file")
}

#[tokio::test]
async fn the_journal_inside_the_workspace_is_out_of_the_file_tools_reach() {
    let (_root, workspace, journal) = dirs();
    std::fs::write(workspace.join("hello.txt"), "hi\n").unwrap();
    let mut session = Session::builder(&workspace, &journal).open().unwrap();
    let segment = segment_name(&journal);
    let results = one_step(
        &mut session,
        vec![
            call("a", "read", r#"{"path":"hello.txt"}"#),
            call(
                "b",
                "read",
                &serde_json::json!({ "path": format!(".journal/{segment}") }).to_string(),
            ),
        ],
    )
    .await;
    session.close().await.unwrap();
    assert_eq!(results[0].code, None, "{}", results[0].content);
    assert!(results[0].content.contains("hi"), "{}", results[0].content);
    assert_eq!(
        results[1].code,
        Some(ErrorCode::FsOutsideWorkspace),
        "{}",
        results[1].content
    );
}

#[tokio::test]
async fn without_an_approver_an_ask_is_never_answered_yes() {
    let (_root, workspace, journal) = dirs();
    let mut session = Session::builder(&workspace, &journal).open().unwrap();
    let results = one_step(
        &mut session,
        vec![call("q", "ask", r#"{"question":"delete prod?"}"#)],
    )
    .await;
    session.close().await.unwrap();
    // Withdrawn unanswered: neither an answer nor consent, and not a denial either.
    assert_eq!(
        results[0].code,
        Some(ErrorCode::QuestionUnanswered),
        "{}",
        results[0].content
    );
    assert!(
        results[0].content.contains("no approver"),
        "{}",
        results[0].content
    );
    assert!(
        !results[0].content.contains("The user"),
        "{}",
        results[0].content
    );
}

#[tokio::test]
async fn a_second_writer_is_refused_naming_the_holder() {
    let (_root, workspace, journal) = dirs();
    let session = Session::builder(&workspace, &journal).open().unwrap();
    match Session::builder(&workspace, &journal).open() {
        Err(BuildError::Live { holder_pid, dir }) => {
            assert_eq!(dir, journal);
            assert_eq!(holder_pid, Some(std::process::id()));
        }
        Err(e) => panic!("expected Live, got {e}"),
        Ok(_) => panic!("a second writer was let in"),
    }
    session.close().await.unwrap();
}

#[tokio::test]
async fn open_refuses_a_journal_that_holds_a_session_and_resume_continues_it() {
    let (_root, workspace, journal) = dirs();
    let mut first = Session::builder(&workspace, &journal)
        .session_id("s-1")
        .open()
        .unwrap();
    one_step(&mut first, vec![call("a", "todo", r#"{"items":[]}"#)]).await;
    drop(first); // ends without session/close: resumable

    let refused = Session::builder(&workspace, &journal).open();
    assert!(
        matches!(
            refused,
            Err(BuildError::Runtime(RuntimeError::JournalMoved(_)))
        ),
        "{:?}",
        refused.err().map(|e| e.to_string())
    );

    let resumed = Session::builder(&workspace, &journal).resume().unwrap();
    assert_eq!(resumed.session_id(), "s-1");
    assert_eq!(resumed.turn(), 1);
    resumed.close().await.unwrap();
}

#[tokio::test]
async fn resume_on_another_workspace_is_refused() {
    let (root, workspace, journal) = dirs();
    let first = Session::builder(&workspace, &journal).open().unwrap();
    drop(first);
    let elsewhere = root.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    match Session::builder(&elsewhere, &journal).resume() {
        Err(BuildError::WorkspaceMismatch {
            journaled, given, ..
        }) => {
            assert_eq!(
                journaled,
                workspace.canonicalize().unwrap().display().to_string()
            );
            assert_eq!(
                given,
                elsewhere.canonicalize().unwrap().display().to_string()
            );
        }
        Err(e) => panic!("expected WorkspaceMismatch, got {e}"),
        Ok(_) => panic!("resumed on another workspace"),
    }
}

#[tokio::test]
async fn large_results_are_spilled_beside_the_journal_by_default() {
    let (_root, workspace, journal) = dirs();
    std::fs::write(workspace.join("big.txt"), "x".repeat(100 << 10)).unwrap();
    let mut session = Session::builder(&workspace, &journal).open().unwrap();
    let results = one_step(
        &mut session,
        vec![call("a", "read", r#"{"path":"big.txt"}"#)],
    )
    .await;
    session.close().await.unwrap();
    assert!(journal.join("spill").is_dir());
    assert!(
        results[0].content.len() < 64 << 10,
        "the model got {} bytes",
        results[0].content.len()
    );
}

#[tokio::test]
async fn a_config_under_which_no_call_could_start_is_refused_before_anything_is_written() {
    let (_root, workspace, journal) = dirs();
    let config = Config {
        parallel_max: 0,
        ..Config::default()
    };
    match Session::builder(&workspace, &journal).config(config).open() {
        Err(BuildError::Runtime(RuntimeError::Misuse(message))) => {
            assert!(message.contains("parallel_max"), "{message}")
        }
        Err(e) => panic!("expected Misuse, got {e}"),
        Ok(_) => panic!("a session opened with parallel_max 0"),
    }
    // Nothing was journaled: a session with sane limits can still open there.
    let session = Session::builder(&workspace, &journal).open().unwrap();
    session.close().await.unwrap();
}

/// Every file of the journal directory with its bytes.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn a_refused_open_leaves_a_torn_tail_exactly_as_it_was() {
    let (_root, workspace, journal) = dirs();
    let session = Session::builder(&workspace, &journal).open().unwrap();
    session.close().await.unwrap();
    let segment = journal.join(segment_name(&journal));
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes.extend_from_slice(&[0x17, 0, 0, 0, 0xde, 0xad]); // a record cut mid-way
    std::fs::write(&segment, &bytes).unwrap();
    let before = snapshot(&journal);

    let locked = Session::builder(&workspace, &journal).lock().unwrap();
    assert!(locked.torn_tail().is_some(), "the torn tail is seen");
    let refused = locked.open();
    assert!(
        matches!(
            refused,
            Err(BuildError::Runtime(RuntimeError::JournalMoved(_)))
        ),
        "{:?}",
        refused.err().map(|e| e.to_string())
    );
    assert_eq!(
        snapshot(&journal),
        before,
        "nothing cut, nothing quarantined"
    );
}

/// The `session/sandbox` records of `journal`, in order.
fn sandboxes(journal: &Path) -> Vec<tooljournal_runtime::event::SandboxBound> {
    let storage: std::sync::Arc<dyn journal::Storage> =
        std::sync::Arc::new(journal::FsStorage::open(journal).unwrap());
    journal::Reader::open(storage, journal::Limits::default())
        .unwrap()
        .map(|r| {
            r.unwrap()
                .decode::<tooljournal_runtime::event::Record>()
                .unwrap()
        })
        .filter_map(|r| match r.event {
            tooljournal_runtime::event::Event::SessionSandbox(b) => Some(b),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_sandbox_is_journaled_at_open_and_a_resume_without_one_says_it_has_none() {
    // The journal beside the workspace: one inside it would be readable by its commands.
    let root = tempfile::tempdir().unwrap();
    let (workspace, journal) = (root.path().join("ws"), root.path().join("journal"));
    std::fs::create_dir(&workspace).unwrap();
    let spec = sandbox::Spec::new(
        tooljournal_runtime::event::SandboxPolicy::WorkspaceWrite,
        "ignored: the session's workspace is used",
    );
    let mut first = Session::builder(&workspace, &journal)
        .sandbox(spec)
        .open()
        .unwrap();
    let results = one_step(&mut first, vec![call("a", "bash", r#"{"command":"true"}"#)]).await;
    assert!(results[0].content.ends_with("exit status 0"), "{results:?}");
    drop(first);
    let opened = sandboxes(&journal);
    assert_eq!(opened.len(), 1);
    assert!(opened[0].confines(), "{:?}", opened[0]);
    let ws = workspace.canonicalize().unwrap().display().to_string();
    assert_eq!(
        opened[0].writable[0], ws,
        "the session's workspace, whatever the spec said"
    );

    let resumed = Session::builder(&workspace, &journal).resume().unwrap();
    resumed.close().await.unwrap();
    let all = sandboxes(&journal);
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(!all[1].confines());
    assert!(all[1]
        .mechanism
        .contains("this run of the session set no sandbox"));
}
