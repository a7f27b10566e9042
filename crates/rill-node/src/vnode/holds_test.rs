//! `Vnode::holds_data` after a look at the backend that failed.

use super::*;
use rill_backend::{IndexQuery, MemoryBackend, MemoryOptions};
use std::sync::atomic::AtomicBool;

/// A memory backend whose next look for objects fails once.
struct FailsOnce {
    inner: MemoryBackend,
    fail: AtomicBool,
}

impl Backend for FailsOnce {
    fn name(&self) -> &'static str {
        "fails-once"
    }
    fn get(&self, k: &BKey) -> rill_backend::Result<Option<bytes::Bytes>> {
        self.inner.get(k)
    }
    fn put(
        &self,
        k: &BKey,
        value: &[u8],
        add: &[IndexEntry],
        remove: &[IndexEntry],
    ) -> rill_backend::Result<()> {
        self.inner.put(k, value, add, remove)
    }
    fn delete(&self, k: &BKey, remove: &[IndexEntry]) -> rill_backend::Result<()> {
        self.inner.delete(k, remove)
    }
    fn fold_buckets(
        &self,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> rill_backend::Result<()> {
        if self.fail.swap(false, Ordering::SeqCst) {
            return Err(rill_backend::Error::Engine("a look that failed".into()));
        }
        self.inner.fold_buckets(visit)
    }
    fn fold_keys(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> rill_backend::Result<()> {
        self.inner.fold_keys(bucket_type, bucket, visit)
    }
    fn query_index(
        &self,
        q: &IndexQuery,
        visit: &mut dyn FnMut(&Term, &[u8]) -> bool,
    ) -> rill_backend::Result<()> {
        self.inner.query_index(q, visit)
    }
    fn sync(&self) -> rill_backend::Result<()> {
        self.inner.sync()
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
}

/// A look that fails counts as holding, and does not make the next ask
/// answer "empty" without looking (a vnode with data must never be
/// reported empty: a reap or a member's exit would follow).
#[test]
fn a_failed_look_is_not_taken_for_an_empty_vnode() {
    let dir = tempfile::tempdir().unwrap();
    let leases =
        Arc::new(LeaseFile::create(dir.path(), &lease::LeaseTable::fresh(1, 0, false)).unwrap());
    let backend = FailsOnce {
        inner: MemoryBackend::new(MemoryOptions {
            max_memory_bytes: None,
            ttl: None,
        }),
        fail: AtomicBool::new(false),
    };
    backend
        .inner
        .put(&bkey(b"", b"b", b"k"), b"x", &[], &[])
        .unwrap();
    backend.fail.store(true, Ordering::SeqCst);
    let epochs = Epochs {
        next: 0,
        lease_end: 0,
        fresh_from: 0,
        leases,
    };
    let v = Vnode::new(Partition(0), [0; 8], epochs, Box::new(backend), None);
    assert!(v.holds_data().is_err());
    assert!(v.holds_data().unwrap(), "the next ask looks again");
}
