//! The files `recover` writes for the user (`audit --html`, `rebuild --out`, `repair --out` and
//! its `.quarantine`): made whole beside their destination, then given its name.
//!
//! Why not `File::create`: a destination, or a temporary name beside it, may be a symlink
//! someone planted (in a shared directory, say), and a plain create writes through it to
//! whatever it points at. So the file is written unnamed (`O_TMPFILE`) in the destination's
//! directory, or where the filesystem cannot, under a name of ours created exclusively
//! (`O_CREAT | O_EXCL | O_NOFOLLOW`); nothing that was there before is ever opened, written or
//! removed; and the name is given last: by a link, which fails if anything has the name
//! ([`Kind::New`]), or by a rename over a regular file, never over a symlink or a directory
//! ([`Kind::Replace`]). Every file is made 0600: it holds tool arguments and results.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, CWD};

/// Whether the destination may already exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// It must not: nothing is overwritten (`repair --out`).
    New,
    /// A regular file there is replaced whole (`audit --html`, `rebuild --out`); a symlink or
    /// a directory is refused.
    Replace,
}

/// Why an output was not written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// Something has the name already ([`Kind::New`]).
    #[error("{}: exists; it is never overwritten (remove it or name another file)", path.display())]
    Exists {
        /// The destination.
        path: PathBuf,
    },
    /// The destination is a symbolic link: neither written through nor replaced.
    #[error("{}: is a symbolic link; it is neither written through nor replaced (remove it or name another file)", path.display())]
    Symlink {
        /// The destination.
        path: PathBuf,
    },
    /// The destination is a directory, or something else that is not a regular file.
    #[error("{}: is not a regular file", path.display())]
    NotAFile {
        /// The destination.
        path: PathBuf,
    },
    /// A system call failed.
    #[error("{}: cannot {op}: {source}", path.display())]
    Io {
        /// The destination, as asked for.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// Why it failed.
        source: io::Error,
    },
}

/// A file being written, to appear at its destination only whole.
#[derive(Debug)]
pub struct Output {
    /// The destination as the user gave it (for messages).
    path: PathBuf,
    kind: Kind,
    /// The destination's directory.
    dir: OwnedFd,
    /// The destination's name in `dir`.
    name: OsString,
    file: File,
    /// The name of ours the file has in `dir`, when it has one (none for `O_TMPFILE`).
    temp: Option<OsString>,
}

/// A written output: enough to take it back if a later step fails (only while it is still
/// the file that was written). It keeps the file open: while it is, no other file can be given
/// its inode number, so the identity check cannot be fooled by a reused inode.
#[derive(Debug)]
pub struct Written {
    dir: OwnedFd,
    name: OsString,
    file: File,
}

/// How many names of ours are tried before giving up, when each is taken.
const TEMP_NAMES_MAX: u32 = 64;

