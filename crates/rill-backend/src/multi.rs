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
        match (self.route)(bucket_type, bucket) {
            None => Ok(self.backends[self.default].1.as_ref()),
            Some(name) => self
                .backends
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, b)| b.as_ref())
                .ok_or(Error::UndefinedBackend(name)),
        }
    }

    /// Every backend but `named`.
    fn others<'a>(&'a self, named: &'a dyn Backend) -> impl Iterator<Item = &'a dyn Backend> + 'a {
        self.backends
            .iter()
            .map(|(_, b)| b.as_ref())
            .filter(move |b| {
                !std::ptr::addr_eq(*b as *const dyn Backend, named as *const dyn Backend)
            })
    }

    /// The names of the backends, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.backends.iter().map(|(n, _)| n.as_str())
    }
}

impl Backend for MultiBackend {
    fn name(&self) -> &'static str {
        "riak_kv_multi_backend"
    }

    fn get(&self, k: &BKey) -> Result<Option<bytes::Bytes>> {
        let named = self.of(&k.bucket_type, &k.bucket)?;
        if let Some(v) = named.get(k)? {
            return Ok(Some(v));
        }
        for b in self.others(named) {
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
            Ok(None) if self.backends.len() > 1 => None,
            other => Some(other),
        }
    }

    fn contains(&self, k: &BKey) -> Result<bool> {
        let named = self.of(&k.bucket_type, &k.bucket)?;
        if named.contains(k)? {
            return Ok(true);
        }
        for b in self.others(named) {
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

    fn delete(&self, k: &BKey, remove: &[IndexEntry]) -> Result<()> {
        let named = self.of(&k.bucket_type, &k.bucket)?;
        named.delete(k, remove)?;
        for b in self.others(named) {
            if b.contains(k)? {
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
        let named = self.of(bucket_type, bucket)?;
        let mut go = true;
        named.fold_keys(bucket_type, bucket, &mut |k| {
            go = visit(k);
            go
        })?;
        let mut scanned = vec![named];
        for b in self.others(named) {
            if !go {
                break;
            }
            b.fold_keys(bucket_type, bucket, &mut |k| {
                let key = BKey {
                    bucket_type: bucket_type.to_vec(),
                    bucket: bucket.to_vec(),
                    key: k.to_vec(),
                };
                if !scanned.iter().any(|s| s.contains(&key).unwrap_or(false)) {
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
