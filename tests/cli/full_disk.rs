//! A full disk under a real session: `tooljournal run` on a small tmpfs, with results large
//! enough to spill. The session must stop (exit 1, naming the full disk and the file), never
//! hang, release its lock, and leave a journal that recovers once there is room again.
//!
//! Mounting a tmpfs needs root: elsewhere the test says so on stderr and checks nothing (the
//! fault-injected store in `runtime/tests/runtime/spill.rs` covers the spill path everywhere).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A tmpfs of `size_mib`, unmounted on drop.
struct Tmpfs {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Tmpfs {
    fn mount(size_mib: u32) -> Option<Tmpfs> {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED: mounting a small tmpfs needs root");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk");
        std::fs::create_dir(&path).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mib}m"), "tmpfs"])
            .arg(&path)
            .output()
            .expect("mount runs");
        // Root that cannot mount is a broken test machine, not a reason to pass.
        assert!(
            out.status.success(),
            "mount -t tmpfs failed as root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(Tmpfs { _dir: dir, path })
    }

    fn grow(&self, size_mib: u32) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={size_mib}m")])
            .arg(&self.path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

fn big_output_call(id: &str, stop: &str) -> String {
    // Distinct per call: the store is content-addressed, so equal outputs would be kept once.
    let command = format!("yes {id} | head -c 1500000");
    serde_json::json!({"assistant": {"text": "", "tool_calls": [
        {"id": id, "name": "bash", "arguments": serde_json::json!({ "command": command }).to_string()}
    ], "stop_reason": stop}})
    .to_string()
}

fn lock_is_held(journal: &Path) -> bool {
    let Ok(file) = std::fs::File::open(journal.join("LOCK")) else {
        return false;
    };
    matches!(
        file.try_lock_shared(),
        Err(std::fs::TryLockError::WouldBlock)
    )
}

#[test]
fn a_full_disk_stops_the_session_names_the_disk_and_leaves_a_recoverable_journal() {
    let Some(disk) = Tmpfs::mount(3) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let script = tmp.path().join("s.jsonl");
    let lines = [
        serde_json::json!({"user": "fill the disk"}).to_string(),
        big_output_call("b1", "tool_use"),
        big_output_call("b2", "tool_use"),
        big_output_call("b3", "tool_use"),
        big_output_call("b4", "end_turn"),
    ];
    std::fs::write(&script, lines.join("\n")).unwrap();
    let journal = disk.path.join("journal");

    let mut child = Command::new(env!("CARGO_BIN_EXE_tooljournal"))
        .args(["run", "--script"])
        .arg(&script)
        .arg("--workspace")
        .arg(&ws)
        .arg("--journal")
        .arg(&journal)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A bound on the wait, not a timing assertion: a hung session fails here instead of
    // hanging the suite.
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("tooljournal run hung on a full disk");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains("the disk is full"), "{stderr}");
    assert!(
        stderr.contains(".segment") || stderr.contains("spill"),
        "names the file: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    // The system's words, not a library's `Debug` ("IO error: Os { code: 28, kind: … }").
    for theirs in ["Os {", "kind: StorageFull", "IO error:"] {
        assert!(!stderr.contains(theirs), "{stderr}");
    }
    assert!(!lock_is_held(&journal), "the lock was released");

    // Read-only, it already tells the truth; with room again it recovers and balances.
    let dry = recover::Recovery::of(&journal)
        .run()
        .expect("readable on a full disk");
    assert!(dry.analysis.replay.open.is_some());
    // A call shown as `ok` was settled durably: its result is in the journal.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let shown_ok: Vec<&str> = stdout
        .lines()
        .filter(|l| l.trim_end().ends_with(" ok"))
        .filter_map(|l| l.split_whitespace().nth(4))
        .collect();
    assert!(!shown_ok.is_empty(), "some calls finished first: {stdout}");
    for id in shown_ok {
        let call = dry.analysis.replay.calls().find(|c| c.call.call_id == id);
        assert!(
            call.is_some_and(|c| c.outcome.is_some()),
            "{id} was shown ok but its settled record is not in the journal"
        );
    }
    disk.grow(64);
    let recovered = recover::Recovery::of(&journal)
        .write(true)
        .run()
        .expect("recoverable");
    assert!(recovered
        .analysis
        .calls
        .iter()
        .any(|c| c.call.call_id == "b1"));
    let again = recover::Recovery::of(&journal)
        .write(true)
        .run()
        .expect("still recoverable");
    assert!(!again.appended, "balanced once, for good");
}
