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
}

/// The sandbox's user namespace and (without network) its network namespace, held open.
#[derive(Debug)]
struct Namespaces {
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
        })
    }

    /// How it is enforced, in words, as journaled.
    pub(crate) fn mechanism(&self) -> String {
        let scoped = if self.abi >= 6 {
            ", signals and abstract Unix sockets scoped to the sandbox"
        } else {
            ""
        };
        let namespaces = if self.network {
            "a user namespace (network allowed)"
        } else {
            "user and network namespaces (no network)"
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
        })
    }
}

impl Namespaces {
    /// Made by a child that enters new namespaces, writes its id maps and waits: the parent
    /// opens the namespaces' descriptors (which keep them alive), then lets it end.
    fn make(network_off: bool) -> Result<Namespaces, SandboxError> {
        use std::os::unix::process::CommandExt;
        let failed = |what: &str, e: io::Error| SandboxError::Namespaces(format!("{what}: {e}"));
        let mut holder = std::process::Command::new("/bin/sh");
        holder
            .args(["-c", "read _"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut maps = IdMaps::of_this_process();
        // SAFETY: runs between fork and exec; system calls only, on buffers made before it.
        unsafe {
            holder.pre_exec(move || maps.enter(network_off));
        }
        let mut child = holder.spawn().map_err(|e| failed("spawn", e))?;
        let opened = (|| {
            // The child's namespaces are its own once it runs; /proc shows them from then on.
            let ns = |kind: &str| {
                std::fs::File::open(format!("/proc/{}/ns/{kind}", child.id()))
                    .map(std::os::fd::OwnedFd::from)
            };
            let user = ns("user")?;
            let net = if network_off { Some(ns("net")?) } else { None };
            Ok::<_, io::Error>(Namespaces { user, net })
        })();
        // Its stdin closed, `read` ends and so does the child; reaped either way.
        drop(child.stdin.take());
        let _ = child.wait();
        opened.map_err(|e| failed("open /proc/PID/ns", e))
    }
}

/// Made before the fork, entered in the child.
pub(crate) struct Entry {
    ruleset: Option<RulesetCreated>,
    user: std::os::fd::OwnedFd,
    net: Option<std::os::fd::OwnedFd>,
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
            Ok(status) if status.ruleset == RulesetStatus::FullyEnforced => Ok(()),
            Ok(_) => Err(io::Error::from_raw_os_error(libc::ENOTSUP)),
            Err(_) => Err(io::Error::from_raw_os_error(libc::EPERM)),
        }
    }
}

/// The user namespace's id maps: this process's user and group mapped to themselves, so the
/// command sees its own ids and the files it creates are the user's.
pub(crate) struct IdMaps {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    root: bool,
}

impl IdMaps {
    pub(crate) fn of_this_process() -> IdMaps {
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        IdMaps {
            uid_map: format!("{uid} {uid} 1").into_bytes(),
            gid_map: format!("{gid} {gid} 1").into_bytes(),
            root: uid == 0,
        }
    }

    /// Enters a new user namespace (and a network namespace when `network_off`) and writes
    /// its maps.
    pub(crate) fn enter(&mut self, network_off: bool) -> io::Result<()> {
        let mut flags = UnshareFlags::NEWUSER;
        if network_off {
            flags |= UnshareFlags::NEWNET;
        }
        // SAFETY: the child is single-threaded; no descriptor table is unshared.
        unsafe { rustix::thread::unshare_unsafe(flags) }?;
        // A non-dumpable process's /proc/self files belong to root: an ordinary user's child
        // (a copy of the runtime, which seals itself) is made dumpable for the three writes.
        // Its memory is then readable by the user's own processes until exec replaces it.
        let sealed = !self.root
            && rustix::process::dumpable_behavior()
                .is_ok_and(|b| b != rustix::process::DumpableBehavior::Dumpable);
        if sealed {
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::Dumpable)?;
        }
        write_proc(c"/proc/self/setgroups", b"deny")?;
        write_proc(c"/proc/self/uid_map", &self.uid_map)?;
        write_proc(c"/proc/self/gid_map", &self.gid_map)?;
        if sealed {
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
        }
        Ok(())
    }
}

fn write_proc(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    let written = rustix::io::write(&fd, bytes)?;
    if written != bytes.len() {
        return Err(io::Error::from_raw_os_error(libc::EIO));
    }
    Ok(())
}
