//! `tooljournal fuzz` through the binary: a transcript with a parallel batch
//! run many times with the real tools, its report, its determinism and its refusals.
//!
//! `tests/data/fuzz_batch.jsonl` sends one batch on a copy of `tests/data/fuzz_template`:
//! `b1` `bash sleep 30`, `r1` `read notes.txt`, `e1` `edit notes.txt`, `b2` `bash sleep 30`,
//! `w1` `write out/summary.txt`, `t1` `todo`. `bash` and `todo` are exclusive and the read and
//! the edit share a path, so the bodies run one after the other in that order. A stop the
//! moment body n begins (the harness's `AtBody(n)`, drawn for n < 4) stops that body and leaves
//! every call behind it never dispatched: `b1` or `b2` `ABORTED` for n = 0 or 3, and `w1` and
//! `t1` `ABORTED_BEFORE_DISPATCH` for every n. Each `sleep 30` carries `timeout_ms` 200, so a
//! case nobody stops never waits for it (it ends `TIMEOUT`).

use crate::common;
use crate::common::mcp_support as support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The seed the report test starts from: its [`CASES`] cases draw both stops above (a seed, not
/// luck: the same seed draws the same cases, and stops at events land the same way each run).
const SEED: u64 = 100;
/// Enough cases for both words from [`SEED`], few enough for a debug build on 2 cores (about
/// half a second each).
const CASES: u64 = 20;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `tooljournal fuzz ARGS`, with no configuration file of the user's in the way.
fn fuzz(args: &[&str]) -> Output {
    let config_home = tempfile::tempdir().unwrap();
    Command::new(common::fuzz_bin::tooljournal())
        .arg("fuzz")
        .args(args)
        .env("XDG_CONFIG_HOME", config_home.path())
        .output()
        .expect("the binary runs")
}

/// `fuzz_batch.jsonl` on its template, from `seed`, `cases` cases.
fn fuzz_batch(seed: u64, cases: u64) -> Output {
    fuzz(&[
        "--script",
        data("fuzz_batch.jsonl").to_str().unwrap(),
        "--workspace-template",
        data("fuzz_template").to_str().unwrap(),
        "--seed",
        &seed.to_string(),
        "--cases",
        &cases.to_string(),
    ])
}

/// The report's per-call lines (`id (tool): word n, word n`), by id.
fn outcomes(stdout: &str) -> BTreeMap<String, BTreeMap<String, u64>> {
    stdout
        .lines()
        .filter_map(|line| {
            let (call, words) = line.split_once("): ")?;
            let (id, _tool) = call.split_once(" (")?;
            let words = words
                .split(", ")
                .map(|w| {
                    let (word, n) = w.rsplit_once(' ').unwrap_or((w, "?"));
                    (word.to_owned(), n.parse().unwrap_or(0))
                })
                .collect();
            Some((id.to_owned(), words))
        })
        .collect()
}

#[test]
fn a_stopped_parallel_batch_reaches_aborted_and_aborted_before_dispatch_with_no_violation() {
    let out = fuzz_batch(SEED, CASES);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    // Not a terminal: no progress bar anywhere.
    assert!(!stderr.contains(" cases, violations"), "{stderr}");
    assert_eq!(
        stdout.lines().next(),
        Some(format!("first seed {SEED}").as_str())
    );
    assert_eq!(
        stdout.trim_end().lines().last(),
        Some(format!("cases: {CASES}, violations: 0").as_str()),
        "{stdout}"
    );
    let words = outcomes(&stdout);
    let count = |id: &str, word: &str| words.get(id).and_then(|w| w.get(word)).copied();
    for running in ["b1", "b2"] {
        assert!(
            count(running, "ABORTED") > Some(0),
            "{running} never stopped while running:\n{stdout}"
        );
    }
    for queued in ["w1", "t1"] {
        assert!(
            count(queued, "ABORTED_BEFORE_DISPATCH") > Some(0),
            "{queued} never aborted before dispatch:\n{stdout}"
        );
    }
    // The first body is never queued behind another.
    assert_eq!(count("b1", "ABORTED_BEFORE_DISPATCH"), None, "{stdout}");
    // The watched files' calls also ran to their end, so the truth check had effects to find.
    for done in ["e1", "w1", "t1"] {
        assert!(count(done, "ok") > Some(0), "{done} never ok:\n{stdout}");
    }
    // Every call the model sent has one word per case.
    for id in ["b1", "r1", "e1", "b2", "w1", "t1"] {
        let total: u64 = words.get(id).map_or(0, |w| w.values().sum());
        assert_eq!(total, CASES, "{id}:\n{stdout}");
    }
}

#[test]
fn the_same_seed_prints_the_same_report_byte_for_byte() {
    let first = fuzz_batch(SEED + 100, 6);
    let second = fuzz_batch(SEED + 100, 6);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    assert_eq!(
        text(&first.stdout),
        text(&second.stdout),
        "stderr:\n{}",
        text(&second.stderr)
    );
    assert!(
        text(&first.stdout).contains("b1 (bash): "),
        "{}",
        text(&first.stdout)
    );
}

#[test]
fn a_transcript_that_cannot_be_used_exits_2_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |args: &[&str], said: &[&str]| {
        let out = fuzz(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        for s in said {
            assert!(stderr.contains(s), "{args:?}: {s:?} not in {stderr}");
        }
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    };

    let missing = dir.path().join("no-such.jsonl");
    let missing = missing.to_str().unwrap();
    refused(
        &["--script", missing],
        &[missing, "cannot read the transcript"],
    );

    let bad_line = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad_line,
        "{\"user\": \"hi\"}\n{\"assistant\": {\"tool_calls\": 3}}\n",
    )
    .unwrap();
    let bad_line = bad_line.to_str().unwrap();
    refused(&["--script", bad_line], &[&format!("{bad_line}:2")]);

    let no_user = dir.path().join("no-user.jsonl");
    std::fs::write(
        &no_user,
        "{\"assistant\": {\"text\": \"hi\", \"stop_reason\": \"end_turn\"}}\n",
    )
    .unwrap();
    let no_user = no_user.to_str().unwrap();
    refused(&["--script", no_user], &[no_user, "line 1"]);

    let script = data("fuzz_batch.jsonl");
    let template = dir.path().join("no-such-template");
    refused(
        &[
            "--script",
            script.to_str().unwrap(),
            "--workspace-template",
            template.to_str().unwrap(),
        ],
        &[template.to_str().unwrap()],
    );
}

