//! The engine: samples in through the log, out as blocks.
//!
//! A write names its series (ids from the [`Catalog`]), goes into the log
//! as one record, and is acknowledged once the log has it on the disk
//! (group commit). Acknowledged records are then added to the buffers in
//! log order, whatever order their writers woke in, so the buffers after a
//! restart (the log replayed) are what they were; a write returns only
//! once its samples are in the buffers, so a query after it sees them.
//! Cut blocks wait in a queue until [`Engine::tick`] stores them in their
//! database's store, numbering a window's parts in the order they were
//! cut; a tick also closes the windows that have ended, stores the series
//! records the log's oldest segments define, syncs, and deletes the log's
//! segments whose every sample is in a synced block.
//!
//! Time is a parameter (`now`, ns since the Unix epoch): nothing here
//! reads a clock.

mod browse;
#[cfg(test)]
mod browse_tests;
mod digest;
mod flush;
mod helpers;
mod homes;
mod kept;
mod legacy;
mod merge;
mod ms;
mod queue;
mod read;
mod series_list;
mod stats;
mod write;
pub use browse::{Bucket, Buckets};
pub use digest::{series_digest, HomeSeries, SliceDigest, MAX_SLICE_NS};
pub use read::ReadBudget;
pub use stats::EngineStats;
#[cfg(test)]
mod tests;

use crate::buffer::Buffers;
use crate::catalog::Catalog;
use crate::catalog::{Definition, Placer};
use crate::keys::{definition_of, parse_block_key, MAX_NAME_BYTES};
use crate::storage::{BlockStore, Storage};
use crate::wal::format::Entry;
use crate::wal::{ReplayReport, Wal, WalError, WalOptions};
use rill_sensor::{Choice, Sample};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::io;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// How the engine keeps samples.
#[derive(Clone)]
pub struct EngineOptions {
    /// The log's settings (its `vfs` is the stores' too, for tests).
    pub wal: WalOptions,
    /// A window's length, ns: blocks never span two.
    pub window_ns: i64,
    /// Samples in a full block (the sensor-data paper's B).
    pub block_samples: usize,
    /// A window is cut this long after its end, for samples that come
    /// late (a sample later still starts a later part of its window).
    pub grace_ns: i64,
    /// How long a database keeps its samples (the paper's Y), ns.
    pub retention_ns: i64,
    /// Databases with a storage period of their own.
    pub retention_of: HashMap<String, i64>,
    /// Samples further ahead of `now` than this are refused.
    pub max_future_ns: i64,
    pub codec: Choice,
    /// Samples in cut blocks not yet stored past which writes are
    /// refused as busy (the stores are failing: a full disk).
    pub max_unstored_samples: usize,
    /// Log segments past which the windows holding the oldest are cut
    /// before they end.
    pub max_log_segments: usize,
    /// Blocks written or read lately, kept in memory (`sensor.block_cache`).
    pub block_cache: Arc<crate::cache::BlockCache>,
    /// Each series' home partition (by default all in partition 0): its
    /// blocks are stored in the shard of its database and home.
    pub placer: Placer,
}

pub const HOUR_NS: i64 = 3_600_000_000_000;
/// Blocks written or read lately kept in memory by default: 64 MiB, some
/// eighty million samples of the benchmark's data.
pub const DEFAULT_BLOCK_CACHE_BYTES: usize = 64 << 20;
/// A database's name is at most this long (its store's directory is
/// named by it in hex, within a file name's 255 bytes).
pub const MAX_DB_NAME_BYTES: usize = 120;
pub const DAY_NS: i64 = 24 * HOUR_NS;

impl EngineOptions {
    /// Riak-like defaults on `wal`: windows of an hour cut after five
    /// minutes, blocks of 2048 samples, 30 days kept, two days ahead.
    pub fn new(wal: WalOptions) -> EngineOptions {
        EngineOptions {
            wal,
            window_ns: HOUR_NS,
            block_samples: 2048,
            grace_ns: 5 * 60_000_000_000,
            retention_ns: 30 * DAY_NS,
            retention_of: HashMap::new(),
            max_future_ns: 2 * DAY_NS,
            codec: Choice::Auto,
            max_unstored_samples: 50_000_000,
            max_log_segments: 16,
            block_cache: crate::cache::BlockCache::new(DEFAULT_BLOCK_CACHE_BYTES),
            placer: Placer::default(),
        }
    }

    /// Database `db`'s storage period, ns.
    pub fn retention(&self, db: &str) -> i64 {
        self.retention_of
            .get(db)
            .copied()
            .unwrap_or(self.retention_ns)
    }
}

