//! A simulated disk that can lose power: an in-memory filesystem that
//! remembers what was written and what was made durable, after the
//! crash-consistency harness of redb and the storage simulator of
//! TigerBeetle.
//!
//! What counts as durable is what POSIX promises and no more:
//! - a file's bytes, by `sync_data` of that file;
//! - a name created, renamed or unlinked in a directory (directories
//!   included), by `sync_dir` of that directory.
//!
//! [`SimVfs::crash`] cuts the power: every handle of the old boot fails
//! from then on, and the disk keeps its durable state plus, chosen by the
//! seed, none, some or all of what was not: for each directory, each
//! pending name change in order; for each file, each 512-byte sector that
//! differs from its durable contents (a torn write), and a length anywhere
//! between the durable and the written one. The same seed after the same
//! operations gives the same disk.
//!
//! Faults: a capacity (writes past it are short, then fail with ENOSPC),
//! failing fsyncs, and O_DIRECT's alignment rules.

mod handles;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// The unit a write can be torn at.
pub const SECTOR_BYTES: usize = 512;
const DIRECT_ALIGN: u64 = 4096;
const ROOT: u64 = 1;

/// How much of what was not durable a crash keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashKeep {
    /// Only the durable state.
    Nothing,
    /// Each pending change and each differing sector by a coin toss.
    Some,
    /// Everything written, as if the page cache had been flushed.
    Everything,
}

impl CrashKeep {
    /// The mode a seed picks: a quarter each of nothing and everything,
    /// half some.
    pub fn from_seed(seed: u64) -> CrashKeep {
        match mix(seed) % 4 {
            0 => CrashKeep::Nothing,
            1 => CrashKeep::Everything,
            _ => CrashKeep::Some,
        }
    }
}

#[derive(Clone, Debug)]
enum DirOp {
    Link(OsString, u64),
    Unlink(OsString),
    Rename(OsString, OsString, u64),
}

#[derive(Default)]
struct DirNode {
    live: BTreeMap<OsString, u64>,
    durable: BTreeMap<OsString, u64>,
    pending: Vec<DirOp>,
}

#[derive(Default)]
struct FileNode {
    live: Vec<u8>,
    durable: Vec<u8>,
}

enum Node {
    File(FileNode),
    Dir(DirNode),
}

#[derive(Default)]
struct Disk {
    boot: u64,
    nodes: HashMap<u64, Node>,
    /// Live links and open handles per node: a node is freed when both end.
    links: HashMap<u64, u32>,
    handles: HashMap<u64, u32>,
    next_ino: u64,
    capacity_bytes: Option<u64>,
    sync_errno: Option<i32>,
    locks: HashSet<PathBuf>,
    /// An armed power cut: (changes left before it, seed).
    armed: Option<(u64, u64)>,
}

/// A [`Vfs`] over a simulated disk. Clones share the disk.
#[derive(Clone)]
pub struct SimVfs {
    disk: Arc<Mutex<Disk>>,
    boot: u64,
}

impl Default for SimVfs {
    fn default() -> Self {
        SimVfs::new()
    }
}

