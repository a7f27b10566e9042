//! `POST /mapred`: a MapReduce job in JSON. The answer is one JSON array
//! of the kept phase's results (an array per kept phase, in order, when
//! two or more are kept; a phase with no results left out, as Riak
//! does); with `?chunked=true`, a `multipart/mixed` body with a part
//! `{"phase": N, "data": [...]}` per batch as the job runs. A refused
//! job is a 400 (text, or `{"phase": N, "error": ...}` for a phase Rill
//! does not run); a failed one a 500 with Riak's error object; one
//! beyond the node's running jobs a 503 with `Retry-After`.

use super::stream::JsonParts;
use super::util::{json, json_text, text};
use super::{Ctx, Req};
use crate::mapred::{admit, encode, encode_whole, start, Event, Refused, RunError};
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::Response;
use rill_mapred::{JobError, Term};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use tokio::sync::mpsc;

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
    let (job, slot) = match admit(req.body.clone()).await {
        Ok(j) => j,
        Err(Refused::Job(JobError::Phase(phase, error))) => {
            let v = serde_json::json!({"phase": phase, "error": error});
            return json(StatusCode::BAD_REQUEST, &v);
        }
        // Not a job, or its key filters refused: the reason as text.
        Err(Refused::Job(e)) => return text(StatusCode::BAD_REQUEST, e.to_string()),
        Err(e @ Refused::Busy) => {
            let mut r = text(StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n"));
            r.headers_mut()
                .insert("retry-after", HeaderValue::from_static("1"));
            return r;
        }
    };
    let kept = job.phases.iter().filter(|p| p.keep).count();
    let mut events = start(ctx.node.clone(), job, slot);
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
                    let phase = results.keys().next().copied().unwrap_or(0);
                    let all: Vec<Term> = results.into_values().flatten().collect();
                    encode_whole(phase, &all)
                } else {
                    results
                        .iter()
                        .map(|(phase, items)| encode_whole(*phase, items))
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
/// closing boundary. Read from the job's channel on the async threads: a
/// slow client holds no thread.
fn chunked(events: mpsc::Receiver<Event>) -> Response {
    struct Parts {
        events: mpsc::Receiver<Event>,
        parts: JsonParts,
        pending: VecDeque<Bytes>,
        ended: bool,
    }
    impl futures_core::Stream for Parts {
        type Item = Result<Bytes, std::io::Error>;

        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            use std::task::Poll;
            loop {
                if let Some(b) = self.pending.pop_front() {
                    return Poll::Ready(Some(Ok(b)));
                }
                if self.ended {
                    return Poll::Ready(None);
                }
                let e = match self.events.poll_recv(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(e) => e,
                };
                let bodies = match e {
                    Some(Event::Results(phase, items)) => match encode(phase, &items) {
                        Ok(parts) => parts
                            .iter()
                            .map(|data| format!("{{\"phase\":{phase},\"data\":{data}}}"))
                            .collect(),
                        Err(e) => {
                            self.ended = true;
                            vec![e.to_json()]
                        }
                    },
                    Some(Event::Done(Ok(()))) => {
                        self.ended = true;
                        Vec::new()
                    }
                    Some(Event::Done(Err(e))) => {
                        self.ended = true;
                        vec![e.to_json()]
                    }
                    None => {
                        self.ended = true;
                        vec![r#"{"error":"internal error: the job ended early; retry"}"#.to_string()]
                    }
                };
                for b in bodies {
                    let part = self.parts.part(&b);
                    self.pending.push_back(part);
                }
                if self.ended {
                    let end = self.parts.end();
                    self.pending.push_back(end);
                    // The job stops once nothing listens.
                    self.events.close();
                }
            }
        }
    }
    let parts = JsonParts::new();
    let body = Parts {
        events,
        parts: parts.clone(),
        pending: VecDeque::new(),
        ended: false,
    };
    parts.response(Body::from_stream(body))
}
