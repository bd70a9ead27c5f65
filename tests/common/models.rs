//! The machinery of the live-model tests: a loopback mock provider per test case (its reply
//! queues are per format: shared by tests, a failed test's leftover replies would answer the
//! next test's requests), the `tooljournal` binary pointed at it with a key, a configuration
//! with short backoffs and timeouts, and readers of what the journal and the mock recorded.
#![allow(dead_code)]

use journal::{FsStorage, Storage};
use mockllm::{Format, MockServer, Recorded};
use runtime::event::{Event, Record};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

/// The key every test's binary is given, and the mock expects: distinctive, so that the key
/// test can look for it in every byte a session wrote.
pub const KEY: &str = "sk-tjtest-7Qz9-NEVER-WRITTEN-k3y";

pub const FORMATS: [Format; 4] = [
    Format::OpenAiChat,
    Format::OpenAiResponses,
    Format::Anthropic,
    Format::Gemini,
];

/// The environment variable a format's key is read from.
pub fn key_var(format: Format) -> &'static str {
    match format {
        Format::OpenAiChat | Format::OpenAiResponses => "OPENAI_API_KEY",
        Format::Anthropic => "ANTHROPIC_API_KEY",
        Format::Gemini => "GEMINI_API_KEY",
    }
}

/// `PROVIDER:MODEL` for `format`.
pub fn spec(format: Format) -> String {
    format!("{}:m-test", format.as_str())
}

/// Every variable a provider's key or base URL could come from: a developer's own must not
/// leak into a test.
const PROVIDER_VARS: [&str; 8] = [
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
    "XDG_CONFIG_HOME",
];

/// A test's directory (a workspace, where the journal goes, a configuration file) and its
/// mock provider, expecting [`KEY`].
pub struct Case {
    pub dir: tempfile::TempDir,
    pub server: MockServer,
}

impl Case {
    pub fn new() -> Case {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::create_dir(dir.path().join("ws")).expect("the workspace");
        std::fs::create_dir(dir.path().join("state")).expect("the state directory");
        let server = MockServer::start();
        server.expect_key(KEY);
        let case = Case { dir, server };
        case.write_config("");
        case
    }

    /// Every request the mock received, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.server.requests()
    }

    pub fn workspace(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    pub fn journal(&self) -> PathBuf {
        self.dir.path().join("journal")
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    /// `[model]` with short backoffs and timeouts, `extra` lines (`key = value`) replacing or
    /// adding to them.
    pub fn write_config(&self, extra: &str) {
        let mut lines: Vec<String> = Vec::new();
        let key = |line: &str| line.split('=').next().unwrap_or_default().trim().to_owned();
        for default in [
            "backoff_base_ms = 10",
            "backoff_max_ms = 200",
            "request_timeout_ms = 10000",
        ] {
            if !extra.lines().any(|l| key(l) == key(default)) {
                lines.push(default.to_owned());
            }
        }
        lines.extend(extra.lines().map(str::to_owned));
        let text = format!("[model]\n{}\n", lines.join("\n"));
        std::fs::write(self.config(), text).expect("the configuration");
    }

    /// `tooljournal` with a clean environment: the key for `format`, the state and config
    /// directories inside the case.
    pub fn command(&self, format: Format) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tooljournal"));
        for var in PROVIDER_VARS {
            c.env_remove(var);
        }
        c.env(key_var(format), KEY)
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .env("XDG_CONFIG_HOME", self.dir.path().join("no-config"))
            .current_dir(self.dir.path());
        c
    }

    /// `tooljournal run --model` on the mock for `format`, with `prompts` and `extra` args.
    pub fn run_args(&self, format: Format, prompts: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "run".into(),
            "--model".into(),
            spec(format),
            "--base-url".into(),
            self.server.base_url(format),
            "--workspace".into(),
            self.workspace().display().to_string(),
            "--journal".into(),
            self.journal().display().to_string(),
            "--config".into(),
            self.config().display().to_string(),
        ];
        for p in prompts {
            args.push("--prompt".into());
            args.push((*p).into());
        }
        args
    }

    pub fn run(&self, format: Format, prompts: &[&str]) -> Output {
        self.command(format)
            .args(self.run_args(format, prompts))
            .output()
            .expect("tooljournal runs")
    }

    /// `tooljournal resume` (no `--prompt` when `prompt` is None). Neither the model nor the
    /// mock's address is given: a resume goes on with what the journal recorded (`session/model`,
    /// its base URL included); only the key comes from the environment.
    pub fn resume(&self, format: Format, prompt: Option<&str>, extra: &[&str]) -> Output {
        let mut c = self.command(format);
        c.args(["resume", "--journal"])
            .arg(self.journal())
            .args(extra);
        if let Some(p) = prompt {
            c.args(["--prompt", p]);
        }
        c.output().expect("tooljournal resume runs")
    }

    /// Every event of the journal, in order.
    pub fn events(&self) -> Vec<Event> {
        events(&self.journal())
    }
}

