//! The node's cap on leveldb write buffers (the write-buffer share of
//! `leveldb.maximum_memory`, see `LeveldbStore::open`).
//!
//! fjall 3.1 counts the bytes of its memtables, active and sealed, over
//! every keyspace, but holds writes only per keyspace (at four sealed
//! memtables) and seals a memtable only when it passes its own size; its
//! database-wide cap is a setting it stores and does not read. With a
//! keyspace per vnode, the memtables waiting for a flush could then take
//! several times the budget. So a write waits here while the memtables
//! are over the cap; when none is sealed (so none is being written out),
//! the largest active ones are sealed, enough to cover the excess, so the
//! total falls even when no single memtable is full.
//!
//! fjall's count never forgets the bytes of a dropped keyspace's
//! memtables; a drop writes them out first and what is left is
//! subtracted ([`WriteBudget::dropped`]). When the count is over the cap
//! and no open keyspace holds anything to seal, the write goes on (bytes
//! this budget cannot explain must not stop the node). A write fails with a busy
//! error a client may retry when the count has not fallen for
//! [`MAX_STALL`] (flushes making no progress mean a full or failing
//! disk), and at once when fjall has stopped (a failed flush).
//!
//! fjall seals a full memtable when its first thread (the one that only
//! writes memtables out) takes the request; while it was busy writing out
//! and the others compacting, the active memtable grew to 20 times its
//! size in `rill-bench ingest`, and its flush then held writes for most
//! of a second. A write that leaves its memtable half as large again as
//! the store's memtable size seals it itself ([`WriteBudget::committed`]),
//! so no flush is much larger than a memtable (a partition made with a
//! larger size, before a change of the budget, is sealed at this bound
//! too).

use crate::leveldb::engine;
use crate::{Error, Result};
use fjall::{AbstractTree, Database, Keyspace, PersistMode};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub(crate) const MAX_STALL: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(2);

pub(crate) struct WriteBudget {
    /// Bytes of memtables the node may hold.
    limit: u64,
    /// The store's memtable size (fjall seals a memtable past it).
    memtable: u64,
    /// One writer at a time seals an outgrown memtable.
    sealing_outgrown: Mutex<()>,
    /// Bytes fjall still counts for keyspaces dropped since the start.
    dropped: AtomicU64,
    /// The keyspaces open for writing (fjall lists names only, and
    /// opening one by name makes it if it is gone).
    open: Mutex<Vec<Keyspace>>,
    /// One waiting writer at a time counts the memtables and seals.
    sealing: Mutex<()>,
    /// Writes that had to wait.
    held_writes: AtomicU64,
}

impl WriteBudget {
    pub(crate) fn new(limit: u64, memtable: u64) -> WriteBudget {
        WriteBudget {
            limit,
            memtable,
            sealing_outgrown: Mutex::default(),
            dropped: AtomicU64::new(0),
            open: Mutex::default(),
            sealing: Mutex::default(),
            held_writes: AtomicU64::new(0),
        }
    }

    fn open(&self) -> MutexGuard<'_, Vec<Keyspace>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts `ks` among the keyspaces whose memtables may be sealed (in
    /// the place of a handle of the same name: a keyspace made again).
    pub(crate) fn register(&self, ks: &Keyspace) {
        let mut open = self.open();
        open.retain(|o| o.name() != ks.name());
        open.push(ks.clone());
    }

    /// Stops counting keyspace `name` (it was dropped), whose memtables
    /// held `unflushed` bytes fjall goes on counting.
    pub(crate) fn dropped(&self, name: &str, unflushed: u64) {
        self.open().retain(|o| o.name().as_ref() != name);
        self.dropped.fetch_add(unflushed, Ordering::Relaxed);
    }

    /// The bytes of the open keyspaces' memtables, as fjall counts them.
    fn memtable_bytes(&self, db: &Database) -> u64 {
        db.write_buffer_size()
            .saturating_sub(self.dropped.load(Ordering::Relaxed))
    }

