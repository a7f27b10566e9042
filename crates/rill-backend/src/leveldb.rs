//! The leveldb backend (`storage_backend = leveldb`): objects and index
//! entries in one sorted LSM tree per vnode, on fjall (pure Rust; bloom
//! filters, LZ4 on every level, a journal shared by the node).
//!
//! One fjall database per node holds a keyspace per partition, so the
//! node's memory budget (block cache and write buffers, Riak's
//! `leveldb.maximum_memory`) is shared by its vnodes, a put's object and
//! index changes are one atomic batch, and a partition's data is dropped
//! whole. Keys are those of `keys` (docs/format.md, "Backend keys"): an
//! object's under `'o'`, its index entries under `'j'`, in an order where a
//! range query is one scan and a bucket's keys lie together.

use crate::batch_gate::BatchGate;
use crate::journal_writeback::JournalWriteback;
pub use crate::leveldb_vnode::LeveldbBackend;
pub(crate) use crate::leveldb_vnode::{Copier, MAX_VALUE_BYTES};
use crate::leveled::JournalOptions;
use crate::write_budget::WriteBudget;
use crate::{Error, Result};
use fjall::{
    AbstractTree, Database, JournalRecoveryError, Keyspace, KeyspaceCreateOptions, PersistMode,
};
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

/// Write buffers (memtables) take a quarter of the memory budget; a
/// vnode's memtable is sealed at half that quarter over the vnodes,
/// between these bounds, and writes wait while
/// all of them together are over that quarter (`write_budget`); the
/// block cache takes the rest. A vnode's bounds are kept from its first start
/// (fjall stores a keyspace's options when it is made), as are
/// compression and bloom filters.
const MIN_MEMTABLE_BYTES: u64 = 256 << 10;
/// How long dropping a keyspace waits for its memtables to be written
/// out (then it is dropped anyway; its bytes stay counted by fjall until
/// the next start, and the write budget counts the open keyspaces).
const DROP_FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
const MAX_MEMTABLE_BYTES: u64 = 64 << 20;
/// fjall's background threads. Its first only writes memtables out, the
/// others compact or write out; fjall's default is one per core up to
/// four, so two on a two-core machine, where memtables then waited to be
/// written out and writes were held for most of a second in `rill-bench
/// ingest` (slowest put 0.68-1.02 s; 0.21-0.29 s with four, the same
/// throughput), and `rill-bench mixed` did 1.14 times as much on leveldb
/// with four. Four whatever the cores (measured on two).
const WORKER_THREADS: usize = 4;

/// How close the partitions are to fjall's own write stalls: the most
/// level-0 runs and the most sealed memtables of any partition (each
/// counted apart, so the two may come from different partitions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pressure {
    pub l0_runs: usize,
    pub sealed_memtables: usize,
}

/// A node's leveldb database: one keyspace per partition.
pub struct LeveldbStore {
    db: Database,
    dir: std::path::PathBuf,
    opts: LeveldbOptions,
    damaged: Arc<AtomicU64>,
    budget: Arc<WriteBudget>,
    gate: Arc<BatchGate>,
    /// Stopped when the store is dropped (the vnodes' handles may keep
    /// the database open a little longer: harmless).
    _writeback: Option<JournalWriteback>,
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
        let open = || {
            Database::builder(dir)
                .cache_size(cache)
                .worker_threads(WORKER_THREADS)
                .open()
        };
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
        // With a sync per write there is little left to write back; off
        // Linux there is no call to start it with.
        let writeback = if opts.sync_on_write || !cfg!(target_os = "linux") {
            None
        } else {
            JournalWriteback::start(dir)
                .inspect_err(|e| tracing::warn!(error = %e, "no leveldb journal writeback thread"))
                .ok()
        };
        let store = LeveldbStore {
            db,
            dir: dir.to_path_buf(),
            opts,
            damaged: Arc::default(),
            budget: Arc::new(WriteBudget::new(
                buffers.max(MIN_MEMTABLE_BYTES),
                memtable_bytes,
            )),
            gate: Arc::default(),
            _writeback: writeback,
        };
        // Every keyspace counts against the budget from the start: the
        // journal's replay fills their memtables.
        for ks in store.keyspaces()? {
            store.budget.register(&ks);
        }
        Ok(store)
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
        let memtable = self.budget.memtable_size();
        let ks = self
            .db
            .keyspace(name, || {
                let mut o = KeyspaceCreateOptions::default().max_memtable_size(memtable);
                // Every level, as Riak's leveldb (fjall's default leaves
                // levels 0 and 1 uncompressed: a 10-million-key load took
                // 1.7 times the bytes, docs/benchmarks.md).
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
            gate: self.gate.clone(),
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
        // Written out first (for a while): fjall counts a dropped
        // keyspace's memtables against the write buffers until the
        // database is opened again; the budget subtracts what is left.
        if ks.rotate_memtable().map_err(engine)? {
            let began = std::time::Instant::now();
            while ks.tree.sealed_memtable_count() > 0 && began.elapsed() < DROP_FLUSH_WAIT {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        let left = ks.tree.active_memtable().size()
            + ks.tree.sealed_memtable_count() as u64 * self.budget.memtable_size();
        self.db.delete_keyspace(ks).map_err(engine)?;
        self.budget.dropped(name, left);
        Ok(())
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

    /// The most level-0 runs and the most sealed memtables of any open
    /// partition now: fjall slows writes from 20 level-0 runs, stops them
    /// at 30 and at 4 sealed memtables.
    pub fn pressure(&self) -> Pressure {
        self.budget.pressure()
    }

    pub(crate) fn budget(&self) -> &WriteBudget {
        &self.budget
    }

    pub(crate) fn gate(&self) -> &BatchGate {
        &self.gate
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
