//! The storage backends' settings: `bitcask.*` (with the sensor-data
//! paper's merge control), `leveldb.*`, `leveled.*`, `memory_backend.*`,
//! and `multi_backend.*` (several named backends, chosen per bucket).
//! Riak's names where the concept is the same. The leveldb, leveled and
//! memory settings in [`PER_BACKEND`] are also a named backend's, as
//! `multi_backend.NAME.<key>`.

use super::memory::machine_memory_bytes;
use super::setting::{Arg, Initial, Kind, Setting};
use super::Config;
use bitcask::SyncStrategy;
use rill_backend::{JournalOptions, LeveldbOptions};
use rill_node::{BackendKind, MergePolicyKind, NamedBackend};
use std::path::PathBuf;
use std::time::Duration;

const TB: u64 = 1 << 40;

/// Keys a named backend of `storage_backend = multi` takes too, as
/// `multi_backend.NAME.<key>`.
pub const PER_BACKEND: &[&str] = &[
    "leveldb.data_root",
    "leveldb.maximum_memory.percent",
    "leveldb.maximum_memory",
    "leveldb.sync_on_write",
    "leveldb.compression",
    "leveldb.bloomfilter",
    "leveled.data_root",
    "leveled.maximum_memory.percent",
    "leveled.maximum_memory",
    "leveled.sync_strategy",
    "leveled.compression_method",
    "leveled.compression_point",
    "leveled.journal_size",
    "leveled.singlefile_compactionpercentage",
    "memory_backend.max_memory_per_vnode",
    "memory_backend.ttl",
];

/// The named backend `name`, made when first named. Until its
/// `storage_backend` is read its kind is `Multi` (refused if it stays
/// so); its leveldb memory is shared out once the whole file is read.
fn named<'c>(c: &'c mut Config, name: &str) -> &'c mut NamedBackend {
    let n = &mut c.node;
    match n.multi.iter().position(|b| b.name == name) {
        Some(i) => &mut n.multi[i],
        None => {
            n.multi.push(NamedBackend {
                name: name.to_string(),
                kind: BackendKind::Multi,
                data_root: None,
                leveldb: LeveldbOptions {
                    max_memory_bytes: u64::MAX,
                    ..LeveldbOptions::default()
                },
                journal: JournalOptions::default(),
                memory_max_bytes: None,
                memory_ttl: None,
            });
            n.multi.last_mut().expect("pushed")
        }
    }
}

/// The leveldb engine's options the key sets: the node's, or a named
/// backend's.
fn leveldb<'c>(c: &'c mut Config, a: &Arg<'_>) -> &'c mut LeveldbOptions {
    match a.name {
        "" => &mut c.node.leveldb,
        name => &mut named(c, name).leveldb,
    }
}

/// The leveled engine's options: the node's, or a named backend's (whose
/// one engine is leveldb or leveled as its kind says).
fn leveled<'c>(c: &'c mut Config, a: &Arg<'_>) -> &'c mut LeveldbOptions {
    match a.name {
        "" => &mut c.node.leveled,
        name => &mut named(c, name).leveldb,
    }
}

fn journal<'c>(c: &'c mut Config, a: &Arg<'_>) -> &'c mut JournalOptions {
    match a.name {
        "" => &mut c.node.leveled_journal,
        name => &mut named(c, name).journal,
    }
}

fn memory_share(percent: u64) -> u64 {
    machine_memory_bytes() / 100 * percent
}

