//! The leveled backend (`storage_backend = leveled`): as Riak's leveled,
//! each vnode keeps a sorted ledger of keys and heads (an object's clock
//! and metadata without its values, `rill_object::encode_head`) beside
//! its index entries, and the values in an append-only journal, so a head
//! request, a key listing or a fold over heads reads no value, and the
//! ledger's compactions never rewrite a value.
//!
//! Each partition is one keyspace `lv<partition>` of the node's fjall
//! database (the one `leveldb` uses): the ledger is its keys of `keys`
//! (heads under object keys, index entries), the journal its values under
//! value keys (`'v'` and the rest of the object key), which fjall keeps in
//! blob files apart from its tables when they reach `SEPARATE_FROM` bytes.
//! A put is one batch of head, index changes and value; being one
//! keyspace, its tables always hold a prefix of the writes, so even a
//! journal set aside as damaged (`LeveldbStore::open`) leaves heads,
//! index entries and values in step, and a partition is dropped in one
//! step. A blob file whose live share falls below
//! `leveled.singlefile_compactionpercentage` may have its live values
//! moved to a new file when the tables pointing into it are compacted
//! (fjall moves the oldest quarter of such files each time), and a file
//! with no live value is deleted unread. Why the engine's value
//! separation and not a journal of Rill's own: docs/backends.md,
//! "leveled's journal".

use crate::index::IndexQuery;
use crate::keys::{bucket_prefix, object_key, prefix_successor, BKey, OBJECT, VALUE};
use crate::leveldb::{Copier, LeveldbBackend, LeveldbStore};
use crate::{Backend, Error, IndexEntry, Result, Term};
use fjall::KvSeparationOptions;
use std::ops::Bound;

/// Values of at least this many bytes go to the journal's blob files;
/// smaller ones (and heads, index entries) stay in the ledger's tables,
/// where a compaction rewrites them at about the cost of the pointer that
/// would stand in their place (fjall's own default).
pub const SEPARATE_FROM: u32 = 1024;

/// How a leveled journal keeps its files (Riak's `leveled.*` names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalOptions {
    /// A journal file is closed near this size (`leveled.journal_size`).
    pub file_bytes: u64,
    /// The live share, in percent, below which a file's live values are
    /// moved out when the ledger tables pointing into it are compacted
    /// (`leveled.singlefile_compactionpercentage`, as Riak's leveled
    /// scores a file by its live share: 30 compacts files more than 70 %
    /// dead).
    pub compaction_percent: u8,
    /// Values compressed with LZ4 (`leveled.compression_method = lz4`;
    /// `none` stores them as they come).
    pub compression: bool,
}

impl Default for JournalOptions {
    fn default() -> JournalOptions {
        JournalOptions {
            file_bytes: 64 << 20,
            compaction_percent: 30,
            compression: true,
        }
    }
}

impl JournalOptions {
    pub(crate) fn engine_options(&self) -> KvSeparationOptions {
        KvSeparationOptions::default()
            .file_target_size(self.file_bytes.max(1 << 20))
            .separation_threshold(SEPARATE_FROM)
            .staleness_threshold(1.0 - f32::from(self.compaction_percent.min(100)) / 100.0)
            .compression(if self.compression {
                fjall::CompressionType::Lz4
            } else {
                fjall::CompressionType::None
            })
    }
}

impl LeveldbStore {
    /// The leveled backend of one partition (made if new; `journal` is
    /// kept from a partition's first start). A partition kept in the
    /// first layout (ledger and journal apart) is moved into one first.
    pub fn leveled_partition(
        &self,
        partition: &str,
        journal: &JournalOptions,
    ) -> Result<LeveledBackend> {
        let name = format!("lv{partition}");
        self.finish_repair(&name, Some(journal))?;
        let ks = self.keyspace(&name, Some(journal))?;
        let b = LeveledBackend {
            inner: self.backend_of(ks),
        };
        self.migrate_layout_1(partition, &b)?;
        Ok(b)
    }

