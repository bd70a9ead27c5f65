//! MCP tools against real servers from the npm registry (pinned in tests/mcp), through the
//! runtime's public session API: the same pipeline and journal as built-ins.

// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test crate exports nothing: `pub` only shares helpers between its modules.
#![allow(unreachable_pub)]

#[path = "../../tests/mcp/support.rs"]
mod support;

use journal::{Journal, Limits, Options, SimStorage};
use runtime::event::{
    Answer, AskAnswer, CallRef, Event, ModelCall, ModelResponse, Question, StepOutcome, StopReason,
    ToolSource, TurnOutcome,
};
use runtime::replay::replay_storage;
use runtime::{builtin_registry, Workspace};
use runtime::{Approver, AskFuture, CallInfo, Hooks, Observer, QuestionFuture, QuestionOutcome};
use runtime::{Config, ErrorCode, Session, SessionOptions, ToolResult};
use runtime::{Exposure, Registry, RegistryError};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use tooljournal_mcp::{McpError, McpServer, ServerConfig, ToolConfig};

fn filesystem(root: &std::path::Path) -> ServerConfig {
    ServerConfig::new(
        support::filesystem_server().display().to_string(),
        vec![root.display().to_string()],
    )
}

fn everything() -> ServerConfig {
    ServerConfig::new(
        support::everything_server().display().to_string(),
        vec!["stdio".into()],
    )
}

