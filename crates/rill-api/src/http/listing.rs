//! Listing: `/buckets?buckets=true|stream` and
//! `/buckets/B/keys?keys=true|stream`, whole or streamed.

use super::stream::stream_body;
use super::util::{json, kv_error, lossy as s, text};
use super::{Ctx, Req};
use crate::{blocking, type_name};
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

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
