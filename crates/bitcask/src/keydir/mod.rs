//! The keydir: every key in RAM, mapped to where its newest record lies.
//!
//! Sharded by key hash; each shard is a hash table of 32-bit handles into a
//! byte arena (see `arena.rs`), behind its own `RwLock`, so readers of
//! different keys never contend and a reader never waits for the disk.
//!
//! Deleted keys stay as tombstone entries until merge drops the tombstone:
//! the entry is what tells merge whether a tombstone on disk is still the
//! newest record of its key.
//!
//! Snapshots for folds: while a snapshot is open, every change records the
//! entry it replaced in its shard's undo log, so a fold walking the shards
//! one at a time still sees the keydir exactly as it was at its sequence
//! number. A shard's log keeps only what an open fold has yet to read: a
//! fold that has passed a shard, or closed, lets the log drop what no
//! other fold needs. The log is bounded: past [`MAX_UNDO_PER_SHARD`]
//! changes its older half goes, and a fold that still needed it ends with
//! [`SnapshotLost`] (the caller retries) rather than memory growing
//! without bound under overlapping folds and heavy writes.

mod arena;

use arena::{Arena, ENTRY_FIXED_LEN};
use hashbrown::hash_table::HashTable;
use hashbrown::DefaultHashBuilder;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};

const SHARDS: usize = 64;

/// Changes a shard's undo log holds at most (about 100 bytes each with a
/// short key: at most ~13 MiB per store, whatever the folds and writes).
pub const MAX_UNDO_PER_SHARD: usize = 2048;

/// A fold's snapshot lost changes it needed: more than
/// [`MAX_UNDO_PER_SHARD`] changes to one shard while it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotLost;

/// Where the newest record of a key lies, and what the keydir needs to know
/// about it without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub seq: u64,
    pub file_id: u32,
    pub offset: u32,
    /// Record length on disk (header, key, value).
    pub size: u32,
    /// Expiry in seconds since the epoch; 0 means none.
    pub expiry_s: u32,
    pub tombstone: bool,
}

impl Entry {
    pub fn is_expired(&self, now_s: u32) -> bool {
        self.expiry_s != 0 && self.expiry_s <= now_s
    }

    /// A key is readable when its newest record is a value not yet expired.
    pub fn is_visible(&self, now_s: u32) -> bool {
        !self.tombstone && !self.is_expired(now_s)
    }

    pub fn same_place(&self, other: &Entry) -> bool {
        self.file_id == other.file_id && self.offset == other.offset
    }
}

#[derive(Default)]
struct Shard {
    table: HashTable<u32>,
    arena: Arena,
    /// Entries replaced while a fold that has not yet read this shard is
    /// open, in order of change; at most [`MAX_UNDO_PER_SHARD`].
    undo: Vec<(Box<[u8]>, Option<Entry>)>,
    /// The change number of `undo[0]` (changes ever logged before it).
    undo_base: u64,
}

impl Shard {
    /// Drops the logged changes before change number `from`.
    fn trim_undo(&mut self, from: u64) {
        let n = from
            .saturating_sub(self.undo_base)
            .min(self.undo.len() as u64) as usize;
        if n == self.undo.len() {
            self.undo = Vec::new();
        } else {
            self.undo.drain(..n);
        }
        self.undo_base += n as u64;
    }
}

/// The open snapshots: per shard, the change number each still needs the
/// log from (`None` once its fold has read that shard).
#[derive(Default)]
struct Registry {
    next_id: u64,
    open: HashMap<u64, Vec<Option<u64>>>,
}

impl Registry {
    fn oldest_needed(&self, shard: usize) -> Option<u64> {
        self.open.values().filter_map(|s| s[shard]).min()
    }
}

pub struct Keydir {
    hasher: DefaultHashBuilder,
    shards: Box<[RwLock<Shard>]>,
    snapshots_open: AtomicUsize,
    /// Open snapshots; taken before any shard lock, never inside one.
    snapshots: Mutex<Registry>,
}

/// An open snapshot: the change number each shard's log stood at when it
/// opened.
pub struct Snapshot {
    id: u64,
    undo_start: Box<[u64]>,
}

impl Default for Keydir {
    fn default() -> Self {
        Keydir::new()
    }
}

/// What an insert or update replaced.
pub type Replaced = Option<Entry>;

