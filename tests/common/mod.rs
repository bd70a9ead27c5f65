//! Test machinery of the root package's integration tests, one module a topic. Every test binary
//! of the package declares `mod common;` once at its root (`tests/cli/main.rs` and the files
//! kept as binaries of their own: `kill.rs`, `postgres_kill.rs`, `security.rs`, `corpora.rs`),
//! and its modules use what they need through `crate::common`; a server or a built binary this
//! machinery starts once (`recover_bin`, `fuzz_bin`, `mcp_support`, `audit_page`'s demo) is
//! started once per test binary.

pub mod audit_page;
pub mod browser;
pub mod fuzz_bin;
pub mod kill;
// The real MCP servers (shared with `mcp/tests/servers.rs`, which includes the file by path).
#[path = "../mcp/support.rs"]
pub mod mcp_support;
pub mod models;
pub mod pg;
pub mod recover_bin;
pub mod rerun;
