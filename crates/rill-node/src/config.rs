//! What a node is made of, as the `rill` binary's config file sets it.

use std::path::PathBuf;
use std::time::Duration;

/// `storage_backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    Bitcask,
    Memory,
    /// Objects and index entries in a sorted LSM tree per vnode (fjall).
    Leveldb,
    /// Keys and heads in a sorted ledger, values in a journal apart
    /// (fjall, values in blob files), per vnode.
    Leveled,
    /// Several named backends, chosen per bucket (`multi_backend.*`).
    Multi,
}

impl BackendKind {
    /// The name `storage_backend` gives it.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Bitcask => "bitcask",
            BackendKind::Memory => "memory",
            BackendKind::Leveldb => "leveldb",
            BackendKind::Leveled => "leveled",
            BackendKind::Multi => "multi",
        }
    }

    /// The kind `storage_backend` names `name`.
    pub fn from_name(name: &str) -> Option<BackendKind> {
        [
            BackendKind::Bitcask,
            BackendKind::Memory,
            BackendKind::Leveldb,
            BackendKind::Leveled,
            BackendKind::Multi,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

/// One named backend of `storage_backend = multi`
/// (`multi_backend.NAME.*`).
#[derive(Clone, Debug, PartialEq)]
pub struct NamedBackend {
    pub name: String,
    /// Bitcask, Leveldb, Leveled or Memory.
    pub kind: BackendKind,
    /// `multi_backend.NAME.bitcask.data_root` / `.leveldb.data_root` /
    /// `.leveled.data_root` (default: `multi/NAME` under the data
    /// directory).
    pub data_root: Option<PathBuf>,
    /// The LSM engine's settings of a leveldb or leveled backend.
    pub leveldb: rill_backend::LeveldbOptions,
    /// A leveled backend's journal.
    pub journal: rill_backend::JournalOptions,
    pub memory_max_bytes: Option<u64>,
    pub memory_ttl: Option<Duration>,
}

/// Riak's `delete_mode`: when a tombstone leaves the backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteMode {
    /// Never: tombstones stay (list keys shows them).
    Keep,
    /// As soon as every replica holds the tombstone.
    Immediate,
    /// After this delay (Riak's default: 3 s).
    After(Duration),
}

#[derive(Clone)]
pub struct NodeConfig {
    /// Riak's `nodename`, e.g. `rill@127.0.0.1`.
    pub nodename: String,
    /// `platform_data_dir`.
    pub data_dir: PathBuf,
    /// `ring_size`: partitions of the ring, a power of two.
    pub ring_size: u32,
    pub backend: BackendKind,
    pub delete_mode: DeleteMode,
    /// `bitcask.*` settings for every vnode's store; its
    /// `max_file_size_bytes` is replaced by [`Self::bitcask_max_file_size`]'s
    /// answer when the stores open.
    pub bitcask: bitcask::Options,
    /// `bitcask.max_file_size`, the rotation size R; `None` (the default):
    /// from the disk by the sensor-data paper's eq. 4
    /// ([`merge_control::default_rotation_bytes`]).
    pub bitcask_max_file_size: Option<u64>,
    /// Merge policy of the node's merge scheduler (`bitcask.merge.policy`).
    pub merge_policy: MergePolicyKind,
    /// `bitcask.capacity`: capacity for U instead of the filesystem's.
    pub bitcask_capacity_bytes: Option<u64>,
    pub throttle: merge_control::ThrottleSettings,
    /// `bitcask.reserve`: disk space held back from puts for deletes,
    /// merges and a start at a full disk (0: none).
    pub reserve_bytes: u64,
    /// `leveldb.*` settings of the node's leveldb database.
    pub leveldb: rill_backend::LeveldbOptions,
    /// `leveldb.data_root` (default: `leveldb` under the data directory).
    pub leveldb_dir: Option<PathBuf>,
    /// `leveled.*` settings of the node's leveled database: its engine
    /// and its journal.
    pub leveled: rill_backend::LeveldbOptions,
    pub leveled_journal: rill_backend::JournalOptions,
    /// `leveled.data_root` (default: `leveled` under the data directory).
    pub leveled_dir: Option<PathBuf>,
    /// `multi_backend.NAME.*`, in the order first named.
    pub multi: Vec<NamedBackend>,
    /// `multi_backend.default`.
    pub multi_default: Option<String>,
    /// `memory_backend.max_memory_per_vnode`.
    pub memory_max_bytes: Option<u64>,
    /// `memory_backend.ttl`.
    pub memory_ttl: Option<Duration>,
    /// `object.size.warning_threshold` / `object.size.maximum`.
    pub object_size_warning_bytes: usize,
    pub object_size_max_bytes: usize,
    /// `object.siblings.warning_threshold` / `object.siblings.maximum`.
    pub siblings_warning: usize,
    pub siblings_max: usize,
    /// How long a coordinator waits for other nodes' replicas (Riak's
    /// default request timeout: 60 s).
    pub request_timeout: Duration,
    /// `tictacaae_*`: active anti-entropy.
    pub tictacaae: TictacConfig,
}

/// Active anti-entropy's settings, Riak 3's `tictacaae_*` names
/// (docs/cluster.md, "Active anti-entropy").
#[derive(Clone, Debug, PartialEq)]
pub struct TictacConfig {
    /// `tictacaae_active`: keep trees and exchange them (`active`), or
    /// not (`passive`). Riak's default is passive; Rill's is active.
    pub active: bool,
    /// `tictacaae_exchangetick`: how often each vnode starts an exchange
    /// with one of its neighbours (Riak: 480,000 ms).
    pub exchange_tick: Duration,
    /// `tictacaae_rebuildtick`: how often a vnode looks whether its trees
    /// are due to be built again (Riak: 3,600,000 ms).
    pub rebuild_tick: Duration,
    /// `tictacaae_rebuildwait`: the least time between two builds of a
    /// vnode's trees (Riak: 336 hours).
    pub rebuild_wait: Duration,
    /// `tictacaae_rebuilddelay`: a delay up to this added to the wait, a
    /// share fixed by partition, so vnodes do not rebuild together (Riak:
    /// 345,600 s, a random slot).
    pub rebuild_delay: Duration,
    /// `tictacaae_maxresults`: branches and segments an exchange takes
    /// at most (Riak: 64).
    pub max_results: u32,
    /// `tictacaae_rangeboost`: how many times `max_results` the follow-up
    /// exchanges of a repair take (Riak: 2).
    pub range_boost: u32,
    /// `tictacaae_repairloops`: follow-up exchanges after one that found
    /// differences (Riak: 4).
    pub repair_loops: u32,
    /// `tictacaae_exchangepause`: the pause between an exchange's stages
    /// (Riak: 1,000 ms).
    pub exchange_pause: Duration,
}

impl Default for TictacConfig {
    fn default() -> Self {
        TictacConfig {
            active: true,
            exchange_tick: Duration::from_millis(480_000),
            rebuild_tick: Duration::from_millis(3_600_000),
            rebuild_wait: Duration::from_secs(336 * 3600),
            rebuild_delay: Duration::from_secs(345_600),
            max_results: 64,
            range_boost: 2,
            repair_loops: 4,
            exchange_pause: Duration::from_millis(1000),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MergePolicyKind {
    Fisherman { target_usage: f64 },
    Classic,
}

impl MergePolicyKind {
    /// U_m: the usage above which merges copy live data (the classic
    /// policy has none; the fisherman's default stands in for it).
    pub fn target_usage(self) -> f64 {
        match self {
            MergePolicyKind::Fisherman { target_usage } => target_usage,
            MergePolicyKind::Classic => merge_control::Fisherman::default().target_usage,
        }
    }

    /// The merge policy this names, for a merge scheduler.
    pub fn policy(self) -> Box<dyn merge_control::Policy> {
        match self {
            MergePolicyKind::Fisherman { target_usage } => Box::new(merge_control::Fisherman {
                target_usage,
                ..merge_control::Fisherman::default()
            }),
            MergePolicyKind::Classic => Box::new(merge_control::Classic::default()),
        }
    }
}

impl NodeConfig {
    /// Whether a vnode's store keeps everything across a restart (no
    /// memory backend anywhere): only then are anti-entropy trees kept
    /// across a clean stop.
    pub(crate) fn stores_last(&self) -> bool {
        self.backend != BackendKind::Memory
            && !(self.backend == BackendKind::Multi
                && self.multi.iter().any(|b| b.kind == BackendKind::Memory))
    }

    /// Whether stores drop keys on their own (expiry, a memory limit),
    /// which anti-entropy's trees do not see until their next build.
    pub(crate) fn stores_drop_keys(&self) -> bool {
        self.memory_ttl.is_some()
            || self.memory_max_bytes.is_some()
            || self.bitcask.default_ttl.is_some()
            || self
                .multi
                .iter()
                .any(|b| b.memory_ttl.is_some() || b.memory_max_bytes.is_some())
    }

    /// Riak's defaults, data under `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> NodeConfig {
        NodeConfig {
            nodename: "riak@127.0.0.1".into(),
            data_dir: data_dir.into(),
            ring_size: 64,
            backend: BackendKind::Bitcask,
            delete_mode: DeleteMode::After(Duration::from_secs(3)),
            // Each put reaches the kernel before it is acknowledged, so a
            // crash of the process loses nothing acknowledged (an OS
            // crash is what bitcask.sync.strategy guards against).
            bitcask: bitcask::Options {
                write_buffer_bytes: 0,
                ..bitcask::Options::default()
            },
            bitcask_max_file_size: None,
            merge_policy: MergePolicyKind::Fisherman { target_usage: 0.8 },
            bitcask_capacity_bytes: None,
            throttle: merge_control::ThrottleSettings::default(),
            reserve_bytes: 64 << 20,
            leveldb: rill_backend::LeveldbOptions::default(),
            leveldb_dir: None,
            leveled: rill_backend::LeveldbOptions::default(),
            leveled_journal: rill_backend::JournalOptions::default(),
            leveled_dir: None,
            multi: Vec::new(),
            multi_default: None,
            memory_max_bytes: None,
            memory_ttl: None,
            object_size_warning_bytes: 5 << 20,
            object_size_max_bytes: 50 << 20,
            siblings_warning: 25,
            siblings_max: 100,
            request_timeout: Duration::from_secs(60),
            tictacaae: TictacConfig::default(),
        }
    }
}
