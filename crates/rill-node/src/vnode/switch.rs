//! A vnode's backend that can be moved to another while it serves: reads
//! from the one serving, writes to it and, while a copy runs, to the copy
//! too; then the copy takes over.

use rill_backend::{BKey, Backend, IndexEntry, IndexQuery, Result, Term};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

struct Stores {
    serving: Arc<dyn Backend>,
    copy: Option<Arc<dyn Backend>>,
}

/// Why a copy did not take over; `E` is the commit's error.
pub(crate) enum SwitchError<E> {
    /// The copy misses writes or is not durable: drop it.
    Copy(CopyError),
    /// Recording the move failed, so whether it is recorded is not
    /// known: the copy stays attached, receiving every write, so either
    /// backend is complete whichever the record names at the next start.
    Commit(E),
}

/// Why a copy cannot take over.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CopyError {
    #[error("no copy to switch to")]
    NoCopy,
    #[error("a write to the new backend failed during the copy")]
    WriteFailed,
    #[error("syncing the copy: {0}")]
    Sync(#[source] rill_backend::Error),
}

/// The backend of a vnode (`Vnode::backend`).
pub(crate) struct Switchable {
    stores: RwLock<Stores>,
    /// A write to the copy failed since it began: the copy misses it and
    /// must not take over.
    copy_failed: AtomicBool,
}

impl Switchable {
    pub fn new(backend: Box<dyn Backend>) -> Switchable {
        Switchable {
            stores: RwLock::new(Stores {
                serving: Arc::from(backend),
                copy: None,
            }),
            copy_failed: AtomicBool::new(false),
        }
    }

    fn stores(&self) -> RwLockReadGuard<'_, Stores> {
        self.stores.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The backend serving now.
    pub fn serving(&self) -> Arc<dyn Backend> {
        self.stores().serving.clone()
    }

    /// From now on every write also goes to `copy`.
    pub fn begin_copy(&self, copy: Arc<dyn Backend>) {
        let mut s = self.stores.write().unwrap_or_else(|e| e.into_inner());
        self.copy_failed.store(false, Ordering::SeqCst);
        s.copy = Some(copy);
    }

    /// Writes go to the serving backend alone again; the copy is handed
    /// back (to be dropped with its data).
    pub fn abandon_copy(&self) -> Option<Arc<dyn Backend>> {
        let mut s = self.stores.write().unwrap_or_else(|e| e.into_inner());
        s.copy.take()
    }

    /// Whether every write since `begin_copy` reached the copy.
    pub fn copy_complete(&self) -> bool {
        !self.copy_failed.load(Ordering::SeqCst)
    }

    /// The copy serves from now on, once it is synced and `commit`
    /// (recording the move) succeeds; the backend that served is handed
    /// back. No request is inside either backend meanwhile, so every
    /// acknowledged write is in the synced copy.
    pub fn switch_to_copy<E>(
        &self,
        commit: impl FnOnce() -> Result<(), E>,
    ) -> Result<Arc<dyn Backend>, SwitchError<E>> {
        let mut s = self.stores.write().unwrap_or_else(|e| e.into_inner());
        let Some(copy) = s.copy.clone() else {
            return Err(SwitchError::Copy(CopyError::NoCopy));
        };
        if self.copy_failed.load(Ordering::SeqCst) {
            return Err(SwitchError::Copy(CopyError::WriteFailed));
        }
        copy.sync()
            .map_err(|e| SwitchError::Copy(CopyError::Sync(e)))?;
        commit().map_err(SwitchError::Commit)?;
        s.copy = None;
        Ok(std::mem::replace(&mut s.serving, copy))
    }

    /// Applies a write to the serving backend, then to the copy if any; a
    /// failure there marks the copy incomplete (logged), not the write.
    fn write(&self, op: impl Fn(&dyn Backend) -> Result<()>) -> Result<()> {
        let s = self.stores();
        op(s.serving.as_ref())?;
        if let Some(copy) = &s.copy {
            if let Err(e) = op(copy.as_ref()) {
                if !self.copy_failed.swap(true, Ordering::SeqCst) {
                    tracing::error!(error = %e, backend = copy.name(), "a write to the backend being migrated to failed; this partition's migration will start over");
                }
            }
        }
        Ok(())
    }
}

impl Backend for Switchable {
    fn name(&self) -> &'static str {
        self.stores().serving.name()
    }

    fn get(&self, k: &BKey) -> Result<Option<bytes::Bytes>> {
        self.stores().serving.get(k)
    }

    fn try_get(&self, k: &BKey) -> Option<Result<Option<bytes::Bytes>>> {
        // Never waits, not even behind a switch.
        self.stores.try_read().ok()?.serving.try_get(k)
    }

    fn contains(&self, k: &BKey) -> Result<bool> {
        self.stores().serving.contains(k)
    }

    fn put(&self, k: &BKey, value: &[u8], add: &[IndexEntry], remove: &[IndexEntry]) -> Result<()> {
        self.write(|b| b.put(k, value, add, remove))
    }

    fn keeps_heads(&self) -> bool {
        let s = self.stores();
        s.serving.keeps_heads() || s.copy.as_ref().is_some_and(|c| c.keeps_heads())
    }

    fn put_with_head(
        &self,
        k: &BKey,
        value: &[u8],
        head: &[u8],
        add: &[IndexEntry],
        remove: &[IndexEntry],
    ) -> Result<()> {
        self.write(|b| b.put_with_head(k, value, head, add, remove))
    }

    fn get_head(&self, k: &BKey) -> Option<Result<Option<bytes::Bytes>>> {
        self.stores().serving.get_head(k)
    }

    fn fold_heads(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.serving().fold_heads(bucket_type, bucket, visit)
    }

    fn delete(&self, k: &BKey, remove: &[IndexEntry]) -> Result<()> {
        self.write(|b| b.delete(k, remove))
    }

    fn fold_buckets(&self, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        self.serving().fold_buckets(visit)
    }

    fn holds_objects(&self) -> Result<bool> {
        self.serving().holds_objects()
    }

    fn fold_keys(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<()> {
        self.serving().fold_keys(bucket_type, bucket, visit)
    }

    fn query_index(
        &self,
        q: &IndexQuery,
        visit: &mut dyn FnMut(&Term, &[u8]) -> bool,
    ) -> Result<()> {
        self.serving().query_index(q, visit)
    }

    fn sync(&self) -> Result<()> {
        let s = self.stores();
        s.serving.sync()?;
        if let Some(copy) = &s.copy {
            // The copy's trouble is the migration's, not this caller's.
            if let Err(e) = copy.sync() {
                if !self.copy_failed.swap(true, Ordering::SeqCst) {
                    tracing::error!(error = %e, "syncing the backend being migrated to failed; this partition's migration will start over");
                }
            }
        }
        Ok(())
    }

    fn size_bytes(&self) -> u64 {
        let s = self.stores();
        s.serving.size_bytes() + s.copy.as_ref().map_or(0, |c| c.size_bytes())
    }
}
