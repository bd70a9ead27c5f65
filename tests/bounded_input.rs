//! Bounded input (issue 13, item 8): a transcript line is capped while it is read. A 100 MB
//! line is refused with the file and line named, and the refusing process never holds it.
//! (One test in this binary: the peak memory measured is that of every child it waited for.)

use std::fs::File;
use std::io::{BufWriter, Write};
use std::process::Command;

/// The line's size, in bytes.
const HUGE_LINE_BYTES: usize = 100_000_000;
/// The most memory the refusing `tooljournal` may reach, in KiB (`ru_maxrss`'s unit on Linux).
const PEAK_RSS_KIB_MAX: i64 = 200 * 1024;

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

    let before = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .unwrap()
        .max_rss();
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
    let peak_kib = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .unwrap()
        .max_rss();
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
