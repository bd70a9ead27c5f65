//! `recover`: read a crashed session's journal and tell the truth about it.
//!
//! This file parses arguments and is the one place that turns errors into exit codes
//! (DESIGN.md §10): 0 success, 1 usage or I/O error, 2 corrupt journal, 3 written by a newer
//! tooljournal (docs/FORMAT.md, *Versioning*). `recover` never executes a tool.

use clap::{Parser, Subcommand};
use journal::ReadEnd;

use recover::Place;
use recover::{Output, OutputKind};
use recover::{RecoverError, ReportSink, RereadError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "recover",
    version,
    about = "Recover a crashed tooljournal session: classify orphaned calls, rebuild a provider-valid history, audit"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check every record, frames and events, as classify reads them: clean, torn tail (with the
    /// bytes a resume drops), corruption (exit 2) or written by a newer tooljournal (exit 3).
    Verify { dir: PathBuf },
    /// Classify every call: TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN, or its known result.
    /// Appends one `recovery` event (unless --dry-run or the session is live).
    Classify {
        dir: PathBuf,
        #[arg(long)]
        json: bool,
        /// Read only: append nothing, cut nothing.
        #[arg(long)]
        dry_run: bool,
        /// Read a corrupt journal anyway, passing over the damage and listing what was skipped
        /// and which calls it affected. Never writes.
        #[arg(long)]
        salvage: bool,
        /// For each TOOL_OUTCOME_UNKNOWN call, look at this workspace (read only, confined to
        /// it, no symlink followed) and compare it with what the call recorded before it acted:
        /// applied, not_applied, changed, running, not_looked (a path that leads out of the
        /// workspace or through a symlink: not read, nothing said of it) or no_evidence.
        /// Evidence, not proof: the
        /// classification stays TOOL_OUTCOME_UNKNOWN; the result recovery gives such a call
        /// states the evidence.
        #[arg(long, value_name = "WORKSPACE")]
        probe: Option<PathBuf>,
    },
    /// The session as a provider's whole request body: system prompt, the tools the model was
    /// last shown with their input schemas, settings, and the conversation, every assistant
    /// message followed by exactly one result per call; add the model and credentials to send
    /// it. Appends the `recovery` event unless --dry-run.
    Rebuild {
        dir: PathBuf,
        /// openai-chat, openai-responses, anthropic or gemini.
        #[arg(long)]
        format: recover::providers::Format,
        /// Write here instead of stdout.
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(long)]
        dry_run: bool,
        /// As for classify; never writes.
        #[arg(long)]
        salvage: bool,
        /// As for classify: the results of calls recovered by this run state the evidence.
        #[arg(long, value_name = "WORKSPACE")]
        probe: Option<PathBuf>,
    },
    /// Every call: tool, arguments, decision, state, classification, side effects, timings.
    Audit {
        dir: PathBuf,
        #[arg(long, conflicts_with = "html")]
        json: bool,
        /// Write the session as a picture instead: one self-contained HTML file (`-` for
        /// stdout) with a timeline per turn and step, one bar per call, and each call's facts
        /// on a click. It loads nothing from anywhere.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// The HTML file's size bound in bytes (default 32 MiB, at least 2 MiB): past it, the
        /// calls between the session's beginning and its end are left out, and the page says
        /// how many.
        #[arg(long, value_name = "BYTES", requires = "html")]
        html_bytes_max: Option<u64>,
        /// On the page, each TOOL_OUTCOME_UNKNOWN call's probe verdict: this workspace looked
        /// at read only, as `classify --probe` does (evidence, not proof).
        #[arg(long, value_name = "WORKSPACE", requires = "html")]
        probe: Option<PathBuf>,
    },
    /// Another agent's session file made resumable, as a copy: every call it will replay
    /// without an output answered once with the truth (TOOL_OUTCOME_UNKNOWN or
    /// TOOL_NOT_STARTED, and why); lines that are not JSON moved to OUT.quarantine, and so are
    /// pi's results of a call not in the file (pi would send them and the provider refuse
    /// them); pi's parent links re-linked around what moved, and a session header written
    /// first where a pi file has none (pi discards such a file). The original is never
    /// modified; nothing existing is overwritten.
    Repair {
        /// The agent that wrote FILE: codex (a rollout JSONL), pi (a session JSONL) or
        /// claude-code (a session JSONL, as public material describes it).
        #[arg(long, value_name = "AGENT", value_parser = ["codex", "pi", "claude-code"])]
        from: String,
        /// The session file.
        file: PathBuf,
        /// Where the repaired copy goes (a new file).
        #[arg(long, value_name = "FILE2")]
        out: PathBuf,
    },
    /// Another agent's session file written as a tooljournal journal, so that classify,
    /// rebuild and audit work on it: each call with its recorded output, or TOOL_NOT_STARTED
    /// where the agent's code proves it never ran, or else TOOL_OUTCOME_UNKNOWN; every event
    /// marked with the source line it was read from, damaged lines listed, never dropped.
    Import {
        /// The agent that wrote FILE: codex, pi or claude-code.
        #[arg(long, value_name = "AGENT", value_parser = ["codex", "pi", "claude-code"])]
        from: String,
        /// The session file (never modified).
        file: PathBuf,
        /// The journal to write: a new or empty directory, or a postgres:// session URL.
        #[arg(long, value_name = "DIR")]
        journal: PathBuf,
    },
}

