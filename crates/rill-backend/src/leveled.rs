//! The leveled backend (`storage_backend = leveled`): as Riak's leveled,
//! each vnode keeps a sorted ledger of keys and heads (an object's clock
//! and metadata without its values, `rill_object::encode_head`) beside
//! its index entries, and the values in an append-only journal, so a head
//! request, a key listing or a fold over heads reads no value, and the
//! ledger's compactions never rewrite a value.
//!
//! Both live in the node's fjall database (the one `leveldb` uses), a
//! pair of keyspaces per partition: `l<partition>` (the ledger: keys of
//! `keys`, heads under the object's key, index entries) and `v<partition>`
//! (the journal: object bytes under the object's key, kept by fjall in
//! blob files apart from its tables). A put writes both in one atomic
//! batch, so a crash never leaves a head without its value or the
//! reverse. A journal file whose live share falls below
//! `leveled.singlefile_compactionpercentage` may have its live values
//! moved to a new file when the tables pointing into it are compacted
//! (fjall moves the oldest quarter of such files each time), and a file
//! with no live value is deleted unread. Why the engine's value
//! separation and not a journal of Rill's own: docs/backends.md,
//! "leveled's journal".

use crate::index::IndexQuery;
use crate::keys::{bucket_prefix, object_key, prefix_successor, BKey};
use crate::leveldb::{LeveldbBackend, LeveldbStore};
use crate::{Backend, Error, IndexEntry, Result, Term};
use fjall::{Keyspace, KvSeparationOptions};
use std::ops::Bound;

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
            // Every value goes to the journal, however small.
            .separation_threshold(1)
            .staleness_threshold(1.0 - f32::from(self.compaction_percent.min(100)) / 100.0)
            .compression(if self.compression {
                fjall::CompressionType::Lz4
            } else {
                fjall::CompressionType::None
            })
    }
}

impl LeveldbStore {
    /// The leveled backend of one partition (its ledger and journal made
    /// if new; `journal` is kept from a partition's first start).
    pub fn leveled_partition(
        &self,
        partition: &str,
        journal: &JournalOptions,
    ) -> Result<LeveledBackend> {
        let ledger = self.keyspace(&format!("l{partition}"), None)?;
        let values = self.keyspace(&format!("v{partition}"), Some(journal))?;
        Ok(LeveledBackend {
            ledger: self.backend_of(ledger),
            journal: values,
        })
    }
}

/// One vnode's ledger and journal.
pub struct LeveledBackend {
    ledger: LeveldbBackend,
    journal: Keyspace,
}

/// A journal's files, for stats and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalStats {
    /// Files holding values (the newest may still be in memory).
    pub files: usize,
    /// Bytes of those files (tables of pointers included).
    pub bytes: u64,
    /// Bytes of values replaced or deleted since written, still in files.
    pub dead_bytes: u64,
}

impl LeveledBackend {
    /// The journal's files now.
    pub fn journal_stats(&self) -> JournalStats {
        JournalStats {
            files: self.journal.blob_file_count(),
            bytes: self.journal.disk_space(),
            dead_bytes: self.journal.fragmented_blob_bytes(),
        }
    }
}

impl Backend for LeveledBackend {
    fn name(&self) -> &'static str {
        "riak_kv_leveled_backend"
    }

    fn get(&self, k: &BKey) -> Result<Option<bytes::Bytes>> {
        let v = self
            .journal
            .get(object_key(k)?)
            .map_err(|e| self.ledger.read_err(e))?;
        Ok(v.map(|v| bytes::Bytes::copy_from_slice(&v)))
    }

    fn contains(&self, k: &BKey) -> Result<bool> {
        self.ledger.contains(k)
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
        let mut batch = self.ledger.db.batch();
        let obj = self.ledger.put_into(&mut batch, k, head, add, remove)?;
        batch.insert(&self.journal, obj, value);
        self.ledger.commit(batch)
    }

    fn get_head(&self, k: &BKey) -> Option<Result<Option<bytes::Bytes>>> {
        Some(self.ledger.get(k))
    }

    fn fold_heads(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let prefix = bucket_prefix(crate::keys::OBJECT, bucket_type, bucket)?;
        let range = (
            Bound::Included(prefix.clone()),
            prefix_successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded),
        );
        for item in self.ledger.ks.range::<Vec<u8>, _>(range) {
            let (key, head) = item.into_inner().map_err(|e| self.ledger.read_err(e))?;
            if !visit(&key[prefix.len()..], &head) {
                break;
            }
        }
        Ok(())
    }

    fn delete(&self, k: &BKey, remove: &[IndexEntry]) -> Result<()> {
        let mut batch = self.ledger.db.batch();
        let obj = self.ledger.delete_into(&mut batch, k, remove)?;
        batch.remove(&self.journal, obj);
        self.ledger.commit(batch)
    }

    fn fold_buckets(&self, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        self.ledger.fold_buckets(visit)
    }

    fn holds_objects(&self) -> Result<bool> {
        self.ledger.holds_objects()
    }

    fn fold_keys(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<()> {
        self.ledger.fold_keys(bucket_type, bucket, visit)
    }

    fn query_index(
        &self,
        q: &IndexQuery,
        visit: &mut dyn FnMut(&Term, &[u8]) -> bool,
    ) -> Result<()> {
        self.ledger.query_index(q, visit)
    }

    fn sync(&self) -> Result<()> {
        self.ledger.sync()
    }

    fn size_bytes(&self) -> u64 {
        self.ledger.size_bytes() + self.journal.disk_space()
    }
}
