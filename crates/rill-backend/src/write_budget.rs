//! The node's cap on leveldb write buffers (the write-buffer share of
//! `leveldb.maximum_memory`, see `LeveldbStore::open`).
//!
//! fjall 3.1 counts the bytes of its memtables, active and sealed, over
//! every keyspace, but holds writes only per keyspace (at four sealed
//! memtables) and seals a memtable only when it passes its own size; its
//! database-wide cap is a setting it stores and does not read. With a
//! keyspace per vnode, the memtables waiting for a flush could then take
//! several times the budget. So each write waits here while the count is
//! over the cap, and when no memtable is sealed (so none is being written
//! out) the largest active one is sealed: the count falls even when no
//! single memtable is full. A write held for [`MAX_HOLD`] fails with an
//! error a client can retry on: flushes making no progress for that long
//! mean a full or failing disk.

use crate::leveldb::engine;
use crate::{Error, Result};
use fjall::{AbstractTree, Database, Keyspace};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub(crate) const MAX_HOLD: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(1);

pub(crate) struct WriteBudget {
    /// Bytes of memtables the node may hold.
    limit: u64,
    /// The keyspaces open for writing (fjall lists names only, and
    /// opening one by name makes it if it is gone).
    open: Mutex<Vec<Keyspace>>,
    /// One writer at a time picks a memtable to seal.
    sealing: Mutex<()>,
    /// Writes that had to wait.
    held: AtomicU64,
}

impl WriteBudget {
    pub(crate) fn new(limit: u64) -> WriteBudget {
        WriteBudget {
            limit,
            open: Mutex::default(),
            sealing: Mutex::default(),
            held: AtomicU64::new(0),
        }
    }

    fn open(&self) -> std::sync::MutexGuard<'_, Vec<Keyspace>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts `ks` among the keyspaces whose memtables may be sealed.
    pub(crate) fn register(&self, ks: &Keyspace) {
        let mut open = self.open();
        if !open.iter().any(|o| o.name() == ks.name()) {
            open.push(ks.clone());
        }
    }

    /// Stops counting keyspace `name` (it is being dropped).
    pub(crate) fn forget(&self, name: &str) {
        self.open().retain(|o| o.name().as_ref() != name);
    }

    /// Returns once the node's memtables are within the cap (at once,
    /// nearly always), sealing the largest when nothing is being flushed.
    pub(crate) fn admit(&self, db: &Database) -> Result<()> {
        if db.write_buffer_size() <= self.limit {
            return Ok(());
        }
        self.held.fetch_add(1, Ordering::Relaxed);
        let start = Instant::now();
        loop {
            self.seal_largest_if_idle()?;
            std::thread::sleep(POLL);
            let held = db.write_buffer_size();
            if held <= self.limit {
                return Ok(());
            }
            if start.elapsed() >= MAX_HOLD {
                return Err(Error::Engine(format!(
                    "writes held for {} s: the write buffers ({held} bytes, cap {}) are not being written out to tables; check the disk's space and health, then retry",
                    MAX_HOLD.as_secs(),
                    self.limit
                )));
            }
        }
    }

    fn seal_largest_if_idle(&self) -> Result<()> {
        let Ok(_one) = self.sealing.try_lock() else {
            return Ok(());
        };
        let largest = {
            let open = self.open();
            if open.iter().any(|ks| ks.tree.sealed_memtable_count() > 0) {
                return Ok(());
            }
            open.iter()
                .max_by_key(|ks| ks.tree.active_memtable().size())
                .cloned()
        };
        if let Some(ks) = largest.filter(|ks| ks.tree.active_memtable().size() > 0) {
            ks.rotate_memtable().map_err(engine)?;
        }
        Ok(())
    }

    /// Writes that waited for the write buffers since the node started.
    pub(crate) fn held_writes(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }
}
