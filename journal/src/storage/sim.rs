//! An in-memory disk with a page cache, for tests and the fuzz crate.
//!
//! Why it exists: the guarantees we sell are about what survives a crash, so tests need a disk
//! whose crash behaviour they control. Each file has the bytes the running system sees and the
//! bytes that were last synced; the directory has the names the system sees and the names that
//! were last synced. [`SimStorage::power_loss`] keeps only the synced parts, plus, as the test
//! chooses, a torn or zero-filled piece of the unsynced tail at sector granularity. Faults can be
//! injected at the n-th occurrence of any operation.
//!
//! Calls run inline and never block (unless a sync latency is set), so a simulated run on a
//! paused tokio runtime is deterministic.

use super::{ReadAt, Storage, WriteFile};
use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The operations a fault can be attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// A write to a file.
    Write,
    /// An fdatasync of a file.
    Sync,
    /// An fsync of the directory (makes creates, renames and removes durable).
    SyncDir,
    /// Creating a file.
    Create,
    /// Renaming a file.
    Rename,
    /// Removing a file.
    Remove,
    /// Truncating a file.
    Truncate,
    /// Any of the above: counts every operation.
    Any,
}

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The operation fails with an I/O error (EIO) and changes nothing.
    Error,
    /// The operation fails with "no space left on device" (ENOSPC) and changes nothing.
    NoSpace,
    /// A write accepts only its first `bytes` bytes and reports success (a legal short write).
    ShortWrite {
        /// How many bytes the write accepts.
        bytes: usize,
    },
    /// A write stores its first `bytes` bytes and then fails with EIO.
    TornWrite {
        /// How many bytes are stored before the error.
        bytes: usize,
    },
    /// The power goes out just before this operation: it and every later one fail, and
    /// [`SimStorage::power_loss`] shows what survived.
    PowerLoss,
}

/// What happens to bytes that were written but not synced when the power goes out. Granules are
/// aligned to file offsets (sectors or pages). The unsynced bytes begin at the first byte that
/// differs from the synced content (past its end for an append; inside it for an overwrite of
/// a preallocated segment); bytes outside the surviving granules keep their synced content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailLoss {
    /// Only synced bytes survive.
    DropUnsynced,
    /// Unsynced data survives up to the end of the `granules`-th granule that holds any of it.
    Torn {
        /// The granule size in bytes (e.g. 512 for a sector, 4096 for a page).
        granule_bytes: u64,
        /// How many granules of unsynced data survive, counted from the one holding the first
        /// unsynced byte.
        granules: u64,
    },
    /// As `Torn`, but the surviving unsynced bytes read back as zeros (the file grew, or the
    /// blocks were written, but the data never reached the disk).
    ZeroFilled {
        /// The granule size in bytes.
        granule_bytes: u64,
        /// How many granules survive, zero-filled.
        granules: u64,
    },
}

/// Counts of what reached the simulated disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Write calls that stored at least part of their buffer.
    pub writes: u64,
    /// Bytes those writes stored.
    pub bytes_written: u64,
    /// File syncs (fdatasync).
    pub syncs: u64,
    /// Directory syncs.
    pub dir_syncs: u64,
}

#[derive(Debug, Default, Clone)]
struct Inode {
    data: Vec<u8>,
    synced: Vec<u8>,
    /// The bytes written or cut since the last sync, as a range of `data` offsets; outside it
    /// `data` equals `synced`. Kept so a sync copies what changed, not the whole file (a
    /// preallocated segment is mostly zeros written ahead).
    dirty: Option<std::ops::Range<usize>>,
}

impl Inode {
    fn synced_as(bytes: Vec<u8>) -> Inode {
        Inode {
            synced: bytes.clone(),
            data: bytes,
            dirty: None,
        }
    }

    fn touch(&mut self, range: std::ops::Range<usize>) {
        self.dirty = Some(match self.dirty.take() {
            Some(d) => d.start.min(range.start)..d.end.max(range.end),
            None => range,
        });
    }

    fn sync(&mut self) {
        let Some(dirty) = self.dirty.take() else {
            return;
        };
        self.synced.resize(self.data.len(), 0);
        let end = dirty.end.min(self.data.len());
        if dirty.start < end {
            self.synced[dirty.start..end].copy_from_slice(&self.data[dirty.start..end]);
        }
    }
}