impl Output {
    /// Starts `path`'s file: its directory opened, the destination checked (so that a refusal
    /// comes before any work), the file created unnamed or under a name of ours.
    pub fn create(path: &Path, kind: Kind) -> Result<Output, OutputError> {
        let io = |op, source| OutputError::Io {
            path: path.to_owned(),
            op,
            source,
        };
        let name = path
            .file_name()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| io("write", io::Error::other("the path names no file")))?
            .to_owned();
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let dir = rustix::fs::open(
            parent,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io("write: its directory cannot be opened", e.into()))?;
        check_destination(path, kind, &dir, &name)?;
        let (file, temp) = new_file(&dir, &name).map_err(|e| io("create", e))?;
        Ok(Output {
            path: path.to_owned(),
            kind,
            dir,
            name,
            file,
            temp,
        })
    }

    /// The file being written (opened for reading too): what was written can be read back
    /// and checked before it is given its name.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Syncs the file and gives it its name (see [`Kind`]); then syncs the directory.
    pub fn commit(mut self) -> Result<Written, OutputError> {
        let path = self.path.clone();
        let io = |op, source| OutputError::Io {
            path: path.clone(),
            op,
            source,
        };
        self.file.sync_all().map_err(|e| io("write", e))?;
        match self.kind {
            Kind::New => self.link_new()?,
            Kind::Replace => self.rename_over()?,
        }
        rustix::fs::fsync(&self.dir).map_err(|e| io("sync the directory", e.into()))?;
        let dir = self
            .dir
            .try_clone()
            .map_err(|e| io("sync the directory", e))?;
        let file = self.file.try_clone().map_err(|e| io("write", e))?;
        Ok(Written {
            dir,
            name: self.name.clone(),
            file,
        })
    }

    /// The name given by a link: it fails if anything has the name.
    fn link_new(&mut self) -> Result<(), OutputError> {
        let linked = match &self.temp {
            Some(temp) => {
                rustix::fs::linkat(&self.dir, temp, &self.dir, &self.name, AtFlags::empty())
            }
            None => link_unnamed(&self.file, &self.dir, &self.name),
        };
        match linked {
            Ok(()) => {
                // The file has its name: the name of ours goes (it is still this file).
                if let (Some(temp), Ok(ours)) = (self.temp.take(), identity(&self.file)) {
                    remove_if(&self.dir, &temp, ours);
                }
                Ok(())
            }
            Err(rustix::io::Errno::EXIST) => Err(OutputError::Exists {
                path: self.path.clone(),
            }),
            Err(e) => Err(OutputError::Io {
                path: self.path.clone(),
                op: "write",
                source: e.into(),
            }),
        }
    }

    /// The name given by a rename over what has it: a regular file, never a symlink or a
    /// directory (checked again here, just before).
    fn rename_over(&mut self) -> Result<(), OutputError> {
        check_destination(&self.path, Kind::Replace, &self.dir, &self.name)?;
        let io = |source: io::Error| OutputError::Io {
            path: self.path.clone(),
            op: "write",
            source,
        };
        if self.temp.is_none() {
            // An unnamed file cannot be renamed: it gets a name of ours first, exclusively.
            let temp = (0..TEMP_NAMES_MAX)
                .map(|n| temp_name(&self.name, n))
                .find_map(|temp| match link_unnamed(&self.file, &self.dir, &temp) {
                    Ok(()) => Some(Ok(temp)),
                    Err(rustix::io::Errno::EXIST) => None,
                    Err(e) => Some(Err(e)),
                })
                .unwrap_or(Err(rustix::io::Errno::EXIST))
                .map_err(|e| io(e.into()))?;
            self.temp = Some(temp);
        }
        let temp = self.temp.clone().unwrap_or_default();
        rustix::fs::renameat(&self.dir, &temp, &self.dir, &self.name).map_err(|e| io(e.into()))?;
        // Renamed: the name of ours is gone with it.
        self.temp = None;
        Ok(())
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for Output {
    /// An output given up: an unnamed file vanishes by itself; a name of ours is removed,
    /// only while it still names this file.
    fn drop(&mut self) {
        if let (Some(temp), Ok(ours)) = (&self.temp, identity(&self.file)) {
            remove_if(&self.dir, temp, ours);
        }
    }
}

impl Written {
    /// Removes the written file, only while its name still names it (a later step failed).
    pub fn remove(self) {
        if let Ok(ours) = identity(&self.file) {
            remove_if(&self.dir, &self.name, ours);
        }
    }
}

/// Refuses a destination that is a symlink, a directory or (for [`Kind::New`]) anything.
fn check_destination(
    path: &Path,
    kind: Kind,
    dir: &OwnedFd,
    name: &OsStr,
) -> Result<(), OutputError> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(OutputError::Io {
            path: path.to_owned(),
            op: "look at",
            source: e.into(),
        }),
        Ok(_) if kind == Kind::New => Err(OutputError::Exists {
            path: path.to_owned(),
        }),
        Ok(st) => match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => Ok(()),
            FileType::Symlink => Err(OutputError::Symlink {
                path: path.to_owned(),
            }),
            _ => Err(OutputError::NotAFile {
                path: path.to_owned(),
            }),
        },
    }
}

/// A new file in `dir`: unnamed where the filesystem allows (`O_TMPFILE`), else under a name of
/// ours created exclusively, following no link.
fn new_file(dir: &OwnedFd, name: &OsStr) -> io::Result<(File, Option<OsString>)> {
    match rustix::fs::openat(
        dir,
        ".",
        OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
        Mode::RUSR | Mode::WUSR,
    ) {
        Ok(fd) => Ok((File::from(fd), None)),
        // Not on this filesystem (or kernel): a name of ours instead.
        Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::ISDIR | rustix::io::Errno::INVAL) => {
            named_file(dir, name)
        }
        Err(e) => Err(e.into()),
    }
}

