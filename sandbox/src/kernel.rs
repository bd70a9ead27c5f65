//! What this kernel offers a sandbox, found once per process before anything runs: the
//! Landlock ABI (asked of the kernel, journaled as it answers) and whether new user and network
//! namespaces can be made and mapped (tried as a sandbox makes them).
//!
//! `TOOLJOURNAL_SANDBOX_HIDE` (comma-separated `landlock`, `namespaces`) makes this process
//! act as if the kernel lacked them: how the tests show the refusal and `--allow-unsandboxed`
//! on a kernel that has both. It can only weaken what the session claims, never widen what a
//! command may do without the choice being journaled.

use std::sync::OnceLock;

/// Least Landlock ABI a policy is enforced with: 3 (Linux 6.2) is the first that controls
/// truncation, without which a command could empty any file it can read.
pub const LANDLOCK_ABI_MIN: i32 = 3;

/// Highest Landlock ABI this build handles rights of (6: signals and abstract Unix sockets
/// scoped to the sandbox); a newer kernel is used at this level.
pub const LANDLOCK_ABI_USED_MAX: i32 = 6;

/// The variable the tests hide kernel features with.
pub const HIDE_VAR: &str = "TOOLJOURNAL_SANDBOX_HIDE";

/// What the kernel offers.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The kernel's Landlock ABI; 0 when it has none (or it is hidden).
    pub landlock_abi: i32,
    /// Whether a child could enter new user and network namespaces; why not, when not.
    pub namespaces: Result<(), String>,
}

impl Kernel {
    /// What this kernel offers, found on first use.
    pub fn get() -> &'static Kernel {
        static KERNEL: OnceLock<Kernel> = OnceLock::new();
        KERNEL.get_or_init(|| {
            let hidden = std::env::var(HIDE_VAR).unwrap_or_default();
            let hides = |what: &str| hidden.split(',').any(|h| h.trim() == what);
            Kernel {
                landlock_abi: if hides("landlock") { 0 } else { landlock_abi() },
                namespaces: if hides("namespaces") {
                    Err(format!("hidden by {HIDE_VAR}"))
                } else {
                    namespaces_work()
                },
            }
        })
    }

    /// What a policy needs that this kernel lacks, in words; `None` when it has everything.
    /// Namespaces are needed either way: they also strip a root command of its capabilities
    /// over the host.
    pub fn missing(&self, _network: bool) -> Option<String> {
        let mut missing = Vec::new();
        if self.landlock_abi < LANDLOCK_ABI_MIN {
            missing.push(if self.landlock_abi <= 0 {
                format!(
                    "the kernel has no Landlock (ABI {LANDLOCK_ABI_MIN} or newer, Linux 6.2, \
                     confines files)"
                )
            } else {
                format!(
                    "the kernel's Landlock is ABI {}, and ABI {LANDLOCK_ABI_MIN} or newer \
                     (Linux 6.2, truncation control) is needed",
                    self.landlock_abi
                )
            });
        }
        if let Err(why) = &self.namespaces {
            missing.push(format!(
                "new user and network namespaces cannot be entered ({why}; they cut the \
                 network and a root command's power over the host)"
            ));
        }
        (!missing.is_empty()).then(|| missing.join("; and "))
    }
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`: the ABI, or 0.
fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query reads no memory (a null attribute of size 0) and creates no
    // descriptor.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(abi).unwrap_or(0).max(0)
}

/// Whether new user and network namespaces can be made and mapped, as the sandbox makes them.
fn namespaces_work() -> Result<(), String> {
    crate::namespaces::Namespaces::make(true)
        .map(drop)
        .map_err(|e| e.to_string())
}
