//! Opening each vnode's backend as `storage_backend` says: Bitcask (a
//! store per vnode, merged by the node's scheduler), leveldb (one
//! database per node, a keyspace per vnode), leveled (one database per
//! node, a ledger and a journal per vnode), memory, or multi (several
//! named ones of those per vnode, chosen per bucket by its `backend`
//! property through the node's bucket registry).

use crate::config::{BackendKind, NamedBackend, NodeConfig};
use crate::error::KvError;
use crate::space::Space;
use merge_control::{MergeScheduler, SchedulerSettings, UsageSource};
use rill_backend::{
    Backend, BitcaskBackend, LeveldbStore, MemoryBackend, MemoryOptions, MultiBackend, Router,
};
use rill_bucket::Registry;
use rill_ring::{Partition, Ring};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Why the node's backends, or a vnode's, could not be opened, checked or
/// dropped; a store's own error is kept (a full disk stays one).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendsError {
    #[error("cannot create {}: {source}", .path.display())]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("storage_backend = multi needs backends: multi_backend.NAME.storage_backend = bitcask, leveldb, leveled or memory")]
    MultiWithoutBackends,
    #[error("storage_backend = multi needs multi_backend.default = NAME")]
    MultiWithoutDefault,
    #[error("multi_backend.default = {default} names no backend (multi_backend.{default}.storage_backend is not set)")]
    UnknownDefault { default: String },
    #[error("a multi backend cannot hold another")]
    NestedMulti,
    #[error("cannot open the database in {}: {source}", .dir.display())]
    OpenDatabase {
        dir: PathBuf,
        source: rill_backend::Error,
    },
    /// `rill admin leveldb verify | repair` failed on a database.
    #[error("{}: {source}", .dir.display())]
    Check {
        dir: PathBuf,
        source: rill_backend::Error,
    },
    #[error(transparent)]
    Multi(rill_backend::Error),
    #[error("the database of {backend:?} is not open")]
    DatabaseNotOpen { backend: String },
    #[error("cannot open the data of partition {partition}: {source}")]
    OpenPartition {
        partition: u32,
        source: rill_backend::Error,
    },
    #[error("cannot open the Bitcask store of partition {partition}: {source}")]
    OpenBitcask {
        partition: u32,
        source: rill_backend::Error,
    },
    #[error("cannot drop the data of partition {partition}: {source}")]
    DropPartition {
        partition: u32,
        source: rill_backend::Error,
    },
    #[error("cannot remove {}: {source}", .path.display())]
    RemoveDir { path: PathBuf, source: io::Error },
}

/// What a node's backends share: Bitcask's merge scheduler and space
/// reserve, the LSM databases and their free-space admission.
pub(crate) struct Resources {
    /// Disk space: admission of writes, the reserve (Bitcask only);
    /// shared with the merge scheduler, which asks it whether puts are
    /// refused.
    pub space: Option<Arc<Space>>,
    pub scheduler: Option<MergeScheduler>,
    /// The node's leveldb databases (`storage_backend = leveldb` or
    /// `leveled`, or each such backend of multi), by backend name.
    pub leveldb: Vec<(String, LeveldbStore)>,
    /// Admission of puts by the free space left for leveldb data.
    pub free_space: Option<crate::free_space::FreeSpace>,
    /// Every Bitcask store's options, the rotation size R decided.
    pub bitcask: bitcask::Options,
    /// Where R came from, for the start's summary.
    pub rotation: Rotation,
    /// What the Bitcask stores' recoveries found, summed.
    pub opened: std::sync::Mutex<OpenedStores>,
}

/// What the recoveries of the Bitcask stores opened found, summed (the
/// start's summary line; each store's own is at DEBUG).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct OpenedStores {
    pub stores: usize,
    pub files: usize,
    pub records: u64,
    pub files_from_hints: usize,
    pub files_scanned: usize,
    pub corrupt_regions: u64,
    pub torn_bytes: u64,
    pub merges_finished: usize,
}

