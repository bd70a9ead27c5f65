//! Seams of the re-run path and of how `write` honours the evidence its `started` recorded,
//! where a careless embedding or a swapped directory meets them (found in review; each test
//! failed before its fix).

mod common;

use common::{call, one_step, response, TestTool};
use journal::{FsStorage, Journal, Options, ReadEnd, SimStorage};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tooljournal_runtime::args::Args;
use tooljournal_runtime::event::{
    CallRef, Classification, CommittedResult, Event, Evidence, RecoveredCall, Recovery,
    RecoveryRerun, RerunPolicy, Resources, ToolSource,
};
use tooljournal_runtime::hooks::Hooks;
use tooljournal_runtime::registry::Registry;
use tooljournal_runtime::replay::replay_storage;
use tooljournal_runtime::result::error_content;
use tooljournal_runtime::state::CallState;
use tooljournal_runtime::testing::ManualClock;
use tooljournal_runtime::tool::{EvidenceFuture, Tool, ToolContext, ToolFuture, ToolOutput};
use tooljournal_runtime::tools::fs::WriteTool;
use tooljournal_runtime::tools::Workspace;
use tooljournal_runtime::{BuildError, Config, ErrorCode, RuntimeError, Session, SessionOptions};

// ---------------------------------------------------------------------------------------------
// The re-run: a recovery/rerun that names a call twice.

const SESSION: &str = "review-17";

/// Every body run: call id and attempt.
type Runs = Arc<Mutex<Vec<(String, u32)>>>;

/// `count` records its run and answers at once; `hang` (exclusive) never ends on attempt 1.
fn tools(runs: &Runs) -> Vec<TestTool> {
    let count_runs = runs.clone();
    let count = TestTool::with("count", move |_, ctx| {
        count_runs
            .lock()
            .unwrap()
            .push((ctx.call_id().to_owned(), ctx.attempt()));
        Box::pin(async move { Ok(ToolOutput::text("counted")) })
    })
    .parallel();
    let never = Arc::new(tokio::sync::Notify::new());
    let hang = TestTool::with("hang", move |_, _ctx| {
        let never = never.clone();
        Box::pin(async move {
            never.notified().await;
            Ok(ToolOutput::text("never"))
        })
    });
    vec![count, hang]
}

struct Dirs {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    journal: PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    Dirs {
        journal: tmp.path().join("journal"),
        ws,
        _tmp: tmp,
    }
}

fn builder(d: &Dirs, runs: &Runs) -> tooljournal_runtime::SessionBuilder {
    let mut b = Session::builder(&d.ws, &d.journal)
        .without_builtins()
        .without_spill()
        .session_id(SESSION);
    for tool in tools(runs) {
        b = b.tool(Arc::new(tool));
    }
    b
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn cref(id: &str) -> CallRef {
    CallRef {
        turn: 1,
        step: 1,
        call_id: id.into(),
    }
}

/// Turn 1 step 1: `h1` (exclusive) starts and never ends; `c1` waits behind it, approved and
/// never started. Dropped there, as a crash leaves it.
fn crashed(d: &Dirs) {
    let runs: Runs = Arc::default();
    let rt = rt();
    rt.block_on(async {
        let mut session = builder(d, &runs).open().unwrap();
        session.begin_turn("go").unwrap();
        session.begin_step().unwrap();
        let batch = session.run_batch(response(vec![
            call("h1", "hang", "{}"),
            call("c1", "count", "{}"),
        ]));
        assert!(
            tokio::time::timeout(Duration::from_millis(300), batch)
                .await
                .is_err(),
            "h1 never ends"
        );
        drop(session);
    });
    rt.shutdown_timeout(Duration::from_secs(5));
    assert!(runs.lock().unwrap().is_empty(), "c1 never started");
}

fn segments(journal: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(journal)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".segment"))
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

