//! The node: its vnodes, ring, bucket registry and background work.

use crate::backends::{Opening, Resources};
use crate::buckets::Buckets;
use crate::bulk::BulkPool;
use crate::config::{DeleteMode, NodeConfig};
use crate::error::KvError;
use crate::meta::MetaDir;
use crate::open_error::OpenError;
use crate::reaper::Reaper;
use crate::replicas::{ClusterView, Remote, Replicas};
use crate::vnode::identity::NodeIds;
use crate::vnode::lease::LeaseFile;
use crate::vnode::{Limits, Vnode};
use crate::vnodes::Vnodes;
use rill_backend::BKey;
use rill_ring::{PreflistEntry, Ring};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

/// Counters an operator reads through `/stats` and `rill admin status`.
#[derive(Default)]
pub(crate) struct Counters {
    pub gets: AtomicU64,
    pub puts: AtomicU64,
    pub deletes: AtomicU64,
    pub get_us: AtomicU64,
    pub put_us: AtomicU64,
    pub read_repairs: AtomicU64,
    /// Replicas on other nodes that answered a get with a clock alone
    /// (their value was too large to send unasked).
    pub get_head_clocks: AtomicU64,
    /// Whole objects fetched after such a clock stood for no object the
    /// get already had.
    pub get_fetches: AtomicU64,
    /// Reads of this node's replicas for a get run as a task that could
    /// not be answered in place (would wait for the disk) and went to a
    /// blocking thread.
    pub get_local_waits: AtomicU64,
    pub index_queries: AtomicU64,
    pub list_keys: AtomicU64,
    pub dt_updates: AtomicU64,
    pub dt_fetches: AtomicU64,
    pub errors: AtomicU64,
}

#[derive(Clone, Debug, Default)]
pub struct NodeStats {
    pub gets: u64,
    pub puts: u64,
    pub deletes: u64,
    pub get_us_total: u64,
    pub put_us_total: u64,
    pub read_repairs: u64,
    pub get_head_clocks: u64,
    pub get_fetches: u64,
    pub get_local_waits: u64,
    pub index_queries: u64,
    pub list_keys: u64,
    pub dt_updates: u64,
    pub dt_fetches: u64,
    pub errors: u64,
    pub vnodes: u32,
    pub storage_bytes: u64,
    pub disk_usage: Option<f64>,
    pub merges: u64,
    pub files_deleted_unread: u64,
    pub merge_bytes_read: u64,
    pub merge_bytes_written: u64,
    /// The Fisherman's current take threshold D_m.
    pub merge_take_threshold: f64,
    pub throttle_delay_ms: f64,
    /// Puts refused because the disk is full.
    pub out_of_space_refusals: u64,
    /// True while the space reserve is released and puts are refused.
    pub space_reserve_released: bool,
    /// Reads that met a damaged leveldb block (their keys answered with an
    /// error, the rest of the vnode serving).
    pub leveldb_damaged_reads: u64,
    /// Writes that waited for the leveldb write buffers (over the budget's
    /// share for them) to be written out to tables.
    pub leveldb_held_writes: u64,
}

pub struct Node {
    pub(crate) config: NodeConfig,
    pub(crate) ring: Ring,
    pub(crate) vnodes: Arc<Vnodes>,
    /// Bucket types and properties.
    pub(crate) buckets: Arc<Buckets>,
    pub(crate) meta: MetaDir,
    pub(crate) reaper: Reaper,
    pub(crate) counters: Counters,
    leases: Arc<LeaseFile>,
    /// Tests: stop as a crash of the process would (no clean record).
    forget_clean_stop: std::sync::atomic::AtomicBool,
    started: Instant,
    /// A key's replicas, here and on other nodes.
    pub(crate) replicas: Arc<Replicas>,
    /// This node, for work that outlives a request (finishing a get).
    pub(crate) this: Weak<Node>,
    /// Work on large values (`bulk`), made on first use.
    bulk: OnceLock<(BulkPool, BulkPool)>,
}