/// Why a write or a read failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Wal(#[from] WalError),
    #[error("sensor store: {0}")]
    Store(#[from] io::Error),
    #[error("{0}")]
    Invalid(String),
    #[error(
        "the sensor stores are not keeping up ({0} samples waiting to be stored); retry later"
    )]
    Busy(usize),
    #[error(
        "a damaged sensor block of {series} (window starting {window} ns, part {part}): {error}"
    )]
    Damaged {
        series: String,
        window: i64,
        part: u32,
        error: rill_sensor::BlockError,
    },
    /// A read given a [`ReadBudget`] would decode more samples than it
    /// allows, or wait for the device (it stopped first).
    #[error("the read would pass its budget or wait for the device")]
    OverBudget,
}

/// What a write did with its samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteReport {
    pub written: u64,
    /// Older than the database's storage period: not kept.
    pub too_old: u64,
    /// Further ahead than allowed: refused.
    pub too_new: u64,
    /// Of series whose key is longer than allowed: refused.
    pub bad_series: u64,
}

/// What the open found.
#[derive(Debug, Default)]
pub struct OpenReport {
    pub log: ReplayReport,
    pub series: usize,
    pub databases: usize,
    /// Samples of the log put back into the buffers.
    pub replayed_samples: u64,
    /// Samples in the log naming a series with no definition (damage).
    pub orphan_samples: u64,
    /// Blocks moved from stores of the layout before home partitions
    /// into shards.
    pub legacy_blocks_moved: u64,
}

struct Db {
    /// Its shards opened so far, by home partition.
    stores: BTreeMap<u32, Arc<dyn BlockStore>>,
    /// The windows each home partition has blocks stored of, for the
    /// homes whose keys were looked through (engine/digest.rs: a digest
    /// of a decade of empty slices reads only the windows there are).
    /// Windows expired since may linger; a window stored is never
    /// missing. With it, whether the keys were all looked through yet
    /// (blocks stored meanwhile are added as they are).
    stored_windows: crate::FastMap<u32, (bool, BTreeSet<i64>)>,
    retention_ns: i64,
    buffers: Buffers,
    /// Home partitions whose shard had blocks put since the last sync.
    dirty: BTreeSet<u32>,
    /// Writes applied to each home partition (a hand-off drops what it
    /// read only if none came since).
    writes: crate::FastMap<u32, u64>,
    /// Slices a write touched after they settled, by home and slice
    /// start, each with the write's mark and its time, ns
    /// (engine/digest.rs).
    late: crate::FastMap<u32, BTreeMap<i64, (u64, i64)>>,
    /// Times each home partition was dropped (its kept digests then are
    /// not trusted).
    drops: crate::FastMap<u32, u64>,
}

/// A logged write waiting to be added to the buffers in log order.
struct Logged {
    seq: u64,
    segment: u64,
    db: String,
    /// The time the write was judged at, ns.
    now: i64,
    defines: Vec<u64>,
    /// Each series' id, group and samples (a range of `flat`).
    series: Vec<(u64, u64, std::ops::Range<usize>)>,
    flat: Vec<Sample>,
    /// `None` until its commit returned.
    done: Option<bool>,
}

struct State {
    catalog: Catalog,
    dbs: HashMap<String, Db>,
    logged: VecDeque<Logged>,
    next_seq: u64,
    /// Every write up to this was added to the buffers (or failed).
    applied: u64,
    /// Cut blocks not yet stored, in the order they were cut.
    unstored: queue::Queue,
    /// Samples before this time are in settled slices: a write of one
    /// marks its slice (engine/digest.rs).
    settled: i64,
    /// The last mark given.
    late_seq: u64,
}

pub struct Engine {
    opts: EngineOptions,
    wal: Wal,
    storage: Arc<dyn Storage>,
    catalog_store: Arc<dyn BlockStore>,
    state: Mutex<State>,
    applied: Condvar,
    /// Held by the one storing blocks (a tick, a clean stop). Reads do
    /// not take it: a block leaves memory only once it is in its store,
    /// so a read that takes memory first and the stores after misses
    /// nothing (engine/queue.rs).
    storing: Mutex<()>,
    counters: stats::Counters,
    /// The window whose start last closed the shards' files.
    sealed_window: std::sync::atomic::AtomicI64,
    /// Every series parsed, and the catalog's generation it was made at.
    parsed: Mutex<(u64, series_list::ParsedSeries)>,
    /// Held by every read's sources (engine/read.rs): a helper thread
    /// may still hold one for the window it is reading after the read
    /// returned, and the engine waits for it before it lets its stores go.
    reads: Arc<()>,
    /// Digests of settled slices (engine/digest.rs).
    digests: Mutex<kept::Kept>,
}

impl Drop for Engine {
    fn drop(&mut self) {
        // A helper reading a window of a read already answered holds
        // that read's store for as long as one window takes: the stores
        // (and their directories' locks) must be gone when the engine is.
        while Arc::strong_count(&self.reads) > 1 {
            std::thread::yield_now();
        }
    }
}

