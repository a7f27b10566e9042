//! The node: its vnodes, ring, bucket registry and background work.

use crate::aae::{files as aae_files, Aae};
use crate::backends::{Opening, Resources};
use crate::buckets::Buckets;
use crate::bulk::BulkPool;
use crate::config::{DeleteMode, NodeConfig};
use crate::coordinate::dt::{DtFetchAnswer, DtFetchRequest, DtUpdateAnswer, DtUpdateRequest};
use crate::coordinate::kv::{
    DeleteAnswer, DeleteRequest, GetAnswer, GetRequest, PutAnswer, PutRequest,
};
use crate::coordinate::Coordinator;
use crate::error::KvError;
use crate::meta::MetaDir;
use crate::migrate::{MigrationStatus, Migrator};
use crate::open_error::OpenError;
use crate::query::index::{IndexAnswer, IndexHit, IndexPlan, IndexRequest};
use crate::query::summaries::{KeyFold, KeyFoldAnswer};
use crate::query::Queries;
use crate::replicas::{ClusterView, Remote, Replicas};
use crate::stats::{Counters, NodeStats};
use crate::vnode::identity::NodeIds;
use crate::vnode::lease::LeaseFile;
use crate::vnode::msg::{VnodeReply, VnodeRequest};
use crate::vnode::{Limits, Vnode};
use crate::vnodes::Vnodes;
use rill_ring::{PreflistEntry, Ring};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A node, made of parts that each hold what they need: its vnodes
/// (`Vnodes`), a key's replicas here and elsewhere (`Replicas`), bucket
/// types and properties (`Buckets`), the coordination of clients'
/// requests (`Coordinator`), queries over the ring (`Queries`) and a
/// backend migration (`Migrator`). The node opens them and answers for
/// them.
pub struct Node {
    pub(crate) config: NodeConfig,
    ring: Ring,
    pub(crate) vnodes: Arc<Vnodes>,
    /// A key's replicas, here and on other nodes.
    pub(crate) replicas: Arc<Replicas>,
    /// Bucket types and properties.
    pub(crate) buckets: Arc<Buckets>,
    pub(crate) counters: Arc<Counters>,
    /// Clients' gets, puts, deletes and data-type operations.
    pub(crate) kv: Arc<Coordinator>,
    /// Listings and index queries over the whole ring.
    pub(crate) queries: Queries,
    migrator: Arc<Migrator>,
    aae: Arc<Aae>,
    leases: Arc<LeaseFile>,
    /// Tests: stop as a crash of the process would (no clean record).
    forget_clean_stop: std::sync::atomic::AtomicBool,
    started: Instant,
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
        let aae_dir = config.data_dir.join("tictacaae");
        let place = Arc::new(crate::vnode::aae::KeyPlace {
            ring_size: config.ring_size,
            buckets: buckets.clone(),
        });
        let mut vnodes = Vec::with_capacity(config.ring_size as usize);
        for p in ring.partitions() {
            let moved = record.as_ref().is_some_and(|r| r.moved.contains(&p.0));
            let backend = match &target_opening {
                Some(t) if moved => t.backend(p)?,
                _ => opening.backend(p)?,
            };
            // Trees kept at a clean stop are taken off the disk whether
            // used or not: a crash later must not find them. They stand
            // for the store only if it kept everything and is not found
            // empty (a wiped store: its trees would hide the loss).
            let kept = aae_files::take(&aae_dir, &ring.index_decimal(p))
                .map_err(OpenError::AntiEntropy)?;
            let aae = if config.tictacaae.active {
                let holds = backend.holds_objects().unwrap_or(true);
                let trees = match kept {
                    Some(t) if holds && config.stores_last() => t,
                    _ if holds => rill_aae::Trees::unbuilt(),
                    _ => rill_aae::Trees::empty(crate::ids::now_us() / 1000),
                };
                Some(crate::vnode::aae::VnodeAae::new(trees, place.clone()))
            } else {
                None
            };
            vnodes.push(Arc::new(Vnode::new(
                p,
                ids.ids[p.0 as usize],
                ids.run.epochs(p.0 as usize),
                backend,
                aae,
            )));
        }
        aae_files::sync_dir(&aae_dir).map_err(OpenError::AntiEntropy)?;
        if config.tictacaae.active && config.stores_drop_keys() {
            tracing::warn!("keys that expire or are evicted leave anti-entropy's trees unchanged until they are built again (tictacaae_rebuildwait): exchanges may compare keys they then find alike");
        }
        log_stores_opened(&config, &res, started.elapsed());
        let limits = Limits::of(&config);
        let view = ClusterView::single(&config.nodename, config.ring_size)?;
        let migration = crate::migrate::Migrations::new(record, target);
        let vnodes = Arc::new(Vnodes::new(vnodes, limits, res, migration));
        let nodename = config.nodename.clone();
        let replicas = Arc::new(Replicas::new(&nodename, vnodes.clone(), view));
        let counters = Arc::new(Counters::default());
        let kv = Coordinator::new(
            replicas.clone(),
            buckets.clone(),
            counters.clone(),
            config.request_timeout,
            config.delete_mode,
        );
        let weak = Arc::downgrade(&kv);
        let reaper = kv.reaper.clone();
        std::thread::Builder::new()
            .name("rill-reaper".into())
            .spawn(move || {
                reaper.run(|job| {
                    if let Some(kv) = weak.upgrade() {
                        kv.reap_job(job);
                    }
                })
            })
            .map_err(OpenError::Reaper)?;
        let aae = Aae::new(
            config.tictacaae.clone(),
            vnodes.clone(),
            replicas.clone(),
            Arc::downgrade(&kv),
            aae_dir,
        );
        let queries = Queries::new(
            replicas.clone(),
            buckets.clone(),
            counters.clone(),
            config.request_timeout,
        );
        let migrator = Migrator::new(
            config.clone(),
            ring.clone(),
            meta,
            buckets.clone(),
            vnodes.clone(),
        );
        migrator
            .resume_backend_migration()
            .map_err(OpenError::ResumeMigration)?;
        // Last, once nothing can fail: its threads hold the vnodes.
        if config.tictacaae.active {
            crate::aae::spawn(&aae).map_err(OpenError::AntiEntropy)?;
        }
        let node = Arc::new(Node {
            config,
            ring,
            vnodes,
            replicas,
            buckets,
            counters,
            kv,
            queries,
            migrator,
            aae,
            leases: ids.run.leases.clone(),
            forget_clean_stop: Default::default(),
            started: Instant::now(),
            bulk: OnceLock::new(),
        });
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