impl Node {
    /// Opens (or creates) the node's data under `config.data_dir`.
    pub fn open(config: NodeConfig) -> Result<Arc<Node>, OpenError> {
        let started = Instant::now();
        let ring = Ring::single(config.ring_size, &config.nodename)?;
        std::fs::create_dir_all(&config.data_dir).map_err(|source| OpenError::CreateDataDir {
            path: config.data_dir.clone(),
            source,
        })?;
        let meta = MetaDir::open(&config.data_dir).map_err(OpenError::CreateMeta)?;
        let ids = NodeIds::load(&meta, &config)?;
        let buckets = Arc::new(Buckets::load(meta.clone(), &config)?);
        let registry = &buckets.registry;
        let record = crate::migrate::Record::load(&meta)?;
        let (config, target) = crate::migrate::effective(config, record.as_ref())?;
        // Before anything else is written: at a full disk the reserve
        // makes room for the stores to open.
        let res = Resources::open(&config)?;
        let target = match target {
            Some(t) => {
                let r = Resources::open(&t)?;
                Some((t, r))
            }
            None => None,
        };
        let opening = Opening {
            config: &config,
            ring: &ring,
            res: &res,
            registry,
        };
        let target_opening = target.as_ref().map(|(t, r)| Opening {
            config: t,
            ring: &ring,
            res: r,
            registry,
        });
        let mut vnodes = Vec::with_capacity(config.ring_size as usize);
        for p in ring.partitions() {
            let moved = record.as_ref().is_some_and(|r| r.moved.contains(&p.0));
            let backend = match &target_opening {
                Some(t) if moved => t.backend(p)?,
                _ => opening.backend(p)?,
            };
            vnodes.push(Arc::new(Vnode::new(
                p,
                ids.ids[p.0 as usize],
                ids.epochs(p.0 as usize),
                backend,
            )));
        }
        log_stores_opened(&config, &res, started.elapsed());
        let limits = Limits {
            size_warning_bytes: config.object_size_warning_bytes,
            size_max_bytes: config.object_size_max_bytes,
            siblings_warning: config.siblings_warning,
            siblings_max: config.siblings_max,
        };
        let view = ClusterView::single(&config.nodename, config.ring_size)?;
        let migration = crate::migrate::Migrations::new(record, target);
        let vnodes = Arc::new(Vnodes::new(vnodes, limits, res, migration));
        let nodename = config.nodename.clone();
        let node = Arc::new_cyclic(|this| Node {
            config,
            ring,
            vnodes: vnodes.clone(),
            buckets,
            meta,
            reaper: Reaper::default(),
            counters: Counters::default(),
            leases: ids.leases.clone(),
            forget_clean_stop: Default::default(),
            started: Instant::now(),
            replicas: Arc::new(Replicas::new(&nodename, vnodes.clone(), view)),
            this: this.clone(),
            bulk: OnceLock::new(),
        });
        let weak = Arc::downgrade(&node);
        let reaper = node.reaper.clone();
        std::thread::Builder::new()
            .name("rill-reaper".into())
            .spawn(move || {
                reaper.run(|job| {
                    let Some(node) = weak.upgrade() else { return };
                    for e in &job.replicas {
                        node.reap(&job.key, &job.clock, e);
                    }
                })
            })
            .map_err(OpenError::Reaper)?;
        node.resume_backend_migration()
            .map_err(OpenError::ResumeMigration)?;
        Ok(node)
    }

    pub fn nodename(&self) -> &str {
        &self.config.nodename
    }

    pub fn ring_size(&self) -> u32 {
        self.ring.size()
    }

    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    pub(crate) fn delete_mode(&self) -> DeleteMode {
        self.config.delete_mode
    }

    /// The preference list of a key for `n` replicas: primaries whose
    /// node is up, then fallbacks for those that are not (Riak's sloppy
    /// quorum).
    pub fn preflist(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        key: &[u8],
        n: u32,
    ) -> Vec<PreflistEntry> {
        self.replicas.preflist(bucket_type, bucket, key, n)
    }

    /// This node's vnodes: what other nodes' coordinators and handoff
    /// reach.
    pub fn vnodes(&self) -> &Arc<Vnodes> {
        &self.vnodes
    }

    /// The cluster as last set (a cluster of one until the runtime says
    /// otherwise).
    pub fn cluster_view(&self) -> Arc<ClusterView> {
        self.replicas.view()
    }

