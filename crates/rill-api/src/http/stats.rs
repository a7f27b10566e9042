//! `GET /stats` (Riak's JSON stats) and `GET /metrics` (the same numbers
//! in Prometheus text exposition).

use super::util::{json, text};
use super::Ctx;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn stats_json(ctx: &Ctx) -> Value {
    let st = ctx.node.stats();
    let mean = |total: u64, n: u64| total.checked_div(n).unwrap_or(0);
    let mut v = json!({
        "nodename": ctx.node.nodename(),
        "riak_kv_version": crate::RIAK_COMPAT_VERSION,
        "riak_core_version": crate::RIAK_COMPAT_VERSION,
        "riak_pb_version": crate::RIAK_COMPAT_VERSION,
        "rill_version": env!("CARGO_PKG_VERSION"),
        "storage_backend": match ctx.node.config().backend {
            rill_node::BackendKind::Bitcask => "riak_kv_bitcask_backend",
            rill_node::BackendKind::Memory => "riak_kv_memory_backend",
            rill_node::BackendKind::Leveldb => "riak_kv_eleveldb_backend",
            rill_node::BackendKind::Leveled => "riak_kv_leveled_backend",
            rill_node::BackendKind::Multi => "riak_kv_multi_backend",
        },
        "ring_num_partitions": ctx.node.ring_size(),
        "ring_creation_size": ctx.node.ring_size(),
        "ring_members": [ctx.node.nodename()],
        "connected_nodes": [],
        "node_gets_total": st.gets,
        "node_puts_total": st.puts,
        "node_deletes_total": st.deletes,
        "node_get_fsm_time_mean": mean(st.get_us_total, st.gets),
        "node_put_fsm_time_mean": mean(st.put_us_total, st.puts),
        "read_repairs_total": st.read_repairs,
        "coord_redirs_total": st.coord_redirs,
        "get_head_clocks_total": st.get_head_clocks,
        "get_fetches_total": st.get_fetches,
        "get_local_waits_total": st.get_local_waits,
        "index_fsm_create": st.index_queries,
        "list_fsm_create": st.list_keys,
        "object_merge_total": 0,
        "dt_updates_total": st.dt_updates,
        "dt_fetches_total": st.dt_fetches,
        "request_errors_total": st.errors,
        "pbc_connects_total": ctx.pb_stats.connects.load(Ordering::Relaxed),
        "pbc_active": ctx.pb_stats.active.load(Ordering::Relaxed),
        "storage_bytes": st.storage_bytes,
        "disk_usage": st.disk_usage,
        "bitcask_merges_total": st.merges,
        "bitcask_files_deleted_unread_total": st.files_deleted_unread,
        "bitcask_merge_bytes_read_total": st.merge_bytes_read,
        "bitcask_merge_bytes_written_total": st.merge_bytes_written,
        "bitcask_merge_take_threshold": st.merge_take_threshold,
        "bitcask_throttle_delay_ms": st.throttle_delay_ms,
        "out_of_space_refusals_total": st.out_of_space_refusals,
        "space_reserve_released": u8::from(st.space_reserve_released),
        "leveldb_damaged_reads_total": st.leveldb_damaged_reads,
        "leveldb_held_writes_total": st.leveldb_held_writes,
        "uptime_seconds": ctx.node.uptime().as_secs(),
    });
    if let Value::Object(m) = &mut v {
        for (k, n) in [
            ("tombstones_reaped_total", st.tombstones_reaped),
            ("reaps_put_off_total", st.reaps_put_off),
            ("reaps_given_up_total", st.reaps_given_up),
            ("tictacaae_root_compare_total", st.aae.root_compare),
            ("tictacaae_branch_compare_total", st.aae.branch_compare),
            ("tictacaae_clock_compare_total", st.aae.clock_compare),
            ("tictacaae_not_supported_total", st.aae.not_supported),
            ("tictacaae_error_total", st.aae.error),
            ("tictacaae_exchange_total", st.aae.exchange_deltas),
            ("tictacaae_rebuilds_total", st.aae.rebuilds),
            ("tictacaae_exchanges_running", st.aae.exchanges_running),
            ("tictacaae_trees_built", u64::from(st.aae.trees_built)),
            ("tictacaae_trees_unbuilt", u64::from(st.aae.trees_unbuilt)),
        ] {
            m.insert(k.into(), n.into());
        }
    }
    if let (Some(engine), Value::Object(m)) = (&ctx.sensors, &mut v) {
        let s = engine.stats();
        for (k, n) in [
            ("sensor_samples_written_total", s.samples_written),
            ("sensor_samples_too_old_total", s.samples_too_old),
            ("sensor_samples_too_new_total", s.samples_too_new),
            ("sensor_samples_bad_series_total", s.samples_bad_series),
            ("sensor_writes_refused_total", s.writes_refused),
            ("sensor_blocks_stored_total", s.blocks_stored),
            ("sensor_block_bytes_stored_total", s.block_bytes_stored),
            (
                "sensor_blocks_expired_unstored_total",
                s.blocks_expired_unstored,
            ),
            ("sensor_series", s.series),
            ("sensor_databases", s.databases),
            ("sensor_samples_buffered", s.samples_buffered),
            ("sensor_blocks_waiting", s.blocks_waiting),
            ("sensor_log_segments", s.log_segments),
            ("sensor_data_files", s.storage.data_files),
            ("sensor_merges_total", s.storage.merges),
            (
                "sensor_files_deleted_unread_total",
                s.storage.files_deleted_unread,
            ),
            ("sensor_merge_bytes_read_total", s.storage.merge_bytes_read),
            (
                "sensor_merge_bytes_written_total",
                s.storage.merge_bytes_written,
            ),
        ] {
            m.insert(k.into(), n.into());
        }
    }
    if let (Some(peer), Value::Object(m)) = (&ctx.peer, &mut v) {
        for (k, n) in peer.stats() {
            m.insert(k.into(), n.into());
        }
    }
    v
}

pub(crate) fn stats(ctx: &Arc<Ctx>) -> Response {
    json(StatusCode::OK, &stats_json(ctx))
}

/// Prometheus text exposition of the numeric stats.
pub(crate) fn metrics(ctx: &Arc<Ctx>) -> Response {
    let mut out = String::new();
    if let Value::Object(m) = stats_json(ctx) {
        for (k, v) in m {
            if let Some(n) = v.as_f64() {
                let kind = if k.ends_with("_total") {
                    "counter"
                } else {
                    "gauge"
                };
                out.push_str(&format!("# TYPE rill_{k} {kind}\nrill_{k} {n}\n"));
            }
        }
    }
    let mut r = text(StatusCode::OK, out);
    r.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}