impl Keydir {
    pub fn new() -> Keydir {
        Keydir {
            hasher: DefaultHashBuilder::default(),
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
            snapshots_open: AtomicUsize::new(0),
            snapshots: Mutex::default(),
        }
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    fn shard_of(hash: u64) -> usize {
        // hashbrown uses the low bits for the bucket and the top 7 bits as
        // the tag; shard by bits in between, so neither loses entropy.
        (hash >> 40) as usize % SHARDS
    }

    pub fn get(&self, key: &[u8]) -> Option<Entry> {
        let hash = self.hash(key);
        let shard = self.shards[Self::shard_of(hash)]
            .read()
            .expect("keydir lock");
        shard
            .table
            .find(hash, |&h| shard.arena.key(h) == key)
            .map(|&h| shard.arena.entry(h))
    }

    /// Sets the entry of `key` when `entry` is newer (higher `seq`) than the
    /// one present, or when none is present. Returns what it replaced, or
    /// `Err(existing)` when the present entry is newer. Two records with
    /// one `seq` are an original and a merge's copy (an interrupted merge
    /// leaves both): the one in the higher file id wins, whatever order
    /// the files are loaded in, so every rebuild picks the same one.
    pub fn put_if_newer(&self, key: &[u8], entry: Entry) -> Result<Replaced, Entry> {
        self.update(key, |old| match old {
            Some(o) if (o.seq, o.file_id) > (entry.seq, entry.file_id) => Err(o),
            _ => Ok(Some(entry)),
        })
    }

    /// Sets the entry of `key` unconditionally (a new write).
    pub fn put(&self, key: &[u8], entry: Entry) -> Replaced {
        self.update(key, |_| Ok::<_, ()>(Some(entry)))
            .expect("infallible")
    }

    /// Replaces the entry of `key` with `new` (or removes it when `None`)
    /// only if it still points at `expected`'s place. Merge uses this to move
    /// records without racing writers.
    pub fn compare_and_swap(&self, key: &[u8], expected: &Entry, new: Option<Entry>) -> bool {
        self.update(key, |old| match old {
            Some(o) if o.same_place(expected) && o.seq == expected.seq => Ok(new),
            _ => Err(()),
        })
        .is_ok()
    }

    /// The one mutation path: `decide` sees the present entry and returns the
    /// new one (`None` removes) or an error that leaves the key untouched.
    fn update<E>(
        &self,
        key: &[u8],
        decide: impl FnOnce(Option<Entry>) -> Result<Option<Entry>, E>,
    ) -> Result<Replaced, E> {
        let hash = self.hash(key);
        let shard_idx = Self::shard_of(hash);
        let mut guard = self.shards[shard_idx].write().expect("keydir lock");
        let shard = &mut *guard;
        let found = shard
            .table
            .find(hash, |&h| shard.arena.key(h) == key)
            .copied();
        let old = found.map(|h| shard.arena.entry(h));
        let new = decide(old)?;
        if old == new {
            return Ok(old);
        }
        if self.snapshots_open.load(Ordering::Acquire) > 0 {
            if shard.undo.len() >= MAX_UNDO_PER_SHARD {
                // The bound: the older half goes; a fold still needing it
                // ends with SnapshotLost when it reaches this shard.
                let from = shard.undo_base + (MAX_UNDO_PER_SHARD / 2) as u64;
                shard.trim_undo(from);
            }
            shard.undo.push((key.into(), old));
        }
        match (found, new) {
            (Some(h), Some(n)) => shard.arena.set_entry(h, &n),
            (None, Some(n)) => {
                let h = shard.arena.alloc(key, &n);
                let Shard { table, arena, .. } = shard;
                table.insert_unique(hash, h, |&x| self.hash(arena.key(x)));
            }
            (Some(h), None) => {
                if let Ok(slot) = shard.table.find_entry(hash, |&x| x == h) {
                    slot.remove();
                }
                shard.arena.free(h);
                if shard.arena.wants_compaction() {
                    compact(shard);
                }
            }
            (None, None) => {}
        }
        Ok(old)
    }

    /// Some key whose entry points into `file_id` (a full scan; for
    /// checks in debug builds).
    #[cfg(debug_assertions)]
    pub fn any_in_file(&self, file_id: u32) -> Option<(Vec<u8>, Entry)> {
        for s in self.shards.iter() {
            let s = s.read().expect("keydir lock");
            for &h in s.table.iter() {
                let e = s.arena.entry(h);
                if e.file_id == file_id {
                    return Some((s.arena.key(h).to_vec(), e));
                }
            }
        }
        None
    }

    /// Number of entries, tombstones included.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.read().expect("keydir lock").table.len())
            .sum()
    }

