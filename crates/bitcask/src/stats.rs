//! Per-file statistics, kept current on every put, delete, expiry and
//! merge, so the dead share D of each file is known without reading it.
//!
//! "Live" means the keydir's current entry points at the record (tombstones
//! included: they must be copied by merge while they shadow older records).
//! Live records with an expiry are also kept in a per-file histogram by
//! expiry second, so expired bytes count as dead the moment they expire.

use crate::keydir::Entry;
use std::collections::{BTreeMap, HashMap};

#[derive(Clone, Debug, Default)]
pub(crate) struct FileCounters {
    pub total_bytes: u64,
    pub total_keys: u64,
    pub live_bytes: u64,
    pub live_keys: u64,
    pub min_seq: u64,
    pub max_seq: u64,
    /// Live records with an expiry: expiry second to (keys, bytes).
    expiring: BTreeMap<u32, (u64, u64)>,
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
    /// Live records that are expired or tombstones: merge must look at them.
    pub expired_keys: u64,
    pub min_seq: u64,
    pub max_seq: u64,
    /// True for the file puts append to; merge never takes it.
    pub active: bool,
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
}

impl StatsTable {
    pub fn add_file(&mut self, file_id: u32) {
        self.files.entry(file_id).or_insert_with(|| FileCounters {
            min_seq: u64::MAX,
            ..FileCounters::default()
        });
    }

    pub fn remove_file(&mut self, file_id: u32) {
        self.files.remove(&file_id);
    }

    /// A record was appended to a file (live or not, it takes space).
    pub fn record_written(&mut self, file_id: u32, size: u32, seq: u64) {
        let f = self
            .files
            .get_mut(&file_id)
            .expect("stats for a known file");
        f.total_bytes += u64::from(size);
        f.total_keys += 1;
        f.min_seq = f.min_seq.min(seq);
        f.max_seq = f.max_seq.max(seq);
    }

    /// `entry` became the current record of its key.
    pub fn became_live(&mut self, entry: &Entry) {
        if let Some(f) = self.files.get_mut(&entry.file_id) {
            f.live_bytes += u64::from(entry.size);
            f.live_keys += 1;
            if entry.expiry_s != 0 && !entry.tombstone {
                let slot = f.expiring.entry(entry.expiry_s).or_default();
                slot.0 += 1;
                slot.1 += u64::from(entry.size);
            }
        }
    }

    /// `entry` stopped being the current record of its key.
    pub fn became_dead(&mut self, entry: &Entry) {
        if let Some(f) = self.files.get_mut(&entry.file_id) {
            f.live_bytes -= u64::from(entry.size);
            f.live_keys -= 1;
            if entry.expiry_s != 0 && !entry.tombstone {
                if let Some(slot) = f.expiring.get_mut(&entry.expiry_s) {
                    slot.0 -= 1;
                    slot.1 -= u64::from(entry.size);
                    if slot.0 == 0 {
                        f.expiring.remove(&entry.expiry_s);
                    }
                }
            }
        }
    }

    pub fn snapshot(&self, file_id: u32, now_s: u32, active: bool) -> Option<FileStats> {
        let f = self.files.get(&file_id)?;
        let (exp_keys, exp_bytes) = f
            .expiring
            .range(..=now_s)
            .fold((0, 0), |(k, b), (_, (kk, bb))| (k + kk, b + bb));
        Some(FileStats {
            file_id,
            total_bytes: f.total_bytes,
            total_keys: f.total_keys,
            live_bytes: f.live_bytes - exp_bytes,
            live_keys: f.live_keys - exp_keys,
            expired_keys: exp_keys,
            min_seq: f.min_seq,
            max_seq: f.max_seq,
            active,
        })
    }

    /// Raw live-key count, expired and tombstone entries included.
    pub fn current_entries(&self, file_id: u32) -> u64 {
        self.files.get(&file_id).map_or(0, |f| f.live_keys)
    }

    pub fn file_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.files.keys().copied()
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
