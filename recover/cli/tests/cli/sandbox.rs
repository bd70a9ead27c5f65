//! The sandbox bound (schema 11) through recovery: a `bash` call of unknown outcome is told
//! what its process could touch, `classify` and `audit` show it, and a probe that finds a file
//! changed names which other calls of unknown outcome could have written it.
//!
//! The journals are made by hand: `session/sandbox` right after `session/open`, then one step
//! whose calls each get `started` with their evidence and never settle.

use crate::common;

use common::{recover, start_call, text, Answered};
use journal::{FsStorage, Journal, Options};
use recover::{CallReport, Recovery, Verdict};
use runtime::event::{
    CallRef, Event, Evidence, ModelCall, ModelResponse, Record, Resources, SandboxBound,
    SandboxPolicy, SessionOpen, StopReason, EVENT_SCHEMA_VERSION,
};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn sha(bytes: &str) -> String {
    hex::encode(Sha256::digest(bytes.as_bytes()))
}

/// The mechanism journaled: with markup in it, which the page must show as text, and a newline,
/// which the tables must not break their line at.
const MECHANISM: &str = "landlock ABI 6;\n<b>user</b> and network namespaces";

fn bound(writable: &[&str]) -> SandboxBound {
    SandboxBound {
        policy: SandboxPolicy::WorkspaceWrite,
        enforced: true,
        writable: writable.iter().map(|w| (*w).to_owned()).collect(),
        readable: vec!["/usr".into()],
        network: false,
        mechanism: MECHANISM.into(),
        escalated: false,
    }
}

fn call(id: &str) -> CallRef {
    CallRef {
        turn: 1,
        step: 1,
        call_id: id.into(),
    }
}

/// A session `sbx` run in `workspace`, whose sandbox is `session` (none: no `session/sandbox`),
/// with one step whose calls `(id, tool, evidence)` each start and never settle.
fn forge(
    journal: &Path,
    workspace: &Path,
    session: Option<SandboxBound>,
    calls: &[(&str, &str, Vec<Evidence>)],
) {
    let (j, _) = Journal::open(
        Arc::new(FsStorage::create(journal).unwrap()),
        Options::default(),
    )
    .unwrap();
    let put = |event: Event| {
        j.append(&Record {
            at_ms: 1_000,
            event,
        })
        .unwrap()
    };
    put(Event::SessionOpen(SessionOpen {
        schema_version: EVENT_SCHEMA_VERSION,
        session_id: "sbx".into(),
        workspace: workspace.display().to_string(),
        tools: vec![],
    }));
    if let Some(b) = session {
        put(Event::SessionSandbox(b));
    }
    put(Event::TurnStart {
        turn: 1,
        user_text: "go".into(),
    });
    put(Event::StepStart { turn: 1, step: 1 });
    let arguments = json!({"command": "make"}).to_string();
    let response = put(Event::LlmResponse {
        turn: 1,
        step: 1,
        response: ModelResponse {
            text: "on it".into(),
            tool_calls: calls
                .iter()
                .map(|(id, tool, _)| ModelCall {
                    call_id: (*id).into(),
                    name: (*tool).into(),
                    arguments: arguments.clone(),
                })
                .collect(),
            stop_reason: StopReason::ToolUse,
        },
    });
    for (i, (id, tool, evidence)) in calls.iter().enumerate() {
        let at = Answered {
            response,
            index: i as u32,
            tool,
            raw_arguments: &arguments,
        };
        start_call(&put, &call(id), at, "sbx", evidence.clone());
    }
    j.close().unwrap();
}

/// The fixture: a workspace (its path resolved) whose `a.txt` holds what neither call that
/// would write it recorded, and a journal with
/// - `b1`, a bash call whose sandbox could write the workspace;
/// - `b2`, a bash call whose sandbox could write only `/tmp/sbx-elsewhere`;
/// - `w1`, a write of `a.txt` (`changed` when probed);
/// - `m1`, a call that recorded nothing (its text is as it always was).
struct Fixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    journal: PathBuf,
    inside: SandboxBound,
    outside: SandboxBound,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    std::fs::write(ws.join("a.txt"), "someone else's text\n").unwrap();
    let inside = bound(&[ws.to_str().unwrap(), "/tmp/sbx-s"]);
    let outside = bound(&["/tmp/sbx-elsewhere"]);
    let journal = dir.path().join("journal");
    let replace = Evidence::FileReplace {
        path: "a.txt".into(),
        before_sha256: Some(sha("the old text\n")),
        after_sha256: sha("the new text\n"),
    };
    forge(
        &journal,
        &ws,
        Some(inside.clone()),
        &[
            ("b1", "bash", vec![Evidence::Sandbox(inside.clone())]),
            ("b2", "bash", vec![Evidence::Sandbox(outside.clone())]),
            ("w1", "write", vec![replace]),
            ("m1", "mcp", vec![]),
        ],
    );
    Fixture {
        _dir: dir,
        ws,
        journal,
        inside,
        outside,
    }
}

