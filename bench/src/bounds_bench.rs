//! `bounds`: the peak memory of what a hostile provider or a hostile file can make
//! tooljournal hold, each measured in a child process of its own (this binary's hidden
//! `bounds-child`), so that the peak is that work's alone:
//!
//! - `sse_300mb_event`: one event of 300 MB from the loopback provider, read by the model
//!   adapter under its default limits (refused at `event_bytes_max`, 16 MiB); target 128 MB;
//! - `import_100mb_line`: `recover import`'s reading of a codex rollout whose second line is
//!   100 MB (refused at the 64 MiB line limit); target 256 MB;
//! - `import_file` and `repair_file`: `recover import` and `recover repair` of a codex rollout
//!   of 1 GiB (128 MiB quick) of calls with 64 KiB outputs; target 256 MB;
//! - `import_small_lines`, `repair_small_lines`: the same of outputs of 256 bytes, whose index
//!   grows fastest (refused at `import::INDEX_BYTES_MAX` when it is full); target 256 MB;
//! - `import_long_lines`, `repair_long_lines`: the same of outputs of 60 MiB, lines near the
//!   64 MiB line limit; target 256 MB.
//!
//! The figures are `VmHWM` of the child, as `/proc/self/status` gives it. This binary runs on
//! mimalloc, as `tooljournal` (the model adapter's user) does; `recover` (import and repair)
//! runs on the system allocator, which gives a freed large block back at once, where mimalloc
//! keeps freed memory a while before purging it. So the import and repair children purge at
//! once (`MIMALLOC_PURGE_DELAY=0`): `recover repair` of the `full_then_long` rollout peaked at
//! 187 MB, its child at 259 MB with mimalloc's default and at 189 MB so (2026-12-05).

use crate::bar::Bar;
use crate::{say, BoxError, Common, MB, MIB};
use serde::{Deserialize, Serialize};
use std::io::{BufWriter, Write};
use std::path::Path;

/// The provider's event that is too long, in bytes.
const EVENT_BYTES: u64 = 300_000_000;
/// The session file's line that is too long, in bytes.
const LINE_BYTES: u64 = 100_000_000;
/// The output of each call in the generated rollouts: the common shape, lines of short
/// outputs (the session's index grows fastest), and lines near the 64 MiB line limit.
const OUTPUT_BYTES: usize = 64 * 1024;
const SMALL_OUTPUT_BYTES: usize = 256;
const LONG_OUTPUT_BYTES: usize = 60 << 20;
/// Small turns that take the session's index near its limit (`import::INDEX_BYTES_MAX`):
/// `full_then_long` ends them with one long output, the most a file can make a reader hold.
const FULL_INDEX_BYTES: u64 = 42_000_000;
const EVENT_PEAK_RSS_MB_TARGET: f64 = 128.0;
const IMPORT_PEAK_RSS_MB_TARGET: f64 = 256.0;

/// What a `bounds-child` measures.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum ChildWork {
    /// The model adapter reading one 300 MB event.
    SseEvent,
    /// `recover import` of the file (reading, checking, writing the journal).
    Import,
    /// `recover repair` of the file (to a copy beside it).
    Repair,
}

/// One child's report.
#[derive(Serialize, Deserialize)]
struct ChildReport {
    /// What the work came to, in words (the error when it was refused).
    outcome: String,
    seconds: f64,
    hwm_kb: u64,
}

#[derive(Serialize)]
struct Figure {
    name: String,
    input_mb: f64,
    outcome: String,
    seconds: f64,
    peak_rss_mb: f64,
    target_mb: f64,
    met: bool,
}

pub(crate) fn run(common: &Common) -> Result<(), BoxError> {
    let figures = measure(common)?;
    if common.json {
        println!("{}", serde_json::to_string_pretty(&figures)?);
    } else {
        print_table(&figures);
    }
    Ok(())
}

/// `chart`: every figure (each peak RSS, a ceiling).
pub(crate) fn bars(common: &Common) -> Result<Vec<Bar>, BoxError> {
    Ok(measure(common)?
        .iter()
        .map(|f| Bar::at_most("bounds", &f.name, f.peak_rss_mb, f.target_mb))
        .collect())
}

