//! What a confined process does between fork and exec, and what is made for it before the
//! fork: the Landlock ruleset (built once per sandbox, its descriptor copied per process) and
//! the sandbox's user and network namespaces (made once, held by descriptors, entered per
//! process, `namespaces.rs`). Only system calls run in the child, on what was made before the
//! fork: it is a copy of a threaded process, where a lock another thread held stays held
//! forever.

use crate::kernel::{Kernel, LANDLOCK_ABI_USED_MAX};
use crate::namespaces::Namespaces;
use crate::roots::Roots;
use crate::SandboxError;
use landlock::{
    Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
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
