//! The sensor page the node serves (`/sensors`, docs/sensors.md): its
//! files (built into the binary; uPlot vendored from npm with its
//! license), and the two reads it makes: series by words
//! (`/rill/sensors/search`) and one series cut into a bucket per pixel
//! (`/rill/sensors/m4`).

use super::sensor::{engine, Flavour};
use super::util::{json, text};
use super::{Ctx, Req};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use rill_tsdb::engine::Buckets;
use serde_json::{json, Value};
use std::sync::Arc;

const FILES: [(&str, &str, &[u8]); 6] = [
    (
        "",
        "text/html; charset=utf-8",
        include_bytes!("../../assets/sensors.html"),
    ),
    (
        "sensors.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/sensors.js"),
    ),
    (
        "sensors.css",
        "text/css; charset=utf-8",
        include_bytes!("../../assets/sensors.css"),
    ),
    (
        "uplot.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/uplot/uPlot.iife.min.js"),
    ),
    (
        "uplot.min.css",
        "text/css; charset=utf-8",
        include_bytes!("../../assets/uplot/uPlot.min.css"),
    ),
    (
        "uplot-LICENSE.txt",
        "text/plain; charset=utf-8",
        include_bytes!("../../assets/uplot/LICENSE"),
    ),
];

/// `GET /sensors` and `/sensors/FILE`.
pub(crate) fn file(name: &[u8]) -> Response {
    match FILES.iter().find(|(n, _, _)| n.as_bytes() == name) {
        Some((_, kind, body)) => {
            let mut r = Response::new(axum::body::Body::from(*body));
            r.headers_mut()
                .insert("content-type", HeaderValue::from_static(kind));
            r.headers_mut()
                .insert("cache-control", HeaderValue::from_static("no-cache"));
            r
        }
        None => text(StatusCode::NOT_FOUND, "no such file of the sensor page\n"),
    }
}

/// Pixels a chart may ask for.
const MAX_WIDTH: usize = 10_000;

/// `GET /rill/sensors/search?q=WORDS&offset=K&limit=N`: `{"series":
/// [keys], "offset": K, "total": T}`, the series whose keys hold every
/// word (every series when there is none), a page of at most N (50 by
/// default, at most 1,000) from the K-th, and how many there are.
pub(crate) async fn search(ctx: &Arc<Ctx>, req: &Req) -> Response {
    let engine = match engine(ctx, Flavour::V1) {
        Ok(e) => e,
        Err(r) => return r,
    };
    let q = req.query.get("q").cloned().unwrap_or_default();
    let number = |name: &str| req.query.get(name).and_then(|l| l.parse::<usize>().ok());
    let limit = number("limit").unwrap_or(50).clamp(1, 1000);
    let offset = number("offset").unwrap_or(0);
    let (keys, total) = crate::blocking(move || {
        let words: Vec<&str> = q.split_whitespace().collect();
        engine.search(&words, offset, limit)
    })
    .await;
    json(
        StatusCode::OK,
        &json!({ "series": keys, "offset": offset, "total": total }),
    )
}