impl OpenedStores {
    fn add(&mut self, r: &bitcask::RecoveryReport) {
        self.stores += 1;
        self.files += r.files;
        self.records += r.records;
        self.files_from_hints += r.files_from_hints;
        self.files_scanned += r.files_scanned;
        self.corrupt_regions += r.corrupt_regions;
        self.torn_bytes += r.torn_bytes;
        self.merges_finished += r.merges_finished;
    }
}

/// How the Bitcask rotation size R was chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Rotation {
    /// `bitcask.max_file_size` set.
    Configured,
    /// Riak's 2 GiB: the filesystem's capacity could not be read.
    CapacityUnknown,
    /// Eq. 4 from this capacity and number of stores.
    FromDisk { capacity_bytes: u64, stores: u32 },
}

impl Resources {
    /// Opens what `config`'s backends need. At a full disk the Bitcask
    /// reserve makes room for the stores to open, so this comes first.
    pub fn open(config: &NodeConfig) -> Result<Resources, BackendsError> {
        let bitcask_dir = config.data_dir.join("bitcask");
        let space = uses_bitcask(config)
            .then(|| {
                std::fs::create_dir_all(&bitcask_dir).map_err(|source| {
                    BackendsError::CreateDir {
                        path: bitcask_dir.clone(),
                        source,
                    }
                })?;
                Ok::<_, BackendsError>(Space::open(
                    &bitcask_dir,
                    config.reserve_bytes,
                    config.ring_size,
                ))
            })
            .transpose()?;
        let scheduler = uses_bitcask(config).then(|| {
            MergeScheduler::start(SchedulerSettings {
                usage: match config.bitcask_capacity_bytes {
                    Some(bytes) => UsageSource::Capacity { bytes },
                    None => UsageSource::Filesystem(bitcask_dir.clone()),
                },
                policy: config.merge_policy.policy(),
                throttle: config.throttle,
                workers: 1,
                idle_tick: Duration::from_millis(200),
            })
        });
        let space = space.map(Arc::new);
        if let (Some(space), Some(scheduler)) = (&space, &scheduler) {
            let space = space.clone();
            scheduler.watch_put_refusals(Box::new(move |usage, settings| {
                space.refusing_puts(usage, settings)
            }));
        }
        let (bitcask, rotation) = bitcask_options(config, &bitcask_dir);
        let leveldb = open_leveldb(config)?;
        let free_space = (!leveldb.is_empty()).then(|| {
            crate::free_space::FreeSpace::new(
                leveldb.iter().map(|(_, l)| l.dir().to_path_buf()).collect(),
                config.reserve_bytes,
            )
        });
        Ok(Resources {
            space,
            scheduler,
            leveldb,
            free_space,
            bitcask,
            rotation,
            opened: Default::default(),
        })
    }

    /// Bytes of the leveldb tables on disk.
    pub fn leveldb_table_bytes(&self) -> u64 {
        self.leveldb.iter().map(|(_, l)| l.table_bytes()).sum()
    }

    /// Admits a write that adds data, or refuses it for space.
    pub fn admit_write(&self) -> Result<(), KvError> {
        if let Some(f) = &self.free_space {
            f.admit_write(&|| self.leveldb_table_bytes())?;
        }
        match (&self.space, &self.scheduler) {
            (Some(space), Some(scheduler)) => space.admit_write(scheduler),
            _ => Ok(()),
        }
    }
}

/// The Bitcask stores' options: R as configured, or by eq. 4 from the
/// capacity of the filesystem holding `bitcask_dir` (or
/// `bitcask.capacity`) shared by a store per partition of each Bitcask
/// The Bitcask stores' options for stores under `root`: R as
/// configured, or by eq. 4 from the capacity of the filesystem holding
/// `root` (or `bitcask.capacity`) shared by a store per partition of each
/// Bitcask backend (counted as if all shared it: R errs small).
fn bitcask_options(config: &NodeConfig, root: &Path) -> (bitcask::Options, Rotation) {
    let mut opts = config.bitcask.clone();
    if let Some(bytes) = config.bitcask_max_file_size {
        opts.max_file_size_bytes = bytes;
        return (opts, Rotation::Configured);
    }
    let backends = match config.backend {
        BackendKind::Multi => config
            .multi
            .iter()
            .filter(|b| b.kind == BackendKind::Bitcask)
            .count(),
        _ => 1,
    }
    .max(1) as u32;
    let stores = config.ring_size.saturating_mul(backends);
    let Some(capacity_bytes) = config.bitcask_capacity_bytes.or_else(|| capacity_of(root)) else {
        opts.max_file_size_bytes = merge_control::planing::MAX_DEFAULT_FILE_SIZE_BYTES;
        return (opts, Rotation::CapacityUnknown);
    };
    opts.max_file_size_bytes = merge_control::default_rotation_bytes(
        capacity_bytes,
        stores,
        config.merge_policy.target_usage(),
    );
    (
        opts,
        Rotation::FromDisk {
            capacity_bytes,
            stores,
        },
    )
}