impl Engine {
    /// Opens the engine: series from the catalog store, databases from
    /// their stores, then the log replayed into the buffers (samples
    /// older than their storage period at `now` left out). The log lives
    /// in `dir`.
    pub fn open(
        dir: &Path,
        opts: EngineOptions,
        storage: Arc<dyn Storage>,
        now: i64,
    ) -> Result<(Engine, OpenReport), EngineError> {
        assert!(opts.window_ns > 0 && opts.grace_ns >= 0 && opts.retention_ns > 0);
        assert!((1..=rill_sensor::block::MAX_SAMPLES).contains(&opts.block_samples));
        let mut report = OpenReport::default();
        let catalog_store = storage.catalog()?;
        let mut catalog = Catalog::new(opts.placer.clone());
        let mut bad = 0u64;
        let mut floor = 0u64;
        catalog_store.fold(&mut |k, v| match definition_of(k, v) {
            Some(Ok(d)) => catalog.found_stored(&d),
            None if k == crate::keys::WINDOW => {}
            None if k == crate::keys::NEXT_ID => match <[u8; 8]>::try_from(v) {
                Ok(b) => floor = u64::from_be_bytes(b),
                Err(_) => bad += 1,
            },
            _ => bad += 1,
        })?;
        catalog.raise_next(floor);
        Self::check_window(catalog_store.as_ref(), opts.window_ns)?;
        if bad > 0 {
            tracing::error!(
                records = bad,
                "damaged series records in the sensor catalog are skipped"
            );
        }
        let mut dbs = HashMap::new();
        for name in storage
            .databases()?
            .into_iter()
            .chain(storage.legacy_databases()?)
        {
            dbs.entry(name)
                .or_insert_with_key(|n| Self::make_db(&opts, n));
        }
        for (name, home) in storage.shards()? {
            let store = opts.block_cache.wrap(storage.shard(&name, home)?);
            dbs.entry(name)
                .or_insert_with_key(|n| Self::make_db(&opts, n))
                .stores
                .insert(home, store);
        }
        let mut unstored = queue::Queue::default();
        let mut open_err = None;
        let (wal, log) = Wal::open(dir, opts.wal.clone(), |segment, entry| match entry {
            Entry::Series {
                id,
                db,
                key,
                group,
                group_key,
            } => {
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                catalog.found_durable(&Definition {
                    id,
                    db: text(&db),
                    key: text(&key),
                    group,
                    group_key: text(&group_key),
                });
            }
            Entry::Samples { id, samples } => {
                let (Some((db, _)), Some(group)) = (catalog.name(id), catalog.group(id)) else {
                    // Below the floor: a series whose data left the node.
                    if id >= floor {
                        report.orphan_samples += samples.len() as u64;
                    }
                    return;
                };
                let db = db.to_string();
                if !dbs.contains_key(&db) {
                    if let Err(e) = storage.create(&db) {
                        open_err.get_or_insert(EngineError::from(e));
                        return;
                    }
                    dbs.insert(db.clone(), Self::make_db(&opts, &db));
                }
                let d = dbs.get_mut(&db).expect("made above");
                let oldest = now.saturating_sub(d.retention_ns);
                let kept: Vec<Sample> = samples.into_iter().filter(|s| s.ts >= oldest).collect();
                report.replayed_samples += kept.len() as u64;
                d.buffers.add(group, id, &kept, segment);
            }
        })?;
        if let Some(e) = open_err {
            return Err(e);
        }
        // Cut once the log is in (a record's series were added in turn,
        // and the fields of a line leave together, as when written).
        for (name, d) in &mut dbs {
            let mut cuts = Vec::new();
            d.buffers.take_full(&mut cuts);
            unstored.extend(name, cuts);
        }
        if report.orphan_samples > 0 {
            tracing::error!(
                samples = report.orphan_samples,
                "samples in the sensor log name a series never defined (damage); they are skipped"
            );
        }
        for name in storage.legacy_databases()? {
            let moved =
                legacy::move_into_shards(&opts, storage.as_ref(), &catalog, &name, &mut dbs)?;
            report.legacy_blocks_moved += moved;
        }
        report.log = log;
        report.series = catalog.len();
        report.databases = dbs.len();
        let state = State {
            catalog,
            dbs,
            logged: VecDeque::new(),
            next_seq: 1,
            applied: 0,
            unstored,
            settled: i64::MIN,
            late_seq: 0,
        };
        let engine = Engine {
            opts,
            wal,
            storage,
            catalog_store,
            state: Mutex::new(state),
            applied: Condvar::new(),
            storing: Mutex::new(()),
            counters: stats::Counters::default(),
            parsed: Mutex::new((u64::MAX, Arc::new(Vec::new()))),
            sealed_window: std::sync::atomic::AtomicI64::new(i64::MIN),
            reads: Arc::new(()),
            digests: Mutex::default(),
        };
        Ok((engine, report))
    }