    /// Moves a partition's first-layout keyspaces (the ledger `l<p>` and
    /// the journal `v<p>`) into its keyspace, makes that durable, then
    /// drops them, the ledger first: a crash before the drops copies
    /// again, a journal found alone was copied already.
    fn migrate_layout_1(&self, partition: &str, into: &LeveledBackend) -> Result<()> {
        let (ledger, journal) = (format!("l{partition}"), format!("v{partition}"));
        if self.keyspace_exists(&ledger) {
            let mut copied = 0u64;
            let mut batch = Copier::new(
                &into.inner.db,
                &into.inner.budget,
                &into.inner.gate,
                &into.inner.ks,
            );
            for item in self.keyspace(&ledger, None)?.iter() {
                let (k, v) = item.into_inner().map_err(|e| into.inner.read_err(e))?;
                batch.insert(&k, &v)?;
                copied += 1;
            }
            if self.keyspace_exists(&journal) {
                for item in self.keyspace(&journal, None)?.iter() {
                    let (k, v) = item.into_inner().map_err(|e| into.inner.read_err(e))?;
                    if k.first() == Some(&OBJECT) {
                        batch.insert(&value_key(k.to_vec()), &v)?;
                        copied += 1;
                    }
                }
            }
            batch.finish()?;
            self.sync()?;
            self.drop_keyspace(&ledger)?;
            tracing::info!(
                partition,
                copied,
                "leveled partition moved to one keyspace (layout 2)"
            );
        }
        self.drop_keyspace(&journal)
    }
}

/// The key of an object's value: its object key tagged `VALUE`.
pub(crate) fn value_key(mut object_key: Vec<u8>) -> Vec<u8> {
    object_key[0] = VALUE;
    object_key
}

/// One vnode's ledger and journal: one keyspace.
pub struct LeveledBackend {
    inner: LeveldbBackend,
}

/// A journal's files, for stats and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalStats {
    /// Blob files holding values (the newest may still be in memory).
    pub files: usize,
    /// Bytes of those files and of the ledger's tables.
    pub bytes: u64,
    /// Bytes of values replaced or deleted since written, still in files.
    pub dead_bytes: u64,
}

impl LeveledBackend {
    /// The journal's files now.
    pub fn journal_stats(&self) -> JournalStats {
        JournalStats {
            files: self.inner.ks.blob_file_count(),
            bytes: self.inner.ks.disk_space(),
            dead_bytes: self.inner.ks.fragmented_blob_bytes(),
        }
    }
}

