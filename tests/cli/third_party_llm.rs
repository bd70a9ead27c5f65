//! `tooljournal run --model` against a mock provider we did not write: `@copilotkit/aimock`
//! (npm, pinned in `tests/llm-mock/package-lock.json`), which streams tool calls in each of the
//! four providers' wire formats. Our own mock (`mockllm`) comes from the same reading of the
//! formats as the adapters, so a misreading shared by both would pass there; it would not here.
//!
//! `.ci/run` installs the package with `npm ci`; a test run without it installs it the same
//! way. A machine without Node.js 20.15+ and npm fails these tests, saying so.

use crate::common;

use common::models::{calls_in, events, key_var, kinds, results_for, shown, text, FORMATS, KEY};
use mockllm::Format;
use runtime::event::Event;
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The call the mock's first answer makes, and the text of its second.
const CALL_ID: &str = "call_tp_1";
const ARGUMENTS: &str = r#"{"path":"note.txt","content":"hi\n"}"#;
const FINAL_TEXT: &str = "The note is written, as asked.";
/// How long the mock may take to accept connections after it is spawned.
const START_TIMEOUT_MS: u64 = 10_000;

/// Two fixtures told apart by what aimock reads in the request itself (stateless: the formats'
/// sessions may share one server): no tool result yet → the call; a tool result → the text.
fn fixtures() -> serde_json::Value {
    serde_json::json!({
        "fixtures": [
            {
                "match": { "userMessage": "note.txt", "hasToolResult": false },
                "response": {
                    "toolCalls": [{ "id": CALL_ID, "name": "write", "arguments": ARGUMENTS }]
                }
            },
            {
                "match": { "userMessage": "note.txt", "hasToolResult": true },
                "response": { "content": FINAL_TEXT }
            }
        ]
    })
}

fn package_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/llm-mock")
}

fn server_bin() -> PathBuf {
    package_dir().join("node_modules/.bin/llmock")
}

/// Installs the pinned package if it is not there yet (once per test binary, under the lock
/// file the MCP tests' install takes too); returns its server's executable.
fn installed_server() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if !server_bin().exists() {
            let lock = File::create(std::env::temp_dir().join("tooljournal-npm.lock"))
                .expect("a lock file in the temp directory");
            // Advisory lock across test processes; released when `_guard` is dropped.
            let _guard =
                nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive).expect("flock");
            if !server_bin().exists() {
                let out = Command::new("npm")
                    .args(["ci", "--no-audit", "--no-fund", "--prefix"])
                    .arg(package_dir())
                    .output()
                    .unwrap_or_else(|e| {
                        panic!(
                            "these tests need Node.js 20.15+ and npm (npm: {e}): \
                             `npm ci --prefix tests/llm-mock` installs their mock server"
                        )
                    });
                assert!(
                    out.status.success(),
                    "npm ci --prefix tests/llm-mock failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        server_bin()
    })
}