fn err(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

/// SplitMix64's finalizer: the crash's only source of randomness.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

struct Coin {
    state: u64,
    keep: CrashKeep,
}

impl Coin {
    fn new(seed: u64, keep: CrashKeep) -> Coin {
        Coin {
            state: mix(seed ^ 0xC4A5_0000),
            keep,
        }
    }

    fn toss(&mut self) -> bool {
        match self.keep {
            CrashKeep::Nothing => false,
            CrashKeep::Everything => true,
            CrashKeep::Some => {
                self.state = mix(self.state);
                self.state & 1 == 1
            }
        }
    }
    fn below(&mut self, n: u64) -> u64 {
        self.state = mix(self.state);
        self.state % n.max(1)
    }
}

impl Disk {
    fn check(&self, boot: u64) -> io::Result<()> {
        if boot == self.boot {
            Ok(())
        } else {
            // The power went out under this handle.
            Err(err(libc::EIO))
        }
    }

    /// Checks the handle's boot and counts one change towards an armed
    /// power cut; the change that reaches it is not made.
    fn change(&mut self, boot: u64) -> io::Result<()> {
        self.check(boot)?;
        match self.armed {
            Some((0, seed)) => {
                self.armed = None;
                self.crash(&mut Coin::new(seed, CrashKeep::from_seed(seed)));
                Err(err(libc::EIO))
            }
            Some((n, seed)) => {
                self.armed = Some((n - 1, seed));
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn dir(&mut self, ino: u64) -> io::Result<&mut DirNode> {
        match self.nodes.get_mut(&ino) {
            Some(Node::Dir(d)) => Ok(d),
            _ => Err(err(libc::ENOTDIR)),
        }
    }

    fn file(&mut self, ino: u64) -> &mut FileNode {
        match self.nodes.get_mut(&ino) {
            Some(Node::File(f)) => f,
            _ => panic!("simulated inode {ino} is not a file"),
        }
    }

    /// The directory holding `path` and the last name of `path`.
    fn parent_of(&mut self, path: &Path) -> io::Result<(u64, OsString)> {
        let name = path
            .file_name()
            .ok_or_else(|| err(libc::EINVAL))?
            .to_os_string();
        let parent = self.lookup(path.parent().unwrap_or(Path::new("/")))?;
        self.dir(parent)?;
        Ok((parent, name))
    }

    fn lookup(&mut self, path: &Path) -> io::Result<u64> {
        let mut ino = ROOT;
        for c in path.components() {
            match c {
                Component::RootDir | Component::CurDir => {}
                Component::Normal(name) => {
                    ino = *self
                        .dir(ino)?
                        .live
                        .get(name)
                        .ok_or_else(|| err(libc::ENOENT))?;
                }
                _ => return Err(err(libc::EINVAL)),
            }
        }
        Ok(ino)
    }

    fn link(&mut self, dir: u64, name: OsString, ino: u64) -> io::Result<()> {
        let d = self.dir(dir)?;
        let old = d.live.insert(name.clone(), ino);
        d.pending.push(DirOp::Link(name, ino));
        *self.links.entry(ino).or_default() += 1;
        if let Some(old) = old {
            self.unref_link(old);
        }
        Ok(())
    }

    fn unref_link(&mut self, ino: u64) {
        let n = self.links.entry(ino).or_default();
        *n = n.saturating_sub(1);
        self.free_if_unused(ino);
    }

    /// True while a live name or an open handle holds the node: then it
    /// takes space.
    fn in_use(&self, ino: u64) -> bool {
        self.links.get(&ino).is_some_and(|&n| n > 0)
            || self.handles.get(&ino).is_some_and(|&n| n > 0)
    }

    fn free_if_unused(&mut self, ino: u64) {
        if !self.in_use(ino) {
            self.links.remove(&ino);
            self.handles.remove(&ino);
        }
    }

    /// Forgets nodes that nothing holds and no durable name reaches (a
    /// crash could not bring them back).
    fn collect_garbage(&mut self) {
        let durable: HashSet<u64> = self
            .nodes
            .values()
            .filter_map(|n| match n {
                Node::Dir(d) => Some(d.durable.values().copied().chain(
                    d.pending.iter().filter_map(|op| match op {
                        DirOp::Link(_, ino) | DirOp::Rename(_, _, ino) => Some(*ino),
                        DirOp::Unlink(_) => None,
                    }),
                )),
                Node::File(_) => None,
            })
            .flatten()
            .collect();
        let keep: HashSet<u64> = self
            .nodes
            .keys()
            .copied()
            .filter(|&ino| ino == ROOT || self.in_use(ino) || durable.contains(&ino))
            .collect();
        self.nodes.retain(|ino, _| keep.contains(ino));
    }

    fn used_bytes(&self) -> u64 {
        self.nodes
            .iter()
            .filter(|(&ino, _)| self.in_use(ino))
            .map(|(_, n)| match n {
                Node::File(f) => f.live.len() as u64,
                Node::Dir(_) => 0,
            })
            .sum()
    }

    fn new_node(&mut self, node: Node) -> u64 {
        self.next_ino += 1;
        let ino = self.next_ino;
        self.nodes.insert(ino, node);
        ino
    }

    /// Cuts the power: keeps the durable state and what `coin` picks of the
    /// rest, then forgets every node no name reaches.
    fn crash(&mut self, coin: &mut Coin) {
        let mut dirs: Vec<u64> = self
            .nodes
            .iter()
            .filter(|(_, n)| matches!(n, Node::Dir(_)))
            .map(|(&ino, _)| ino)
            .collect();
        dirs.sort_unstable();
        for ino in dirs {
            let Some(Node::Dir(d)) = self.nodes.get_mut(&ino) else {
                continue;
            };
            let mut kept = d.durable.clone();
            for op in std::mem::take(&mut d.pending) {
                if !coin.toss() {
                    continue;
                }
                match op {
                    DirOp::Link(name, ino) => {
                        kept.insert(name, ino);
                    }
                    DirOp::Unlink(name) => {
                        kept.remove(&name);
                    }
                    DirOp::Rename(from, to, ino) => {
                        if kept.get(&from) == Some(&ino) {
                            kept.remove(&from);
                            kept.insert(to, ino);
                        }
                    }
                }
            }
            d.live = kept.clone();
            d.durable = kept;
        }
        let exists: HashSet<u64> = self.nodes.keys().copied().collect();
        for n in self.nodes.values_mut() {
            if let Node::Dir(d) = n {
                d.live.retain(|_, ino| exists.contains(ino));
                d.durable.retain(|_, ino| exists.contains(ino));
            }
        }
        let mut files: Vec<u64> = self.nodes.keys().copied().collect();
        files.sort_unstable();
        for ino in files {
            if let Some(Node::File(f)) = self.nodes.get_mut(&ino) {
                let kept = survive(&f.durable, &f.live, coin);
                f.live = kept.clone();
                f.durable = kept;
            }
        }
        // Whatever no durable name reaches is gone.
        let mut reached = HashSet::from([ROOT]);
        let mut stack = vec![ROOT];
        self.links.clear();
        while let Some(ino) = stack.pop() {
            if let Some(Node::Dir(d)) = self.nodes.get(&ino) {
                for &child in d.live.values() {
                    *self.links.entry(child).or_default() += 1;
                    if reached.insert(child) {
                        stack.push(child);
                    }
                }
            }
        }
        self.nodes.retain(|ino, _| reached.contains(ino));
        self.handles.clear();
        self.locks.clear();
        self.boot += 1;
    }
}

/// A file's contents after a crash: the durable bytes, and each sector
/// that differs taken from what was written when the coin says so; the
/// length anywhere from the durable to the written one. Sectors past the
/// durable end that are not kept read as zeros, as on a filesystem that
/// grew the file before its data reached the disk.
fn survive(durable: &[u8], live: &[u8], coin: &mut Coin) -> Vec<u8> {
    if durable == live {
        return durable.to_vec();
    }
    let len = match coin.keep {
        CrashKeep::Nothing => durable.len(),
        CrashKeep::Everything => live.len(),
        CrashKeep::Some => {
            let (lo, hi) = (durable.len().min(live.len()), durable.len().max(live.len()));
            match coin.below(3) {
                0 => durable.len(),
                1 => live.len(),
                _ => lo + coin.below((hi - lo) as u64 + 1) as usize,
            }
        }
    };
    let mut out = vec![0u8; len];
    let mut at = 0;
    while at < len {
        let end = (at + SECTOR_BYTES).min(len);
        let old = durable.get(at..end.min(durable.len())).unwrap_or(&[]);
        let new = live.get(at..end.min(live.len())).unwrap_or(&[]);
        let take_new = if old == new { false } else { coin.toss() };
        let src = if take_new { new } else { old };
        out[at..at + src.len()].copy_from_slice(src);
        at = end;
    }
    out
}

impl SimVfs {
    /// An empty disk with only `/`, which is durable.
    pub fn new() -> SimVfs {
        let mut disk = Disk {
            next_ino: ROOT,
            ..Disk::default()
        };
        disk.nodes.insert(ROOT, Node::Dir(DirNode::default()));
        disk.links.insert(ROOT, 1);
        SimVfs {
            disk: Arc::new(Mutex::new(disk)),
            boot: 0,
        }
    }

    fn disk(&self) -> MutexGuard<'_, Disk> {
        self.disk.lock().expect("simulated disk")
    }

    /// Cuts the power. Every file and lock of this boot is dead from now
    /// on (their calls fail with EIO); the returned `SimVfs` is the disk as
    /// the next boot finds it. `seed` picks what survives.
    pub fn crash(&self, seed: u64) -> SimVfs {
        self.crash_keeping(seed, CrashKeep::from_seed(seed))
    }

    /// [`SimVfs::crash`] with the amount kept chosen by the caller.
    pub fn crash_keeping(&self, seed: u64, keep: CrashKeep) -> SimVfs {
        let mut disk = self.disk();
        disk.crash(&mut Coin::new(seed, keep));
        SimVfs {
            disk: self.disk.clone(),
            boot: disk.boot,
        }
    }

    /// Kills the process but not the machine: every file and lock of this
    /// boot is dead, and the disk keeps everything written, durable or not
    /// (the page cache survives). Returns the disk as the restarted process
    /// sees it.
    pub fn kill_process(&self) -> SimVfs {
        let mut disk = self.disk();
        disk.boot += 1;
        disk.handles.clear();
        disk.locks.clear();
        SimVfs {
            disk: self.disk.clone(),
            boot: disk.boot,
        }
    }

    /// Arms a power cut: `after_changes` more changes go through (a write,
    /// fsync, truncation or name change, by any handle); the next one fails
    /// with EIO and is not made, and the disk crashes as with
    /// [`SimVfs::crash`]`(seed)`. [`SimVfs::next_boot`] then gives the disk.
    pub fn arm_crash(&self, after_changes: u64, seed: u64) {
        self.disk().armed = Some((after_changes, seed));
    }

    /// Disarms a power cut armed with [`SimVfs::arm_crash`].
    pub fn disarm(&self) {
        self.disk().armed = None;
    }

    /// True when the power went out since this boot began.
    pub fn crashed(&self) -> bool {
        self.disk().boot != self.boot
    }

    /// The disk as the newest boot sees it (itself when no crash happened).
    pub fn next_boot(&self) -> SimVfs {
        SimVfs {
            disk: self.disk.clone(),
            boot: self.disk().boot,
        }
    }

    /// Writes past `bytes` in all (file lengths summed) are short, then
    /// fail with ENOSPC; `None` lifts the limit.
    pub fn set_capacity(&self, bytes: Option<u64>) {
        self.disk().capacity_bytes = bytes;
    }

    /// Bytes held by files, linked or still open.
    pub fn used_bytes(&self) -> u64 {
        self.disk().used_bytes()
    }

    /// While `Some`, every fsync of a file or directory fails with that
    /// errno and makes nothing durable.
    pub fn fail_syncs(&self, errno: Option<i32>) {
        self.disk().sync_errno = errno;
    }

    /// The bytes of a file as written (not necessarily durable).
    pub fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut d = self.disk();
        let ino = d.lookup(path)?;
        match d.nodes.get(&ino) {
            Some(Node::File(f)) => Ok(f.live.clone()),
            _ => Err(err(libc::EISDIR)),
        }
    }
}

#[cfg(test)]
mod tests;
