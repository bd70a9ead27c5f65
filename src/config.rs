//! The configuration file (`--config FILE`, default `$XDG_CONFIG_HOME/tooljournal/config.toml`,
//! else `~/.config/tooljournal/config.toml`): MCP servers, how built-in tools are shown,
//! whether new sessions start in plan mode, how long a question waits for its answer, and the
//! model (`[model]`).
//!
//! Why strict: a typo in a server table must not silently start a session without that server,
//! or with a tool shown that was meant to be hidden; unknown keys are errors naming the file.

use crate::CliError;
use runtime::event::ConfigFile;
use runtime::{Exposure, Registry};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// New sessions start in plan mode (read-only tools only until a plan is approved).
    #[serde(default)]
    pub plan_mode: bool,
    /// A question (an approval, or the `ask` tool's) nobody answered in this long is journaled
    /// `ask/expired`, never taken as an answer; absent: it waits as long as the person does.
    pub question_timeout_ms: Option<u64>,
    /// Settings of built-in tools, by name.
    #[serde(default)]
    pub tools: BTreeMap<String, BuiltinSettings>,
    /// MCP servers, by the name their tools are prefixed with.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, mcp::ServerConfig>,
    /// The model `run --model`, `resume` and `chat` talk to, and how.
    #[serde(default)]
    pub model: ModelSection,
    /// The sandbox `bash` commands run under (a flag wins over it).
    #[serde(default)]
    pub sandbox: crate::sandbox_cli::SandboxSection,
}

/// `[model]`: every key optional; a flag given on the command line wins over it.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// `openai-chat`, `openai-responses`, `anthropic` or `gemini`.
    pub provider: Option<String>,
    /// The model's name at the provider.
    pub model: Option<String>,
    /// The API's base URL (an OpenAI-compatible server's, a proxy's).
    pub base_url: Option<String>,
    /// The environment variable the key is read from, instead of the provider's usual one.
    pub api_key_env: Option<String>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    /// A file whose text replaces the default system prompt (relative: to the config file).
    pub system_prompt_file: Option<PathBuf>,
    /// How long the provider may stay silent: before its response begins, and between pieces.
    pub request_timeout_ms: Option<u64>,
    /// How long one attempt may take as a whole (default an hour): past it the attempt fails,
    /// retried once.
    pub attempt_timeout_ms: Option<u64>,
    /// The most bytes one event of a response's stream may hold (default 16 MiB).
    pub event_bytes_max: Option<u64>,
    /// The most bytes one response's stream may hold (default 128 MiB).
    pub response_bytes_max: Option<u64>,
    /// Attempts after the first for a request that failed in a way worth retrying.
    pub retry_attempts: Option<u32>,
    /// The first backoff before a retry (each retry doubles it).
    pub backoff_base_ms: Option<u64>,
    /// The longest backoff.
    pub backoff_max_ms: Option<u64>,
    /// The model's context window in tokens, when the table of known models lacks it or is
    /// wrong for this deployment.
    pub context_window_tokens: Option<u64>,
    /// The share of the context window (1 to 100 %) a request may reach before the
    /// conversation is reduced (default 80).
    pub compact_at_percent: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuiltinSettings {
    pub exposure: Exposure,
}

/// The default file: `$XDG_CONFIG_HOME/tooljournal/config.toml`, else under `~/.config`.
fn default_path() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".config"),
    };
    Some(base.join("tooljournal/config.toml"))
}

/// A configuration and the file it was read from (None: no file, nothing configured).
pub struct Loaded {
    pub config: FileConfig,
    pub file: Option<ConfigFile>,
}

/// Reads `explicit` (which must exist) or else the default file (which may be absent: then
/// nothing is configured). Relative `cwd`s of servers are taken from the file's directory.
pub fn load(explicit: Option<&Path>) -> Result<Loaded, CliError> {
    let path = match explicit {
        Some(p) => p.to_owned(),
        None => match default_path() {
            Some(p) if p.exists() => p,
            _ => {
                return Ok(Loaded {
                    config: FileConfig::default(),
                    file: None,
                })
            }
        },
    };
    let bytes = std::fs::read(&path).map_err(|e| {
        CliError::Failed(format!(
            "{}: cannot read the configuration: {e}",
            path.display()
        ))
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        CliError::Failed(format!(
            "{}: the configuration is not UTF-8 (byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })?;
    let mut config: FileConfig = toml::from_str(&text)
        .map_err(|e| CliError::Failed(format!("{}: {}", path.display(), one_line(&e))))?;
    if config.question_timeout_ms == Some(0) {
        return Err(CliError::Failed(format!(
            "{}: question_timeout_ms = 0 would expire every question before anyone could \
             answer; leave the key out to wait for the answer",
            path.display()
        )));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    for server in config.mcp_servers.values_mut() {
        if let Some(cwd) = &server.cwd {
            server.cwd = Some(dir.join(cwd));
        }
    }
    if let Some(file) = &config.model.system_prompt_file {
        config.model.system_prompt_file = Some(dir.join(file));
    }
    // Absolute, so that a resume from another directory finds the same file.
    let path = std::path::absolute(&path).unwrap_or(path);
    Ok(Loaded {
        config,
        file: Some(identity(&path, text.as_bytes())),
    })
}

/// What `session/policy` records of a configuration file.
pub fn identity(path: &Path, bytes: &[u8]) -> ConfigFile {
    use sha2::Digest;
    ConfigFile {
        path: path.display().to_string(),
        sha256: hex::encode(sha2::Sha256::digest(bytes)),
    }
}

/// toml's messages span lines (a snippet with a caret); the CLI prints errors on one line.
fn one_line(e: &toml::de::Error) -> String {
    let place = e
        .span()
        .map(|s| format!("at byte {}: ", s.start))
        .unwrap_or_default();
    format!("{place}{}", e.message())
}

/// Applies `[tools.NAME] exposure = …` to the built-ins in `registry`.
pub fn apply_builtin_exposure(
    config: &FileConfig,
    registry: &mut Registry,
) -> Result<(), CliError> {
    for (name, settings) in &config.tools {
        if !registry.set_exposure(name, settings.exposure) {
            return Err(CliError::Failed(format!(
                "configuration: [tools.{name}]: there is no built-in tool named {name:?}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(text: &str) -> Result<FileConfig, String> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).expect("the file");
        load(Some(&path)).map(|l| l.config).map_err(|e| match e {
            CliError::Failed(message) => message,
            other => format!("{other:?}"),
        })
    }

    #[test]
    fn the_question_timeout_is_read_from_the_top_level_and_absent_by_default() {
        let config = loaded("question_timeout_ms = 90000\n[model]\nmodel = \"m\"\n").unwrap();
        assert_eq!(config.question_timeout_ms, Some(90_000));
        assert_eq!(
            loaded("plan_mode = true\n").unwrap().question_timeout_ms,
            None
        );
    }

    #[test]
    fn a_zero_or_misplaced_question_timeout_is_refused_naming_the_key() {
        let zero = loaded("question_timeout_ms = 0\n").unwrap_err();
        assert!(zero.contains("question_timeout_ms = 0"), "{zero}");
        assert!(zero.contains("config.toml"), "{zero}");
        // Under [model] it is an unknown key there, not silently ignored.
        let misplaced = loaded("[model]\nquestion_timeout_ms = 5000\n").unwrap_err();
        assert!(misplaced.contains("question_timeout_ms"), "{misplaced}");
        let negative = loaded("question_timeout_ms = -1\n").unwrap_err();
        assert!(negative.contains("config.toml"), "{negative}");
    }
}