/// A running aimock on a loopback port, expecting [`KEY`]; killed when dropped.
struct Aimock {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Aimock {
    fn start() -> Aimock {
        let bin = installed_server();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let fixtures_path = dir.path().join("fixtures.json");
        std::fs::write(&fixtures_path, fixtures().to_string()).expect("the fixtures");
        // A free port: bound, read, released; the mock binds it a moment later.
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let log = File::create(dir.path().join("aimock.log")).expect("the mock's log");
        let log_err = log.try_clone().expect("the mock's log, again");
        let mut command = Command::new(bin);
        command
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--fixtures",
            ])
            .arg(&fixtures_path)
            // A request no fixture matches is an error, never a default answer; a bad fixture
            // file stops the start.
            .args(["--strict", "--validate-on-load", "--chunk-size", "8"])
            .args(["--log-level", "info"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("AIMOCK_API_KEYS", KEY)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        let child = command.spawn().unwrap_or_else(|e| {
            panic!(
                "{} does not start ({e}): run `npm ci --prefix tests/llm-mock` (Node.js 20.15+)",
                bin.display()
            )
        });
        let mut mock = Aimock {
            child,
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            dir,
        };
        mock.wait_ready();
        mock
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_millis(START_TIMEOUT_MS);
        loop {
            if let Some(status) = self.child.try_wait().expect("the mock's status") {
                panic!(
                    "the mock server exited ({status}) before accepting connections \
                     (is Node.js 20.15+ installed? `npm ci --prefix tests/llm-mock`):\n{}",
                    self.log()
                );
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the mock server did not accept connections on {} within {START_TIMEOUT_MS} ms:\n{}",
                self.addr,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the mock printed: its fixture matches, and why it refused a request.
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("aimock.log")).unwrap_or_default()
    }

    /// The base URL `--base-url` takes for `format`: the OpenAI APIs' base carries `/v1`.
    fn base_url(&self, format: Format) -> String {
        match format {
            Format::OpenAiChat | Format::OpenAiResponses => format!("http://{}/v1", self.addr),
            Format::Anthropic | Format::Gemini => format!("http://{}", self.addr),
        }
    }
}

impl Drop for Aimock {
    fn drop(&mut self) {
        // Already exited is fine; the child is ours alone.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A workspace and a journal for one session.
struct Session {
    dir: tempfile::TempDir,
}

impl Session {
    fn new() -> Session {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::create_dir(dir.path().join("ws")).expect("the workspace");
        Session { dir }
    }

    fn workspace(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn journal(&self) -> PathBuf {
        self.dir.path().join("journal")
    }

    /// `tooljournal run` on `mock` in `format`, with `key` and nothing else of the developer's
    /// environment but PATH.
    fn run(&self, mock: &Aimock, format: Format, key: &str) -> Output {
        Command::new(env!("CARGO_BIN_EXE_tooljournal"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env(key_var(format), key)
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .env("XDG_CONFIG_HOME", self.dir.path().join("no-config"))
            .current_dir(self.dir.path())
            .args(["run", "--model", &format!("{format}:m-test"), "--base-url"])
            .arg(mock.base_url(format))
            .arg("--workspace")
            .arg(self.workspace())
            .arg("--journal")
            .arg(self.journal())
            .args(["--prompt", "Please write note.txt saying hi."])
            .output()
            .expect("tooljournal runs")
    }
}

/// For every provider: the mock's streamed call is run once and committed ok, the second
/// request carries its result (the mock answers the final text only to a request holding a
/// tool result), and the journal rebuilds into a body the format's validator accepts, holding
/// the call and its result.
#[test]
fn a_streamed_tool_call_and_its_result_on_every_provider() {
    let mock = Aimock::start();
    for format in FORMATS {
        let session = Session::new();
        let out = session.run(&mock, format, KEY);
        let context = || format!("{format}: {}\n--- aimock\n{}", shown(&out), mock.log());
        assert_eq!(out.status.code(), Some(0), "{}", context());
        assert!(text(&out.stdout).contains(FINAL_TEXT), "{}", context());
        let written = std::fs::read_to_string(session.workspace().join("note.txt"));
        assert_eq!(written.as_deref().ok(), Some("hi\n"), "{}", context());

        let events = events(&session.journal());
        let kinds = kinds(&events);
        let count = |kind: &str| kinds.iter().filter(|k| **k == kind).count();
        assert_eq!(count("llm/request"), 2, "{format}: {kinds:?}");
        assert_eq!(
            count("started"),
            1,
            "{format}: the write ran once: {kinds:?}"
        );
        let committed: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                Event::Committed { call, result, .. } => Some((call, result)),
                _ => None,
            })
            .collect();
        assert_eq!(committed.len(), 1, "{format}: {committed:?}");
        let (call, result) = committed[0];
        assert_eq!(call.call_id, CALL_ID, "{format}");
        assert!(!result.is_error, "{format}: {result:?}");
        assert_eq!(kinds.last(), Some(&"session/close"), "{format}");

        let recovered = recover::Recovery::of(session.journal())
            .run()
            .expect("the journal recovers");
        let rebuilt = recover::rebuild_body(&recovered.analysis, format)
            .unwrap_or_else(|e| panic!("{format}: {e}"));
        assert!(rebuilt.notes.is_empty(), "{format}: {:?}", rebuilt.notes);
        let body = rebuilt.body.value();
        recover::providers::validate(format, &body).unwrap_or_else(|v| panic!("{format}: {v}"));
        assert_eq!(
            calls_in(format, &body),
            vec![(CALL_ID.to_owned(), "write".to_owned())],
            "{format}: {body:#}"
        );
        let results = results_for(format, &body, CALL_ID, "write");
        assert_eq!(results.len(), 1, "{format}: {body:#}");
        assert!(body.to_string().contains(FINAL_TEXT), "{format}: {body:#}");
    }
}

/// The mock checks the key in each provider's own header: a wrong one is refused (401), the
/// run says so and fails, and no tool runs. (This is what makes the runs above evidence that
/// the key went in the right header.)
#[test]
fn a_wrong_key_is_refused_by_the_mock() {
    let mock = Aimock::start();
    for format in FORMATS {
        let session = Session::new();
        let out = session.run(&mock, format, "sk-not-the-mock-key");
        let context = || format!("{format}: {}\n--- aimock\n{}", shown(&out), mock.log());
        assert_eq!(out.status.code(), Some(1), "{}", context());
        assert!(text(&out.stderr).contains("401"), "{}", context());
        assert!(
            !session.workspace().join("note.txt").exists(),
            "{}",
            context()
        );
    }
}
