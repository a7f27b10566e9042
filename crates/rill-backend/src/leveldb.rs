//! The leveldb backend (`storage_backend = leveldb`): objects and index
//! entries in one sorted LSM tree per vnode, on fjall (pure Rust; bloom
//! filters, LZ4 for the deeper levels, a journal shared by the node).
//!
//! One fjall database per node holds a keyspace per partition, so the
//! node's memory budget (block cache and write buffers, Riak's
//! `leveldb.maximum_memory`) is shared by its vnodes, a put's object and
//! index changes are one atomic batch, and a partition's data is dropped
//! whole. Keys are those of `keys` (docs/format.md, "Backend keys"): an
//! object's under `'o'`, its index entries under `'j'`, in an order where a
//! range query is one scan and a bucket's keys lie together.

use crate::index::{IndexQuery, Term};
use crate::keys::{
    bucket_prefix, index_field_prefix, index_keys, index_position, object_key, prefix_successor,
    split, split_position, term_prefix, BKey, OBJECT,
};
use crate::leveled::JournalOptions;
use crate::write_budget::WriteBudget;
use crate::{Backend, Error, IndexEntry, Result};
use fjall::{Database, JournalRecoveryError, Keyspace, KeyspaceCreateOptions, PersistMode};
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How the node's leveldb database is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeveldbOptions {
    /// Memory for block cache and write buffers together, for all vnodes.
    pub max_memory_bytes: u64,
    /// Each write reaches the disk (fsync) before it is acknowledged
    /// (`leveldb.sync_on_write`); otherwise it is in the kernel (a crash
    /// of the process loses nothing, a power loss may).
    pub sync_on_write: bool,
    /// Compress table blocks with LZ4 (`leveldb.compression`).
    pub compression: bool,
    /// Bloom filters on tables (`leveldb.bloomfilter`).
    pub bloom_filter: bool,
}

impl Default for LeveldbOptions {
    fn default() -> LeveldbOptions {
        LeveldbOptions {
            max_memory_bytes: 1 << 30,
            sync_on_write: false,
            compression: true,
            bloom_filter: true,
        }
    }
}

/// Write buffers (memtables) take a quarter of the memory budget, split
/// across the vnodes, each between these bounds, and writes wait while
/// all of them together are over that quarter (`write_budget`); the
/// block cache takes the rest. A vnode's bounds are kept from its first start
/// (fjall stores a keyspace's options when it is made), as are
/// compression and bloom filters.
const MIN_MEMTABLE_BYTES: u64 = 256 << 10;
const MAX_MEMTABLE_BYTES: u64 = 64 << 20;

/// A node's leveldb database: one keyspace per partition.
pub struct LeveldbStore {
    db: Database,
    dir: std::path::PathBuf,
    opts: LeveldbOptions,
    memtable_bytes: u64,
    damaged: Arc<AtomicU64>,
    budget: Arc<WriteBudget>,
}

pub(crate) fn engine(e: fjall::Error) -> Error {
    match e {
        fjall::Error::Locked => Error::Engine(
            "the database is in use: a node is running on it (stop it first)".into(),
        ),
        fjall::Error::Poisoned => Error::Engine(
            "an earlier write failed (a full or failing disk); restart the node once the disk has room"
                .into(),
        ),
        fjall::Error::Io(e) | fjall::Error::Storage(fjall::LsmError::Io(e))
            if e.kind() == std::io::ErrorKind::StorageFull =>
        {
            Error::DiskFull
        }
        fjall::Error::Io(e) | fjall::Error::Storage(fjall::LsmError::Io(e)) => {
            Error::Engine(format!("I/O error: {e}"))
        }
        fjall::Error::Storage(l) => Error::Corrupt(format!("a damaged leveldb table block ({l:?})")),
        e @ (fjall::Error::Decompress(_) | fjall::Error::InvalidTag(_) | fjall::Error::InvalidTrailer) => {
            Error::Corrupt(format!("a damaged leveldb block ({e:?})"))
        }
        e => Error::Engine(e.to_string()),
    }
}

/// Every key a batch writes or removes fits the engine's key size.
fn check_key_lengths<'a>(mut keys: impl Iterator<Item = &'a Vec<u8>>) -> Result<()> {
    match keys.find(|k| k.len() > MAX_KEY_BYTES) {
        Some(long) => Err(Error::KeyTooLarge(long.len())),
        None => Ok(()),
    }
}

