//! Running totals of the engine, for `/stats`.

use super::{Engine, EngineError, WriteReport};
use crate::storage::StorageStats;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub(super) struct Counters {
    samples_written: AtomicU64,
    samples_too_old: AtomicU64,
    samples_too_new: AtomicU64,
    samples_bad_series: AtomicU64,
    writes_refused: AtomicU64,
    pub(super) blocks_stored: AtomicU64,
    pub(super) block_bytes_stored: AtomicU64,
    pub(super) blocks_expired_unstored: AtomicU64,
    pub(super) homes_dropped: AtomicU64,
}

impl Counters {
    pub(super) fn count_write(&self, r: &Result<WriteReport, EngineError>) {
        let add = |a: &AtomicU64, n: u64| a.fetch_add(n, Ordering::Relaxed);
        match r {
            Ok(w) => {
                add(&self.samples_written, w.written);
                add(&self.samples_too_old, w.too_old);
                add(&self.samples_too_new, w.too_new);
                add(&self.samples_bad_series, w.bad_series);
            }
            Err(_) => {
                add(&self.writes_refused, 1);
            }
        }
    }
}

/// The engine's totals since it opened, and its state now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EngineStats {
    pub samples_written: u64,
    /// Dropped: older than their database's storage period.
    pub samples_too_old: u64,
    /// Refused: too far ahead of the clock.
    pub samples_too_new: u64,
    /// Refused: of series keys too long.
    pub samples_bad_series: u64,
    /// Writes that failed (a full disk, stores behind): nothing of them
    /// was acknowledged.
    pub writes_refused: u64,
    pub blocks_stored: u64,
    /// Bytes of the blocks stored (keys and values).
    pub block_bytes_stored: u64,
    /// Blocks whose storage period ended before they could be stored.
    pub blocks_expired_unstored: u64,
    /// Home partitions whose data left the node (handed off).
    pub homes_dropped: u64,
    pub series: u64,
    pub databases: u64,
    /// Samples in memory, not yet in stored blocks (they are in the log).
    pub samples_buffered: u64,
    /// Blocks cut and waiting to be stored.
    pub blocks_waiting: u64,
    pub log_segments: u64,
    pub storage: StorageStats,
}

impl Engine {
    pub fn stats(&self) -> EngineStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (series, databases) = {
            let st = self.lock();
            (st.catalog.len() as u64, st.dbs.len() as u64)
        };
        let (buffered, waiting) = self.waiting();
        EngineStats {
            samples_written: get(&c.samples_written),
            samples_too_old: get(&c.samples_too_old),
            samples_too_new: get(&c.samples_too_new),
            samples_bad_series: get(&c.samples_bad_series),
            writes_refused: get(&c.writes_refused),
            blocks_stored: get(&c.blocks_stored),
            block_bytes_stored: get(&c.block_bytes_stored),
            blocks_expired_unstored: get(&c.blocks_expired_unstored),
            homes_dropped: get(&c.homes_dropped),
            series,
            databases,
            samples_buffered: buffered as u64,
            blocks_waiting: waiting as u64,
            log_segments: self.wal.segments().len() as u64,
            storage: self.storage.stats(),
        }
    }
}
