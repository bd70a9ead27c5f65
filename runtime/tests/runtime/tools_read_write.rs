//! The file tools `read`, `edit` and `write` (DESIGN.md §9) through the runtime: reads that
//! confirm hashes, edits' match rules, stale and unread edits refused, ranges and binary files,
//! strict schemas, writes that confirm before and after hashes and keep permissions. Each test
//! checks what the model got AND what the journal says (settled outcome, side effects, codes).

use crate::common;

use common::fs_env::*;
use serde_json::json;
use std::fs;
use tooljournal_runtime::event::SideEffect;
use tooljournal_runtime::fs::file_tools;
use tooljournal_runtime::sha256_hex;
use tooljournal_runtime::ErrorCode;

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
