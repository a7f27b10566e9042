//! The Bitcask backend: objects and index entries as records of one
//! Bitcask store per vnode. Index entries are key-only records, so a
//! restart rebuilds the in-RAM index from the keydir (hint files), without
//! reading values. Riak's own Bitcask backend has no secondary indexes;
//! Rill's does.
//!
//! An object and its index changes are one batch of records (one append,
//! one fsync under `o_sync`), which a crash keeps whole or not at all, and
//! the in-RAM index changes under its lock held across the write, so
//! queries see the change all at once: the index always matches the
//! objects.

use crate::index::{IndexQuery, IndexSet, Term};
use crate::keys::{
    bucket_prefix, index_field_prefix, index_keys, index_position, object_key, split,
    split_index_rest, split_index_rest_v1, BKey, INDEX, INDEX_V1, OBJECT,
};
use crate::{Backend, IndexEntry, Result};
use bitcask::{BatchOp, Store};
use std::collections::BTreeSet;
use std::sync::Arc;

pub struct BitcaskBackend {
    store: Arc<Store>,
    index: IndexSet,
}

/// Version 1 index entries rewritten per batch when a store is migrated.
const MIGRATE_BATCH: usize = 512;

impl BitcaskBackend {
    /// Wraps an open store and loads its index entries. Entries written
    /// by builds before index keys version 2 are rewritten in the new
    /// encoding first (each old key replaced by its new one in one batch,
    /// so a crash midway leaves every entry in one form or the other and
    /// the next open finishes the work).
    pub fn open(store: Arc<Store>) -> Result<BitcaskBackend> {
        let index = IndexSet::default();
        let mut bad = 0u64;
        let mut old: Vec<Vec<u8>> = Vec::new();
        // No one writes to the store before the backend exists, and a merge
        // changes no key, so a scan without a snapshot sees every key once
        // (a snapshot's undo log could overrun under a merge: Busy).
        store.scan_keys(|raw| {
            match split(raw) {
                Some((INDEX, t, b, rest)) => match split_index_rest(rest) {
                    Some((field, term, key)) => index.add(t, b, field, term, key),
                    None => bad += 1,
                },
                Some((INDEX_V1, ..)) => old.push(raw.to_vec()),
                _ => {}
            }
            true
        });
        if !old.is_empty() {
            bad += migrate_v1(&store, &index, &old)?;
        }
        if bad > 0 {
            tracing::warn!(dir = %store.dir().display(), bad, "index records that do not decode were skipped");
        }
        Ok(BitcaskBackend { store, index })
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }
}

/// Rewrites version 1 index keys `old` as version 2 keys, adding them to
/// `index`; made durable before the store serves. Returns how many did
/// not decode (left as they are).
fn migrate_v1(store: &Store, index: &IndexSet, old: &[Vec<u8>]) -> Result<u64> {
    let mut bad = 0u64;
    let mut moved = 0usize;
    for chunk in old.chunks(MIGRATE_BATCH) {
        let mut pairs = Vec::with_capacity(chunk.len());
        for raw in chunk {
            let parsed = split(raw).and_then(|(_, t, b, rest)| {
                let (field, term, key) = split_index_rest_v1(rest)?;
                Some((t, b, field, term, key))
            });
            let Some((t, b, field, term, key)) = parsed else {
                bad += 1;
                continue;
            };
            let mut new = index_field_prefix(t, b, field)?;
            new.extend_from_slice(&index_position(&term, key));
            if new.len() > store.options().max_key_bytes {
                // Escaping made it longer than a key may be (a term with
                // many zero bytes): it stays as it is, and is answered.
                tracing::warn!(
                    bytes = new.len(),
                    "an index entry too long for index keys version 2 stays in version 1"
                );
                index.add(t, b, field, term, key);
                continue;
            }
            pairs.push((raw, new, (t, b, field, term, key)));
        }
        let mut ops: Vec<BatchOp<'_>> = Vec::with_capacity(2 * pairs.len());
        for (raw, new, _) in &pairs {
            ops.push(BatchOp::Put {
                key: new,
                value: b"",
            });
            ops.push(BatchOp::Delete { key: raw });
        }
        store.write_batch(&ops)?;
        for (_, _, (t, b, field, term, key)) in pairs {
            index.add(t, b, field, term, key);
            moved += 1;
        }
    }
    store.sync()?;
    tracing::info!(dir = %store.dir().display(), entries = moved, "index entries rewritten in the order-preserving encoding (index keys version 2)");
    Ok(bad)
}

