//! The pipeline's commit rules (DESIGN.md §2, §7): results committed in model order one per call
//! id, progress before the result, what `session/open` records of each tool, duplicate call ids
//! refused before anything is written; each through the public API on a simulated disk, each
//! checking both the results and what the journal says.

use crate::common;

use common::pipeline::*;
use common::*;
use journal::SimStorage;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use tooljournal_runtime::event::{
    Event, ModelCall, StepOutcome, ToolSource, TurnOutcome, EVENT_SCHEMA_VERSION,
};
use tooljournal_runtime::Args;
use tooljournal_runtime::Hooks;
use tooljournal_runtime::Registry;
use tooljournal_runtime::{Config, RuntimeError};
use tooljournal_runtime::{Tool, ToolContext, ToolFuture, ToolOutput};

// ---------------------------------------------------------------------------------------------
// Commit order, progress, session structure.

#[tokio::test]
async fn results_are_committed_in_model_order_one_per_call_id() {
    let storage = SimStorage::new();
    let tools = vec![TestTool::ok("ok"), TestTool::ok("rm")];
    let hooks = Hooks {
        guards: vec![guard("no-rm", |i| (i.tool == "rm").then(|| "no".into()))],
        ..Hooks::default()
    };
    let mut s = session_on(&storage, registry(tools), hooks, Config::default());
    let ids = ["z9", "a1", "m5", "b2", "q0", "c3"];
    let calls = vec![
        call(ids[0], "ok", "{}"),
        call(ids[1], "unknown", "{}"),
        call(ids[2], "rm", "{}"),
        call(ids[3], "ok", r#"{"x":1}"#),
        call(ids[4], "ok", "{bad"),
        call(ids[5], "ok", ""),
    ];
    let r = one_step(&mut s, calls).await;
    let got: Vec<&str> = r.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(got, ids);
    let committed: Vec<(u64, String)> = events(&storage)
        .into_iter()
        .filter_map(|(seq, e)| match e {
            Event::Committed { call, .. } => Some((seq, call.call_id)),
            _ => None,
        })
        .collect();
    let order: Vec<&str> = committed.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(
        order, ids,
        "one committed event per call id, in model order"
    );
    assert!(committed.windows(2).all(|w| w[0].0 < w[1].0));
    for (c, r) in replay(&storage).calls().zip(&r) {
        assert_eq!(
            c.committed.as_ref().map(|c| c.content.as_str()),
            Some(r.content.as_str())
        );
    }
}

#[tokio::test]
async fn progress_is_delivered_before_the_result_and_late_progress_is_dropped() {
    let reported = Arc::new(Mutex::new(Vec::new()));
    let rep = reported.clone();
    let chatty = TestTool::with("chatty", move |_, ctx| {
        let rep = rep.clone();
        Box::pin(async move {
            for m in ["p1", "p2"] {
                rep.lock().unwrap().push(ctx.progress().report(m));
            }
            Ok(ToolOutput::text("done"))
        })
    });
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<bool>();
    let slot = Arc::new(Mutex::new(Some((go_rx, done_tx))));
    let late = TestTool::with("late", move |_, ctx| {
        let (go, done) = slot.lock().unwrap().take().expect("runs once");
        let sink = ctx.progress().clone();
        tokio::spawn(async move {
            go.await.unwrap();
            let _ = done.send(sink.report("too late"));
        });
        Box::pin(async { Ok(ToolOutput::text("done")) })
    });
    let log = Arc::new(Mutex::new(Vec::new()));
    let hooks = Hooks {
        observers: vec![watch("records", Mood::Record, &log)],
        ..Hooks::default()
    };
    let storage = SimStorage::new();
    let mut s = session_on(
        &storage,
        registry(vec![chatty, late]),
        hooks,
        Config::default(),
    );
    let r = one_step(
        &mut s,
        vec![call("c1", "chatty", "{}"), call("c2", "late", "{}")],
    )
    .await;
    assert!(r.iter().all(|r| !r.is_error));
    go_tx.send(()).unwrap();
    assert!(
        !done_rx.await.unwrap(),
        "a report after the result is refused"
    );
    assert_eq!(*reported.lock().unwrap(), [true, true]);
    assert_eq!(
        *log.lock().unwrap(),
        ["progress:c1:p1", "progress:c1:p2", "result:c1", "result:c2"]
    );
    assert_eq!(s.stats().observer_failures(), 0);
}

/// A tool with a chosen version and schemas, to see what `session/open` records.
struct Versioned {
    name: &'static str,
    version: &'static str,
    input: Value,
}

impl Tool for Versioned {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "versioned"
    }
    fn version(&self) -> &str {
        self.version
    }
    fn input_schema(&self) -> Value {
        self.input.clone()
    }
    fn execute(&self, _args: Args, _ctx: ToolContext) -> ToolFuture<'_> {
        Box::pin(async { Ok(ToolOutput::text("")) })
    }
}

