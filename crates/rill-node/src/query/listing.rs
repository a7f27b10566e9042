//! List buckets and list keys: folds over every vnode. Each key lives on
//! n_val of them; the first of its preference list that holds it reports
//! it, so keys stream without a set of those seen.

use crate::error::KvError;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Keys are handed out in batches of at most this many (Riak: 100 per
/// vnode batch).
pub const KEY_BATCH: usize = 100;

impl super::Queries {
    /// Whether the vnode of `partition` reports `key` when every vnode is
    /// folded: the first vnode holding the key, walking the ring from the
    /// key's first partition (the start of its preference list). Normally
    /// that is the first of the preference list; a key its first replica
    /// lost (an eviction, a power cut without `o_sync`) is reported by the
    /// next that holds it. Costs a keydir lookup on each vnode before this
    /// one in the walk: n_val - 1 at most for keys within their bucket's
    /// n_val (more only for replicas left beyond a lowered n_val);
    /// nothing is held per key.
    pub(crate) fn reports_key(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        key: &[u8],
        partition: rill_ring::Partition,
    ) -> bool {
        let Some(first) = self
            .replicas
            .preflist(bucket_type, bucket, key, 1)
            .first()
            .map(|e| e.partition.0)
        else {
            return false;
        };
        let k = rill_backend::BKey::new(bucket_type, bucket, key);
        let size = self.vnodes.len() as u32;
        let mut i = first;
        while i != partition.0 {
            // A failed lookup counts as absent: a key listed twice is
            // better than a key not listed.
            if self
                .vnodes
                .of(i)
                .is_ok_and(|v| v.backend().contains(&k).unwrap_or(false))
            {
                return false;
            }
            i = (i + 1) % size;
        }
        true
    }

    pub(super) fn check_type(&self, bucket_type: &[u8]) -> Result<Vec<u8>, KvError> {
        let t = std::str::from_utf8(bucket_type)
            .map_err(|_| KvError::NoSuchType(String::from_utf8_lossy(bucket_type).into()))?;
        if !self
            .buckets
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
        if !self.owns_all() {
            return Ok(self.cover_buckets(&t, deadline)?.into_iter().collect());
        }
        let mut out = BTreeSet::new();
        for v in self.vnodes.iter() {
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
        let mut pending = Vec::with_capacity(KEY_BATCH);
        let deadline = timeout.map(|d| Instant::now() + d);
        if !self.owns_all() {
            let n = crate::params::n_val(&self.buckets.props_for_kv(bucket_type, bucket)?);
            let mut stopped = false;
            self.cover_keys(&t, bucket, n, b"", None, deadline, &mut |k| {
                pending.push(k.to_vec());
                if pending.len() == KEY_BATCH && !batch(std::mem::take(&mut pending)) {
                    stopped = true;
                }
                !stopped
            })?;
            if !stopped && !pending.is_empty() {
                batch(pending);
            }
            return Ok(());
        }
        for v in self.vnodes.iter() {
            if deadline.is_some_and(|d| Instant::now() > d) {
                return Err(KvError::Timeout);
            }
            let mut stop = false;
            // Each key is reported once, by the first vnode of its
            // preference list that holds it (as a Riak coverage plan
            // filters keys by partition): nothing is held per key,
            // whatever the bucket's size.
            v.backend().fold_keys(&t, bucket, &mut |k| {
                if self.reports_key(&t, bucket, k, v.partition) {
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

#[cfg(test)]
mod tests {
    use crate::{Content, IndexRequest, IndexSpec, Metadata, PutRequest};
    use std::collections::BTreeMap;

    #[test]
    fn a_key_its_first_replica_lost_is_still_listed_once() {
        let dir = tempfile::tempdir().unwrap();
        let n = crate::testing::memory_node(dir.path());
        let keys: Vec<Vec<u8>> = (0..200).map(|i| format!("k{i}").into_bytes()).collect();
        for k in &keys {
            n.put(PutRequest {
                bucket: b"b".to_vec(),
                key: Some(k.clone()),
                content: Content::new(b"v".to_vec(), Metadata::default()),
                ..PutRequest::default()
            })
            .unwrap();
        }
        // Every third key is lost by its first replica (an eviction, a
        // power cut without o_sync); one also by its second.
        for (i, k) in keys.iter().enumerate().filter(|(i, _)| i % 3 == 0) {
            let pl = n.preflist(b"", b"b", k, 3);
            let lost = if i == 0 { &pl[..2] } else { &pl[..1] };
            for e in lost {
                let bk = crate::vnode::bkey(b"", b"b", k);
                n.vnodes.at(e).backend().delete(&bk, &[]).unwrap();
            }
        }
        let mut listed: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
        n.list_keys(b"default", b"b", None, &mut |batch| {
            for k in batch {
                *listed.entry(k).or_default() += 1;
            }
            true
        })
        .unwrap();
        assert_eq!(listed.len(), keys.len(), "every key listed");
        assert!(listed.values().all(|&c| c == 1), "each once: {listed:?}");
        let plan = n
            .index_plan(&IndexRequest {
                bucket_type: b"default".to_vec(),
                bucket: b"b".to_vec(),
                index: "$bucket".into(),
                spec: IndexSpec::Eq(b"b".to_vec()),
                return_terms: false,
                max_results: None,
                continuation: None,
                term_regex: None,
            })
            .unwrap();
        let mut streamed: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
        n.index_stream(&plan, &mut |batch| {
            for (_, k) in batch {
                *streamed.entry(k).or_default() += 1;
            }
            true
        })
        .unwrap();
        assert_eq!(streamed, listed, "$bucket streams what list keys lists");
    }
}
