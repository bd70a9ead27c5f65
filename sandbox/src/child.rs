//! What a confined process does between fork and exec, and what is made for it before the
//! fork: the Landlock ruleset (built once per sandbox, its descriptor copied per process) and
//! the sandbox's user and network namespaces (made once, held by descriptors, entered per
//! process). Only system calls run in the child, on what was made before the fork: it is a
//! copy of a threaded process, where a lock another thread held stays held forever.
//!
//! Why namespaces made once and entered: a new network namespace costs the kernel most of a
//! millisecond to make (and more to tear down), which doubled the cost of a `bash true`;
//! `setns` into one that exists is cheap. The commands of one sandbox share it: an empty
//! namespace (its loopback down) that holds nothing of theirs, and Landlock's scopes keep one
//! command's abstract sockets and signals from another's.

use crate::kernel::{Kernel, LANDLOCK_ABI_USED_MAX};
use crate::roots::Roots;
use crate::SandboxError;
use landlock::{
    Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use rustix::thread::UnshareFlags;
use std::io;

/// The ruleset of one sandbox, and how its processes enter it.
#[derive(Debug)]
pub(crate) struct Enforcer {
    ruleset: RulesetCreated,
    abi: i32,
    network: bool,
    namespaces: Namespaces,
    /// Without network: the filter that refuses `socket(AF_UNIX, …)`.
    seccomp: Option<seccompiler::BpfProgram>,
}

/// The sandbox's user namespace and (without network) its network namespace, held open.
#[derive(Debug)]
pub(crate) struct Namespaces {
    user: std::os::fd::OwnedFd,
    net: Option<std::os::fd::OwnedFd>,
}

impl Enforcer {
    /// The ruleset for `roots`, at the kernel's ABI (at most [`LANDLOCK_ABI_USED_MAX`]), every
    /// right of that ABI handled and a missing one an error (never a weaker ruleset).
    pub(crate) fn build(
        roots: &Roots,
        kernel: &Kernel,
        network: bool,
    ) -> Result<Enforcer, SandboxError> {
        let abi_level = kernel.landlock_abi.min(LANDLOCK_ABI_USED_MAX);
        let abi = ABI::from(abi_level);
        let all = AccessFs::from_all(abi);
        let read = AccessFs::from_read(abi);
        let device = AccessFs::from_file(abi) & !AccessFs::Execute;
        let landlock = |e: landlock::RulesetError| SandboxError::Landlock(e.to_string());
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(all)
            .map_err(landlock)?;
        let scopes = Scope::from_all(abi);
        if !scopes.is_empty() {
            ruleset = ruleset.scope(scopes).map_err(landlock)?;
        }
        let mut created = ruleset.create().map_err(landlock)?;
        let rules = roots
            .readable
            .iter()
            .map(|p| (p, read))
            .chain(roots.writable.iter().map(|p| (p, all)))
            .chain(roots.devices.iter().map(|p| (p, device)));
        for (path, access) in rules {
            let fd = PathFd::new(path).map_err(|e| SandboxError::Root {
                path: path.display().to_string(),
                source: io::Error::other(e.to_string()),
            })?;
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(landlock)?;
        }
        Ok(Enforcer {
            ruleset: created,
            abi: abi_level,
            network,
            namespaces: Namespaces::make(!network)?,
            seccomp: if network {
                None
            } else {
                Some(unix_sockets_refused()?)
            },
        })
    }

    /// How it is enforced, in words, as journaled.
    pub(crate) fn mechanism(&self) -> String {
        let scoped = if self.abi >= 6 {
            ", signals and abstract Unix sockets scoped to the sandbox"
        } else {
            "; signals NOT confined: the kernel's Landlock has no scopes"
        };
        let namespaces = if self.network {
            "a user namespace (network allowed)"
        } else {
            "user and network namespaces and socket(AF_UNIX) refused (no network)"
        };
        format!("Landlock ABI {} (files{scoped}); {namespaces}", self.abi)
    }

    /// What one process needs to enter the sandbox: a copy of the ruleset's descriptor and
    /// its id maps.
    pub(crate) fn entry(&self) -> io::Result<Entry> {
        Ok(Entry {
            ruleset: Some(self.ruleset.try_clone()?),
            user: self.namespaces.user.try_clone()?,
            net: self
                .namespaces
                .net
                .as_ref()
                .map(std::os::fd::OwnedFd::try_clone)
                .transpose()?,
            seccomp: self.seccomp.clone(),
        })
    }
}

/// A filter that makes `socket(AF_UNIX, …)` fail with `EACCES` and lets everything else
/// through (`socketpair`, which pipes between a command's own processes, included).
fn unix_sockets_refused() -> Result<seccompiler::BpfProgram, SandboxError> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    fn failed(e: impl std::fmt::Display) -> SandboxError {
        SandboxError::Seccomp(e.to_string())
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(failed)?;
    let domain = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        libc::AF_UNIX as u64,
    )
    .map_err(failed)?;
    let rules = std::collections::BTreeMap::from([(
        libc::SYS_socket,
        vec![SeccompRule::new(vec![domain]).map_err(failed)?],
    )]);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(failed)?;
    seccompiler::BpfProgram::try_from(filter).map_err(failed)
}

