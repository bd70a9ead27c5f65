//! The evidence recovery reads, the tools' side: `write` and `edit` journal in `started`, before they act, what the
//! file is and what it will be (`Evidence::FileReplace`), and never act against it; every
//! attempt of a call gets the same idempotency key, journaled in `started` and handed to Rust
//! tools (`ToolContext`) and to bash commands (their environment). A session on a simulated
//! disk with a real workspace in a temporary directory; every hash the tests expect is computed
//! here from the bytes the test wrote.

use crate::common;

use common::*;
use journal::{Journal, Options, SimStorage};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tooljournal_runtime::bash::Bash;
use tooljournal_runtime::event::{
    idempotency_key, CallRef, CallStarted, Event, Evidence, Resources, SideEffect, ToolSource,
};
use tooljournal_runtime::fs::{file_tools, WriteTool};
use tooljournal_runtime::Args;
use tooljournal_runtime::Hooks;
use tooljournal_runtime::ManualClock;
use tooljournal_runtime::Registry;
use tooljournal_runtime::Workspace;
use tooljournal_runtime::{Config, ErrorCode, Session, SessionOptions, ToolResult};
use tooljournal_runtime::{EvidenceFuture, Tool, ToolContext, ToolError, ToolFuture, ToolOutput};

/// sha256 of `bytes`, in hex, computed here (not by the runtime).
fn sha(bytes: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(bytes.as_ref()))
}

/// A session with the file tools, bash and any `extra` tools, its workspace in a temporary
/// directory, its journal on a simulated disk.
struct Env {
    /// Kept: the workspace lives as long as the test.
    _dir: tempfile::TempDir,
    ws: Arc<Workspace>,
    storage: SimStorage,
    session: Session,
}

impl Env {
    fn new(session_id: &str, extra: Vec<Arc<dyn Tool>>, config: Config) -> Env {
        Env::build(session_id, config, |ws| {
            let mut tools = file_tools(ws.clone());
            tools.push(Arc::new(Bash::new(ws.clone())));
            tools.extend(extra);
            tools
        })
    }

    /// `tools` gets the workspace, for tools that must share it.
    fn build(
        session_id: &str,
        config: Config,
        tools: impl FnOnce(&Arc<Workspace>) -> Vec<Arc<dyn Tool>>,
    ) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let ws = Arc::new(Workspace::new(dir.path(), &[]).unwrap());
        let mut registry = Registry::new();
        for tool in tools(&ws) {
            registry.register(tool, ToolSource::BuiltIn).unwrap();
        }
        let storage = SimStorage::new();
        let (journal, _) = Journal::open(Arc::new(storage.clone()), Options::default()).unwrap();
        let session = Session::open(
            journal,
            Arc::new(registry),
            Hooks::default(),
            config,
            SessionOptions {
                session_id: Some(session_id.into()),
                workspace: dir.path().display().to_string(),
                clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            },
        )
        .unwrap();
        Env {
            _dir: dir,
            ws,
            storage,
            session,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.ws.root().join(rel)
    }

    fn put(&self, rel: &str, content: &str) {
        fs::write(self.path(rel), content).unwrap();
    }

    fn get(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap()
    }

    /// Runs one call (`id`) in a step of its own.
    async fn run(&mut self, id: &str, tool: &str, args: Value) -> ToolResult {
        one_step(&mut self.session, vec![call(id, tool, &args.to_string())])
            .await
            .remove(0)
    }

    /// Every `started` of call `id`, in journal order.
    fn started(&self, id: &str) -> Vec<CallStarted> {
        events(&self.storage)
            .into_iter()
            .filter_map(|(_, e)| match e {
                Event::Started(s) if s.call.call_id == id => Some(s),
                _ => None,
            })
            .collect()
    }

    /// The evidence of call `id`'s only `started`.
    fn evidence(&self, id: &str) -> Vec<Evidence> {
        let started = self.started(id);
        assert_eq!(started.len(), 1, "{id} started once: {started:?}");
        started[0].evidence.clone()
    }

    /// The side effects call `id`'s `settled` confirms.
    fn settled_effects(&self, id: &str) -> Vec<SideEffect> {
        replayed(&self.storage, id)
            .outcome
            .expect("settled")
            .side_effects
    }
}

fn replace(path: &str, before: Option<&str>, after: &str) -> Evidence {
    Evidence::FileReplace {
        path: path.into(),
        before_sha256: before.map(sha),
        after_sha256: sha(after),
    }
}

fn fs_write(path: &str, before: Option<&str>, after: &str) -> SideEffect {
    SideEffect::FsWrite {
        path: path.into(),
        before_sha256: before.map(sha),
        after_sha256: sha(after),
    }
}