#[derive(Debug, Default)]
struct Sim {
    next_inode: u64,
    inodes: HashMap<u64, Inode>,
    live: BTreeMap<String, u64>,
    durable: BTreeMap<String, u64>,
    locked: bool,
    op_counts: HashMap<Op, u64>,
    faults: Vec<(Op, u64, Fault)>,
    powered_off: bool,
    stats: SimStats,
    sync_latency: Option<Duration>,
}

impl Sim {
    /// Counts `op` and returns the fault that fires on it, if any.
    fn step(&mut self, op: Op) -> Result<Option<Fault>, io::Error> {
        if self.powered_off {
            return Err(io::Error::other("simulated power loss: the disk is gone"));
        }
        let mut fired = None;
        for counted in [op, Op::Any] {
            let n = self.op_counts.entry(counted).or_insert(0);
            *n += 1;
            let n = *n;
            if let Some(i) = self
                .faults
                .iter()
                .position(|&(o, nth, _)| o == counted && nth == n)
            {
                fired = Some(self.faults.remove(i).2);
            }
        }
        match fired {
            Some(Fault::PowerLoss) => {
                self.powered_off = true;
                Err(io::Error::other("simulated power loss"))
            }
            Some(Fault::Error) => Err(io::Error::other("injected I/O error (EIO)")),
            Some(Fault::NoSpace) => Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "injected: no space left on device (ENOSPC)",
            )),
            other => Ok(other),
        }
    }

    fn inode_of(&self, name: &str) -> io::Result<u64> {
        self.live
            .get(name)
            .copied()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("sim: no file {name}")))
    }
}

/// An in-memory journal directory. Clones share the same disk.
#[derive(Debug, Clone, Default)]
pub struct SimStorage {
    sim: Arc<Mutex<Sim>>,
}

fn lock(sim: &Mutex<Sim>) -> MutexGuard<'_, Sim> {
    // A panic while holding this lock leaves plain data behind; keep using it.
    sim.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl SimStorage {
    /// An empty simulated disk with no faults injected.
    pub fn new() -> SimStorage {
        SimStorage::default()
    }

    /// Makes the `nth` (1-based) occurrence of `op`, counted from now on, fail as `fault`.
    pub fn inject(&self, op: Op, nth: u64, fault: Fault) {
        let mut sim = lock(&self.sim);
        let already = sim.op_counts.get(&op).copied().unwrap_or(0);
        sim.faults.push((op, already + nth, fault));
    }

    /// Makes every sync take `latency` (the thread sleeps), so that concurrent callers overlap as
    /// they would on a real disk. Such a storage reports that it blocks.
    pub fn set_sync_latency(&self, latency: Duration) {
        lock(&self.sim).sync_latency = Some(latency);
    }

    /// Counts of writes and syncs so far.
    pub fn stats(&self) -> SimStats {
        lock(&self.sim).stats
    }

    /// How many times `op` has run (or been attempted) so far.
    pub fn op_count(&self, op: Op) -> u64 {
        lock(&self.sim).op_counts.get(&op).copied().unwrap_or(0)
    }

    /// Whether a [`Fault::PowerLoss`] has fired.
    pub fn is_powered_off(&self) -> bool {
        lock(&self.sim).powered_off
    }

    /// The disk as a reboot after a power loss now would find it: synced directory entries with
    /// their synced bytes, and unsynced tails treated as `tail` says. Unlocked, no faults.
    pub fn power_loss(&self, tail: TailLoss) -> SimStorage {
        let sim = lock(&self.sim);
        let mut out = Sim::default();
        for (name, id) in &sim.durable {
            let inode = &sim.inodes[id];
            let data = surviving_bytes(inode, tail);
            out.inodes.insert(*id, Inode::synced_as(data));
            out.live.insert(name.clone(), *id);
        }
        out.durable = out.live.clone();
        out.next_inode = sim.next_inode;
        SimStorage {
            sim: Arc::new(Mutex::new(out)),
        }
    }

    /// The disk as another process would find it after this one was killed (SIGKILL): everything
    /// written survives, synced or not. Unlocked, no faults.
    pub fn process_crash(&self) -> SimStorage {
        let sim = lock(&self.sim);
        let mut out = Sim {
            next_inode: sim.next_inode,
            live: sim.live.clone(),
            ..Sim::default()
        };
        for id in sim.live.values() {
            let data = sim.inodes[id].data.clone();
            out.inodes.insert(*id, Inode::synced_as(data));
        }
        out.durable = out.live.clone();
        SimStorage {
            sim: Arc::new(Mutex::new(out)),
        }
    }

    /// The names of all files, sorted.
    pub fn file_names(&self) -> Vec<String> {
        lock(&self.sim).live.keys().cloned().collect()
    }

    /// A file's current bytes.
    pub fn read_file(&self, name: &str) -> Option<Vec<u8>> {
        let sim = lock(&self.sim);
        sim.live.get(name).map(|id| sim.inodes[id].data.clone())
    }

    /// Replaces (or creates) a file with `bytes`, durably, bypassing faults: for tests that damage
    /// a journal on purpose.
    pub fn put_file(&self, name: &str, bytes: Vec<u8>) {
        let mut sim = lock(&self.sim);
        let id = match sim.live.get(name) {
            Some(id) => *id,
            None => {
                sim.next_inode += 1;
                let id = sim.next_inode;
                sim.live.insert(name.to_owned(), id);
                id
            }
        };
        sim.durable.insert(name.to_owned(), id);
        sim.inodes.insert(id, Inode::synced_as(bytes));
    }

    /// Removes a file durably, bypassing faults.
    pub fn delete_file(&self, name: &str) {
        let mut sim = lock(&self.sim);
        sim.live.remove(name);
        sim.durable.remove(name);
    }
}

