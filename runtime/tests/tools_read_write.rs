//! The file tools (DESIGN.md §9) through the runtime: a session with `file_tools` registered as
//! built-ins, its workspace in a temporary directory, its journal on a simulated disk. Each test
//! checks what the model got AND what the journal says (settled outcome, side effects, codes).

mod common;

use common::*;
use journal::SimStorage;
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tooljournal_runtime::args;
use tooljournal_runtime::event::{OutcomeStatus, SideEffect, ToolSource};
use tooljournal_runtime::hooks::Hooks;
use tooljournal_runtime::registry::Registry;
use tooljournal_runtime::replay::CallReplay;
use tooljournal_runtime::tool::Tool;
use tooljournal_runtime::tools::fs::{
    file_tools, EditTool, GlobTool, GrepTool, LsTool, ReadTool, WriteTool, GLOB_RESULTS_MAX,
    GREP_MATCHES_MAX, GREP_OUTPUT_BYTES_MAX,
};
use tooljournal_runtime::tools::{sha256_hex, Workspace};
use tooljournal_runtime::{Config, ErrorCode, Session, ToolResult};

/// A session whose file tools are confined to `<tmp>/ws`, with the runtime's state directory
/// at `<tmp>/ws/.tooljournal` and a directory outside the workspace at `<tmp>/outside`.
struct Env {
    dir: tempfile::TempDir,
    ws: Arc<Workspace>,
    storage: SimStorage,
    session: Session,
    next_id: u32,
}

impl Env {
    fn new() -> Env {
        Env::with_config(Config::default())
    }

    fn with_config(config: Config) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        fs::create_dir_all(root.join(".tooljournal")).unwrap();
        fs::write(root.join(".tooljournal/journal.bin"), "JOURNAL needle").unwrap();
        fs::create_dir_all(dir.path().join("outside")).unwrap();
        fs::write(dir.path().join("outside/secret"), "TOPSECRET needle\n").unwrap();
        let ws = Arc::new(Workspace::new(&root, &[root.join(".tooljournal")]).unwrap());
        let mut registry = Registry::new();
        for tool in file_tools(ws.clone()) {
            registry.register(tool, ToolSource::BuiltIn).unwrap();
        }
        let storage = SimStorage::new();
        let session = session_on(&storage, Arc::new(registry), Hooks::default(), config);
        Env {
            dir,
            ws,
            storage,
            session,
            next_id: 0,
        }
    }

    fn root(&self) -> PathBuf {
        self.ws.root().to_owned()
    }

    fn outside(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap().join("outside")
    }

    fn put(&self, rel: &str, content: impl AsRef<[u8]>) {
        let p = self.root().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    fn get(&self, rel: &str) -> String {
        fs::read_to_string(self.root().join(rel)).unwrap()
    }

    /// Runs the calls as one batch (one turn, one step) and returns the results in model order.
    async fn batch(&mut self, calls: &[(&str, Value)]) -> Vec<ToolResult> {
        let calls = calls
            .iter()
            .map(|(tool, args)| {
                self.next_id += 1;
                call(&format!("c{}", self.next_id), tool, &args.to_string())
            })
            .collect();
        one_step(&mut self.session, calls).await
    }

    async fn run(&mut self, tool: &str, args: Value) -> ToolResult {
        self.batch(&[(tool, args)]).await.remove(0)
    }

    /// What the journal says about a call.
    fn journaled(&self, r: &ToolResult) -> CallReplay {
        replay(&self.storage)
            .calls()
            .find(|c| c.call.call_id == r.call_id)
            .unwrap_or_else(|| panic!("{} is in the journal", r.call_id))
            .clone()
    }

    /// The settled code (None for success) and confirmed side effects, from the journal; also
    /// checks the committed result agrees with what the model got.
    fn settled(&self, r: &ToolResult) -> (Option<ErrorCode>, Vec<SideEffect>) {
        let c = self.journaled(r);
        let outcome = c.outcome.expect("settled");
        let committed = c.committed.expect("committed");
        assert_eq!(committed.content, r.content);
        assert_eq!(committed.is_error, r.is_error);
        assert_eq!(committed.code, r.code);
        let code = match outcome.status {
            OutcomeStatus::Success => None,
            OutcomeStatus::Error { code, .. } => Some(code),
        };
        (code, outcome.side_effects)
    }
}

