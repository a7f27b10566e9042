//! Everything over HTTP but objects: discovery, stats, properties, bucket
//! types, listing, 2i, preflists, and Rill's admin routes.

use super::util::{empty, json, kv_error, lossy as s, text};
use super::{Ctx, Req};
use crate::{blocking, type_name};
use axum::body::Body;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::Response;
use rill_node::{KvError, Props, TypeStatus};
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The resources this node serves, as Riak's `GET /` lists them (JSON
/// with `Accept: application/json`, else an HTML list).
const RESOURCES: &[(&str, &str)] = &[
    ("riak_kv_wm_bucket_type", "/types"),
    ("riak_kv_wm_buckets", "/buckets"),
    ("riak_kv_wm_counter", "/buckets"),
    ("riak_kv_wm_index", "/buckets"),
    ("riak_kv_wm_keylist", "/buckets"),
    ("riak_kv_wm_object", "/buckets"),
    ("riak_kv_wm_ping", "/ping"),
    ("riak_kv_wm_preflist", "/buckets"),
    ("riak_kv_wm_props", "/buckets"),
    ("riak_kv_wm_stats", "/stats"),
];

pub(crate) fn resources(req: &Req) -> Response {
    let wants_json = req
        .headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json"));
    let links: Vec<String> = RESOURCES
        .iter()
        .map(|(_, p)| format!("<{p}>; rel=\"res\""))
        .collect();
    let mut r = if wants_json {
        let mut m = Map::new();
        for (name, path) in RESOURCES {
            m.insert((*name).into(), Value::from(*path));
        }
        json(StatusCode::OK, &Value::Object(m))
    } else {
        let items: String = RESOURCES
            .iter()
            .map(|(n, p)| format!("<li><a href=\"{p}\">{n}</a></li>"))
            .collect();
        let mut r = Response::new(Body::from(format!(
            "<html><body><ul>{items}</ul></body></html>"
        )));
        r.headers_mut()
            .insert("content-type", HeaderValue::from_static("text/html"));
        r
    };
    if let Ok(v) = HeaderValue::from_str(&links.join(", ")) {
        r.headers_mut().insert("link", v);
    }
    r
}

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

fn props_body(req: &Req) -> Result<Props, Response> {
    let v: Value = serde_json::from_slice(&req.body)
        .map_err(|e| text(StatusCode::BAD_REQUEST, format!("invalid JSON: {e}\n")))?;
    match v.get("props") {
        Some(Value::Object(p)) => Ok(p.clone()),
        _ => Err(text(
            StatusCode::BAD_REQUEST,
            "expected {\"props\":{...}}\n",
        )),
    }
}

pub(crate) async fn type_props(ctx: &Arc<Ctx>, req: &Req, t: &[u8]) -> Response {
    let name = s(t);
    match req.method {
        Method::GET => match ctx.node.type_props(&name) {
            Ok(p) => json(StatusCode::OK, &json!({ "props": p })),
            Err(e) => kv_error(e),
        },
        Method::PUT | Method::POST => {
            let props = match props_body(req) {
                Ok(p) => p,
                Err(e) => return e,
            };
            let node = ctx.node.clone();
            match blocking(move || node.update_type(&name, &props)).await {
                Ok(()) => empty(StatusCode::NO_CONTENT),
                Err(e) => kv_error(e),
            }
        }
        _ => text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"),
    }
}

pub(crate) async fn bucket_props(ctx: &Arc<Ctx>, req: &Req, t: &[u8], b: &[u8]) -> Response {
    let t = type_name(t);
    let b = b.to_vec();
    let node = ctx.node.clone();
    match req.method {
        Method::GET => match node.bucket_props(&t, &b) {
            Ok(p) => json(StatusCode::OK, &json!({ "props": p })),
            Err(e) => kv_error(e),
        },
        Method::PUT | Method::POST => {
            let props = match props_body(req) {
                Ok(p) => p,
                Err(e) => return e,
            };
            match blocking(move || node.set_bucket_props(&t, &b, &props)).await {
                Ok(()) => empty(StatusCode::NO_CONTENT),
                Err(e) => kv_error(e),
            }
        }
        Method::DELETE => match blocking(move || node.reset_bucket_props(&t, &b)).await {
            Ok(()) => empty(StatusCode::NO_CONTENT),
            Err(e) => kv_error(e),
        },
        _ => text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"),
    }
}

