//! The sandbox through the binary, as a user meets it: a model's `bash` calls under the default
//! `workspace-write` policy (`tooljournal run --script`), each refused by the kernel and shown
//! in the call's result with its exit status and stderr; the same calls allowed under
//! `danger-full-access`; an escalation approved and denied; a kernel feature missing (hidden
//! with `TOOLJOURNAL_SANDBOX_HIDE`), refused and then accepted with `--allow-unsandboxed`; a
//! SIGKILL mid-call, then the unknown call's bound in `recover classify --json` and the HTML
//! page. Fails, never skips, where the kernel lacks Landlock or namespaces.

use crate::common::recover_bin;
use runtime::event::{Event, Evidence, Record, SandboxBound, SandboxPolicy};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

struct Case {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    ws: PathBuf,
    journal: PathBuf,
    script: PathBuf,
}

impl Case {
    fn new() -> Case {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let ws = base.join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(base.join("private.txt"), "private bytes\n").unwrap();
        Case {
            journal: base.join("journal"),
            script: base.join("script.jsonl"),
            ws,
            base,
            _tmp: tmp,
        }
    }

    /// `tooljournal run --script` of one step whose calls are `calls` (id, arguments), with
    /// `approvals` on the step's line.
    fn run(
        &self,
        calls: &[(&str, Value)],
        approvals: Value,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Output {
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|(id, args)| json!({"id": id, "name": "bash", "arguments": args.to_string()}))
            .collect();
        let lines = [
            json!({"user": "go"}),
            json!({"assistant": {"text": "", "tool_calls": tool_calls, "stop_reason": "tool_use"},
                   "approvals": approvals}),
            json!({"assistant": {"text": "done", "tool_calls": [], "stop_reason": "end_turn"}}),
        ];
        let mut command = self.command(&lines, extra);
        command.env_remove("TOOLJOURNAL_SANDBOX_HIDE");
        for (k, v) in env {
            command.env(k, v);
        }
        command.output().unwrap()
    }

    /// `tooljournal run --script` of `lines` (written to the case's script) on the case, with
    /// `extra` flags.
    fn command(&self, lines: &[Value], extra: &[&str]) -> Command {
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        std::fs::write(&self.script, text.join("\n")).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_tooljournal"));
        command
            .args(["run", "--script"])
            .arg(&self.script)
            .arg("--workspace")
            .arg(&self.ws)
            .arg("--journal")
            .arg(&self.journal)
            .args(extra);
        command
    }

    /// [`Case::command`] started, its output dropped: for a test that kills it.
    fn spawn(&self, lines: &[Value], extra: &[&str]) -> std::process::Child {
        self.command(lines, extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }

    fn events(&self) -> Vec<Event> {
        let storage: std::sync::Arc<dyn journal::Storage> =
            std::sync::Arc::new(journal::FsStorage::open(&self.journal).unwrap());
        journal::Reader::open(storage, journal::Limits::default())
            .unwrap()
            .map(|r| r.unwrap().decode::<Record>().unwrap().event)
            .collect()
    }

    /// Each call's committed content.
    fn results(&self) -> BTreeMap<String, String> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Committed { call, result, .. } => Some((call.call_id, result.content)),
                _ => None,
            })
            .collect()
    }

    /// The bound each call's last `started` recorded.
    fn bounds(&self) -> BTreeMap<String, SandboxBound> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Started(s) => s.evidence.into_iter().find_map(|ev| match ev {
                    Evidence::Sandbox(b) => Some((s.call.call_id.clone(), b)),
                    _ => None,
                }),
                _ => None,
            })
            .collect()
    }

    fn session_sandbox(&self) -> Vec<SandboxBound> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Event::SessionSandbox(b) => Some(b),
                _ => None,
            })
            .collect()
    }
}

fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The five calls the issue names, against `case`, and a listener on loopback they may reach.
fn escapes(case: &Case, port: u16) -> Vec<(&'static str, Value)> {
    let base = case.base.display();
    let journal = case.journal.display();
    vec![
        (
            "w",
            json!({"command": format!("echo x > {base}/written.txt")}),
        ),
        ("j", json!({"command": format!("ls {journal}")})),
        ("r", json!({"command": format!("cat {base}/private.txt")})),
        (
            "n",
            json!({"command": format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")}),
        ),
        // Out of the call's process group, past its end: still inside the sandbox. The shell
        // waits until the process is in a session of its own: else the call's end, which kills
        // the call's group, could come first.
        (
            "b",
            json!({"command": format!(
                "setsid sh -c 'echo > begun.txt; sleep 0.3; echo late > {base}/late.txt && echo \
                 wrote > late-said.txt || echo refused > late-said.txt' > /dev/null 2>&1 & \
                 while [ ! -e begun.txt ]; do sleep 0.01; done"
            )}),
        ),
    ]
}

fn listener() -> (std::net::TcpListener, u16) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

#[test]
fn workspace_write_refuses_each_escape_and_the_call_shows_why() {
    let case = Case::new();
    let (listener, port) = listener();
    let out = case.run(&escapes(&case, port), json!({}), &[], &[]);
    assert!(out.status.success(), "{}", describe(&out));
    let results = case.results();
    for (id, refusal) in [
        ("w", "Permission denied"),
        ("j", "Permission denied"),
        ("r", "Permission denied"),
        ("n", "Network is unreachable"),
    ] {
        let content = &results[id];
        assert!(content.contains(refusal), "{id}: {content}");
        assert!(
            content.contains("\nexit status ") && !content.contains("exit status 0"),
            "{id}: {content}"
        );
        assert!(
            content.contains("the sandbox may have refused this"),
            "{id}: {content}"
        );
        assert!(content.contains("\"unsandboxed\": true"), "{id}: {content}");
    }
    assert!(!results["r"].contains("private bytes"));
    assert!(!results["j"].contains("segment"), "{}", results["j"]);
    assert!(!case.base.join("written.txt").exists());
    assert!(
        listener.accept().is_err(),
        "nothing reached the host's loopback listener"
    );
    wait_until("the left-behind process reported", || {
        std::fs::read_to_string(case.ws.join("late-said.txt")).is_ok()
    });
    assert_eq!(
        std::fs::read_to_string(case.ws.join("late-said.txt")).unwrap(),
        "refused\n"
    );
    assert!(!case.base.join("late.txt").exists());
    // The policy is journaled once for the session and again with every call.
    let session = case.session_sandbox();
    assert_eq!(session.len(), 1);
    assert_eq!(session[0].policy, SandboxPolicy::WorkspaceWrite);
    assert!(
        session[0].enforced && !session[0].network,
        "{:?}",
        session[0]
    );
    let ws = case.ws.display().to_string();
    assert_eq!(session[0].writable[0], ws);
    assert!(session[0]
        .writable
        .iter()
        .all(|w| !w.starts_with(&*case.journal.display().to_string())));
    let bounds = case.bounds();
    assert_eq!(bounds.len(), 5);
    assert!(bounds.values().all(|b| b == &session[0]));
}

#[test]
fn danger_full_access_lets_the_same_calls_through() {
    let case = Case::new();
    let (listener, port) = listener();
    let out = case.run(
        &escapes(&case, port),
        json!({}),
        &["--sandbox", "danger-full-access"],
        &[],
    );
    assert!(out.status.success(), "{}", describe(&out));
    let results = case.results();
    assert!(results["r"].contains("private bytes"), "{}", results["r"]);
    assert!(results["j"].contains("segment"), "{}", results["j"]);
    assert!(results["n"].contains("connected"), "{}", results["n"]);
    assert!(case.base.join("written.txt").exists());
    let mut accepted = false;
    for _ in 0..100 {
        if let Ok((mut stream, _)) = listener.accept() {
            let mut buf = Vec::new();
            let _ = stream.read_to_end(&mut buf);
            accepted = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(accepted);
    let session = case.session_sandbox();
    assert_eq!(session[0].policy, SandboxPolicy::DangerFullAccess);
    assert!(!session[0].confines());
    assert!(case.bounds().values().all(|b| !b.confines()));
}

#[test]
fn an_escalation_runs_outside_only_when_approved() {
    let case = Case::new();
    let base = case.base.display();
    let escalate = |id: &str, file: &str| {
        (
            id.to_owned(),
            json!({"command": format!("echo x > {base}/{file}"), "unsandboxed": true}),
        )
    };
    let (a, a_args) = escalate("a", "approved.txt");
    let (d, d_args) = escalate("d", "denied.txt");
    let out = case.run(
        &[(a.as_str(), a_args), (d.as_str(), d_args)],
        json!({"a": "allow"}),
        &[],
        &[],
    );
    assert!(out.status.success(), "{}", describe(&out));
    assert!(case.base.join("approved.txt").exists());
    assert!(!case.base.join("denied.txt").exists());
    let results = case.results();
    assert!(
        results["d"].starts_with("POLICY_DENIED"),
        "{}",
        results["d"]
    );
    // The question named the command and said it would run unsandboxed; the answers and the
    // bound each attempt ran under are journaled.
    let events = case.events();
    let asked: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::AskPending { call, question } => Some((call.call_id.clone(), question.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    for (_, question) in &asked {
        assert!(question.contains("OUTSIDE the sandbox"), "{question}");
        assert!(question.contains("echo x >"), "{question}");
    }
    let bounds = case.bounds();
    assert!(
        bounds["a"].escalated && !bounds["a"].confines(),
        "{:?}",
        bounds["a"]
    );
    assert!(!bounds.contains_key("d"), "a denied call never started");
    // The session's own policy is unchanged, and the default approver never escalates: a
    // call with no scripted answer was denied even though `--approve allow` is the default.
    assert!(case.session_sandbox()[0].confines());
}

#[test]
fn a_kernel_without_landlock_refuses_to_start_unless_accepted_and_journaled() {
    let case = Case::new();
    let calls = [(
        "w",
        json!({"command": format!("echo x > {}/written.txt", case.base.display())}),
    )];
    let hide = [("TOOLJOURNAL_SANDBOX_HIDE", "landlock")];
    let out = case.run(&calls, json!({}), &[], &hide);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the kernel has no Landlock"), "{stderr}");
    assert!(stderr.contains("--allow-unsandboxed"), "{stderr}");
    let nothing_written = !case.journal.exists()
        || std::fs::read_dir(&case.journal).unwrap().all(|e| {
            !e.unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".segment")
        });
    assert!(nothing_written, "nothing was journaled");
    assert!(!case.base.join("written.txt").exists());

    let out = case.run(&calls, json!({}), &["--allow-unsandboxed"], &hide);
    assert!(out.status.success(), "{}", describe(&out));
    let session = case.session_sandbox();
    assert!(!session[0].enforced, "{:?}", session[0]);
    assert!(
        session[0].mechanism.contains("no Landlock"),
        "{}",
        session[0].mechanism
    );
    assert!(session[0].mechanism.contains("allow-unsandboxed"));
    assert!(
        session[0].network && session[0].writable.is_empty(),
        "{:?}",
        session[0]
    );
    assert!(
        case.base.join("written.txt").exists(),
        "unenforced, as journaled"
    );
    assert!(case.bounds()["w"].in_words().contains("was not enforced"));
}

#[test]
fn a_journal_a_command_could_read_refuses_the_session() {
    let case = Case::new();
    let inside = case.ws.join(".journal");
    std::fs::write(&case.script, json!({"user": "go"}).to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tooljournal"))
        .args(["run", "--script"])
        .arg(&case.script)
        .arg("--workspace")
        .arg(&case.ws)
        .arg("--journal")
        .arg(&inside)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(".journal lies inside"), "{stderr}");
    assert!(stderr.contains("--journal"), "{stderr}");
    let segments = std::fs::read_dir(&inside)
        .map(|d| {
            d.filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".segment")
            })
            .count()
        })
        .unwrap_or(0);
    assert_eq!(segments, 0, "nothing was journaled");
}

#[test]
fn a_killed_calls_bound_is_stated_by_classify_and_the_audit_page() {
    let case = Case::new();
    let lines = [
        json!({"user": "go"}),
        json!({"assistant": {"text": "", "tool_calls": [{"id": "k1", "name": "bash",
            "arguments": json!({"command": "echo started > started.txt; sleep 300"}).to_string()}],
            "stop_reason": "tool_use"}}),
    ];
    let mut child = case.spawn(&lines, &[]);
    wait_until("the command started", || {
        std::fs::read_to_string(case.ws.join("started.txt")).is_ok_and(|t| t.ends_with('\n'))
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let out = Command::new(recover_bin::recover_bin())
        .args(["classify", "--json"])
        .arg(&case.journal)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let ws = case.ws.display().to_string();
    let words = format!("its writes, if any, are confined to {ws}");
    assert!(text.contains(&words), "{}", describe(&out));
    assert!(text.contains("no network"), "{text}");
    let report: Value = serde_json::from_str(&text).unwrap();
    let call = report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["call_id"] == "k1")
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(call["classification"], "TOOL_OUTCOME_UNKNOWN", "{call}");
    assert!(call["bound"].as_str().unwrap().contains(&words), "{call}");
    // What the model is told of the call, in the history a resume would send.
    let out = Command::new(recover_bin::recover_bin())
        .args(["rebuild"])
        .arg(&case.journal)
        .args(["--format", "anthropic"])
        .output()
        .unwrap();
    let history = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(history.contains("TOOL_OUTCOME_UNKNOWN"), "{history}");
    assert!(history.contains(&words), "{history}");
    let page = case.base.join("audit.html");
    let out = Command::new(recover_bin::recover_bin())
        .args(["audit"])
        .arg(&case.journal)
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    // The page's data is JSON inside a script, its slashes escaped.
    assert!(
        html.contains(&words.replace('/', "\\/")),
        "the page states the bound"
    );
    assert!(Path::new(&page).exists());
}

/// `tooljournal run --script` of one step of MCP calls on the filesystem server, which is
/// allowed `base` (the workspace's parent) by its own arguments and may read it in the sandbox
/// (the server lists it as it starts); `sandbox_line` sets its policy. The journal must then
/// lie elsewhere ([`journal_apart`]).
fn run_fs_server(case: &Case, sandbox_line: &str, calls: &[(&str, Value)]) -> Output {
    let server = crate::common::mcp_support::filesystem_server();
    // The server's package (its node_modules): readable, or node cannot load it.
    let package = server.ancestors().nth(3).unwrap().canonicalize().unwrap();
    let config = case.base.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[sandbox]\nreadable = [{:?}, {:?}]\n\n[mcp_servers.fs]\ncommand = {:?}\nargs = [{:?}]\n{sandbox_line}\n",
            package.display().to_string(),
            case.base.display().to_string(),
            server.display().to_string(),
            case.base.display().to_string(),
        ),
    )
    .unwrap();
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(id, args)| {
            json!({"id": id, "name": "mcp__fs__write_file", "arguments": args.to_string()})
        })
        .collect();
    let lines = [
        json!({"user": "go"}),
        json!({"assistant": {"text": "", "tool_calls": tool_calls, "stop_reason": "tool_use"}}),
        json!({"assistant": {"text": "done", "tool_calls": [], "stop_reason": "end_turn"}}),
    ];
    case.command(&lines, &["--config", config.to_str().unwrap()])
        .output()
        .unwrap()
}

