//! The real MCP servers the end-to-end tests run against: `@modelcontextprotocol/server-filesystem`
//! and `@modelcontextprotocol/server-everything`, pinned in `tests/mcp/package-lock.json`.
//!
//! `.ci/run` installs them with `npm ci`; a test run without them installs them the same way
//! (once per test binary, under a lock file so that test binaries running side by side do not
//! install over each other). A machine without Node.js and npm fails these tests with a message
//! saying so: they are part of the suite, not optional. `echo-meta.mjs` is a server of our own
//! on the SDK installed with them.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn package_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("tests/mcp/package-lock.json").exists())
        .expect("the workspace holds tests/mcp/package-lock.json")
        .join("tests/mcp")
}

fn bin_dir() -> PathBuf {
    package_dir().join("node_modules/.bin")
}

fn installed() -> bool {
    ["mcp-server-filesystem", "mcp-server-everything"]
        .iter()
        .all(|b| bin_dir().join(b).exists())
}

/// Installs the pinned servers if they are not there yet; returns the directory of their
/// executables.
pub fn servers() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if !installed() {
            let lock = std::fs::File::create(std::env::temp_dir().join("tooljournal-npm.lock"))
                .expect("a lock file in the temp directory");
            // Advisory lock across test processes; released when `lock` is dropped.
            let _guard =
                nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive).expect("flock");
            if !installed() {
                let out = std::process::Command::new("npm")
                    .args(["ci", "--no-audit", "--no-fund", "--prefix"])
                    .arg(package_dir())
                    .output()
                    .unwrap_or_else(|e| {
                        panic!("the MCP tests need Node.js 20+ and npm (npm: {e}); see README")
                    });
                assert!(
                    out.status.success(),
                    "npm ci --prefix tests/mcp failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        bin_dir()
    })
}

pub fn filesystem_server() -> PathBuf {
    servers().join("mcp-server-filesystem")
}

pub fn everything_server() -> PathBuf {
    servers().join("mcp-server-everything")
}

/// Our own minimal MCP server, `tests/mcp/echo-meta.mjs` (on the SDK the pinned servers bring):
/// its one tool, `echo_meta`, answers with the `_meta` of the `tools/call` it received. Returns
/// the script, to run with `node`; the packages are installed first, as for the other servers.
pub fn echo_meta_server() -> PathBuf {
    servers();
    package_dir().join("echo-meta.mjs")
}