    /// Bytes held for the keydir: tables and arenas.
    pub fn memory_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let s = s.read().expect("keydir lock");
                s.arena.allocated_bytes() + s.table.capacity() * (std::mem::size_of::<u32>() + 1)
            })
            .sum::<usize>()
            + std::mem::size_of::<Self>()
    }

    /// Bytes of keys stored (for the overhead figure).
    pub fn key_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let s = s.read().expect("keydir lock");
                s.arena.live_bytes - s.table.len() * ENTRY_FIXED_LEN
            })
            .sum()
    }

    /// Reserves room for `additional` more keys (used before loading hints).
    pub fn reserve(&self, additional: usize) {
        let per_shard = additional / SHARDS + 1;
        for s in self.shards.iter() {
            let mut s = s.write().expect("keydir lock");
            let Shard { table, arena, .. } = &mut *s;
            table.reserve(per_shard, |&x| self.hash(arena.key(x)));
        }
    }

    /// Opens a snapshot of the keydir as it is now. Changes made while it
    /// is open are logged so [`Keydir::fold_snapshot`] can undo them.
    pub fn open_snapshot(&self) -> Snapshot {
        let mut reg = self.snapshots.lock().expect("snapshots");
        let id = reg.next_id;
        reg.next_id += 1;
        self.snapshots_open
            .store(reg.open.len() + 1, Ordering::Release);
        let undo_start: Box<[u64]> = self
            .shards
            .iter()
            .map(|s| {
                let s = s.read().expect("keydir lock");
                s.undo_base + s.undo.len() as u64
            })
            .collect();
        reg.open
            .insert(id, undo_start.iter().map(|&n| Some(n)).collect());
        Snapshot { id, undo_start }
    }

    /// The snapshot's fold has read shard `i`: its log may drop what no
    /// other open fold needs.
    fn passed(&self, id: u64, i: usize) {
        let mut reg = self.snapshots.lock().expect("snapshots");
        if let Some(s) = reg.open.get_mut(&id) {
            s[i] = None;
        }
        let mut shard = self.shards[i].write().expect("keydir lock");
        let end = shard.undo_base + shard.undo.len() as u64;
        shard.trim_undo(reg.oldest_needed(i).unwrap_or(end));
    }

    fn close_snapshot(&self, id: u64) {
        let mut reg = self.snapshots.lock().expect("snapshots");
        if reg.open.remove(&id).is_none() {
            return;
        }
        self.snapshots_open.store(reg.open.len(), Ordering::Release);
        // Every shard: changes made after the fold passed one were logged
        // all the same.
        for i in 0..SHARDS {
            let mut shard = self.shards[i].write().expect("keydir lock");
            let end = shard.undo_base + shard.undo.len() as u64;
            shard.trim_undo(reg.oldest_needed(i).unwrap_or(end));
        }
    }

    /// Changes held in the undo logs (tests, statistics).
    pub fn undo_len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.read().expect("keydir lock").undo.len())
            .sum()
    }

    /// Whether some entry satisfies `pred`, asked of each shard under its
    /// read lock without copying it: for a quick test that stops at the
    /// first match (writers to a shard wait while it is looked through),
    /// where [`Keydir::scan`] would copy every key first.
    pub fn any(&self, mut pred: impl FnMut(&[u8], Entry) -> bool) -> bool {
        self.shards.iter().any(|shard| {
            let s = shard.read().expect("keydir lock");
            s.table
                .iter()
                .any(|&h| pred(s.arena.key(h), s.arena.entry(h)))
        })
    }

    /// Visits every entry, one shard at a time as it is when the scan
    /// reaches it: no snapshot, so no undo log and never [`SnapshotLost`].
    /// A change made during the scan may be seen or not; a key that stays
    /// unchanged is visited exactly once. Holds one shard's copy at a time
    /// and no lock while `visit` runs.
    pub fn scan(&self, mut visit: impl FnMut(&[u8], Entry) -> bool) {
        let mut batch: Vec<(Box<[u8]>, Entry)> = Vec::new();
        for shard in self.shards.iter() {
            {
                let s = shard.read().expect("keydir lock");
                batch.clear();
                batch.extend(
                    s.table
                        .iter()
                        .map(|&h| (s.arena.key(h).into(), s.arena.entry(h))),
                );
            }
            for (k, e) in batch.drain(..) {
                if !visit(&k, e) {
                    return;
                }
            }
        }
    }

    /// Visits every entry as it was when `snapshot` opened, then closes it.
    /// `visit` returns false to stop early. [`SnapshotLost`] when the undo
    /// log's bound dropped changes this fold needed.
    pub fn fold_snapshot(
        &self,
        snapshot: Snapshot,
        mut visit: impl FnMut(&[u8], Entry) -> bool,
    ) -> Result<(), SnapshotLost> {
        struct Close<'a>(&'a Keydir, u64);
        impl Drop for Close<'_> {
            fn drop(&mut self) {
                self.0.close_snapshot(self.1);
            }
        }
        let _close = Close(self, snapshot.id);
        let mut batch: Vec<(Box<[u8]>, Entry)> = Vec::new();
        for (i, shard) in self.shards.iter().enumerate() {
            {
                let s = shard.read().expect("keydir lock");
                if snapshot.undo_start[i] < s.undo_base {
                    return Err(SnapshotLost);
                }
                let from = (snapshot.undo_start[i] - s.undo_base) as usize;
                // The first change of a key since the snapshot holds the
                // entry it had then; later changes are of no interest.
                let mut changed: HashSet<&[u8]> = HashSet::new();
                batch.clear();
                for (key, old) in &s.undo[from..] {
                    if changed.insert(key) {
                        if let Some(old) = old {
                            batch.push((key.clone(), *old));
                        }
                    }
                }
                batch.extend(s.table.iter().filter_map(|&h| {
                    let key = s.arena.key(h);
                    (!changed.contains(key)).then(|| (key.into(), s.arena.entry(h)))
                }));
            }
            self.passed(snapshot.id, i);
            for (k, e) in batch.drain(..) {
                if !visit(&k, e) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

fn compact(shard: &mut Shard) {
    let mut fresh = Arena::default();
    let Shard { table, arena, .. } = shard;
    for h in table.iter_mut() {
        let key = arena.key(*h);
        let entry = arena.entry(*h);
        *h = fresh.alloc(key, &entry);
    }
    *arena = fresh;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(seq: u64, file_id: u32) -> Entry {
        Entry {
            seq,
            file_id,
            offset: seq as u32 * 10,
            size: 50,
            expiry_s: 0x0102_0304,
            tombstone: false,
        }
    }

    #[test]
    fn put_get_overwrite_remove() {
        let kd = Keydir::new();
        assert_eq!(kd.put(b"a", e(1, 1)), None);
        assert_eq!(kd.get(b"a"), Some(e(1, 1)));
        assert_eq!(kd.put(b"a", e(2, 1)), Some(e(1, 1)));
        assert!(kd.compare_and_swap(b"a", &e(2, 1), Some(e(2, 7))));
        assert!(!kd.compare_and_swap(b"a", &e(2, 1), None));
        assert!(kd.compare_and_swap(b"a", &e(2, 7), None));
        assert_eq!(kd.get(b"a"), None);
        assert!(kd.put_if_newer(b"b", e(5, 1)).is_ok());
        assert_eq!(kd.put_if_newer(b"b", e(4, 1)), Err(e(5, 1)));
    }

    #[test]
    fn any_stops_at_the_first_entry_that_matches() {
        let kd = Keydir::new();
        assert!(!kd.any(|_, _| true), "an empty keydir has none");
        for i in 0..1000u64 {
            kd.put(format!("k{i}").as_bytes(), e(i + 1, 1));
        }
        let mut asked = 0;
        assert!(kd.any(|k, en| {
            asked += 1;
            k.starts_with(b"k") && en.seq > 0
        }));
        assert_eq!(asked, 1);
        asked = 0;
        assert!(!kd.any(|k, _| {
            asked += 1;
            k == b"absent"
        }));
        assert_eq!(asked, 1000, "every entry asked once");
        assert!(kd.any(|k, en| k == b"k500" && en.seq == 501));
    }

    #[test]
    fn many_keys_survive_removal_and_compaction() {
        let kd = Keydir::new();
        for i in 0..50_000u64 {
            kd.put(format!("key-{i}").as_bytes(), e(i + 1, 1));
        }
        for i in (0..50_000u64).filter(|i| i % 3 != 0) {
            let k = format!("key-{i}");
            assert!(kd.compare_and_swap(k.as_bytes(), &e(i + 1, 1), None));
        }
        for i in 0..50_000u64 {
            let got = kd.get(format!("key-{i}").as_bytes());
            assert_eq!(got, (i % 3 == 0).then(|| e(i + 1, 1)), "key-{i}");
        }
        assert_eq!(kd.len(), (0..50_000).filter(|i| i % 3 == 0).count());
    }

    #[test]
    fn fold_sees_the_snapshot_despite_concurrent_changes() {
        let kd = Keydir::new();
        for i in 0..1000u64 {
            kd.put(format!("k{i}").as_bytes(), e(i + 1, 1));
        }
        let snap = kd.open_snapshot();
        let mut seen = Vec::new();
        let mut step = 0u64;
        let r = kd.fold_snapshot(snap, |k, en| {
            seen.push((k.to_vec(), en.seq));
            // Change keys while the fold runs: overwrite, delete, add.
            step += 1;
            let victim = format!("k{}", (step * 7) % 1000);
            kd.put(victim.as_bytes(), e(2000 + step, 2));
            let gone = format!("k{}", (step * 13) % 1000);
            if let Some(cur) = kd.get(gone.as_bytes()) {
                kd.compare_and_swap(gone.as_bytes(), &cur, None);
            }
            kd.put(format!("new{step}").as_bytes(), e(5000 + step, 3));
            true
        });
        assert_eq!(r, Ok(()));
        assert_eq!(kd.undo_len(), 0, "no fold open: no log");
        seen.sort();
        let mut want: Vec<_> = (0..1000u64)
            .map(|i| (format!("k{i}").into_bytes(), i + 1))
            .collect();
        want.sort();
        assert_eq!(seen, want);
    }

    /// Folds that overlap forever (each opens before the last closes) keep
    /// only the changes the oldest open one has yet to read.
    #[test]
    fn overlapping_folds_keep_the_undo_log_bounded() {
        let kd = Keydir::new();
        for i in 0..500u64 {
            kd.put(format!("k{i}").as_bytes(), e(i + 1, 1));
        }
        let mut seq = 1000;
        let mut open: std::collections::VecDeque<(Snapshot, usize)> = Default::default();
        let mut writes = 0usize;
        for round in 0..200 {
            open.push_back((kd.open_snapshot(), writes));
            for _ in 0..50 {
                seq += 1;
                kd.put(format!("k{}", seq % 500).as_bytes(), e(seq, 2));
                writes += 1;
            }
            if open.len() > 2 {
                let (snap, _) = open.pop_front().unwrap();
                let mut n = 0;
                kd.fold_snapshot(snap, |_, _| {
                    n += 1;
                    true
                })
                .unwrap();
                assert_eq!(n, 500, "round {round}");
            }
            // Only writes made since the oldest open snapshot are logged.
            let since_oldest = writes - open.front().map_or(writes, |(_, w)| *w);
            assert!(
                kd.undo_len() <= since_oldest,
                "round {round}: {} > {since_oldest}",
                kd.undo_len()
            );
        }
        while let Some((snap, _)) = open.pop_front() {
            kd.fold_snapshot(snap, |_, _| true).unwrap();
        }
        assert_eq!(kd.undo_len(), 0);
    }

    /// Writes without end during one fold: the log stays within its bound
    /// and the fold reports the loss instead of answering from a partial
    /// snapshot.
    #[test]
    fn a_fold_overrun_by_writes_is_refused_and_memory_stays_bounded() {
        let kd = Keydir::new();
        kd.put(b"first", e(1, 1));
        let snap = kd.open_snapshot();
        for i in 0..(SHARDS * MAX_UNDO_PER_SHARD * 3) as u64 {
            kd.put(format!("w{}", i % 5000).as_bytes(), e(10 + i, 2));
            assert!(kd.undo_len() <= SHARDS * MAX_UNDO_PER_SHARD);
        }
        assert_eq!(kd.fold_snapshot(snap, |_, _| true), Err(SnapshotLost));
        assert_eq!(kd.undo_len(), 0, "closed: its log is gone");
        // A fold that is not overrun is answered.
        let snap = kd.open_snapshot();
        kd.put(b"second", e(1_000_000, 3));
        let mut keys = 0;
        kd.fold_snapshot(snap, |_, _| {
            keys += 1;
            true
        })
        .unwrap();
        assert_eq!(keys, 5001);
    }
}