/// `--journal` of `import`: a directory (created if missing) or a PostgreSQL session.
fn import_backend(journal: &Path) -> Result<journal::Backend, Failure> {
    if let Place::Backend(backend) = place(journal)? {
        return Ok(backend);
    }
    // A new or empty directory: a mistyped project directory is never written into, nor is
    // a link (planted or not) followed to wherever it leads.
    if let Ok(meta) = std::fs::symlink_metadata(journal) {
        if meta.file_type().is_symlink() || !meta.is_dir() {
            let what = if meta.file_type().is_symlink() {
                "a symbolic link"
            } else {
                "not a directory"
            };
            return Err(Failure::Failed(format!(
                "{}: {what}; an import goes to a new or empty directory",
                journal.display()
            )));
        }
    }
    if let Ok(mut entries) = std::fs::read_dir(journal) {
        if let Some(Ok(entry)) = entries.next() {
            return Err(Failure::Failed(format!(
                "{}: not empty (it holds {}); an import goes to a new or empty directory",
                journal.display(),
                entry.file_name().to_string_lossy()
            )));
        }
    }
    let storage = journal::FsStorage::create(journal).map_err(|e| {
        Failure::Failed(format!(
            "{}: cannot create journal directory: {e}",
            journal.display()
        ))
    })?;
    Ok(journal::Backend::Files(std::sync::Arc::new(storage)))
}

fn import(from: &str, file: &Path, journal: &Path) -> Result<(), Failure> {
    // expect: clap accepts only the names `from_name` knows.
    #[allow(clippy::expect_used)]
    let agent = import::Agent::from_name(from).expect("clap checked the agent's name");
    let failed = |e: recover::ImportError| Failure::Failed(e.to_string());
    let original = recover::open_session_file(file).map_err(|e| failed(e.into()))?;
    // As given; a name that is not UTF-8 keeps its bytes, escaped (`\xFF`), so that two such
    // names never read as one.
    let label = match file.to_str() {
        Some(name) => name.to_owned(),
        None => {
            let quoted = format!("{:?}", file.as_os_str());
            quoted.trim_matches('"').to_owned()
        }
    };
    // Read and checked before the journal is made: a file that cannot be imported leaves no
    // directory behind.
    let input = import::Input::file(&original).map_err(|source| {
        failed(
            recover::RepairError::Refused {
                path: file.into(),
                source,
            }
            .into(),
        )
    })?;
    let prepared = recover::import_prepare(agent, &label, input).map_err(failed)?;
    let backend = import_backend(journal)?;
    let now_ms = events::clock::Clock::now_ms(&events::clock::SystemClock);
    let r = recover::import_write_into(&backend, prepared, now_ms).map_err(failed)?;
    let mut text = String::new();
    for line in recover::import_source_lines(&r.damaged, &r.notes) {
        text.push_str(&line);
        text.push('\n');
    }
    print(&text)?;
    print(&format!(
        "imported {label} ({from}) into {}: turns {}, steps {}, calls {} ({} with a recorded \
         output, {} TOOL_NOT_STARTED, {} TOOL_OUTCOME_UNKNOWN); lines kept out {}, notes {}; \
         records {}\n",
        backend.location(),
        r.turns,
        r.steps,
        r.recorded + r.not_started + r.unknown,
        r.recorded,
        r.not_started,
        r.unknown,
        r.damaged.len(),
        r.notes.len(),
        r.records,
    ))
}