/// `tooljournal fuzz` is `tooljournal-fuzz` found beside the binary: a copy of `tooljournal`
/// alone in a directory still checks the configuration file whole, as every command does (an
/// unknown key that `tooljournal-fuzz` itself would not read is refused, exit 1), and then says
/// where it looked for the harness; its help needs no harness.
#[test]
fn without_the_harness_beside_it_fuzz_checks_the_configuration_then_names_the_missing_binary() {
    let dir = tempfile::tempdir().unwrap();
    let alone = dir.path().join("tooljournal");
    std::fs::copy(env!("CARGO_BIN_EXE_tooljournal"), &alone).unwrap();
    let script = data("fuzz_batch.jsonl");
    let run = |extra: &[&str]| {
        let config_home = dir.path().join("no-config");
        Command::new(&alone)
            .args(["fuzz", "--script", script.to_str().unwrap()])
            .args(extra)
            .env("XDG_CONFIG_HOME", &config_home)
            .output()
            .expect("the copy runs")
    };

    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[mcp_server.fs]\ncommand = \"node\"\n").unwrap();
    let out = run(&["--config", config.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(config.to_str().unwrap()), "{stderr}");
    assert!(stderr.contains("mcp_server"), "{stderr}");

    let out = run(&[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let expected = dir.path().join("tooljournal-fuzz");
    assert!(
        stderr.contains(&format!("there is none at {}", expected.display())),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));

    let help = Command::new(&alone)
        .args(["fuzz", "--help"])
        .output()
        .expect("the copy runs");
    assert_eq!(help.status.code(), Some(0), "{}", text(&help.stderr));
    assert!(text(&help.stdout).contains("--workspace-template"));
}

/// Writes `lines` as a transcript in `dir` and fuzzes it for `cases` cases from `seed`, with the
/// configuration `config` (TOML) if given.
fn fuzz_lines(
    dir: &std::path::Path,
    lines: &[serde_json::Value],
    config: Option<&str>,
    seed: u64,
    cases: u64,
) -> Output {
    let script = dir.join("transcript.jsonl");
    let text_of: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&script, text_of.join("\n")).unwrap();
    let (seed, cases) = (seed.to_string(), cases.to_string());
    let mut args = vec![
        "--script",
        script.to_str().unwrap(),
        "--seed",
        &seed,
        "--cases",
        &cases,
    ];
    let config_file = dir.join("config.toml");
    if let Some(config) = config {
        std::fs::write(&config_file, config).unwrap();
        args.extend(["--config", config_file.to_str().unwrap()]);
    }
    fuzz(&args)
}