fn surviving_bytes(inode: &Inode, tail: TailLoss) -> Vec<u8> {
    let (data, synced) = (&inode.data, &inode.synced);
    // A cut not yet synced reverts to the synced content; so does everything when only synced
    // bytes survive.
    if data.len() < synced.len() {
        return synced.clone();
    }
    let (granule, granules, zero) = match tail {
        TailLoss::DropUnsynced => return synced.clone(),
        TailLoss::Torn {
            granule_bytes,
            granules,
        } => (granule_bytes, granules, false),
        TailLoss::ZeroFilled {
            granule_bytes,
            granules,
        } => (granule_bytes, granules, true),
    };
    // The unsynced bytes begin at the first byte written since the sync: an append past the
    // synced end, or an overwrite inside it (a preallocated segment's zeros).
    let Some(first_unsynced) = inode.dirty.as_ref().map(|d| d.start) else {
        return synced.clone();
    };
    let granule = granule.max(1);
    let first_granule = first_unsynced as u64 / granule * granule;
    let end = ((first_granule + granules * granule).min(data.len() as u64)) as usize;
    let mut out = synced.clone();
    if end > out.len() {
        out.resize(end, 0);
    }
    for (i, byte) in out.iter_mut().enumerate().take(end).skip(first_unsynced) {
        *byte = if zero { 0 } else { data[i] };
    }
    out
}

struct SimRead {
    sim: Arc<Mutex<Sim>>,
    inode: u64,
}

impl ReadAt for SimRead {
    fn len_bytes(&self) -> io::Result<u64> {
        Ok(lock(&self.sim).inodes[&self.inode].data.len() as u64)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let sim = lock(&self.sim);
        let data = &sim.inodes[&self.inode].data;
        let start = (offset as usize).min(data.len());
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    }
}

struct SimWrite {
    sim: Arc<Mutex<Sim>>,
    inode: u64,
}

