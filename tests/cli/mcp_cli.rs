//! MCP servers from the npm registry, through the `tooljournal` binary and then `recover`'s
//! library: a transcript lists, reads and writes over MCP, a server is SIGKILLed mid-call, a
//! call is cancelled, a name collision and a bad configuration are refused; plan mode from the
//! command line. The journal, classification and rebuilt histories treat MCP calls exactly as
//! built-ins.

use crate::common::mcp_support as support;

use journal::{FsStorage, Limits};
use recover::providers::{request_body, stand_in_tools, validate, Format};
use runtime::event::{CallRef, Event, Record};
use runtime::state::CallState;
use runtime::ErrorCode;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn tooljournal() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tooljournal"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

struct Fixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    journal: PathBuf,
    config: PathBuf,
    script: PathBuf,
}

fn fixture(config: &str, script: &[Value]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    let config_path = dir.path().join("config.toml");
    std::fs::write(
        &config_path,
        config.replace("$WS", &ws.display().to_string()),
    )
    .unwrap();
    let script_path = dir.path().join("script.jsonl");
    let lines: Vec<String> = script
        .iter()
        .map(|l| l.to_string().replace("$WS", &ws.display().to_string()))
        .collect();
    std::fs::write(&script_path, lines.join("\n")).unwrap();
    Fixture {
        journal: dir.path().join("journal"),
        ws,
        config: config_path,
        script: script_path,
        _dir: dir,
    }
}

impl Fixture {
    fn command(&self) -> Command {
        let mut c = tooljournal();
        c.arg("run")
            .arg("--script")
            .arg(&self.script)
            .arg("--workspace")
            .arg(&self.ws)
            .arg("--journal")
            .arg(&self.journal)
            .arg("--config")
            .arg(&self.config)
            .arg("--json");
        c
    }

    fn run(&self) -> Output {
        self.command().output().expect("the binary runs")
    }
}

fn assistant(calls: Vec<(&str, &str, Value)>) -> Value {
    let calls: Vec<Value> = calls
        .into_iter()
        .map(|(id, name, args)| json!({"id": id, "name": name, "arguments": args.to_string()}))
        .collect();
    json!({"assistant": {"text": "", "tool_calls": calls, "stop_reason": "tool_use"}})
}

fn end() -> Value {
    json!({"assistant": {"text": "done", "tool_calls": [], "stop_reason": "end_turn"}})
}

fn fs_config() -> String {
    format!(
        "[mcp_servers.fs]\ncommand = {:?}\nargs = [\"$WS\"]\n",
        support::filesystem_server().display().to_string()
    )
}

fn everything_config() -> String {
    format!(
        "[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
        support::everything_server().display().to_string()
    )
}

fn recovered(journal: &Path) -> recover::Recovered {
    recover::Recovery::of(journal)
        .run()
        .unwrap_or_else(|e| panic!("{e:?}"))
}

fn report<'a>(r: &'a recover::Recovered, id: &str) -> &'a recover::CallReport {
    r.analysis
        .calls
        .iter()
        .find(|c| c.call.call_id == id)
        .unwrap_or_else(|| panic!("no call {id}"))
}

fn events(journal: &Path) -> Vec<Event> {
    let storage = Arc::new(FsStorage::open(journal).unwrap());
    journal::Reader::open(storage, Limits::default())
        .unwrap()
        .map(|r| r.unwrap().decode::<Record>().unwrap().event)
        .collect()
}