/// A time parameter of the sensor page that is missing or not a time.
#[derive(Debug, thiserror::Error)]
enum TimeParamError {
    #[error("missing {name} (ms since the epoch)")]
    Missing { name: &'static str },
    /// Not a number, or not a finite one.
    #[error("{name} must be ms since the epoch, found {given:?}")]
    NotMs { name: &'static str, given: String },
}

fn ms_param(req: &Req, name: &'static str) -> Result<i64, TimeParamError> {
    let v = req
        .query
        .get(name)
        .ok_or(TimeParamError::Missing { name })?;
    let not_ms = || TimeParamError::NotMs {
        name,
        given: v.clone(),
    };
    let ms: f64 = v.parse().map_err(|_| not_ms())?;
    if !ms.is_finite() {
        return Err(not_ms());
    }
    Ok((ms * 1e6).clamp(i64::MIN as f64, i64::MAX as f64) as i64)
}

/// The points to draw: one per bucket with samples, at the middle of its
/// samples' times (ns), and a gap (`None`) between two whose samples are
/// further apart than twice a bucket and three times the series' usual
/// spacing (the median distance between neighbouring buckets' samples),
/// so a line breaks where data is missing, not between pixels.
pub(crate) fn points(b: &Buckets) -> Vec<(i64, Option<rill_tsdb::engine::Bucket>)> {
    let full: Vec<&rill_tsdb::engine::Bucket> = b.buckets.iter().flatten().collect();
    let mut spacing: Vec<i64> = full
        .windows(2)
        .map(|w| w[1].first.0 - w[0].last.0)
        .collect();
    spacing.sort_unstable();
    let usual = spacing.get(spacing.len() / 2).copied().unwrap_or(0);
    let gap = b.step.saturating_mul(2).max(usual.saturating_mul(3));
    let mut out = Vec::with_capacity(full.len() + 8);
    for (i, x) in full.iter().enumerate() {
        if i > 0 && x.first.0 - full[i - 1].last.0 > gap {
            out.push((full[i - 1].last.0 / 2 + x.first.0 / 2, None));
        }
        out.push((x.first.0 / 2 + x.last.0 / 2, Some(**x)));
    }
    out
}

/// `GET /rill/sensors/m4?series=KEY&start=MS&end=MS&width=PX`: the series
/// in `width` buckets, as columns to draw ([`points`]): `t` (Unix
/// seconds), `min`, `max`, `first`, `last` (null at a gap), and what the
/// read did.
pub(crate) async fn m4(ctx: &Arc<Ctx>, req: &Req) -> Response {
    let engine = match engine(ctx, Flavour::V1) {
        Ok(e) => e,
        Err(r) => return r,
    };
    let bad = |m: String| text(StatusCode::BAD_REQUEST, m + "\n");
    let Some(key) = req.query.get("series").cloned().filter(|k| !k.is_empty()) else {
        return bad("missing series (a series key, as the search gives it)".into());
    };
    let (start, end) = match (ms_param(req, "start"), ms_param(req, "end")) {
        (Ok(s), Ok(e)) if e > s => (s, e),
        (Ok(_), Ok(_)) => return bad("end must be after start".into()),
        (Err(e), _) | (_, Err(e)) => return bad(e.to_string()),
    };
    let width = match req.query.get("width").map(|w| w.parse::<usize>()) {
        None => 1000,
        Some(Ok(w)) if (1..=MAX_WIDTH).contains(&w) => w,
        Some(_) => return bad(format!("width must be 1 to {MAX_WIDTH} pixels")),
    };
    let now = crate::unix_now_ns();
    let read = crate::blocking(move || -> Result<Option<Buckets>, rill_tsdb::EngineError> {
        let mut all: Option<Buckets> = None;
        for db in engine.databases_with(&key) {
            let b = engine.read_buckets(&db, &key, start, end, width, now)?;
            match &mut all {
                Some(a) => a.merge(&b),
                None => all = Some(b),
            }
        }
        Ok(all)
    })
    .await;
    let b = match read {
        Ok(Some(b)) => b,
        Ok(None) => return text(StatusCode::NOT_FOUND, "no such series\n"),
        Err(e) => {
            tracing::error!(error = %e, "a sensor page read failed");
            let why = match e {
                rill_tsdb::EngineError::Damaged { .. } => e.to_string(),
                _ => "the series could not be read (the node's log says why)".to_string(),
            };
            return text(StatusCode::INTERNAL_SERVER_ERROR, why + "\n");
        }
    };
    let pts = points(&b);
    let col = |f: &dyn Fn(&rill_tsdb::engine::Bucket) -> f64| -> Vec<Value> {
        pts.iter()
            .map(|p| p.1.as_ref().map_or(Value::Null, |x| json!(f(x))))
            .collect()
    };
    let t: Vec<f64> = pts.iter().map(|p| p.0 as f64 / 1e9).collect();
    let gaps = pts.iter().filter(|p| p.1.is_none()).count();
    json(
        StatusCode::OK,
        &json!({
            "t": t,
            "min": col(&|x| x.min),
            "max": col(&|x| x.max),
            "first": col(&|x| x.first.1),
            "last": col(&|x| x.last.1),
            "step_ms": b.step as f64 / 1e6,
            "gaps": gaps,
            "samples": b.samples,
            "blocks_from_headers": b.from_headers,
            "blocks_decoded": b.decoded,
        }),
    )
}