enum Failure {
    Failed(String),
    Corrupt(String),
    Newer(String),
    StdoutClosed,
}

impl From<RecoverError> for Failure {
    fn from(e: RecoverError) -> Failure {
        match e {
            e @ (RecoverError::OpenDir { .. }
            | RecoverError::Journal { .. }
            | RecoverError::Io { .. }
            | RecoverError::NoVerdict { .. }
            | RecoverError::Workspace(_)
            | RecoverError::Changed { .. }) => Failure::Failed(e.to_string()),
            RecoverError::Corrupt(m) => Failure::Corrupt(m),
            RecoverError::Newer(m) => Failure::Newer(m),
        }
    }
}

/// Writes text for a person to stdout, hidden characters shown (`events::display`).
fn print(text: &str) -> Result<(), Failure> {
    print_data(&events::display::visible(text))
}

/// Writes data (JSON) to stdout as it is.
fn print_data(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Failure::StdoutClosed),
        Err(e) => Err(Failure::Failed(format!("cannot write to stdout: {e}"))),
    }
}

fn verify(at: &Place) -> Result<(), Failure> {
    let label = at.label();
    let dir = label.as_path();
    let recover::Verified { end, records } = recover::verify(at)?;
    match end {
        ReadEnd::Clean => print(&format!("{}: clean: {records} records\n", dir.display())),
        ReadEnd::TornTail(t) => print(&format!(
            "{}: torn tail at {}: {}; {records} valid records before it; a resume would drop {} bytes\n",
            dir.display(),
            t.position,
            t.reason,
            t.dropped_bytes
        )),
        ReadEnd::Corrupt(c) => Err(Failure::Corrupt(format!(
            "{}: {c}; {records} valid records before it",
            dir.display()
        ))),
    }
}

/// Runs `f` with a progress callback that drives a bar on stderr when it is a terminal (long
/// journals take a while), and does nothing otherwise.
fn with_bar<T>(f: impl FnOnce(&dyn Fn(u64, u64)) -> T) -> T {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return f(&|_, _| {});
    }
    let bar = indicatif::ProgressBar::new(0);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "reading {bar:40} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
    ) {
        bar.set_style(style);
    }
    let result = f(&|done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    result
}

/// What this run changed (or found changed, or could not do), on stderr: stdout is the same
/// on every run (I5).
fn note(dir: &Path, notes: Vec<String>) {
    for n in notes {
        eprintln!("note: {}: {n}", dir.display());
    }
}

fn output_failure(e: std::io::Error) -> Failure {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Failure::StdoutClosed
    } else {
        Failure::Failed(format!("cannot write to stdout: {e}"))
    }
}

/// `classify`: the calls are printed as the journal is read (a salvaging read excepted), so
/// memory does not grow with the journal. On corruption found on the way the output stops
/// short and the exit code is 2.
fn classify(
    at: &Place,
    json: bool,
    dry_run: bool,
    salvage: bool,
    probe: Option<&Path>,
) -> Result<(), Failure> {
    let label = at.label();
    let dir = label.as_path();
    use recover::{JsonListing, TextListing};
    let name = dir.display().to_string();
    let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    // The table is for a person: hidden characters shown (`events::display`).
    let shown = || {
        let stdout = events::display::VisibleWriter::new(std::io::stdout().lock());
        std::io::BufWriter::with_capacity(1 << 16, stdout)
    };
    let text_listing = |out| {
        let listing = TextListing::new(out, &name);
        if probe.is_some() {
            listing.with_probe_column()
        } else {
            listing
        }
    };
    if salvage {
        let r = recover::Recovery::of(at).probe(probe).salvage()?;
        note(dir, r.notes());
        let a = &r.analysis;
        let session_id = a.replay.open.as_ref().map(|o| o.session_id.as_str());
        let give = |sink: &mut dyn ReportSink| -> std::io::Result<()> {
            sink.start(session_id, a.live)?;
            a.calls.iter().try_for_each(|c| sink.call(c.clone()))
        };
        let written = if json {
            let mut listing = JsonListing::new(out, &name);
            let salvage = r.salvage.as_ref().map(recover::salvage_json);
            give(&mut listing).and_then(|()| listing.finish(a.end, a.live, salvage.as_ref()))
        } else {
            let mut listing = text_listing(shown());
            let salvage = r.salvage.as_ref().map(recover::salvage_text);
            give(&mut listing).and_then(|()| listing.finish(a.end, a.live, salvage.as_deref()))
        };
        return written.map_err(output_failure);
    }
    if json {
        classify_streamed(at, dry_run, probe, JsonListing::new(out, &name), |l, s| {
            l.finish(s.end, s.live, None)
        })
    } else {
        classify_streamed(at, dry_run, probe, text_listing(shown()), |l, s| {
            l.finish(s.end, s.live, None)
        })
    }
}

