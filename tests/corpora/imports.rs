//! Other agents' session files (`import-real/<agent>/*.jsonl`).

pub fn run_all(_root: &std::path::Path) {}
