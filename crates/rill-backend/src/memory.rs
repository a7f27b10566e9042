//! The memory backend (Riak's `riak_kv_memory_backend`): objects in RAM,
//! with an optional time to live and an optional size cap that evicts the
//! oldest writes first.

use crate::index::{IndexQuery, IndexSet, Term};
use crate::keys::{object_key, split, BKey, OBJECT};
use crate::{Backend, IndexEntry, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Default)]
pub struct MemoryOptions {
    /// Riak's `memory_backend.max_memory_per_vnode`: when the values and
    /// keys held pass this, the oldest writes are dropped.
    pub max_memory_bytes: Option<u64>,
    /// Riak's `memory_backend.ttl`: objects older than this read as absent.
    pub ttl: Option<Duration>,
}

struct Entry {
    /// Shared with readers: a get takes no copy (and no time under the
    /// lock) however large the value.
    value: bytes::Bytes,
    indexes: Vec<IndexEntry>,
    written: Instant,
    seq: u64,
}

#[derive(Default)]
struct Inner {
    objects: BTreeMap<Vec<u8>, Entry>,
    by_age: BTreeMap<u64, Vec<u8>>,
    used_bytes: u64,
    next_seq: u64,
}

pub struct MemoryBackend {
    opts: MemoryOptions,
    inner: Mutex<Inner>,
    index: IndexSet,
}

