//! Bounded input: a transcript line is capped while it is read (a 100 MB line is refused with
//! the file and line named), so is one event of a provider's stream (a 300 MB event is refused
//! naming `[model] event_bytes_max`), and so is one line of another agent's session file (a
//! 100 MB line is refused by `recover import` and `repair` naming its line and the limit); the
//! refusing process never holds any of them whole.
//! Each peak is the child's own, measured by GNU `time` ([`measured`]). Accepted files are
//! read in bounded memory too: a 200 MB session file is imported and repaired in less memory
//! than it holds, and a file whose index passes `import::INDEX_BYTES_MAX` is refused naming
//! the line.

use crate::common;

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

    let mut run = Command::new(env!("CARGO_BIN_EXE_tooljournal"));
    run.arg("run")
        .arg("--script")
        .arg(&script)
        .arg("--workspace")
        .arg(&ws)
        .arg("--journal")
        .arg(dir.path().join("journal"));
    let (output, peak_kib) = measured(&run);
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
    let mut run = case.command(format);
    run.args(case.run_args(format, &["hi"]));
    let (out, peak_kib) = measured(&run);
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
    let runs = import_and_repair(&file, &journal, &copy);
    let expected = format!(
        "{}: line 2 (at byte {}) is longer than 67108864 bytes",
        file.display(),
        first.len() + 1
    );
    for args in runs {
        let (output, peak_kib) = recover_measured(&args);
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
        eprintln!("peak RSS of {:?}: {peak_kib} KiB", args[0]);
    }
    assert!(!journal.exists(), "no journal begun");
    assert!(!copy.exists(), "no copy written");
}

/// Runs `command` under GNU `time`: its output, and its own peak memory in KiB.
///
/// Why not `getrusage` or `wait4` here: a child spawned by this process starts in a copy of
/// its memory (or shares it, `vfork`), and the kernel counts this process's high-water mark
/// (the mock provider's, other tests' files) in the child's peak. `time` is small: the peak
/// it reports is the command's own.
fn measured(command: &Command) -> (std::process::Output, i64) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("peak");
    let mut timed = Command::new("/usr/bin/time");
    timed
        .args(["-f", "%M", "-o"])
        .arg(&report)
        .arg(command.get_program())
        .args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => timed.env(key, value),
            None => timed.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        timed.current_dir(dir);
    }
    let output = timed
        .output()
        .expect("GNU time at /usr/bin/time (.ci/run installs it)");
    let said = std::fs::read_to_string(&report).unwrap();
    // `time` notes a failed exit on a line of its own before the figure.
    let kib = (said.lines().last())
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("time said {said:?}"));
    (output, kib)
}

/// `recover import` of the codex rollout `file` into `journal`, and `recover repair` of it
/// into `copy`: their arguments.
fn import_and_repair<'a>(
    file: &'a std::path::Path,
    journal: &'a std::path::Path,
    copy: &'a std::path::Path,
) -> [Vec<&'a std::ffi::OsStr>; 2] {
    let with = |verb: &'a str, flag: &'a str, to: &'a std::path::Path| {
        let args: [&std::ffi::OsStr; 6] = [
            verb.as_ref(),
            "--from".as_ref(),
            "codex".as_ref(),
            file.as_os_str(),
            flag.as_ref(),
            to.as_os_str(),
        ];
        args.to_vec()
    };
    [
        with("import", "--journal", journal),
        with("repair", "--out", copy),
    ]
}

/// `recover` with `args`, [`measured`].
fn recover_measured(args: &[&std::ffi::OsStr]) -> (std::process::Output, i64) {
    let mut command = Command::new(recover_bin());
    command.args(args);
    measured(&command)
}

/// A codex rollout of turns whose outputs are each `output_bytes`, to about `file_bytes`, the
/// last call without an output (a repair answers it).
fn write_rollout(path: &std::path::Path, file_bytes: usize, output_bytes: usize) -> usize {
    let mut out = BufWriter::new(File::create(path).unwrap());
    writeln!(
        out,
        r#"{{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{{"id":"s"}}}}"#
    )
    .unwrap();
    let output = "o".repeat(output_bytes);
    let at = r#""timestamp":"2026-01-01T00:00:01Z","type":"response_item""#;
    let (mut written, mut calls) = (0, 0);
    while written < file_bytes {
        calls += 1;
        let turn = format!(
            "{{{at},\"payload\":{{\"type\":\"message\",\"role\":\"user\",\"content\":[{{\"type\":\"input_text\",\"text\":\"step {calls}\"}}]}}}}\n\
             {{{at},\"payload\":{{\"type\":\"function_call\",\"name\":\"shell\",\"arguments\":\"{{}}\",\"call_id\":\"c{calls}\"}}}}\n\
             {{{at},\"payload\":{{\"type\":\"function_call_output\",\"call_id\":\"c{calls}\",\"output\":\"{output}\"}}}}\n"
        );
        out.write_all(turn.as_bytes()).unwrap();
        written += turn.len();
    }
    calls += 1;
    writeln!(
        out,
        "{{{at},\"payload\":{{\"type\":\"function_call\",\"name\":\"shell\",\"arguments\":\"{{}}\",\"call_id\":\"c{calls}\"}}}}"
    )
    .unwrap();
    out.into_inner().unwrap().sync_all().unwrap();
    calls
}