    /// Refuses a window length other than the one the stores were
    /// written with (their blocks would not be found); records it when
    /// none is (a new node, or one written before it was recorded: then
    /// the setting it runs with is taken as the one written with).
    fn check_window(catalog: &dyn BlockStore, window_ns: i64) -> Result<(), EngineError> {
        match catalog.get(crate::keys::WINDOW)? {
            Some(v) => {
                let written = <[u8; 8]>::try_from(v.as_slice())
                    .map(i64::from_be_bytes)
                    .map_err(|_| {
                        EngineError::Invalid("the sensor catalog's window record is damaged".into())
                    })?;
                if written != window_ns {
                    return Err(EngineError::Invalid(format!(
                        "the sensor data was written with sensor.window = {}, not {}: \
                         blocks are found by their window, so set sensor.window back to {}",
                        show_ns(written),
                        show_ns(window_ns),
                        show_ns(written)
                    )));
                }
                Ok(())
            }
            None => {
                catalog.put(crate::keys::WINDOW, &window_ns.to_be_bytes(), None)?;
                catalog.sync()?;
                Ok(())
            }
        }
    }

    fn make_db(opts: &EngineOptions, name: &str) -> Db {
        Db {
            stores: BTreeMap::new(),
            stored_windows: crate::FastMap::default(),
            retention_ns: opts.retention(name),
            buffers: Buffers::new(opts.window_ns, opts.block_samples),
            dirty: BTreeSet::new(),
            writes: crate::FastMap::default(),
            late: crate::FastMap::default(),
            drops: crate::FastMap::default(),
        }
    }

    /// The shard of `db` and `home`, opened (and made) if it is not yet.
    fn shard(&self, db: &str, home: u32) -> Result<Arc<dyn BlockStore>, EngineError> {
        if let Some(s) = self.lock().dbs.get(db).and_then(|d| d.stores.get(&home)) {
            return Ok(s.clone());
        }
        let opened = self.opts.block_cache.wrap(self.storage.shard(db, home)?);
        let mut st = self.lock();
        let d = st
            .dbs
            .entry(db.to_string())
            .or_insert_with_key(|n| Self::make_db(&self.opts, n));
        Ok(d.stores.entry(home).or_insert(opened).clone())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn options(&self) -> &EngineOptions {
        &self.opts
    }

    /// Makes database `db` (its store), if it is not there yet; a write
    /// makes its database too.
    pub fn create_database(&self, db: &str) -> Result<(), EngineError> {
        if db.is_empty() || db.len() > MAX_DB_NAME_BYTES {
            return Err(EngineError::Invalid(format!(
                "a database name must be 1 to {MAX_DB_NAME_BYTES} bytes"
            )));
        }
        if self.lock().dbs.contains_key(db) {
            return Ok(());
        }
        self.storage.create(db)?;
        self.lock()
            .dbs
            .entry(db.to_string())
            .or_insert_with_key(|n| Self::make_db(&self.opts, n));
        Ok(())
    }

    /// The databases written to, sorted.
    pub fn databases(&self) -> Vec<String> {
        let mut v: Vec<String> = self.lock().dbs.keys().cloned().collect();
        v.sort();
        v
    }

    /// Series keys of `db`, sorted.
    pub fn series(&self, db: &str) -> Vec<String> {
        let st = self.lock();
        let mut v: Vec<String> = st.catalog.keys(db).map(|(k, _)| k.to_string()).collect();
        v.sort();
        v
    }

    /// Samples waiting in buffers, and cut blocks waiting to be stored.
    pub fn waiting(&self) -> (usize, usize) {
        let st = self.lock();
        let samples = st.dbs.values().map(|d| d.buffers.waiting()).sum();
        (samples, st.unstored.len())
    }

    /// The log's segments on disk.
    pub fn log_segments(&self) -> Vec<u64> {
        self.wal.segments()
    }
}

/// Block keys of a store, parsed (for a database's listing and tests).
pub fn block_keys(store: &dyn BlockStore) -> io::Result<Vec<(u64, i64, u32)>> {
    let mut v = Vec::new();
    store.fold(&mut |k, _| v.extend(parse_block_key(k)))?;
    v.sort_unstable();
    Ok(v)
}

/// A length of time as the configuration writes it (`1d`, `10m`, `2s`,
/// or ns when not whole seconds).
fn show_ns(ns: i64) -> String {
    const S: i64 = 1_000_000_000;
    for (unit, n) in [("d", 86_400 * S), ("h", 3_600 * S), ("m", 60 * S), ("s", S)] {
        if ns % n == 0 && ns != 0 {
            return format!("{}{unit}", ns / n);
        }
    }
    format!("{ns}ns")
}