    /// Returns once the node's memtables are within the cap (at once,
    /// nearly always), sealing the largest when nothing is being flushed.
    pub(crate) fn admit(&self, db: &Database) -> Result<()> {
        let held = self.memtable_bytes(db);
        if held <= self.limit {
            return Ok(());
        }
        let mut counted = false;
        let mut least = u64::MAX;
        let mut progress = Instant::now();
        let mut excess = held - self.limit;
        loop {
            if let Ok(_one) = self.sealing.try_lock() {
                if !self.any_sealed() && !self.seal(excess)? {
                    tracing::warn!(
                        held_bytes = excess + self.limit,
                        cap = self.limit,
                        "leveldb write buffers over the cap with nothing to write out: write let through"
                    );
                    return Ok(());
                }
            }
            if !counted {
                counted = true;
                self.held_writes.fetch_add(1, Ordering::Relaxed);
            }
            std::thread::sleep(POLL);
            let now = self.memtable_bytes(db);
            if now <= self.limit {
                return Ok(());
            }
            excess = now - self.limit;
            if now < least {
                least = now;
                progress = Instant::now();
            }
            // A failed flush stops fjall: every write would fail.
            db.persist(PersistMode::Buffer).map_err(engine)?;
            if progress.elapsed() >= MAX_STALL {
                tracing::warn!(
                    held_bytes = now,
                    cap = self.limit,
                    "leveldb writes held: the write buffers have not been written out for {} s",
                    MAX_STALL.as_secs()
                );
                return Err(Error::Busy(format!(
                    "the leveldb write buffers are full and have not been written out to tables for {} s; retry later",
                    MAX_STALL.as_secs()
                )));
            }
        }
    }

    /// After a write to `ks`: seals its memtable when it has outgrown
    /// the store's memtable size by half (fjall's own request waits for a
    /// free thread). The write is already done: a failure here is logged,
    /// not returned (a broken database fails the next write anyway).
    pub(crate) fn committed(&self, ks: &Keyspace) {
        let bound = self.memtable + self.memtable / 2;
        let active = ks.tree.active_memtable();
        if active.size() <= bound {
            return;
        }
        // Writers that all saw it outgrown seal it once: the first takes
        // the lock, the others go on; under the lock, the memtable must
        // still be the one measured (fjall seals whichever is active).
        let Ok(_one) = self.sealing_outgrown.try_lock() else {
            return;
        };
        let now = ks.tree.active_memtable();
        if now.id() != active.id() || now.size() <= bound {
            return;
        }
        if let Err(e) = ks.rotate_memtable() {
            tracing::warn!(error = %e, "sealing an outgrown leveldb memtable failed");
        }
    }

    /// Whether an open keyspace has a memtable sealed (being written out).
    fn any_sealed(&self) -> bool {
        self.open()
            .iter()
            .any(|ks| ks.tree.sealed_memtable_count() > 0)
    }

    /// Seals the largest active memtables, at least `excess` bytes of
    /// them (while any holds something); false if none held anything.
    fn seal(&self, excess: u64) -> Result<bool> {
        let mut all: Vec<(u64, Keyspace)> = self
            .open()
            .iter()
            .map(|ks| (ks.tree.active_memtable().size(), ks.clone()))
            .filter(|(size, _)| *size > 0)
            .collect();
        all.sort_by_key(|(size, _)| std::cmp::Reverse(*size));
        let any = !all.is_empty();
        let mut sealed = 0;
        for (size, ks) in all {
            if sealed >= excess {
                break;
            }
            ks.rotate_memtable().map_err(engine)?;
            sealed += size;
        }
        Ok(any)
    }

    /// The store's memtable size.
    pub(crate) fn memtable_size(&self) -> u64 {
        self.memtable
    }

    /// The most level-0 runs and sealed memtables of any open keyspace.
    pub(crate) fn pressure(&self) -> crate::leveldb::Pressure {
        let mut p = crate::leveldb::Pressure::default();
        for ks in self.open().iter() {
            p.l0_runs = p.l0_runs.max(ks.tree.l0_run_count());
            p.sealed_memtables = p.sealed_memtables.max(ks.tree.sealed_memtable_count());
        }
        p
    }

    /// Writes that waited for the write buffers since the node started.
    pub(crate) fn held_writes(&self) -> u64 {
        self.held_writes.load(Ordering::Relaxed)
    }
}