    /// Starts moving this node's data to backend `to` (`rill admin
    /// backend-migrate`); `keys_per_second` paces the copy (0: unpaced).
    pub fn start_backend_migration(
        &self,
        to: &str,
        keys_per_second: u64,
    ) -> Result<MigrationStatus, KvError> {
        self.migrator.start_backend_migration(to, keys_per_second)
    }

    pub fn backend_migration_status(&self) -> MigrationStatus {
        self.migrator.backend_migration_status()
    }

    /// Reads a key by Riak's quorum rules (on a thread that may block).
    pub fn get(&self, req: &GetRequest) -> Result<GetAnswer, KvError> {
        self.kv.get(req)
    }

    /// [`Node::get`] as a task of the runtime: it never waits for the
    /// disk on the calling thread.
    pub async fn get_task(&self, req: &GetRequest) -> Result<GetAnswer, KvError> {
        self.kv.get_task(req).await
    }

    pub fn put(&self, req: PutRequest) -> Result<PutAnswer, KvError> {
        self.kv.put(req)
    }

    pub fn delete(&self, req: &DeleteRequest) -> Result<DeleteAnswer, KvError> {
        self.kv.delete(req)
    }

    pub fn dt_fetch(&self, req: &DtFetchRequest) -> Result<DtFetchAnswer, KvError> {
        self.kv.dt_fetch(req)
    }

    pub fn dt_update(&self, req: DtUpdateRequest) -> Result<DtUpdateAnswer, KvError> {
        self.kv.dt_update(req)
    }

    /// The buckets of a type that hold keys (`timeout`: at most that long).
    pub fn list_buckets(
        &self,
        bucket_type: &[u8],
        timeout: Option<Duration>,
    ) -> Result<Vec<Vec<u8>>, KvError> {
        self.queries.list_buckets(bucket_type, timeout)
    }

