//! The secrets a process that runs tools holds (a model's key, a database's password), kept
//! out of the reach of every process it starts.
//!
//! Why: a model writes the `bash` commands, and a command runs as the user. Whatever a command
//! can read, the model can put in a result, the journal and its next request. Taking a key's
//! variable out of the environment table is not enough: the kernel keeps the process's
//! *initial* environment in its memory and shows it in `/proc/PID/environ`, and a process of
//! the same user may read `/proc/PID/mem` of a dumpable process. So a binary that holds secrets
//! calls, before any thread or tool exists:
//!
//! 1. [`take_from_environment`]: each secret variable read once into this process's vault,
//!    removed from the environment (nothing started later inherits it), and its value wiped
//!    from the initial environment's bytes (`/proc/self/environ` then shows the name with an
//!    empty value). A secret that cannot be wiped is an error: the caller refuses to go on.
//! 2. [`seal_process`]: the process made non-dumpable (`PR_SET_DUMPABLE` 0: its `mem`,
//!    `environ` and open files are closed to its own user's other processes, and it writes no
//!    core file) with its core size limit 0.
//!
//! and every process started for a tool (a `bash` shell, an MCP server) runs [`before_exec`]
//! between fork and exec: `CAP_SYS_PTRACE` dropped from every capability set and the bounding
//! set (a root tool would otherwise read a non-dumpable process's memory anyway), and the core
//! size limit given back. What stays open is in README's *Security* section.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::{Mutex, OnceLock};

/// The variables that hold secrets the runtime's binaries use: the four providers' keys (each
/// taken whichever provider a session talks to: a model must not read another's key either)
/// and libpq's password and password file.
pub const SECRET_VARS: [&str; 6] = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "PGPASSWORD",
    "PGPASSFILE",
];

/// The largest initial environment wiped, in bytes (Linux caps it at a quarter of the stack
/// limit; a larger one is refused rather than read whole).
const ENVIRONMENT_BYTES_MAX: u64 = 64 << 20;

/// What this process took out of its environment, by name.
fn vault() -> &'static Mutex<BTreeMap<String, String>> {
    static VAULT: OnceLock<Mutex<BTreeMap<String, String>>> = OnceLock::new();
    VAULT.get_or_init(|| Mutex::new(BTreeMap::new()))
}

/// The core size limit's soft value before [`seal_process`] set it to 0: what every process
/// started for a tool gets back.
static CORE_LIMIT: OnceLock<Option<u64>> = OnceLock::new();

/// Why a secret could not be kept from the tools.
#[derive(Debug, thiserror::Error)]
#[error("cannot take {name} out of this process's initial environment ({why}); the tools it starts could read it, so nothing was started")]
pub struct SecretError {
    /// The variable.
    pub name: String,
    /// What failed.
    pub why: String,
}

/// Takes each of `names` that is set out of the environment: its value kept in this process
/// (for [`var`]), the variable removed, its bytes in the initial environment wiped. Returns the
/// names taken. Call it before any other thread exists (it changes the environment) and before
/// [`seal_process`] (the wipe writes through `/proc/self/mem`, which a non-dumpable process of
/// an ordinary user may not open; a later call lifts the seal for the wipe and puts it back).
pub fn take_from_environment(names: &[&str]) -> Result<Vec<String>, SecretError> {
    let mut taken = Vec::new();
    for name in names {
        let Some(value) = std::env::var_os(name) else {
            continue;
        };
        let value = value.into_string().map_err(|_| SecretError {
            name: (*name).to_owned(),
            why: "its value is not UTF-8".into(),
        })?;
        // The lock only guards the map; a poisoned one still holds whole entries.
        vault()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((*name).to_owned(), value);
        std::env::remove_var(name);
        taken.push((*name).to_owned());
    }
    if !taken.is_empty() {
        wipe_initial_environment(&taken).map_err(|(name, why)| SecretError { name, why })?;
    }
    Ok(taken)
}