impl LeveldbStore {
    /// Opens (or creates) the database in `dir` for `vnodes` partitions,
    /// replaying its journal.
    pub fn open(dir: &Path, opts: LeveldbOptions, vnodes: usize) -> Result<LeveldbStore> {
        let buffers = opts.max_memory_bytes / 4;
        // Half the share for the memtables being written, half for those
        // waiting to be written out.
        let memtable_bytes =
            (buffers / 2 / vnodes.max(1) as u64).clamp(MIN_MEMTABLE_BYTES, MAX_MEMTABLE_BYTES);
        let cache = opts.max_memory_bytes - buffers;
        let open = || Database::builder(dir).cache_size(cache).open();
        let db = match open() {
            Err(fjall::Error::JournalRecovery(
                why @ (JournalRecoveryError::ChecksumMismatch
                | JournalRecoveryError::InsufficientLength
                | JournalRecoveryError::TooManyItems),
            )) => {
                // A damaged journal (not only a torn last batch) stops
                // fjall's recovery. Set it aside as Basho's leveldb sets
                // damaged files aside (`lost/`), and open what the tables
                // hold: this node loses the writes not yet in tables.
                let moved = set_aside_journals(dir)?;
                tracing::error!(dir = %dir.display(), ?why, moved = %moved.join(", "),
                    "the leveldb journal is damaged and was set aside in lost/: the writes since the last flush to tables are lost on this node; replicas on other nodes may hold them, and read repair brings those back");
                open().map_err(engine)?
            }
            other => other.map_err(engine)?,
        };
        tracing::info!(dir = %dir.display(), budget_bytes = opts.max_memory_bytes,
            block_cache_bytes = cache, write_buffers_bytes = buffers, "leveldb memory budget");
        Ok(LeveldbStore {
            db,
            dir: dir.to_path_buf(),
            opts,
            memtable_bytes,
            damaged: Arc::default(),
            budget: Arc::new(WriteBudget::new(buffers.max(MIN_MEMTABLE_BYTES))),
        })
    }