fn assert_code(r: &ToolResult, code: ErrorCode) {
    assert!(r.is_error, "expected {code}: {r:?}");
    assert_eq!(r.code, Some(code), "{r:?}");
}

// ---------------------------------------------------------------------------------------------
// Evidence of write and edit

#[tokio::test]
async fn write_journals_the_file_before_and_after_in_started_for_a_new_and_an_existing_file() {
    let mut env = Env::new("s-evidence", vec![], Config::default());

    // A new file in a directory that does not exist yet: absent before.
    let r = env
        .run(
            "c1",
            "write",
            json!({"path": "sub/new.txt", "content": "hello\n"}),
        )
        .await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(env.get("sub/new.txt"), "hello\n");
    assert_eq!(
        env.evidence("c1"),
        [replace("sub/new.txt", None, "hello\n")]
    );
    let effects = env.settled_effects("c1");
    assert!(
        effects.contains(&fs_write("sub/new.txt", None, "hello\n")),
        "{effects:?}"
    );

    // An existing file this session never read, named the long way: the evidence names it
    // as the side effect does.
    env.put("old.txt", "old content\n");
    let r = env
        .run(
            "c2",
            "write",
            json!({"path": "./old.txt", "content": "new content\n"}),
        )
        .await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(env.get("old.txt"), "new content\n");
    assert_eq!(
        env.evidence("c2"),
        [replace("old.txt", Some("old content\n"), "new content\n")]
    );
    assert_eq!(
        env.settled_effects("c2"),
        [fs_write("old.txt", Some("old content\n"), "new content\n")]
    );

    // Replay reads the same evidence back.
    let c = replayed(&env.storage, "c2");
    assert_eq!(
        c.evidence,
        [replace("old.txt", Some("old content\n"), "new content\n")]
    );
}

#[tokio::test]
async fn edit_journals_the_file_before_and_after_in_started() {
    let mut env = Env::new("s-evidence", vec![], Config::default());
    let original = "a = 1\nb = 2\nc = 3\n";
    let edited = "a = 1\nb = 20\nc = 3\n";
    env.put("conf.txt", original);
    let r = env.run("c1", "read", json!({"path": "conf.txt"})).await;
    assert!(!r.is_error, "{r:?}");
    assert!(env.evidence("c1").is_empty(), "read records nothing");

    let r = env
        .run(
            "c2",
            "edit",
            json!({"path": "conf.txt", "old_string": "b = 2\n", "new_string": "b = 20\n"}),
        )
        .await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(env.get("conf.txt"), edited);
    assert_eq!(
        env.evidence("c2"),
        [replace("conf.txt", Some(original), edited)]
    );
    assert_eq!(
        env.settled_effects("c2"),
        [fs_write("conf.txt", Some(original), edited)]
    );
}

#[tokio::test]
async fn a_write_or_edit_that_would_fail_records_no_evidence() {
    let mut env = Env::new("s-evidence", vec![], Config::default());
    env.put("unread.txt", "x = 1\n");
    env.put("twice.txt", "x\nx\n");
    env.put("one.txt", "z = 1\n");
    env.put("changed.txt", "first\n");
    fs::create_dir(env.path("dir")).unwrap();
    for (id, path) in [
        ("r1", "twice.txt"),
        ("r2", "one.txt"),
        ("r3", "changed.txt"),
    ] {
        let r = env.run(id, "read", json!({"path": path})).await;
        assert!(!r.is_error, "{r:?}");
    }
    // Changed behind the session's back after it was read.
    env.put("changed.txt", "second\n");

    let edit = |path: &str, old: &str| json!({"path": path, "old_string": old, "new_string": "y"});
    let failing = [
        (
            "e1",
            "edit",
            edit("unread.txt", "x"),
            ErrorCode::FsStaleVersion,
        ),
        ("e2", "edit", edit("twice.txt", "x"), ErrorCode::ToolFailed),
        (
            "e3",
            "edit",
            edit("twice.txt", "absent"),
            ErrorCode::ToolFailed,
        ),
        (
            "e4",
            "edit",
            edit("missing.txt", "x"),
            ErrorCode::ToolFailed,
        ),
        // old_string == new_string: nothing to change.
        ("e5", "edit", edit("one.txt", "y"), ErrorCode::ToolFailed),
        (
            "e6",
            "edit",
            edit("changed.txt", "second"),
            ErrorCode::FsStaleVersion,
        ),
        ("e7", "edit", edit("dir", "x"), ErrorCode::ToolFailed),
        (
            "e8",
            "edit",
            edit("../outside.txt", "x"),
            ErrorCode::FsOutsideWorkspace,
        ),
        (
            "w1",
            "write",
            json!({"path": "dir", "content": "x"}),
            ErrorCode::ToolFailed,
        ),
        (
            "w2",
            "write",
            json!({"path": "changed.txt", "content": "x"}),
            ErrorCode::FsStaleVersion,
        ),
    ];
    for (id, tool, args, code) in failing {
        let r = env.run(id, tool, args.clone()).await;
        assert_code(&r, code);
        let started = env.started(id);
        assert_eq!(started.len(), 1, "{id} started (its body ran and failed)");
        assert!(started[0].evidence.is_empty(), "{id} {args}: {started:?}");
    }
    // Nothing was changed by any of them.
    assert_eq!(env.get("unread.txt"), "x = 1\n");
    assert_eq!(env.get("twice.txt"), "x\nx\n");
    assert_eq!(env.get("changed.txt"), "second\n");
    assert_eq!(env.get("one.txt"), "z = 1\n");
    assert!(!env.path("missing.txt").exists());
}