fn ok(r: &ToolResult) -> &Value {
    assert!(!r.is_error, "expected success: {r:?}");
    r.value.as_ref().expect("a value")
}

fn assert_error(r: &ToolResult, code: ErrorCode) {
    assert!(r.is_error, "expected {code}: {r:?}");
    assert_eq!(r.code, Some(code), "{r:?}");
    assert!(
        r.content.starts_with(&format!("{}: ", code.as_str())),
        "content begins with its code: {:?}",
        r.content
    );
}

fn fs_write(path: &str, before: Option<&[u8]>, after: &[u8]) -> SideEffect {
    SideEffect::FsWrite {
        path: path.into(),
        before_sha256: before.map(sha256_hex),
        after_sha256: sha256_hex(after),
    }
}

/// Every entry below `dir` with its content (a symlink: its target), for "nothing changed"
/// checks. Symlinks are not followed.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let meta = fs::symlink_metadata(&p).unwrap();
        if meta.is_symlink() {
            let target = fs::read_link(&p).unwrap();
            out.push((p, target.to_string_lossy().into_owned().into_bytes()));
        } else if meta.is_dir() {
            out.push((p.clone(), Vec::new()));
            out.extend(snapshot(&p));
        } else {
            out.push((p.clone(), fs::read(&p).unwrap()));
        }
    }
    out.sort();
    out
}

// ---------------------------------------------------------------------------------------------
// read / edit

#[tokio::test]
async fn read_then_edit_succeeds_and_confirms_hashes() {
    let mut env = Env::new();
    let v0 = "fn main() {\n    println!(\"hello\");\n}\n";
    env.put("src/main.rs", v0);

    let r = env.run("read", json!({"path": "src/main.rs"})).await;
    assert_eq!(r.content, v0);
    assert_eq!(
        ok(&r),
        &json!({"path": "src/main.rs", "lines": 3, "sha256": sha256_hex(v0.as_bytes())})
    );
    assert_eq!(env.settled(&r), (None, vec![]), "a read has no side effect");

    let r = env
        .run(
            "edit",
            json!({"path": "src/main.rs", "old_string": "hello", "new_string": "world"}),
        )
        .await;
    let v1 = v0.replace("hello", "world");
    assert_eq!(env.get("src/main.rs"), v1);
    assert_eq!(
        ok(&r),
        &json!({"path": "src/main.rs", "replacements": 1,
                "before_sha256": sha256_hex(v0.as_bytes()), "after_sha256": sha256_hex(v1.as_bytes())})
    );
    assert!(r.content.contains("line 2"), "{}", r.content);
    assert_eq!(
        env.settled(&r),
        (
            None,
            vec![fs_write("src/main.rs", Some(v0.as_bytes()), v1.as_bytes())]
        )
    );
    let started = env.journaled(&r).resources.expect("started");
    assert_eq!(started.writes, vec!["src/main.rs".to_owned()]);

    // The edit recorded the version it wrote: a second edit needs no new read.
    let r = env
        .run(
            "edit",
            json!({"path": "./src/main.rs", "old_string": "    ", "new_string": "\t", "replace_all": true}),
        )
        .await;
    let v2 = v1.replace("    ", "\t");
    assert_eq!(ok(&r)["replacements"], 1);
    assert_eq!(env.get("src/main.rs"), v2);
    assert_eq!(
        env.settled(&r).1,
        vec![fs_write("src/main.rs", Some(v1.as_bytes()), v2.as_bytes())]
    );
}

