//! List buckets and list keys: folds over every vnode. Each key lives on
//! n_val of them; the first of its preference list reports it, so keys
//! stream without a set of those seen.

use crate::error::KvError;
use crate::node::Node;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Keys are handed out in batches of at most this many (Riak: 100 per
/// vnode batch).
pub const KEY_BATCH: usize = 100;

impl Node {
    /// The partition first in a key's preference list: the one that
    /// reports it when every vnode is folded.
    pub(crate) fn first_owner(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        key: &[u8],
    ) -> Option<rill_ring::Partition> {
        self.preflist(bucket_type, bucket, key, 1)
            .first()
            .map(|e| e.partition)
    }

    fn check_type(&self, bucket_type: &[u8]) -> Result<Vec<u8>, KvError> {
        let t = std::str::from_utf8(bucket_type)
            .map_err(|_| KvError::NoSuchType(String::from_utf8_lossy(bucket_type).into()))?;
        if !self
            .type_status(t)
            .is_some_and(|(_, s)| s == rill_bucket::TypeStatus::Active)
        {
            return Err(KvError::NoSuchType(t.to_string()));
        }
        Ok(if t == "default" {
            Vec::new()
        } else {
            bucket_type.to_vec()
        })
    }

    /// The buckets of a type holding at least one key (tombstones not yet
    /// reaped count, as in Riak).
    pub fn list_buckets(
        &self,
        bucket_type: &[u8],
        timeout: Option<Duration>,
    ) -> Result<Vec<Vec<u8>>, KvError> {
        let t = self.check_type(bucket_type)?;
        let deadline = timeout.map(|d| Instant::now() + d);
        let mut out = BTreeSet::new();
        for v in &self.vnodes {
            if deadline.is_some_and(|d| Instant::now() > d) {
                return Err(KvError::Timeout);
            }
            v.backend().fold_buckets(&mut |bt, b| {
                if bt == t.as_slice() {
                    out.insert(b.to_vec());
                }
                true
            })?;
        }
        Ok(out.into_iter().collect())
    }

    /// Every key of a bucket, handed to `batch` in batches of at most
    /// [`KEY_BATCH`] non-empty ones; `batch` returns false to stop.
    pub fn list_keys(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        timeout: Option<Duration>,
        batch: &mut dyn FnMut(Vec<Vec<u8>>) -> bool,
    ) -> Result<(), KvError> {
        let t = self.check_type(bucket_type)?;
        if bucket.is_empty() {
            return Err(KvError::BadRequest("Bucket cannot be zero-length".into()));
        }
        self.counters.list_keys.fetch_add(1, Ordering::Relaxed);
        let deadline = timeout.map(|d| Instant::now() + d);
        let mut pending = Vec::with_capacity(KEY_BATCH);
        for v in &self.vnodes {
            if deadline.is_some_and(|d| Instant::now() > d) {
                return Err(KvError::Timeout);
            }
            let mut stop = false;
            // Each key is reported once, by the first vnode of its
            // preference list (as a Riak coverage plan filters keys by
            // partition): nothing is held per key, whatever the bucket's
            // size. A key its first vnode lost is not listed.
            v.backend().fold_keys(&t, bucket, &mut |k| {
                if self.first_owner(&t, bucket, k) == Some(v.partition) {
                    pending.push(k.to_vec());
                    if pending.len() == KEY_BATCH && !batch(std::mem::take(&mut pending)) {
                        stop = true;
                        return false;
                    }
                }
                true
            })?;
            if stop {
                return Ok(());
            }
        }
        if !pending.is_empty() {
            batch(pending);
        }
        Ok(())
    }
}
