//! What the sensor workload writes into: the ceiling writer, Bitcask
//! stores (one per vnode) under the node's merge scheduler, or RocksDB.

use anyhow::{Context, Result};
use bitcask::{Options, Store};
use merge_control::{
    Classic, Fisherman, MergeScheduler, MetricsSnapshot, Policy, SchedulerSettings,
    ThrottleSettings, UsageSource,
};
use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A place the writers put blocks into.
pub trait Target: Send + Sync {
    fn put(&self, writer: usize, key: [u8; 4], block_no: u64, value: &[u8]) -> Result<()>;
    fn merge_metrics(&self) -> MetricsSnapshot;
}

/// The ceiling: each writer appends to its own segment files and deletes a
/// segment as soon as every block in it has been overwritten (one pass
/// later). Garbage collection for free: no merge, no reads.
pub struct Ceiling {
    dir: PathBuf,
    segment_bytes: u64,
    sensors: u64,
    writers: Vec<Mutex<SegmentWriter>>,
}

struct SegmentWriter {
    file: Option<(File, u64)>,
    /// (path, highest block number in it), oldest first.
    segments: VecDeque<(PathBuf, u64)>,
    next_id: u64,
}

impl Ceiling {
    pub fn new(dir: &Path, writers: usize, sensors: u64, segment_bytes: u64) -> Result<Ceiling> {
        std::fs::create_dir_all(dir)?;
        Ok(Ceiling {
            dir: dir.to_path_buf(),
            segment_bytes,
            sensors,
            writers: (0..writers)
                .map(|_| {
                    Mutex::new(SegmentWriter {
                        file: None,
                        segments: VecDeque::new(),
                        next_id: 0,
                    })
                })
                .collect(),
        })
    }
}

impl Target for Ceiling {
    fn put(&self, writer: usize, _key: [u8; 4], block_no: u64, value: &[u8]) -> Result<()> {
        let mut w = self.writers[writer].lock().expect("segment writer");
        // Block n is overwritten by block n + S: a segment whose newest
        // block is at most n - S is dead.
        while let Some((path, newest)) = w.segments.front() {
            if newest + self.sensors > block_no {
                break;
            }
            std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?;
            w.segments.pop_front();
        }
        if w.file
            .as_ref()
            .is_none_or(|(_, len)| *len >= self.segment_bytes)
        {
            let path = self.dir.join(format!("w{writer}-{:08}.seg", w.next_id));
            w.next_id += 1;
            let f = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
            w.file = Some((f, 0));
            w.segments.push_back((path, block_no));
        }
        let (f, len) = w.file.as_mut().expect("opened above");
        f.write_all(value)?;
        *len += value.len() as u64;
        if let Some(last) = w.segments.back_mut() {
            last.1 = block_no;
        }
        Ok(())
    }

    fn merge_metrics(&self) -> MetricsSnapshot {
        MetricsSnapshot::default()
    }
}

/// Bitcask stores, one per vnode, with the node's merge scheduler.
pub struct Bitcask {
    stores: Vec<Arc<Store>>,
    scheduler: MergeScheduler,
}

impl Bitcask {
    pub fn new(dir: &Path, vnodes: usize, file_size: u64, policy: &str) -> Result<Bitcask> {
        let policy: Box<dyn Policy> = match policy {
            "classic" => Box::new(Classic::default()),
            _ => Box::new(Fisherman::default()),
        };
        std::fs::create_dir_all(dir)?;
        let scheduler = MergeScheduler::start(SchedulerSettings {
            usage: UsageSource::Filesystem(dir.to_path_buf()),
            policy,
            throttle: ThrottleSettings::default(),
            workers: 1,
            idle_tick: Duration::from_millis(20),
        });
        let stores = (0..vnodes)
            .map(|v| -> Result<Arc<Store>> {
                let opts = Options {
                    max_file_size_bytes: file_size,
                    put_gate: Some(scheduler.throttle()),
                    ..Options::default()
                };
                let s = Arc::new(Store::open(dir.join(format!("vnode-{v:03}")), opts)?);
                scheduler.add_store(s.clone());
                Ok(s)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Bitcask { stores, scheduler })
    }
}

/// The vnode of a key: a multiplicative hash of the 32-bit key.
fn vnode_of(key: [u8; 4], vnodes: usize) -> usize {
    let h = u64::from(u32::from_be_bytes(key)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((h >> 32) % vnodes as u64) as usize
}

impl Target for Bitcask {
    fn put(&self, _writer: usize, key: [u8; 4], _block_no: u64, value: &[u8]) -> Result<()> {
        let store = &self.stores[vnode_of(key, self.stores.len())];
        store.put(&key, value)?;
        Ok(())
    }

    fn merge_metrics(&self) -> MetricsSnapshot {
        self.scheduler.metrics()
    }
}

/// RocksDB with its default leveled compaction, one database for the node
/// (what a user would pick instead of Bitcask).
pub struct Rocks {
    db: rocksdb_dl::RocksDb,
}

impl Rocks {
    pub fn new(dir: &Path) -> Result<Rocks> {
        std::fs::create_dir_all(dir)?;
        let db = rocksdb_dl::RocksDb::open(dir, &rocksdb_dl::Tuning::default())?;
        Ok(Rocks { db })
    }
}

impl Target for Rocks {
    fn put(&self, _writer: usize, key: [u8; 4], _block_no: u64, value: &[u8]) -> Result<()> {
        self.db.put(&key, value)?;
        Ok(())
    }

    fn merge_metrics(&self) -> MetricsSnapshot {
        MetricsSnapshot::default()
    }
}
