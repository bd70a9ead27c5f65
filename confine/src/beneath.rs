//! Opening a path below a directory handle without following any symlink.
//!
//! Why: checking a path by name and then opening it by name leaves a gap in which another
//! process can swap a directory for a symlink that leads out; the open then follows it. The
//! file tools therefore resolve a model's path once ([`Workspace::resolve`]: `..`, absolute
//! paths and symlinks that lead out refused, symlinks that stay inside replaced by their
//! targets) and then open that symlink-free path relative to a handle on the workspace root,
//! refusing every symlink on the way. A swap in the gap makes the open fail (`ELOOP`); it can
//! never make it reach outside.
//!
//! `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` does it in
//! one call where the kernel has it (Linux 5.6); where it is missing (`ENOSYS`) or a seccomp
//! filter refuses it (`EPERM`), a walk opens one component at a time with `openat` and
//! `O_NOFOLLOW`, each relative to the previous component's handle.
//!
//! [`Workspace::resolve`]: crate::workspace::Workspace::resolve

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::io;
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once `openat2` answered `ENOSYS`: the walk is used from then on.
static OPENAT2_MISSING: AtomicBool = AtomicBool::new(false);

/// A handle on the directory at `path` (which is followed as given: it is the trusted root).
pub fn open_root(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Opens `rel` below `dir` with `flags` (and `mode`, when creating), following no symlink:
/// a symlink anywhere in `rel`, the last component included, fails with `ELOOP`. `rel` must
/// hold only plain names (no `..`, `.` or root); empty means `dir` itself.
pub fn open_beneath(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    if rel.as_os_str().is_empty() {
        return Ok(rustix::fs::openat(dir, ".", flags, mode)?);
    }
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a plain relative path", rel.display()),
        ));
    }
    if !OPENAT2_MISSING.load(Ordering::Relaxed) {
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match rustix::fs::openat2(dir, rel, flags, mode, resolve) {
            Err(Errno::NOSYS) => OPENAT2_MISSING.store(true, Ordering::Relaxed),
            // A seccomp filter's refusal (or a real EPERM, which the walk meets again).
            Err(Errno::PERM) => {}
            // Interrupted by a concurrent rename (the kernel's own retry limit): walk instead.
            Err(Errno::AGAIN) => {}
            other => return Ok(other?),
        }
    }
    open_walk(dir, rel, flags, mode)
}

/// The fallback: one `openat` per component, each relative to the handle of the one before,
/// with `O_NOFOLLOW`; every intermediate component must be a directory (checked on its handle).
pub fn open_walk(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut names = rel.components().peekable();
    let mut current: Option<OwnedFd> = None;
    while let Some(component) = names.next() {
        let Component::Normal(name) = component else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a plain relative path", rel.display()),
            ));
        };
        let at = current.as_ref().map_or(dir, |fd| fd.as_fd());
        if names.peek().is_none() {
            return Ok(rustix::fs::openat(at, name, flags, mode)?);
        }
        // O_PATH with O_NOFOLLOW opens a symlink itself; the type check refuses it.
        let next = rustix::fs::openat(
            at,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let stat = rustix::fs::fstat(&next)?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => current = Some(next),
            FileType::Symlink => return Err(Errno::LOOP.into()),
            _ => return Err(Errno::NOTDIR.into()),
        }
    }
    // `rel` had no component: the directory itself.
    Ok(rustix::fs::openat(dir, ".", flags, mode)?)
}

/// Whether an open failed because a symlink stood in the way (or the path led out).
pub fn is_symlink_refusal(e: &io::Error) -> bool {
    let errno = e.raw_os_error();
    errno == Some(Errno::LOOP.raw_os_error()) || errno == Some(Errno::XDEV.raw_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::fs::symlink;

    type Opener = fn(BorrowedFd<'_>, &Path, OFlags, Mode) -> io::Result<OwnedFd>;

    fn read(open: Opener, root: &OwnedFd, rel: &str) -> io::Result<String> {
        let fd = open(root.as_fd(), Path::new(rel), OFlags::RDONLY, Mode::empty())?;
        let mut s = String::new();
        std::fs::File::from(fd).read_to_string(&mut s)?;
        Ok(s)
    }

    #[test]
    fn both_ways_open_plain_paths_and_refuse_every_symlink() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        std::fs::create_dir_all(ws.join("sub/deeper")).unwrap();
        std::fs::write(ws.join("sub/deeper/a.txt"), "inside").unwrap();
        std::fs::write(d.path().join("secret"), "OUTSIDE").unwrap();
        symlink(d.path(), ws.join("out")).unwrap();
        symlink(ws.join("sub"), ws.join("alias")).unwrap();
        symlink(d.path().join("secret"), ws.join("sub/leaf")).unwrap();
        let root = open_root(&ws).unwrap();
        for open in [open_beneath as Opener, open_walk as Opener] {
            assert_eq!(read(open, &root, "sub/deeper/a.txt").unwrap(), "inside");
            for rel in ["out/secret", "alias/deeper/a.txt", "sub/leaf"] {
                let e = read(open, &root, rel).unwrap_err();
                assert!(is_symlink_refusal(&e), "{rel}: {e}");
            }
            let e = read(open, &root, "sub/deeper/a.txt/x").unwrap_err();
            assert_eq!(e.raw_os_error(), Some(Errno::NOTDIR.raw_os_error()));
            assert!(read(open, &root, "../secret").is_err());
        }
        let dir = open_beneath(root.as_fd(), Path::new(""), OFlags::RDONLY, Mode::empty());
        assert!(dir.is_ok());
        assert!(open_beneath(
            rustix::fs::CWD,
            Path::new("/etc"),
            OFlags::RDONLY,
            Mode::empty()
        )
        .is_err());
    }

    #[test]
    fn both_ways_never_read_outside_while_a_directory_is_swapped_for_a_symlink() {
        use std::sync::atomic::{AtomicBool, AtomicU64};
        use std::sync::Arc;
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        let outside = d.path().join("outside");
        std::fs::create_dir_all(ws.join("d")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(ws.join("d/f.txt"), "inside").unwrap();
        std::fs::write(outside.join("f.txt"), "OUTSIDE").unwrap();
        let root = open_root(&ws).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let swapper = {
            let (ws, outside) = (ws.clone(), outside.clone());
            let (stop, swaps) = (stop.clone(), swaps.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::fs::rename(ws.join("d"), ws.join("d.real")).unwrap();
                    symlink(&outside, ws.join("d")).unwrap();
                    std::fs::remove_file(ws.join("d")).unwrap();
                    std::fs::rename(ws.join("d.real"), ws.join("d")).unwrap();
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        // The race runs from the first swap on.
        while swaps.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        for i in 0..20_000 {
            let open = if i % 2 == 0 {
                open_beneath as Opener
            } else {
                open_walk as Opener
            };
            match read(open, &root, "d/f.txt") {
                Ok(text) => assert_eq!(text, "inside"),
                Err(e) => assert!(
                    is_symlink_refusal(&e) || e.kind() == io::ErrorKind::NotFound,
                    "{e}"
                ),
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        assert_eq!(read(open_walk, &root, "d/f.txt").unwrap(), "inside");
    }
}