/// The most memory `recover import` or `repair` of an accepted 200 MB file may reach, in KiB:
/// less than the file (reading it whole held it, and its texts, 2.3 to 3.2 times over).
const ACCEPTED_PEAK_RSS_KIB_MAX: i64 = 128 * 1024;

/// A 200 MB codex rollout (64 KiB outputs): `recover import` and `recover repair` accept it and
/// hold under 128 MB each: the file is read a line at a time, its texts kept in a temporary
/// file, the copy written as it is made.
#[test]
fn a_200_mb_session_file_is_imported_and_repaired_in_less_memory_than_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rollout.jsonl");
    let calls = write_rollout(&file, 200_000_000, 64 * 1024);
    let journal = dir.path().join("journal");
    let copy = dir.path().join("copy.jsonl");
    let [import, repair] = import_and_repair(&file, &journal, &copy);
    let (output, import_kib) = recover_measured(&import);
    assert!(output.status.success(), "import: {}", shown(&output));
    let said = text(&output.stdout);
    let summary = format!("calls {calls} ({} with a recorded output", calls - 1);
    assert!(said.contains(&summary), "{said}");
    let (output, repair_kib) = recover_measured(&repair);
    assert!(output.status.success(), "repair: {}", shown(&output));
    assert!(
        text(&output.stdout).contains(&format!("answered c{calls} ")),
        "{}",
        shown(&output)
    );
    // The copy is the original and one answer: every line kept, word for word (compared a
    // piece at a time: this process holding either file would be counted in later children).
    let added = after_prefix(&file, &copy);
    assert!(
        added.lines().count() == 1 && added.contains("TOOL_OUTCOME_UNKNOWN"),
        "{added}"
    );
    eprintln!("peak RSS: import {import_kib} KiB, repair {repair_kib} KiB");
    for (what, kib) in [("import", import_kib), ("repair", repair_kib)] {
        assert!(
            kib < ACCEPTED_PEAK_RSS_KIB_MAX,
            "{what} of a 200 MB file reached {kib} KiB"
        );
    }
}

/// What `longer` holds after the bytes of `file`, which it must begin with.
fn after_prefix(file: &std::path::Path, longer: &std::path::Path) -> String {
    use std::io::Read;
    let (mut a, mut b) = (File::open(file).unwrap(), File::open(longer).unwrap());
    let (mut x, mut y) = (vec![0; 1 << 20], vec![0; 1 << 20]);
    loop {
        let n = a.read(&mut x).unwrap();
        if n == 0 {
            break;
        }
        b.read_exact(&mut y[..n]).unwrap();
        assert!(x[..n] == y[..n], "the copy begins with the original");
    }
    let mut rest = Vec::new();
    b.read_to_end(&mut rest).unwrap();
    text(&rest)
}

/// A rollout of short outputs whose index passes `import::INDEX_BYTES_MAX` (48 MiB): import
/// and repair refuse it naming the file, the line and the limit, under 256 MB, writing nothing.
#[test]
fn a_session_file_whose_index_passes_the_limit_is_refused_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rollout.jsonl");
    write_rollout(&file, 70_000_000, 256);
    let journal = dir.path().join("journal");
    let copy = dir.path().join("copy.jsonl");
    let runs = import_and_repair(&file, &journal, &copy);
    let mut lines = Vec::new();
    for args in runs {
        let (output, kib) = recover_measured(&args);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{args:?}: {}",
            shown(&output)
        );
        let said = text(&output.stderr);
        let prefix = format!("{}: line ", file.display());
        let rest = said
            .split_once(&prefix)
            .map(|(_, rest)| rest)
            .unwrap_or_else(|| panic!("{args:?}: {said}"));
        assert!(
            rest.contains("passed 50331648 bytes here") && rest.contains("index"),
            "{args:?}: {said}"
        );
        lines.push(rest.split_whitespace().next().unwrap_or("").to_owned());
        assert!(
            kib < IMPORT_PEAK_RSS_KIB_MAX,
            "{args:?}: recover reached {kib} KiB refusing the file"
        );
    }
    assert_eq!(lines[0], lines[1], "both refuse at the same line");
    assert!(!journal.exists(), "no journal begun");
    assert!(!copy.exists(), "no copy written");
}
