//! What `tooljournal-fuzz` reads of `tooljournal`'s configuration file: its MCP servers.
//!
//! The file is `tooljournal`'s (`src/config.rs` there reads it whole and refuses an unknown
//! key anywhere), and `tooljournal fuzz` checks it that way before it runs this binary. Here only
//! the `[mcp_servers.NAME]` tables are read, each as strictly as there (`mcp::ServerConfig`
//! refuses an unknown key); the other tables are `tooljournal`'s to check. So a file with a
//! misspelt table name is refused by `tooljournal fuzz`, and read without it when this binary is
//! run alone.

use crate::{failed, CliError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The tables of the configuration this binary uses.
#[derive(Debug, Default, serde::Deserialize)]
pub struct FileConfig {
    /// MCP servers, by the name their tools are prefixed with.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, mcp::ServerConfig>,
}

/// The default file, as `tooljournal` finds it: `$XDG_CONFIG_HOME/tooljournal/config.toml`,
/// else under `~/.config`.
fn default_path() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".config"),
    };
    Some(base.join("tooljournal/config.toml"))
}

/// Reads `explicit` (which must exist) or else the default file (which may be absent: then no
/// server is configured). Relative `cwd`s of servers are taken from the file's directory.
pub fn load(explicit: Option<&Path>) -> Result<FileConfig, CliError> {
    let path = match explicit {
        Some(p) => p.to_owned(),
        None => match default_path() {
            Some(p) if p.exists() => p,
            _ => return Ok(FileConfig::default()),
        },
    };
    let bytes = std::fs::read(&path).map_err(|e| {
        failed(format!(
            "{}: cannot read the configuration: {e}",
            path.display()
        ))
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        failed(format!(
            "{}: the configuration is not UTF-8 (byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })?;
    let mut config: FileConfig = toml::from_str(&text).map_err(|e| {
        let place = e
            .span()
            .map(|s| format!("at byte {}: ", s.start))
            .unwrap_or_default();
        failed(format!("{}: {place}{}", path.display(), e.message()))
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    for server in config.mcp_servers.values_mut() {
        if let Some(cwd) = &server.cwd {
            server.cwd = Some(dir.join(cwd));
        }
    }
    Ok(config)
}

/// Where `tooljournal` keeps sessions by default (`state_root` in its `src/run.rs`):
/// `$XDG_STATE_HOME/tooljournal/sessions`, else `~/.local/state/tooljournal/sessions`. The
/// harness's tools are kept out of it, as a session's are. `None`: neither variable is set.
pub fn state_root() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".local/state"),
    };
    Some(base.join("tooljournal/sessions"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).expect("the file");
        (dir, path)
    }

    #[test]
    fn the_servers_are_read_with_their_cwd_from_the_files_directory_and_the_rest_left() {
        let (dir, path) = written(
            "plan_mode = true\n[model]\nmodel = \"m\"\n\
             [mcp_servers.fs]\ncommand = \"node\"\ncwd = \"srv\"\n",
        );
        let config = load(Some(&path)).expect("a configuration");
        assert_eq!(config.mcp_servers.len(), 1);
        assert_eq!(
            config.mcp_servers["fs"].cwd.as_deref(),
            Some(dir.path().join("srv").as_path())
        );
    }

    #[test]
    fn an_unknown_key_in_a_server_table_is_refused_naming_the_file() {
        let (_dir, path) = written("[mcp_servers.fs]\ncommand = \"node\"\ncomand = \"x\"\n");
        match load(Some(&path)) {
            Err(CliError::Failed(message)) => {
                assert!(message.contains("config.toml"), "{message}");
                assert!(message.contains("comand"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}
