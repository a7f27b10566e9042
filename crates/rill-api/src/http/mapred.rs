//! `POST /mapred`: a MapReduce job in JSON. The answer is one JSON array
//! of the kept phase's results (an array per kept phase, in order, when
//! two or more are kept; a phase with no results left out, as Riak
//! does); with `?chunked=true`, a `multipart/mixed` body with a part
//! `{"phase": N, "data": [...]}` per batch as the job runs. A refused
//! job is a 400 (text, or `{"phase": N, "error": ...}` for a phase Rill
//! does not run); a failed one a 500 with Riak's error object.

use super::other::{stream_body, JsonParts};
use super::util::text;
use super::{Ctx, Req};
use crate::mapred::{encode, job, start, Event};
use axum::body::Body;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::Response;
use rill_mapred::{JobError, RunError, Term};
use std::collections::BTreeMap;
use std::sync::Arc;

fn json_text(status: StatusCode, body: String) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    r
}

fn failed(e: &RunError) -> Response {
    json_text(StatusCode::INTERNAL_SERVER_ERROR, e.to_json())
}

pub(crate) async fn mapred(ctx: &Arc<Ctx>, req: &Req) -> Response {
    if req.method != Method::POST {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "MapReduce jobs are POSTed to /mapred\n",
        );
        r.headers_mut()
            .insert("allow", HeaderValue::from_static("POST"));
        return r;
    }
    let json_body = req
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().unwrap_or("").trim() == "application/json");
    if !json_body {
        return text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "MapReduce jobs are sent as Content-Type: application/json\n",
        );
    }
    let job = match job(&req.body) {
        Ok(j) => j,
        Err(JobError::Parse(m)) => return text(StatusCode::BAD_REQUEST, m),
        Err(JobError::Phase(phase, error)) => {
            let v = serde_json::json!({"phase": phase, "error": error});
            return json_text(StatusCode::BAD_REQUEST, v.to_string());
        }
    };
    let kept = job.phases.iter().filter(|p| p.keep).count();
    let mut events = start(ctx.node.clone(), job);
    if req.query.get("chunked").is_some_and(|v| v == "true") {
        return chunked(events);
    }
    let mut results: BTreeMap<usize, Vec<Term>> = BTreeMap::new();
    while let Some(e) = events.recv().await {
        match e {
            Event::Results(phase, items) => results.entry(phase).or_default().extend(items),
            Event::Done(Err(e)) => return failed(&e),
            Event::Done(Ok(())) => {
                let body = if kept < 2 {
                    let all: Vec<Term> = results.into_values().flatten().collect();
                    encode(0, &all)
                } else {
                    results
                        .iter()
                        .map(|(phase, items)| encode(*phase, items))
                        .collect::<Result<Vec<_>, _>>()
                        .map(|parts| format!("[{}]", parts.join(",")))
                };
                return match body {
                    Ok(b) => json_text(StatusCode::OK, b),
                    Err(e) => failed(&e),
                };
            }
        }
    }
    text(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal error: the job ended early; retry\n",
    )
}

/// The results as they come, a part per batch; a failure is a last part
/// holding Riak's error object (a client reading parts sees it), then the
/// closing boundary.
fn chunked(mut events: tokio::sync::mpsc::Receiver<Event>) -> Response {
    let parts = JsonParts::new();
    let p = parts.clone();
    let stream = stream_body(move |tx| {
        while let Some(e) = events.blocking_recv() {
            let (body, last) = match e {
                Event::Results(phase, items) => match encode(phase, &items) {
                    Ok(data) => (format!("{{\"phase\":{phase},\"data\":{data}}}"), false),
                    Err(e) => (e.to_json(), true),
                },
                Event::Done(Ok(())) => break,
                Event::Done(Err(e)) => (e.to_json(), true),
            };
            if tx.blocking_send(Ok(p.part(&body))).is_err() || last {
                break;
            }
        }
        let _ = tx.blocking_send(Ok(p.end()));
    });
    parts.response(stream)
}
