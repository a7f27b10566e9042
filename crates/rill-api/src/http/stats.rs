//! `GET /stats` (Riak's JSON stats) and `GET /metrics` (the same numbers
//! in Prometheus text exposition).

use super::util::{json, text};
use super::Ctx;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One number of `/stats` and `/metrics`: its name, what it is (the
/// `# HELP` line of `/metrics`) and its value.
type Stat = (&'static str, &'static str, Value);

/// The numbers of `/stats`, each with what it is, in the order
/// `/metrics` gives them.
fn numbers(ctx: &Ctx) -> Vec<Stat> {
    let st = ctx.node.stats();
    let mean = |total: u64, n: u64| total.checked_div(n).unwrap_or(0);
    let mut out: Vec<Stat> = vec![
        ("ring_num_partitions", "Partitions of the ring.", ctx.node.ring_size().into()),
        ("ring_creation_size", "Partitions the ring was made with.", ctx.node.ring_size().into()),
        ("node_gets_total", "Gets this node coordinated.", st.gets.into()),
        ("node_puts_total", "Puts this node coordinated.", st.puts.into()),
        ("node_deletes_total", "Deletes this node coordinated.", st.deletes.into()),
        (
            "node_get_fsm_time_mean",
            "Mean time of the gets this node coordinated since it started, in microseconds (Riak's unit).",
            mean(st.get_us_total, st.gets).into(),
        ),
        (
            "node_put_fsm_time_mean",
            "Mean time of the puts this node coordinated since it started, in microseconds (Riak's unit).",
            mean(st.put_us_total, st.puts).into(),
        ),
        ("read_repairs_total", "Read repairs sent to replicas that were behind.", st.read_repairs.into()),
        (
            "coord_redirs_total",
            "Writes sent to a node holding a replica of the key to coordinate.",
            st.coord_redirs.into(),
        ),
        (
            "get_head_clocks_total",
            "Replicas on other nodes that answered a get with a clock alone (a value too large to send unasked).",
            st.get_head_clocks.into(),
        ),
        (
            "get_fetches_total",
            "Whole objects fetched after such a clock stood for an object the get did not have.",
            st.get_fetches.into(),
        ),
        (
            "get_local_waits_total",
            "Reads of this node's replicas for a get that went to a blocking thread (they would wait for the disk).",
            st.get_local_waits.into(),
        ),
        ("index_fsm_create", "Secondary index queries.", st.index_queries.into()),
        ("list_fsm_create", "Key listings.", st.list_keys.into()),
        ("object_merge_total", "Always 0 (Riak's name; Rill merges siblings in its puts).", 0.into()),
        ("dt_updates_total", "Updates of data types (counters, sets, maps, HyperLogLogs).", st.dt_updates.into()),
        ("dt_fetches_total", "Fetches of data types.", st.dt_fetches.into()),
        ("request_errors_total", "Gets, puts and deletes this node coordinated that ended in an error (a failed precondition included).", st.errors.into()),
        (
            "pbc_connects_total",
            "Protocol Buffers connections accepted.",
            ctx.pb_stats.connects.load(Ordering::Relaxed).into(),
        ),
        (
            "pbc_active",
            "Protocol Buffers connections open now.",
            ctx.pb_stats.active.load(Ordering::Relaxed).into(),
        ),
        ("storage_bytes", "Bytes of this node's stored data.", st.storage_bytes.into()),
        (
            "disk_usage",
            "Share of the data directory's filesystem in use, 0 to 1.",
            st.disk_usage.into(),
        ),
        ("bitcask_merges_total", "Bitcask merges run.", st.merges.into()),
        (
            "bitcask_files_deleted_unread_total",
            "Bitcask files deleted whole, unread, once every key in them had expired or been replaced.",
            st.files_deleted_unread.into(),
        ),
        ("bitcask_merge_bytes_read_total", "Bytes Bitcask merges read.", st.merge_bytes_read.into()),
        (
            "bitcask_merge_bytes_written_total",
            "Bytes Bitcask merges wrote.",
            st.merge_bytes_written.into(),
        ),
        (
            "bitcask_merge_take_threshold",
            "The merge control's take threshold D_m: the share of dead bytes past which a file is merged.",
            st.merge_take_threshold.into(),
        ),
        (
            "bitcask_throttle_delay_ms",
            "The merge control's current delay of each write, in milliseconds.",
            st.throttle_delay_ms.into(),
        ),
        (
            "out_of_space_refusals_total",
            "Puts refused because the disk is full.",
            st.out_of_space_refusals.into(),
        ),
        (
            "space_reserve_released",
            "1 while the space reserve is released and puts are refused, else 0.",
            u8::from(st.space_reserve_released).into(),
        ),
        (
            "leveldb_damaged_reads_total",
            "Reads that met a damaged leveldb block (their keys answered with an error).",
            st.leveldb_damaged_reads.into(),
        ),
        (
            "leveldb_held_writes_total",
            "Writes that waited for leveldb's write buffers to be written out to tables.",
            st.leveldb_held_writes.into(),
        ),
        ("uptime_seconds", "Seconds since the node started.", ctx.node.uptime().as_secs().into()),
        ("tombstones_reaped_total", "Tombstones reaped (every replica asked to drop them).", st.tombstones_reaped.into()),
        (
            "reaps_put_off_total",
            "Reaps put off because a node other than the owners may hold the key's data, or a member could not be asked.",
            st.reaps_put_off.into(),
        ),
        (
            "reaps_given_up_total",
            "Tombstones kept after every try to reap them (another delete or read asks again).",
            st.reaps_given_up.into(),
        ),
        (
            "tictacaae_root_compare_total",
            "Anti-entropy exchanges that ended at the trees' roots (in sync).",
            st.aae.root_compare.into(),
        ),
        (
            "tictacaae_branch_compare_total",
            "Anti-entropy exchanges that ended at the branches (in sync).",
            st.aae.branch_compare.into(),
        ),
        (
            "tictacaae_clock_compare_total",
            "Anti-entropy exchanges that compared keys' clocks.",
            st.aae.clock_compare.into(),
        ),
        (
            "tictacaae_not_supported_total",
            "Anti-entropy exchanges a replica could not take part in (its trees not built).",
            st.aae.not_supported.into(),
        ),
        (
            "tictacaae_error_total",
            "Anti-entropy exchanges that failed (a replica unreachable or too slow).",
            st.aae.error.into(),
        ),
        (
            "tictacaae_exchange_total",
            "Keys anti-entropy exchanges found different (each read to repair it).",
            st.aae.exchange_deltas.into(),
        ),
        ("tictacaae_rebuilds_total", "Builds of a vnode's anti-entropy trees.", st.aae.rebuilds.into()),
        (
            "tictacaae_exchanges_running",
            "Anti-entropy exchanges running now.",
            st.aae.exchanges_running.into(),
        ),
        (
            "tictacaae_trees_built",
            "Vnodes whose anti-entropy trees are built.",
            st.aae.trees_built.into(),
        ),
        (
            "tictacaae_trees_unbuilt",
            "Vnodes whose anti-entropy trees are not built yet.",
            st.aae.trees_unbuilt.into(),
        ),
    ];
    if let Some(sensors) = &ctx.sensors {
        let s = sensors.engine().stats();
        let x = sensors.exchange_stats();
        out.extend([
            ("sensor_samples_written_total", "Sensor samples taken.", s.samples_written.into()),
            (
                "sensor_samples_too_old_total",
                "Sensor samples dropped: older than their database's storage period.",
                s.samples_too_old.into(),
            ),
            (
                "sensor_samples_too_new_total",
                "Sensor samples refused: too far ahead of the clock.",
                s.samples_too_new.into(),
            ),
            (
                "sensor_samples_bad_series_total",
                "Sensor samples refused: their series keys too long.",
                s.samples_bad_series.into(),
            ),
            (
                "sensor_writes_refused_total",
                "Sensor writes that failed (a full disk, stores behind), nothing of them acknowledged.",
                s.writes_refused.into(),
            ),
            ("sensor_blocks_stored_total", "Sensor data blocks stored.", s.blocks_stored.into()),
            (
                "sensor_block_bytes_stored_total",
                "Bytes of the sensor data blocks stored (keys and values).",
                s.block_bytes_stored.into(),
            ),
            (
                "sensor_blocks_expired_unstored_total",
                "Sensor data blocks whose storage period ended before they could be stored.",
                s.blocks_expired_unstored.into(),
            ),
            ("sensor_series", "Sensor series known.", s.series.into()),
            (
                "sensor_homes_handed_off_total",
                "Home partitions of sensor data this node held without owning them, sent to their owners and dropped.",
                s.homes_dropped.into(),
            ),
            ("sensor_databases", "Sensor databases.", s.databases.into()),
            (
                "sensor_aae_rounds_total",
                "Sensor anti-entropy rounds done: every home partition held and owned compared (or tried) once.",
                x.rounds.into(),
            ),
            (
                "sensor_aae_exchanges_total",
                "Sensor home partitions compared with another replica by anti-entropy.",
                x.exchanges.into(),
            ),
            (
                "sensor_aae_slices_differing_total",
                "Slices of time (an hour) anti-entropy found different on two replicas.",
                x.slices_differing.into(),
            ),
            (
                "sensor_aae_slices_busy_total",
                "Slices anti-entropy left for a later round: written within sensor.grace on either replica.",
                x.slices_busy.into(),
            ),
            (
                "sensor_aae_repaired_samples_total",
                "Sensor samples anti-entropy wrote to a replica that lacked them (here or on the other side).",
                x.samples_repaired.into(),
            ),
            (
                "sensor_aae_failures_total",
                "Sensor anti-entropy exchanges that failed (tried again the next round).",
                x.failures.into(),
            ),
            (
                "sensor_samples_buffered",
                "Sensor samples in memory, not yet in stored blocks (they are in the log).",
                s.samples_buffered.into(),
            ),
            ("sensor_blocks_waiting", "Sensor blocks cut and waiting to be stored.", s.blocks_waiting.into()),
            ("sensor_log_segments", "Segments of the sensor data's log.", s.log_segments.into()),
            ("sensor_data_files", "Files of the sensor data's block stores.", s.storage.data_files.into()),
            ("sensor_merges_total", "Merges of the sensor data's block stores.", s.storage.merges.into()),
            (
                "sensor_files_deleted_unread_total",
                "Sensor data files deleted whole, unread, once their windows expired.",
                s.storage.files_deleted_unread.into(),
            ),
            (
                "sensor_merge_bytes_read_total",
                "Bytes merges of the sensor data's block stores read.",
                s.storage.merge_bytes_read.into(),
            ),
            (
                "sensor_merge_bytes_written_total",
                "Bytes merges of the sensor data's block stores wrote.",
                s.storage.merge_bytes_written.into(),
            ),
        ]);
    }
    if let Some(peer) = &ctx.peer {
        out.extend(
            peer.stats()
                .into_iter()
                .map(|(k, help, n)| (k, help, n.into())),
        );
    }
    out
}

fn stats_json(ctx: &Ctx) -> Value {
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
        "ring_members": [ctx.node.nodename()],
        "connected_nodes": [],
    });
    if let Value::Object(m) = &mut v {
        for (k, _, n) in numbers(ctx) {
            m.insert(k.into(), n);
        }
    }
    v
}

pub(crate) fn stats(ctx: &Arc<Ctx>) -> Response {
    json(StatusCode::OK, &stats_json(ctx))
}

/// Prometheus text exposition of the numeric stats, each with its HELP
/// and TYPE: `_total` names are counters, the others gauges; a name in
/// milliseconds is given in seconds, as Prometheus names its units
/// (`bitcask_throttle_delay_ms` is `rill_bitcask_throttle_delay_seconds`).
pub(crate) fn metrics(ctx: &Arc<Ctx>) -> Response {
    let mut out = String::new();
    for (k, help, v) in numbers(ctx) {
        let Some(mut n) = v.as_f64() else {
            continue;
        };
        let name = match k.strip_suffix("_ms") {
            Some(base) => {
                n /= 1000.0;
                format!("rill_{base}_seconds")
            }
            None => format!("rill_{k}"),
        };
        let help = help.replace("in milliseconds", "in seconds");
        let kind = if k.ends_with("_total") {
            "counter"
        } else {
            "gauge"
        };
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {n}\n"
        ));
    }
    let mut r = text(StatusCode::OK, out);
    r.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}
