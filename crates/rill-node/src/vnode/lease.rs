//! Each vnode's counter lease, in `<data>/meta/leases` (docs/format.md,
//! "Counter leases").
//!
//! A vnode writes as `vnode id | counter`, where the counter numbers the
//! key epochs it starts (see `Vnode::actor_for`). A counter value must
//! never be issued twice, or a replica could take a new write for one it
//! has already seen. So, as Riak's vnodes do, a vnode leases counters ahead
//! of use: the file records, per vnode, a value no issued counter reaches;
//! it is raised (and made durable) before a counter past it is issued. A
//! start continues from the recorded value, so the vnode id stays the same
//! across clean and unclean restarts; a clean shutdown records the exact
//! next value, so restarts do not use up the lease.
//!
//! The file is written in place, never grown, so a start or a lease at a
//! full disk needs no new space: two slots, written in turn, each with a
//! sequence number and a CRC; the valid slot with the higher sequence is
//! the current one, so a write torn by a power cut leaves the other.

use bitcask::vfs::{OpenMode, StdVfs, VFile, Vfs};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const MAGIC: &[u8; 8] = b"RILLLEAS";
/// The version this build writes; it reads 1 (byte 9 only `clean`) and 2.
const VERSION: u8 = 2;
const FLAG_CLEAN: u8 = 1;
const FLAG_O_SYNC: u8 = 2;
const FLAG_UNBUFFERED: u8 = 4;
const HEADER: usize = 40;
/// Counters leased ahead of use (Riak's `counter_lease_size` default).
pub const LEASE_SIZE: u64 = 10_000;

/// The content of one slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseTable {
    pub seq: u64,
    /// Written by a clean shutdown: every store was synced and closed.
    pub clean: bool,
    /// The run that wrote it synced every write before acknowledging it
    /// (`o_sync`): a crash of the machine lost nothing it had made.
    pub o_sync: bool,
    /// The run that wrote it had no write buffer: every acknowledged write
    /// was in the kernel, so a crash of the process alone lost nothing.
    pub unbuffered: bool,
    /// The kernel's boot id when written (zeros when unknown).
    pub boot_id: [u8; 16],
    /// Per vnode: no counter at or above this was issued.
    pub ends: Vec<u64>,
    /// Per vnode: key epochs below this may have lost writes (a run that
    /// could lose acknowledged writes ended without a clean stop after
    /// they were issued), so a key whose newest epoch of the vnode is
    /// below it starts a new epoch. Version 1 slots have none (zeros).
    pub floors: Vec<u64>,
}

impl LeaseTable {
    /// A first table for `n` vnodes: every counter from `start`, no
    /// floors, not written by a clean stop unless `clean`.
    pub fn fresh(n: usize, start: u64, clean: bool) -> LeaseTable {
        LeaseTable {
            seq: 1,
            clean,
            o_sync: false,
            unbuffered: false,
            boot_id: [0; 16],
            ends: vec![start; n],
            floors: vec![0; n],
        }
    }
}

/// Bytes of one slot for `n` vnodes: a whole number of 4 KiB pages
/// (ends and floors).
pub fn slot_bytes(n: usize) -> usize {
    (HEADER + 16 * n + 4).div_ceil(4096) * 4096
}

/// Version 1 slots had ends only (the same size up to 253 vnodes).
fn slot_bytes_v1(n: usize) -> usize {
    (HEADER + 8 * n + 4).div_ceil(4096) * 4096
}

/// Encodes a slot (padded with zeros to [`slot_bytes`]).
pub fn encode_slot(t: &LeaseTable) -> Vec<u8> {
    let flag = |on: bool, bit: u8| if on { bit } else { 0 };
    let flags = flag(t.clean, FLAG_CLEAN)
        | flag(t.o_sync, FLAG_O_SYNC)
        | flag(t.unbuffered, FLAG_UNBUFFERED);
    encode_slot_as(t, VERSION, flags)
}