fn classify_streamed<S: ReportSink>(
    at: &Place,
    dry_run: bool,
    probe: Option<&Path>,
    mut listing: S,
    finish: impl FnOnce(S, &recover::Streamed) -> std::io::Result<()>,
) -> Result<(), Failure> {
    let label = at.label();
    let dir = label.as_path();
    let mut s = with_bar(|progress| {
        recover::Recovery::of(at)
            .write(!dry_run)
            .progress(progress)
            .probe(probe)
            .stream(&mut listing)
    })?;
    note(dir, s.notes());
    warn_running(dir, &s.processes, s.live);
    match s.output_error.take() {
        Some(e) => Err(output_failure(e)),
        None => finish(listing, &s).map_err(output_failure),
    }
}

/// Process groups that calls of the interrupted run left running, on stderr: whether they run
/// is the world's state, not the journal's, so it stays out of stdout. In a live session they
/// are the live run's own calls, not orphans: no resume may stop them (it would refuse, the
/// session being live), so none is advised.
fn warn_running(
    dir: &Path,
    processes: &[(events::event::CallRef, events::event::ProcessStarted)],
    live: bool,
) {
    for (call, process) in processes {
        let Some(members) = events::process::still_running(process) else {
            continue;
        };
        if live {
            eprintln!(
                "note: {}: {call}: process group {} ({members} processes) is the live run's: \
                 the session is live and this call is still running in it (not an orphan)",
                dir.display(),
                process.pgid
            );
        } else {
            eprintln!(
                "warning: {}: {call}: still running: process group {} ({members} processes); \
                 it may still change the workspace (`tooljournal resume --kill-orphans` stops it)",
                dir.display(),
                process.pgid
            );
        }
    }
}

/// Why a second reading stopped, as a failure: its output's, or the journal's.
fn reread_failure(e: RereadError) -> Failure {
    match e {
        RereadError::Output(e) => output_failure(e),
        RereadError::Recover(e) => e.into(),
    }
}

/// `audit`: read once to check the journal whole (a corrupt one prints nothing), then again
/// writing each call as it is final, so that memory does not grow with the journal.
fn audit(at: &Place, json: bool) -> Result<(), Failure> {
    let label = at.label();
    let dir = label.as_path();
    let first = with_bar(|progress| recover::audit_first_reading(at, progress))?;
    note(dir, first.streamed.notes());
    let name = dir.display().to_string();
    let streamed = if json {
        let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        recover::audit_stream(at, first, &name, json, out).map(drop)
    } else {
        // For a person: hidden characters shown (`events::display`).
        let stdout = events::display::VisibleWriter::new(std::io::stdout().lock());
        let out = std::io::BufWriter::with_capacity(1 << 16, stdout);
        recover::audit_stream(at, first, &name, json, out).map(drop)
    };
    streamed.map_err(reread_failure)
}

/// `audit --html FILE`: the same two readings, the second written as a page. It is written
/// beside its destination and given its name at the end (`recover::output`), so that a failed
/// run leaves no half page where a whole one is expected.
fn audit_html(
    at: &Place,
    file: &Path,
    bytes_max: Option<u64>,
    probe: Option<&Path>,
) -> Result<(), Failure> {
    use recover::{HtmlOptions, HTML_BYTES_MIN};
    let mut options = HtmlOptions::default();
    if let Some(n) = bytes_max {
        if n < HTML_BYTES_MIN {
            return Err(Failure::Failed(format!(
                "--html-bytes-max {n}: the page needs at least {HTML_BYTES_MIN} bytes"
            )));
        }
        options.bytes_max = n;
    }
    let label = at.label();
    let dir = label.as_path();
    let first = with_bar(|progress| recover::audit_first_reading_probing(at, progress, probe))?;
    note(dir, first.streamed.notes());
    let name = dir.display().to_string();
    if file == Path::new("-") {
        let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        return recover::stream_html(at, first, &name, &options, out)
            .map(drop)
            .map_err(reread_failure);
    }
    let created = Output::create(file, OutputKind::Replace).map_err(not_written)?;
    let written = recover::stream_html(
        at,
        first,
        &name,
        &options,
        std::io::BufWriter::with_capacity(1 << 16, created),
    );
    // A page given up (an error here) is dropped unnamed: the destination was never touched.
    let out = match written {
        Ok(out) => out
            .into_inner()
            .map_err(|e| cannot_write(file, e.into_error()))?,
        Err(RereadError::Output(e)) => return Err(cannot_write(file, e)),
        Err(e) => return Err(reread_failure(e)),
    };
    out.commit().map(drop).map_err(not_written)
}