/// `case` with its journal in a directory of its own, outside `base`.
fn journal_apart(mut case: Case) -> (Case, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    case.journal = dir.path().join("journal");
    (case, dir)
}

#[test]
fn an_mcp_server_under_a_policy_is_confined_by_the_kernel_and_its_calls_say_so() {
    let calls = |case: &Case| {
        vec![
            (
                "out",
                json!({"path": case.base.join("outside.txt"), "content": "x"}),
            ),
            (
                "in",
                json!({"path": case.ws.join("inside.txt"), "content": "y"}),
            ),
        ]
    };
    // Unsandboxed, the server writes wherever its own arguments allow: the parent too.
    let (free, _j1) = journal_apart(Case::new());
    let out = run_fs_server(&free, "", &calls(&free));
    assert!(out.status.success(), "{}", describe(&out));
    assert!(free.base.join("outside.txt").exists());
    assert!(
        free.bounds().is_empty(),
        "an unsandboxed server's calls record no bound"
    );

    let (case, _j2) = journal_apart(Case::new());
    let out = run_fs_server(&case, "sandbox = \"workspace-write\"", &calls(&case));
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        !case.base.join("outside.txt").exists(),
        "the kernel refused the server"
    );
    let results = case.results();
    assert_eq!(
        std::fs::read_to_string(case.ws.join("inside.txt"))
            .ok()
            .as_deref(),
        Some("y"),
        "{results:?}"
    );
    assert!(
        results["out"].contains("EACCES") || results["out"].contains("permission denied"),
        "{}",
        results["out"]
    );
    let bounds = case.bounds();
    for id in ["out", "in"] {
        let b = &bounds[id];
        assert!(
            b.confines() && b.policy == SandboxPolicy::WorkspaceWrite,
            "{b:?}"
        );
        assert_eq!(b.writable[0], case.ws.display().to_string());
    }
}

