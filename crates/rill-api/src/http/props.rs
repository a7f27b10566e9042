//! Bucket and bucket-type properties: `/types/T/props`,
//! `/buckets/B/props` and the old `/riak/B`.

use super::util::{empty, json, kv_error, lossy as s, text};
use super::{Ctx, Req};
use crate::{blocking, type_name};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use rill_node::Props;
use serde_json::{json, Value};
use std::sync::Arc;

pub(super) fn props_body(req: &Req) -> Result<Props, Response> {
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
        Method::GET => match ctx.node.buckets().type_props(&name) {
            Ok(p) => json(StatusCode::OK, &json!({ "props": p })),
            Err(e) => kv_error(e),
        },
        Method::PUT | Method::POST => {
            let props = match props_body(req) {
                Ok(p) => p,
                Err(e) => return e,
            };
            let node = ctx.node.clone();
            match blocking(move || node.buckets().update_type(&name, &props)).await {
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
        Method::GET => match node.buckets().bucket_props(&t, &b) {
            Ok(p) => json(StatusCode::OK, &json!({ "props": p })),
            Err(e) => kv_error(e),
        },
        Method::PUT | Method::POST => {
            let props = match props_body(req) {
                Ok(p) => p,
                Err(e) => return e,
            };
            match blocking(move || node.buckets().set_bucket_props(&t, &b, &props)).await {
                Ok(()) => empty(StatusCode::NO_CONTENT),
                Err(e) => kv_error(e),
            }
        }
        Method::DELETE => match blocking(move || node.buckets().reset_bucket_props(&t, &b)).await {
            Ok(()) => empty(StatusCode::NO_CONTENT),
            Err(e) => kv_error(e),
        },
        _ => text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"),
    }
}