    /// Where the database lives.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn keyspace_name(partition: &str) -> String {
        format!("p{partition}")
    }

    /// The keyspace `name`, made if new with the store's settings (and,
    /// for a leveled journal, its values kept apart in blob files).
    pub(crate) fn keyspace(
        &self,
        name: &str,
        journal: Option<&JournalOptions>,
    ) -> Result<Keyspace> {
        let opts = &self.opts;
        let memtable = self.memtable_bytes;
        let ks = self
            .db
            .keyspace(name, || {
                let mut o = KeyspaceCreateOptions::default().max_memtable_size(memtable);
                // Every level below the first: a flush writes level 0
                // as fast as it can (it holds writes back meanwhile), and
                // the first compaction compresses. fjall's default leaves
                // level 1 uncompressed too, which held half the bytes of
                // a 10-million-key load (docs/benchmarks.md).
                use fjall::CompressionType::{Lz4, None as Plain};
                o = o.data_block_compression_policy(fjall::config::CompressionPolicy::all(
                    if opts.compression { Lz4 } else { Plain },
                ));
                // The index of every table in 4 KiB parts, none pinned:
                // a read brings into the block cache the part it needs,
                // not a table's whole index, so memory follows the keys
                // read rather than the keys stored (filters stay whole
                // per table: about 1.25 bytes a key, and a part per
                // level checked would cost more).
                use fjall::config::{PartitioningPolicy, PinningPolicy};
                o = o
                    .index_block_partitioning_policy(PartitioningPolicy::all(true))
                    .index_block_pinning_policy(PinningPolicy::all(false))
                    .filter_block_partitioning_policy(PartitioningPolicy::all(false));
                if !opts.bloom_filter {
                    o = o.filter_policy(fjall::config::FilterPolicy::disabled());
                }
                if let Some(j) = journal {
                    o = o.with_kv_separation(Some(j.engine_options()));
                }
                o
            })
            .map_err(engine)?;
        self.budget.register(&ks);
        Ok(ks)
    }

    /// A backend over keyspace `ks`.
    pub(crate) fn backend_of(&self, ks: Keyspace) -> LeveldbBackend {
        LeveldbBackend {
            db: self.db.clone(),
            ks,
            damaged: self.damaged.clone(),
            budget: self.budget.clone(),
            durability: if self.opts.sync_on_write {
                PersistMode::SyncData
            } else {
                PersistMode::Buffer
            },
        }
    }

    /// The backend of one partition (its keyspace made if new).
    pub fn partition(&self, partition: &str) -> Result<LeveldbBackend> {
        let name = Self::keyspace_name(partition);
        self.finish_repair(&name, None)?;
        let ks = self.keyspace(&name, None)?;
        Ok(self.backend_of(ks))
    }

    /// Drops a partition's data whole (its keyspace and files: a leveldb
    /// partition's, a leveled partition's, or what is left of a leveled
    /// partition in the first layout, and a repair's copy).
    pub fn drop_partition(&self, partition: &str) -> Result<()> {
        // A repair's copies first: one left behind would be put in the
        // partition's place when it next opens.
        for prefix in ["repair-p", "repair-lv", "p", "lv", "l", "v"] {
            self.drop_keyspace(&format!("{prefix}{partition}"))?;
        }
        Ok(())
    }

    pub(crate) fn db(&self) -> &Database {
        &self.db
    }

    pub(crate) fn keyspace_names(&self) -> Vec<String> {
        self.db
            .list_keyspace_names()
            .iter()
            .map(|n| n.as_ref().to_string())
            .collect()
    }

    pub(crate) fn keyspace_exists(&self, name: &str) -> bool {
        self.db.keyspace_exists(name)
    }

    /// Drops keyspace `name` and its files, if it exists.
    pub(crate) fn drop_keyspace(&self, name: &str) -> Result<()> {
        if !self.db.keyspace_exists(name) {
            return Ok(());
        }
        let ks = self
            .db
            .keyspace(name, KeyspaceCreateOptions::default)
            .map_err(engine)?;
        // Written out first: fjall counts a dropped keyspace's memtables
        // against the write buffers until the database is reopened.
        ks.rotate_memtable_and_wait().map_err(engine)?;
        self.budget.forget(name);
        self.db.delete_keyspace(ks).map_err(engine)
    }

    /// Every partition's keyspace (each is made before a vnode uses it,
    /// so opening one here makes none).
    fn keyspaces(&self) -> Result<Vec<Keyspace>> {
        self.db
            .list_keyspace_names()
            .iter()
            .map(|n| {
                self.db
                    .keyspace(n, KeyspaceCreateOptions::default)
                    .map_err(engine)
            })
            .collect()
    }

    /// Writes every partition's memtable out to tables (and waits), so
    /// everything written so far lies in table files.
    pub fn flush(&self) -> Result<()> {
        for ks in self.keyspaces()? {
            ks.rotate_memtable_and_wait().map_err(engine)?;
        }
        Ok(())
    }

    /// Reads that met a damaged block since the database opened.
    pub fn damaged_reads(&self) -> u64 {
        self.damaged.load(Ordering::Relaxed)
    }

    /// Writes that waited for the write buffers to be written out (over
    /// the budget's share) since the database opened.
    pub fn held_writes(&self) -> u64 {
        self.budget.held_writes()
    }

    /// Bytes in memtables now, every partition's, active and sealed (as
    /// fjall counts them).
    pub fn write_buffer_bytes(&self) -> u64 {
        self.db.write_buffer_size()
    }

    pub(crate) fn budget(&self) -> &WriteBudget {
        &self.budget
    }

    /// Makes every write durable now.
    pub fn sync(&self) -> Result<()> {
        self.db.persist(PersistMode::SyncAll).map_err(engine)
    }

    /// Bytes of the tables of every partition: what a compaction may
    /// rewrite.
    pub fn table_bytes(&self) -> u64 {
        self.keyspaces()
            .map_or(0, |all| all.iter().map(Keyspace::disk_space).sum())
    }
}

/// Moves the journal files of the database in `dir` to `dir/lost/`,
/// named with the time; returns their new names.
fn set_aside_journals(dir: &Path) -> Result<Vec<String>> {
    let lost = dir.join("lost");
    let io = |e: std::io::Error| Error::Engine(format!("setting a damaged journal aside: {e}"));
    std::fs::create_dir_all(&lost).map_err(io)?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut moved = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io)? {
        let path = e.map_err(io)?.path();
        if path.extension().is_some_and(|x| x == "jnl") {
            let name = format!(
                "{stamp}-{}",
                path.file_name().unwrap_or_default().to_string_lossy()
            );
            std::fs::rename(&path, lost.join(&name)).map_err(io)?;
            moved.push(name);
        }
    }
    Ok(moved)
}

