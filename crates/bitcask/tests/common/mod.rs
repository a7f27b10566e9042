//! Helpers shared by the integration tests.
#![allow(dead_code)]

use bitcask::{Clock, Options};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A small deterministic generator (SplitMix64): a seed replays a run.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

/// A clock the test moves by hand.
#[derive(Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn starting_at(secs: u64) -> Arc<ManualClock> {
        Arc::new(ManualClock(AtomicU64::new(secs * 1_000_000)))
    }
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(d.as_micros() as u64, Ordering::SeqCst);
    }
    pub fn now_s(&self) -> u64 {
        self.0.load(Ordering::SeqCst) / 1_000_000
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_micros(self.0.load(Ordering::SeqCst))
    }
}

/// Small files and buffers, so a few thousand operations rotate and merge.
pub fn small_options() -> Options {
    Options {
        max_file_size_bytes: 64 << 10,
        write_buffer_bytes: 8 << 10,
        ..Options::default()
    }
}

/// Data files in a store directory, by id.
pub fn data_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "data"))
        .collect();
    v.sort();
    v
}

/// Ids of the non-active files of a store.
pub fn closed_files(store: &bitcask::Store) -> Vec<u32> {
    store
        .file_stats()
        .iter()
        .filter(|f| !f.active)
        .map(|f| f.file_id)
        .collect()
}

/// Per-file (id, total bytes, total keys, live bytes, live keys) of the
/// non-empty files, after checking that they add up to the keydir.
pub fn file_counts(s: &bitcask::Store) -> Vec<(u32, u64, u64, u64, u64)> {
    let files = s.file_stats();
    let current: u64 = files.iter().map(|f| f.live_keys + f.expired_keys).sum();
    assert_eq!(
        current,
        s.stats().keydir_entries as u64,
        "every keydir entry is live in one file"
    );
    for f in &files {
        assert!(
            f.live_bytes <= f.total_bytes && f.live_keys <= f.total_keys,
            "{f:?}"
        );
    }
    files
        .iter()
        .filter(|f| f.total_keys > 0)
        .map(|f| {
            (
                f.file_id,
                f.total_bytes,
                f.total_keys,
                f.live_bytes,
                f.live_keys,
            )
        })
        .collect()
}