fn not_written(e: recover::OutputError) -> Failure {
    Failure::Failed(e.to_string())
}

fn cannot_write(file: &Path, e: std::io::Error) -> Failure {
    Failure::Failed(format!("{}: cannot write: {e}", file.display()))
}

/// `recover repair`: the copy written, what it did on stdout.
fn repair(from: &str, file: &Path, out: &Path) -> Result<(), Failure> {
    // expect: clap accepts only the names `from_name` knows.
    #[allow(clippy::expect_used)]
    let agent = import::Agent::from_name(from).expect("clap checked the agent's name");
    let report =
        recover::repair_file(agent, file, out).map_err(|e| Failure::Failed(e.to_string()))?;
    let r = &report.repaired;
    let mut text = String::new();
    for (id, at) in &r.answered {
        text.push_str(&format!("answered {id} (line {})\n", at.line));
    }
    if let Some(q) = &report.quarantine {
        let numbers = |at: &mut dyn Iterator<Item = &import::Source>| {
            at.map(|at| at.line.to_string()).collect::<Vec<_>>()
        };
        let damaged = numbers(&mut r.moved.iter().filter(|at| !r.stray.contains(at)));
        if !damaged.is_empty() {
            text.push_str(&format!(
                "moved line {} to {} (not JSON)\n",
                damaged.join(", "),
                q.display()
            ));
        }
        let stray = numbers(&mut r.stray.iter());
        if !stray.is_empty() {
            text.push_str(&format!(
                "moved line {} to {} (a result of a call that is not in the file: pi would \
                 send it, and the provider refuse it)\n",
                stray.join(", "),
                q.display()
            ));
        }
    }
    if let Some(header) = &r.header {
        text.push_str(&format!(
            "wrote a session header as line 1 (the file starts with none, and pi discards such \
             a file; its cwd is unknown, left empty): {header}\n"
        ));
    }
    if let Some(first) = r.renumbered.first() {
        text.push_str(&format!(
            "renumbered the ordinal of {} lines from line {} on, past the answers before them \
             (this rollout numbers every line)\n",
            r.renumbered.len(),
            first.line
        ));
    }
    for at in &r.relinked {
        text.push_str(&format!(
            "relinked line {} to the entry before it\n",
            at.line
        ));
    }
    text.push_str(&format!(
        "wrote {} ({} answered, {} moved, {} relinked; {} unchanged)\n",
        out.display(),
        r.answered.len(),
        r.moved.len(),
        r.relinked.len(),
        file.display()
    ));
    print(&text)
}

/// A live session has no history to rebuild: its unfinished calls are running.
fn live_failure(dir: &Path) -> Failure {
    Failure::Failed(format!(
        "{}: the session is live; its unfinished calls are running, so there is no history to rebuild yet",
        dir.display()
    ))
}