pub static SETTINGS: &[Setting] = &[
    Setting {
        key: "bitcask.max_file_size",
        kind: Kind::Size { min: 4 << 10, max: u32::MAX as u64 },
        words: &["auto"],
        default: Initial::Value("auto"),
        help: "rotation size R of data files; auto: the sensor-data paper's eq. 4 with V = U_m/2, R = (C_i/n_i)(U_m/2), from the capacity C_i of the disk holding the stores (or bitcask.capacity) and n_i, a store per partition of each Bitcask backend, from 1MB to 2GB (`rill planing` gives the largest R for a planned V)",
        apply: |c, a| {
            c.node.bitcask_max_file_size = a.word().is_none().then(|| a.bytes());
            Ok(())
        },
    },
    Setting {
        key: "bitcask.sync.strategy",
        kind: Kind::Choice(&["none", "o_sync", "interval"]),
        words: &[],
        default: Initial::Value("none"),
        help: "when puts reach the disk: none (in the kernel when acknowledged), o_sync (on the disk), interval (every bitcask.sync.interval); docs/durability.md",
        apply: |c, a| {
            c.node.bitcask.sync = match a.text() {
                "none" => SyncStrategy::None,
                "o_sync" => SyncStrategy::OSync,
                _ => SyncStrategy::Interval { interval_ms: 0 },
            };
            Ok(())
        },
    },
    Setting {
        key: "bitcask.sync.interval",
        kind: Kind::Duration { min: Duration::from_millis(1), max: Duration::from_secs(3600) },
        words: &[],
        default: Initial::Value("1s"),
        help: "the fsync period of bitcask.sync.strategy = interval",
        apply: |c, a| {
            c.bitcask_sync_interval = a.duration();
            Ok(())
        },
    },
    Setting {
        key: "bitcask.write_buffer_size",
        kind: Kind::Size { min: 0, max: 1 << 30 },
        words: &[],
        default: Initial::Value("0"),
        help: "bytes of puts a store gathers before handing them to the kernel (flushed within a few ms); 0: each put is in the kernel before it is acknowledged",
        apply: |c, a| {
            c.node.bitcask.write_buffer_bytes = a.bytes() as usize;
            Ok(())
        },
    },
    Setting {
        key: "bitcask.expiry",
        kind: Kind::Duration { min: Duration::from_secs(1), max: Duration::MAX },
        words: &["off"],
        default: Initial::Value("off"),
        help: "a time to live for every object",
        apply: |c, a| {
            c.node.bitcask.default_ttl = a.word().is_none().then(|| a.duration());
            Ok(())
        },
    },
    Setting {
        key: "bitcask.merge.policy",
        kind: Kind::Choice(&["fisherman", "classic"]),
        words: &[],
        default: Initial::Value("fisherman"),
        help: "the sensor-data paper's fisherman (merge by usage U, highest dead share first) or Riak's classic triggers",
        apply: |c, a| {
            c.node.merge_policy = match a.text() {
                "classic" => MergePolicyKind::Classic,
                _ => MergePolicyKind::Fisherman { target_usage: 0.0 },
            };
            Ok(())
        },
    },
    Setting {
        key: "bitcask.merge.target_usage",
        kind: Kind::Share,
        words: &[],
        default: Initial::Value("0.8"),
        help: "U_m: the fisherman merges files with live data only above this usage",
        apply: |c, a| {
            c.merge_target_usage = a.number();
            Ok(())
        },
    },
    Setting {
        key: "bitcask.capacity",
        kind: Kind::Size { min: 1 << 20, max: 1 << 60 },
        words: &["off"],
        default: Initial::Value("off"),
        help: "a capacity for usage U (and eq. 4's C_i) instead of the filesystem's",
        apply: |c, a| {
            c.node.bitcask_capacity_bytes = a.word().is_none().then(|| a.bytes());
            Ok(())
        },
    },
    Setting {
        key: "bitcask.throttle.low_usage",
        kind: Kind::Share,
        words: &[],
        default: Initial::Value("0.95"),
        help: "U_l: puts slow down above this usage (below bitcask.throttle.high_usage)",
        apply: |c, a| {
            c.node.throttle.low_usage = a.number();
            Ok(())
        },
    },
    Setting {
        key: "bitcask.throttle.high_usage",
        kind: Kind::Share,
        words: &[],
        default: Initial::Value("1.0"),
        help: "U_h: puts wait a full second at this usage, and are refused when merges cannot free room",
        apply: |c, a| {
            c.node.throttle.high_usage = a.number();
            Ok(())
        },
    },
    Setting {
        key: "bitcask.reserve",
        kind: Kind::Size { min: 0, max: TB },
        words: &[],
        default: Initial::Value("64MB"),
        help: "disk space held back from puts for deletes, merges and a start at a full disk; with leveldb, the free space below which puts are refused; 0: none (docs/durability.md)",
        apply: |c, a| {
            c.node.reserve_bytes = a.bytes();
            Ok(())
        },
    },
    Setting {
        key: "leveldb.data_root",
        kind: Kind::Path,
        words: &[],
        default: Initial::Unset("$(platform_data_dir)/leveldb; a named backend's: $(platform_data_dir)/multi/NAME"),
        help: "where the leveldb backend keeps its database",
        apply: data_root,
    },
    Setting {
        key: "leveldb.maximum_memory.percent",
        kind: Kind::Count { min: 1, max: 100 },
        words: &[],
        default: Initial::Value("70"),
        help: "share of the node's memory (the machine's, or its control group's limit) for the block cache and write buffers, all vnodes together (as Riak); a named backend's default: 70 shared by the multi's leveldb and leveled backends",
        apply: |c, a| {
            leveldb(c, a).max_memory_bytes = memory_share(a.count());
            Ok(())
        },
    },
    Setting {
        key: "leveldb.maximum_memory",
        kind: Kind::Size { min: 0, max: TB },
        words: &[],
        default: Initial::Unset("unset: leveldb.maximum_memory.percent decides"),
        help: "the same budget as a size, instead of the percentage (at least 16MB: a smaller size is raised to it)",
        apply: |c, a| {
            leveldb(c, a).max_memory_bytes = a.bytes().max(16 << 20);
            Ok(())
        },
    },
    Setting {
        key: "leveldb.sync_on_write",
        kind: Kind::OnOff,
        words: &[],
        default: Initial::Value("off"),
        help: "on: each write reaches the disk before it is acknowledged; off: the kernel, safe from a crash of the process",
        apply: |c, a| {
            leveldb(c, a).sync_on_write = a.on();
            Ok(())
        },
    },
    Setting {
        key: "leveldb.compression",
        kind: Kind::OnOff,
        words: &[],
        default: Initial::Value("on"),
        help: "LZ4 compression of table blocks",
        apply: |c, a| {
            leveldb(c, a).compression = a.on();
            Ok(())
        },
    },
    Setting {
        key: "leveldb.bloomfilter",
        kind: Kind::OnOff,
        words: &[],
        default: Initial::Value("on"),
        help: "bloom filters on tables",
        apply: |c, a| {
            leveldb(c, a).bloom_filter = a.on();
            Ok(())
        },
    },
    Setting {
        key: "leveled.data_root",
        kind: Kind::Path,
        words: &[],
        default: Initial::Unset("$(platform_data_dir)/leveled; a named backend's: $(platform_data_dir)/multi/NAME"),
        help: "where the leveled backend keeps its ledgers and journals",
        apply: data_root,
    },
    Setting {
        key: "leveled.maximum_memory.percent",
        kind: Kind::Count { min: 1, max: 100 },
        words: &[],
        default: Initial::Value("70"),
        help: "share of the node's memory for leveled's block cache and write buffers, all vnodes together (as leveldb's)",
        apply: |c, a| {
            leveled(c, a).max_memory_bytes = memory_share(a.count());
            Ok(())
        },
    },
    Setting {
        key: "leveled.maximum_memory",
        kind: Kind::Size { min: 0, max: TB },
        words: &[],
        default: Initial::Unset("unset: leveled.maximum_memory.percent decides"),
        help: "the same budget as a size, instead of the percentage (at least 16MB: a smaller size is raised to it)",
        apply: |c, a| {
            leveled(c, a).max_memory_bytes = a.bytes().max(16 << 20);
            Ok(())
        },
    },
    Setting {
        key: "leveled.sync_strategy",
        kind: Kind::Choice(&["none", "riak_sync", "sync"]),
        words: &[],
        default: Initial::Value("none"),
        help: "none: writes are in the kernel when acknowledged; sync or riak_sync: on the disk (leveled syncs each journal write under both)",
        apply: |c, a| {
            leveled(c, a).sync_on_write = a.text() != "none";
            Ok(())
        },
    },
    Setting {
        key: "leveled.compression_method",
        kind: Kind::Choice(&["native", "lz4", "none"]),
        words: &["zstd"],
        default: Initial::Value("native"),
        help: "values compressed with LZ4 in the journal (native and lz4 are the same here), or none",
        apply: |c, a| {
            if a.word().is_some() {
                return Err(format!(
                    "{} = zstd is not offered by this build; use lz4 (or native, the same here) or none",
                    a.key
                ));
            }
            journal(c, a).compression = a.text() != "none";
            Ok(())
        },
    },
    Setting {
        key: "leveled.compression_point",
        kind: Kind::Choice(&["on_receipt", "on_compact"]),
        words: &[],
        default: Initial::Value("on_receipt"),
        help: "accepted for Riak's configs: values are compressed as they are written to a journal file either way",
        apply: |_, _| Ok(()),
    },
    Setting {
        key: "leveled.journal_size",
        kind: Kind::Size { min: 0, max: TB },
        words: &[],
        default: Initial::Value("64MB"),
        help: "a journal file is closed near this size, at least 1MB (Riak's default is 1GB per vnode journal file)",
        apply: |c, a| {
            journal(c, a).file_bytes = a.bytes().max(1 << 20);
            Ok(())
        },
    },
    Setting {
        key: "leveled.singlefile_compactionpercentage",
        kind: Kind::Percent { min: 0.0 },
        words: &[],
        default: Initial::Value("30"),
        help: "a journal file whose live share falls below this may have its live values moved out when the ledger tables pointing into it are compacted; a file with none live is deleted (as Riak)",
        apply: |c, a| {
            journal(c, a).compaction_percent = a.number().round() as u8;
            Ok(())
        },
    },
    Setting {
        key: "memory_backend.max_memory_per_vnode",
        kind: Kind::Size { min: 1 << 10, max: TB },
        words: &["off"],
        default: Initial::Value("off"),
        help: "the memory backend's cap per vnode (the oldest objects go first)",
        apply: |c, a| {
            let cap = a.word().is_none().then(|| a.bytes());
            match a.name {
                "" => c.node.memory_max_bytes = cap,
                name => named(c, name).memory_max_bytes = cap,
            }
            Ok(())
        },
    },
    Setting {
        key: "memory_backend.ttl",
        kind: Kind::Duration { min: Duration::from_secs(1), max: Duration::MAX },
        words: &["off"],
        default: Initial::Value("off"),
        help: "the memory backend's time to live",
        apply: |c, a| {
            let ttl = a.word().is_none().then(|| a.duration());
            match a.name {
                "" => c.node.memory_ttl = ttl,
                name => named(c, name).memory_ttl = ttl,
            }
            Ok(())
        },
    },
    Setting {
        key: "multi_backend.default",
        kind: Kind::Text,
        words: &[],
        default: Initial::Unset("none: storage_backend = multi needs one"),
        help: "with storage_backend = multi: the backend of buckets whose backend property names none",
        apply: |c, a| {
            c.node.multi_default = Some(a.text().to_string());
            Ok(())
        },
    },
    Setting {
        key: "multi_backend.NAME.storage_backend",
        kind: Kind::Choice(&["bitcask", "leveldb", "leveled", "memory"]),
        words: &[],
        default: Initial::Unset("none"),
        help: "with storage_backend = multi: the backend NAME (a bucket chooses it with its backend property); NAME takes the keys marked so below as multi_backend.NAME.<key>",
        apply: |c, a| {
            named(c, a.name).kind = BackendKind::from_name(a.text()).expect("one of the choices");
            Ok(())
        },
    },
    Setting {
        key: "multi_backend.NAME.bitcask.data_root",
        kind: Kind::Path,
        words: &[],
        default: Initial::Unset("$(platform_data_dir)/multi/NAME"),
        help: "where the backend NAME keeps its Bitcask stores",
        apply: data_root,
    },
];