/// A slot of `version` with the flags byte given (version 1 has no
/// floors and its own slot size: the tests write old files with it).
fn encode_slot_as(t: &LeaseTable, version: u8, flags: u8) -> Vec<u8> {
    let n = t.ends.len();
    let size = if version == 1 {
        slot_bytes_v1(n)
    } else {
        slot_bytes(n)
    };
    let mut b = Vec::with_capacity(size);
    b.extend_from_slice(MAGIC);
    b.push(version);
    b.push(flags);
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&(n as u32).to_be_bytes());
    b.extend_from_slice(&t.seq.to_be_bytes());
    b.extend_from_slice(&t.boot_id);
    for e in &t.ends {
        b.extend_from_slice(&e.to_be_bytes());
    }
    if version != 1 {
        for i in 0..n {
            let floor = t.floors.get(i).copied().unwrap_or(0);
            b.extend_from_slice(&floor.to_be_bytes());
        }
    }
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_be_bytes());
    b.resize(size, 0);
    b
}

/// Decodes a slot; `None` when it is not a whole, valid slot (never
/// written, torn, damaged).
pub fn decode_slot(b: &[u8]) -> Option<LeaseTable> {
    if b.len() < HEADER + 4 || &b[..8] != MAGIC {
        return None;
    }
    // Version 1 had only `clean`; it did not record how its run wrote, so
    // it reads as neither o_sync nor unbuffered.
    let known = match b[8] {
        1 => FLAG_CLEAN,
        2 => FLAG_CLEAN | FLAG_O_SYNC | FLAG_UNBUFFERED,
        _ => return None,
    };
    let flags = b[9];
    if flags & !known != 0 {
        return None;
    }
    let n = u32::from_be_bytes(b[12..16].try_into().ok()?) as usize;
    let per_vnode = if b[8] == 1 { 8 } else { 16 };
    let end = HEADER.checked_add(n.checked_mul(per_vnode)?)?;
    let stored = u32::from_be_bytes(b.get(end..end + 4)?.try_into().ok()?);
    if crc32fast::hash(&b[..end]) != stored {
        return None;
    }
    let words: Vec<u64> = b[HEADER..end]
        .chunks_exact(8)
        .map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes")))
        .collect();
    Some(LeaseTable {
        seq: u64::from_be_bytes(b[16..24].try_into().ok()?),
        clean: flags & FLAG_CLEAN != 0,
        o_sync: flags & FLAG_O_SYNC != 0,
        unbuffered: flags & FLAG_UNBUFFERED != 0,
        boot_id: b[24..40].try_into().ok()?,
        ends: words[..n].to_vec(),
        floors: if per_vnode == 8 {
            vec![0; n]
        } else {
            words[n..].to_vec()
        },
    })
}

/// The current table of a file's bytes: the valid slot with the higher
/// sequence number.
pub fn decode_file(b: &[u8], n: usize) -> Option<LeaseTable> {
    // A version 1 file's slots may be smaller: both layouts are read
    // (once, where they are the same size).
    let mut sizes = vec![slot_bytes(n), slot_bytes_v1(n)];
    sizes.dedup();
    let mut slots = Vec::with_capacity(4);
    for s in sizes {
        slots.push(b.get(..s).and_then(decode_slot));
        slots.push(b.get(s..2 * s).and_then(decode_slot));
    }
    slots
        .into_iter()
        .flatten()
        .filter(|t| t.ends.len() == n)
        .max_by_key(|t| t.seq)
}

/// The kernel's boot id, zeros when it cannot be read. Equal boot ids
/// mean the machine did not restart in between, so the page cache kept
/// whatever the last run handed to the kernel.
pub fn boot_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        let hex: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        for (i, pair) in hex.chunks_exact(2).take(16).enumerate() {
            let h = std::str::from_utf8(pair).ok();
            id[i] = h.and_then(|h| u8::from_str_radix(h, 16).ok()).unwrap_or(0);
        }
    }
    id
}

/// The open lease file.
pub struct LeaseFile {
    path: PathBuf,
    inner: Mutex<(Arc<dyn VFile>, LeaseTable)>,
}