/// A new file in `dir` under a name of ours, created exclusively, following no link.
fn named_file(dir: &OwnedFd, name: &OsStr) -> io::Result<(File, Option<OsString>)> {
    let mode = Mode::RUSR | Mode::WUSR;
    for n in 0..TEMP_NAMES_MAX {
        let temp = temp_name(name, n);
        match rustix::fs::openat(
            dir,
            &temp,
            OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::RDWR | OFlags::CLOEXEC,
            mode,
        ) {
            Ok(fd) => return Ok((File::from(fd), Some(temp))),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::other(format!(
        "{TEMP_NAMES_MAX} temporary names beside it are all taken"
    )))
}

/// `.NAME.PID-NANOS-N.partial`: hidden, and not a name anyone else would choose.
fn temp_name(name: &OsStr, n: u32) -> OsString {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut temp = OsString::from(".");
    temp.push(name);
    temp.push(format!(".{}-{nanos}-{n}.partial", std::process::id()));
    temp
}

/// Links an unnamed file into `dir` as `name` (`linkat` through `/proc/self/fd`, which needs
/// no privilege, unlike `AT_EMPTY_PATH`).
fn link_unnamed(file: &File, dir: &OwnedFd, name: &OsStr) -> rustix::io::Result<()> {
    let proc_path = format!("/proc/self/fd/{}", file.as_fd().as_raw_fd());
    rustix::fs::linkat(CWD, &proc_path, dir, name, AtFlags::SYMLINK_FOLLOW)
}

/// The (device, inode) of an open file.
fn identity(file: &File) -> io::Result<(u64, u64)> {
    let st = rustix::fs::fstat(file)?;
    Ok((st.st_dev, st.st_ino))
}

/// Removes `name` from `dir` if it is the file `ours` (a device and inode of a file the caller
/// holds open, so that no other file can have them), never anything else that took the name.
fn remove_if(dir: &OwnedFd, name: &OsStr, ours: (u64, u64)) {
    if let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        if (st.st_dev, st.st_ino) == ours {
            let _ = rustix::fs::unlinkat(dir, name, AtFlags::empty());
        }
    }
}

/// `name` as text (for tests' messages).
#[cfg(test)]
fn shown(name: &OsStr) -> String {
    name.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write(path: &Path, kind: Kind, text: &str) -> Result<Written, OutputError> {
        let mut out = Output::create(path, kind)?;
        out.write_all(text.as_bytes()).expect("write");
        out.commit()
    }

    #[test]
    fn a_new_file_is_made_0600_and_an_existing_name_is_never_overwritten() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("out.json");
        write(&path, Kind::New, "one").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(matches!(
            write(&path, Kind::New, "two"),
            Err(OutputError::Exists { .. })
        ));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");
        let names: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| shown(&e.unwrap().file_name()))
            .collect();
        assert_eq!(names, vec!["out.json".to_owned()], "no temporary file left");
    }

    #[test]
    fn a_symlink_is_neither_written_through_nor_replaced() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("bashrc");
        std::fs::write(&target, "alias ls='ls -F'\n").unwrap();
        let link = d.path().join("page.html");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for kind in [Kind::New, Kind::Replace] {
            assert!(write(&link, kind, "<html>").is_err(), "{kind:?}");
        }
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "alias ls='ls -F'\n"
        );
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    }

    #[test]
    fn without_o_tmpfile_a_name_of_ours_is_used_and_never_left_behind() {
        let d = tempfile::tempdir().unwrap();
        let dir =
            rustix::fs::open(d.path(), OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        for kind in [Kind::New, Kind::Replace] {
            let path = d.path().join(format!("{kind:?}.txt"));
            let (file, temp) = named_file(&dir, OsStr::new("x")).unwrap();
            assert!(temp.is_some());
            let mut out = Output {
                path: path.clone(),
                kind,
                dir: dir.try_clone().unwrap(),
                name: path.file_name().unwrap().to_owned(),
                file,
                temp,
            };
            out.write_all(b"whole").unwrap();
            out.commit().unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "whole");
        }
        // Given up before its name: nothing left.
        let (file, temp) = named_file(&dir, OsStr::new("y")).unwrap();
        drop(Output {
            path: d.path().join("y"),
            kind: Kind::New,
            dir: dir.try_clone().unwrap(),
            name: "y".into(),
            file,
            temp,
        });
        let mut names: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| shown(&e.unwrap().file_name()))
            .collect();
        names.sort();
        assert_eq!(names, vec!["New.txt".to_owned(), "Replace.txt".to_owned()]);
    }

    #[test]
    fn a_regular_file_is_replaced_whole_and_a_removed_output_only_if_still_ours() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("page.html");
        std::fs::write(&path, "old").unwrap();
        let written = write(&path, Kind::Replace, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        // Someone else's file took the name since: left alone.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "theirs").unwrap();
        written.remove();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "theirs");
        let ours = write(&d.path().join("q"), Kind::New, "x").unwrap();
        ours.remove();
        assert!(!d.path().join("q").exists());
    }
}