impl MemoryBackend {
    pub fn new(opts: MemoryOptions) -> MemoryBackend {
        MemoryBackend {
            opts,
            inner: Mutex::new(Inner::default()),
            index: IndexSet::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn expired(&self, e: &Entry) -> bool {
        self.opts.ttl.is_some_and(|ttl| e.written.elapsed() >= ttl)
    }

    fn drop_entry(&self, inner: &mut Inner, raw: &[u8]) {
        if let Some(e) = inner.objects.remove(raw) {
            inner.by_age.remove(&e.seq);
            inner.used_bytes -= (raw.len() + e.value.len()) as u64;
            if let Some((_, t, b, key)) = split(raw) {
                for (field, term) in &e.indexes {
                    self.index.remove(t, b, field, term, key);
                }
            }
        }
    }
}

impl Backend for MemoryBackend {
    fn name(&self) -> &'static str {
        "riak_kv_memory_backend"
    }

    fn contains(&self, k: &BKey) -> Result<bool> {
        let raw = object_key(k)?;
        let inner = self.lock();
        Ok(inner.objects.get(&raw).is_some_and(|e| !self.expired(e)))
    }

    /// Memory never waits for a device; a scan holding the lock, or a
    /// value over `NOWAIT_MAX_BYTES` (its copy and encoding are work for
    /// a thread that may take its time), is left to `get`.
    fn try_get(&self, k: &BKey) -> Option<Result<Option<bytes::Bytes>>> {
        let raw = match object_key(k) {
            Ok(raw) => raw,
            Err(e) => return Some(Err(e)),
        };
        let inner = match self.inner.try_lock() {
            Ok(inner) => inner,
            Err(std::sync::TryLockError::WouldBlock) => return None,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        };
        match inner.objects.get(&raw) {
            // An expired entry is dropped by `get`.
            Some(e) if self.expired(e) => None,
            Some(e) if e.value.len() > crate::NOWAIT_MAX_BYTES => None,
            Some(e) => Some(Ok(Some(e.value.clone()))),
            None => Some(Ok(None)),
        }
    }

    fn get(&self, k: &BKey) -> Result<Option<bytes::Bytes>> {
        let raw = object_key(k)?;
        let mut inner = self.lock();
        match inner.objects.get(&raw) {
            Some(e) if self.expired(e) => {
                self.drop_entry(&mut inner, &raw);
                Ok(None)
            }
            Some(e) => Ok(Some(e.value.clone())),
            None => Ok(None),
        }
    }

    fn put(&self, k: &BKey, value: &[u8], add: &[IndexEntry], remove: &[IndexEntry]) -> Result<()> {
        let raw = object_key(k)?;
        if let Some(max) = self.opts.max_memory_bytes {
            let need = (raw.len() + value.len()) as u64;
            if need > max {
                return Err(crate::Error::MemoryFull {
                    used_bytes: need,
                    max_bytes: max,
                });
            }
        }
        // The copy is made before the lock, so a large value does not
        // hold up the vnode's other keys while it is copied.
        let stored = bytes::Bytes::copy_from_slice(value);
        let mut inner = self.lock();
        let mut indexes = match inner.objects.get(&raw) {
            Some(e) => e.indexes.clone(),
            None => Vec::new(),
        };
        self.drop_entry(&mut inner, &raw);
        for (field, term) in remove {
            indexes.retain(|(f, t)| !(f == field && t == term));
        }
        for (field, term) in add {
            if !indexes.iter().any(|(f, t)| f == field && t == term) {
                indexes.push((field.clone(), term.clone()));
            }
        }
        for (field, term) in &indexes {
            self.index
                .add(&k.bucket_type, &k.bucket, field, term.clone(), &k.key);
        }
        let seq = inner.next_seq;
        inner.next_seq += 1;
        inner.used_bytes += (raw.len() + value.len()) as u64;
        inner.by_age.insert(seq, raw.clone());
        inner.objects.insert(
            raw,
            Entry {
                value: stored,
                indexes,
                written: Instant::now(),
                seq,
            },
        );
        if let Some(max) = self.opts.max_memory_bytes {
            while inner.used_bytes > max {
                let Some((_, oldest)) = inner.by_age.iter().next().map(|(s, r)| (*s, r.clone()))
                else {
                    break;
                };
                self.drop_entry(&mut inner, &oldest);
            }
        }
        Ok(())
    }

    fn delete(&self, k: &BKey, _remove: &[IndexEntry]) -> Result<()> {
        let raw = object_key(k)?;
        let mut inner = self.lock();
        self.drop_entry(&mut inner, &raw);
        Ok(())
    }

    fn fold_buckets(&self, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        let inner = self.lock();
        let mut seen = BTreeSet::new();
        for (raw, e) in &inner.objects {
            if self.expired(e) {
                continue;
            }
            if let Some((OBJECT, t, b, _)) = split(raw) {
                if seen.insert((t.to_vec(), b.to_vec())) && !visit(t, b) {
                    break;
                }
            }
        }
        Ok(())
    }

    fn fold_keys(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<()> {
        let prefix = crate::keys::bucket_prefix(OBJECT, bucket_type, bucket)?;
        // Keys are taken a chunk at a time and visited with the lock
        // released, so a slow reader (a client taking a streamed list)
        // never holds up writers.
        const CHUNK: usize = 1000;
        let mut from = std::ops::Bound::Included(prefix.clone());
        loop {
            let chunk: Vec<Vec<u8>> = {
                let inner = self.lock();
                inner
                    .objects
                    .range((from.clone(), std::ops::Bound::Unbounded))
                    .take_while(|(raw, _)| raw.starts_with(&prefix))
                    .filter(|(_, e)| !self.expired(e))
                    .take(CHUNK)
                    .map(|(raw, _)| raw.clone())
                    .collect()
            };
            for raw in &chunk {
                if !visit(&raw[prefix.len()..]) {
                    return Ok(());
                }
            }
            match chunk.into_iter().last() {
                Some(last) => from = std::ops::Bound::Excluded(last),
                None => return Ok(()),
            }
        }
    }

    fn query_index(
        &self,
        q: &IndexQuery,
        visit: &mut dyn FnMut(&Term, &[u8]) -> bool,
    ) -> Result<()> {
        if self.opts.ttl.is_none() {
            self.index.query(q, visit);
            return Ok(());
        }
        // With a TTL, entries of expired objects are skipped.
        let inner = self.lock();
        self.index.query(q, &mut |term, key| {
            let live = object_key(&BKey::new(&q.bucket_type, &q.bucket, key))
                .ok()
                .and_then(|raw| inner.objects.get(&raw).map(|e| !self.expired(e)))
                .unwrap_or(false);
            !live || visit(term, key)
        });
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn size_bytes(&self) -> u64 {
        self.lock().used_bytes
    }
}
