//! The sandbox's user and network namespaces: made once per sandbox, held by descriptors, and
//! entered by each of its processes (`child.rs`, `Entry::enter`); `kernel.rs` makes a pair once
//! to learn whether this kernel can.
//!
//! Why made once and entered: a new network namespace costs the kernel most of a millisecond
//! to make (and more to tear down), which doubled the cost of a `bash true`; `setns` into one
//! that exists is cheap. The commands of one sandbox share it: an empty namespace (its
//! loopback down) that holds nothing of theirs, and Landlock's scopes keep one command's
//! abstract sockets and signals from another's.

use crate::SandboxError;
use rustix::thread::UnshareFlags;
use std::io;

/// The sandbox's user namespace and (without network) its network namespace, held open.
#[derive(Debug)]
pub(crate) struct Namespaces {
    pub(crate) user: std::os::fd::OwnedFd,
    pub(crate) net: Option<std::os::fd::OwnedFd>,
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