impl Backend for BitcaskBackend {
    fn name(&self) -> &'static str {
        "riak_kv_bitcask_backend"
    }

    fn get(&self, k: &BKey) -> Result<Option<bytes::Bytes>> {
        Ok(self.store.get(&object_key(k)?)?.map(bytes::Bytes::from))
    }

    fn try_get(&self, k: &BKey) -> Option<Result<Option<bytes::Bytes>>> {
        let key = match object_key(k) {
            Ok(key) => key,
            Err(e) => return Some(Err(e)),
        };
        let got = self.store.try_get(&key, crate::NOWAIT_MAX_BYTES)?;
        Some(got.map(|v| v.map(bytes::Bytes::from)).map_err(Into::into))
    }

    fn contains(&self, k: &BKey) -> Result<bool> {
        Ok(self.store.contains(&object_key(k)?))
    }

    fn put(&self, k: &BKey, value: &[u8], add: &[IndexEntry], remove: &[IndexEntry]) -> Result<()> {
        // Every key and size is checked before anything is written, so a
        // refused put leaves nothing behind.
        let opts = self.store.options();
        let obj = object_key(k)?;
        let added = index_keys(k, add)?;
        let removed = index_keys(k, remove)?;
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
        // Terms both added and removed stay (a caller's overlap).
        let removed: Vec<(&IndexEntry, &Vec<u8>)> = remove
            .iter()
            .zip(&removed)
            .filter(|(r, _)| !add.contains(r))
            .collect();
        if added.is_empty() && removed.is_empty() {
            return Ok(self.store.put(&obj, value)?);
        }
        // The object and its index changes in one batch, under the index
        // lock: queries see all of the change or none of it, and a crash
        // keeps all of it or none of it.
        let mut ops: Vec<BatchOp<'_>> = added
            .iter()
            .map(|key| BatchOp::Put { key, value: b"" })
            .collect();
        ops.push(BatchOp::Put { key: &obj, value });
        ops.extend(removed.iter().map(|(_, key)| BatchOp::Delete { key }));
        let mut index = self.index.writer();
        self.store.write_batch(&ops)?;
        for (field, term) in add {
            index.add(&k.bucket_type, &k.bucket, field, term.clone(), &k.key);
        }
        for ((field, term), _) in removed {
            index.remove(&k.bucket_type, &k.bucket, field, term, &k.key);
        }
        Ok(())
    }

    fn delete(&self, k: &BKey, remove: &[IndexEntry]) -> Result<()> {
        let obj = object_key(k)?;
        if remove.is_empty() {
            return Ok(self.store.delete(&obj)?);
        }
        let keys = index_keys(k, remove)?;
        let mut ops = vec![BatchOp::Delete { key: &obj }];
        ops.extend(keys.iter().map(|key| BatchOp::Delete { key }));
        let mut index = self.index.writer();
        self.store.write_batch(&ops)?;
        for (field, term) in remove {
            index.remove(&k.bucket_type, &k.bucket, field, term, &k.key);
        }
        Ok(())
    }

    fn fold_buckets(&self, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        let mut seen = BTreeSet::new();
        // Listings are not snapshots (nor are Riak's): a scan that writes
        // cannot overrun, however long it takes.
        self.store.scan_keys(|raw| {
            if let Some((OBJECT, t, b, _)) = split(raw) {
                seen.insert((t.to_vec(), b.to_vec()));
            }
            true
        });
        for (t, b) in &seen {
            if !visit(t, b) {
                break;
            }
        }
        Ok(())
    }

    fn holds_objects(&self) -> Result<bool> {
        // Stops at the first object key.
        Ok(self
            .store
            .any_key(|raw| matches!(split(raw), Some((OBJECT, ..)))))
    }

    fn fold_keys(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<()> {
        let prefix = bucket_prefix(OBJECT, bucket_type, bucket)?;
        // A client may read a streamed listing slowly while writes go on:
        // no snapshot, so nothing to overrun (see `Store::scan_keys`).
        self.store.scan_keys(|raw| {
            if raw.starts_with(&prefix) {
                visit(&raw[prefix.len()..])
            } else {
                true
            }
        });
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