// ---------------------------------------------------------------------------------------------
// The body honours its evidence

/// What someone else does to the workspace between a call's evidence and its `started`.
type Meddle = Box<dyn Fn(&std::path::Path, &Args) + Send + Sync>;

/// `write`, with a twist: right after its evidence is taken (and before `started` is journaled
/// and the body runs), someone else meddles with the workspace (`meddle`, given its root and the
/// call's arguments): what a concurrent process, or an MCP tool running beside it, can do.
struct RacedWrite {
    inner: WriteTool,
    ws: Arc<Workspace>,
    meddle: Meddle,
}

impl RacedWrite {
    fn tool(ws: &Arc<Workspace>, meddle: Meddle) -> Arc<dyn Tool> {
        Arc::new(RacedWrite {
            inner: WriteTool::new(ws.clone()),
            ws: ws.clone(),
            meddle,
        })
    }
}

impl Tool for RacedWrite {
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
            (self.meddle)(self.ws.root(), args);
            evidence
        })
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        self.inner.execute(args, ctx)
    }
}

#[tokio::test]
async fn a_write_refuses_when_the_file_changed_after_its_start_was_journaled() {
    let mut env = Env::build("s-race", Config::default(), |ws| {
        vec![RacedWrite::tool(
            ws,
            Box::new(|root, args| {
                fs::write(
                    root.join(args.str("path").unwrap()),
                    "written by someone else\n",
                )
                .unwrap()
            }),
        )]
    });
    env.put("existing.txt", "before\n");

    // An existing file (never read by the session), changed after the evidence was taken.
    let r = env
        .run(
            "c1",
            "write",
            json!({"path": "existing.txt", "content": "mine\n"}),
        )
        .await;
    assert_code(&r, ErrorCode::FsStaleVersion);
    assert!(
        r.content.contains("after this call's start was journaled"),
        "{}",
        r.content
    );
    assert_eq!(env.get("existing.txt"), "written by someone else\n");
    assert_eq!(
        env.evidence("c1"),
        [replace("existing.txt", Some("before\n"), "mine\n")]
    );
    assert!(env.settled_effects("c1").is_empty());

    // A file that was absent when the evidence was taken, and appeared before the body ran.
    let r = env
        .run(
            "c2",
            "write",
            json!({"path": "fresh.txt", "content": "mine\n"}),
        )
        .await;
    assert_code(&r, ErrorCode::FsStaleVersion);
    assert_eq!(env.get("fresh.txt"), "written by someone else\n");
    assert_eq!(env.evidence("c2"), [replace("fresh.txt", None, "mine\n")]);
    assert!(env.settled_effects("c2").is_empty());
}

/// A directory symlink on the path is retargeted (`link` from `d1` to `d2`) after the
/// evidence named `d1/f.txt`: the body, resolving the path again, would write `d2/f.txt`, a
/// file the journaled evidence never named (after a crash a probe would say `not_applied` for a
/// call that wrote). It refuses instead (`FS_STALE_VERSION`, nothing written).
#[tokio::test]
async fn a_write_refuses_when_its_path_now_resolves_to_another_file_than_its_evidence() {
    let mut env = Env::build("s-swap", Config::default(), |ws| {
        vec![RacedWrite::tool(
            ws,
            Box::new(|root, _| {
                fs::remove_file(root.join("link")).unwrap();
                std::os::unix::fs::symlink("d2", root.join("link")).unwrap();
            }),
        )]
    });
    fs::create_dir(env.path("d1")).unwrap();
    fs::create_dir(env.path("d2")).unwrap();
    std::os::unix::fs::symlink("d1", env.path("link")).unwrap();
    let r = env
        .run(
            "w1",
            "write",
            json!({"path": "link/f.txt", "content": "mine\n"}),
        )
        .await;
    assert_eq!(env.evidence("w1"), [replace("d1/f.txt", None, "mine\n")]);
    assert!(
        !env.path("d2/f.txt").exists() && !env.path("d1/f.txt").exists(),
        "nothing written: {r:?}"
    );
    assert_code(&r, ErrorCode::FsStaleVersion);
}

