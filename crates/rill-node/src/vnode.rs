//! One partition's replica store: objects in a backend, read-merge-write
//! under a striped lock.

use crate::error::KvError;
use rill_backend::{BKey, Backend, IndexEntry, Term};
use rill_object::{decode_object, encode_object, Object, VClock};
use rill_ring::Partition;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

const STRIPES: usize = 64;

/// Size and sibling limits applied to every stored object.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub size_warning_bytes: usize,
    pub size_max_bytes: usize,
    pub siblings_warning: usize,
    pub siblings_max: usize,
}

pub(crate) struct Vnode {
    pub partition: Partition,
    /// The vnode's id (8 bytes) and this run's epoch (4 bytes): the prefix
    /// of every actor it writes as.
    actor_base: Vec<u8>,
    /// Numbers the incarnations of keys this vnode starts in this epoch.
    incarnations: AtomicU32,
    backend: Box<dyn Backend>,
    stripes: Vec<Mutex<()>>,
}

/// An object's index metadata as backend entries.
pub(crate) fn index_terms(o: &Object) -> Vec<IndexEntry> {
    o.index_entries()
        .into_iter()
        .map(|(field, term)| {
            let t = if field.ends_with(b"_int") {
                std::str::from_utf8(&term)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .map(Term::Int)
                    .unwrap_or(Term::Bin(term))
            } else {
                Term::Bin(term)
            };
            (field, t)
        })
        .collect()
}

impl Vnode {
    pub fn new(
        partition: Partition,
        vnode_id: &[u8],
        epoch: u32,
        backend: Box<dyn Backend>,
    ) -> Vnode {
        let mut actor_base = vnode_id.to_vec();
        actor_base.extend_from_slice(&epoch.to_be_bytes());
        Vnode {
            partition,
            actor_base,
            incarnations: AtomicU32::new(0),
            backend,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }

    /// The actor this vnode coordinates a write of `stored` as.
    ///
    /// An actor's counter must never be issued twice, or a replica would
    /// take a new write for one it has seen (Riak's per-key epochs). So a
    /// vnode writes a key as `vnode id | run epoch | incarnation`: a new
    /// incarnation whenever it holds nothing for the key (it may have lost
    /// or reaped it while other replicas kept it), else the newest of its
    /// own incarnations in the stored clock, whose count is then complete.
    /// A restart starts a new epoch, so counters of writes a machine crash
    /// lost are not reused either.
    pub fn actor_for(&self, stored: Option<&Object>) -> Vec<u8> {
        let len = self.actor_base.len() + 4;
        let own = stored.and_then(|o| {
            o.clock
                .entries()
                .map(|(a, _, _)| a)
                .filter(|a| a.len() == len && a.starts_with(&self.actor_base))
                .max()
                .cloned()
        });
        own.unwrap_or_else(|| {
            let mut a = self.actor_base.clone();
            a.extend_from_slice(
                &self
                    .incarnations
                    .fetch_add(1, Ordering::Relaxed)
                    .to_be_bytes(),
            );
            a
        })
    }

    pub fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    fn lock(&self, k: &BKey) -> MutexGuard<'_, ()> {
        let mut h = 0xcbf29ce484222325u64;
        for b in k.bucket.iter().chain(k.key.iter()) {
            h = (h ^ u64::from(*b)).wrapping_mul(0x100000001b3);
        }
        self.stripes[(h % STRIPES as u64) as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, k: &BKey) -> Result<Option<Object>, KvError> {
        match self.backend.get(k)? {
            None => Ok(None),
            Some(bytes) => decode_object(&bytes).map(Some).map_err(|e| {
                tracing::error!(partition = self.partition.0, error = %e, "stored object does not decode");
                KvError::Backend(format!("stored object does not decode: {e}"))
            }),
        }
    }

    /// Reads the key, lets `update` compute the new object from what is
    /// stored, checks limits, and writes it with its index changes.
    /// Returns what was stored, or `None` when `update` chose not to write.
    pub fn update(
        &self,
        k: &BKey,
        limits: &Limits,
        update: impl FnOnce(Option<&Object>) -> Result<Option<Object>, KvError>,
    ) -> Result<Option<Object>, KvError> {
        let _guard = self.lock(k);
        let stored = self.get(k)?;
        let Some(new) = update(stored.as_ref())? else {
            return Ok(None);
        };
        if stored.as_ref() == Some(&new) {
            return Ok(Some(new));
        }
        let bytes = encode_object(&new);
        let size = bytes.len();
        if size > limits.size_max_bytes {
            return Err(KvError::TooLarge {
                size_bytes: size,
                max_bytes: limits.size_max_bytes,
            });
        }
        if size > limits.size_warning_bytes {
            tracing::warn!(bucket = %String::from_utf8_lossy(&k.bucket), key = %String::from_utf8_lossy(&k.key), size, "object larger than object.size.warning_threshold");
        }
        let n = new.contents.len();
        if n > limits.siblings_max {
            return Err(KvError::TooManySiblings(n));
        }
        if n > limits.siblings_warning {
            tracing::warn!(bucket = %String::from_utf8_lossy(&k.bucket), key = %String::from_utf8_lossy(&k.key), siblings = n, "more siblings than object.siblings.warning_threshold");
        }
        let old_terms = stored.as_ref().map(index_terms).unwrap_or_default();
        let new_terms = index_terms(&new);
        let add: Vec<IndexEntry> = new_terms
            .iter()
            .filter(|e| !old_terms.contains(e))
            .cloned()
            .collect();
        let remove: Vec<IndexEntry> = old_terms
            .iter()
            .filter(|e| !new_terms.contains(e))
            .cloned()
            .collect();
        self.backend.put(k, &bytes, &add, &remove)?;
        Ok(Some(new))
    }

    /// Removes a tombstone whose clock is still `clock`; true if removed.
    pub fn reap(&self, k: &BKey, clock: &VClock) -> Result<bool, KvError> {
        let _guard = self.lock(k);
        match self.get(k)? {
            Some(o) if o.is_tombstone() && &o.clock == clock => {
                self.backend.delete(k, &index_terms(&o))?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