/// `rebuild`: the recovery (appended unless `write` is off), then the body written as the
/// journal is read again, so that memory does not grow with the journal. A corrupt journal
/// or a live session fails before anything is written.
fn rebuild(
    at: &Place,
    format: recover::providers::Format,
    out: Option<&Path>,
    write: bool,
    probe: Option<&Path>,
) -> Result<(), Failure> {
    let label = at.label();
    let dir = label.as_path();
    let first =
        with_bar(|progress| recover::rebuild_first_reading(at, format, write, progress, probe))?;
    note(dir, first.streamed.notes());
    if first.streamed.live {
        return Err(live_failure(dir));
    }
    // The text keeps the arguments as the journal has them (no number rounded).
    let notes = match out {
        Some(path) => {
            let file = Output::create(path, OutputKind::Replace).map_err(not_written)?;
            let file = std::io::BufWriter::with_capacity(1 << 16, file);
            let written = match recover::rebuild_write(at, first, file) {
                Ok(written) => written,
                Err(RereadError::Output(e)) => return Err(cannot_write(path, e)),
                Err(RereadError::Recover(e)) => return Err(e.into()),
            };
            let out = written
                .out
                .into_inner()
                .map_err(|e| cannot_write(path, e.into_error()))?;
            out.commit().map_err(not_written)?;
            written.notes
        }
        None => {
            let stdout = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            recover::rebuild_write(at, first, stdout)
                .map_err(reread_failure)?
                .notes
        }
    };
    note(dir, notes);
    Ok(())
}

/// `rebuild --salvage`: a corrupt journal read whole, passing over the damage.
fn rebuild_salvaged(
    at: &Place,
    format: recover::providers::Format,
    out: Option<&Path>,
    probe: Option<&Path>,
) -> Result<(), Failure> {
    let label = at.label();
    let dir = label.as_path();
    let r = recover::Recovery::of(at).probe(probe).salvage()?;
    if let Some(s) = &r.salvage {
        eprint!("{}", recover::salvage_text(s));
    }
    note(dir, r.notes());
    if r.analysis.live {
        return Err(live_failure(dir));
    }
    // Our own output must pass the provider's rules; if it ever does not, that is a bug
    // to report loudly, never a body to hand to a provider.
    let rebuilt = recover::rebuild_body(&r.analysis, format)
        .map_err(|e| Failure::Failed(format!("internal error: {e}")))?;
    note(dir, rebuilt.notes);
    // The text keeps the arguments as the journal has them (no number rounded).
    let text = format!("{}\n", rebuilt.body.to_json_pretty());
    match out {
        Some(path) => {
            let mut file = Output::create(path, OutputKind::Replace).map_err(not_written)?;
            std::io::Write::write_all(&mut file, text.as_bytes())
                .map_err(|e| cannot_write(path, e))?;
            file.commit().map(drop).map_err(not_written)
        }
        None => print_data(&text),
    }
}

/// The journal a command names: a directory, or a `postgres://…?session=ID` URL (a session in
/// PostgreSQL, opened through `tooljournal-pg`); a URL of another scheme is refused.
fn place(dir: &Path) -> Result<Place, Failure> {
    match journal::Location::from_path(dir).map_err(|e| Failure::Failed(e.to_string()))? {
        journal::Location::Dir(dir) => Ok(Place::Dir(dir)),
        location => pg::open(&location)
            .map(Place::Backend)
            .map_err(|e| Failure::Failed(e.to_string())),
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Verify { dir } => verify(&place(&dir)?),
        Command::Classify {
            dir,
            json,
            dry_run,
            salvage,
            probe,
        } => classify(&place(&dir)?, json, dry_run, salvage, probe.as_deref()),
        Command::Rebuild {
            dir,
            format,
            out,
            dry_run,
            salvage,
            probe,
        } => {
            let at = place(&dir)?;
            if salvage {
                rebuild_salvaged(&at, format, out.as_deref(), probe.as_deref())
            } else {
                rebuild(&at, format, out.as_deref(), !dry_run, probe.as_deref())
            }
        }
        Command::Audit {
            dir,
            html: Some(file),
            html_bytes_max,
            probe,
            ..
        } => audit_html(&place(&dir)?, &file, html_bytes_max, probe.as_deref()),
        Command::Audit { dir, json, .. } => audit(&place(&dir)?, json),
        Command::Repair { from, file, out } => repair(&from, &file, &out),
        Command::Import {
            from,
            file,
            journal,
        } => import(&from, &file, &journal),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version succeed; a usage error is 1 (2 means a corrupt journal here).
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(cli) {
        Ok(()) | Err(Failure::StdoutClosed) => ExitCode::SUCCESS,
        Err(Failure::Failed(m)) => {
            eprintln!("error: {}", events::display::visible(&m));
            ExitCode::from(1)
        }
        Err(Failure::Corrupt(m)) => {
            eprintln!("error: {}", events::display::visible(&m));
            ExitCode::from(2)
        }
        Err(Failure::Newer(m)) => {
            eprintln!("error: {}", events::display::visible(&m));
            ExitCode::from(3)
        }
    }
}