impl Namespaces {
    /// Made by a child that enters new namespaces and waits: the parent writes their id maps
    /// (this process's user and group mapped to themselves) from outside, so the child, a copy
    /// of the runtime until it execs, is never made dumpable; then it opens the namespaces'
    /// descriptors (which keep them alive) and lets the child end.
    pub(crate) fn make(network_off: bool) -> Result<Namespaces, SandboxError> {
        use std::os::unix::process::CommandExt;
        let failed = |what: &str, e: io::Error| SandboxError::Namespaces(format!("{what}: {e}"));
        let mut flags = UnshareFlags::NEWUSER;
        if network_off {
            flags |= UnshareFlags::NEWNET;
        }
        let mut holder = std::process::Command::new("/bin/sh");
        holder
            .args(["-c", "read _"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // SAFETY: runs between fork and exec; one system call. The child is single-threaded
        // and unshares no descriptor table.
        unsafe {
            holder.pre_exec(move || Ok(rustix::thread::unshare_unsafe(flags)?));
        }
        let mut child = holder.spawn().map_err(|e| failed("unshare", e))?;
        // Its namespaces are its own from exec on (spawn returns after it): /proc shows them.
        let made = (|| {
            let proc = format!("/proc/{}", child.id());
            let (uid, gid) = (
                rustix::process::geteuid().as_raw(),
                rustix::process::getegid().as_raw(),
            );
            std::fs::write(format!("{proc}/setgroups"), "deny")
                .map_err(|e| failed("setgroups", e))?;
            std::fs::write(format!("{proc}/uid_map"), format!("{uid} {uid} 1"))
                .map_err(|e| failed("uid_map", e))?;
            std::fs::write(format!("{proc}/gid_map"), format!("{gid} {gid} 1"))
                .map_err(|e| failed("gid_map", e))?;
            let ns = |kind: &str| {
                std::fs::File::open(format!("{proc}/ns/{kind}"))
                    .map(std::os::fd::OwnedFd::from)
                    .map_err(|e| failed("open /proc/PID/ns", e))
            };
            let user = ns("user")?;
            let net = if network_off { Some(ns("net")?) } else { None };
            Ok(Namespaces { user, net })
        })();
        // Its stdin closed, `read` ends and so does the child; reaped either way.
        drop(child.stdin.take());
        let _ = child.wait();
        made
    }
}

/// Made before the fork, entered in the child.
pub(crate) struct Entry {
    ruleset: Option<RulesetCreated>,
    user: std::os::fd::OwnedFd,
    net: Option<std::os::fd::OwnedFd>,
    seccomp: Option<seccompiler::BpfProgram>,
}

impl Entry {
    /// The sandbox's namespaces first (the user namespace gives the capabilities `setns`
    /// into the network namespace needs), then the ruleset, which also sets `no_new_privs`.
    pub(crate) fn enter(&mut self) -> io::Result<()> {
        use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};
        move_into_link_name_space(
            std::os::fd::AsFd::as_fd(&self.user),
            Some(LinkNameSpaceType::User),
        )?;
        if let Some(net) = &self.net {
            move_into_link_name_space(
                std::os::fd::AsFd::as_fd(net),
                Some(LinkNameSpaceType::Network),
            )?;
        }
        let Some(ruleset) = self.ruleset.take() else {
            // Entered twice: a process is confined once.
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        };
        match ruleset.restrict_self() {
            Ok(status) if status.ruleset == RulesetStatus::FullyEnforced => {}
            Ok(_) => return Err(io::Error::from_raw_os_error(libc::ENOTSUP)),
            Err(_) => return Err(io::Error::from_raw_os_error(libc::EPERM)),
        }
        // After Landlock, which set no_new_privs (the filter needs it).
        if let Some(filter) = &self.seccomp {
            seccompiler::apply_filter(filter)
                .map_err(|_| io::Error::from_raw_os_error(libc::EPERM))?;
        }
        Ok(())
    }
}