/// The value of secret variable `name`: what [`take_from_environment`] took, else the
/// environment's.
pub fn var(name: &str) -> Option<String> {
    let taken = vault()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(name)
        .cloned();
    taken.or_else(|| std::env::var(name).ok())
}

/// Makes this process non-dumpable and sets its core size limit to 0 (the old soft limit is
/// kept for [`before_exec`]). Idempotent.
pub fn seal_process() -> io::Result<()> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let core = getrlimit(Resource::Core);
    let _ = CORE_LIMIT.set(core.current);
    setrlimit(
        Resource::Core,
        Rlimit {
            current: Some(0),
            maximum: core.maximum,
        },
    )?;
    set_dumpable(false)
}

fn set_dumpable(dumpable: bool) -> io::Result<()> {
    use rustix::process::{set_dumpable_behavior, DumpableBehavior};
    let behavior = if dumpable {
        DumpableBehavior::Dumpable
    } else {
        DumpableBehavior::NotDumpable
    };
    set_dumpable_behavior(behavior).map_err(io::Error::from)
}

fn dumpable() -> bool {
    use rustix::process::{dumpable_behavior, DumpableBehavior};
    dumpable_behavior().is_ok_and(|b| b == DumpableBehavior::Dumpable)
}

/// What a process started for a tool does between fork and exec: its core size limit given
/// back, `CAP_SYS_PTRACE` dropped. Only system calls (async-signal-safe), no allocation.
/// Fails (and the spawn with it) where the capability cannot be dropped from a process that
/// would keep it across exec: a root that lacks `CAP_SETPCAP`.
pub fn before_exec() -> io::Result<()> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    if let Some(&current) = CORE_LIMIT.get() {
        let maximum = getrlimit(Resource::Core).maximum;
        setrlimit(Resource::Core, Rlimit { current, maximum })?;
    }
    drop_ptrace()
}

/// `CAP_SYS_PTRACE` out of the bounding set (what a later exec as root, or of a set-user-ID
/// root program, could grant), the permitted, effective and inheritable sets, and the ambient
/// set.
fn drop_ptrace() -> io::Result<()> {
    use rustix::thread::{
        capabilities, capability_is_in_ambient_set, capability_is_in_bounding_set,
        configure_capability_in_ambient_set, remove_capability_from_bounding_set, set_capabilities,
        CapabilitySet,
    };
    let ptrace = CapabilitySet::SYS_PTRACE;
    if capability_is_in_bounding_set(ptrace)? {
        match remove_capability_from_bounding_set(ptrace) {
            Ok(()) => {}
            // An ordinary user lacks CAP_SETPCAP, and gains nothing from the bounding set at
            // exec: only a root exec (or a set-user-ID root program, README) would.
            Err(rustix::io::Errno::PERM) if !is_root() => {}
            Err(e) => return Err(e.into()),
        }
    }
    let mut sets = capabilities(None)?;
    if (sets.permitted | sets.effective | sets.inheritable).contains(ptrace) {
        sets.permitted.remove(ptrace);
        sets.effective.remove(ptrace);
        sets.inheritable.remove(ptrace);
        set_capabilities(None, sets)?;
    }
    if capability_is_in_ambient_set(ptrace)? {
        configure_capability_in_ambient_set(ptrace, false)?;
    }
    Ok(())
}

fn is_root() -> bool {
    rustix::process::getuid().is_root() || rustix::process::geteuid().is_root()
}

/// Wipes the values of `names` in this process's initial environment (the bytes between
/// `env_start` and `env_end` that `/proc/PID/environ` shows), then reads them again to check.
/// The environment table no longer points there ([`take_from_environment`] removed the
/// variables first), so nothing in this process reads the bytes that change.
fn wipe_initial_environment(names: &[String]) -> Result<(), (String, String)> {
    let first = names.first().cloned().unwrap_or_default();
    let fail = |why: String| (first.clone(), why);
    let (start, end) = environment_bounds().map_err(|e| fail(format!("/proc/self/stat: {e}")))?;
    let len = end.saturating_sub(start);
    if len > ENVIRONMENT_BYTES_MAX {
        return Err(fail(format!(
            "the initial environment is {len} bytes; at most {ENVIRONMENT_BYTES_MAX} are read"
        )));
    }
    // A non-dumpable process's /proc/self/mem belongs to root: lifted for the wipe only (no
    // tool runs yet; the caller is the only thread).
    let sealed = !dumpable();
    if sealed {
        set_dumpable(true).map_err(|e| fail(format!("PR_SET_DUMPABLE: {e}")))?;
    }
    let wiped = wipe_in(start, len as usize, names);
    if sealed {
        set_dumpable(false).map_err(|e| fail(format!("PR_SET_DUMPABLE: {e}")))?;
    }
    wiped
}

