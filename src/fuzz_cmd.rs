//! `tooljournal fuzz`: runs `tooljournal-fuzz`, the binary installed beside this one, with the
//! same arguments, once the configuration file has been checked as every command checks it.
//!
//! Why another binary: the fuzz harness is test machinery (proptest's strategies and shrinking,
//! tokio's paused clock, the runtime's `testing` feature: a manual clock and failpoints that can
//! be armed). Linked into this binary, it would have turned that feature on in the runtime every
//! session of `run`, `resume` and `chat` runs on, since cargo builds a crate once per binary
//! with the union of the features asked of it. `tooljournal-fuzz` (package `tooljournal-fuzz`)
//! ships the harness, and this binary keeps the command line: it replaces itself with the other
//! (`exec`), so the exit status, signals and the terminal are the other's own
//! (`tests/release_deps.rs` checks that nothing of the harness is linked here).

use crate::config;
use crate::{failed, CliError};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The binary `fuzz` runs, looked for in this binary's directory.
pub const FUZZ_BIN: &str = "tooljournal-fuzz";

pub struct FuzzArgs {
    /// The transcript.
    pub script: PathBuf,
    /// What each case's workspace starts as (None: empty).
    pub workspace_template: Option<PathBuf>,
    /// No case begins after this long.
    pub seconds: Option<u64>,
    /// Most cases.
    pub cases: Option<u64>,
    /// The first case's seed (None: from the clock).
    pub seed: Option<u64>,
    /// The configuration file, for its MCP servers.
    pub config: Option<PathBuf>,
}

impl FuzzArgs {
    /// The arguments again, as `tooljournal-fuzz` takes them (`--flag=VALUE`: a value that
    /// begins with `-` stays a value).
    fn to_args(&self) -> Vec<OsString> {
        fn flag(name: &str, value: impl AsRef<std::ffi::OsStr>) -> OsString {
            let mut arg = OsString::from(format!("--{name}="));
            arg.push(value);
            arg
        }
        let mut args = vec![flag("script", &self.script)];
        if let Some(template) = &self.workspace_template {
            args.push(flag("workspace-template", template));
        }
        for (name, value) in [
            ("seconds", self.seconds),
            ("cases", self.cases),
            ("seed", self.seed),
        ] {
            if let Some(value) = value {
                args.push(flag(name, value.to_string()));
            }
        }
        if let Some(config) = &self.config {
            args.push(flag("config", config));
        }
        args
    }
}

pub fn fuzz(args: FuzzArgs) -> Result<(), CliError> {
    // The whole file, every table and key, with the messages every command gives;
    // `tooljournal-fuzz` reads only its MCP servers.
    config::load(args.config.as_deref())?;
    let exe = std::env::current_exe().map_err(|e| {
        failed(format!(
            "cannot tell where this binary is, to run {FUZZ_BIN}: {e}"
        ))
    })?;
    let bin = exe.parent().unwrap_or(Path::new(".")).join(FUZZ_BIN);
    if !bin.is_file() {
        return Err(failed(format!(
            "`tooljournal fuzz` runs the fuzz harness, the binary {FUZZ_BIN}, and there is none \
             at {}: install it beside tooljournal (`cargo install tooljournal-fuzz`; in a \
             checkout, `cargo build -p tooljournal-fuzz` builds it beside this one)",
            bin.display()
        )));
    }
    // What every process started for a tool is given back: the core size limit this process
    // set to 0 when it sealed itself (`tooljournal-fuzz` seals its own process, and passes the
    // limit on to the tools it starts). The secrets were taken out of the environment first
    // (`main`), so the other binary never sees them.
    runtime::secrets_before_exec().map_err(|e| {
        failed(format!(
            "cannot prepare {} to run as a tool's process is prepared: {e}",
            bin.display()
        ))
    })?;
    let e = std::os::unix::process::CommandExt::exec(
        std::process::Command::new(&bin).args(args.to_args()),
    );
    Err(failed(format!("cannot run {}: {e}", bin.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_argument_given_is_passed_on_and_a_value_that_looks_like_a_flag_stays_a_value() {
        let args = FuzzArgs {
            script: "-odd.jsonl".into(),
            workspace_template: Some("t".into()),
            seconds: None,
            cases: Some(3),
            seed: Some(0),
            config: Some("c.toml".into()),
        };
        assert_eq!(
            args.to_args(),
            [
                "--script=-odd.jsonl",
                "--workspace-template=t",
                "--cases=3",
                "--seed=0",
                "--config=c.toml"
            ]
            .map(OsString::from)
        );
    }
}
