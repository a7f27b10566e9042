//! One vnode's data in the node's leveldb database (a keyspace of
//! `LeveldbStore`'s fjall database): reads, puts and deletes as atomic
//! batches held by the node's write budget, index queries, and the bulk
//! copier of repairs and migrations.

use crate::batch_gate::BatchGate;
use crate::index::{IndexQuery, Term};
use crate::keys::{
    bucket_prefix, index_field_prefix, index_keys, index_position, object_key, prefix_successor,
    split, split_position, term_prefix, BKey, OBJECT,
};
use crate::leveldb::engine;
use crate::write_budget::WriteBudget;
use crate::{Backend, Error, IndexEntry, Result};
use fjall::{Database, Keyspace, PersistMode};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Every key a batch writes or removes fits the engine's key size.
fn check_key_lengths<'a>(mut keys: impl Iterator<Item = &'a Vec<u8>>) -> Result<()> {
    match keys.find(|k| k.len() > MAX_KEY_BYTES) {
        Some(long) => Err(Error::KeyTooLarge(long.len())),
        None => Ok(()),
    }
}

/// One vnode's data in the node's leveldb database.
pub struct LeveldbBackend {
    pub(crate) db: Database,
    pub(crate) ks: Keyspace,
    /// Reads that met a damaged block, all the node's partitions.
    pub(crate) damaged: Arc<AtomicU64>,
    pub(crate) budget: Arc<WriteBudget>,
    /// Commits shared, snapshots alone: see [`BatchGate`].
    pub(crate) gate: Arc<BatchGate>,
    pub(crate) durability: PersistMode,
}

impl LeveldbBackend {
    /// A read's error: a damaged block is counted (and logged by the
    /// caller with the key's request).
    pub(crate) fn read_err(&self, e: fjall::Error) -> Error {
        let e = engine(e);
        if matches!(e, Error::Corrupt(_)) {
            self.damaged.fetch_add(1, Ordering::Relaxed);
        }
        e
    }

    /// Adds a put's changes to `batch`: `value` under the object's key,
    /// index entries in `remove` dropped and those in `add` added; returns
    /// the object's key.
    pub(crate) fn put_into(
        &self,
        batch: &mut fjall::OwnedWriteBatch,
        k: &BKey,
        value: &[u8],
        add: &[IndexEntry],
        remove: &[IndexEntry],
    ) -> Result<Vec<u8>> {
        let obj = object_key(k)?;
        let added = index_keys(k, add)?;
        let removed = index_keys(k, remove.iter().filter(|r| !add.contains(r)))?;
        check_key_lengths(added.iter().chain(&removed).chain(std::iter::once(&obj)))?;
        if value.len() > MAX_VALUE_BYTES {
            return Err(Error::ValueTooLarge(value.len()));
        }
        for key in removed {
            batch.remove(&self.ks, key);
        }
        for key in added {
            batch.insert(&self.ks, key, b"");
        }
        batch.insert(&self.ks, obj.as_slice(), value);
        Ok(obj)
    }

    /// Adds a delete's changes to `batch`; returns the object's key.
    pub(crate) fn delete_into(
        &self,
        batch: &mut fjall::OwnedWriteBatch,
        k: &BKey,
        remove: &[IndexEntry],
    ) -> Result<Vec<u8>> {
        let obj = object_key(k)?;
        let keys = index_keys(k, remove)?;
        check_key_lengths(keys.iter().chain(std::iter::once(&obj)))?;
        for key in keys {
            batch.remove(&self.ks, key);
        }
        batch.remove(&self.ks, obj.as_slice());
        Ok(obj)
    }

    pub(crate) fn commit(&self, batch: fjall::OwnedWriteBatch) -> Result<()> {
        self.budget.admit(&self.db)?;
        self.gate
            .commit(batch.durability(Some(self.durability)))
            .map_err(engine)?;
        self.budget.committed(&self.ks);
        Ok(())
    }

    /// Visits keys from `start` up to `end` (excluded; `None`: to the
    /// last); `visit` returns false to stop. A `snapshot` scan sees the
    /// keys as they were when it began, every batch whole or not at all;
    /// otherwise it sees each key as it is when reached (never overrun,
    /// however long it takes, but a key moved ahead of it by a write is
    /// seen twice).
    fn scan(
        &self,
        start: &[u8],
        end: Option<Vec<u8>>,
        snapshot: bool,
        visit: &mut dyn FnMut(&[u8]) -> Result<bool>,
    ) -> Result<()> {
        let range = (
            Bound::Included(start.to_vec()),
            end.map_or(Bound::Unbounded, Bound::Excluded),
        );
        let items = if snapshot {
            fjall::Readable::range::<Vec<u8>, _>(&self.gate.snapshot(&self.db), &self.ks, range)
        } else {
            self.ks.range::<Vec<u8>, _>(range)
        };
        for item in items {
            let key = item.key().map_err(|e| self.read_err(e))?;
            if !visit(&key)? {
                break;
            }
        }
        Ok(())
    }
}