fn wipe_in(start: u64, len: usize, names: &[String]) -> Result<(), (String, String)> {
    let mem = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/proc/self/mem")
        .map_err(|e| (names[0].clone(), format!("/proc/self/mem: {e}")))?;
    let mut block = vec![0u8; len];
    mem.read_exact_at(&mut block, start)
        .map_err(|e| (names[0].clone(), format!("reading /proc/self/mem: {e}")))?;
    for (name, at, value_len) in secret_values(&block, names) {
        mem.write_all_at(&vec![0u8; value_len], start + at as u64)
            .map_err(|e| (name.clone(), format!("writing /proc/self/mem: {e}")))?;
    }
    // Read back: the promise is about the bytes the kernel shows, not about what was written.
    mem.read_exact_at(&mut block, start)
        .map_err(|e| (names[0].clone(), format!("reading /proc/self/mem: {e}")))?;
    if let Some((name, _, _)) = secret_values(&block, names)
        .into_iter()
        .find(|&(_, at, n)| block[at..at + n].iter().any(|&b| b != 0))
    {
        return Err((name, "its value is still there after the wipe".into()));
    }
    Ok(())
}

/// Each `NAME=value` entry of `block` (NUL-separated) whose name is one of `names`: the name,
/// where its value starts in `block`, and the value's length.
fn secret_values(block: &[u8], names: &[String]) -> Vec<(String, usize, usize)> {
    let mut found = Vec::new();
    let mut offset = 0;
    for entry in block.split(|&b| b == 0) {
        if let Some(eq) = entry.iter().position(|&b| b == b'=') {
            if let Some(name) = names.iter().find(|n| n.as_bytes() == &entry[..eq]) {
                found.push((name.clone(), offset + eq + 1, entry.len() - eq - 1));
            }
        }
        offset += entry.len() + 1;
    }
    found
}

/// `env_start` and `env_end` of `/proc/self/stat` (fields 50 and 51, Linux 3.5 and later).
fn environment_bounds() -> io::Result<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/self/stat")?;
    let bad = || io::Error::other("no env_start and env_end fields");
    let after_comm = &text[text.rfind(')').ok_or_else(bad)? + 1..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // Counted from field 3 (state), the first after `comm`.
    let field = |n: usize| -> io::Result<u64> {
        fields
            .get(n - 3)
            .and_then(|f| f.parse().ok())
            .ok_or_else(bad)
    };
    let (start, end) = (field(50)?, field(51)?);
    if start == 0 || end < start {
        return Err(bad());
    }
    Ok((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_values_are_found_each_time_they_appear() {
        let block = b"PATH=/bin\0OPENAI_API_KEY=sk-1\0X=OPENAI_API_KEY=no\0OPENAI_API_KEY=\0OPENAI_API_KEY=sk-22\0";
        let names = vec!["OPENAI_API_KEY".to_owned()];
        let found: Vec<(usize, usize)> = secret_values(block, &names)
            .into_iter()
            .map(|(_, at, n)| (at, n))
            .collect();
        assert_eq!(found, vec![(25, 4), (65, 0), (81, 5)]);
        assert_eq!(&block[25..29], b"sk-1");
        assert_eq!(&block[81..86], b"sk-22");
    }

    #[test]
    fn this_process_has_its_environment_bounds() {
        let (start, end) = environment_bounds().expect("Linux shows env_start and env_end");
        assert!(end > start, "{start}..{end}");
    }
}