impl LeaseFile {
    /// Opens the file of `n` vnodes. `Ok(None)`: there is none (or none
    /// that can be read), so the leases are lost.
    pub fn open(dir: &Path, n: usize) -> std::io::Result<Option<(LeaseFile, LeaseTable)>> {
        LeaseFile::open_on(&StdVfs, dir, n)
    }

    /// [`LeaseFile::open`] on the filesystem `vfs` (the simulation's
    /// disk, which loses power).
    pub fn open_on(
        vfs: &dyn Vfs,
        dir: &Path,
        n: usize,
    ) -> std::io::Result<Option<(LeaseFile, LeaseTable)>> {
        let path = dir.join("leases");
        let f = match vfs.open(&path, OpenMode::ReadWrite) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let bytes = f.read_all()?;
        let Some(t) = decode_file(&bytes, n) else {
            return Ok(None);
        };
        let file = LeaseFile {
            path,
            inner: Mutex::new((f, t.clone())),
        };
        Ok(Some((file, t)))
    }

    /// Creates (or replaces) the file with `t` in both slots, durably.
    pub fn create(dir: &Path, t: &LeaseTable) -> std::io::Result<LeaseFile> {
        LeaseFile::create_on(&StdVfs, dir, t)
    }

    /// [`LeaseFile::create`] on the filesystem `vfs`.
    pub fn create_on(vfs: &dyn Vfs, dir: &Path, t: &LeaseTable) -> std::io::Result<LeaseFile> {
        let path = dir.join("leases");
        let tmp = dir.join("leases.tmp");
        match vfs.remove_file(&tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        {
            let f = vfs.open(&tmp, OpenMode::CreateNew)?;
            let slot = encode_slot(t);
            let mut second = t.clone();
            second.seq = t.seq.wrapping_sub(1);
            f.write_all_at(&slot, 0)?;
            f.write_all_at(&encode_slot(&second), slot.len() as u64)?;
            f.sync_data()?;
        }
        vfs.rename(&tmp, &path)?;
        vfs.sync_dir(dir)?;
        let f = vfs.open(&path, OpenMode::ReadWrite)?;
        Ok(LeaseFile {
            path,
            inner: Mutex::new((f, t.clone())),
        })
    }

    /// Writes the next table, made from the current one by `change`,
    /// into the older slot, durably. Needs no new space.
    pub fn write(&self, change: impl FnOnce(&mut LeaseTable)) -> std::io::Result<LeaseTable> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = g.1.clone();
        change(&mut next);
        next.seq = g.1.seq.wrapping_add(1);
        let bytes = encode_slot(&next);
        let at = (next.seq % 2) * bytes.len() as u64;
        g.0.write_all_at(&bytes, at)?;
        g.0.sync_data()?;
        g.1 = next.clone();
        Ok(next)
    }