    /// The keys of a bucket, in batches to `batch` (which returns false to
    /// stop).
    pub fn list_keys(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        timeout: Option<Duration>,
        batch: &mut dyn FnMut(Vec<Vec<u8>>) -> bool,
    ) -> Result<(), KvError> {
        self.queries.list_keys(bucket_type, bucket, timeout, batch)
    }

    /// Riak 3's aae_fold `find_keys` and `object_stats` over a bucket.
    pub fn key_fold(&self, f: &KeyFold) -> Result<KeyFoldAnswer, KvError> {
        self.queries.key_fold(f)
    }

    /// How a secondary-index query is answered, checked.
    pub fn index_plan(&self, req: &IndexRequest) -> Result<IndexPlan, KvError> {
        self.queries.index_plan(req)
    }

    /// Answers `plan` in batches to `emit` (false stops); the
    /// continuation when a page ended it.
    pub fn index_stream(
        &self,
        plan: &IndexPlan,
        emit: &mut dyn FnMut(Vec<IndexHit>) -> bool,
    ) -> Result<Option<Vec<u8>>, KvError> {
        self.queries.index_stream(plan, emit)
    }

    pub fn index_query(&self, req: &IndexRequest) -> Result<IndexAnswer, KvError> {
        self.queries.index_query(req)
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

    /// Sends each request to its node, for a service that rides on the
    /// ring rather than on one vnode (the sensor-data service): other
    /// nodes' requests leave first, then this node's are answered on the
    /// calling thread. Replies come from [`NodeCalls::next`], tagged by
    /// their request's position.
    pub fn call_nodes(&self, asks: Vec<(String, VnodeRequest)>) -> NodeCalls {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let mut ready = std::collections::VecDeque::new();
        let mut local = Vec::new();
        for (tag, (node, request)) in asks.into_iter().enumerate() {
            let e = PreflistEntry {
                partition: rill_ring::Partition(0),
                node,
                primary: true,
            };
            if self.replicas.is_local(&e) {
                local.push((tag, e, request));
            } else if let Some(reply) = self.replicas.ask(&e, request, tag, &tx) {
                ready.push_back((tag, reply));
            }
        }
        for (tag, e, request) in local {
            if let Some(reply) = self.replicas.ask(&e, request, tag, &tx) {
                ready.push_back((tag, reply));
            }
        }
        NodeCalls {
            replicas: self.replicas.clone(),
            rx,
            ready,
        }
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
        NodeStats::of(&self.counters, &self.vnodes, &self.aae.counters)
    }

    /// Active anti-entropy: its trees, settings and schedule.
    pub fn tictacaae(&self) -> &Aae {
        &self.aae
    }

    /// Makes every acknowledged write durable.
    pub fn sync(&self) -> Result<(), KvError> {
        self.vnodes.sync()
    }

    /// Stops the work the node does by itself: anti-entropy's schedule
    /// and exchanges (their threads joined) and the tombstone reaper
    /// (told to stop; a reap under way finishes). Done again, harmlessly,
    /// when the node is dropped. Call it on a thread that may block,
    /// while the runtime the node's waits use still runs.
    pub fn stop_background(&self) {
        self.kv.reaper.stop();
        self.aae.stop();
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
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop_background();
        if self.forget_clean_stop.load(Ordering::Relaxed) {
            return; // as a crash: no sync, no clean record
        }
        if let Err(e) = self.sync() {
            tracing::error!(error = %e, "sync at shutdown failed");
            return;
        }
        // The trees match the stores now: the next start uses them.
        self.aae.save_trees(&self.ring);
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

/// Requests sent by [`Node::call_nodes`], their replies to come.
pub struct NodeCalls {
    replicas: Arc<Replicas>,
    rx: crate::replicas::Replies,
    ready: std::collections::VecDeque<(usize, VnodeReply)>,
}

impl NodeCalls {
    /// The next reply (its request's position and the answer), waiting
    /// on a thread that may block until `deadline`; `None` when the
    /// deadline passed first.
    pub fn next(&mut self, deadline: std::time::Instant) -> Option<(usize, VnodeReply)> {
        if let Some(r) = self.ready.pop_front() {
            return Some(r);
        }
        self.replicas.wait(&mut self.rx, deadline)
    }
}