#[test]
fn a_transcript_lists_reads_and_writes_through_mcp_and_recovery_treats_it_like_a_built_in() {
    let f = fixture(
        &fs_config(),
        &[
            json!({"user": "look around, then write b.txt"}),
            assistant(vec![
                ("c1", "mcp__fs__list_directory", json!({"path": "$WS"})),
                (
                    "c2",
                    "mcp__fs__read_text_file",
                    json!({"path": "$WS/a.txt"}),
                ),
            ]),
            assistant(vec![
                (
                    "c3",
                    "mcp__fs__write_file",
                    json!({"path": "$WS/b.txt", "content": "written over MCP"}),
                ),
                ("c4", "read", json!({"path": "b.txt"})),
            ]),
            end(),
        ],
    );
    std::fs::write(f.ws.join("a.txt"), "hello over MCP").unwrap();
    let out = f.run();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(f.ws.join("b.txt")).unwrap(),
        "written over MCP",
        "the server really wrote"
    );
    let stderr_log = std::fs::read_to_string(f.journal.join("mcp-fs.stderr")).unwrap();
    assert!(
        stderr_log.contains("Secure MCP Filesystem Server"),
        "{stderr_log}"
    );

    let r = recovered(&f.journal);
    assert!(
        r.analysis.recovery.is_none(),
        "a finished session needs no recovery"
    );
    for id in ["c1", "c2", "c3", "c4"] {
        let c = report(&r, id);
        assert_eq!(c.state, CallState::Committed, "{id}");
        assert_eq!(c.classification, None, "{id}");
        assert!(!c.result.is_error, "{id}: {}", c.result.content);
    }
    assert!(report(&r, "c1").result.content.contains("a.txt"));
    assert!(report(&r, "c2").result.content.contains("hello over MCP"));
    assert!(report(&r, "c4").result.content.contains("written over MCP"));
    let mcp_intent = &report(&r, "c3").resources.intents;
    assert!(
        mcp_intent.iter().any(|i| i.contains("mcp fs write_file")),
        "{mcp_intent:?}"
    );

    let conversation = r.analysis.conversation();
    for format in Format::ALL {
        // Stand-ins for the tools called: Anthropic takes no tool calls without tools.
        let tools = stand_in_tools(&conversation);
        let body = request_body(&conversation, &tools, &Default::default(), format).value();
        validate(format, &body).unwrap_or_else(|v| panic!("{}: {v:?}", format.as_str()));
        assert!(
            body.to_string().contains("mcp__fs__write_file"),
            "{}",
            format.as_str()
        );
    }

    let audit = recover::audit_json("j", &r.analysis);
    let source = |id: &str| {
        audit["calls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["call_id"] == id)
            .unwrap()["source"]
            .clone()
    };
    assert_eq!(source("c3")["kind"], "mcp");
    assert_eq!(source("c3")["server"], "fs");
    assert_eq!(source("c3")["implementation"], "secure-filesystem-server");
    assert_eq!(source("c4")["kind"], "built-in");
    let table = recover::audit_text("j", &r.analysis);
    assert!(
        table.contains("mcp fs (secure-filesystem-server"),
        "{table}"
    );
}

