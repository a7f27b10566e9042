//! `GET /buckets/B/index/FIELD/VALUE[/END]` (and under `/types/T`):
//! secondary index queries, whole or, with `stream=true`, as a
//! `multipart/mixed` body sent while the vnodes are read, so an answer
//! of any size goes out with bounded memory.

use super::stream::{stream_body, JsonParts};
use super::util::{json, kv_error, lossy as s, text};
use super::{Ctx, Req};
use crate::blocking;
use axum::http::StatusCode;
use axum::response::Response;
use rill_node::{IndexHit, IndexRequest, IndexSpec, KvError};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// Riak's JSON for some results: `results` pairs when terms are shown,
/// else `keys`.
fn body_of(results: &[IndexHit]) -> Value {
    if results.iter().any(|(t, _)| t.is_some()) {
        json!({"results": results.iter().map(|(t, k)| {
            let mut m = Map::new();
            m.insert(s(t.as_deref().unwrap_or_default()), Value::from(s(k)));
            Value::Object(m)
        }).collect::<Vec<_>>()})
    } else {
        json!({"keys": results.iter().map(|(_, k)| Value::from(s(k))).collect::<Vec<_>>()})
    }
}

fn refused(t: &[u8], e: KvError) -> Response {
    match e {
        KvError::NoType => text(
            StatusCode::NOT_FOUND,
            format!("Unknown bucket type: {}\n", s(t)),
        ),
        e => kv_error(e),
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn index(
    ctx: &Arc<Ctx>,
    req: &Req,
    t: &[u8],
    b: &[u8],
    index: &[u8],
    lo: &[u8],
    hi: Option<&[u8]>,
) -> Response {
    let q = &req.query;
    let max_results = match q.get("max_results").map(|v| v.parse::<u32>()) {
        None => None,
        Some(Ok(m)) => Some(m),
        Some(Err(_)) => {
            return text(
                StatusCode::BAD_REQUEST,
                "max_results must be a positive integer\n",
            )
        }
    };
    let ir = IndexRequest {
        bucket_type: t.to_vec(),
        bucket: b.to_vec(),
        index: index.to_vec(),
        spec: match hi {
            None => IndexSpec::Eq(lo.to_vec()),
            Some(hi) => IndexSpec::Range(lo.to_vec(), hi.to_vec()),
        },
        return_terms: q.get("return_terms").is_some_and(|v| v == "true"),
        max_results,
        continuation: q.get("continuation").map(|c| c.as_bytes().to_vec()),
        term_regex: q.get("term_regex").map(|c| c.as_bytes().to_vec()),
    };
    let node = ctx.node.clone();
    if q.get("stream").is_none_or(|v| v != "true") {
        return match blocking(move || node.index_query(&ir)).await {
            Ok(answer) => {
                let mut v = body_of(&answer.results);
                if let Some(c) = &answer.continuation {
                    v["continuation"] = Value::from(s(c));
                }
                json(StatusCode::OK, &v)
            }
            Err(e) => refused(t, e),
        };
    }
    // Checked before the first part, so a bad query gets a plain error.
    let plan = match node.index_plan(&ir) {
        Ok(p) => p,
        Err(e) => return refused(t, e),
    };
    let parts = JsonParts::new();
    let p = parts.clone();
    let stream = stream_body(move |tx| {
        let r = node.index_stream(&plan, &mut |batch| {
            tx.blocking_send(Ok(p.part(&body_of(&batch).to_string())))
                .is_ok()
        });
        let last = match r {
            Ok(Some(c)) => Some(json!({"continuation": s(&c)})),
            Ok(None) => None,
            Err(e) => Some(json!({"error": e.to_string()})),
        };
        if let Some(v) = last {
            let _ = tx.blocking_send(Ok(p.part(&v.to_string())));
        }
        let _ = tx.blocking_send(Ok(p.end()));
    });
    parts.response(axum::body::Body::from_stream(stream))
}