/// `write` writes a.txt, then an MCP filesystem server's `write_file` rewrites it; `declared`
/// is the configuration's word on that tool (`read_only = true`: a lie).
fn written_then_rewritten_by_mcp(read_only: bool) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut config = format!(
        "[mcp_servers.fs]\ncommand = {:?}\nargs = [\".\"]\n",
        support::filesystem_server().display().to_string()
    );
    if read_only {
        config.push_str("[mcp_servers.fs.tools.write_file]\nread_only = true\n");
    }
    let lines = [
        serde_json::json!({"user": "Write it, then let the server change it."}),
        serde_json::json!({"assistant": {"text": "Writing.", "tool_calls": [
            {"id": "w1", "name": "write", "arguments": r#"{"path": "a.txt", "content": "one"}"#}
        ], "stop_reason": "tool_use"}}),
        serde_json::json!({"assistant": {"text": "Server.", "tool_calls": [
            {"id": "m1", "name": "mcp__fs__write_file", "arguments": r#"{"path": "a.txt", "content": "two"}"#}
        ], "stop_reason": "tool_use"}}),
        serde_json::json!({"assistant": {"text": "Done.", "stop_reason": "end_turn"}}),
    ];
    fuzz_lines(dir.path(), &lines, Some(&config), 1, 20)
}

#[test]
fn a_tool_declared_read_only_that_writes_is_a_violation_shrunk_and_exit_1() {
    let out = written_then_rewritten_by_mcp(true);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(stdout.starts_with("first seed 1\n"), "{stdout}");
    assert!(stdout.contains("truth ("), "{stdout}");
    assert!(stdout.contains("\"a.txt\""), "{stdout}");
    assert!(stdout.contains("shrunk case, as a transcript:"), "{stdout}");
    assert!(stdout.trim_end().ends_with(", violations: 1"), "{stdout}");
    assert!(
        text(&out.stderr).contains("--seed"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_tool_that_may_write_leaves_the_files_it_may_touch_unknown_no_violation() {
    // Not declared read-only: the server's call may have changed any watched file, so the
    // rewrite is explained; and a `bash` call rewriting a written file is explained the same way.
    let out = written_then_rewritten_by_mcp(false);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(outcomes(&stdout)["m1"].get("ok") > Some(&0), "{stdout}");
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        serde_json::json!({"user": "Write it, then let the shell change it."}),
        serde_json::json!({"assistant": {"text": "Writing.", "tool_calls": [
            {"id": "w1", "name": "write", "arguments": r#"{"path": "a.txt", "content": "one"}"#}
        ], "stop_reason": "tool_use"}}),
        serde_json::json!({"assistant": {"text": "Shell.", "tool_calls": [
            {"id": "b1", "name": "bash", "arguments": r#"{"command": "echo two > a.txt"}"#}
        ], "stop_reason": "tool_use"}}),
        serde_json::json!({"assistant": {"text": "Done.", "stop_reason": "end_turn"}}),
    ];
    let out = fuzz_lines(dir.path(), &lines, None, 1, 20);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(outcomes(&stdout)["b1"].get("ok") > Some(&0), "{stdout}");
}

#[test]
fn mcp_tools_of_the_configuration_run_in_every_case_beside_the_built_ins() {
    // The server starts once; every case's session, on a runtime of its own, calls it.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
            support::everything_server().display().to_string()
        ),
    )
    .unwrap();
    let script = dir.path().join("mcp.jsonl");
    let lines = [
        serde_json::json!({"user": "Echo, write, echo."}),
        serde_json::json!({"assistant": {"text": "All three.", "tool_calls": [
            {"id": "m1", "name": "mcp__everything__echo", "arguments": r#"{"message": "hi"}"#},
            {"id": "w1", "name": "write", "arguments": r#"{"path": "a.txt", "content": "one"}"#},
            {"id": "m2", "name": "mcp__everything__echo", "arguments": r#"{"message": "again"}"#}
        ], "stop_reason": "tool_use"}}),
        serde_json::json!({"assistant": {"text": "Done.", "stop_reason": "end_turn"}}),
    ];
    let text_of: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&script, text_of.join("\n")).unwrap();
    let out = fuzz(&[
        "--script",
        script.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--seed",
        "3",
        "--cases",
        "15",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(
        stdout.trim_end().ends_with("cases: 15, violations: 0"),
        "{stdout}"
    );
    let words = outcomes(&stdout);
    for id in ["m1", "w1", "m2"] {
        let ok = words.get(id).and_then(|w| w.get("ok")).copied();
        assert!(ok > Some(0), "{id} never ok:\n{stdout}");
    }
}

#[test]
fn on_a_terminal_a_progress_bar_counts_the_cases_before_the_report() {
    use expectrl::Expect;
    // Slow enough cases that the bar is drawn: each stops a 30 s `sleep` (killed at its cancel
    // or its 200 ms limit).
    let config_home = tempfile::tempdir().unwrap();
    let mut command = std::process::Command::new(common::fuzz_bin::tooljournal());
    command
        .env("XDG_CONFIG_HOME", config_home.path())
        .env("TERM", "xterm")
        .args(["fuzz", "--script"])
        .arg(data("fuzz_batch.jsonl"))
        .arg("--workspace-template")
        .arg(data("fuzz_template"))
        .args(["--seed", "100", "--cases", "6"]);
    let mut session = expectrl::Session::spawn(command).expect("fuzz starts on a pty");
    session.set_expect_timeout(Some(std::time::Duration::from_secs(120)));
    // The bar's count, "N/6 cases", before the report.
    session
        .expect(expectrl::Regex("[0-9]/6 cases, violations: 0"))
        .expect("the progress bar counts the cases");
    session
        .expect("cases: 6, violations: 0")
        .expect("the report's last line");
    let status = session.get_process().wait().expect("reaped");
    assert!(
        matches!(status, expectrl::process::unix::WaitStatus::Exited(_, 0)),
        "{status:?}"
    );
}

/// Seed 40's first two cases lose the journal's disk as it opens (no body runs, a few ms each);
/// the third runs the `sleep`.
const SLOW_SEED: u64 = 40;

/// `--seconds` is a budget (issue "Bounded, never stuck", item 5): a case whose `sleep` outlasts
/// it is stopped at the deadline, reported as cancelled and counted as neither a pass nor a
/// violation (the cases before it are), and its `sleep` does not outlive the campaign.
#[test]
fn seconds_stop_a_case_running_at_the_deadline_and_leave_nothing_running() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    // An argument no other process has, to find this run's `sleep` by.
    let sleep = format!("60.{}", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("slow.jsonl");
    let lines = [
        serde_json::json!({"user": "Run the slow suite."}),
        serde_json::json!({"assistant": {"text": "Running.", "tool_calls": [
            {"id": "b1", "name": "bash", "arguments": format!(r#"{{"command": "sleep {sleep}"}}"#)}
        ], "stop_reason": "tool_use"}}),
        serde_json::json!({"assistant": {"text": "Done.", "stop_reason": "end_turn"}}),
    ];
    let text_of: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&script, text_of.join("\n")).unwrap();
    let config_home = tempfile::tempdir().unwrap();
    // Built (if it must be) before the clock starts.
    let tooljournal = common::fuzz_bin::tooljournal();
    let began = Instant::now();
    let mut child = Command::new(tooljournal)
        .args(["fuzz", "--seconds", "4", "--seed", &SLOW_SEED.to_string()])
        .arg("--script")
        .arg(&script)
        .env("XDG_CONFIG_HOME", config_home.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    // Not a timing assertion: the sleep is 60 s, and 4 s plus the stated slack (10 s) is far
    // below this bound; a campaign that waits for the sleep blows through it.
    let bound = Duration::from_secs(30);
    let ended = loop {
        if child.try_wait().unwrap().is_some() {
            break true;
        }
        if began.elapsed() > bound {
            let _ = child.kill();
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let took = began.elapsed();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let left = sleeping_with(&sleep);
    for pid in &left {
        // Not left behind for the machine, whatever the verdict.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        ended,
        "`fuzz --seconds 4` still ran after {bound:?}:\n{stdout}\n{stderr}"
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "took {took:?}\n{stdout}\n{stderr}"
    );
    assert!(left.is_empty(), "`sleep {sleep}` left running: {left:?}");
    let last = stdout.trim_end().lines().last().unwrap_or_default();
    let ran: u64 = last
        .strip_prefix("cases: ")
        .and_then(|r| r.strip_suffix(", violations: 0"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `cases: N, violations: 0` last:\n{stdout}"));
    // The case after the ones that ended is the one stopped (seed 42, unless a loaded machine
    // spent the budget sooner).
    let cancelled = format!(
        "cancelled at the deadline: 1 case (seed {}), stopped while it ran; neither passed nor \
         a violation, and not counted below",
        SLOW_SEED + ran
    );
    assert!(stdout.contains(&cancelled), "{stdout}");
    // It is in no tally: b1's words add up to the cases that ended.
    let words = outcomes(&stdout);
    let total: u64 = words.get("b1").map_or(0, |w| w.values().sum());
    assert_eq!(total, ran, "{stdout}");
}

/// Pids of the processes whose command line is `sleep ARG`.
fn sleeping_with(arg: &str) -> Vec<i32> {
    let wanted = format!("sleep\0{arg}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted.as_bytes())
        })
        .collect()
}