#[tokio::test]
async fn session_open_records_each_tools_name_source_version_and_schema_hash() {
    let schema_a = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let schema_a_reordered: Value =
        serde_json::from_str(r#"{"properties": {"path": {"type": "string"}}, "type": "object"}"#)
            .unwrap();
    let mut reg = Registry::new();
    let tool = |name, version, input: &Value| {
        Arc::new(Versioned {
            name,
            version,
            input: input.clone(),
        })
    };
    reg.register(tool("read", "1.2.0", &schema_a), ToolSource::BuiltIn)
        .unwrap();
    reg.register(
        tool("read_again", "7", &schema_a_reordered),
        ToolSource::BuiltIn,
    )
    .unwrap();
    let web = ToolSource::External {
        server: "mcp-web".into(),
    };
    reg.register(
        tool("search", "0.9", &json!({"type": "object"})),
        web.clone(),
    )
    .unwrap();
    let reg = Arc::new(reg);
    let storage = SimStorage::new();
    let s = session_on(&storage, reg.clone(), Hooks::default(), Config::default());
    s.close().await.unwrap();

    let open = replay(&storage).open.expect("session/open");
    assert_eq!(open.schema_version, EVENT_SCHEMA_VERSION);
    assert_eq!(open.session_id, "test-session");
    assert_eq!(open.tools, reg.descriptors());
    let seen: Vec<(&str, &ToolSource, &str)> = open
        .tools
        .iter()
        .map(|t| (t.name.as_str(), &t.source, t.version.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("read", &ToolSource::BuiltIn, "1.2.0"),
            ("read_again", &ToolSource::BuiltIn, "7"),
            ("search", &web, "0.9"),
        ]
    );
    let h: Vec<&str> = open.tools.iter().map(|t| t.schema_hash.as_str()).collect();
    for h in &h {
        assert_eq!(h.len(), 64);
        assert!(h.bytes().all(|b| b.is_ascii_hexdigit()));
    }
    assert_eq!(
        h[0], h[1],
        "the hash is over canonical JSON: key order does not matter"
    );
    assert_ne!(h[0], h[2], "different schemas, different hashes");
}

#[tokio::test]
async fn duplicate_call_ids_in_one_message_are_refused_before_anything_is_written() {
    let storage = SimStorage::new();
    let tool = TestTool::ok("t");
    let probe = tool.probe();
    let mut s = session_on(
        &storage,
        registry(vec![tool]),
        Hooks::default(),
        Config::default(),
    );
    s.begin_turn("go").unwrap();
    s.begin_step().unwrap();
    let before = s.event_log().journal().stats().appended_seq;
    let dup = vec![
        call("c1", "t", "{}"),
        call("c2", "t", "{}"),
        call("c1", "t", r#"{"x":1}"#),
    ];
    let err = s.run_batch(response(dup)).await.unwrap_err();
    assert!(
        matches!(&err, RuntimeError::InvalidResponse(m) if m.contains("c1")),
        "{err}"
    );
    assert_eq!(
        s.event_log().journal().stats().appended_seq,
        before,
        "nothing was written"
    );
    assert!(probe.runs().is_empty());

    // The step is still open and answerable with a valid message.
    let ok: Vec<ModelCall> = vec![call("c1", "t", "{}")];
    let r = s.run_batch(response(ok)).await.unwrap();
    assert!(!r[0].is_error);
    s.end_step(StepOutcome::Completed).unwrap();
    s.end_turn(TurnOutcome::Completed).await.unwrap();
    let rep = replay(&storage);
    let step = &rep.turns[0].steps[0];
    assert_eq!(step.response.as_ref().unwrap().tool_calls.len(), 1);
    assert_eq!(step.calls.len(), 1);
    assert_eq!(probe.runs(), ["c1"]);
}
