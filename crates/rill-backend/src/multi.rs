//! The multi backend (`storage_backend = multi`): several named backends
//! in one vnode, each bucket's data in the one its `backend` property
//! names (Riak's `riak_kv_multi_backend`), the default where it names
//! none. A bucket naming a backend the node does not have gets a clear
//! error, never another backend's data.
//!
//! A bucket whose `backend` property changes keeps its older keys where
//! they were written: writes go to the backend now named, a read that
//! finds nothing there looks in the others, a delete removes the key from
//! every backend (so nothing deleted comes back), and key listings (and so
//! handoff) cover every backend. Index queries ask the backend now named.

use crate::index::{IndexQuery, Term};
use crate::{BKey, Backend, Error, IndexEntry, Result};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Which backend a bucket's `backend` property names: `None` for none.
pub type Router = Arc<dyn Fn(&[u8], &[u8]) -> Option<String> + Send + Sync>;

pub struct MultiBackend {
    backends: Vec<(String, Box<dyn Backend>)>,
    default: usize,
    route: Router,
}

impl MultiBackend {
    /// `backends` by name; `default` must be one of them.
    pub fn new(
        backends: Vec<(String, Box<dyn Backend>)>,
        default: &str,
        route: Router,
    ) -> Result<MultiBackend> {
        let default = backends
            .iter()
            .position(|(n, _)| n == default)
            .ok_or_else(|| Error::UndefinedBackend(default.to_string()))?;
        Ok(MultiBackend {
            backends,
            default,
            route,
        })
    }

    /// The backend of a bucket.
    fn of(&self, bucket_type: &[u8], bucket: &[u8]) -> Result<&dyn Backend> {
        Ok(self.backends[self.index_of(bucket_type, bucket)?]
            .1
            .as_ref())
    }

    fn index_of(&self, bucket_type: &[u8], bucket: &[u8]) -> Result<usize> {
        match (self.route)(bucket_type, bucket) {
            None => Ok(self.default),
            Some(name) => self
                .backends
                .iter()
                .position(|(n, _)| *n == name)
                .ok_or(Error::UndefinedBackend(name)),
        }
    }

    /// Every backend, the bucket's own first: where a key the bucket
    /// wrote before its property changed may still be.
    fn in_order(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
    ) -> Result<impl Iterator<Item = &dyn Backend>> {
        let first = self.index_of(bucket_type, bucket)?;
        let rest = (0..self.backends.len()).filter(move |i| *i != first);
        Ok(std::iter::once(first)
            .chain(rest)
            .map(|i| self.backends[i].1.as_ref()))
    }
}

impl Backend for MultiBackend {
    fn name(&self) -> &'static str {
        "riak_kv_multi_backend"
    }

    fn get(&self, k: &BKey) -> Result<Option<bytes::Bytes>> {
        for b in self.in_order(&k.bucket_type, &k.bucket)? {
            if let Some(v) = b.get(k)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    fn try_get(&self, k: &BKey) -> Option<Result<Option<bytes::Bytes>>> {
        let named = match self.of(&k.bucket_type, &k.bucket) {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        match named.try_get(k)? {
            // The others may hold it: `get` looks, where it may wait.
            Ok(None) if self.backends.len() > 1 => None,
            other => Some(other),
        }
    }

    fn contains(&self, k: &BKey) -> Result<bool> {
        for b in self.in_order(&k.bucket_type, &k.bucket)? {
            if b.contains(k)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn put(&self, k: &BKey, value: &[u8], add: &[IndexEntry], remove: &[IndexEntry]) -> Result<()> {
        self.of(&k.bucket_type, &k.bucket)?
            .put(k, value, add, remove)
    }

    fn keeps_heads(&self) -> bool {
        self.backends.iter().any(|(_, b)| b.keeps_heads())
    }

    fn put_with_head(
        &self,
        k: &BKey,
        value: &[u8],
        head: &[u8],
        add: &[IndexEntry],
        remove: &[IndexEntry],
    ) -> Result<()> {
        self.of(&k.bucket_type, &k.bucket)?
            .put_with_head(k, value, head, add, remove)
    }

    fn get_head(&self, k: &BKey) -> Option<Result<Option<bytes::Bytes>>> {
        let named = match self.of(&k.bucket_type, &k.bucket) {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        match named.get_head(k)? {
            // The others may hold it: a whole read looks in each.
            Ok(None) if self.backends.len() > 1 => None,
            other => Some(other),
        }
    }

    /// The bucket's current backend's heads (as its index queries).
    fn fold_heads(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.of(bucket_type, bucket)?
            .fold_heads(bucket_type, bucket, visit)
    }

    fn delete(&self, k: &BKey, remove: &[IndexEntry]) -> Result<()> {
        // From every backend holding it, so nothing deleted comes back.
        for (i, b) in self.in_order(&k.bucket_type, &k.bucket)?.enumerate() {
            if i == 0 || b.contains(k)? {
                b.delete(k, remove)?;
            }
        }
        Ok(())
    }

    /// Every backend's buckets, each bucket once (a bucket whose
    /// property changed may hold keys in two).
    fn fold_buckets(&self, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        let mut seen = BTreeSet::new();
        for (_, b) in &self.backends {
            b.fold_buckets(&mut |t, bucket| {
                seen.insert((t.to_vec(), bucket.to_vec()));
                true
            })?;
        }
        for (t, b) in &seen {
            if !visit(t, b) {
                break;
            }
        }
        Ok(())
    }

    fn holds_objects(&self) -> Result<bool> {
        for (_, b) in &self.backends {
            if b.holds_objects()? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn fold_keys(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<()> {
        // The bucket's backend first, then keys only the others hold.
        let mut scanned: Vec<&dyn Backend> = Vec::new();
        let mut go = true;
        for b in self.in_order(bucket_type, bucket)? {
            if !go {
                break;
            }
            b.fold_keys(bucket_type, bucket, &mut |k| {
                let seen = !scanned.is_empty() && {
                    let key = BKey::new(bucket_type, bucket, k);
                    scanned.iter().any(|s| s.contains(&key).unwrap_or(false))
                };
                if !seen {
                    go = visit(k);
                }
                go
            })?;
            scanned.push(b);
        }
        Ok(())
    }

    fn query_index(
        &self,
        q: &IndexQuery,
        visit: &mut dyn FnMut(&Term, &[u8]) -> bool,
    ) -> Result<()> {
        self.of(&q.bucket_type, &q.bucket)?.query_index(q, visit)
    }

    fn sync(&self) -> Result<()> {
        for (_, b) in &self.backends {
            b.sync()?;
        }
        Ok(())
    }

    fn size_bytes(&self) -> u64 {
        self.backends.iter().map(|(_, b)| b.size_bytes()).sum()
    }
}