/// One vnode's data in the node's leveldb database.
pub struct LeveldbBackend {
    pub(crate) db: Database,
    pub(crate) ks: Keyspace,
    /// Reads that met a damaged block, all the node's partitions.
    pub(crate) damaged: Arc<AtomicU64>,
    pub(crate) budget: Arc<WriteBudget>,
    pub(crate) durability: PersistMode,
}

impl LeveldbBackend {
    /// A read's error: a damaged block is counted (and logged by the
    /// caller with the key's request).
    pub(crate) fn read_err(&self, e: fjall::Error) -> Error {
        let e = engine(e);
        if matches!(e, Error::Corrupt(_)) {
            self.damaged.fetch_add(1, Ordering::Relaxed);
        }
        e
    }

    /// Adds a put's changes to `batch`: `value` under the object's key,
    /// index entries in `remove` dropped and those in `add` added; returns
    /// the object's key.
    pub(crate) fn put_into(
        &self,
        batch: &mut fjall::OwnedWriteBatch,
        k: &BKey,
        value: &[u8],
        add: &[IndexEntry],
        remove: &[IndexEntry],
    ) -> Result<Vec<u8>> {
        let obj = object_key(k)?;
        let added = index_keys(k, add)?;
        let removed = index_keys(k, remove.iter().filter(|r| !add.contains(r)))?;
        check_key_lengths(added.iter().chain(&removed).chain(std::iter::once(&obj)))?;
        if value.len() > MAX_VALUE_BYTES {
            return Err(Error::ValueTooLarge(value.len()));
        }
        for key in removed {
            batch.remove(&self.ks, key);
        }
        for key in added {
            batch.insert(&self.ks, key, b"");
        }
        batch.insert(&self.ks, obj.as_slice(), value);
        Ok(obj)
    }

    /// Adds a delete's changes to `batch`; returns the object's key.
    pub(crate) fn delete_into(
        &self,
        batch: &mut fjall::OwnedWriteBatch,
        k: &BKey,
        remove: &[IndexEntry],
    ) -> Result<Vec<u8>> {
        let obj = object_key(k)?;
        let keys = index_keys(k, remove)?;
        check_key_lengths(keys.iter().chain(std::iter::once(&obj)))?;
        for key in keys {
            batch.remove(&self.ks, key);
        }
        batch.remove(&self.ks, obj.as_slice());
        Ok(obj)
    }

    pub(crate) fn commit(&self, batch: fjall::OwnedWriteBatch) -> Result<()> {
        self.budget.admit(&self.db)?;
        batch
            .durability(Some(self.durability))
            .commit()
            .map_err(engine)
    }

    /// Visits keys from `start` up to `end` (excluded; `None`: to the
    /// last); `visit` returns false to stop. A `snapshot` scan sees the
    /// keys as they were when it began, every batch whole or not at all;
    /// otherwise it sees each key as it is when reached (never overrun,
    /// however long it takes, but a key moved ahead of it by a write is
    /// seen twice).
    fn scan(
        &self,
        start: &[u8],
        end: Option<Vec<u8>>,
        snapshot: bool,
        visit: &mut dyn FnMut(&[u8]) -> Result<bool>,
    ) -> Result<()> {
        let range = (
            Bound::Included(start.to_vec()),
            end.map_or(Bound::Unbounded, Bound::Excluded),
        );
        let items = if snapshot {
            fjall::Readable::range::<Vec<u8>, _>(&self.db.snapshot(), &self.ks, range)
        } else {
            self.ks.range::<Vec<u8>, _>(range)
        };
        for item in items {
            let key = item.key().map_err(|e| self.read_err(e))?;
            if !visit(&key)? {
                break;
            }
        }
        Ok(())
    }
}