#[tokio::test]
async fn edit_match_rules() {
    let mut env = Env::new();
    env.put("a.txt", "x = 1\nx = 1\ny = 2\n");
    env.run("read", json!({"path": "a.txt"})).await;

    let not_found = env
        .run(
            "edit",
            json!({"path": "a.txt", "old_string": "z = 3", "new_string": "z = 4"}),
        )
        .await;
    assert_error(&not_found, ErrorCode::ToolFailed);
    assert!(not_found.content.contains("not found"));

    let ambiguous = env
        .run(
            "edit",
            json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 2"}),
        )
        .await;
    assert_error(&ambiguous, ErrorCode::ToolFailed);
    assert!(
        ambiguous.content.contains("2 times"),
        "{}",
        ambiguous.content
    );

    let same = env
        .run(
            "edit",
            json!({"path": "a.txt", "old_string": "y", "new_string": "y"}),
        )
        .await;
    assert_error(&same, ErrorCode::ToolFailed);
    for r in [&not_found, &ambiguous, &same] {
        assert_eq!(
            env.settled(r),
            (Some(ErrorCode::ToolFailed), vec![]),
            "nothing was written"
        );
    }
    assert_eq!(env.get("a.txt"), "x = 1\nx = 1\ny = 2\n");

    let all = env
        .run(
            "edit",
            json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 2", "replace_all": true}),
        )
        .await;
    assert_eq!(ok(&all)["replacements"], 2);
    assert_eq!(env.get("a.txt"), "x = 2\nx = 2\ny = 2\n");

    let missing = env
        .run(
            "edit",
            json!({"path": "nope.txt", "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert_error(&missing, ErrorCode::ToolFailed);
    assert!(!env.root().join("nope.txt").exists());
}

#[tokio::test]
async fn edit_of_a_file_changed_since_it_was_read_fails_stale() {
    let mut env = Env::new();
    env.put("cfg.toml", "level = 1\n");
    let r = env.run("read", json!({"path": "cfg.toml"})).await;
    ok(&r);

    // Someone else changes the file behind the session's back.
    env.put("cfg.toml", "level = 1\nother = true\n");
    let r = env
        .run(
            "edit",
            json!({"path": "cfg.toml", "old_string": "level = 1", "new_string": "level = 2"}),
        )
        .await;
    assert_error(&r, ErrorCode::FsStaleVersion);
    assert!(
        r.content.contains("changed since it was read"),
        "{}",
        r.content
    );
    assert_eq!(env.get("cfg.toml"), "level = 1\nother = true\n");
    assert_eq!(
        env.settled(&r),
        (Some(ErrorCode::FsStaleVersion), vec![]),
        "the journal shows the refusal and no write"
    );

    // A write over it is refused by the same rule.
    let w = env
        .run("write", json!({"path": "cfg.toml", "content": "clobbered"}))
        .await;
    assert_error(&w, ErrorCode::FsStaleVersion);
    assert_eq!(env.get("cfg.toml"), "level = 1\nother = true\n");

    // Reading again makes the edit possible.
    env.run("read", json!({"path": "cfg.toml"})).await;
    let r = env
        .run(
            "edit",
            json!({"path": "cfg.toml", "old_string": "level = 1", "new_string": "level = 2"}),
        )
        .await;
    ok(&r);
    assert_eq!(env.get("cfg.toml"), "level = 2\nother = true\n");
}

#[tokio::test]
async fn edit_without_a_prior_read_is_refused() {
    let mut env = Env::new();
    env.put("a.txt", "alpha\n");
    let r = env
        .run(
            "edit",
            json!({"path": "a.txt", "old_string": "alpha", "new_string": "beta"}),
        )
        .await;
    assert_error(&r, ErrorCode::FsStaleVersion);
    assert!(r.content.contains("read it first"), "{}", r.content);
    assert_eq!(env.get("a.txt"), "alpha\n");
    assert_eq!(env.settled(&r), (Some(ErrorCode::FsStaleVersion), vec![]));
}

#[tokio::test]
async fn read_ranges_binary_and_errors() {
    let mut env = Env::new();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    env.put("ten.txt", &text);
    let r = env
        .run("read", json!({"path": "ten.txt", "offset": 3, "limit": 2}))
        .await;
    assert_eq!(r.content, "line 3\nline 4\n");
    // The recorded version is the whole file's, even for a range.
    assert_eq!(ok(&r)["sha256"], sha256_hex(text.as_bytes()));
    assert_eq!(ok(&r)["lines"], 10);
    let r = env
        .run("read", json!({"path": "ten.txt", "offset": 9}))
        .await;
    assert_eq!(r.content, "line 9\nline 10\n");
    let r = env
        .run("read", json!({"path": "ten.txt", "offset": 11}))
        .await;
    assert_error(&r, ErrorCode::ToolFailed);

    env.put("no-newline.txt", "a\nb");
    let r = env.run("read", json!({"path": "no-newline.txt"})).await;
    assert_eq!((r.content.as_str(), &ok(&r)["lines"]), ("a\nb", &json!(2)));

    env.put("empty.txt", "");
    let r = env.run("read", json!({"path": "empty.txt"})).await;
    assert_eq!((r.content.as_str(), &ok(&r)["lines"]), ("", &json!(0)));

    env.put("blob.bin", [0x89u8, b'P', b'N', b'G', 0, 1, 2]);
    let r = env.run("read", json!({"path": "blob.bin"})).await;
    assert_error(&r, ErrorCode::ToolFailed);
    assert!(r.content.contains("binary file"), "{}", r.content);
    env.put("latin1.txt", [b'c', b'a', b'f', 0xe9, b'\n']);
    let r = env.run("read", json!({"path": "latin1.txt"})).await;
    assert!(r.content.contains("binary file"), "{}", r.content);

    let r = env.run("read", json!({"path": "missing.txt"})).await;
    assert_error(&r, ErrorCode::ToolFailed);
    assert!(r.content.contains("does not exist"), "{}", r.content);
    fs::create_dir(env.root().join("d")).unwrap();
    let r = env.run("read", json!({"path": "d"})).await;
    assert_error(&r, ErrorCode::ToolFailed);
    assert_eq!(env.settled(&r), (Some(ErrorCode::ToolFailed), vec![]));
}

#[tokio::test]
async fn schemas_require_fields_and_refuse_unknown_ones() {
    let mut env = Env::new();
    env.put("a.txt", "a");
    for (tool, args) in [
        ("read", json!({})),
        ("read", json!({"path": "a.txt", "bogus": 1})),
        ("read", json!({"path": "a.txt", "offset": 0})),
        ("write", json!({"path": "a.txt"})),
        ("edit", json!({"path": "a.txt", "old_string": "a"})),
        (
            "edit",
            json!({"path": "a.txt", "old_string": "", "new_string": "b"}),
        ),
        ("ls", json!({"recursive": true})),
        ("glob", json!({"path": "."})),
        ("grep", json!({"pattern": "a", "include": "*.rs"})),
    ] {
        let r = env.run(tool, args.clone()).await;
        assert_error(&r, ErrorCode::SchemaError);
        let c = env.journaled(&r);
        assert_eq!(c.started_at_ms, None, "{tool} {args} never started");
    }
    for tool in file_tools(env.ws.clone()) {
        let schema = tool.input_schema();
        assert_eq!(schema["additionalProperties"], false, "{}", tool.name());
        assert!(schema["required"].is_array(), "{}", tool.name());
    }
}

// ---------------------------------------------------------------------------------------------
// write

#[tokio::test]
async fn write_confirms_before_and_after_hashes() {
    let mut env = Env::new();
    let r = env
        .run(
            "write",
            json!({"path": "new/dir/file.txt", "content": "first\n"}),
        )
        .await;
    assert_eq!(
        ok(&r),
        &json!({"path": "new/dir/file.txt", "bytes": 6, "before_sha256": null,
                "after_sha256": sha256_hex(b"first\n")})
    );
    assert_eq!(env.get("new/dir/file.txt"), "first\n");
    let (code, effects) = env.settled(&r);
    assert_eq!(code, None);
    assert_eq!(
        effects,
        vec![
            SideEffect::Other {
                kind: "fs/mkdir".into(),
                detail: "new".into()
            },
            SideEffect::Other {
                kind: "fs/mkdir".into(),
                detail: "new/dir".into()
            },
            fs_write("new/dir/file.txt", None, b"first\n"),
        ],
        "before is None for a new file; created directories are recorded too"
    );

    // Overwrite (never read, but written by this session: allowed), before = the old hash.
    let r = env
        .run(
            "write",
            json!({"path": "new/dir/file.txt", "content": "second\n"}),
        )
        .await;
    ok(&r);
    assert_eq!(
        env.settled(&r).1,
        vec![fs_write("new/dir/file.txt", Some(b"first\n"), b"second\n")]
    );

    // A file the session never read may be replaced.
    env.put("existing.txt", "old");
    let r = env
        .run("write", json!({"path": "existing.txt", "content": "new"}))
        .await;
    ok(&r);
    assert_eq!(
        env.settled(&r).1,
        vec![fs_write("existing.txt", Some(b"old"), b"new")]
    );

    // An edit right after a write works: the write recorded its version.
    let r = env
        .run(
            "edit",
            json!({"path": "new/dir/file.txt", "old_string": "second", "new_string": "third"}),
        )
        .await;
    ok(&r);
    assert_eq!(env.get("new/dir/file.txt"), "third\n");

    // The write is atomic: no temporary file is left behind.
    let names: Vec<String> = fs::read_dir(env.root().join("new/dir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["file.txt".to_owned()]);

    // A directory is not replaced.
    let r = env
        .run("write", json!({"path": "new", "content": "x"}))
        .await;
    assert_error(&r, ErrorCode::ToolFailed);
    assert!(env.root().join("new/dir/file.txt").exists());
    assert_eq!(env.settled(&r), (Some(ErrorCode::ToolFailed), vec![]));
}

#[cfg(unix)]
#[tokio::test]
async fn write_keeps_an_existing_files_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let mut env = Env::new();
    env.put("run.sh", "#!/bin/sh\n");
    fs::set_permissions(env.root().join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    let r = env
        .run(
            "write",
            json!({"path": "run.sh", "content": "#!/bin/sh\necho hi\n"}),
        )
        .await;
    ok(&r);
    let mode = fs::metadata(env.root().join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
}

// ---------------------------------------------------------------------------------------------
// Confinement

#[tokio::test]
async fn confinement_refuses_parent_absolute_symlink_out_and_loop() {
    let mut env = Env::new();
    let outside = env.outside();
    let secret = outside.join("secret");
    symlink(&secret, env.root().join("out")).unwrap();
    symlink(&outside, env.root().join("outdir")).unwrap();
    symlink(env.root().join("loop"), env.root().join("loop")).unwrap();
    let passwd_before = fs::read("/etc/passwd").ok();
    let outside_before = snapshot(env.dir.path());
    let parent_x = env.dir.path().join("x");

    let absolute_secret = secret.to_string_lossy().into_owned();
    let paths = [
        "../x",
        "../outside/secret",
        "sub/../../outside/secret",
        "/etc/passwd",
        absolute_secret.as_str(),
        "out",
        "outdir/secret",
        "outdir/new.txt",
        "loop",
        "loop/inner",
    ];
    for path in paths {
        let read = env.run("read", json!({"path": path})).await;
        assert_error(&read, ErrorCode::FsOutsideWorkspace);
        assert!(!read.content.contains("TOPSECRET"));
        let write = env
            .run("write", json!({"path": path, "content": "pwned"}))
            .await;
        assert_error(&write, ErrorCode::FsOutsideWorkspace);
        let edit = env
            .run(
                "edit",
                json!({"path": path, "old_string": "TOPSECRET", "new_string": "pwned"}),
            )
            .await;
        assert_error(&edit, ErrorCode::FsOutsideWorkspace);
        let ls = env.run("ls", json!({"path": path})).await;
        assert_error(&ls, ErrorCode::FsOutsideWorkspace);
        let grep = env
            .run("grep", json!({"pattern": "TOPSECRET", "path": path}))
            .await;
        assert_error(&grep, ErrorCode::FsOutsideWorkspace);
        let glob = env.run("glob", json!({"pattern": "*", "path": path})).await;
        assert_error(&glob, ErrorCode::FsOutsideWorkspace);
        for r in [&read, &write, &edit, &ls, &grep, &glob] {
            assert_eq!(
                env.settled(r),
                (Some(ErrorCode::FsOutsideWorkspace), vec![]),
                "{path}: refused, and no side effect journaled"
            );
        }
    }

    // Walks from inside do not follow the links out either.
    let grep = env.run("grep", json!({"pattern": "TOPSECRET"})).await;
    assert_eq!(grep.content, "no matches for /TOPSECRET/");
    let glob = env.run("glob", json!({"pattern": "**/secret"})).await;
    assert_eq!(glob.content, "no files match \"**/secret\"");

    // Nothing outside was read into a result, written, or created.
    assert_eq!(fs::read("/etc/passwd").ok(), passwd_before);
    assert_eq!(snapshot(env.dir.path()), outside_before);
    assert!(!parent_x.exists());
    assert!(!outside.join("new.txt").exists());
    assert_eq!(fs::read_to_string(&secret).unwrap(), "TOPSECRET needle\n");
}

#[tokio::test]
async fn a_path_too_long_is_refused_naming_the_limit_not_as_outside() {
    let mut env = Env::new();
    let before = snapshot(env.dir.path());
    let long_name = "n".repeat(5000);
    // Every name short enough, the whole over PATH_MAX.
    let deep = vec!["d".repeat(200); 25].join("/");
    for (path, limit) in [
        (
            long_name.as_str(),
            "a name of 5000 bytes is over the limit of 255 bytes per name",
        ),
        (
            deep.as_str(),
            "5024 bytes is over the limit of 4095 bytes per path",
        ),
    ] {
        let calls = [
            ("read", json!({"path": path})),
            ("write", json!({"path": path, "content": "x"})),
            (
                "edit",
                json!({"path": path, "old_string": "a", "new_string": "b"}),
            ),
            ("ls", json!({"path": path})),
            ("grep", json!({"pattern": "x", "path": path})),
            ("glob", json!({"pattern": "*", "path": path})),
        ];
        for (tool, args) in calls {
            let r = env.run(tool, args).await;
            assert_error(&r, ErrorCode::ToolFailed);
            assert!(
                r.content.starts_with("TOOL_FAILED: path too long: ") && r.content.contains(limit),
                "{tool}: {}",
                r.content
            );
            // The path is shown by its start and length, not 5,000 bytes of it.
            assert!(r.content.len() < 300, "{tool}: {} bytes", r.content.len());
            assert_eq!(env.settled(&r), (Some(ErrorCode::ToolFailed), vec![]));
        }
    }
    assert_eq!(snapshot(env.dir.path()), before);
}

#[tokio::test]
async fn file_tool_errors_name_their_path_once() {
    let mut env = Env::new();
    env.put("ju/inner.txt", "x\n");
    env.put("file.txt", "x\n");
    let cases = [
        (
            "read",
            json!({"path": "ju"}),
            "ju is a directory; use ls to list it",
        ),
        ("read", json!({"path": "jux"}), "jux does not exist"),
        (
            "write",
            json!({"path": "ju", "content": "x"}),
            "ju is a directory",
        ),
        (
            "edit",
            json!({"path": "jux", "old_string": "a", "new_string": "b"}),
            "jux does not exist; use write to create it",
        ),
        (
            "ls",
            json!({"path": "file.txt"}),
            "file.txt is not a directory",
        ),
        (
            "glob",
            json!({"pattern": "*", "path": "file.txt"}),
            "file.txt is not a directory",
        ),
        // A file where a directory is needed is not a question of confinement.
        (
            "write",
            json!({"path": "file.txt/x", "content": "x"}),
            "\"file.txt/x\": file.txt is not a directory",
        ),
        (
            "read",
            json!({"path": "file.txt/x"}),
            "\"file.txt/x\": file.txt is not a directory",
        ),
    ];
    for (tool, args, message) in cases {
        let r = env.run(tool, args).await;
        assert_error(&r, ErrorCode::ToolFailed);
        assert_eq!(r.content, format!("TOOL_FAILED: {message}"), "{tool}");
    }
}

#[tokio::test]
async fn a_symlink_inside_the_workspace_is_one_path() {
    let mut env = Env::new();
    env.put("real/a.txt", "one\n");
    symlink(env.root().join("real"), env.root().join("alias")).unwrap();
    let r = env.run("read", json!({"path": "alias/a.txt"})).await;
    assert_eq!(ok(&r)["path"], "real/a.txt");
    // Read through the alias, edited by the real name: the same version.
    let r = env
        .run(
            "edit",
            json!({"path": "real/a.txt", "old_string": "one", "new_string": "two"}),
        )
        .await;
    ok(&r);
    assert_eq!(
        env.settled(&r).1,
        vec![fs_write("real/a.txt", Some(b"one\n"), b"two\n")]
    );
}

#[tokio::test]
async fn state_dirs_are_unreachable() {
    let mut env = Env::new();
    let before = snapshot(&env.root().join(".tooljournal"));

    for path in [
        ".tooljournal",
        ".tooljournal/journal.bin",
        "./.tooljournal/x",
    ] {
        let r = env.run("read", json!({"path": path})).await;
        assert_error(&r, ErrorCode::FsOutsideWorkspace);
        let r = env
            .run("write", json!({"path": path, "content": "x"}))
            .await;
        assert_error(&r, ErrorCode::FsOutsideWorkspace);
        assert_eq!(
            env.settled(&r),
            (Some(ErrorCode::FsOutsideWorkspace), vec![])
        );
        let r = env.run("ls", json!({"path": path})).await;
        assert_error(&r, ErrorCode::FsOutsideWorkspace);
        let r = env
            .run("grep", json!({"pattern": "needle", "path": path}))
            .await;
        assert_error(&r, ErrorCode::FsOutsideWorkspace);
    }
    // A symlink to the state directory does not lead into it.
    symlink(
        env.root().join(".tooljournal"),
        env.root().join("state-link"),
    )
    .unwrap();
    let r = env
        .run("read", json!({"path": "state-link/journal.bin"}))
        .await;
    assert_error(&r, ErrorCode::FsOutsideWorkspace);

    // Listings and walks skip it.
    env.put("visible.txt", "needle\n");
    let ls = env.run("ls", json!({})).await;
    assert!(!ls.content.contains(".tooljournal"), "{}", ls.content);
    let glob = env.run("glob", json!({"pattern": "**"})).await;
    assert!(!glob.content.contains(".tooljournal"), "{}", glob.content);
    let grep = env.run("grep", json!({"pattern": "needle|JOURNAL"})).await;
    assert_eq!(grep.content, "visible.txt:1: needle");

    assert_eq!(snapshot(&env.root().join(".tooljournal")), before);
}

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
    let args = |v: Value| args::parse(&v.to_string()).unwrap();
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
