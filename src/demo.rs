//! `tooljournal demo`: the newcomer's first command.
//!
//! Runs a bundled transcript in a fresh temporary workspace: reads, a grep whose result spills,
//! an edit, a stale edit, a refused path and a denied question, a parallel batch, a `bash` call
//! stopped mid-run, and a batch cut at the model's length limit. Then it prints where the
//! journal is and what to try on it.

use crate::run::{self, Approve};
use crate::CliError;
use journal::FsyncPolicy;
use runtime::model::{parse_script, ScriptedModel};

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

    outln!("\nWhat happened is all in the journal. Try:")?;
    outln!("  tooljournal journal verify {}", journal_dir.display())?;
    outln!(
        "  tooljournal journal dump {} --json",
        journal_dir.display()
    )?;
    outln!("  tooljournal resume --journal {}", journal_dir.display())?;
    Ok(())
}
