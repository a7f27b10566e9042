//! The Bitcask backend: objects and index entries as records of one
//! Bitcask store per vnode. Index entries are key-only records, so a
//! restart rebuilds the in-RAM index from the keydir (hint files), without
//! reading values. Riak's own Bitcask backend has no secondary indexes;
//! Rill's does.
//!
//! Crash order: new index entries are written before the object and
//! replaced ones removed after it, so a crash between the writes can
//! leave a stale entry (a query may name a key whose value no longer
//! carries the term, until the key is written again) but never loses one.

use crate::index::{IndexQuery, IndexSet, Term};
use crate::keys::{
    bucket_prefix, index_key, object_key, split, split_index_rest, BKey, INDEX, OBJECT,
};
use crate::{Backend, IndexEntry, Result};
use bitcask::Store;
use std::collections::BTreeSet;
use std::sync::Arc;

pub struct BitcaskBackend {
    store: Arc<Store>,
    index: IndexSet,
}

impl BitcaskBackend {
    /// Wraps an open store and loads its index entries.
    pub fn new(store: Arc<Store>) -> Result<BitcaskBackend> {
        let index = IndexSet::default();
        let mut bad = 0u64;
        store.fold_keys(|raw| {
            if let Some((INDEX, t, b, rest)) = split(raw) {
                match split_index_rest(rest) {
                    Some((field, term, key)) => index.add(t, b, field, term, key),
                    None => bad += 1,
                }
            }
            true
        })?;
        if bad > 0 {
            tracing::warn!(dir = %store.dir().display(), bad, "index records that do not decode were skipped");
        }
        Ok(BitcaskBackend { store, index })
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }
}

impl Backend for BitcaskBackend {
    fn name(&self) -> &'static str {
        "riak_kv_bitcask_backend"
    }

    fn get(&self, k: &BKey) -> Result<Option<Vec<u8>>> {
        Ok(self.store.get(&object_key(k)?)?)
    }

    fn put(&self, k: &BKey, value: &[u8], add: &[IndexEntry], remove: &[IndexEntry]) -> Result<()> {
        let obj = object_key(k)?;
        for (field, term) in add {
            self.store.put(&index_key(k, field, term)?, b"")?;
            self.index
                .add(&k.bucket_type, &k.bucket, field, term.clone(), &k.key);
        }
        self.store.put(&obj, value)?;
        for (field, term) in remove {
            if add.iter().any(|(f, t)| f == field && t == term) {
                continue;
            }
            self.index
                .remove(&k.bucket_type, &k.bucket, field, term, &k.key);
            self.store.delete(&index_key(k, field, term)?)?;
        }
        Ok(())
    }

    fn delete(&self, k: &BKey, remove: &[IndexEntry]) -> Result<()> {
        self.store.delete(&object_key(k)?)?;
        for (field, term) in remove {
            self.index
                .remove(&k.bucket_type, &k.bucket, field, term, &k.key);
            self.store.delete(&index_key(k, field, term)?)?;
        }
        Ok(())
    }

    fn fold_buckets(&self, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        let mut seen = BTreeSet::new();
        self.store.fold_keys(|raw| {
            if let Some((OBJECT, t, b, _)) = split(raw) {
                seen.insert((t.to_vec(), b.to_vec()));
            }
            true
        })?;
        for (t, b) in &seen {
            if !visit(t, b) {
                break;
            }
        }
        Ok(())
    }

    fn fold_keys(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<()> {
        let prefix = bucket_prefix(OBJECT, bucket_type, bucket)?;
        self.store.fold_keys(|raw| {
            if raw.starts_with(&prefix) {
                visit(&raw[prefix.len()..])
            } else {
                true
            }
        })?;
        Ok(())
    }

    fn query_index(
        &self,
        q: &IndexQuery,
        visit: &mut dyn FnMut(&Term, &[u8]) -> bool,
    ) -> Result<()> {
        self.index.query(q, visit);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(self.store.sync()?)
    }

    fn size_bytes(&self) -> u64 {
        self.store.disk_bytes()
    }
}