/// The capacity of the filesystem that holds, or will hold, `dir`: that
/// of its nearest existing ancestor.
fn capacity_of(dir: &Path) -> Option<u64> {
    dir.ancestors()
        .find_map(|d| merge_control::filesystem_capacity_bytes(d).ok())
}

/// Whether any vnode keeps Bitcask stores (the merge scheduler and the
/// space reserve are for them).
pub(crate) fn uses_bitcask(config: &NodeConfig) -> bool {
    match config.backend {
        BackendKind::Bitcask => true,
        BackendKind::Multi => config.multi.iter().any(|b| b.kind == BackendKind::Bitcask),
        _ => false,
    }
}

/// The backends of `storage_backend = multi`, checked: at least one, the
/// default among them.
fn multi_backends(config: &NodeConfig) -> Result<(&[NamedBackend], &str), BackendsError> {
    if config.multi.is_empty() {
        return Err(BackendsError::MultiWithoutBackends);
    }
    let default = config
        .multi_default
        .as_deref()
        .ok_or(BackendsError::MultiWithoutDefault)?;
    if !config.multi.iter().any(|b| b.name == default) {
        return Err(BackendsError::UnknownDefault {
            default: default.to_string(),
        });
    }
    Ok((&config.multi, default))
}

fn multi_root(config: &NodeConfig, b: &NamedBackend) -> PathBuf {
    b.data_root
        .clone()
        .unwrap_or_else(|| config.data_dir.join("multi").join(&b.name))
}

/// Where backend `kind` keeps its data when it is the node's only one
/// (`bitcask`, or `leveldb.data_root` / `leveled.data_root`, defaulting
/// to `leveldb` and `leveled` in the data directory); memory keeps none.
fn single_root(config: &NodeConfig, kind: BackendKind) -> Option<PathBuf> {
    let dir =
        |set: &Option<PathBuf>, name| set.clone().unwrap_or_else(|| config.data_dir.join(name));
    match kind {
        BackendKind::Bitcask => Some(config.data_dir.join("bitcask")),
        BackendKind::Leveldb => Some(dir(&config.leveldb_dir, "leveldb")),
        BackendKind::Leveled => Some(dir(&config.leveled_dir, "leveled")),
        BackendKind::Memory | BackendKind::Multi => None,
    }
}

/// The directories `config`'s backends keep data in (Bitcask roots, LSM
/// databases); memory keeps none.
pub(crate) fn data_dirs(config: &NodeConfig) -> Vec<PathBuf> {
    match config.backend {
        BackendKind::Multi => config
            .multi
            .iter()
            .filter(|b| b.kind != BackendKind::Memory)
            .map(|b| multi_root(config, b))
            // Bitcask's space reserve lives in the data directory's
            // `bitcask` whatever the roots.
            .chain(uses_bitcask(config).then(|| config.data_dir.join("bitcask")))
            .collect(),
        kind => single_root(config, kind).into_iter().collect(),
    }
}

