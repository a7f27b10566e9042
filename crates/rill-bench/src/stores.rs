//! The engines the workloads compare: Rill's backends through the trait a
//! vnode uses, and RocksDB laid out as Riak's eleveldb backend lays out
//! objects and index entries (one keyspace, an object and its index
//! changes in one atomic batch).

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use rill_backend::{
    BKey, Backend, BitcaskBackend, IndexEntry, IndexQuery, IndexRange, JournalOptions,
    LeveldbOptions, LeveldbStore, Term,
};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// What the workload asks of an engine.
pub(crate) trait Store: Sync {
    /// The object `key` (its value; RocksDB's holds the head first).
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>>;
    /// What a vnode reads before it writes a version whose clock has seen
    /// the stored one (a client's read-modify-write): the head where the
    /// engine keeps heads apart from values (leveled), else the object.
    fn read_for_update(&self, key: &[u8]) -> Result<()> {
        self.get(key).map(drop)
    }
    /// Writes `value` with `head` and replaces index entries `remove`
    /// with `add`, all at once.
    fn update(
        &self,
        key: &[u8],
        value: &[u8],
        head: &[u8],
        add: &[IndexEntry],
        remove: &[IndexEntry],
    ) -> Result<()>;
    /// Up to `limit` entries of `field` with terms in `lo..=hi`, with
    /// their terms; how many.
    fn query(&self, field: &[u8], lo: &[u8], hi: &[u8], limit: u64) -> Result<u64>;
    /// Writes buffered data out, then the bytes the engine holds on disk
    /// (tables, blob and data files; write-ahead logs not counted).
    fn disk_bytes(&self) -> Result<u64>;
    /// What the engine does when its node stops cleanly (Rill's LSM
    /// backends write their memtables out; RocksDB and Bitcask nothing
    /// beyond closing).
    fn stop(&self) -> Result<()> {
        Ok(())
    }
    /// What the engine did in the background, to print (if anything).
    fn background(&self) -> Option<String> {
        None
    }
    /// How close an LSM engine is to its write stalls now (Rill's fjall
    /// stores: level-0 runs, sealed memtables).
    fn pressure(&self) -> Option<rill_backend::Pressure> {
        None
    }
}

const BUCKET: &[u8] = b"bench";

/// A Rill backend and what keeps it alive.
struct Rill {
    backend: Box<dyn Backend>,
    lsm: Option<LeveldbStore>,
    scheduler: Option<merge_control::MergeScheduler>,
}

impl Store for Rill {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        Ok(self.backend.get(&BKey::new(b"", BUCKET, key))?)
    }
    fn read_for_update(&self, key: &[u8]) -> Result<()> {
        match self.backend.get_head(&BKey::new(b"", BUCKET, key)) {
            Some(head) => head.map(drop).map_err(Into::into),
            None => self.get(key).map(drop),
        }
    }
    fn update(
        &self,
        key: &[u8],
        value: &[u8],
        head: &[u8],
        add: &[IndexEntry],
        remove: &[IndexEntry],
    ) -> Result<()> {
        let k = BKey::new(b"", BUCKET, key);
        Ok(self.backend.put_with_head(&k, value, head, add, remove)?)
    }
    fn query(&self, field: &[u8], lo: &[u8], hi: &[u8], limit: u64) -> Result<u64> {
        let q = IndexQuery {
            bucket_type: Vec::new(),
            bucket: BUCKET.to_vec(),
            field: field.to_vec(),
            range: IndexRange::Range(Term::Bin(lo.to_vec()), Term::Bin(hi.to_vec())),
            after: None,
        };
        let mut n = 0u64;
        self.backend.query_index(&q, &mut |_, _| {
            n += 1;
            n < limit
        })?;
        Ok(n)
    }
    fn disk_bytes(&self) -> Result<u64> {
        if let Some(store) = &self.lsm {
            store.flush()?;
        }
        Ok(self.backend.size_bytes())
    }
    fn stop(&self) -> Result<()> {
        if let Some(store) = &self.lsm {
            store.flush()?;
        }
        Ok(())
    }
    fn pressure(&self) -> Option<rill_backend::Pressure> {
        self.lsm.as_ref().map(LeveldbStore::pressure)
    }
    fn background(&self) -> Option<String> {
        let m = self.scheduler.as_ref()?.metrics();
        Some(format!(
            "merges {} (read {} MB, wrote {} MB)",
            m.merges,
            m.merge_bytes_read / 1_000_000,
            m.merge_bytes_written / 1_000_000
        ))
    }
}

/// RocksDB: objects under `'o' key` (head then value, as eleveldb keeps
/// a whole object), index entries under `'i' field 0 term 0 key` with no
/// value (the mix's terms are ASCII, so byte order is term order).
struct Rocks(rocksdb_dl::RocksDb);