fn measure(common: &Common) -> Result<Vec<Figure>, BoxError> {
    let scratch = crate::disk::scratch_base(common.dir.as_deref())?;
    let file_bytes = if common.quick { 128 * MIB } else { 1024 * MIB };
    let mut figures = Vec::new();

    say("sse: one event of 300 MB from the loopback provider");
    let r = child(ChildWork::SseEvent, scratch.path())?;
    figures.push(figure(
        "sse_300mb_event",
        EVENT_BYTES,
        r,
        EVENT_PEAK_RSS_MB_TARGET,
    ));

    let long_line = scratch.path().join("long_line.jsonl");
    write_long_line(&long_line)?;
    say("import: a rollout whose second line is 100 MB");
    let r = child(ChildWork::Import, &long_line)?;
    let size = std::fs::metadata(&long_line)?.len();
    figures.push(figure(
        "import_100mb_line",
        size,
        r,
        IMPORT_PEAK_RSS_MB_TARGET,
    ));
    std::fs::remove_file(&long_line)?;

    // (name, its outputs, the bytes of small turns before a last long output)
    let shapes = [
        ("file", OUTPUT_BYTES, None),
        ("small_lines", SMALL_OUTPUT_BYTES, None),
        ("long_lines", LONG_OUTPUT_BYTES, None),
        ("full_then_long", SMALL_OUTPUT_BYTES, Some(FULL_INDEX_BYTES)),
    ];
    for (shape, output_bytes, then_long) in shapes {
        let rollout = scratch.path().join("rollout.jsonl");
        let calls = match then_long {
            None => write_rollout(&rollout, file_bytes, output_bytes, None)?,
            Some(small) => write_rollout(&rollout, small, output_bytes, Some(LONG_OUTPUT_BYTES))?,
        };
        let size = std::fs::metadata(&rollout)?.len();
        say(&format!(
            "import and repair: a rollout of {:.0} MB, {calls} calls with outputs of {output_bytes} bytes",
            size as f64 / MB
        ));
        for (work, name) in [
            (ChildWork::Import, format!("import_{shape}")),
            (ChildWork::Repair, format!("repair_{shape}")),
        ] {
            let r = child(work, &rollout)?;
            figures.push(figure(name, size, r, IMPORT_PEAK_RSS_MB_TARGET));
        }
        std::fs::remove_file(&rollout)?;
    }
    Ok(figures)
}

fn figure(name: impl Into<String>, input_bytes: u64, r: ChildReport, target_mb: f64) -> Figure {
    let peak_rss_mb = r.hwm_kb as f64 * 1024.0 / MB;
    Figure {
        name: name.into(),
        input_mb: input_bytes as f64 / MB,
        outcome: r.outcome,
        seconds: r.seconds,
        peak_rss_mb,
        target_mb,
        met: peak_rss_mb <= target_mb,
    }
}

fn print_table(figures: &[Figure]) {
    println!("tooljournal bench: bounds  [MB = 10^6 bytes; peak RSS of a child doing only that]");
    println!();
    for f in figures {
        println!(
            "  {:<20} input {:>8.1} MB  {:>6.1} s  peak_rss_mb {:>7.1}  (target <= {}; {:.2}x)  {}",
            f.name,
            f.input_mb,
            f.seconds,
            f.peak_rss_mb,
            f.target_mb,
            f.peak_rss_mb / f.target_mb,
            if f.met { "met" } else { "MISSED" }
        );
        println!("      {}", f.outcome);
    }
}