/// The node's LSM databases (leveldb and leveled backends):
/// `(backend name, database)`; the name is empty for
/// `storage_backend = leveldb` or `leveled`.
pub(crate) fn open_leveldb(
    config: &NodeConfig,
) -> Result<Vec<(String, LeveldbStore)>, BackendsError> {
    let open = |dir: PathBuf, opts| {
        LeveldbStore::open(&dir, opts, config.ring_size as usize)
            .map_err(|source| BackendsError::OpenDatabase { dir, source })
    };
    match config.backend {
        BackendKind::Leveldb | BackendKind::Leveled => {
            let opts = if config.backend == BackendKind::Leveldb {
                &config.leveldb
            } else {
                &config.leveled
            };
            let dir = single_root(config, config.backend).expect("an LSM backend's directory");
            Ok(vec![(String::new(), open(dir, opts.clone())?)])
        }
        BackendKind::Multi => {
            let (named, _) = multi_backends(config)?;
            named
                .iter()
                .filter(|b| matches!(b.kind, BackendKind::Leveldb | BackendKind::Leveled))
                .map(|b| {
                    Ok((
                        b.name.clone(),
                        open(multi_root(config, b), b.leveldb.clone())?,
                    ))
                })
                .collect()
        }
        _ => Ok(Vec::new()),
    }
}

/// What `rill admin leveldb verify | repair` found in one of the node's
/// LSM databases.
pub struct LeveldbCheck {
    /// The backend's name under `storage_backend = multi`, else empty.
    pub backend: String,
    pub dir: PathBuf,
    pub partitions: Vec<rill_backend::PartitionCheck>,
}

/// Reads every entry of every partition of the node's LSM databases, with
/// the node stopped; with `repair`, rebuilds each damaged partition from
/// what is readable (`LeveldbStore::repair`).
pub fn check_leveldb(
    config: &NodeConfig,
    repair: bool,
) -> Result<Vec<LeveldbCheck>, BackendsError> {
    open_leveldb(config)?
        .into_iter()
        .map(|(backend, store)| {
            let journal = match config.backend {
                BackendKind::Multi => config
                    .multi
                    .iter()
                    .find(|b| b.name == backend)
                    .map(|b| b.journal.clone())
                    .unwrap_or_default(),
                _ => config.leveled_journal.clone(),
            };
            let partitions = if repair {
                store.repair(&journal)
            } else {
                store.verify()
            }
            .map_err(|source| BackendsError::Check {
                dir: store.dir().to_path_buf(),
                source,
            })?;
            Ok(LeveldbCheck {
                backend,
                dir: store.dir().to_path_buf(),
                partitions,
            })
        })
        .collect()
}

/// `storage_backend = kind` (not multi) as a named backend, with the
/// node's settings for it.
fn single(c: &NodeConfig, kind: BackendKind) -> NamedBackend {
    NamedBackend {
        name: String::new(),
        kind,
        data_root: None,
        leveldb: if kind == BackendKind::Leveled {
            c.leveled.clone()
        } else {
            c.leveldb.clone()
        },
        journal: c.leveled_journal.clone(),
        memory_max_bytes: c.memory_max_bytes,
        memory_ttl: c.memory_ttl,
    }
}

/// What a vnode's backend is opened with.
pub(crate) struct Opening<'a> {
    pub config: &'a NodeConfig,
    pub ring: &'a Ring,
    pub res: &'a Resources,
    pub registry: &'a Arc<RwLock<Registry>>,
}

