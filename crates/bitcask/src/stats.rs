//! Per-file statistics, kept current on every put, delete, expiry and
//! merge, so the dead share D of each file is known without reading it.
//!
//! "Live" means the keydir's current entry points at the record (tombstones
//! included: they must be copied by merge while they shadow older records).
//! Live records with an expiry are also kept in a per-file histogram by
//! expiry second, so expired bytes count as dead the moment they expire.

use crate::keydir::Entry;
use hashbrown::HashMap;
use std::collections::BTreeMap;

/// Counters of one file. Signed, so a table filled by one loader thread
/// can hold deltas that [`StatsTable::absorb`] adds to the shared one.
#[derive(Clone, Debug)]
pub(crate) struct FileCounters {
    pub total_bytes: i64,
    pub total_keys: i64,
    pub live_bytes: i64,
    pub live_keys: i64,
    pub min_seq: u64,
    pub max_seq: u64,
    /// Live records with an expiry: expiry second to (keys, bytes).
    expiring: BTreeMap<u32, (i64, i64)>,
}

impl Default for FileCounters {
    fn default() -> Self {
        FileCounters {
            total_bytes: 0,
            total_keys: 0,
            live_bytes: 0,
            live_keys: 0,
            min_seq: u64::MAX,
            max_seq: 0,
            expiring: BTreeMap::new(),
        }
    }
}

impl FileCounters {
    fn add_expiring(&mut self, expiry_s: u32, keys: i64, bytes: i64) {
        let slot = self.expiring.entry(expiry_s).or_default();
        slot.0 += keys;
        slot.1 += bytes;
        if *slot == (0, 0) {
            self.expiring.remove(&expiry_s);
        }
    }

    fn add_live(&mut self, entry: &Entry, sign: i64) {
        self.live_bytes += sign * i64::from(entry.size);
        self.live_keys += sign;
        if entry.expiry_s != 0 && !entry.tombstone {
            self.add_expiring(entry.expiry_s, sign, sign * i64::from(entry.size));
        }
    }
}

/// A file's statistics at one moment, as the store reports them.
#[derive(Clone, Debug, PartialEq)]
pub struct FileStats {
    pub file_id: u32,
    /// Bytes of records (the file header excluded).
    pub total_bytes: u64,
    pub total_keys: u64,
    /// Live bytes and keys, expired records excluded.
    pub live_bytes: u64,
    pub live_keys: u64,
    /// Live records that are expired: merge must still look at them.
    pub expired_keys: u64,
    pub min_seq: u64,
    pub max_seq: u64,
    /// True for the file puts append to; merge never takes it.
    pub active: bool,
    /// A merge deletes this file without reading it: no current record,
    /// or every current record expired and no other file holds an older
    /// record of any key (so none can come back). Windows of sensor data
    /// kept for a storage period die so, file by file, oldest first.
    pub unread: bool,
}

impl FileStats {
    /// Dead share D in [0, 1]: the part of the file's bytes merge would not
    /// copy. An empty file is fully dead.
    pub fn dead_share(&self) -> f64 {
        if self.total_bytes == 0 {
            1.0
        } else {
            1.0 - self.live_bytes as f64 / self.total_bytes as f64
        }
    }

    pub fn dead_bytes(&self) -> u64 {
        self.total_bytes - self.live_bytes
    }
}

#[derive(Default)]
pub(crate) struct StatsTable {
    files: HashMap<u32, FileCounters>,
    /// A delta table (one loader thread's) creates files on first mention;
    /// the store's own table ignores files it no longer has.
    is_delta: bool,
}

impl StatsTable {
    pub fn delta() -> StatsTable {
        StatsTable {
            files: HashMap::new(),
            is_delta: true,
        }
    }

    pub fn add_file(&mut self, file_id: u32) {
        self.files.entry(file_id).or_default();
    }

    pub fn remove_file(&mut self, file_id: u32) {
        self.files.remove(&file_id);
    }

    fn file(&mut self, file_id: u32) -> Option<&mut FileCounters> {
        if self.is_delta {
            Some(self.files.entry(file_id).or_default())
        } else {
            self.files.get_mut(&file_id)
        }
    }

