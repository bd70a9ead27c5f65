//! The search tools `ls`, `glob` and `grep` (DESIGN.md §9) through the runtime: happy paths and
//! limits, which calls may overlap (searches do, edits lock their path), walkers that stop when
//! cancelled. Each test checks what the model got AND what the journal says.

use crate::common;

use common::fs_env::*;
use serde_json::{json, Value};
use std::fs;

use tooljournal_runtime::fs::{
    EditTool, GlobTool, GrepTool, LsTool, ReadTool, WriteTool, GLOB_RESULTS_MAX, GREP_MATCHES_MAX,
    GREP_OUTPUT_BYTES_MAX,
};
use tooljournal_runtime::Tool;
use tooljournal_runtime::{Config, ErrorCode};

// ---------------------------------------------------------------------------------------------
// ls / glob / grep

#[tokio::test]
async fn ls_glob_grep_happy_paths_and_limits() {
    let mut env = Env::new();
    env.put(".gitignore", "target/\n*.log\n");
    env.put("README.md", "# demo\nTODO: docs\n");
    env.put("src/main.rs", "fn main() {\n    // TODO: more\n}\n");
    env.put("src/lib/util.rs", "pub fn util() {}\n");
    env.put("target/debug/gen.rs", "// TODO: generated\n");
    env.put("run.log", "TODO in a log\n");
    env.put("bin/tool", [0u8, 1, 2, b'T', b'O', b'D', b'O']);

    // ls: sorted, directories with `/`, the state directory skipped.
    let r = env.run("ls", json!({})).await;
    assert_eq!(
        r.content,
        ".gitignore\nREADME.md\nbin/\nrun.log\nsrc/\ntarget/"
    );
    assert_eq!(ok(&r)["total"], 6);
    let r = env.run("ls", json!({"path": "src"})).await;
    assert_eq!(r.content, "lib/\nmain.rs");
    let r = env.run("ls", json!({"path": "README.md"})).await;
    assert_error(&r, ErrorCode::ToolFailed);
    fs::create_dir(env.root().join("empty")).unwrap();
    let r = env.run("ls", json!({"path": "empty"})).await;
    assert_eq!(r.content, "(empty directory)");

    // glob: relative to `path`, `*` does not cross `/`, .gitignore honoured, sorted.
    let r = env.run("glob", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(r.content, "src/lib/util.rs\nsrc/main.rs");
    assert_eq!(
        ok(&r),
        &json!({"files": ["src/lib/util.rs", "src/main.rs"], "total": 2})
    );
    let r = env
        .run("glob", json!({"pattern": "*.rs", "path": "src"}))
        .await;
    assert_eq!(r.content, "src/main.rs");
    let r = env.run("glob", json!({"pattern": "*.nothing"})).await;
    assert_eq!(r.content, "no files match \"*.nothing\"");
    // An ignored directory asked for by name is searched.
    let r = env
        .run("glob", json!({"pattern": "**/*.rs", "path": "target"}))
        .await;
    assert_eq!(r.content, "target/debug/gen.rs");
    let r = env.run("glob", json!({"pattern": "a{b"})).await;
    assert_error(&r, ErrorCode::ToolFailed);

    // grep: `path:line: text`, .gitignore honoured, binary files skipped.
    let r = env.run("grep", json!({"pattern": "TODO"})).await;
    assert_eq!(
        r.content,
        "README.md:2: TODO: docs\nsrc/main.rs:2:     // TODO: more"
    );
    assert_eq!(
        ok(&r),
        &json!({"matches": 2, "files": 2, "truncated": false})
    );
    let r = env
        .run("grep", json!({"pattern": "TODO", "glob": "*.md"}))
        .await;
    assert_eq!(r.content, "README.md:2: TODO: docs");
    let r = env
        .run("grep", json!({"pattern": "TODO", "glob": "src/*.rs"}))
        .await;
    assert_eq!(r.content, "src/main.rs:2:     // TODO: more");
    let r = env
        .run("grep", json!({"pattern": "^fn", "path": "src"}))
        .await;
    assert_eq!(r.content, "src/main.rs:1: fn main() {");
    // A file named explicitly is searched even if ignored.
    let r = env
        .run("grep", json!({"pattern": "TODO", "path": "run.log"}))
        .await;
    assert_eq!(r.content, "run.log:1: TODO in a log");
    let r = env.run("grep", json!({"pattern": "nothing here"})).await;
    assert_eq!(r.content, "no matches for /nothing here/");
    let r = env.run("grep", json!({"pattern": "(unclosed"})).await;
    assert_error(&r, ErrorCode::ToolFailed);
    assert!(r.content.contains("invalid regex"), "{}", r.content);

    // glob's cap: GLOB_RESULTS_MAX shown, the rest counted.
    for i in 0..GLOB_RESULTS_MAX + 5 {
        env.put(&format!("many/f{i:05}.txt"), "");
    }
    let r = env.run("glob", json!({"pattern": "many/*.txt"})).await;
    let lines: Vec<&str> = r.content.lines().collect();
    assert_eq!(lines.len(), GLOB_RESULTS_MAX + 1);
    assert_eq!(lines[0], "many/f00000.txt");
    assert_eq!(lines[GLOB_RESULTS_MAX - 1], "many/f00999.txt");
    assert!(
        lines[GLOB_RESULTS_MAX].contains("5 more"),
        "{}",
        lines[GLOB_RESULTS_MAX]
    );
    assert_eq!(ok(&r)["total"], GLOB_RESULTS_MAX + 5);

    // ls's entries of the same directory are all there.
    let r = env.run("ls", json!({"path": "many"})).await;
    assert_eq!(ok(&r)["total"], GLOB_RESULTS_MAX + 5);

    // grep's line cap.
    let many: String = (0..GREP_MATCHES_MAX + 1)
        .map(|i| format!("hit {i}\n"))
        .collect();
    env.put("big/lines.txt", &many);
    let r = env
        .run("grep", json!({"pattern": "^hit", "path": "big"}))
        .await;
    assert_eq!(
        ok(&r),
        &json!({"matches": GREP_MATCHES_MAX, "files": 1, "truncated": true})
    );
    assert!(r.content.starts_with("big/lines.txt:1: hit 0\n"));
    assert!(r.content.contains(&format!(
        "big/lines.txt:{GREP_MATCHES_MAX}: hit {}\n",
        GREP_MATCHES_MAX - 1
    )));
    assert!(
        r.content.lines().last().unwrap().starts_with("[truncated:"),
        "{}",
        r.content.lines().last().unwrap()
    );
    let (code, effects) = env.settled(&r);
    assert_eq!((code, effects), (None, vec![]));

    // grep's byte cap: 2000 lines of ~900 bytes is over 1 MiB of output.
    let wide: String = (0..2000)
        .map(|_| format!("{}\n", "w".repeat(900)))
        .collect();
    env.put("wide/w.txt", &wide);
    let r = env
        .run("grep", json!({"pattern": "w", "path": "wide"}))
        .await;
    assert_eq!(ok(&r)["truncated"], true);
    assert!(r.content.len() <= GREP_OUTPUT_BYTES_MAX + 300);
    assert!(r.content.len() > GREP_OUTPUT_BYTES_MAX - 1000);
    assert!(r.content.lines().last().unwrap().starts_with("[truncated:"));

    // A very long matching line is cut.
    env.put("long/l.txt", format!("{}\n", "z".repeat(5000)));
    let r = env
        .run("grep", json!({"pattern": "z", "path": "long"}))
        .await;
    assert!(
        r.content.len() < 1100 && r.content.ends_with('…'),
        "{}",
        r.content.len()
    );
}

#[tokio::test]
async fn grep_and_glob_are_concurrency_safe_and_edit_is_path_locked() {
    let mut env = Env::new();
    let ws = env.ws.clone();
    let args = |v: Value| tooljournal_runtime::parse_args(&v.to_string()).unwrap();
    let a = args(json!({"path": "a.txt"}));
    assert!(GrepTool::new(ws.clone()).is_concurrency_safe(&args(json!({"pattern": "x"}))));
    assert!(GlobTool::new(ws.clone()).is_concurrency_safe(&args(json!({"pattern": "*"}))));
    assert!(LsTool::new(ws.clone()).is_concurrency_safe(&args(json!({}))));
    assert!(ReadTool::new(ws.clone()).is_concurrency_safe(&a));
    // write and edit may overlap calls on other paths; the same path is locked.
    let edit = EditTool::new(ws.clone());
    let write = WriteTool::new(ws.clone());
    assert!(edit.is_concurrency_safe(&a));
    assert!(write.is_concurrency_safe(&a));
    assert_eq!(edit.resources(&a).writes, vec!["a.txt".to_owned()]);
    assert_eq!(
        write.resources(&args(json!({"path": "./a.txt"}))).writes,
        vec!["a.txt".to_owned()],
        "aliases of one path lock the same path"
    );
    assert_eq!(
        ReadTool::new(ws.clone()).resources(&a).reads,
        vec!["a.txt".to_owned()]
    );

    // In one batch: a read, then two edits of the same file, and a grep. The path lock keeps
    // the read and the edits in model order (the edits see the read, and each other), while
    // the grep runs alongside.
    env.put("a.txt", "one two\n");
    let results = env
        .batch(&[
            ("read", json!({"path": "a.txt"})),
            (
                "edit",
                json!({"path": "a.txt", "old_string": "one", "new_string": "1"}),
            ),
            (
                "edit",
                json!({"path": "./a.txt", "old_string": "two", "new_string": "2"}),
            ),
            ("grep", json!({"pattern": "never-matches-anything"})),
        ])
        .await;
    for r in &results {
        ok(r);
    }
    assert_eq!(env.get("a.txt"), "1 2\n");
    assert_eq!(
        env.settled(&results[1]).1,
        vec![fs_write("a.txt", Some(b"one two\n"), b"1 two\n")]
    );
    assert_eq!(
        env.settled(&results[2]).1,
        vec![fs_write("a.txt", Some(b"1 two\n"), b"1 2\n")]
    );
    // The journal shows the edits started after the read, in model order.
    let started: Vec<u64> = results[..3]
        .iter()
        .map(|r| env.journaled(r).started_at_ms.unwrap())
        .collect();
    assert!(started.windows(2).all(|w| w[0] <= w[1]), "{started:?}");
    let seqs: Vec<Vec<u64>> = results[..3].iter().map(|r| env.journaled(r).seqs).collect();
    // Each call's `started` (its 4th event) comes after the previous call's `settled`.
    for w in seqs.windows(2) {
        assert!(w[1][3] > w[0][4], "{seqs:?}");
    }
}

#[tokio::test]
async fn walkers_stop_when_cancelled() {
    // A 1 ms timeout cancels the call's token; the walk notices between files and settles as
    // an error (a walker that ignored it would finish with a success, or hang past the grace).
    let mut env = Env::with_config(Config {
        timeout_ms: 1,
        attempts_max: 1,
        ..Config::default()
    });
    for d in 0..50 {
        for f in 0..100 {
            env.put(&format!("tree/d{d:02}/f{f:03}.txt"), "needle\n");
        }
    }
    for (tool, args) in [
        ("grep", json!({"pattern": "needle"})),
        ("glob", json!({"pattern": "**/*.txt"})),
    ] {
        let r = env.run(tool, args).await;
        assert_error(&r, ErrorCode::Timeout);
        assert_eq!(env.settled(&r), (Some(ErrorCode::Timeout), vec![]));
    }
    assert_eq!(env.session.stats().ignored_cancellations(), 0);
}
