//! recover never runs a tool (DESIGN.md I5): it reads events through `runtime`'s event types
//! and `replay`, and must not reach for the executor. This test reads the crate's source and
//! fails if it names any part of the runtime that runs calls.

#[test]
fn recover_uses_no_part_of_the_runtime_that_runs_calls() {
    let forbidden = [
        "runtime::session",
        "runtime::Session",
        "runtime::driver",
        "runtime::tools",
        "runtime::tool::",
        "runtime::hooks",
        "runtime::Config",
        "run_batch",
        ".execute(",
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![dir.clone()];
    let mut checked = 0;
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for word in forbidden {
            assert!(!text.contains(word), "{} mentions {word}", path.display());
        }
        checked += 1;
    }
    assert!(checked >= 8, "read the whole crate ({checked} files)");
}