#[test]
fn a_resume_runs_commands_under_the_journaled_policy() {
    let case = Case::new();
    let lines = [
        json!({"user": "go"}),
        json!({"assistant": {"text": "", "tool_calls": [{"id": "k1", "name": "bash",
            "arguments": json!({"command": "echo started > started.txt; sleep 300"}).to_string()}],
            "stop_reason": "tool_use"}}),
        json!({"assistant": {"text": "done", "tool_calls": [], "stop_reason": "end_turn"}}),
        // The turn the crash interrupts ends there; a resume goes on from the next one.
        json!({"user": "again"}),
        json!({"assistant": {"text": "", "tool_calls": [{"id": "k2", "name": "bash",
            "arguments": json!({"command": "echo x > after.txt"}).to_string()}],
            "stop_reason": "tool_use"}}),
        json!({"assistant": {"text": "done", "tool_calls": [], "stop_reason": "end_turn"}}),
    ];
    let mut child = case.spawn(&lines, &["--sandbox", "read-only", "--network"]);
    // Read-only: the command cannot write its mark, so the test waits for its `started`.
    wait_until("the command started", || started(&case.journal, "k1"));
    child.kill().unwrap();
    child.wait().unwrap();
    let resume = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_tooljournal"))
            .args(["resume", "--journal"])
            .arg(&case.journal)
            .arg("--script")
            .arg(&case.script)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = resume(&[]);
    assert!(out.status.success(), "{}", describe(&out));
    let sessions = case.session_sandbox();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    assert_eq!(
        sessions[1].policy,
        SandboxPolicy::ReadOnly,
        "reapplied as journaled"
    );
    assert!(sessions[1].network && sessions[1].writable.is_empty());
    assert!(!case.ws.join("after.txt").exists(), "read-only still");
    assert_eq!(case.bounds()["k2"], sessions[1]);
}

/// Whether `id`'s `started` is in the journal a live run is writing (read up to the first
/// record not yet whole).
fn started(journal: &Path, id: &str) -> bool {
    let Ok(storage) = journal::FsStorage::open(journal) else {
        return false;
    };
    let storage: std::sync::Arc<dyn journal::Storage> = std::sync::Arc::new(storage);
    let Ok(reader) = journal::Reader::open(storage, journal::Limits::default()) else {
        return false;
    };
    reader
        .map_while(Result::ok)
        .filter_map(|r| r.decode::<Record>().ok())
        .any(|r| matches!(r.event, Event::Started(s) if s.call.call_id == id))
}