/// `leveldb.data_root`, `leveled.data_root` and a named backend's.
fn data_root(c: &mut Config, a: &Arg<'_>) -> Result<(), String> {
    let dir = PathBuf::from(a.text());
    match (a.name, a.key.ends_with("leveled.data_root")) {
        ("", false) => c.node.leveldb_dir = Some(dir),
        ("", true) => c.node.leveled_dir = Some(dir),
        (name, _) => named(c, name).data_root = Some(dir),
    }
    Ok(())
}

/// Once the whole file is read: the sync interval into its strategy, U_m
/// into the fisherman, a named leveldb backend's memory from the 70 %
/// the multi's leveldb and leveled backends share; problems for the
/// named backends and `multi_backend.default`.
pub(super) fn finish(c: &mut Config) -> Vec<String> {
    let interval_ms = c.bitcask_sync_interval.as_millis() as u64;
    let target_usage = c.merge_target_usage;
    let n = &mut c.node;
    if let SyncStrategy::Interval { .. } = n.bitcask.sync {
        n.bitcask.sync = SyncStrategy::Interval { interval_ms };
    }
    if let MergePolicyKind::Fisherman { .. } = n.merge_policy {
        n.merge_policy = MergePolicyKind::Fisherman { target_usage };
    }
    let lsm = n
        .multi
        .iter()
        .filter(|b| matches!(b.kind, BackendKind::Leveldb | BackendKind::Leveled))
        .count()
        .max(1) as u64;
    for b in &mut n.multi {
        if b.leveldb.max_memory_bytes == u64::MAX {
            b.leveldb.max_memory_bytes = memory_share(70) / lsm;
        }
    }
    let mut problems: Vec<String> = n
        .multi
        .iter()
        .filter(|b| b.kind == BackendKind::Multi)
        .map(|b| format!(
            "multi_backend.{0}.storage_backend is not set (bitcask, leveldb, leveled or memory) though other multi_backend.{0}.* settings are",
            b.name
        ))
        .collect();
    if n.backend == BackendKind::Multi {
        let names: Vec<&str> = n.multi.iter().map(|b| b.name.as_str()).collect();
        match n.multi_default.as_deref() {
            _ if names.is_empty() => problems.push("storage_backend = multi needs backends: multi_backend.NAME.storage_backend = bitcask, leveldb, leveled or memory".into()),
            None => problems.push("storage_backend = multi needs multi_backend.default = NAME".into()),
            Some(d) if !names.contains(&d) => problems.push(format!(
                "multi_backend.default = {d} names no backend (the backends: {})",
                names.join(", ")
            )),
            Some(_) => {}
        }
    }
    let t = &n.throttle;
    if t.low_usage >= t.high_usage {
        problems.push(format!(
            "bitcask.throttle.low_usage ({}) must be below bitcask.throttle.high_usage ({})",
            t.low_usage, t.high_usage
        ));
    }
    problems
}