/// Runs `bench bounds-child WORK PATH` and reads its report.
fn child(work: ChildWork, path: &Path) -> Result<ChildReport, BoxError> {
    let work_name = clap::ValueEnum::to_possible_value(&work)
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default();
    let mut command = std::process::Command::new(std::env::current_exe()?);
    command.arg("bounds-child").arg(&work_name).arg(path);
    if !matches!(work, ChildWork::SseEvent) {
        // As `recover`'s system allocator holds memory (the module's doc says why).
        command.env("MIMALLOC_PURGE_DELAY", "0");
    }
    let out = command.output()?;
    if !out.status.success() {
        return Err(format!(
            "bounds-child {work_name}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// The hidden `bounds-child` subcommand: does `work` on `path` and prints one JSON line.
pub(crate) fn bounds_child(work: ChildWork, path: &Path) -> Result<(), BoxError> {
    let started = std::time::Instant::now();
    let outcome = match work {
        ChildWork::SseEvent => sse_event()?,
        ChildWork::Import => import(path),
        ChildWork::Repair => repair(path),
    };
    let report = ChildReport {
        outcome,
        seconds: started.elapsed().as_secs_f64(),
        hwm_kb: crate::runtime_bench::recovery::vm_hwm_kb()?,
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

/// The model adapter (`llm::connect`, as `tooljournal run --model` makes it) reading an
/// answer whose first event is 300 MB long.
fn sse_event() -> Result<String, BoxError> {
    use futures_util::StreamExt;
    use runtime::model::{Conversation, ModelRequest, ModelSettings};
    let server = mockllm::MockServer::start();
    server.expect_key("bench-key");
    let format = llm::Format::OpenAiChat;
    server.push(
        format,
        mockllm::Reply::LongEvent {
            head: r#"data: {"choices": [{"index": 0, "delta": {"content": ""#.into(),
            fill_bytes: EVENT_BYTES,
            tail: "\"}}]}\n\ndata: [DONE]\n\n".into(),
        },
    );
    let mut config = llm::ModelConfig::new(format, "bench", llm::Secret::new("bench-key"));
    config.base_url = Some(server.base_url(format));
    let mut model = llm::connect(config)?;
    let request = ModelRequest {
        turn: 1,
        step: 1,
        conversation: Conversation {
            system: None,
            messages: Vec::new(),
        },
        tools: Vec::new(),
        settings: ModelSettings::default(),
    };
    let body = model.body(&request)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut stream = model.send(body).await?;
        while let Some(event) = stream.next().await {
            if let Err(e) = event {
                return Ok(format!("refused: {e}"));
            }
        }
        Ok::<_, BoxError>("read whole (not refused)".to_string())
    })
}

/// What `recover import --from codex PATH --journal DIR` does, into a journal beside `path`.
fn import(path: &Path) -> String {
    let journal_dir = path.with_extension("journal");
    let result = (|| -> Result<String, BoxError> {
        let original = match recover::open_session_file(path) {
            Ok(file) => file,
            Err(e) => return Ok(format!("refused: {e}")),
        };
        let input = import::Input::file(&original)?;
        let storage = journal::FsStorage::create(&journal_dir)?;
        let backend = journal::Backend::Files(std::sync::Arc::new(storage));
        let label = path.display().to_string();
        let r = recover::import_into(&backend, import::Agent::Codex, &label, input, 0);
        let r = match r {
            Ok(r) => r,
            Err(e @ recover::ImportError::Source(_)) => return Ok(format!("refused: {e}")),
            Err(e) => return Err(e.into()),
        };
        Ok(format!(
            "imported: {} calls, {} records",
            r.recorded + r.not_started + r.unknown,
            r.records
        ))
    })();
    let _ = std::fs::remove_dir_all(&journal_dir);
    result.unwrap_or_else(|e| format!("failed: {e}"))
}

/// What `recover repair --from codex PATH --out COPY` does, to a copy beside `path`.
fn repair(path: &Path) -> String {
    let out = path.with_extension("repaired.jsonl");
    let result = recover::repair_file(import::Agent::Codex, path, &out);
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(recover::quarantine_path(&out));
    match result {
        Ok(r) => format!("repaired: {} bytes written", r.repaired.copy_bytes),
        Err(e) => format!("refused: {e}"),
    }
}

/// The first line of every generated rollout.
const SESSION_META: &str = r#"{"timestamp":"2026-11-20T10:00:00.000Z","type":"session_meta","payload":{"id":"0199a1b2-0000-7000-8000-0000000000b1","timestamp":"2026-11-20T10:00:00.000Z","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.63.0","source":"cli","model_provider":"openai"}}"#;

/// A rollout whose second line is [`LINE_BYTES`] long.
fn write_long_line(path: &Path) -> Result<(), BoxError> {
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    writeln!(out, "{SESSION_META}")?;
    out.write_all(br#"{"type": ""#)?;
    let chunk = vec![b'a'; MIB as usize];
    let mut left = LINE_BYTES;
    while left > 0 {
        let n = left.min(MIB);
        out.write_all(&chunk[..n as usize])?;
        left -= n;
    }
    out.write_all(b"\"}\n")?;
    out.flush()?;
    Ok(())
}

/// A rollout of at most `bytes`: turns of a user message, a `shell` call and its output of
/// `output_bytes`; the last call has no output (a crash), so a repair has work to do.
/// Returns the number of calls.
fn write_rollout(
    path: &Path,
    bytes: u64,
    output_bytes: usize,
    then_long: Option<usize>,
) -> Result<u64, BoxError> {
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    writeln!(out, "{SESSION_META}")?;
    let output = "o".repeat(output_bytes);
    let mut written = SESSION_META.len() as u64 + 1;
    let mut calls = 0u64;
    let at = r#""timestamp":"2026-11-20T10:00:01.000Z","type":"response_item""#;
    // A turn's lines take its output and under 1 KiB more; the last call's line fits in that.
    let turn_bytes = output_bytes as u64 + 1024;
    let mut output_bytes_now = output_bytes;
    loop {
        if written + 2 * turn_bytes > bytes {
            match then_long {
                Some(long) if output_bytes_now != long => output_bytes_now = long,
                _ => break,
            }
        }
        let output = match output_bytes_now == output_bytes {
            true => std::borrow::Cow::Borrowed(output.as_str()),
            false => std::borrow::Cow::Owned("o".repeat(output_bytes_now)),
        };
        calls += 1;
        let lines = [
            format!(
                r#"{{{at},"payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":"step {calls}"}}]}}}}"#
            ),
            format!(
                r#"{{{at},"payload":{{"type":"function_call","name":"shell","arguments":"{{\"command\":[\"ls\"]}}","call_id":"call_{calls}"}}}}"#
            ),
            format!(
                r#"{{{at},"payload":{{"type":"function_call_output","call_id":"call_{calls}","output":"{output}"}}}}"#
            ),
        ];
        for line in &lines {
            writeln!(out, "{line}")?;
            written += line.len() as u64 + 1;
        }
    }
    calls += 1;
    writeln!(
        out,
        r#"{{{at},"payload":{{"type":"function_call","name":"shell","arguments":"{{\"command\":[\"ls\"]}}","call_id":"call_{calls}"}}}}"#
    )?;
    out.flush()?;
    Ok(calls)
}