    /// A record was appended to a file (live or not, it takes space).
    pub fn record_written(&mut self, file_id: u32, size: u32, seq: u64) {
        if let Some(f) = self.file(file_id) {
            f.total_bytes += i64::from(size);
            f.total_keys += 1;
            f.min_seq = f.min_seq.min(seq);
            f.max_seq = f.max_seq.max(seq);
        }
    }

    /// `entry` became the current record of its key.
    pub fn became_live(&mut self, entry: &Entry) {
        if let Some(f) = self.file(entry.file_id) {
            f.add_live(entry, 1);
        }
    }

    /// `entry` stopped being the current record of its key.
    pub fn became_dead(&mut self, entry: &Entry) {
        if let Some(f) = self.file(entry.file_id) {
            f.add_live(entry, -1);
        }
    }

    /// Adds a delta table's counts to this one.
    pub fn absorb(&mut self, delta: StatsTable) {
        for (id, d) in delta.files {
            let f = self.files.entry(id).or_default();
            f.total_bytes += d.total_bytes;
            f.total_keys += d.total_keys;
            f.live_bytes += d.live_bytes;
            f.live_keys += d.live_keys;
            f.min_seq = f.min_seq.min(d.min_seq);
            f.max_seq = f.max_seq.max(d.max_seq);
            for (exp, (keys, bytes)) in d.expiring {
                f.add_expiring(exp, keys, bytes);
            }
        }
    }

    pub fn snapshot(&self, file_id: u32, now_s: u32, active: bool) -> Option<FileStats> {
        self.snapshot_with(file_id, now_s, active, |id| self.min_seq_outside(&[id]))
    }

    /// Every file's snapshot (`active`: the active file's id), the
    /// smallest sequence number outside each file found in one pass.
    pub fn snapshot_all(&self, now_s: u32, active: u32) -> Vec<FileStats> {
        let mut least = [(u64::MAX, u32::MAX); 2];
        for (&id, f) in self.files.iter().filter(|(_, f)| f.total_keys > 0) {
            if f.min_seq < least[0].0 {
                least = [(f.min_seq, id), least[0]];
            } else if f.min_seq < least[1].0 {
                least[1] = (f.min_seq, id);
            }
        }
        let outside = |id: u32| {
            if least[0].1 == id {
                least[1].0
            } else {
                least[0].0
            }
        };
        self.files
            .keys()
            .filter_map(|&id| self.snapshot_with(id, now_s, id == active, outside))
            .collect()
    }

    fn snapshot_with(
        &self,
        file_id: u32,
        now_s: u32,
        active: bool,
        min_seq_outside: impl Fn(u32) -> u64,
    ) -> Option<FileStats> {
        let f = self.files.get(&file_id)?;
        let (exp_keys, exp_bytes) = f
            .expiring
            .range(..=now_s)
            .fold((0, 0), |(k, b), (_, (kk, bb))| (k + kk, b + bb));
        let count = |x: i64| x.max(0) as u64;
        let unread =
            f.live_keys <= 0 || (f.live_keys == exp_keys && f.max_seq < min_seq_outside(file_id));
        Some(FileStats {
            file_id,
            total_bytes: count(f.total_bytes),
            total_keys: count(f.total_keys),
            live_bytes: count(f.live_bytes - exp_bytes),
            live_keys: count(f.live_keys - exp_keys),
            expired_keys: count(exp_keys),
            min_seq: f.min_seq,
            max_seq: f.max_seq,
            active,
            unread,
        })
    }

    /// Raw live-key count, expired and tombstone entries included.
    pub fn current_entries(&self, file_id: u32) -> u64 {
        self.files
            .get(&file_id)
            .map_or(0, |f| f.live_keys.max(0) as u64)
    }

    /// Smallest `min_seq` over files not in `excluded`.
    pub fn min_seq_outside(&self, excluded: &[u32]) -> u64 {
        self.files
            .iter()
            .filter(|(id, f)| !excluded.contains(id) && f.total_keys > 0)
            .map(|(_, f)| f.min_seq)
            .min()
            .unwrap_or(u64::MAX)
    }
}