    /// Makes sure no counter below `needed` of vnode `i` is outside the
    /// lease, raising it by [`LEASE_SIZE`] past `needed` when it is.
    /// Returns the lease end in force.
    pub fn cover(&self, i: usize, needed: u64) -> std::io::Result<u64> {
        {
            let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            if g.1.ends[i] >= needed {
                return Ok(g.1.ends[i]);
            }
        }
        let t = self.write(|t| {
            if t.ends[i] < needed {
                t.ends[i] = needed.saturating_add(LEASE_SIZE);
            }
            t.clean = false;
        })?;
        Ok(t.ends[i])
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(seq: u64, ends: Vec<u64>) -> LeaseTable {
        LeaseTable {
            seq,
            clean: seq.is_multiple_of(3),
            o_sync: seq.is_multiple_of(2),
            unbuffered: seq.is_multiple_of(5),
            boot_id: [7; 16],
            floors: ends.iter().map(|e| e / 2).collect(),
            ends,
        }
    }

    #[test]
    fn slots_round_trip_and_damage_is_refused() {
        for n in [0, 1, 64, 500, 600, 2048] {
            let t = table(9, (0..n as u64).map(|i| i * 1000 + 3).collect());
            let b = encode_slot(&t);
            assert_eq!(b.len(), slot_bytes(n));
            assert_eq!(b.len() % 4096, 0);
            assert_eq!(decode_slot(&b), Some(t));
            for at in [0, 8, 9, 12, 20, 30, HEADER + 8 * n] {
                let mut bad = b.clone();
                bad[at] ^= 0x10;
                assert_eq!(decode_slot(&bad), None, "n {n}, byte {at} flipped");
            }
            assert_eq!(decode_slot(&b[..HEADER + 8 * n]), None, "no CRC");
        }
    }

    /// A slot as version 1 wrote it: ends only, `clean` the only flag.
    fn encode_v1(t: &LeaseTable, flags: u8) -> Vec<u8> {
        encode_slot_as(t, 1, flags)
    }

    #[test]
    fn version_1_slots_read_as_neither_o_sync_nor_unbuffered_and_without_floors() {
        for n in [2, 64, 600] {
            let mut t = table(3, (0..n as u64).map(|i| 5 + i).collect());
            t.o_sync = false;
            t.unbuffered = false;
            t.clean = true;
            t.floors = vec![0; n];
            let old = encode_v1(&t, FLAG_CLEAN);
            assert_eq!(decode_slot(&old), Some(t.clone()));
            // Version 1 knew no other flag: a set one means damage.
            let mut bad = encode_v1(&t, FLAG_CLEAN | FLAG_O_SYNC);
            assert_eq!(decode_slot(&bad), None);
            bad[9] = FLAG_CLEAN;
            assert_eq!(decode_slot(&bad), None, "the CRC covers the flags");
            // A version 1 file, whole, and after a version 2 write into
            // its first slot (what the first start after an upgrade does).
            let mut newer = t.clone();
            newer.seq = 4;
            newer.floors = vec![9; n];
            let file = [old.clone(), encode_v1(&newer, 0)].concat();
            assert_eq!(decode_file(&file, n).unwrap().seq, 4);
            let mut upgraded = file.clone();
            newer.seq = 5;
            let v2 = encode_slot(&newer);
            if upgraded.len() < v2.len() {
                upgraded.resize(v2.len(), 0);
            }
            upgraded[..v2.len()].copy_from_slice(&v2);
            assert_eq!(decode_file(&upgraded, n), Some(newer.clone()), "n {n}");
        }
    }

    #[test]
    fn the_newer_valid_slot_wins() {
        let n = 4;
        let old = encode_slot(&table(4, vec![1; n]));
        let new = encode_slot(&table(5, vec![2; n]));
        let both = [old.clone(), new.clone()].concat();
        assert_eq!(decode_file(&both, n).unwrap().ends, vec![2; n]);
        let swapped = [new.clone(), old.clone()].concat();
        assert_eq!(decode_file(&swapped, n).unwrap().ends, vec![2; n]);
        let mut torn = both.clone();
        torn[slot_bytes(n) + 50] ^= 1;
        assert_eq!(decode_file(&torn, n).unwrap().ends, vec![1; n]);
        assert_eq!(decode_file(&both, n + 1), None, "another ring size");
        assert_eq!(decode_file(&[], n), None);
    }

    #[test]
    fn leases_are_durable_before_use_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        assert!(LeaseFile::open(dir.path(), 2).unwrap().is_none());
        let f = LeaseFile::create(dir.path(), &table(1, vec![0, 100])).unwrap();
        let len = std::fs::metadata(f.path()).unwrap().len();
        assert_eq!(f.cover(1, 50).unwrap(), 100, "already covered");
        assert_eq!(f.cover(0, 1).unwrap(), 1 + LEASE_SIZE);
        for i in 0..5 {
            f.cover(1, 200 + i * LEASE_SIZE).unwrap();
        }
        assert_eq!(
            std::fs::metadata(f.path()).unwrap().len(),
            len,
            "never grows"
        );
        drop(f);
        let (_, t) = LeaseFile::open(dir.path(), 2).unwrap().unwrap();
        assert_eq!(t.ends, vec![1 + LEASE_SIZE, 200 + 5 * LEASE_SIZE]);
        assert!(!t.clean);
    }

    #[test]
    fn boot_id_is_stable_within_a_boot() {
        assert_eq!(boot_id(), boot_id());
    }
}