impl Backend for LeveldbBackend {
    fn name(&self) -> &'static str {
        "riak_kv_eleveldb_backend"
    }

    fn get(&self, k: &BKey) -> Result<Option<bytes::Bytes>> {
        let v = self.ks.get(object_key(k)?).map_err(|e| self.read_err(e))?;
        Ok(v.map(|v| bytes::Bytes::copy_from_slice(&v)))
    }

    fn contains(&self, k: &BKey) -> Result<bool> {
        self.ks
            .contains_key(object_key(k)?)
            .map_err(|e| self.read_err(e))
    }

    fn put(&self, k: &BKey, value: &[u8], add: &[IndexEntry], remove: &[IndexEntry]) -> Result<()> {
        let mut batch = self.db.batch();
        self.put_into(&mut batch, k, value, add, remove)?;
        self.commit(batch)
    }

    fn delete(&self, k: &BKey, remove: &[IndexEntry]) -> Result<()> {
        let mut batch = self.db.batch();
        self.delete_into(&mut batch, k, remove)?;
        self.commit(batch)
    }

    fn fold_buckets(&self, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        // One seek per bucket: after a bucket's first key, on to the
        // successor of its prefix.
        let mut start = vec![OBJECT];
        let end = prefix_successor(&[OBJECT]);
        loop {
            let mut next = None;
            self.scan(&start, end.clone(), false, &mut |raw| {
                next = split(raw).map(|(_, t, b, _)| (t.to_vec(), b.to_vec()));
                Ok(false)
            })?;
            let Some((t, b)) = next else {
                return Ok(());
            };
            if !visit(&t, &b) {
                return Ok(());
            }
            match prefix_successor(&bucket_prefix(OBJECT, &t, &b)?) {
                Some(s) => start = s,
                None => return Ok(()),
            }
        }
    }

    fn holds_objects(&self) -> Result<bool> {
        let mut any = false;
        self.scan(&[OBJECT], prefix_successor(&[OBJECT]), false, &mut |_| {
            any = true;
            Ok(false)
        })?;
        Ok(any)
    }

    fn fold_keys(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<()> {
        let prefix = bucket_prefix(OBJECT, bucket_type, bucket)?;
        self.scan(&prefix, prefix_successor(&prefix), false, &mut |raw| {
            Ok(visit(&raw[prefix.len()..]))
        })
    }

    fn query_index(
        &self,
        q: &IndexQuery,
        visit: &mut dyn FnMut(&Term, &[u8]) -> bool,
    ) -> Result<()> {
        let field = index_field_prefix(&q.bucket_type, &q.bucket, &q.field)?;
        let (lo, hi) = q.range.bounds();
        let mut start = field.clone();
        start.extend_from_slice(&term_prefix(lo));
        if let Some((t, key)) = &q.after {
            let mut after = field.clone();
            after.extend_from_slice(&index_position(t, key));
            // Strictly after it: the least key greater than `after`.
            after.push(0);
            start = start.max(after);
        }
        let mut end = field.clone();
        end.extend_from_slice(&term_prefix(hi));
        let end = prefix_successor(&end);
        let mut bad = 0u64;
        // A snapshot: a query never sees both the entry a write removed
        // and the one it added (pages are short; a continuation resumes).
        self.scan(
            &start,
            end,
            true,
            &mut |raw| match split_position(&raw[field.len()..]) {
                Some((term, key)) => Ok(visit(&term, key)),
                None => {
                    bad += 1;
                    Ok(true)
                }
            },
        )?;
        if bad > 0 {
            tracing::warn!(bad, "index entries that do not decode were skipped");
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.db.persist(PersistMode::SyncAll).map_err(engine)
    }

    fn size_bytes(&self) -> u64 {
        self.ks.disk_space()
    }
}

/// fjall's limits: keys up to 64 KiB, values below 4 GiB; Rill keeps
/// values to 256 MiB, as its peer messages do.
const MAX_KEY_BYTES: usize = 65535;
pub(crate) const MAX_VALUE_BYTES: usize = 256 << 20;

/// Inserts of a copy into keyspace `to`, committed every few MiB (each
/// commit in the kernel; the copier's caller makes the copy durable).
pub(crate) struct Copier<'a> {
    db: &'a Database,
    budget: &'a WriteBudget,
    to: &'a Keyspace,
    batch: fjall::OwnedWriteBatch,
    bytes: usize,
}

impl<'a> Copier<'a> {
    pub(crate) fn new(db: &'a Database, budget: &'a WriteBudget, to: &'a Keyspace) -> Copier<'a> {
        Copier {
            db,
            budget,
            to,
            batch: db.batch(),
            bytes: 0,
        }
    }

    pub(crate) fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.bytes += key.len() + value.len();
        self.batch.insert(self.to, key, value);
        if self.bytes >= 4 << 20 {
            let full = std::mem::replace(&mut self.batch, self.db.batch());
            self.bytes = 0;
            self.budget.admit(self.db)?;
            commit_buffered(full)?;
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> Result<()> {
        commit_buffered(self.batch)
    }
}

fn commit_buffered(batch: fjall::OwnedWriteBatch) -> Result<()> {
    batch
        .durability(Some(PersistMode::Buffer))
        .commit()
        .map_err(engine)
}
