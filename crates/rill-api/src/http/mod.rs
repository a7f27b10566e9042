//! Riak's HTTP API (Riak KV documentation, "HTTP API") on a node. Routing is by
//! hand: Riak's paths (`/buckets/B/keys/K`, `/types/T/buckets/B/...`,
//! `/riak/B/K`) carry percent-encoded names where `+` means a space, as
//! Riak's webmachine decodes them.

// Handlers return `Result<_, Response>`: the error is the answer to send.
#![allow(clippy::result_large_err)]

mod bucket_types;
mod cluster;
mod discovery;
mod dt;
mod export;
mod index;
pub mod lenient;
mod listing;
mod mapred;
mod migrate;
mod num;
mod object;
mod page;
mod preflist;
mod prom;
mod props;
mod query_thread;
mod sensor;
mod stats;
mod stream;
mod tictacaae;
pub mod util;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::response::Response;
use rill_node::Node;
use std::sync::Arc;
use tokio::net::TcpListener;
use util::{decode_segment, parse_query, text, Query};

/// The largest request body accepted (a value plus headroom).
pub const MAX_BODY_BYTES: usize = 64 << 20;

pub(crate) struct Ctx {
    pub node: Arc<Node>,
    pub pb_stats: Arc<crate::pb::PbStats>,
    /// The cluster runtime, for `rill admin cluster ...`.
    pub peer: Option<Arc<rill_peer::Peer>>,
    /// The sensor-data service (`None`: `sensor = off`).
    pub sensors: Option<Arc<rill_sensor_cluster::SensorCluster>>,
}

/// The object parsers (links, metadata, indexes, vclock) on arbitrary
/// headers and body; see `crate::fuzzing`.
pub(crate) fn fuzz_object_headers(h: &HeaderMap, body: &[u8]) {
    object::fuzz(h, body);
}

/// Serves HTTP until the listener fails.
pub async fn serve(
    listener: TcpListener,
    node: Arc<Node>,
    pb_stats: Arc<crate::pb::PbStats>,
    peer: Option<Arc<rill_peer::Peer>>,
    sensors: Option<Arc<rill_sensor_cluster::SensorCluster>>,
) -> std::io::Result<()> {
    let ctx = Arc::new(Ctx {
        node,
        pb_stats,
        peer,
        sensors,
    });
    let app = axum::Router::new().fallback(dispatch).with_state(ctx);
    axum::serve(lenient::Listener(listener), app).await
}

/// One request as the handlers see it.
pub(crate) struct Req {
    pub method: Method,
    pub headers: HeaderMap,
    pub query: Query,
    /// The query string as sent (repeated names such as `match[]`).
    pub raw_query: String,
    pub body: Bytes,
}

async fn dispatch(State(ctx): State<Arc<Ctx>>, request: Request<Body>) -> Response {
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            return text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body larger than {MAX_BODY_BYTES} bytes\n"),
            )
        }
    };
    let raw_path = parts.uri.path().to_string();
    let raw_query = parts.uri.query().unwrap_or("").to_string();
    let query = parse_query(&raw_query);
    let segments: Result<Vec<Vec<u8>>, _> = raw_path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(decode_segment)
        .collect();
    let segments = match segments {
        Ok(s) => s,
        Err(e) => return text(StatusCode::BAD_REQUEST, format!("{e}\n")),
    };
    let req = Req {
        method: parts.method,
        headers: parts.headers,
        query,
        raw_query,
        body,
    };
    let segs: Vec<&[u8]> = segments.iter().map(|s| s.as_slice()).collect();
    route(&ctx, &req, &segs).await
}

