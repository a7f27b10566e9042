//! What an operator reads of the node through `/stats` and `rill admin
//! status`: counters of requests, and figures of the vnodes' storage.

use crate::vnodes::Vnodes;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters an operator reads through `/stats` and `rill admin status`.
#[derive(Default)]
pub(crate) struct Counters {
    pub gets: AtomicU64,
    pub puts: AtomicU64,
    pub deletes: AtomicU64,
    pub get_us: AtomicU64,
    pub put_us: AtomicU64,
    pub read_repairs: AtomicU64,
    /// Writes coordinated by a replica on another node (this node held
    /// none of the key's replicas): Riak's `coord_redirs_total`.
    pub coord_redirs: AtomicU64,
    /// Tombstones reaped (every replica asked to drop it).
    pub tombstones_reaped: AtomicU64,
    /// Reaps put off because a node other than the owners may hold data
    /// of the key's partitions, or a member cannot be asked (tried again).
    pub reaps_put_off: AtomicU64,
    /// Tombstones kept after every try (another delete or read asks
    /// again).
    pub reaps_given_up: AtomicU64,
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
    pub coord_redirs: u64,
    pub tombstones_reaped: u64,
    pub reaps_put_off: u64,
    pub reaps_given_up: u64,
    pub get_head_clocks: u64,
    pub get_fetches: u64,
    pub get_local_waits: u64,
    pub index_queries: u64,
    pub list_keys: u64,
    pub dt_updates: u64,
    pub dt_fetches: u64,
    pub errors: u64,
    /// Anti-entropy's figures.
    pub aae: AaeStats,
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

/// Anti-entropy's figures in `/stats` (Riak's `tictacaae_*` names).
#[derive(Clone, Debug, Default)]
pub struct AaeStats {
    /// Exchanges that ended at the roots (in sync).
    pub root_compare: u64,
    /// Exchanges that ended at the branches (in sync).
    pub branch_compare: u64,
    /// Exchanges that compared keys.
    pub clock_compare: u64,
    /// Exchanges a replica could not take part in (trees not built).
    pub not_supported: u64,
    /// Exchanges that failed (a replica unreachable or too slow).
    pub error: u64,
    /// Keys exchanges found different (each read to repair it).
    pub exchange_deltas: u64,
    /// Builds of a vnode's trees.
    pub rebuilds: u64,
    /// Exchanges running now (at most 8).
    pub exchanges_running: u64,
    /// Vnodes whose trees are built / not yet.
    pub trees_built: u32,
    pub trees_unbuilt: u32,
}

impl NodeStats {
    pub(crate) fn of(c: &Counters, vnodes: &Vnodes, a: &crate::aae::AaeCounters) -> NodeStats {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let res = &vnodes.res;
        let m = res.scheduler.as_ref().map(|s| s.metrics());
        let (mut trees_built, mut trees_unbuilt) = (0, 0);
        for built in vnodes
            .iter()
            .filter_map(|v| v.aae())
            .map(|a| a.trees().is_built())
        {
            if built {
                trees_built += 1;
            } else {
                trees_unbuilt += 1;
            }
        }
        NodeStats {
            gets: l(&c.gets),
            puts: l(&c.puts),
            deletes: l(&c.deletes),
            get_us_total: l(&c.get_us),
            put_us_total: l(&c.put_us),
            read_repairs: l(&c.read_repairs),
            coord_redirs: l(&c.coord_redirs),
            tombstones_reaped: l(&c.tombstones_reaped),
            reaps_put_off: l(&c.reaps_put_off),
            reaps_given_up: l(&c.reaps_given_up),
            get_head_clocks: l(&c.get_head_clocks),
            get_fetches: l(&c.get_fetches),
            get_local_waits: l(&c.get_local_waits),
            index_queries: l(&c.index_queries),
            list_keys: l(&c.list_keys),
            dt_updates: l(&c.dt_updates),
            dt_fetches: l(&c.dt_fetches),
            errors: l(&c.errors),
            aae: AaeStats {
                root_compare: l(&a.root_compare),
                branch_compare: l(&a.branch_compare),
                clock_compare: l(&a.clock_compare),
                not_supported: l(&a.not_supported),
                error: l(&a.error),
                exchange_deltas: l(&a.exchange_deltas),
                rebuilds: l(&a.rebuilds),
                exchanges_running: l(&a.running),
                trees_built,
                trees_unbuilt,
            },
            vnodes: vnodes.len() as u32,
            storage_bytes: vnodes.storage_bytes(),
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
}