/// A recovery/rerun that names `c1` twice (what the journal's own replay refuses: "named
/// twice") must be refused by `resume_recovering` before anything is written, as every other
/// recovery that does not fit the journal is. On the reviewed commit it is accepted: the
/// session holds two tracks for `c1`, `run_rerun` runs its body twice, and the journal it
/// leaves cannot be replayed.
#[test]
fn a_rerun_that_names_a_call_twice_is_refused_and_changes_nothing() {
    let d = dirs();
    crashed(&d);
    let before = segments(&d.journal);
    let recovery = vec![
        Event::Recovery(Recovery {
            dropped_bytes: 0,
            calls: vec![RecoveredCall {
                call: cref("h1"),
                state: CallState::Started,
                classification: Some(Classification::ToolOutcomeUnknown),
                result: CommittedResult {
                    content: error_content(ErrorCode::ToolOutcomeUnknown, "interrupted"),
                    is_error: true,
                    code: Some(ErrorCode::ToolOutcomeUnknown),
                    value: None,
                },
            }],
            interrupted_step: None,
            interrupted_turn: None,
        }),
        Event::RecoveryRerun(RecoveryRerun {
            policy: RerunPolicy::NotStarted,
            calls: vec![cref("c1"), cref("c1")],
        }),
    ];
    let runs: Runs = Arc::default();
    let rt = rt();
    // The re-run may panic (a debug assertion of the scheduler's, after the bodies ran):
    // caught, so that what it did is reported.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async {
            let prepared = builder(&d, &runs).lock().unwrap().prepare().unwrap();
            match prepared.resume_recovering(recovery) {
                Err(e) => Err(e),
                Ok((mut session, _)) => {
                    let ran = tokio::time::timeout(
                        Duration::from_secs(10),
                        session.run_rerun(tokio_util::sync::CancellationToken::new()),
                    )
                    .await;
                    drop(session);
                    Ok(format!("{ran:?}"))
                }
            }
        })
    }))
    .unwrap_or_else(|panic| {
        let said = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Ok(format!("in a panic ({said})"))
    });
    rt.shutdown_timeout(Duration::from_secs(5));
    let ran = runs.lock().unwrap().clone();
    let storage = Arc::new(FsStorage::open(&d.journal).unwrap());
    let replayed = replay_storage(storage, journal::Limits::default()).map(|(_, end)| end);
    match outcome {
        Err(BuildError::Runtime(RuntimeError::Misuse(message))) => {
            assert!(message.contains("c1"), "{message}");
            assert_eq!(segments(&d.journal), before, "the journal is untouched");
            assert!(ran.is_empty(), "nothing ran: {ran:?}");
        }
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(how) => panic!(
            "accepted a recovery/rerun naming c1 twice: the re-run ended {how}; c1's body ran \
             {} time(s) ({ran:?}); the journal now replays as {replayed:?}",
            ran.iter().filter(|(id, _)| id == "c1").count()
        ),
    }
    assert!(matches!(replayed, Ok(ReadEnd::Clean)), "{replayed:?}");
}

// ---------------------------------------------------------------------------------------------
// Evidence: the body must not act on another file than the one its `started` recorded.

/// `write`, while someone retargets the directory symlink `link` from `d1` to `d2` right after
/// the call's evidence was taken (before `started` is journaled and the body runs): what a
/// concurrent process (or an MCP tool running beside it) can do.
struct SwappedLink {
    inner: WriteTool,
    ws: Arc<Workspace>,
}

impl Tool for SwappedLink {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn input_schema(&self) -> Value {
        self.inner.input_schema()
    }
    fn resources(&self, args: &Args) -> Resources {
        self.inner.resources(args)
    }
    fn evidence<'a>(&'a self, args: &'a Args) -> EvidenceFuture<'a> {
        Box::pin(async move {
            let evidence = self.inner.evidence(args).await;
            let link = self.ws.root().join("link");
            std::fs::remove_file(&link).unwrap();
            std::os::unix::fs::symlink("d2", &link).unwrap();
            evidence
        })
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        self.inner.execute(args, ctx)
    }
}

/// The evidence says `d1/f.txt` goes from absent to the new content; the body, resolving the
/// path again after the swap, writes `d2/f.txt` instead, because `honour_evidence` skips
/// evidence whose path differs from the one the body resolved. Had the session died before
/// `settled`, a probe would report `not_applied` (d1/f.txt still absent) for a call that did
/// write. The body must refuse (FS_STALE_VERSION, nothing written), as it does when the file
/// itself changed.
#[tokio::test]
async fn a_write_refuses_when_its_path_now_resolves_to_another_file_than_its_evidence() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("d1")).unwrap();
    std::fs::create_dir(dir.path().join("d2")).unwrap();
    std::os::unix::fs::symlink("d1", dir.path().join("link")).unwrap();
    let ws = Arc::new(Workspace::new(dir.path(), &[]).unwrap());
    let mut registry = Registry::new();
    registry
        .register(
            Arc::new(SwappedLink {
                inner: WriteTool::new(ws.clone()),
                ws: ws.clone(),
            }),
            ToolSource::BuiltIn,
        )
        .unwrap();
    let storage = SimStorage::new();
    let (journal, _) = Journal::open(Arc::new(storage.clone()), Options::default()).unwrap();
    let mut session = Session::open(
        journal,
        Arc::new(registry),
        Hooks::default(),
        Config::default(),
        SessionOptions {
            session_id: Some("swap".into()),
            workspace: dir.path().display().to_string(),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
        },
    )
    .unwrap();
    let args = json!({"path": "link/f.txt", "content": "mine\n"}).to_string();
    let r = one_step(&mut session, vec![call("w1", "write", &args)])
        .await
        .remove(0);

    let evidence: Vec<Evidence> = common::events(&storage)
        .into_iter()
        .find_map(|(_, e)| match e {
            Event::Started(s) if s.call.call_id == "w1" => Some(s.evidence),
            _ => None,
        })
        .expect("w1 started");
    let recorded: Vec<&str> = evidence
        .iter()
        .map(|e| match e {
            Evidence::FileReplace { path, .. } => path.as_str(),
        })
        .collect();
    assert_eq!(
        recorded,
        ["d1/f.txt"],
        "the evidence names the file as resolved"
    );
    assert!(
        !dir.path().join("d2/f.txt").exists(),
        "the body wrote d2/f.txt, a file its journaled evidence never named (result: {r:?})"
    );
    assert_eq!(r.code, Some(ErrorCode::FsStaleVersion), "{r:?}");
}