async fn route(ctx: &Arc<Ctx>, req: &Req, segs: &[&[u8]]) -> Response {
    // /types/T/... is the same as /... with bucket type T.
    let (btype, rest): (Vec<u8>, &[&[u8]]) = match segs {
        [b"types", t, rest @ ..] if !rest.is_empty() && rest[0] == b"buckets" => (t.to_vec(), rest),
        _ => (Vec::new(), segs),
    };
    match rest {
        [] => discovery::resources(req),
        [b"ping"] => sensor::ping(req),
        [b"health"] => sensor::health(ctx),
        [b"stats"] => stats::stats(ctx),
        [b"metrics"] => stats::metrics(ctx),
        [b"types", t, b"props"] => props::type_props(ctx, req, t).await,
        [b"sensors"] => page::file(b""),
        [b"sensors", name] => page::file(name),
        [b"rill", b"sensors", b"search"] => page::search(ctx, req).await,
        [b"rill", b"sensors", b"m4"] => page::m4(ctx, req).await,
        [b"rill", b"bucket-types"] => bucket_types::admin_list_types(ctx),
        [b"rill", b"backend-migration"] => migrate::backend_migration(ctx, req).await,
        [b"rill", b"tictacaae"] => tictacaae::tictacaae(ctx, req).await,
        [b"rill", b"cluster"] if req.method == Method::POST => {
            cluster::admin_cluster(ctx, req).await
        }
        [b"rill", b"bucket-types", t] => bucket_types::admin_type(ctx, req, t).await,
        [b"rill", b"bucket-types", t, b"activate"] => {
            bucket_types::admin_activate(ctx, req, t).await
        }
        [b"buckets"] => listing::list_buckets(ctx, req, &btype).await,
        [b"buckets", b, b"props"] => props::bucket_props(ctx, req, &btype, b).await,
        [b"buckets", b, b"keys"] if req.method == Method::POST => {
            object::store(ctx, req, &btype, b, None).await
        }
        [b"buckets", b, b"keys"] => listing::list_keys(ctx, req, &btype, b).await,
        [b"buckets", b, b"keys", k] => object::object(ctx, req, &btype, b, k).await,
        [b"buckets", b, b"keys", k, b"preflist"] => preflist::preflist(ctx, &btype, b, k),
        [b"buckets", b, b"index", index, value] => {
            index::index(ctx, req, &btype, b, index, value, None).await
        }
        [b"buckets", b, b"index", index, lo, hi] => {
            index::index(ctx, req, &btype, b, index, lo, Some(hi)).await
        }
        [b"buckets", b, b"datatypes"] => dt::datatype(ctx, req, &btype, b, None).await,
        [b"buckets", b, b"datatypes", k] => dt::datatype(ctx, req, &btype, b, Some(k)).await,
        [b"buckets", b, b"counters", k] => dt::counter(ctx, req, b, k).await,
        [b"riak", b] => props::bucket_props(ctx, req, b"", b).await,
        [b"riak", b, k] => object::object(ctx, req, b"", b, k).await,
        [b"mapred"] => mapred::mapred(ctx, req).await,
        [b"write"] => sensor::write(ctx, req, sensor::Flavour::V1).await,
        [b"api", b"v2", b"write"] => sensor::write(ctx, req, sensor::Flavour::V2).await,
        [b"query"] => sensor::query(ctx, req).await,
        [b"api", b"v1", b"export"] => export::export(ctx, req, false).await,
        [b"api", b"v1", b"export", b"csv"] => export::export(ctx, req, true).await,
        [b"api", b"v1", b"write"] => sensor::remote_write(ctx, req).await,
        [b"api", b"v1", b"query"] => prom::query(ctx, req).await,
        [b"api", b"v1", b"query_range"] => prom::query_range(ctx, req).await,
        [b"api", b"v1", b"series"] => prom::series(ctx, req).await,
        [b"api", b"v1", b"labels"] => prom::labels(ctx, req, None).await,
        [b"api", b"v1", b"label", name, b"values"] => {
            prom::labels(ctx, req, Some(util::lossy(name))).await
        }
        [b"api", b"v1", b"status", b"buildinfo"] => prom::buildinfo(),
        [b"api", b"v1", b"metadata"] => prom::metadata(),
        [b"api", b"v1", b"format_query"] => prom::format_query(req),
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}
