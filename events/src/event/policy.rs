//! What a session may do and how it writes (`session/policy`, event schema 2), and the
//! process a call started (`call/process`): journaled so that a resume reapplies the policy and
//! never mistakes a reused pid for a call's process.

use serde::{Deserialize, Serialize};

/// How approval questions that nobody answers are answered, and whether every `bash` call
/// asks first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalPolicy {
    /// Unanswered questions are answered "allowed once"; `bash` does not ask.
    Allow,
    /// Unanswered questions are denied, and every `bash` call asks first.
    Deny,
    /// A person at the terminal is asked before every call of a tool that changes something;
    /// what nobody answers is denied (schema 3).
    Ask,
}

/// When the session's records are made durable (the journal's `FsyncPolicy`, journaled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncPolicy {
    /// Every record is fdatasynced before `append` returns.
    Always,
    /// Records are synced when the runtime waits for them, callers sharing one fdatasync (the
    /// default).
    Group,
    /// Records are never fdatasynced (benchmarks and tests only; a power loss can lose them).
    Never,
}

/// A process a call started: the leader of the call's own process group, named so that a
/// reused pid is not taken for it (its start time in clock ticks since boot, and the boot's id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessStarted {
    /// The leader's pid.
    pub pid: u32,
    /// The process group id (the leader's pid: the call made its own group).
    pub pgid: u32,
    /// The leader's start time in clock ticks since boot (`/proc/PID/stat` field 22).
    pub start_ticks: u64,
    /// The kernel's boot id (`/proc/sys/kernel/random/boot_id`): a pid from another boot is never
    /// this process.
    pub boot_id: String,
}

/// The configuration file a session was set up from: its path and the sha256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigFile {
    /// The configuration file's absolute path.
    pub path: String,
    /// sha256 (hex) of the file's bytes as read.
    pub sha256: String,
}

/// What a session may do and how it writes, journaled so that a resume reapplies it rather
/// than falling back to defaults. Plan mode is not here: `plan/mode` events already say it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionPolicy {
    /// How unanswered approval questions are answered, and whether every `bash` call asks.
    pub approval: ApprovalPolicy,
    /// Most calls the session runs at once.
    pub parallel_max: u32,
    /// When the journal makes records durable.
    pub fsync: SyncPolicy,
    /// Tools the model is not shown every step: (name, "deferred" | "hidden"), sorted by name.
    pub exposure: Vec<(String, String)>,
    /// None when the session used no configuration file.
    pub config: Option<ConfigFile>,
    /// Why this policy was recorded: the session opened, or what a resume changed.
    pub reason: String,
}