fn object_key(key: &[u8]) -> Vec<u8> {
    [b"o", key].concat()
}

fn index_key(field: &[u8], term: &[u8], key: &[u8]) -> Vec<u8> {
    [b"i", field, b"\0", term, b"\0", key].concat()
}

impl Store for Rocks {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        Ok(self.0.get(&object_key(key))?.map(Bytes::from))
    }
    fn update(
        &self,
        key: &[u8],
        value: &[u8],
        head: &[u8],
        add: &[IndexEntry],
        remove: &[IndexEntry],
    ) -> Result<()> {
        let mut b = rocksdb_dl::WriteBatch::new()?;
        b.put(&object_key(key), &[head, value].concat());
        for (field, term) in remove {
            b.delete(&index_key(field, term_bytes(term)?, key));
        }
        for (field, term) in add {
            b.put(&index_key(field, term_bytes(term)?, key), b"");
        }
        Ok(self.0.write(&b)?)
    }
    fn query(&self, field: &[u8], lo: &[u8], hi: &[u8], limit: u64) -> Result<u64> {
        let prefix = [b"i", field, b"\0"].concat();
        // Every entry whose term is at most `hi`: `hi 0 ...` sorts below.
        let end = [&prefix[..], hi, b"\x01"].concat();
        let mut it = self.0.iter();
        it.seek(&[&prefix[..], lo].concat());
        let mut n = 0u64;
        while let Some((k, _)) = it.current()? {
            if k >= &end[..] || n >= limit {
                break;
            }
            // return_terms: the term is read back out of the key.
            let rest = &k[prefix.len()..];
            let term_end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            std::hint::black_box(&rest[..term_end]);
            n += 1;
            it.advance();
        }
        Ok(n)
    }
    fn disk_bytes(&self) -> Result<u64> {
        self.0.flush()?;
        self.0
            .table_bytes()
            .context("RocksDB did not report rocksdb.total-sst-files-size")
    }
}

fn term_bytes(t: &Term) -> Result<&[u8]> {
    match t {
        Term::Bin(b) => Ok(b),
        Term::Int(_) => bail!("the mix uses _bin terms only"),
    }
}

/// The LSM engines' budget in a child: `percent` of the run's memory
/// limit (`mib`, 0 or none: no limit, then 1 GiB).
pub(crate) fn budget(mib: Option<u64>, percent: u64) -> u64 {
    mib.filter(|&m| m > 0)
        .map_or(1 << 30, |m| (m << 20) / 100 * percent.clamp(1, 100))
}

/// Opens `engine` in `dir` with `budget` bytes for its caches and write
/// buffers (the LSM engines; Bitcask keeps its keys in RAM whatever).
pub(crate) fn open(engine: &str, dir: &Path, budget: u64) -> Result<Box<dyn Store>> {
    let lsm = LeveldbOptions {
        max_memory_bytes: budget,
        ..LeveldbOptions::default()
    };
    Ok(match engine {
        "leveldb" | "leveled" => {
            let store = LeveldbStore::open(dir, lsm, 1)?;
            let backend: Box<dyn Backend> = if engine == "leveled" {
                Box::new(store.leveled_partition("0", &JournalOptions::default())?)
            } else {
                Box::new(store.partition("0")?)
            };
            Box::new(Rill {
                backend,
                lsm: Some(store),
                scheduler: None,
            })
        }
        "bitcask" => {
            use merge_control::{Classic, SchedulerSettings, UsageSource};
            let store = Arc::new(bitcask::Store::open(dir, bitcask::Options::default())?);
            let scheduler = merge_control::MergeScheduler::start(SchedulerSettings {
                usage: UsageSource::Filesystem(dir.to_path_buf()),
                policy: Box::new(Classic::default()),
                throttle: Default::default(),
                workers: 1,
                idle_tick: Duration::from_millis(200),
            });
            scheduler.add_store(store.clone());
            Box::new(Rill {
                backend: Box::new(BitcaskBackend::open(store)?),
                lsm: None,
                scheduler: Some(scheduler),
            })
        }
        "rocksdb" => {
            rocksdb_dl::available().context("librocksdb (apt-get install librocksdb7.8)")?;
            let tuning = rocksdb_dl::Tuning {
                // As Rill's leveldb splits its budget: three quarters
                // block cache; RocksDB's write buffers stay at its default
                // (two memtables of 64 MiB), a quarter of a 512 MiB budget.
                block_cache_bytes: Some((budget / 4 * 3).max(8 << 20) as usize),
                bloom_bits_per_key: Some(10.0),
                lz4: true,
                ..rocksdb_dl::Tuning::default()
            };
            Box::new(Rocks(rocksdb_dl::RocksDb::open(dir, &tuning)?))
        }
        other => bail!("unknown engine {other:?}: leveled, leveldb, bitcask or rocksdb"),
    })
}
