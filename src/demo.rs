//! `tooljournal demo`: the newcomer's first command.
//!
//! Runs a bundled transcript in a fresh temporary workspace: reads, a grep whose result spills,
//! an edit, a stale edit, a refused path, a declined question and one answered by choosing an
//! option, a parallel batch, a `bash` call stopped mid-run, and a batch cut at the model's
//! length limit. Then it prints where the journal is and what to try on it.

use crate::policy::Approve;
use crate::run;
use crate::CliError;
use journal::FsyncPolicy;
use runtime::{parse_script, ScriptedModel};

const TRANSCRIPT: &str = include_str!("demo.jsonl");

fn failed(what: &str, e: impl std::fmt::Display) -> CliError {
    CliError::Failed(format!("{what}: {e}"))
}

pub fn run() -> Result<(), CliError> {
    let dir = tempfile::Builder::new()
        .prefix("tooljournal-demo-")
        .tempdir()
        .map_err(|e| failed("cannot create a temporary directory", e))?
        .keep();
    let ws = dir.join("workspace");
    let journal_dir = dir.join("journal");
    let setup = || -> std::io::Result<()> {
        std::fs::create_dir_all(ws.join("logs"))?;
        std::fs::create_dir_all(ws.join("src"))?;
        std::fs::write(
            ws.join("notes.txt"),
            "TODO: tidy these notes\nkeep this line\n",
        )?;
        std::fs::write(ws.join("src/main.rs"), "fn main() {}\n")?;
        // Enough matching lines that grep's result is too large for the model: it spills.
        let log: String = (0..4000)
            .map(|i| {
                if i % 2 == 0 {
                    format!(
                        "2026-11-29T10:{:02}:{:02} ERROR request {i} failed: upstream timeout\n",
                        i / 60 % 60,
                        i % 60
                    )
                } else {
                    format!(
                        "2026-11-29T10:{:02}:{:02} INFO request {i} ok\n",
                        i / 60 % 60,
                        i % 60
                    )
                }
            })
            .collect();
        std::fs::write(ws.join("logs/app.log"), log)
    };
    setup().map_err(|e| failed("cannot set up the demo workspace", e))?;

    outln!("workspace: {}", ws.display())?;
    outln!("journal: {}", journal_dir.display())?;
    let model = ScriptedModel::new(
        parse_script(TRANSCRIPT, "demo.jsonl").map_err(|e| failed("bundled transcript", e))?,
    );
    run::run_model(
        model,
        &ws,
        &journal_dir,
        Approve::Allow,
        10,
        FsyncPolicy::Group,
        false,
    )?;

    let crashed = dir.join("crashed-journal");
    crash_copy(&journal_dir, &crashed)?;
    outln!(
        "\nWhat happened is all in the journal. Try (after `cargo build --release --workspace`,"
    )?;
    outln!("with target/release on your PATH):")?;
    outln!("  tooljournal journal verify {}", journal_dir.display())?;
    outln!(
        "  tooljournal journal dump {} --json",
        journal_dir.display()
    )?;
    outln!("  recover audit {}", journal_dir.display())?;
    outln!(
        "\n{} is that journal as a crash would have left it: the power went out while\n\
         `sleep 30` ran (d12), with d13 queued behind it, halfway through a write. Try:",
        crashed.display()
    )?;
    outln!("  recover classify {}", crashed.display())?;
    outln!("  recover rebuild {} --format anthropic", crashed.display())?;
    outln!("  recover audit {}", crashed.display())?;
    outln!(
        "  recover audit {} --html crashed.html   (the same as a picture; open it in a browser)",
        crashed.display()
    )?;
    Ok(())
}

/// Copies the demo's journal as a crash would have left it: everything up to and including
/// d12's `started`, then the first bytes of the next record (a torn tail).
fn crash_copy(journal_dir: &std::path::Path, crashed: &std::path::Path) -> Result<(), CliError> {
    use runtime::event::{Event, Record};
    let storage: std::sync::Arc<dyn journal::Storage> = std::sync::Arc::new(
        journal::FsStorage::open(journal_dir)
            .map_err(|e| failed("cannot reopen the demo journal", e))?,
    );
    let mut cut = None;
    for record in journal::Reader::open(storage, journal::Limits::default())? {
        let record = record?;
        if let Ok(Record {
            event: Event::Started(runtime::event::CallStarted { call, .. }),
            ..
        }) = record.decode::<Record>()
        {
            if call.call_id == "d12" {
                cut = Some(record.position.offset + record.frame_bytes);
            }
        }
    }
    let cut = cut.ok_or_else(|| CliError::Failed("the demo journal has no start of d12".into()))?;
    let name = journal::segment::file_name(0);
    let bytes = std::fs::read(journal_dir.join(&name))
        .map_err(|e| failed("cannot read the demo journal", e))?;
    let torn_end = (cut as usize + 9).min(bytes.len());
    // A journal's modes, as the journal gives its own files.
    journal::FsStorage::create(crashed).map_err(|e| failed("cannot create the crashed copy", e))?;
    std::os::unix::fs::OpenOptionsExt::mode(
        std::fs::OpenOptions::new().write(true).create_new(true),
        0o600,
    )
    .open(crashed.join(&name))
    .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes[..torn_end]))
    .map_err(|e| failed("cannot write the crashed copy", e))
}