impl WriteFile for SimWrite {
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<usize> {
        let mut sim = lock(&self.sim);
        let (take, fail) = match sim.step(Op::Write)? {
            Some(Fault::ShortWrite { bytes }) => (bytes.min(buf.len()), false),
            Some(Fault::TornWrite { bytes }) => (bytes.min(buf.len()), true),
            _ => (buf.len(), false),
        };
        sim.stats.writes += 1;
        sim.stats.bytes_written += take as u64;
        // Cannot fail: inodes are never removed (unlinking drops the name only).
        #[allow(clippy::expect_used)]
        let inode = sim
            .inodes
            .get_mut(&self.inode)
            .expect("handles outlive no inode");
        let (start, end) = (offset as usize, offset as usize + take);
        if inode.data.len() < end {
            // Past the end: the gap reads as zeros, and counts as written.
            inode.touch(inode.data.len().min(start)..start);
            inode.data.resize(end, 0);
        }
        inode.data[start..end].copy_from_slice(&buf[..take]);
        inode.touch(start..end);
        if fail {
            return Err(io::Error::other("injected torn write (EIO)"));
        }
        Ok(take)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        let latency = {
            let mut sim = lock(&self.sim);
            sim.step(Op::Sync)?;
            sim.stats.syncs += 1;
            // Cannot fail: inodes are never removed (unlinking drops the name only).
            #[allow(clippy::expect_used)]
            let inode = sim
                .inodes
                .get_mut(&self.inode)
                .expect("handles outlive no inode");
            inode.sync();
            sim.sync_latency
        };
        if let Some(latency) = latency {
            std::thread::sleep(latency);
        }
        Ok(())
    }

    fn truncate(&mut self, len_bytes: u64) -> io::Result<()> {
        let mut sim = lock(&self.sim);
        sim.step(Op::Truncate)?;
        // Cannot fail: inodes are never removed (unlinking drops the name only).
        #[allow(clippy::expect_used)]
        let inode = sim
            .inodes
            .get_mut(&self.inode)
            .expect("handles outlive no inode");
        let (old, new) = (inode.data.len(), len_bytes as usize);
        inode.data.resize(new, 0);
        inode.touch(old.min(new)..old.max(new));
        Ok(())
    }

    fn len_bytes(&self) -> io::Result<u64> {
        Ok(lock(&self.sim).inodes[&self.inode].data.len() as u64)
    }
}

struct SimLockGuard(Arc<Mutex<Sim>>);

impl Drop for SimLockGuard {
    fn drop(&mut self) {
        lock(&self.0).locked = false;
    }
}

impl Storage for SimStorage {
    fn location(&self) -> String {
        "sim:".to_owned()
    }

    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.file_names())
    }

    fn open_read(&self, name: &str) -> io::Result<Box<dyn ReadAt>> {
        let inode = lock(&self.sim).inode_of(name)?;
        Ok(Box::new(SimRead {
            sim: self.sim.clone(),
            inode,
        }))
    }

    fn create_new(&self, name: &str) -> io::Result<Box<dyn WriteFile>> {
        let mut sim = lock(&self.sim);
        sim.step(Op::Create)?;
        if sim.live.contains_key(name) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("sim: {name} exists"),
            ));
        }
        sim.next_inode += 1;
        let inode = sim.next_inode;
        sim.inodes.insert(inode, Inode::default());
        sim.live.insert(name.to_owned(), inode);
        Ok(Box::new(SimWrite {
            sim: self.sim.clone(),
            inode,
        }))
    }

    fn open_write(&self, name: &str) -> io::Result<Box<dyn WriteFile>> {
        let inode = lock(&self.sim).inode_of(name)?;
        Ok(Box::new(SimWrite {
            sim: self.sim.clone(),
            inode,
        }))
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut sim = lock(&self.sim);
        sim.step(Op::Rename)?;
        let inode = sim.inode_of(from)?;
        sim.live.remove(from);
        sim.live.insert(to.to_owned(), inode);
        Ok(())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let mut sim = lock(&self.sim);
        sim.step(Op::Remove)?;
        sim.inode_of(name)?;
        sim.live.remove(name);
        Ok(())
    }

    fn sync_dir(&self) -> io::Result<()> {
        let mut sim = lock(&self.sim);
        sim.step(Op::SyncDir)?;
        sim.stats.dir_syncs += 1;
        sim.durable = sim.live.clone();
        Ok(())
    }

    fn try_lock(&self) -> io::Result<Option<Box<dyn Any + Send + Sync>>> {
        let mut sim = lock(&self.sim);
        if sim.locked {
            return Ok(None);
        }
        sim.locked = true;
        Ok(Some(Box::new(SimLockGuard(self.sim.clone()))))
    }

    fn writer_lock_held(&self) -> io::Result<bool> {
        Ok(lock(&self.sim).locked)
    }

    fn blocks(&self) -> bool {
        lock(&self.sim).sync_latency.is_some()
    }
}
