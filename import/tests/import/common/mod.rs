//! The fixtures under `tests/data/import/<agent>/`, shared by this crate's tests.

// Each test binary uses some of these.
#![allow(dead_code)]

use std::path::PathBuf;
use tooljournal_import::Agent;

/// Every agent this crate reads.
pub const AGENTS: [Agent; 3] = [Agent::Codex, Agent::Pi, Agent::ClaudeCode];

/// The seven kinds of session file read (a normal one, then each way one goes wrong): each
/// agent has a fixture of each, none may go missing unnoticed.
const SITUATIONS: [&str; 7] = [
    "normal",
    "no_output",
    "parallel_missing",
    "length_cut",
    "torn_tail",
    "bad_middle",
    "unknown_item",
];

/// `agent`'s fixture files (`*.jsonl`), sorted; fails if a situation has none.
pub fn fixtures(agent: Agent) -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/import")
        .join(agent.name());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    for wanted in SITUATIONS {
        assert!(
            files
                .iter()
                .any(|p| p.file_stem().is_some_and(|s| s == wanted)),
            "{}: no {wanted}.jsonl",
            dir.display()
        );
    }
    files
}

/// `agent`'s fixtures, each named by its path, with its bytes.
pub fn fixture_bytes(agent: Agent) -> Vec<(String, Vec<u8>)> {
    fixtures(agent)
        .into_iter()
        .map(|f| (f.display().to_string(), std::fs::read(f).unwrap()))
        .collect()
}
