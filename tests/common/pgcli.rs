//! The binaries (`tooljournal`, `recover`) run against the test PostgreSQL server and against
//! directories, for `tests/cli/postgres_cli.rs`.
//!
//! Why a module: every test there runs the same transcripts into fresh workspaces on both
//! backends and runs the same commands on both; `recover` belongs to another package, so its
//! binary is built here once (cargo gives integration tests only their own package's binaries).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A command's exit code and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Ran {
    fn from(out: Output) -> Ran {
        Ran {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl std::fmt::Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

pub fn tooljournal_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tooljournal"))
}

pub use crate::common::recover_bin::recover_bin;

pub fn tooljournal(args: &[&str], state: &Path) -> Ran {
    Command::new(tooljournal_bin())
        .args(args)
        .env("XDG_STATE_HOME", state)
        .stdin(Stdio::null())
        .output()
        .expect("tooljournal runs")
        .into()
}

pub fn recover(args: &[&str]) -> Ran {
    Command::new(recover_bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("recover runs")
        .into()
}

pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A fresh workspace (the same files every time), a state directory, and room for journals.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub ws: PathBuf,
    pub state: PathBuf,
}

pub fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("a temp directory");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("logs")).expect("workspace");
    std::fs::write(ws.join("notes.txt"), "TODO: tidy\nsecond line\n").expect("notes");
    std::fs::write(
        ws.join("logs/app.log"),
        "INFO start\nERROR boom\nINFO end\nERROR again\n",
    )
    .expect("log");
    std::fs::write(dir.path().join("outside.txt"), "private\n").expect("outside");
    Fixture {
        ws,
        state: dir.path().join("state"),
        dir,
    }
}

impl Fixture {
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// `tooljournal run --script SCRIPT` on the fixture's workspace into `journal`; must exit 0.
pub fn run_script(f: &Fixture, script: &str, journal: &str) -> Ran {
    let script = data(script);
    let ws = f.ws.to_str().expect("utf-8 path");
    let args = [
        "run",
        // One call at a time: concurrent calls' records interleave in a different order on
        // every run, whatever the backend.
        "--max-parallel",
        "1",
        "--script",
        script.to_str().expect("utf-8 path"),
        "--workspace",
        ws,
        "--journal",
        journal,
    ];
    let ran = tooljournal(&args, &f.state);
    assert_eq!(ran.code, Some(0), "run {script:?} into {journal}: {ran}");
    ran
}

/// Starts `killed.jsonl` into `journal` and returns once its long bash call is running
/// (its line is in `marker.txt`): the writer is alive, the call unfinished.
pub fn start_killed(f: &Fixture, journal: &str) -> Child {
    let child = Command::new(tooljournal_bin())
        .args(["run", "--max-parallel", "1", "--script"])
        .arg(data("killed.jsonl"))
        .arg("--workspace")
        .arg(&f.ws)
        .args(["--journal", journal])
        .env("XDG_STATE_HOME", &f.state)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tooljournal runs");
    let marker = f.ws.join("marker.txt");
    let deadline = Instant::now() + Duration::from_secs(20);
    // Its whole line: the shell may die between creating the file and writing it.
    while !std::fs::read_to_string(&marker).is_ok_and(|t| t == "k1\n") {
        assert!(Instant::now() < deadline, "{journal}: k1 never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // What the runtime journals after the shell starts (its process record) is durable well
    // before this; a kill right at the marker could race it, and the two backends with it.
    std::thread::sleep(Duration::from_millis(300));
    child
}

/// Runs `killed.jsonl` into `journal` and SIGKILLs it mid-bash.
pub fn run_killed(f: &Fixture, journal: &str) {
    let mut child = start_killed(f, journal);
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
}

/// Waits until `tooljournal sessions --store STORE --json` no longer says `running` for the
/// session whose journal is `journal`: a killed writer's lease runs out (`lease_ms` in its URL).
pub fn wait_not_running(store: &str, journal: &str, state: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let row = session_row(store, journal, state);
        if row["status"] != "running" {
            return;
        }
        assert!(Instant::now() < deadline, "{journal} stays running: {row}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `sessions --store STORE --json`, every row.
pub fn session_rows(store: &str, state: &Path) -> Vec<serde_json::Value> {
    let ran = tooljournal(&["sessions", "--store", store, "--json"], state);
    assert_eq!(ran.code, Some(0), "sessions --store {store}: {ran}");
    ran.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The row of the session journaled at `journal` (its URL, whatever `lease_ms` it was run with).
pub fn session_row(store: &str, journal: &str, state: &Path) -> serde_json::Value {
    let session = session_param(journal);
    let rows = session_rows(store, state);
    rows.iter()
        .find(|r| r["journal"].as_str().map(session_param) == Some(session.clone()))
        .unwrap_or_else(|| panic!("no row for {journal} in {rows:?}"))
        .clone()
}

/// The `session=` parameter, percent-decoded (`sessions` prints it encoded).
fn session_param(url: &str) -> String {
    let raw = url
        .split(['?', '&'])
        .find_map(|p| p.strip_prefix("session="))
        .unwrap_or_default();
    let mut out = Vec::new();
    let mut bytes = raw.bytes();
    while let Some(b) = bytes.next() {
        let hex = || -> Option<u8> {
            let pair: Vec<u8> = bytes.clone().take(2).collect();
            u8::from_str_radix(std::str::from_utf8(&pair).ok()?, 16).ok()
        };
        match (b, hex()) {
            (b'%', Some(decoded)) => {
                out.push(decoded);
                bytes.nth(1);
            }
            _ => out.push(b),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A URL naming `session` in `database` on the shared server (superuser, trust auth).
pub fn db_url(database: &str, session: Option<&str>) -> String {
    let server = pg::testing::shared();
    let mut url = format!(
        "postgres://postgres@/{database}?host={}",
        server.socket_dir().display()
    );
    if let Some(session) = session {
        url.push_str(&format!("&session={session}"));
    }
    url
}

/// A new database on the shared server (`createdb`, found where `initdb` is), so a test
/// owns every session in its store.
pub fn createdb(name: &str) -> String {
    let server = pg::testing::shared();
    let bin = server_bin("createdb");
    let ran: Ran = Command::new(&bin)
        .args(["-h"])
        .arg(server.socket_dir())
        .args(["-U", "postgres", name])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()))
        .into();
    assert_eq!(ran.code, Some(0), "createdb {name}: {ran}");
    db_url(name, None)
}

/// A PostgreSQL client program: on PATH, else in the newest `/usr/lib/postgresql/*/bin`.
fn server_bin(program: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    });
    if let Some(bin) = on_path {
        return bin;
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin").join(program);
            bin.is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!("{program} not found: install PostgreSQL (Debian: `apt-get install postgresql`)")
    })
}
