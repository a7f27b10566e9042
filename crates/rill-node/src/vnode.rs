//! One partition's replica store: objects in a backend, read-merge-write
//! under a striped lock.

use crate::error::KvError;
use rill_backend::{BKey, Backend, IndexEntry, Term};
use rill_object::{decode_object, encode_object, Object, VClock};
use rill_ring::Partition;
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
    pub actor: Vec<u8>,
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

fn object_bytes(o: &Object) -> usize {
    o.contents.iter().map(|c| c.value.len() + 64).sum()
}

impl Vnode {
    pub fn new(partition: Partition, actor: Vec<u8>, backend: Box<dyn Backend>) -> Vnode {
        Vnode {
            partition,
            actor,
            backend,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        }
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
        let size = object_bytes(&new);
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
        self.backend.put(k, &encode_object(&new), &add, &remove)?;
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