fn timeout(req: &Req) -> Result<Option<Duration>, Response> {
    match req.query.get("timeout") {
        None => Ok(None),
        Some(v) => match v.parse::<u64>() {
            Ok(0) => Ok(None),
            Ok(ms) => Ok(Some(Duration::from_millis(ms))),
            Err(_) => Err(text(
                StatusCode::BAD_REQUEST,
                format!("Bad timeout value {v:?}\n"),
            )),
        },
    }
}

fn strings(v: &[Vec<u8>]) -> Vec<Value> {
    v.iter().map(|b| Value::from(s(b))).collect()
}

/// `?buckets=true|stream` (or `keys`) and `timeout` of a listing: whether
/// to stream, and the time limit.
fn listing_params(req: &Req, what: &str) -> Result<(bool, Option<Duration>), Response> {
    let stream = match req.query.get(what).map(String::as_str) {
        Some("true") => false,
        Some("stream") => true,
        _ => {
            return Err(text(
                StatusCode::BAD_REQUEST,
                format!("list {what} with ?{what}=true or ?{what}=stream\n"),
            ))
        }
    };
    Ok((stream, timeout(req)?))
}

pub(crate) async fn list_buckets(ctx: &Arc<Ctx>, req: &Req, t: &[u8]) -> Response {
    let (stream, to) = match listing_params(req, "buckets") {
        Ok(p) => p,
        Err(e) => return e,
    };
    let t = type_name(t).into_bytes();
    let node = ctx.node.clone();
    match blocking(move || node.list_buckets(&t, to)).await {
        Ok(b) if stream => {
            let body = format!(
                "{}{}",
                json!({"buckets": strings(&b)}),
                json!({"buckets": []})
            );
            let mut r = Response::new(Body::from(body));
            r.headers_mut()
                .insert("content-type", HeaderValue::from_static("application/json"));
            r
        }
        Ok(b) => json(StatusCode::OK, &json!({"buckets": strings(&b)})),
        Err(e) => kv_error(e),
    }
}

pub(crate) async fn list_keys(ctx: &Arc<Ctx>, req: &Req, t: &[u8], b: &[u8]) -> Response {
    let (stream, to) = match listing_params(req, "keys") {
        Ok(p) => p,
        Err(e) => return e,
    };
    let (t, b) = (type_name(t).into_bytes(), b.to_vec());
    let node = ctx.node.clone();
    if !stream {
        let r = blocking(move || {
            let mut keys = Vec::new();
            node.list_keys(&t, &b, to, &mut |batch| {
                keys.extend(batch);
                true
            })
            .map(|()| keys)
        })
        .await;
        return match r {
            Ok(keys) => json(StatusCode::OK, &json!({"keys": strings(&keys)})),
            Err(e) => kv_error(e),
        };
    }
    // Streamed: one JSON object per batch, an error object on failure.
    let stream = stream_body(move |tx| {
        let r = node.list_keys(&t, &b, to, &mut |batch| {
            let chunk = json!({"keys": strings(&batch)}).to_string();
            tx.blocking_send(Ok(chunk.into())).is_ok()
        });
        let last = match r {
            Ok(()) => json!({"keys": []}),
            Err(e) => json!({"error": e.to_string()}),
        };
        let _ = tx.blocking_send(Ok(last.to_string().into()));
    });
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    r
}

pub(crate) fn preflist(ctx: &Arc<Ctx>, t: &[u8], b: &[u8], k: &[u8]) -> Response {
    let props = match ctx.node.bucket_props(&type_name(t), b) {
        Ok(p) => p,
        Err(e) => return kv_error(e),
    };
    let n = props.get("n_val").and_then(Value::as_u64).unwrap_or(3) as u32;
    let t = if t == b"default" { &b""[..] } else { t };
    let list: Vec<Value> = ctx
        .node
        .preflist(t, b, k, n)
        .into_iter()
        .map(|e| json!({"partition": e.partition.0, "node": e.node, "primary": e.primary}))
        .collect();
    json(StatusCode::OK, &json!({ "preflist": list }))
}

// ---- Rill's admin routes: bucket types (Riak does this with riak-admin).

fn status_name(st: TypeStatus) -> &'static str {
    match st {
        TypeStatus::Created => "created",
        TypeStatus::Active => "active",
    }
}

pub(crate) fn admin_list_types(ctx: &Arc<Ctx>) -> Response {
    let types: Vec<Value> = ctx
        .node
        .list_types()
        .into_iter()
        .map(|(n, st)| json!({"name": n, "status": status_name(st)}))
        .collect();
    json(StatusCode::OK, &json!({ "types": types }))
}

