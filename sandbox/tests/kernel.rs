//! The sandbox as the kernel enforces it: a shell started confined, asked to do what the
//! policy forbids and what it allows. Fails (never skips) where the kernel lacks Landlock or
//! namespaces: this project's machines have both.

// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Stdio;
use tooljournal_sandbox::{Sandbox, SandboxPolicy, Spec};

struct Ran {
    status: i32,
    output: String,
}

async fn run(sandbox: &Sandbox, cwd: &Path, script: &str) -> Ran {
    let mut command = tokio::process::Command::new("/bin/sh");
    command
        .args(["-c", script])
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    sandbox.confine(&mut command).unwrap();
    let out = command.output().await.unwrap();
    Ran {
        status: out.status.code().unwrap_or(-1),
        output: String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr),
    }
}

fn setup(policy: SandboxPolicy) -> (tempfile::TempDir, Sandbox) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    std::fs::create_dir(dir.path().join("journal")).unwrap();
    std::fs::write(dir.path().join("journal/secret"), "journal bytes").unwrap();
    std::fs::write(dir.path().join("outside"), "outside bytes").unwrap();
    let mut spec = Spec::new(policy, dir.path().join("ws"));
    spec.hidden.push(dir.path().join("journal"));
    let sandbox = Sandbox::new(spec).unwrap();
    (dir, sandbox)
}

#[tokio::test]
async fn workspace_write_confines_writes_reads_and_the_network() {
    let (dir, sandbox) = setup(SandboxPolicy::WorkspaceWrite);
    assert!(sandbox.bound().enforced, "{:?}", sandbox.bound());
    let ws = dir.path().join("ws");
    let base = dir.path().display();
    let inside = run(
        &sandbox,
        &ws,
        "echo hi > inside.txt && cat inside.txt && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"",
    )
    .await;
    assert_eq!((inside.status, inside.output.as_str()), (0, "hi\nt\n"));
    let outside = run(&sandbox, &ws, &format!("echo x > {base}/new.txt")).await;
    assert_ne!(outside.status, 0);
    assert!(
        outside.output.contains("Permission denied"),
        "{}",
        outside.output
    );
    assert!(!dir.path().join("new.txt").exists());
    let journal = run(
        &sandbox,
        &ws,
        &format!("cat {base}/journal/secret; ls {base}/journal"),
    )
    .await;
    assert!(
        !journal.output.contains("journal bytes"),
        "{}",
        journal.output
    );
    assert!(
        journal.output.contains("Permission denied"),
        "{}",
        journal.output
    );
    let truncate = run(&sandbox, &ws, &format!(": > {base}/outside")).await;
    assert_ne!(truncate.status, 0);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("outside")).unwrap(),
        "outside bytes"
    );
    // Of /dev, only the harmless devices: a disk's device file would hold every byte.
    let devices = run(
        &sandbox,
        &ws,
        "echo x > /dev/null && head -c 4 /dev/urandom | wc -c && ls /dev",
    )
    .await;
    assert!(devices.output.starts_with("4\n"), "{}", devices.output);
    assert!(
        devices.output.contains("Permission denied"),
        "{}",
        devices.output
    );
    // The system's programs still run, and the network is gone, loopback included.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let net = run(
        &sandbox,
        &ws,
        &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"),
    )
    .await;
    assert!(!net.output.contains("connected"), "{}", net.output);
    assert_ne!(net.status, 0);
    // Nor a daemon's socket file outside (a bus, an agent): socket(AF_UNIX) is refused, and
    // socketpair, a command's own pipe, is not.
    let path = dir.path().join("daemon.sock");
    let _daemon = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::fs::write(
        ws.join("unix.pl"),
        r#"use IO::Socket::UNIX; use Socket;
socketpair(my $a, my $b, AF_UNIX, SOCK_STREAM, 0) or die "socketpair: $!\n";
print "pair\n";
IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "connect: $!\n";
print "connected\n";
"#,
    )
    .unwrap();
    let script = format!("perl unix.pl {}", path.display());
    let unix = run(&sandbox, &ws, &script).await;
    assert!(unix.output.starts_with("pair\n"), "{}", unix.output);
    assert!(
        unix.output.contains("connect: Permission denied"),
        "{}",
        unix.output
    );
    let full = Sandbox::unconfined(false);
    let unix = run(&full, &ws, &script).await;
    assert!(unix.output.contains("connected"), "{}", unix.output);
}

#[tokio::test]
async fn read_only_writes_nothing_and_danger_full_access_everything() {
    let (dir, sandbox) = setup(SandboxPolicy::ReadOnly);
    let ws = dir.path().join("ws");
    std::fs::write(ws.join("a"), "a").unwrap();
    let ran = run(&sandbox, &ws, "cat a && echo b > b").await;
    assert!(
        ran.output.starts_with('a') && ran.status != 0,
        "{}",
        ran.output
    );
    assert!(!ws.join("b").exists());
    assert!(sandbox.temp_dir().is_none() && sandbox.bound().writable.is_empty());
    let full = Sandbox::unconfined(false);
    let base = dir.path().display();
    let ran = run(
        &full,
        &ws,
        &format!("cat {base}/journal/secret && echo x > {base}/new.txt"),
    )
    .await;
    assert_eq!((ran.status, ran.output.as_str()), (0, "journal bytes"));
    assert!(!full.bound().confines());
}

#[tokio::test]
async fn a_process_left_behind_stays_confined() {
    let (dir, sandbox) = setup(SandboxPolicy::WorkspaceWrite);
    let ws = dir.path().join("ws");
    let base = dir.path().display();
    let ran = run(
        &sandbox,
        &ws,
        &format!("setsid sh -c 'sleep 0.2; {{ echo late > {base}/late.txt; }} 2> err.txt; echo done >> err.txt' > /dev/null 2>&1 &"),
    )
    .await;
    assert_eq!(ran.status, 0);
    let err = ws.join("err.txt");
    for _ in 0..100 {
        if std::fs::read_to_string(&err).is_ok_and(|s| s.contains("done")) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let said = std::fs::read_to_string(&err).unwrap();
    assert!(said.contains("Permission denied"), "{said}");
    assert!(!dir.path().join("late.txt").exists());
}