impl Backend for LeveledBackend {
    fn name(&self) -> &'static str {
        "riak_kv_leveled_backend"
    }

    fn get(&self, k: &BKey) -> Result<Option<bytes::Bytes>> {
        let v = self
            .inner
            .ks
            .get(value_key(object_key(k)?))
            .map_err(|e| self.inner.read_err(e))?;
        Ok(v.map(|v| bytes::Bytes::copy_from_slice(&v)))
    }

    fn contains(&self, k: &BKey) -> Result<bool> {
        self.inner.contains(k)
    }

    fn put(&self, k: &BKey, value: &[u8], add: &[IndexEntry], remove: &[IndexEntry]) -> Result<()> {
        self.put_with_head(k, value, b"", add, remove)
    }

    fn keeps_heads(&self) -> bool {
        true
    }

    fn put_with_head(
        &self,
        k: &BKey,
        value: &[u8],
        head: &[u8],
        add: &[IndexEntry],
        remove: &[IndexEntry],
    ) -> Result<()> {
        if value.len() > crate::leveldb::MAX_VALUE_BYTES {
            return Err(Error::ValueTooLarge(value.len()));
        }
        let mut batch = self.inner.db.batch();
        let obj = self.inner.put_into(&mut batch, k, head, add, remove)?;
        batch.insert(&self.inner.ks, value_key(obj), value);
        self.inner.commit(batch)
    }

    fn get_head(&self, k: &BKey) -> Option<Result<Option<bytes::Bytes>>> {
        Some(self.inner.get(k))
    }

    fn fold_heads(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let prefix = bucket_prefix(OBJECT, bucket_type, bucket)?;
        let range = (
            Bound::Included(prefix.clone()),
            prefix_successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded),
        );
        for item in self.inner.ks.range::<Vec<u8>, _>(range) {
            let (key, head) = item.into_inner().map_err(|e| self.inner.read_err(e))?;
            if !visit(&key[prefix.len()..], &head) {
                break;
            }
        }
        Ok(())
    }

    fn delete(&self, k: &BKey, remove: &[IndexEntry]) -> Result<()> {
        let mut batch = self.inner.db.batch();
        let obj = self.inner.delete_into(&mut batch, k, remove)?;
        batch.remove(&self.inner.ks, value_key(obj));
        self.inner.commit(batch)
    }

    fn fold_buckets(&self, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        self.inner.fold_buckets(visit)
    }

    fn holds_objects(&self) -> Result<bool> {
        self.inner.holds_objects()
    }

    fn fold_keys(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<()> {
        self.inner.fold_keys(bucket_type, bucket, visit)
    }

    fn query_index(
        &self,
        q: &IndexQuery,
        visit: &mut dyn FnMut(&Term, &[u8]) -> bool,
    ) -> Result<()> {
        self.inner.query_index(q, visit)
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::IndexRange;
    use crate::keys::index_key;
    use crate::LeveldbOptions;

    fn k(key: &str) -> BKey {
        BKey::new(b"t", b"b", key.as_bytes())
    }

    /// Writes a partition as the first layout did: heads and index
    /// entries in `l<p>`, objects under their object keys in `v<p>`.
    fn write_layout_1(s: &LeveldbStore, partition: &str, keys: usize) {
        let ledger = s.keyspace(&format!("l{partition}"), None).unwrap();
        let journal = s
            .keyspace(&format!("v{partition}"), Some(&JournalOptions::default()))
            .unwrap();
        for i in 0..keys {
            let key = k(&format!("k{i:04}"));
            let obj = object_key(&key).unwrap();
            ledger.insert(obj.as_slice(), format!("head {i}")).unwrap();
            let entry = index_key(&key, b"n_int", &Term::Int(i as i64)).unwrap();
            ledger.insert(entry, b"").unwrap();
            journal.insert(obj, vec![i as u8; 2000]).unwrap();
        }
    }

    fn check_moved(b: &LeveledBackend, keys: usize) {
        for i in 0..keys {
            let key = k(&format!("k{i:04}"));
            assert_eq!(b.get(&key).unwrap().unwrap(), vec![i as u8; 2000]);
            let head = b.get_head(&key).unwrap().unwrap().unwrap();
            assert_eq!(head, format!("head {i}").as_bytes());
        }
        let mut found = Vec::new();
        let q = IndexQuery {
            bucket_type: b"t".to_vec(),
            bucket: b"b".to_vec(),
            field: b"n_int".to_vec(),
            range: IndexRange::Range(Term::Int(0), Term::Int(i64::MAX)),
            after: None,
        };
        b.query_index(&q, &mut |t, key| {
            found.push((t.clone(), key.to_vec()));
            true
        })
        .unwrap();
        assert_eq!(found.len(), keys);
        let mut listed = 0;
        b.fold_keys(b"t", b"b", &mut |_| {
            listed += 1;
            true
        })
        .unwrap();
        assert_eq!(listed, keys, "value keys are not listed as objects");
    }

    #[test]
    fn a_first_layout_partition_is_moved_into_one_keyspace() {
        let dir = tempfile::tempdir().unwrap();
        const KEYS: usize = 3000;
        {
            let s = LeveldbStore::open(dir.path(), LeveldbOptions::default(), 1).unwrap();
            write_layout_1(&s, "7", KEYS);
            s.sync().unwrap();
        }
        let s = LeveldbStore::open(dir.path(), LeveldbOptions::default(), 1).unwrap();
        let b = s
            .leveled_partition("7", &JournalOptions::default())
            .unwrap();
        assert!(!s.keyspace_exists("l7") && !s.keyspace_exists("v7"));
        check_moved(&b, KEYS);
        drop(b);
        drop(s);
        // Durable, and a second open moves nothing more.
        let s = LeveldbStore::open(dir.path(), LeveldbOptions::default(), 1).unwrap();
        check_moved(
            &s.leveled_partition("7", &JournalOptions::default())
                .unwrap(),
            KEYS,
        );
    }

    /// A crash after the ledger was dropped but before the journal: the
    /// copy was made durable first, so the journal left alone is dropped.
    #[test]
    fn a_journal_left_alone_by_a_crash_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let s = LeveldbStore::open(dir.path(), LeveldbOptions::default(), 1).unwrap();
        write_layout_1(&s, "3", 10);
        let b = s
            .leveled_partition("3", &JournalOptions::default())
            .unwrap();
        // As if the crash came before the journal's drop.
        s.keyspace("v3", Some(&JournalOptions::default()))
            .unwrap()
            .insert(object_key(&k("stale")).unwrap(), b"old")
            .unwrap();
        drop(b);
        let b = s
            .leveled_partition("3", &JournalOptions::default())
            .unwrap();
        assert!(!s.keyspace_exists("v3"));
        assert_eq!(b.get(&k("stale")).unwrap(), None);
        check_moved(&b, 10);
    }
}