/// The pid of `parent`'s child process whose command line holds `name`.
fn child_of(parent: u32, name: &str) -> Option<i32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`; comm may hold spaces, so split after the last ')'.
        let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
        let ppid = after.split_whitespace().nth(1).and_then(|p| p.parse().ok());
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if ppid == Some(parent) && String::from_utf8_lossy(&cmdline).contains(name) {
            return Some(pid);
        }
    }
    None
}

#[test]
fn a_server_killed_mid_call_settles_the_call_outcome_unknown_and_the_session_goes_on() {
    let f = fixture(
        &everything_config(),
        &[
            json!({"user": "run the long one"}),
            // Holds the session until the test closes the FIFO's write end.
            assistant(vec![("c0", "bash", json!({"command": "cat gate.fifo"}))]),
            assistant(vec![(
                "c1",
                "mcp__everything__trigger-long-running-operation",
                json!({"duration": 120, "steps": 120}),
            )]),
            assistant(vec![
                ("c2", "mcp__everything__echo", json!({"message": "anyone?"})),
                ("c3", "ls", json!({})),
            ]),
            end(),
        ],
    );
    let gate = f.ws.join("gate.fifo");
    nix::unistd::mkfifo(&gate, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let mut child = f
        .command()
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Opens once c0's `cat` has the FIFO open: the server is started and idle.
    let gate = open_when_read(&gate, &mut child);
    let server = child_of(child.id(), "mcp-server-everything")
        .expect("the MCP server is a child of the runtime");
    let server = nix::unistd::Pid::from_raw(server);
    nix::sys::signal::kill(server, nix::sys::signal::Signal::SIGSTOP).unwrap();
    drop(gate); // c0 reads to the end and the session goes on to c1
    wait_in_input(server.as_raw(), "\"tools/call\"", &mut child);
    nix::sys::signal::kill(server, nix::sys::signal::Signal::SIGKILL).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let r = recovered(&f.journal);
    assert!(!report(&r, "c0").result.is_error, "the gate call ran");
    let c1 = report(&r, "c1");
    assert_eq!(c1.state, CallState::Committed);
    assert_eq!(
        c1.result.code,
        Some(ErrorCode::ToolOutcomeUnknown),
        "{}",
        c1.result.content
    );
    assert!(
        c1.result.content.contains("had received the call"),
        "{}",
        c1.result.content
    );
    let c2 = report(&r, "c2");
    assert_eq!(
        c2.result.code,
        Some(ErrorCode::ToolFailed),
        "{}",
        c2.result.content
    );
    assert!(
        c2.result.content.contains("not sent"),
        "{}",
        c2.result.content
    );
    assert!(!report(&r, "c3").result.is_error, "the session went on");
    let table = recover::audit_text("j", &r.analysis);
    assert!(table.contains("committed TOOL_OUTCOME_UNKNOWN"), "{table}");
    for format in Format::ALL {
        let conv = r.analysis.conversation();
        let body = request_body(&conv, &stand_in_tools(&conv), &Default::default(), format);
        validate(format, &body.value()).unwrap();
    }
}

/// Opens the FIFO `path` for writing once a reader has it open, failing if `child` exits
/// first.
fn open_when_read(path: &Path, child: &mut std::process::Child) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // Non-blocking: ENXIO while nobody reads it (a blocking open would hang on a child
        // that died first).
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(path)
        {
            Ok(file) => return file,
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ENXIO as i32) => {}
            Err(e) => panic!("{}: {e}", path.display()),
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the session exited ({status}) before it read {}",
                path.display()
            );
        }
        assert!(
            Instant::now() < deadline,
            "nobody opened {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the unread input of process `pid` (its stdin, a pipe) holds `needle`, failing
/// if `child` exits first. The input is read without being taken: `tee(2)` copies what the
/// pipe holds into a pipe of the test's own.
fn wait_in_input(pid: i32, needle: &str, child: &mut std::process::Child) {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let input = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(format!("/proc/{pid}/fd/0"))
            .unwrap();
        let (copy, copy_in) = nix::unistd::pipe().unwrap();
        // EAGAIN while the pipe is empty.
        let copied = nix::fcntl::tee(
            &input,
            &copy_in,
            1 << 16,
            nix::fcntl::SpliceFFlags::SPLICE_F_NONBLOCK,
        )
        .unwrap_or(0);
        drop(copy_in);
        let mut held = String::new();
        if copied > 0 {
            std::fs::File::from(copy).read_to_string(&mut held).unwrap();
        }
        // Closed before the caller kills the process: the test holds no end of its pipe.
        drop(input);
        if held.contains(needle) {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the session exited ({status}) before {needle} reached process {pid}: {held:?}");
        }
        assert!(
            Instant::now() < deadline,
            "{needle} never reached process {pid}; its input holds {held:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_cancelled_mcp_call_sends_the_cancellation_and_settles_outcome_unknown() {
    let mut line = assistant(vec![(
        "c1",
        "mcp__everything__trigger-long-running-operation",
        json!({"duration": 120, "steps": 120}),
    )]);
    line["assistant"]["cancel_after_ms"] = json!(1500);
    let f = fixture(&everything_config(), &[json!({"user": "go"}), line, end()]);
    let out = f.run();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let committed: Vec<(CallRef, runtime::event::CommittedResult)> = events(&f.journal)
        .into_iter()
        .filter_map(|e| match e {
            Event::Committed { call, result, .. } => Some((call, result)),
            _ => None,
        })
        .collect();
    assert_eq!(committed.len(), 1);
    let result = &committed[0].1;
    assert_eq!(
        result.code,
        Some(ErrorCode::ToolOutcomeUnknown),
        "{}",
        result.content
    );
    assert!(
        result.content.contains("notifications/cancelled"),
        "{}",
        result.content
    );
}

#[test]
fn an_mcp_tool_renamed_to_a_built_in_name_is_refused_before_the_session_starts() {
    let config = format!(
        "{}[mcp_servers.fs.tools.read_text_file]\nname = \"read\"\n",
        fs_config()
    );
    let f = fixture(&config, &[json!({"user": "hi"}), end()]);
    let out = f.run();
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("\"read\"") && stderr.contains("built-in") && stderr.contains("fs"),
        "{stderr}"
    );
    assert!(
        !f.journal.join("00000000000000000000.segment").exists() || events(&f.journal).is_empty()
    );
}

/// A server that exits at once, before or after closing its input: the session does not start,
/// and the error says what happened and what to do, in our words, not the MCP library's.
/// Whether the request's write or the wait for its answer fails first is the kernel's race, so
/// either of the two sentences may come.
#[test]
fn a_server_that_exits_at_once_is_named_with_what_to_do() {
    let said = [
        "the server closed its input before `initialize` could be sent",
        "the server closed its output before it answered `initialize`",
    ];
    for script in ["exec 0<&-; sleep 0.5; exit 3", "exit 3"] {
        let config =
            format!("[mcp_servers.dead]\ncommand = \"sh\"\nargs = [\"-c\", \"{script}\"]\n");
        let f = fixture(&config, &[json!({"user": "hi"}), end()]);
        let out = f.run();
        assert_eq!(out.status.code(), Some(1), "{script}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains("MCP server dead: "), "{script}: {stderr}");
        assert!(
            said.iter().any(|s| stderr.contains(s)),
            "{script}: {stderr}"
        );
        assert!(stderr.contains("run `sh` by hand"), "{script}: {stderr}");
        for theirs in [
            "rmcp::",
            "Send message error",
            "TokioChildProcess",
            "connection closed:",
        ] {
            assert!(!stderr.contains(theirs), "{script}: {stderr}");
        }
    }
}

#[test]
fn a_bad_configuration_is_refused_naming_the_file() {
    let f = fixture(
        "[mcp_servers.fs]\ncommand = \"x\"\nparalel_safe = true\n",
        &[],
    );
    let out = f.run();
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("config.toml") && stderr.contains("paralel_safe"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
}

/// A plan question: approving the plan is its `plan_option`, and the write waits on it.
fn plan_question(ask: &str, write: &str, chosen: &str) -> Value {
    let question = json!({
        "question": "Plan: write a.txt. Go?",
        "options": [
            {"label": "approve", "description": "end plan mode and write a.txt"},
            {"label": "revise", "description": "stay in plan mode"}
        ],
        "plan_option": "approve"
    });
    let mut line = assistant(vec![
        (ask, "ask", question),
        (write, "write", json!({"path": "a.txt", "content": write})),
    ]);
    line["assistant"]["answers"] = json!({ask: {"choice": [chosen]}});
    line
}

#[test]
fn plan_mode_from_the_command_line_refuses_writes_until_the_plan_is_approved() {
    let f = fixture(
        "",
        &[
            json!({"user": "plan first"}),
            assistant(vec![(
                "c1",
                "write",
                json!({"path": "a.txt", "content": "too early"}),
            )]),
            // Another answer to the plan question leaves plan mode on: c3 is refused too.
            plan_question("c2", "c3", "revise"),
            plan_question("c4", "c5", "approve"),
            end(),
        ],
    );
    let out = f.command().arg("--plan-mode").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(f.ws.join("a.txt")).unwrap(), "c5");
    let all = events(&f.journal);
    let modes: Vec<(bool, Option<String>)> = all
        .iter()
        .filter_map(|e| match e {
            Event::PlanMode { on, call, .. } => {
                Some((*on, call.as_ref().map(|c| c.call_id.clone())))
            }
            _ => None,
        })
        .collect();
    assert_eq!(modes, [(true, None), (false, Some("c4".to_owned()))]);
    for id in ["c1", "c3"] {
        let rejected = all.iter().find_map(|e| match e {
            Event::Rejected {
                call, code, reason, ..
            } if call.call_id == id => Some((*code, reason.clone())),
            _ => None,
        });
        let (code, reason) = rejected.unwrap_or_else(|| panic!("{id} rejected"));
        assert_eq!(code, ErrorCode::PolicyDenied, "{id}");
        assert!(reason.contains("plan mode is on"), "{id}: {reason}");
    }
    // Both questions were answered (the person chose), and their answers are their results.
    let replies: Vec<(String, Vec<String>)> = all
        .iter()
        .filter_map(|e| match e {
            Event::AskReplied {
                call,
                reply: runtime::event::Reply::Answered(a),
            } => Some((call.call_id.clone(), a.choice.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        replies,
        [
            ("c2".to_owned(), vec!["revise".to_owned()]),
            ("c4".to_owned(), vec!["approve".to_owned()])
        ]
    );
}

#[test]
fn a_session_that_cannot_open_after_its_servers_started_stops_them_and_says_why() {
    let f = fixture(&fs_config(), &[json!({"user": "hi"}), end()]);
    // The spill store cannot be opened (a file where its directory goes): that is found after
    // the servers started.
    std::fs::create_dir_all(&f.journal).unwrap();
    std::fs::write(f.journal.join("spill"), "not a directory").unwrap();
    let out = f.run();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("spill"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    let log = std::fs::read_to_string(f.journal.join("mcp-fs.stderr")).unwrap();
    assert!(
        log.contains("Secure MCP Filesystem Server"),
        "the server had started: {log}"
    );
}

#[test]
fn a_journal_held_by_another_writer_is_refused_before_any_server_starts() {
    let f = fixture(&fs_config(), &[json!({"user": "hi"}), end()]);
    let storage = FsStorage::create(&f.journal).unwrap();
    let (held, _) = journal::Journal::open(Arc::new(storage), journal::Options::default()).unwrap();
    let out = f.run();
    drop(held);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "session is live (writer pid {})",
            std::process::id()
        )),
        "{stderr}"
    );
    assert!(
        !f.journal.join("mcp-fs.stderr").exists(),
        "no server was started for a session that could not have its journal"
    );
}
