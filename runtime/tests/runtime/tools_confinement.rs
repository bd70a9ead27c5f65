//! The file tools' confinement to the workspace (DESIGN.md §9) through the runtime: `..`,
//! absolute paths, symlinks out and loops refused, paths too long named with their limit, errors
//! naming their path once, a symlink inside the workspace as one path, the runtime's state
//! directories unreachable. Each test checks what the model got AND what the journal says.

use crate::common;

use common::fs_env::*;
use serde_json::json;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use tooljournal_runtime::ErrorCode;

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
