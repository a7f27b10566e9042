//! A vnode as handoff reads it (`rill_handoff::pass::PartitionData`):
//! its keys a chunk at a time in the byte order of their wire encoding
//! (one fold of the backend's keys a chunk, keeping the smallest after
//! the cursor in a heap of the chunk's size), its objects with their
//! clocks' hashes, and the drop of what is unchanged since it was sent.
//! The node's runtime and the cluster simulation read through this same
//! code.

use super::{index_terms, Vnode};
use crate::error::KvError;
use rill_backend::{BKey, Backend};
use rill_handoff::pass::{clock_hash, KeyChunk, PartitionData, Stored};
use rill_object::{encode_object, encode_vclock};
use std::collections::BinaryHeap;

/// Which keys of the vnode a reader sees (a repair sends only those its
/// target is a replica of).
pub type KeyFilter<'a> = &'a (dyn Fn(&BKey) -> bool + Sync);

/// One vnode, read by handoff.
pub struct PartitionReader<'a> {
    pub(crate) vnode: &'a Vnode,
    pub(crate) keep: Option<KeyFilter<'a>>,
    /// Retire the vnode's epochs before a drop (always, but for the
    /// simulation's fault that replays the bug it prevents).
    pub(crate) retire: bool,
}

fn decode(key: &[u8]) -> Result<BKey, String> {
    crate::wire::decode_key(key).map_err(|e| e.to_string())
}

impl Vnode {
    /// Every key, encoded, that `keep` keeps, by one fold of the
    /// backend: `visit` sees each once, in no order.
    fn fold_encoded(
        &self,
        keep: Option<KeyFilter<'_>>,
        mut visit: impl FnMut(Vec<u8>),
    ) -> Result<(), KvError> {
        self.each_key(|key| {
            if keep.is_none_or(|f| f(&key)) {
                visit(crate::wire::encode_key(&key));
            }
        })
    }