    /// The cluster runtime's new view (ring, reachable nodes, transfers).
    pub fn set_cluster_view(&self, view: ClusterView) {
        self.replicas.set_view(view)
    }

    /// Connects the node to its cluster runtime (once).
    pub fn attach_remote(&self, remote: Arc<dyn Remote>) {
        self.replicas.attach_remote(remote)
    }

    /// Bucket types and properties.
    pub fn buckets(&self) -> &Arc<Buckets> {
        &self.buckets
    }

    pub fn stats(&self) -> NodeStats {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let res = &self.vnodes.res;
        let m = res.scheduler.as_ref().map(|s| s.metrics());
        NodeStats {
            gets: l(&c.gets),
            puts: l(&c.puts),
            deletes: l(&c.deletes),
            get_us_total: l(&c.get_us),
            put_us_total: l(&c.put_us),
            read_repairs: l(&c.read_repairs),
            get_head_clocks: l(&c.get_head_clocks),
            get_fetches: l(&c.get_fetches),
            get_local_waits: l(&c.get_local_waits),
            index_queries: l(&c.index_queries),
            list_keys: l(&c.list_keys),
            dt_updates: l(&c.dt_updates),
            dt_fetches: l(&c.dt_fetches),
            errors: l(&c.errors),
            vnodes: self.vnodes.len() as u32,
            storage_bytes: self.vnodes.storage_bytes(),
            disk_usage: res.scheduler.as_ref().map(|s| s.usage()),
            merges: m.as_ref().map_or(0, |m| m.merges),
            files_deleted_unread: m.as_ref().map_or(0, |m| m.files_deleted_unread),
            merge_bytes_read: m.as_ref().map_or(0, |m| m.merge_bytes_read),
            merge_bytes_written: m.as_ref().map_or(0, |m| m.merge_bytes_written),
            merge_take_threshold: m.as_ref().map_or(1.0, |m| m.take_threshold),
            throttle_delay_ms: res
                .scheduler
                .as_ref()
                .map_or(0.0, |s| s.throttle().current().as_secs_f64() * 1000.0),
            out_of_space_refusals: res
                .space
                .as_ref()
                .map_or(0, |s| s.refusals.load(Ordering::Relaxed))
                + res
                    .free_space
                    .as_ref()
                    .map_or(0, |f| f.refusals.load(Ordering::Relaxed)),
            space_reserve_released: res.space.as_ref().is_some_and(|s| s.is_low())
                || res
                    .free_space
                    .as_ref()
                    .is_some_and(|f| f.is_low(&|| res.leveldb_table_bytes())),
            leveldb_damaged_reads: res.leveldb.iter().map(|(_, l)| l.damaged_reads()).sum(),
            leveldb_held_writes: res.leveldb.iter().map(|(_, l)| l.held_writes()).sum(),
        }
    }

    /// Makes every acknowledged write durable.
    pub fn sync(&self) -> Result<(), KvError> {
        self.vnodes.sync()
    }

    /// For tests: when dropped, this node records no clean shutdown, as
    /// after `kill -9` (its appends are in the kernel all the same).
    #[doc(hidden)]
    pub fn stop_as_if_killed(&self) {
        self.forget_clean_stop.store(true, Ordering::Relaxed);
    }

    /// The pool that coordinates writes of large values (they wait for
    /// other nodes): 4 at once. Measured on the Partisan paper's key-value
    /// experiment (8 MB values, 20 ms round trips, docs/benchmarks.md):
    /// with 16 the puts and the small gets beside them were slower at
    /// every concurrency.
    pub fn bulk_coordinate(&self) -> &BulkPool {
        &self.bulk_pools().0
    }

    /// The pool that serves other nodes' large requests to this node's
    /// vnodes (they never wait on another node): one per core.
    pub fn bulk_serve(&self) -> &BulkPool {
        &self.bulk_pools().1
    }

