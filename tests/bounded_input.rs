//! Bounded input: a transcript line is capped while it is read (a 100 MB line is refused with
//! the file and line named), so is one event of a provider's stream (a 300 MB event is refused
//! naming `[model] event_bytes_max`), and so is one line of another agent's session file (a
//! 100 MB line is refused by `recover import` and `repair` naming its line and the limit); the
//! refusing process never holds any of them whole.
//! The peak memory measured is the largest of every child this binary waited for, so each
//! test's bound holds for both children.

mod common;

use common::models::{shown, text, Case};
use common::recover_bin::recover_bin;
use mockllm::{Format, Reply};

use std::fs::File;
use std::io::{BufWriter, Write};
use std::process::Command;

/// The line's size, in bytes.
const HUGE_LINE_BYTES: usize = 100_000_000;
/// The most memory the refusing `tooljournal` may reach, in KiB (`ru_maxrss`'s unit on Linux).
const PEAK_RSS_KIB_MAX: i64 = 200 * 1024;
/// The most memory a run refusing a provider's 300 MB event may reach, in KiB.
const EVENT_PEAK_RSS_KIB_MAX: i64 = 128 * 1024;
/// The most memory `recover import` or `repair` refusing a long line may reach, in KiB.
const IMPORT_PEAK_RSS_KIB_MAX: i64 = 256 * 1024;

/// The largest peak memory of the children waited for so far, in KiB.
fn children_peak_kib() -> i64 {
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage")
        .max_rss()
}

#[test]
fn a_100_mb_transcript_line_is_refused_while_read_with_little_memory() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let script = dir.path().join("big.jsonl");
    let mut out = BufWriter::new(File::create(&script).unwrap());
    writeln!(out, "{{\"user\": \"hi\"}}").unwrap();
    // A valid JSON line, only too long: {"user": "aaaa…"}
    out.write_all(b"{\"user\": \"").unwrap();
    let chunk = vec![b'a'; 1 << 20];
    let mut written = 0;
    while written < HUGE_LINE_BYTES {
        out.write_all(&chunk).unwrap();
        written += chunk.len();
    }
    out.write_all(b"\"}\n").unwrap();
    out.into_inner().unwrap().sync_all().unwrap();

    let before = children_peak_kib();
    assert!(
        before < PEAK_RSS_KIB_MAX,
        "an earlier child already used {before} KiB"
    );
    let output = Command::new(env!("CARGO_BIN_EXE_tooljournal"))
        .arg("run")
        .arg("--script")
        .arg(&script)
        .arg("--workspace")
        .arg(&ws)
        .arg("--journal")
        .arg(dir.path().join("journal"))
        .output()
        .unwrap();
    let peak_kib = children_peak_kib();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    let expected = format!(
        "{}:2: the line is longer than 16777216 bytes",
        script.display()
    );
    assert!(stderr.contains(&expected), "stderr: {stderr}");
    assert!(
        peak_kib < PEAK_RSS_KIB_MAX,
        "tooljournal reached {peak_kib} KiB refusing the line"
    );
    eprintln!("peak RSS of the refusing tooljournal: {peak_kib} KiB");
    // Refused before anything ran: no session was written.
    assert!(!dir.path().join("journal").exists());
}

/// One 300 MB event of a provider's stream, under the default limits: the attempt fails at
/// 16 MiB naming `[model] event_bytes_max`, and `tooljournal run` stays under 128 MB.
#[test]
fn a_300_mb_event_is_refused_while_streamed_with_little_memory() {
    let format = Format::OpenAiChat;
    let case = Case::new();
    case.server.push(
        format,
        Reply::LongEvent {
            head: r#"data: {"choices": [{"index": 0, "delta": {"content": ""#.into(),
            fill_bytes: 300_000_000,
            tail: "\"}}]}\n\ndata: [DONE]\n\n".into(),
        },
    );
    let out = case.run(format, &["hi"]);
    let peak_kib = children_peak_kib();
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert!(
        text(&out.stderr).contains("passed 16777216 bytes, the limit ([model] event_bytes_max)"),
        "{}",
        shown(&out)
    );
    assert!(
        peak_kib < EVENT_PEAK_RSS_KIB_MAX,
        "tooljournal reached {peak_kib} KiB refusing the event"
    );
    eprintln!("peak RSS of the refusing tooljournal: {peak_kib} KiB");
}

/// A codex rollout whose second line is 100 MB: `recover import` and `recover repair` refuse
/// it naming the file, the line, its offset and the 64 MiB limit, under 256 MB, writing nothing.
#[test]
fn a_100_mb_session_file_line_is_refused_by_import_and_repair_with_little_memory() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rollout.jsonl");
    let mut out = BufWriter::new(File::create(&file).unwrap());
    let first =
        r#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"s"}}"#;
    writeln!(out, "{first}").unwrap();
    out.write_all(b"{\"type\": \"").unwrap();
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..100 {
        out.write_all(&chunk).unwrap();
    }
    out.write_all(b"\"}\n").unwrap();
    out.into_inner().unwrap().sync_all().unwrap();
    let journal = dir.path().join("journal");
    let copy = dir.path().join("copy.jsonl");
    let runs: [Vec<&std::ffi::OsStr>; 2] = [
        vec![
            "import".as_ref(),
            "--from".as_ref(),
            "codex".as_ref(),
            file.as_os_str(),
            "--journal".as_ref(),
            journal.as_os_str(),
        ],
        vec![
            "repair".as_ref(),
            "--from".as_ref(),
            "codex".as_ref(),
            file.as_os_str(),
            "--out".as_ref(),
            copy.as_os_str(),
        ],
    ];
    let expected = format!(
        "{}: line 2 (at byte {}) is longer than 67108864 bytes",
        file.display(),
        first.len() + 1
    );
    for args in runs {
        let output = Command::new(recover_bin()).args(&args).output().unwrap();
        let peak_kib = children_peak_kib();
        assert_eq!(
            output.status.code(),
            Some(1),
            "{args:?}: {}",
            shown(&output)
        );
        assert!(
            text(&output.stderr).contains(&expected),
            "{args:?}: {}",
            shown(&output)
        );
        assert!(
            peak_kib < IMPORT_PEAK_RSS_KIB_MAX,
            "{args:?}: recover reached {peak_kib} KiB refusing the line"
        );
        eprintln!("peak RSS so far, after {:?}: {peak_kib} KiB", args[0]);
    }
    assert!(!journal.exists(), "no journal begun");
    assert!(!copy.exists(), "no copy written");
}
