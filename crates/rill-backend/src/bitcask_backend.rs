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
        // Every key and size is checked before anything is written, so a
        // refused put leaves nothing behind.
        let opts = self.store.options();
        let obj = object_key(k)?;
        let added: Vec<Vec<u8>> = add
            .iter()
            .map(|(f, t)| index_key(k, f, t))
            .collect::<Result<_>>()?;
        let removed: Vec<Vec<u8>> = remove
            .iter()
            .map(|(f, t)| index_key(k, f, t))
            .collect::<Result<_>>()?;
        for key in added.iter().chain(&removed).chain(std::iter::once(&obj)) {
            if key.len() > opts.max_key_bytes {
                return Err(bitcask::Error::KeyTooLarge {
                    len: key.len(),
                    max: opts.max_key_bytes,
                }
                .into());
            }
        }
        if value.len() > opts.max_value_bytes {
            return Err(bitcask::Error::ValueTooLarge {
                len: value.len(),
                max: opts.max_value_bytes,
            }
            .into());
        }
        let mut written = 0;
        let result = (|| -> Result<()> {
            for ((field, term), key) in add.iter().zip(&added) {
                self.store.put(key, b"")?;
                self.index
                    .add(&k.bucket_type, &k.bucket, field, term.clone(), &k.key);
                written += 1;
            }
            self.store.put(&obj, value).map_err(crate::Error::from)
        })();
        if let Err(e) = result {
            // Queries must not see entries of a value that was not stored;
            // the records on disk are stale entries, as after a crash.
            for (field, term) in &add[..written] {
                self.index
                    .remove(&k.bucket_type, &k.bucket, field, term, &k.key);
            }
            return Err(e);
        }
        for ((field, term), key) in remove.iter().zip(&removed) {
            if add.iter().any(|(f, t)| f == field && t == term) {
                continue;
            }
            self.index
                .remove(&k.bucket_type, &k.bucket, field, term, &k.key);
            self.store.delete(key)?;
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
