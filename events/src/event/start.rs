//! What `started` records from schema 5 on: besides the call and its attempt, the call's
//! idempotency key and the evidence a later probe can check (`recover classify --probe`), and
//! what a resume decided to run again (`recovery/rerun`).
//!
//! Why evidence is recorded before the act: after a crash, a call with `started` and no
//! `settled` may or may not have run (I2). A write's path, the file's hash before and the hash
//! it will have after are known before the body runs; journaled with the write-ahead record,
//! they let recovery look at the world and say which of the two it resembles, without ever
//! calling that proof.

use super::{CallRef, Resources};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// `started` (schema 5): durable before the tool body runs (DESIGN.md I1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallStarted {
    /// The call this event belongs to.
    pub call: CallRef,
    /// Which attempt this is: 1, then 2, 3, … for retries of a retry-safe tool and for a
    /// resume's re-run.
    pub attempt: u32,
    /// What the call declares it will touch: what recovery reports if its outcome is unknown.
    pub resources: Resources,
    /// The call's idempotency key ([`idempotency_key`]): the same for every attempt of the call
    /// and after any resume.
    pub idempotency_key: String,
    /// What the world should look like before and after the act, as far as the tool knows
    /// before it acts; empty when it knows nothing it could check.
    pub evidence: Vec<Evidence>,
    /// Seqs of the events this one follows: the seq of the call's previous event (`approved`,
    /// or the previous `started` for a retry or a re-run).
    pub source_seqs: Vec<u64>,
}

/// Something a tool knows, before it acts, that a probe can later compare with the world.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Evidence {
    /// The call will replace this file whole (`write`, `edit`).
    FileReplace {
        /// The file's path relative to the workspace, as the model is shown it.
        path: String,
        /// sha256 (hex) of the file right before the call starts; `None` when it does not exist.
        before_sha256: Option<String>,
        /// sha256 (hex) of the bytes the call will write.
        after_sha256: String,
    },
    /// The call runs a process under this sandbox (schema 11): what it could touch, whatever
    /// it does.
    Sandbox(super::SandboxBound),
}

/// Longest idempotency key: `tj1-` and 64 hex digits.
pub const IDEMPOTENCY_KEY_BYTES: usize = 68;

/// The idempotency key of a call: `tj1-` followed by the hex sha256 of the session id, the
/// turn, the step and the call id, each as a little-endian u64 length (or value) and its bytes
/// (docs/FORMAT.md, *Idempotency keys*). Deterministic, so every attempt of a call, and a
/// resume in another process, derive the same key; the session id makes keys of different
/// sessions differ, and a call id is unique within a step.
pub fn idempotency_key(session_id: &str, call: &CallRef) -> String {
    // The hashed message laid out once and hashed in one update (six small ones cost more than
    // the hashing): on the stack when it fits, as a session id and a model's call id do. This
    // runs once per call, on the way to its `started`.
    const STACK_BYTES: usize = 256;
    let (sid, cid) = (session_id.as_bytes(), call.call_id.as_bytes());
    let len = 4 * 8 + sid.len() + cid.len();
    let mut stack = [0u8; STACK_BYTES];
    let mut heap = Vec::new();
    let message: &mut [u8] = if len <= STACK_BYTES {
        &mut stack[..len]
    } else {
        heap.resize(len, 0);
        &mut heap
    };
    let mut at = 0;
    for part in [
        &(sid.len() as u64).to_le_bytes()[..],
        sid,
        &u64::from(call.turn).to_le_bytes(),
        &u64::from(call.step).to_le_bytes(),
        &(cid.len() as u64).to_le_bytes(),
        cid,
    ] {
        message[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut key = String::with_capacity(IDEMPOTENCY_KEY_BYTES);
    key.push_str("tj1-");
    for byte in Sha256::digest(message) {
        key.push(char::from(HEX[usize::from(byte >> 4)]));
        key.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    debug_assert_eq!(key.len(), IDEMPOTENCY_KEY_BYTES);
    key
}

/// Which calls a resume runs again (`tooljournal resume --rerun`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RerunPolicy {
    /// The interrupted step's approved calls that provably never started.
    NotStarted,
    /// Those, and its calls of unknown outcome whose tool declares itself idempotent
    /// (retry-safe) or read-only.
    Safe,
}

impl RerunPolicy {
    /// As the command line spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            RerunPolicy::NotStarted => "not-started",
            RerunPolicy::Safe => "safe",
        }
    }
}

/// `recovery/rerun`: right after the `recovery` a resume appends, the calls of the interrupted
/// step that recovery left open because the resume runs them again (same call ids, same frozen
/// arguments); the step stays open until they are committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryRerun {
    /// The policy that chose them.
    pub policy: RerunPolicy,
    /// The calls, in model order; each is `approved` (never started) or, under `safe`,
    /// `started` without `settled`.
    pub calls: Vec<CallRef>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(turn: u32, step: u32, id: &str) -> CallRef {
        CallRef {
            turn,
            step,
            call_id: id.into(),
        }
    }

    /// The key as docs/FORMAT.md words it: six updates of the hash, in order.
    fn by_the_words(session_id: &str, call: &CallRef) -> String {
        let mut hash = Sha256::new();
        hash.update((session_id.len() as u64).to_le_bytes());
        hash.update(session_id.as_bytes());
        hash.update(u64::from(call.turn).to_le_bytes());
        hash.update(u64::from(call.step).to_le_bytes());
        hash.update((call.call_id.len() as u64).to_le_bytes());
        hash.update(call.call_id.as_bytes());
        format!("tj1-{:x}", hash.finalize())
    }

    #[test]
    fn keys_are_the_documented_hash_on_the_stack_and_past_it() {
        let long = "s".repeat(300);
        for (session, id) in [
            ("s1", "c"),
            ("", ""),
            (long.as_str(), "call_7"),
            ("s", &long),
        ] {
            let c = call(3, 4, id);
            assert_eq!(idempotency_key(session, &c), by_the_words(session, &c));
        }
    }

    #[test]
    fn keys_are_deterministic_and_differ_by_every_field() {
        let key = idempotency_key("s1", &call(1, 2, "c"));
        assert_eq!(key, idempotency_key("s1", &call(1, 2, "c")));
        assert!(key.starts_with("tj1-") && key.len() == IDEMPOTENCY_KEY_BYTES);
        for other in [
            idempotency_key("s2", &call(1, 2, "c")),
            idempotency_key("s1", &call(2, 2, "c")),
            idempotency_key("s1", &call(1, 3, "c")),
            idempotency_key("s1", &call(1, 2, "d")),
            // Lengths are part of the hash: moving bytes between fields changes the key.
            idempotency_key("s1c", &call(1, 2, "")),
        ] {
            assert_ne!(key, other);
        }
    }
}