fn report<'a>(calls: &'a [CallReport], id: &str) -> &'a CallReport {
    calls.iter().find(|c| c.call.call_id == id).unwrap()
}

fn by_id<'a>(v: &'a Value, id: &str) -> &'a Value {
    common::by_id(v, id)
}

fn run_json(args: &[&str]) -> Value {
    let out = recover(args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_result_of_a_call_of_unknown_outcome_states_its_bound_and_only_then() {
    let f = fixture();
    let r = Recovery::of(&f.journal).run().unwrap();
    let calls = &r.analysis.calls;
    let words = f.inside.in_words();
    assert_eq!(
        words,
        format!(
            "its writes, if any, are confined to {}, /tmp/sbx-s (workspace-write; a file's \
             mode, owner or times may have changed anywhere); no network",
            f.ws.display()
        )
    );
    assert_eq!(
        report(calls, "b1").result.content,
        format!(
            "TOOL_OUTCOME_UNKNOWN: the session was interrupted while this call was running: it \
             may have run, and its effects may have happened; {words}; it declared nothing it \
             would touch, so check whatever it could have changed; retry only if the call is \
             idempotent"
        )
    );
    assert!(report(calls, "b2")
        .result
        .content
        .contains("are confined to /tmp/sbx-elsewhere (workspace-write; "));
    // Without sandbox evidence, the bytes recovery always gave.
    let plain = recover::outcome_unknown_text(&Resources::default());
    assert_eq!(report(calls, "m1").result.content, plain);
    assert_eq!(
        plain,
        "TOOL_OUTCOME_UNKNOWN: the session was interrupted while this call was running: it may \
         have run, and its effects may have happened; it declared nothing it would touch, so \
         check whatever it could have changed; retry only if the call is idempotent"
    );
    assert_eq!(report(calls, "m1").sandbox, None);
    assert_eq!(report(calls, "b1").sandbox.as_ref(), Some(&f.inside));
    // The streamed classifier says the same, byte for byte, and appends the same recovery.
    let mut streamed: Vec<CallReport> = Vec::new();
    Recovery::of(&f.journal).stream(&mut streamed).unwrap();
    assert_eq!(&streamed, calls);
}

#[test]
fn classify_gives_the_bound_in_json_and_under_the_row() {
    let f = fixture();
    let j = f.journal.to_str().unwrap();
    let v = run_json(&["classify", j, "--dry-run", "--json"]);
    let b1 = by_id(&v, "b1");
    assert_eq!(b1["bound"], f.inside.in_words(), "{b1}");
    assert_eq!(
        b1["sandbox"],
        json!({
            "policy": "workspace-write",
            "enforced": true,
            "writable": f.inside.writable,
            "readable": ["/usr"],
            "network": false,
            "mechanism": MECHANISM,
            "escalated": false,
        })
    );
    assert_eq!(
        by_id(&v, "b2")["sandbox"]["writable"],
        json!(["/tmp/sbx-elsewhere"])
    );
    for id in ["w1", "m1"] {
        let c = by_id(&v, id);
        assert!(
            c.get("bound").is_none() && c.get("sandbox").is_none(),
            "{c}"
        );
    }
    // The streamed listing is what the whole analysis prints.
    let r = Recovery::of(&f.journal).run().unwrap();
    assert_eq!(v, recover::classify_json(j, &r.analysis));

    let table = text(&recover(&["classify", j, "--dry-run"]).stdout);
    let lines: Vec<&str> = table.lines().collect();
    let row = lines.iter().position(|l| l.starts_with("b1 ")).unwrap();
    assert_eq!(
        lines[row + 1].trim_start(),
        format!("sandbox: {}", f.inside.in_words()),
        "{table}"
    );
    let m1 = lines.iter().position(|l| l.starts_with("m1 ")).unwrap();
    assert!(!lines[m1 + 1].contains("sandbox:"), "{table}");
}

#[test]
fn a_file_found_changed_names_the_calls_that_could_and_could_not_have_written_it() {
    let f = fixture();
    let (j, ws) = (f.journal.to_str().unwrap(), f.ws.to_str().unwrap());
    let v = run_json(&["classify", j, "--dry-run", "--json", "--probe", ws]);
    let w1 = &by_id(&v, "w1")["probe"];
    assert_eq!(w1["verdict"], "changed", "{w1}");
    let detail = w1["detail"].as_str().unwrap();
    assert!(
        detail.ends_with(
            "so something else changed it; of the other calls of unknown outcome that ran a \
             process, call b1 (turn 1, step 1) could have written it, and call b2 (turn 1, step \
             1) could not: it lies outside its writable roots"
        ),
        "{detail}"
    );
    // A bash call has nothing a probe can compare: its detail states its bound, and its
    // result states it once.
    let b1 = &by_id(&v, "b1")["probe"];
    assert_eq!(b1["verdict"], "no_evidence");
    assert_eq!(
        b1["detail"],
        format!(
            "the call recorded nothing that can be checked; as journaled before it ran, {}",
            f.inside.in_words()
        )
    );
    let r = Recovery::of(&f.journal).probe(Some(&f.ws)).run().unwrap();
    assert_eq!(v, recover::classify_json(j, &r.analysis));
    let content = &report(&r.analysis.calls, "b1").result.content;
    assert_eq!(
        content.matches(&f.inside.in_words()).count(),
        1,
        "{content}"
    );
    let w1 = report(&r.analysis.calls, "w1");
    assert_eq!(w1.probe.as_ref().unwrap().verdict, Verdict::Changed);
    assert!(w1
        .result
        .content
        .contains("call b2 (turn 1, step 1) could not"));

    // Recovered, then probed again as an earlier recovery's calls: the same words, the tree
    // and the stream alike.
    let written = Recovery::of(&f.journal)
        .write(true)
        .probe(Some(&f.ws))
        .run()
        .unwrap();
    assert!(written.appended);
    let again = Recovery::of(&f.journal).probe(Some(&f.ws)).run().unwrap();
    let mut streamed: Vec<CallReport> = Vec::new();
    Recovery::of(&f.journal)
        .probe(Some(&f.ws))
        .stream(&mut streamed)
        .unwrap();
    assert_eq!(streamed, again.analysis.calls);
    let w1 = report(&streamed, "w1");
    assert!(w1.recovered, "committed by the recovery just written");
    assert_eq!(
        w1.probe.as_ref().unwrap().detail,
        by_id(&v, "w1")["probe"]["detail"]
    );
    assert_eq!(report(&streamed, "b2").sandbox.as_ref(), Some(&f.outside));
}

/// The words on `w1`'s probe of `ws`, by the whole analysis; the streamed reading and
/// `classify --probe` say the same.
fn w1_probed_in(journal: &Path, ws: &Path) -> recover::Probe {
    let r = Recovery::of(journal).probe(Some(ws)).run().unwrap();
    let mut streamed: Vec<CallReport> = Vec::new();
    Recovery::of(journal)
        .probe(Some(ws))
        .stream(&mut streamed)
        .unwrap();
    assert_eq!(streamed, r.analysis.calls);
    let (j, at) = (journal.to_str().unwrap(), ws.to_str().unwrap());
    let v = run_json(&["classify", j, "--dry-run", "--json", "--probe", at]);
    let probe = report(&r.analysis.calls, "w1").probe.clone().unwrap();
    assert_eq!(by_id(&v, "w1")["probe"]["detail"], probe.detail);
    probe
}

/// A probe of a copy of the workspace elsewhere (a backup, the fuzz harness's laid-out world)
/// compares a changed file with the bounds where the session ran it, as session/open journaled
/// the workspace: the copy's own path lies under no journaled root.
#[test]
fn a_probe_of_a_copy_elsewhere_names_the_calls_as_where_the_session_ran() {
    let f = fixture();
    let copy = f.journal.parent().unwrap().join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::copy(f.ws.join("a.txt"), copy.join("a.txt")).unwrap();
    let said = "of the other calls of unknown outcome that ran a process, call b1 (turn 1, step \
                1) could have written it, and call b2 (turn 1, step 1) could not: it lies \
                outside its writable roots";
    for ws in [&f.ws, &copy] {
        let probe = w1_probed_in(&f.journal, ws);
        assert_eq!(probe.verdict, Verdict::Changed);
        assert!(
            probe.detail.ends_with(said),
            "{}: {}",
            ws.display(),
            probe.detail
        );
        assert_eq!(
            probe.ruled_out,
            vec![("a.txt".to_owned(), vec![call("b2")])]
        );
    }

    // A journal whose workspace is relative (as an embedding may give it) says nowhere the
    // roots can be compared with: the probed root stands in, so only a probe in place names b1.
    let relative = f.journal.parent().unwrap().join("relative");
    let replace = Evidence::FileReplace {
        path: "a.txt".into(),
        before_sha256: None,
        after_sha256: sha("the new text\n"),
    };
    forge(
        &relative,
        Path::new("."),
        None,
        &[
            ("b1", "bash", vec![Evidence::Sandbox(f.inside.clone())]),
            ("w1", "write", vec![replace]),
        ],
    );
    let in_place = w1_probed_in(&relative, &f.ws);
    assert!(
        in_place
            .detail
            .ends_with("call b1 (turn 1, step 1) could have written it"),
        "{}",
        in_place.detail
    );
    assert!(in_place.ruled_out.is_empty());
    let elsewhere = w1_probed_in(&relative, &copy);
    assert_eq!(
        elsewhere.ruled_out,
        vec![("a.txt".to_owned(), vec![call("b1")])]
    );
}

/// Appends to `journal` a second turn whose one call, `b9` (bash, under `bound`), starts and
/// never settles: what a resume that crashed again leaves after the first recovery.
fn crash_again(journal: &Path, bound: &SandboxBound) {
    let (j, _) = Journal::open(
        Arc::new(FsStorage::open(journal).unwrap()),
        Options::default(),
    )
    .unwrap();
    let put = |event: Event| {
        j.append(&Record {
            at_ms: 2_000,
            event,
        })
        .unwrap()
    };
    put(Event::TurnStart {
        turn: 2,
        user_text: "again".into(),
    });
    put(Event::StepStart { turn: 2, step: 1 });
    let response = put(Event::LlmResponse {
        turn: 2,
        step: 1,
        response: ModelResponse {
            text: "on it".into(),
            tool_calls: vec![ModelCall {
                call_id: "b9".into(),
                name: "bash".into(),
                arguments: "{}".into(),
            }],
            stop_reason: StopReason::ToolUse,
        },
    });
    let c = CallRef {
        turn: 2,
        step: 1,
        call_id: "b9".into(),
    };
    let at = Answered {
        response,
        index: 0,
        tool: "bash",
        raw_arguments: "{}",
    };
    start_call(&put, &c, at, "sbx", vec![Evidence::Sandbox(bound.clone())]);
    j.close().unwrap();
}

/// A call an earlier recovery committed is probed among the calls known of unknown outcome as
/// of that recovery (a streamed reading has read no further when it reports it); this run's
/// orphans are probed among them all.
#[test]
fn an_earlier_recovery_s_call_is_probed_among_the_calls_known_as_of_it() {
    let f = fixture();
    let written = Recovery::of(&f.journal).write(true).run().unwrap();
    assert!(written.appended);
    crash_again(&f.journal, &f.inside);
    let r = Recovery::of(&f.journal).probe(Some(&f.ws)).run().unwrap();
    let mut streamed: Vec<CallReport> = Vec::new();
    Recovery::of(&f.journal)
        .probe(Some(&f.ws))
        .stream(&mut streamed)
        .unwrap();
    assert_eq!(streamed, r.analysis.calls);
    let w1 = report(&streamed, "w1");
    assert!(w1.recovered);
    let detail = &w1.probe.as_ref().unwrap().detail;
    assert!(
        detail.contains("call b1 (turn 1, step 1) could have written it"),
        "{detail}"
    );
    assert!(!detail.contains("call b9"), "{detail}");
    let b9 = report(&streamed, "b9");
    assert_eq!(b9.sandbox.as_ref(), Some(&f.inside));
    assert!(b9.result.content.contains(&f.inside.in_words()));
}

#[test]
fn a_file_outside_every_bound_is_said_so_and_without_bounds_nothing_changes() {
    let f = fixture();
    let dir = f.journal.parent().unwrap().join("all");
    let replace = Evidence::FileReplace {
        path: "a.txt".into(),
        before_sha256: None,
        after_sha256: sha("the new text\n"),
    };
    forge(
        &dir,
        &f.ws,
        None,
        &[
            ("b1", "bash", vec![Evidence::Sandbox(f.outside.clone())]),
            ("w1", "write", vec![replace]),
            ("b3", "bash", vec![Evidence::Sandbox(f.outside.clone())]),
        ],
    );
    let r = Recovery::of(&dir).probe(Some(&f.ws)).run().unwrap();
    let detail = &report(&r.analysis.calls, "w1")
        .probe
        .as_ref()
        .unwrap()
        .detail;
    assert!(
        detail.ends_with(
            "call b1 (turn 1, step 1), call b3 (turn 1, step 1) could not have written it: it \
             lies outside their writable roots"
        ),
        "{detail}"
    );
    // Without sandbox evidence anywhere, a changed file's words are as they always were.
    let plain = f.journal.parent().unwrap().join("plain");
    let replace = Evidence::FileReplace {
        path: "a.txt".into(),
        before_sha256: None,
        after_sha256: sha("the new text\n"),
    };
    forge(
        &plain,
        &f.ws,
        None,
        &[("w1", "write", vec![replace]), ("m1", "mcp", vec![])],
    );
    let r = Recovery::of(&plain).probe(Some(&f.ws)).run().unwrap();
    let detail = &report(&r.analysis.calls, "w1")
        .probe
        .as_ref()
        .unwrap()
        .detail;
    assert!(detail.ends_with("so something else changed it"), "{detail}");
}

#[test]
fn audit_states_the_session_sandbox_once_and_each_call_s_bound() {
    let f = fixture();
    let j = f.journal.to_str().unwrap();
    let v = run_json(&["audit", j, "--json"]);
    assert_eq!(v["sandbox"]["policy"], "workspace-write", "{v}");
    assert_eq!(v["sandbox"]["enforced"], true);
    assert_eq!(v["sandbox"]["mechanism"], MECHANISM);
    assert_eq!(v["sandbox"]["writable"], json!(f.inside.writable));
    let evidence = &by_id(&v, "b2")["evidence"][0];
    assert_eq!(evidence["kind"], "sandbox", "{evidence}");
    assert_eq!(evidence["bound"], f.outside.in_words());
    assert_eq!(evidence["writable"], json!(["/tmp/sbx-elsewhere"]));
    // The whole analysis' audit is the streamed one.
    let r = Recovery::of(&f.journal).run().unwrap();
    assert_eq!(v, recover::audit_json(j, &r.analysis));

    let table = text(&recover(&["audit", j]).stdout);
    let session = format!(
        "sandbox: workspace-write, enforced by {} (writable: {}, /tmp/sbx-s; no network)",
        MECHANISM.replace('\n', " "),
        f.ws.display()
    );
    assert_eq!(table.lines().nth(1), Some(session.as_str()), "{table}");
    assert_eq!(
        table.matches("sandbox: workspace-write").count(),
        1,
        "{table}"
    );
    let b1 = format!("; evidence: sandbox: {}", f.inside.in_words());
    assert!(table.contains(&b1), "{table}");
    assert_eq!(table, recover::audit_text(j, &r.analysis));

    // A journal without `session/sandbox`: null, and no line for it.
    let none = f.journal.parent().unwrap().join("none");
    forge(&none, &f.ws, None, &[("m1", "mcp", vec![])]);
    let v = run_json(&["audit", none.to_str().unwrap(), "--json"]);
    assert_eq!(v["sandbox"], Value::Null, "{v}");
    let table = text(&recover(&["audit", none.to_str().unwrap()]).stdout);
    assert!(!table.contains("sandbox"), "{table}");
}

/// The JSON of the page's data block opened by `open` (its text up to `</script>`).
fn block(page: &str, open: &str) -> Value {
    let start = page.find(open).unwrap_or_else(|| panic!("{open}")) + open.len();
    let end = start + page[start..].find("</script>").unwrap();
    serde_json::from_str(&page[start..end]).unwrap()
}

#[test]
fn the_page_shows_the_session_sandbox_and_each_call_s_bound_as_text() {
    let f = fixture();
    let page_file = f.journal.parent().unwrap().join("audit.html");
    let out = recover(&[
        "audit",
        f.journal.to_str().unwrap(),
        "--html",
        page_file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&page_file).unwrap();
    // The mechanism's markup is data, never markup.
    assert!(
        !page.contains("<b>user"),
        "the journal's markup reached the page as markup"
    );
    let summary = block(
        &page,
        "<script type=\"application/json\" id=\"summary-data\">",
    );
    let sandbox = summary["sandbox"].as_str().unwrap();
    assert!(
        sandbox.starts_with(&format!(
            "sandbox: workspace-write, enforced by {MECHANISM}"
        )),
        "{sandbox}"
    );
    let calls = block(&page, "<script type=\"application/json\" class=\"page\">");
    let b1 = calls
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["k"] == "call" && i["id"] == "b1")
        .unwrap();
    assert_eq!(
        b1["evidence"],
        json!([format!("sandbox: {}", f.inside.in_words())]),
        "{b1}"
    );
    // The script shows it in the summary.
    assert!(page.contains("dlRow(dl, 'Sandbox', summary.sandbox)"));
}