/// GET: a type's status and properties; PUT: create it from
/// `{"props":{...}}`.
pub(crate) async fn admin_type(ctx: &Arc<Ctx>, req: &Req, t: &[u8]) -> Response {
    let name = s(t);
    match req.method {
        Method::GET => match ctx.node.type_status(&name) {
            Some((props, st)) => json(
                StatusCode::OK,
                &json!({"name": name, "status": status_name(st), "props": props}),
            ),
            None => text(
                StatusCode::NOT_FOUND,
                format!("{name} is not an existing bucket type\n"),
            ),
        },
        Method::PUT | Method::POST => {
            let props = if req.body.is_empty() {
                Props::new()
            } else {
                match props_body(req) {
                    Ok(p) => p,
                    Err(e) => return e,
                }
            };
            let node = ctx.node.clone();
            match blocking(move || node.create_type(&name, &props)).await {
                Ok(()) => empty(StatusCode::CREATED),
                Err(e) => text(StatusCode::BAD_REQUEST, format!("{e}\n")),
            }
        }
        _ => text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"),
    }
}

pub(crate) async fn admin_activate(ctx: &Arc<Ctx>, req: &Req, t: &[u8]) -> Response {
    if req.method != Method::POST {
        return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    let name = s(t);
    let node = ctx.node.clone();
    match blocking(move || node.activate_type(&name)).await {
        Ok(()) => empty(StatusCode::NO_CONTENT),
        Err(KvError::NoSuchType(n)) => text(
            StatusCode::NOT_FOUND,
            format!("{n} is not an existing bucket type\n"),
        ),
        Err(e) => text(StatusCode::BAD_REQUEST, format!("{e}\n")),
    }
}

/// A streamed `multipart/mixed` body of JSON parts (Riak's streamed 2i
/// and chunked MapReduce answers).
#[derive(Clone)]
pub(crate) struct JsonParts {
    boundary: String,
}

impl JsonParts {
    pub(crate) fn new() -> JsonParts {
        JsonParts {
            boundary: rill_node::ids_boundary(),
        }
    }

    pub(crate) fn part(&self, json: &str) -> axum::body::Bytes {
        format!(
            "\r\n--{}\r\nContent-Type: application/json\r\n\r\n{json}",
            self.boundary
        )
        .into()
    }

    pub(crate) fn end(&self) -> axum::body::Bytes {
        format!("\r\n--{}--\r\n", self.boundary).into()
    }

    /// The response whose body carries these parts.
    pub(crate) fn response(&self, body: axum::body::Body) -> Response {
        let mut r = Response::new(body);
        if let Ok(v) =
            HeaderValue::from_str(&format!("multipart/mixed; boundary={}", self.boundary))
        {
            r.headers_mut().insert("content-type", v);
        }
        r
    }
}

/// Body chunks from a channel, for streamed answers.
pub(crate) struct ChunkStream(
    pub tokio::sync::mpsc::Receiver<Result<axum::body::Bytes, std::io::Error>>,
);

/// Runs `produce` off the async threads, feeding a streamed body. A
/// producer that panics ends the body with an error, so the client sees
/// a broken response instead of a clean, truncated one.
pub(crate) fn stream_body(
    produce: impl FnOnce(&tokio::sync::mpsc::Sender<Result<axum::body::Bytes, std::io::Error>>)
        + Send
        + 'static,
) -> ChunkStream {
    struct Guard {
        tx: tokio::sync::mpsc::Sender<Result<axum::body::Bytes, std::io::Error>>,
        finished: bool,
    }
    impl Drop for Guard {
        fn drop(&mut self) {
            if !self.finished {
                tracing::error!("a streamed response ended early");
                let _ = self
                    .tx
                    .blocking_send(Err(std::io::Error::other("the stream ended early")));
            }
        }
    }
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::task::spawn_blocking(move || {
        let mut guard = Guard {
            tx,
            finished: false,
        };
        produce(&guard.tx);
        guard.finished = true;
    });
    ChunkStream(rx)
}

impl futures_core::Stream for ChunkStream {
    type Item = Result<axum::body::Bytes, std::io::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

/// `POST /rill/cluster`: an operator's cluster command (JSON, see
/// `rill_peer::Peer::admin`), answered as JSON `{"ok", "text"}`.
pub(crate) async fn admin_cluster(ctx: &Arc<Ctx>, req: &Req) -> Response {
    let Some(peer) = &ctx.peer else {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "this node runs without its cluster runtime\n",
        );
    };
    let Ok(body) = std::str::from_utf8(&req.body) else {
        return text(StatusCode::BAD_REQUEST, "the command is not UTF-8\n");
    };
    let a = peer.admin(body).await;
    let body = serde_json::json!({"ok": a.ok, "text": a.text}).to_string();
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("a valid response")
}