    fn bulk_pools(&self) -> &(BulkPool, BulkPool) {
        self.bulk.get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
            (
                BulkPool::new("rill-bulk-coord", 4, 256 << 20),
                BulkPool::new("rill-bulk-serve", cores, 512 << 20),
            )
        })
    }

    /// How long a request may wait in a bulk queue and still be worth
    /// doing: the request timeout for a put this node coordinates.
    pub fn request_timeout(&self) -> Duration {
        self.config.request_timeout
    }

    /// How long another node's large request may wait in the serve queue:
    /// at most 2 s, less than the default `delete_mode` of 3 s, so a
    /// replica write that waited is never applied after a tombstone
    /// written later was reaped (which would bring the value back).
    pub fn bulk_serve_expiry(&self) -> Duration {
        let reap = match self.config.delete_mode {
            DeleteMode::After(d) => d / 2,
            DeleteMode::Immediate => Duration::from_millis(500),
            DeleteMode::Keep => Duration::from_secs(2),
        };
        reap.min(Duration::from_secs(2))
            .min(self.config.request_timeout)
    }

    pub(crate) fn bkey(bucket_type: &[u8], bucket: &[u8], key: &[u8]) -> BKey {
        let t: &[u8] = if bucket_type == b"default" {
            b""
        } else {
            bucket_type
        };
        BKey::new(t, bucket, key)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.reaper.stop();
        if self.forget_clean_stop.load(Ordering::Relaxed) {
            return; // as a crash: no sync, no clean record
        }
        if let Err(e) = self.sync() {
            tracing::error!(error = %e, "sync at shutdown failed");
            return;
        }
        // Every acknowledged write is durable: the next start may trust
        // the stored clocks, and continues each vnode's epochs exactly.
        let next: Vec<u64> = self.vnodes.iter().map(|v| v.next_epoch()).collect();
        if let Err(e) = self.leases.write(|t| {
            t.ends = next;
            t.clean = true;
        }) {
            tracing::error!(error = %e, "cannot record the clean shutdown in the lease file");
        }
        // Then the LSM databases write their memtables out to tables, so
        // the next start replays no journal into memory (everything is
        // durable already: a stop killed meanwhile loses nothing).
        for (_, db) in &self.vnodes.res.leveldb {
            if let Err(e) = db.flush() {
                tracing::warn!(error = %e, "writing leveldb memtables out at shutdown failed: the next start replays the journal");
            }
        }
    }
}

/// One line for the stores a start opened: how many, what their
/// recoveries found, the rotation size and the time taken (each store's
/// own line is at DEBUG); a warning when any record was set aside.
fn log_stores_opened(config: &NodeConfig, res: &Resources, took: Duration) {
    let o = res.opened.lock().expect("opened").clone();
    let rotation = match res.rotation {
        crate::backends::Rotation::Configured => "bitcask.max_file_size".to_string(),
        crate::backends::Rotation::FromDisk {
            capacity_bytes,
            stores,
        } => format!(
            "eq. 4 from {} MiB over {stores} stores",
            capacity_bytes >> 20
        ),
        crate::backends::Rotation::CapacityUnknown => {
            "the default, the disk's capacity unknown".to_string()
        }
    };
    let max_file_size = res.bitcask.max_file_size_bytes;
    let open_ms = took.as_millis() as u64;
    if o.stores == 0 {
        tracing::info!(
            vnodes = config.ring_size,
            backend = config.backend.name(),
            open_ms,
            "stores opened"
        );
    } else if o.corrupt_regions > 0 || o.torn_bytes > 0 {
        tracing::warn!(
            vnodes = config.ring_size, bitcask_stores = o.stores, files = o.files,
            records = o.records, from_hints = o.files_from_hints, scanned = o.files_scanned,
            corrupt_regions = o.corrupt_regions, torn_bytes = o.torn_bytes,
            merges_finished = o.merges_finished, max_file_size,
            max_file_size_from = %rotation, open_ms,
            "stores opened; damaged or torn records were set aside (a warning for each store names it)"
        );
    } else {
        tracing::info!(
            vnodes = config.ring_size, bitcask_stores = o.stores, files = o.files,
            records = o.records, from_hints = o.files_from_hints, scanned = o.files_scanned,
            merges_finished = o.merges_finished,
            max_file_size, max_file_size_from = %rotation,
            open_ms, "stores opened"
        );
    }
}