pub fn events(journal_dir: &Path) -> Vec<Event> {
    let storage: Arc<dyn Storage> =
        Arc::new(FsStorage::open(journal_dir).expect("the journal opens"));
    journal::Reader::open(storage, journal::Limits::default())
        .expect("the journal reads")
        .map(|r| {
            let record = r.expect("a whole record");
            let decoded: Record = record.decode().expect("an event");
            decoded.event
        })
        .collect()
}

/// The kinds of `events` (`llm/request`, `tool/started`, ...), in order.
pub fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind()).collect()
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A command's output, for assertion messages.
pub fn shown(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// The history of a request body: `messages`, `input` or `contents`.
pub fn history_of(format: Format, body: &Value) -> Value {
    let key = match format {
        Format::OpenAiChat | Format::Anthropic => "messages",
        Format::OpenAiResponses => "input",
        Format::Gemini => "contents",
    };
    body[key].clone()
}

/// The results the body's history gives call `id` (named `name`; Gemini pairs by name and
/// order), as text: one entry per result.
pub fn results_for(format: Format, body: &Value, id: &str, name: &str) -> Vec<String> {
    let history = history_of(format, body);
    let items = history.as_array().cloned().unwrap_or_default();
    let mut found = Vec::new();
    for item in &items {
        match format {
            Format::OpenAiChat => {
                if item["role"] == "tool" && item["tool_call_id"] == id {
                    found.push(item["content"].to_string());
                }
            }
            Format::OpenAiResponses => {
                if item["type"] == "function_call_output" && item["call_id"] == id {
                    found.push(item["output"].to_string());
                }
            }
            Format::Anthropic => {
                for block in item["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_result" && block["tool_use_id"] == id {
                        found.push(block["content"].to_string());
                    }
                }
            }
            Format::Gemini => {
                for part in item["parts"].as_array().into_iter().flatten() {
                    let response = &part["functionResponse"];
                    if response["name"] == name
                        && (response["id"].is_null() || response["id"] == id)
                    {
                        found.push(response["response"].to_string());
                    }
                }
            }
        }
    }
    found
}

/// The calls the body's history holds: (id, name); Gemini's id may be empty.
pub fn calls_in(format: Format, body: &Value) -> Vec<(String, String)> {
    let history = history_of(format, body);
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let mut calls = Vec::new();
    for item in history.as_array().into_iter().flatten() {
        match format {
            Format::OpenAiChat => {
                for call in item["tool_calls"].as_array().into_iter().flatten() {
                    calls.push((s(&call["id"]), s(&call["function"]["name"])));
                }
            }
            Format::OpenAiResponses => {
                if item["type"] == "function_call" {
                    calls.push((s(&item["call_id"]), s(&item["name"])));
                }
            }
            Format::Anthropic => {
                for block in item["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_use" {
                        calls.push((s(&block["id"]), s(&block["name"])));
                    }
                }
            }
            Format::Gemini => {
                for part in item["parts"].as_array().into_iter().flatten() {
                    let call = &part["functionCall"];
                    if call.is_object() {
                        calls.push((s(&call["id"]), s(&call["name"])));
                    }
                }
            }
        }
    }
    calls
}

/// Every file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}