impl Backend for LeveldbBackend {
    fn name(&self) -> &'static str {
        "riak_kv_eleveldb_backend"
    }

    fn get(&self, k: &BKey) -> Result<Option<bytes::Bytes>> {
        let v = self.ks.get(object_key(k)?).map_err(|e| self.read_err(e))?;
        Ok(v.map(|v| bytes::Bytes::copy_from_slice(&v)))
    }

    fn contains(&self, k: &BKey) -> Result<bool> {
        self.ks
            .contains_key(object_key(k)?)
            .map_err(|e| self.read_err(e))
    }

    fn put(&self, k: &BKey, value: &[u8], add: &[IndexEntry], remove: &[IndexEntry]) -> Result<()> {
        let mut batch = self.db.batch();
        self.put_into(&mut batch, k, value, add, remove)?;
        self.commit(batch)
    }

    fn delete(&self, k: &BKey, remove: &[IndexEntry]) -> Result<()> {
        let mut batch = self.db.batch();
        self.delete_into(&mut batch, k, remove)?;
        self.commit(batch)
    }

    fn fold_buckets(&self, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        // One seek per bucket: after a bucket's first key, on to the
        // successor of its prefix.
        let mut start = vec![OBJECT];
        let end = prefix_successor(&[OBJECT]);
        loop {
            let mut next = None;
            self.scan(&start, end.clone(), false, &mut |raw| {
                next = split(raw).map(|(_, t, b, _)| (t.to_vec(), b.to_vec()));
                Ok(false)
            })?;
            let Some((t, b)) = next else {
                return Ok(());
            };
            if !visit(&t, &b) {
                return Ok(());
            }
            match prefix_successor(&bucket_prefix(OBJECT, &t, &b)?) {
                Some(s) => start = s,
                None => return Ok(()),
            }
        }
    }

    fn holds_objects(&self) -> Result<bool> {
        let mut any = false;
        self.scan(&[OBJECT], prefix_successor(&[OBJECT]), false, &mut |_| {
            any = true;
            Ok(false)
        })?;
        Ok(any)
    }

    fn fold_keys(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<()> {
        let prefix = bucket_prefix(OBJECT, bucket_type, bucket)?;
        self.scan(&prefix, prefix_successor(&prefix), false, &mut |raw| {
            Ok(visit(&raw[prefix.len()..]))
        })
    }

    fn query_index(
        &self,
        q: &IndexQuery,
        visit: &mut dyn FnMut(&Term, &[u8]) -> bool,
    ) -> Result<()> {
        let field = index_field_prefix(&q.bucket_type, &q.bucket, &q.field)?;
        let (lo, hi) = q.range.bounds();
        let mut start = field.clone();
        start.extend_from_slice(&term_prefix(lo));
        if let Some((t, key)) = &q.after {
            let mut after = field.clone();
            after.extend_from_slice(&index_position(t, key));
            // Strictly after it: the least key greater than `after`.
            after.push(0);
            start = start.max(after);
        }
        let mut end = field.clone();
        end.extend_from_slice(&term_prefix(hi));
        let end = prefix_successor(&end);
        let mut bad = 0u64;
        // A snapshot: a query never sees both the entry a write removed
        // and the one it added (pages are short; a continuation resumes).
        self.scan(
            &start,
            end,
            true,
            &mut |raw| match split_position(&raw[field.len()..]) {
                Some((term, key)) => Ok(visit(&term, key)),
                None => {
                    bad += 1;
                    Ok(true)
                }
            },
        )?;
        if bad > 0 {
            tracing::warn!(bad, "index entries that do not decode were skipped");
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.db.persist(PersistMode::SyncAll).map_err(engine)
    }

    fn size_bytes(&self) -> u64 {
        self.ks.disk_space()
    }
}

/// fjall's limits: keys up to 64 KiB, values below 4 GiB; Rill keeps
/// values to 256 MiB, as its peer messages do.
const MAX_KEY_BYTES: usize = 65535;
pub(crate) const MAX_VALUE_BYTES: usize = 256 << 20;

/// Inserts of a copy into keyspace `to`, committed every few MiB (each
/// commit in the kernel; the copier's caller makes the copy durable).
pub(crate) struct Copier<'a> {
    db: &'a Database,
    budget: &'a WriteBudget,
    gate: &'a BatchGate,
    to: &'a Keyspace,
    batch: fjall::OwnedWriteBatch,
    bytes: usize,
}

impl<'a> Copier<'a> {
    pub(crate) fn new(
        db: &'a Database,
        budget: &'a WriteBudget,
        gate: &'a BatchGate,
        to: &'a Keyspace,
    ) -> Copier<'a> {
        Copier {
            db,
            budget,
            gate,
            to,
            batch: db.batch(),
            bytes: 0,
        }
    }

    pub(crate) fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.bytes += key.len() + value.len();
        self.batch.insert(self.to, key, value);
        // A batch no larger than a memtable, so a copy's memtables stay
        // their size as a vnode's do.
        if self.bytes as u64 >= self.budget.memtable_size().min(4 << 20) {
            let full = std::mem::replace(&mut self.batch, self.db.batch());
            self.bytes = 0;
            self.commit(full)?;
        }
        Ok(())
    }

    fn commit(&self, batch: fjall::OwnedWriteBatch) -> Result<()> {
        self.budget.admit(self.db)?;
        self.gate
            .commit(batch.durability(Some(PersistMode::Buffer)))
            .map_err(engine)?;
        self.budget.committed(self.to);
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<()> {
        let last = std::mem::replace(&mut self.batch, self.db.batch());
        self.commit(last)
    }
}