impl Opening<'_> {
    /// Partition `p`'s backend.
    pub(crate) fn backend(&self, p: Partition) -> Result<Box<dyn Backend>, BackendsError> {
        let c = self.config;
        match c.backend {
            BackendKind::Multi => {
                let (named, default) = multi_backends(c)?;
                let mut backends = Vec::with_capacity(named.len());
                for b in named {
                    let one = self.one(p, b, Some(multi_root(c, b)))?;
                    backends.push((b.name.clone(), one));
                }
                let registry = self.registry.clone();
                let route: Router = Arc::new(move |t: &[u8], bucket: &[u8]| {
                    let t = String::from_utf8_lossy(t);
                    let reg = registry.read().unwrap_or_else(|e| e.into_inner());
                    match reg.bucket_prop(&t, bucket, "backend")? {
                        serde_json::Value::String(s) => Some(s),
                        _ => None,
                    }
                });
                Ok(Box::new(
                    MultiBackend::new(backends, default, route).map_err(BackendsError::Multi)?,
                ))
            }
            kind => self.one(p, &single(c, kind), None),
        }
    }

    /// Partition `p`'s part of backend `b`; Bitcask stores under `root`
    /// (default: `bitcask` in the data directory).
    fn one(
        &self,
        p: Partition,
        b: &NamedBackend,
        root: Option<PathBuf>,
    ) -> Result<Box<dyn Backend>, BackendsError> {
        let index = self.ring.index_decimal(p);
        Ok(match b.kind {
            BackendKind::Memory => Box::new(MemoryBackend::new(MemoryOptions {
                max_memory_bytes: b.memory_max_bytes,
                ttl: b.memory_ttl,
            })),
            BackendKind::Leveldb | BackendKind::Leveled => {
                let (_, store) = self
                    .res
                    .leveldb
                    .iter()
                    .find(|(n, _)| *n == b.name)
                    .ok_or_else(|| BackendsError::DatabaseNotOpen {
                        backend: b.name.clone(),
                    })?;
                let failed = |source| BackendsError::OpenPartition {
                    partition: p.0,
                    source,
                };
                if b.kind == BackendKind::Leveled {
                    Box::new(
                        store
                            .leveled_partition(&index, &b.journal)
                            .map_err(failed)?,
                    )
                } else {
                    Box::new(store.partition(&index).map_err(failed)?)
                }
            }
            BackendKind::Bitcask => {
                // A named backend's stores may be on another disk: their
                // R is their own filesystem's.
                let opts = match &root {
                    Some(r) => bitcask_options(self.config, r).0,
                    None => self.res.bitcask.clone(),
                };
                let dir = root
                    .unwrap_or_else(|| self.config.data_dir.join("bitcask"))
                    .join(&index);
                // The throttle is applied once per request by the node
                // (Space::admit_write), not once per record.
                let failed = |source| BackendsError::OpenBitcask {
                    partition: p.0,
                    source,
                };
                let store = bitcask::Store::open(&dir, opts).map_err(|e| failed(e.into()))?;
                self.res
                    .opened
                    .lock()
                    .expect("opened")
                    .add(store.recovery_report());
                let store = Arc::new(store);
                let backend = BitcaskBackend::open(store.clone()).map_err(failed)?;
                if let Some(s) = &self.res.scheduler {
                    s.add_store(store);
                }
                Box::new(backend)
            }
            BackendKind::Multi => return Err(BackendsError::NestedMulti),
        })
    }
}

impl Opening<'_> {
    /// Removes partition `p`'s data of these backends, whatever is left of
    /// it (nothing if none): its vnode no longer uses them.
    pub(crate) fn drop_data(&self, p: Partition) -> Result<(), BackendsError> {
        let c = self.config;
        let index = self.ring.index_decimal(p);
        let named: Vec<(NamedBackend, Option<PathBuf>)> = match c.backend {
            BackendKind::Multi => multi_backends(c)?
                .0
                .iter()
                .map(|b| (b.clone(), Some(multi_root(c, b))))
                .collect(),
            kind => vec![(single(c, kind), None)],
        };
        for (b, root) in named {
            match b.kind {
                BackendKind::Leveldb | BackendKind::Leveled => {
                    if let Some((_, store)) = self.res.leveldb.iter().find(|(n, _)| *n == b.name) {
                        store.drop_partition(&index).map_err(|source| {
                            BackendsError::DropPartition {
                                partition: p.0,
                                source,
                            }
                        })?;
                    }
                }
                BackendKind::Bitcask => {
                    let dir = root
                        .unwrap_or_else(|| c.data_dir.join("bitcask"))
                        .join(&index);
                    // The store closes (sealing its files) before its
                    // directory goes.
                    if let Some(store) = self
                        .res
                        .scheduler
                        .as_ref()
                        .and_then(|s| s.remove_store(&dir))
                    {
                        let deadline = std::time::Instant::now() + Duration::from_secs(60);
                        while Arc::strong_count(&store) > 1 && std::time::Instant::now() < deadline
                        {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        drop(store);
                    }
                    match std::fs::remove_dir_all(&dir) {
                        Err(source) if source.kind() != io::ErrorKind::NotFound => {
                            return Err(BackendsError::RemoveDir { path: dir, source })
                        }
                        _ => {}
                    }
                }
                BackendKind::Memory | BackendKind::Multi => {}
            }
        }
        Ok(())
    }
}
