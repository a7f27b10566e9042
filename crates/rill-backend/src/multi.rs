//! The multi backend (`storage_backend = multi`): several named backends
//! in one vnode, each bucket's data in the one its `backend` property
//! names (Riak's `riak_kv_multi_backend`), the default where it names
//! none. A bucket naming a backend the node does not have gets a clear
//! error, never another backend's data.

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
        self.of(&k.bucket_type, &k.bucket)?.get(k)
    }

    fn try_get(&self, k: &BKey) -> Option<Result<Option<bytes::Bytes>>> {
        match self.of(&k.bucket_type, &k.bucket) {
            Ok(b) => b.try_get(k),
            Err(e) => Some(Err(e)),
        }
    }

    fn contains(&self, k: &BKey) -> Result<bool> {
        self.of(&k.bucket_type, &k.bucket)?.contains(k)
    }

    fn put(&self, k: &BKey, value: &[u8], add: &[IndexEntry], remove: &[IndexEntry]) -> Result<()> {
        self.of(&k.bucket_type, &k.bucket)?
            .put(k, value, add, remove)
    }

    fn delete(&self, k: &BKey, remove: &[IndexEntry]) -> Result<()> {
        self.of(&k.bucket_type, &k.bucket)?.delete(k, remove)
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
        self.of(bucket_type, bucket)?
            .fold_keys(bucket_type, bucket, visit)
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