// ---------------------------------------------------------------------------------------------
// Idempotency keys

/// Per attempt: (attempt, key, session id) as the body saw them.
type Seen = Arc<Mutex<Vec<(u32, String, String)>>>;

/// A retry-safe tool that fails retryably on its first attempt and records what its context
/// says on every attempt.
fn keyed(seen: &Seen) -> Arc<dyn Tool> {
    let seen = seen.clone();
    let tool = TestTool::with("keyed", move |_, ctx| {
        seen.lock().unwrap().push((
            ctx.attempt(),
            ctx.idempotency_key().to_owned(),
            ctx.session_id().to_owned(),
        ));
        Box::pin(async move {
            if ctx.attempt() == 1 {
                Err(ToolError::new(ErrorCode::ToolFailed, "flaky").retryable())
            } else {
                Ok(ToolOutput::text("done"))
            }
        })
    })
    .retry_safe();
    Arc::new(tool)
}

fn retrying() -> Config {
    Config {
        attempts_max: 3,
        retry_backoff_ms: 1,
        ..Config::default()
    }
}

#[tokio::test]
async fn every_attempt_of_a_call_has_the_same_key_and_other_calls_and_sessions_do_not() {
    let seen: Seen = Arc::default();
    let mut env = Env::new("session-one", vec![keyed(&seen)], retrying());
    let r = env.run("k1", "keyed", json!({})).await;
    assert!(!r.is_error, "{r:?}");

    let started = env.started("k1");
    assert_eq!(
        started.iter().map(|s| s.attempt).collect::<Vec<_>>(),
        [1, 2]
    );
    let call: &CallRef = &started[0].call;
    let key = idempotency_key("session-one", call);
    assert!(key.starts_with("tj1-"), "{key}");
    for s in &started {
        assert_eq!(s.idempotency_key, key, "attempt {}", s.attempt);
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (1, key.clone(), "session-one".to_owned()),
            (2, key.clone(), "session-one".to_owned())
        ]
    );
    assert_eq!(
        replayed(&env.storage, "k1").idempotency_key.as_deref(),
        Some(key.as_str())
    );

    // Another call of the same session.
    let r = env.run("k2", "keyed", json!({})).await;
    assert!(!r.is_error, "{r:?}");
    let other = &env.started("k2")[0];
    assert_ne!(other.idempotency_key, key);
    assert_eq!(
        other.idempotency_key,
        idempotency_key("session-one", &other.call)
    );

    // The same call id, at the same turn and step, in another session.
    let seen_two: Seen = Arc::default();
    let mut env_two = Env::new("session-two", vec![keyed(&seen_two)], retrying());
    let r = env_two.run("k1", "keyed", json!({})).await;
    assert!(!r.is_error, "{r:?}");
    let twin = &env_two.started("k1")[0];
    assert_eq!(twin.call, *call);
    assert_ne!(twin.idempotency_key, key);
    assert_eq!(
        twin.idempotency_key,
        idempotency_key("session-two", &twin.call)
    );
    assert_eq!(seen_two.lock().unwrap()[0].1, twin.idempotency_key);
}

#[tokio::test]
async fn a_bash_command_gets_the_key_the_session_id_and_the_call_id_in_its_environment() {
    let mut env = Env::new("session-bash", vec![], Config::default());
    let command = r#"printf '%s\n%s\n%s\n' "$TOOLJOURNAL_IDEMPOTENCY_KEY" "$TOOLJOURNAL_SESSION_ID" "$TOOLJOURNAL_CALL_ID""#;
    let r = env
        .run("call-b1", "bash", json!({ "command": command }))
        .await;
    assert!(!r.is_error, "{r:?}");
    let started = &env.started("call-b1")[0];
    let key = idempotency_key("session-bash", &started.call);
    assert_eq!(started.idempotency_key, key);
    let lines: Vec<&str> = r.content.lines().collect();
    assert_eq!(
        lines,
        [key.as_str(), "session-bash", "call-b1", "exit status 0"],
        "{:?}",
        r.content
    );
}
