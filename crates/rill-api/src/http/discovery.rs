//! `GET /`: the resources this node serves, as Riak's discovery answer
//! lists them.

use super::util::json;
use super::Req;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value};

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