    /// Removes `k` (encoded `key`) if its stored clock still hashes to
    /// `clock`; true if removed.
    fn drop_if_clock_hash(&self, key: &[u8], k: &BKey, clock: u64) -> Result<bool, KvError> {
        let _guard = self.lock(k);
        match self.get(k)? {
            Some(o) if clock_hash(key, &encode_vclock(&o.clock)) == clock => {
                self.backend.delete(k, &index_terms(&o))?;
                self.tree_changed(k, Some(&o), None);
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

impl PartitionData for PartitionReader<'_> {
    fn keys_after(&self, after: Option<&[u8]>, max: usize) -> Result<KeyChunk, String> {
        let max = max.max(1);
        // The `max` smallest keys after `after`: a max-heap of them.
        let mut heap: BinaryHeap<Vec<u8>> = BinaryHeap::with_capacity(max + 1);
        let mut total = 0usize;
        let mut more = false;
        self.vnode
            .fold_encoded(self.keep, |k| {
                total += 1;
                if after.is_some_and(|a| k.as_slice() <= a) {
                    return;
                }
                if heap.len() < max {
                    heap.push(k);
                } else if heap.peek().is_some_and(|top| k < *top) {
                    heap.pop();
                    heap.push(k);
                    more = true;
                } else {
                    more = true;
                }
            })
            .map_err(|e| e.to_string())?;
        let mut keys = heap.into_vec();
        keys.sort_unstable();
        // A backend may visit a key twice (a multi-backend's buckets).
        keys.dedup();
        Ok(KeyChunk { keys, more, total })
    }

    fn read(&self, key: &[u8]) -> Result<Option<Stored>, String> {
        let k = decode(key)?;
        match self.vnode.get(&k).map_err(|e| e.to_string())? {
            Some(o) => Ok(Some(Stored {
                value: encode_object(&o),
                clock: clock_hash(key, &encode_vclock(&o.clock)),
            })),
            None => Ok(None),
        }
    }

    fn drop_unchanged(&self, keys: &[(Vec<u8>, u64)]) -> Result<usize, String> {
        if keys.is_empty() {
            return Ok(0);
        }
        if self.retire {
            self.vnode.retire_epochs().map_err(|e| e.to_string())?;
        }
        let mut n = 0;
        for (key, clock) in keys {
            if self
                .vnode
                .drop_if_clock_hash(key, &decode(key)?, *clock)
                .map_err(|e| e.to_string())?
            {
                n += 1;
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vnode::lease::{LeaseFile, LeaseTable};
    use crate::vnode::Epochs;
    use rill_backend::{IndexEntry, IndexQuery, MemoryBackend, MemoryOptions, Term};
    use rill_handoff::pass::{drop_sent, Pass, SentRecord};
    use rill_object::{Content, Metadata, Object, VClock};
    use rill_ring::Partition;
    use std::sync::Arc;

    /// A memory backend that visits a bucket's keys in a scrambled order
    /// (as a hash-sharded keydir does), not sorted.
    struct Scrambled(MemoryBackend);

    impl Backend for Scrambled {
        fn name(&self) -> &'static str {
            "scrambled"
        }
        fn get(&self, k: &BKey) -> rill_backend::Result<Option<bytes::Bytes>> {
            self.0.get(k)
        }
        fn put(
            &self,
            k: &BKey,
            v: &[u8],
            add: &[IndexEntry],
            remove: &[IndexEntry],
        ) -> rill_backend::Result<()> {
            self.0.put(k, v, add, remove)
        }
        fn delete(&self, k: &BKey, remove: &[IndexEntry]) -> rill_backend::Result<()> {
            self.0.delete(k, remove)
        }
        fn fold_buckets(
            &self,
            visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
        ) -> rill_backend::Result<()> {
            self.0.fold_buckets(visit)
        }
        fn fold_keys(
            &self,
            t: &[u8],
            b: &[u8],
            visit: &mut dyn FnMut(&[u8]) -> bool,
        ) -> rill_backend::Result<()> {
            let mut keys = Vec::new();
            self.0.fold_keys(t, b, &mut |k| {
                keys.push(k.to_vec());
                true
            })?;
            keys.sort_by_key(|k| scramble(k));
            for k in keys {
                if !visit(&k) {
                    break;
                }
            }
            Ok(())
        }
        fn query_index(
            &self,
            q: &IndexQuery,
            visit: &mut dyn FnMut(&Term, &[u8]) -> bool,
        ) -> rill_backend::Result<()> {
            self.0.query_index(q, visit)
        }
        fn sync(&self) -> rill_backend::Result<()> {
            self.0.sync()
        }
        fn size_bytes(&self) -> u64 {
            self.0.size_bytes()
        }
    }

    /// A fixed scramble of a key (FNV-1a).
    fn scramble(k: &[u8]) -> u64 {
        k.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
        })
    }

    fn object(i: u64) -> Object {
        let mut clock = VClock::new();
        for _ in 0..=i % 3 {
            clock.increment(b"actor", 1);
        }
        Object {
            clock,
            contents: vec![Content::new(
                format!("v{i}").into_bytes(),
                Metadata::default(),
            )],
        }
    }

    fn vnode(keys: &[BKey]) -> (tempfile::TempDir, Vnode) {
        let dir = tempfile::tempdir().unwrap();
        let leases =
            Arc::new(LeaseFile::create(dir.path(), &LeaseTable::fresh(1, 0, false)).unwrap());
        let backend = Scrambled(MemoryBackend::new(MemoryOptions {
            max_memory_bytes: None,
            ttl: None,
        }));
        for (i, k) in keys.iter().enumerate() {
            backend
                .put(k, &encode_object(&object(i as u64)), &[], &[])
                .unwrap();
        }
        let epochs = Epochs {
            next: 0,
            lease_end: 0,
            fresh_from: 0,
            leases,
        };
        let v = Vnode::new(Partition(0), [0; 8], epochs, Box::new(backend), None);
        (dir, v)
    }

    fn keys() -> Vec<BKey> {
        (0..300u32)
            .map(|i| {
                let bucket = format!("b{}", i % 3);
                BKey::new(b"", bucket.as_bytes(), format!("k{i}").as_bytes())
            })
            .collect()
    }

    fn reader<'a>(v: &'a Vnode, keep: Option<KeyFilter<'a>>) -> PartitionReader<'a> {
        PartitionReader {
            vnode: v,
            keep,
            retire: true,
        }
    }

    fn read_all(pass: &mut Pass, r: &PartitionReader<'_>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let b = pass.read(r, after.as_deref(), 10, 1 << 20).unwrap();
            pass.record(&b);
            out.extend(b.items.iter().map(|i| i.key.clone()));
            if !b.more {
                return out;
            }
            after = b.cursor;
        }
    }

    #[test]
    fn a_vnode_folded_in_no_order_is_read_in_cursor_order_a_chunk_at_a_time() {
        let all = keys();
        let (_dir, v) = vnode(&all);
        let r = reader(&v, None);
        let mut pass = Pass::new(16, SentRecord::default(), false, true);
        let got = read_all(&mut pass, &r);
        let mut want: Vec<Vec<u8>> = all.iter().map(crate::wire::encode_key).collect();
        want.sort();
        assert_eq!(got, want);

        // Only the keys a filter keeps.
        let keep = |k: &BKey| k.bucket == b"b1";
        let r = reader(&v, Some(&keep));
        let got = read_all(&mut Pass::new(16, SentRecord::default(), false, true), &r);
        assert_eq!(got.len(), 100);
        assert!(got
            .iter()
            .all(|k| crate::wire::decode_key(k).unwrap().bucket == b"b1"));
    }

    #[test]
    fn a_drop_after_a_pass_keeps_keys_written_since() {
        let all = keys();
        let (_dir, v) = vnode(&all);
        let r = reader(&v, None);
        let mut pass = Pass::new(16, SentRecord::default(), false, true);
        read_all(&mut pass, &r);
        let sent = pass.into_sent();
        // Written again after it was sent: another clock.
        let changed = &all[7];
        v.backend()
            .put(changed, &encode_object(&object(8)), &[], &[])
            .unwrap();
        assert_eq!(drop_sent(&r, &sent, 16).unwrap(), 299);
        assert!(v.get(changed).unwrap().is_some());
        assert!(v.get(&all[8]).unwrap().is_none());
    }
}