async fn start(name: &str, config: &ServerConfig) -> McpServer {
    McpServer::start(name, config, Stdio::null())
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

fn registry_with(server: &McpServer, ws: Option<&std::path::Path>) -> Arc<Registry> {
    let mut r = match ws {
        Some(ws) => builtin_registry(&Arc::new(Workspace::new(ws, &[]).unwrap())).unwrap(),
        None => Registry::new(),
    };
    tooljournal_mcp::register(server, &mut r).unwrap();
    Arc::new(r)
}

fn session(storage: &SimStorage, registry: Arc<Registry>, hooks: Hooks, config: Config) -> Session {
    let (journal, _) = Journal::open(Arc::new(storage.clone()), Options::default()).unwrap();
    Session::open(journal, registry, hooks, config, SessionOptions::default()).unwrap()
}

fn call(id: &str, name: &str, args: serde_json::Value) -> ModelCall {
    ModelCall {
        call_id: id.into(),
        name: name.into(),
        arguments: args.to_string(),
    }
}

async fn step(s: &mut Session, calls: Vec<ModelCall>) -> Vec<ToolResult> {
    s.begin_step().unwrap();
    let r = s
        .run_batch(ModelResponse {
            text: String::new(),
            tool_calls: calls,
            stop_reason: StopReason::ToolUse,
        })
        .await
        .unwrap();
    s.end_step(StepOutcome::Completed).unwrap();
    r
}

fn events(storage: &SimStorage) -> Vec<Event> {
    journal::Reader::open(Arc::new(storage.clone()), Limits::default())
        .unwrap()
        .map(|r| r.unwrap().decode::<runtime::event::Record>().unwrap().event)
        .collect()
}

/// What the observers were told, in the order they were told it: `progress: MESSAGE` and
/// `result: CALL_ID`.
#[derive(Default)]
struct Progress(Mutex<Vec<String>>);

impl Observer for Progress {
    fn name(&self) -> &str {
        "progress"
    }
    fn on_result(&self, call: &CallRef, _: &str, _: &ToolResult) -> Result<(), String> {
        self.0
            .lock()
            .unwrap()
            .push(format!("result: {}", call.call_id));
        Ok(())
    }
    fn on_progress(&self, _: &CallRef, _: &str, message: &str) -> Result<(), String> {
        self.0.lock().unwrap().push(format!("progress: {message}"));
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_s_tools_are_journaled_with_its_identity_and_run_through_the_pipeline() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "hello from a").unwrap();
    let server = start("fs", &filesystem(ws.path())).await;
    let storage = SimStorage::new();
    let mut s = session(
        &storage,
        registry_with(&server, Some(ws.path())),
        Hooks::default(),
        Config::default(),
    );
    s.begin_turn("read it").unwrap();
    let path = ws.path().join("a.txt").display().to_string();
    let r = step(
        &mut s,
        vec![call(
            "c1",
            "mcp__fs__read_text_file",
            serde_json::json!({ "path": path }),
        )],
    )
    .await;
    assert!(!r[0].is_error, "{}", r[0].content);
    assert!(r[0].content.contains("hello from a"), "{}", r[0].content);
    s.end_turn(TurnOutcome::Completed).await.unwrap();
    server.shutdown().await;

    let all = events(&storage);
    let Some(Event::SessionOpen(open)) = all.first() else {
        panic!("no session/open")
    };
    let d = open
        .tools
        .iter()
        .find(|d| d.name == "mcp__fs__read_text_file")
        .expect("recorded");
    let ToolSource::Mcp {
        server,
        implementation,
        version,
    } = &d.source
    else {
        panic!("{:?}", d.source)
    };
    assert_eq!(server, "fs");
    assert_eq!(implementation, "secure-filesystem-server");
    assert!(!version.is_empty() && d.version == *version);
    assert_eq!(d.schema_hash.len(), 64);
    assert!(open
        .tools
        .iter()
        .any(|d| d.name == "read" && d.source == ToolSource::BuiltIn));
    let kinds: Vec<&str> = all
        .iter()
        .filter(|e| e.call().is_some_and(|c| c.call_id == "c1"))
        .map(Event::kind)
        .collect();
    assert_eq!(
        kinds,
        [
            "received",
            "parsed",
            "approved",
            "started",
            "settled",
            "committed"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_reach_observers_before_the_result() {
    let server = start("everything", &everything()).await;
    let storage = SimStorage::new();
    let progress = Arc::new(Progress::default());
    let hooks = Hooks {
        observers: vec![progress.clone()],
        ..Hooks::default()
    };
    let mut s = session(
        &storage,
        registry_with(&server, None),
        hooks,
        Config::default(),
    );
    s.begin_turn("go").unwrap();
    let r = step(
        &mut s,
        vec![call(
            "c1",
            "mcp__everything__trigger-long-running-operation",
            serde_json::json!({"duration": 1, "steps": 3}),
        )],
    )
    .await;
    server.shutdown().await;
    assert!(!r[0].is_error, "{}", r[0].content);
    let seen = progress.0.lock().unwrap().clone();
    // Progress first (at least the first step's), then the one result, and nothing after it.
    assert!(seen[0].starts_with("progress: 1/3"), "{seen:?}");
    assert_eq!(
        seen.last().map(String::as_str),
        Some("result: c1"),
        "{seen:?}"
    );
    assert_eq!(
        seen.iter().filter(|e| e.starts_with("result: ")).count(),
        1,
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_timeout_cancels_the_call_and_it_settles_outcome_unknown() {
    let mut config = everything();
    config.timeout_ms = Some(700);
    let server = start("everything", &config).await;
    let storage = SimStorage::new();
    let mut s = session(
        &storage,
        registry_with(&server, None),
        Hooks::default(),
        Config::default(),
    );
    s.begin_turn("go").unwrap();
    let r = step(
        &mut s,
        vec![
            call(
                "c1",
                "mcp__everything__trigger-long-running-operation",
                serde_json::json!({"duration": 20, "steps": 20}),
            ),
            call(
                "c2",
                "mcp__everything__echo",
                serde_json::json!({"message": "still here"}),
            ),
        ],
    )
    .await;
    server.shutdown().await;
    assert_eq!(
        r[0].code,
        Some(ErrorCode::ToolOutcomeUnknown),
        "{}",
        r[0].content
    );
    assert!(
        r[0].content.contains("timed out after 700 ms"),
        "{}",
        r[0].content
    );
    assert!(
        r[0].content.contains("notifications/cancelled"),
        "{}",
        r[0].content
    );
    assert!(!r[1].is_error, "the server still answers: {}", r[1].content);
    assert!(r[1].content.contains("still here"), "{}", r[1].content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_tool_named_like_a_built_in_is_refused() {
    let ws = tempfile::tempdir().unwrap();
    let mut config = filesystem(ws.path());
    config.tools.insert(
        "read_text_file".into(),
        ToolConfig {
            name: Some("read".into()),
            ..ToolConfig::default()
        },
    );
    let server = start("fs", &config).await;
    let mut registry =
        builtin_registry(&Arc::new(Workspace::new(ws.path(), &[]).unwrap())).unwrap();
    let refused = tooljournal_mcp::register(&server, &mut registry);
    server.shutdown().await;
    match refused {
        Err(McpError::Registry {
            server,
            source: RegistryError::ExternalOverridesBuiltIn { name, .. },
        }) => {
            assert_eq!((server.as_str(), name.as_str()), ("fs", "read"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        registry.lookup("read").unwrap().source,
        ToolSource::BuiltIn,
        "the built-in stands"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tools_of_one_server_with_one_final_name_are_refused() {
    let mut config = everything();
    for tool in ["echo", "get-sum"] {
        config.tools.insert(
            tool.into(),
            ToolConfig {
                name: Some("same".into()),
                ..ToolConfig::default()
            },
        );
    }
    let refused = McpServer::start("everything", &config, Stdio::null()).await;
    match refused {
        Err(McpError::NameCollision { name, tools, .. }) => {
            assert_eq!(name, "same");
            let mut tools = [tools.0, tools.1];
            tools.sort();
            assert_eq!(tools, ["echo", "get-sum"]);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_for_a_tool_the_server_lacks_and_a_server_that_cannot_start_are_named() {
    let mut config = everything();
    config
        .tools
        .insert("no_such_tool".into(), ToolConfig::default());
    match McpServer::start("everything", &config, Stdio::null()).await {
        Err(e @ McpError::NoSuchTool { .. }) => {
            assert!(e.to_string().contains("no_such_tool"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    let missing = ServerConfig::new("/nonexistent/mcp-server", vec![]);
    match McpServer::start("ghost", &missing, Stdio::null()).await {
        Err(e @ McpError::Startup { .. }) => {
            let e = e.to_string();
            assert!(
                e.contains("ghost") && e.contains("/nonexistent/mcp-server"),
                "{e}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_mcp_tool_is_unknown_until_tool_search_loads_it() {
    let mut config = everything();
    config.exposure = Exposure::Deferred;
    let server = start("everything", &config).await;
    let storage = SimStorage::new();
    let mut s = session(
        &storage,
        registry_with(&server, None),
        Hooks::default(),
        Config::default(),
    );
    s.begin_turn("go").unwrap();
    let echo = |id: &str| {
        call(
            id,
            "mcp__everything__echo",
            serde_json::json!({"message": "hi"}),
        )
    };
    let r = step(
        &mut s,
        vec![
            echo("c1"),
            call("c2", "tool_search", serde_json::json!({"query": "echo"})),
        ],
    )
    .await;
    assert_eq!(r[0].code, Some(ErrorCode::UnknownTool), "{}", r[0].content);
    assert!(
        r[1].content.contains("mcp__everything__echo"),
        "{}",
        r[1].content
    );
    let r = step(&mut s, vec![echo("c3")]).await;
    server.shutdown().await;
    assert!(!r[0].is_error, "{}", r[0].content);
    assert!(r[0].content.contains("hi"), "{}", r[0].content);
}

/// Says yes to every approval, and answers a question by choosing its plan option: the one
/// answer that ends plan mode.
struct ApprovesThePlan;

impl Approver for ApprovesThePlan {
    fn ask(&self, _call: CallInfo, _question: String) -> AskFuture<'_> {
        Box::pin(async { AskAnswer::AllowedOnce })
    }
    fn question(&self, _call: CallInfo, question: Question) -> QuestionFuture<'_> {
        let choice = question.plan_option.into_iter().collect();
        Box::pin(async move { QuestionOutcome::Answered(Answer { choice, text: None }) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_mode_lets_declared_read_only_mcp_tools_run_and_refuses_the_others() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "plan").unwrap();
    let mut config = filesystem(ws.path());
    config.trust_read_only_hints = true;
    // The user's word beats the server's hint.
    config.tools.insert(
        "list_directory".into(),
        ToolConfig {
            read_only: Some(false),
            ..ToolConfig::default()
        },
    );
    let server = start("fs", &config).await;
    let storage = SimStorage::new();
    let hooks = Hooks {
        pre_execute: vec![],
        approver: Some(Arc::new(ApprovesThePlan)),
        ..Hooks::default()
    };
    let mut s = session(
        &storage,
        registry_with(&server, Some(ws.path())),
        hooks,
        Config {
            plan_mode: true,
            ..Config::default()
        },
    );
    let path = |f: &str| ws.path().join(f).display().to_string();
    let write = |id: &str| {
        call(
            id,
            "mcp__fs__write_file",
            serde_json::json!({"path": path("b.txt"), "content": "done"}),
        )
    };
    s.begin_turn("go").unwrap();
    let r = step(
        &mut s,
        vec![
            call(
                "c1",
                "mcp__fs__read_text_file",
                serde_json::json!({"path": path("a.txt")}),
            ),
            write("c2"),
            call(
                "c3",
                "mcp__fs__list_directory",
                serde_json::json!({"path": path(".")}),
            ),
        ],
    )
    .await;
    assert!(!r[0].is_error, "{}", r[0].content);
    assert_eq!(r[1].code, Some(ErrorCode::PolicyDenied), "{}", r[1].content);
    assert!(r[1].content.contains("plan mode is on"), "{}", r[1].content);
    assert_eq!(r[2].code, Some(ErrorCode::PolicyDenied), "{}", r[2].content);
    assert!(!ws.path().join("b.txt").exists());
    let r = step(
        &mut s,
        vec![
            call(
                "c4",
                "ask",
                serde_json::json!({
                    "question": "Write b.txt?",
                    "options": [{"label": "Write it"}, {"label": "Not yet"}],
                    "plan_option": "Write it"
                }),
            ),
            write("c5"),
        ],
    )
    .await;
    server.shutdown().await;
    assert_eq!(r[0].content, "The user chose: Write it");
    assert!(!r[1].is_error, "{}", r[1].content);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("b.txt")).unwrap(),
        "done"
    );
    s.end_turn(TurnOutcome::Completed).await.unwrap();
    let (replay, _) = replay_storage(Arc::new(storage.clone()), Limits::default()).unwrap();
    assert!(!replay.plan_mode);
    // Ended by the person's choice in c4, and by nothing else.
    let ends: Vec<Option<String>> = events(&storage)
        .into_iter()
        .filter_map(|e| match e {
            Event::PlanMode {
                on: false, call, ..
            } => Some(call.map(|c| c.call_id)),
            _ => None,
        })
        .collect();
    assert_eq!(ends, [Some("c4".to_owned())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tools_call_carries_the_call_s_idempotency_key_in_its_meta() {
    let script = support::echo_meta_server();
    // No skip: without node or the SDK the server does not start and `start` fails the test.
    let server = start(
        "echo",
        &ServerConfig::new("node", vec![script.display().to_string()]),
    )
    .await;
    let storage = SimStorage::new();
    let mut s = session(
        &storage,
        registry_with(&server, None),
        Hooks::default(),
        Config::default(),
    );
    let session_id = s.session_id().to_owned();
    s.begin_turn("go").unwrap();
    let r = step(
        &mut s,
        vec![
            call("m1", "mcp__echo__echo_meta", serde_json::json!({})),
            call("m2", "mcp__echo__echo_meta", serde_json::json!({})),
        ],
    )
    .await;
    s.end_turn(TurnOutcome::Completed).await.unwrap();
    server.shutdown().await;

    let all = events(&storage);
    let mut keys = Vec::new();
    for (result, id) in r.iter().zip(["m1", "m2"]) {
        assert!(!result.is_error, "{}", result.content);
        let received: serde_json::Value = serde_json::from_str(&result.content)
            .unwrap_or_else(|e| panic!("the server echoes JSON ({e}): {}", result.content));
        let started = all
            .iter()
            .find_map(|e| match e {
                Event::Started(s) if s.call.call_id == id => Some(s),
                _ => None,
            })
            .expect("started");
        let key = runtime::event::idempotency_key(&session_id, &started.call);
        assert_eq!(started.idempotency_key, key);
        assert_eq!(
            received["io.tooljournal/idempotency-key"], key,
            "{received}"
        );
        // The progress token rides beside it.
        assert!(received.get("progressToken").is_some(), "{received}");
        keys.push(key);
    }
    assert_ne!(keys[0], keys[1]);
}
