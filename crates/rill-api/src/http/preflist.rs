//! `GET /buckets/B/keys/K/preflist`: the vnodes that hold a key, each
//! labelled primary or fallback.

use super::util::{json, kv_error};
use super::Ctx;
use crate::type_name;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};
use std::sync::Arc;

pub(crate) fn preflist(ctx: &Arc<Ctx>, t: &[u8], b: &[u8], k: &[u8]) -> Response {
    let props = match ctx.node.buckets().bucket_props(&type_name(t), b) {
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
