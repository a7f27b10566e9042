//! The sensor-data service over HTTP (docs/sensors.md): InfluxDB's write
//! APIs (1.x `/write`, 2.x `/api/v2/write`) answering as InfluxDB
//! answers, the part of InfluxQL clients send before they write
//! (`/query`: `CREATE DATABASE`, `SHOW DATABASES`), Prometheus remote
//! write 1.0 (`/api/v1/write`), and VictoriaMetrics' export of series as
//! JSON lines (`/api/v1/export`).

use super::util::{empty, json_text, parse_query};
use super::{Ctx, Req};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::Response;
use rill_sensor::Precision;
use rill_sensor_cluster::WriteError;
use rill_tsdb::{EngineError, WriteReport};
use serde_json::{json, Value};
use std::io::Read;
use std::sync::Arc;

/// Which InfluxDB API a write came by: how it answers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavour {
    /// 1.x: `{"error": ...}`, partial writes 400.
    V1,
    /// 2.x: `{"code": ..., "message": ...}`, a bad line fails the whole
    /// request, partial writes 422.
    V2,
}

fn error(flavour: Flavour, status: StatusCode, message: &str) -> Response {
    let body = match flavour {
        Flavour::V1 => json!({ "error": message }).to_string() + "\n",
        Flavour::V2 => {
            let code = match status.as_u16() {
                400 => "invalid",
                404 => "not found",
                405 => "method not allowed",
                413 => "request too large",
                422 => "unprocessable entity",
                503 => "unavailable",
                _ => "internal error",
            };
            json!({ "code": code, "message": message }).to_string()
        }
    };
    json_text(status, body)
}

/// 503 with `Retry-After`: the client should send the same write again.
fn busy(flavour: Flavour, message: &str) -> Response {
    let mut r = error(flavour, StatusCode::SERVICE_UNAVAILABLE, message);
    r.headers_mut()
        .insert("retry-after", HeaderValue::from_static("1"));
    r
}

/// This node's sensor engine (what it holds of the cluster's data).
pub(crate) fn engine(ctx: &Ctx, flavour: Flavour) -> Result<Arc<rill_tsdb::Engine>, Response> {
    sensors(ctx, flavour).map(|s| s.engine().clone())
}

/// The sensor-data service (writes placed on the cluster's ring).
pub(crate) fn sensors(
    ctx: &Ctx,
    flavour: Flavour,
) -> Result<Arc<rill_sensor_cluster::SensorCluster>, Response> {
    ctx.sensors.clone().ok_or_else(|| {
        error(
            flavour,
            StatusCode::NOT_FOUND,
            "the sensor-data service is not running on this node (sensor = off, or it could not start: see the node's log)",
        )
    })
}

/// The body, gunzipped if sent so, at most `max` bytes.
fn body_text(req: &Req, flavour: Flavour, max: usize) -> Result<String, Response> {
    let too_large = || {
        error(
            flavour,
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("Request Entity Too Large: the body is larger than {max} bytes"),
        )
    };
    let encoding = req
        .headers
        .get("content-encoding")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let bytes = match encoding.trim().to_ascii_lowercase().as_str() {
        "gzip" | "x-gzip" => {
            let mut out = Vec::new();
            let mut d = flate2::read::GzDecoder::new(&req.body[..]).take(max as u64 + 1);
            d.read_to_end(&mut out)
                .map_err(|e| error(flavour, StatusCode::BAD_REQUEST, &format!("gzip: {e}")))?;
            out
        }
        "" | "identity" => req.body.to_vec(),
        other => {
            return Err(error(
                flavour,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                &format!("Content-Encoding {other:?} is not supported (send gzip or nothing)"),
            ))
        }
    };
    if bytes.len() > max {
        return Err(too_large());
    }
    String::from_utf8(bytes)
        .map_err(|_| error(flavour, StatusCode::BAD_REQUEST, "the body is not UTF-8"))
}

/// The largest write body, decompressed (InfluxDB 1.x's default).
const MAX_WRITE_BODY: usize = 25_000_000;

/// `POST /write?db=D&precision=P` (1.x) or `POST
/// /api/v2/write?bucket=B&org=O&precision=P` (2.x; `bucket` may be
/// `db/rp`, the retention policy ignored).
pub(crate) async fn write(ctx: &Arc<Ctx>, req: &Req, flavour: Flavour) -> Response {
    match write_inner(ctx, req, flavour).await {
        Ok(r) | Err(r) => r,
    }
}

async fn write_inner(ctx: &Arc<Ctx>, req: &Req, flavour: Flavour) -> Result<Response, Response> {
    let engine = sensors(ctx, flavour)?;
    if req.method == Method::OPTIONS {
        return Ok(empty(StatusCode::NO_CONTENT));
    }
    if req.method != Method::POST {
        return Err(error(
            flavour,
            StatusCode::METHOD_NOT_ALLOWED,
            "write with POST",
        ));
    }
    let name = match flavour {
        Flavour::V1 => "db",
        Flavour::V2 => "bucket",
    };
    let given = req.query.get(name).map(String::as_str).unwrap_or("");
    // A 2.x bucket may be `db/rp` (InfluxDB 1.8's reading of it).
    let db = match flavour {
        Flavour::V1 => given.to_string(),
        Flavour::V2 => given.split('/').next().unwrap_or("").to_string(),
    };
    if db.is_empty() {
        return Err(match flavour {
            Flavour::V1 => error(flavour, StatusCode::BAD_REQUEST, "database is required"),
            Flavour::V2 => error(flavour, StatusCode::NOT_FOUND, "bucket not found"),
        });
    }
    let p = req.query.get("precision").map(String::as_str);
    let precision = match flavour {
        Flavour::V2 if !matches!(p, None | Some("ns" | "us" | "ms" | "s")) => {
            Err("invalid precision; valid precision units are ns, us, ms, and s".to_string())
        }
        _ => Precision::parse(p).map_err(|e| e.to_string()),
    }
    .map_err(|e| error(flavour, StatusCode::BAD_REQUEST, &e))?;
    let text = body_text(req, flavour, MAX_WRITE_BODY)?;
    let now = crate::unix_now_ns();
    let batch = rill_tsdb::ingest::line_protocol(&text, &db, precision, now);
    // 2.x writes nothing of a request with a line that does not parse;
    // 1.x writes the rest, unless nothing parsed.
    let all_bad = batch.points == 0 && batch.rejected.is_empty();
    if (all_bad || flavour == Flavour::V2) && !batch.errors.is_empty() {
        return Err(error(
            flavour,
            StatusCode::BAD_REQUEST,
            &batch.errors.join("\n"),
        ));
    }
    let (report, batch) = if batch.series.is_empty() {
        (WriteReport::default(), batch)
    } else {
        let (written, batch) = crate::blocking(move || {
            let written = engine.write_grouped(&db, &batch.series, &batch.groups(), now);
            (written, batch)
        })
        .await;
        (written.map_err(|e| write_error(flavour, e))?, batch)
    };
    let mut problems: Vec<String> = batch
        .errors
        .into_iter()
        .map(|e| format!("{e} dropped=0"))
        .collect();
    if !batch.rejected.is_empty() {
        problems.push(format!(
            "{} dropped={}",
            batch.rejected.join("\n"),
            batch.rejected.len()
        ));
    }
    for (n, what) in [
        (report.too_old, "points beyond retention policy"),
        (
            report.too_new,
            "points more than two days ahead of the server's clock",
        ),
        (report.bad_series, "series keys longer than 65536 bytes"),
    ] {
        if n > 0 {
            problems.push(format!("{what} dropped={n}"));
        }
    }
    if problems.is_empty() {
        return Ok(empty(StatusCode::NO_CONTENT));
    }
    let message = format!("partial write: {}", problems.join("\n"));
    Err(match flavour {
        Flavour::V1 => error(flavour, StatusCode::BAD_REQUEST, &message),
        Flavour::V2 => error(
            flavour,
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("failure writing points to database: {message}"),
        ),
    })
}

fn write_error(flavour: Flavour, e: WriteError) -> Response {
    match e {
        WriteError::Invalid(m) => error(flavour, StatusCode::BAD_REQUEST, &m),
        // A full disk, stores not keeping up, replicas out of reach:
        // nothing was acknowledged, the same write may be sent again.
        WriteError::Busy(why) => {
            tracing::warn!(error = %why, "a sensor write was refused; the client may retry");
            busy(flavour, &why)
        }
        other => {
            tracing::error!(error = %other, "a sensor write failed");
            error(
                flavour,
                StatusCode::INTERNAL_SERVER_ERROR,
                &other.to_string(),
            )
        }
    }
}

/// Database of remote-written series when the request names none.
const REMOTE_WRITE_DB: &str = "prometheus";

/// `POST /api/v1/write[?db=D]`: Prometheus remote write 1.0, into
/// database D (its series labelled `db="D"`) or `prometheus` (no label).
/// As its
/// specification asks: 204 when every sample was taken, 400 (not to be
/// retried) naming what was refused after taking the rest, 5xx with
/// `Retry-After` to be retried, 415 for an encoding or a version other
/// than Snappy and 1.0.
pub(crate) async fn remote_write(ctx: &Arc<Ctx>, req: &Req) -> Response {
    let plain = |status: StatusCode, m: String| super::util::text(status, m + "\n");
    let Some(engine) = ctx.sensors.clone() else {
        return plain(StatusCode::NOT_FOUND, "the sensor-data service is not running on this node (sensor = off, or it could not start: see the node's log)".into());
    };
    if req.method != Method::POST {
        return plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "remote write is a POST".into(),
        );
    }
    let header = |n: &str| {
        req.headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    let encoding = header("content-encoding").trim().to_ascii_lowercase();
    if !matches!(encoding.as_str(), "" | "snappy") {
        return plain(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Encoding {encoding:?}: remote write bodies are Snappy (block format)"),
        );
    }
    if header("content-type").contains("io.prometheus.write.v2") {
        return plain(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "remote write 2.0 is not taken: send 1.0 (prometheus.WriteRequest)".into(),
        );
    }
    let named = req.query.get("db").filter(|d| !d.is_empty()).cloned();
    let db = named.clone().unwrap_or_else(|| REMOTE_WRITE_DB.to_string());
    let decoded = match rill_sensor::remote_write::decode(&req.body, 4 * MAX_WRITE_BODY) {
        Ok(d) => d,
        Err(e @ rill_sensor::remote_write::RemoteWriteError::TooLarge(_)) => {
            return plain(StatusCode::PAYLOAD_TOO_LARGE, e.to_string())
        }
        Err(e) => return plain(StatusCode::BAD_REQUEST, e.to_string()),
    };
    // A database named in the request is the series' label `db` too (as
    // a line protocol write's is), so two sources writing one series to
    // two databases stay two series in queries.
    let series: Vec<(String, Vec<rill_sensor::Sample>)> = decoded
        .series
        .into_iter()
        .map(|(s, samples)| match &named {
            Some(d) if s.label(rill_sensor::series::DB_LABEL).is_none() => {
                let mut labels = s.labels;
                labels.push((rill_sensor::series::DB_LABEL.to_string(), d.clone()));
                (rill_sensor::Series::new(s.name, labels).key(), samples)
            }
            _ => (s.key(), samples),
        })
        .collect();
    let now = crate::unix_now_ns();
    let report = if series.is_empty() {
        WriteReport::default()
    } else {
        match crate::blocking(move || engine.write_grouped(&db, &series, &[], now)).await {
            Ok(r) => r,
            Err(e) => {
                let mut r = write_error(Flavour::V1, e);
                // Remote write's senders read the body as text.
                r.headers_mut()
                    .insert("content-type", HeaderValue::from_static("text/plain"));
                return r;
            }
        }
    };
    let mut problems: Vec<String> = decoded.invalid.iter().map(ToString::to_string).collect();
    for (n, what) in [
        (report.too_old, "older than the database's storage period"),
        (
            report.too_new,
            "more than two days ahead of the server's clock",
        ),
        (
            report.bad_series,
            "of series whose key is longer than 65536 bytes",
        ),
    ] {
        if n > 0 {
            problems.push(format!("{n} samples {what} were dropped"));
        }
    }
    if problems.is_empty() {
        return empty(StatusCode::NO_CONTENT);
    }
    plain(StatusCode::BAD_REQUEST, problems.join("\n"))
}

/// `GET|POST /query?q=...`: `CREATE DATABASE name` (what Telegraf sends
/// before it writes) and `SHOW DATABASES`; other InfluxQL is refused.
pub(crate) async fn query(ctx: &Arc<Ctx>, req: &Req) -> Response {
    let sensors = match sensors(ctx, Flavour::V1) {
        Ok(e) => e,
        Err(r) => return r,
    };
    let engine = sensors.engine().clone();
    let form = parse_query(&String::from_utf8_lossy(&req.body));
    let Some(q) = req.query.get("q").or_else(|| form.get("q")).cloned() else {
        return error(
            Flavour::V1,
            StatusCode::BAD_REQUEST,
            "missing required parameter \"q\"",
        );
    };
    let mut results = Vec::new();
    for (i, stmt) in q
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .enumerate()
    {
        let words: Vec<&str> = stmt.split_whitespace().collect();
        let upper: Vec<String> = words
            .iter()
            .take(2)
            .map(|w| w.to_ascii_uppercase())
            .collect();
        match upper.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            ["CREATE", "DATABASE"] if words.len() >= 3 => {
                let name = words[2].trim_matches('"').to_string();
                let engine = engine.clone();
                match crate::blocking(move || engine.create_database(&name)).await {
                    Ok(()) => {}
                    Err(EngineError::Invalid(m)) => {
                        return error(Flavour::V1, StatusCode::BAD_REQUEST, &m)
                    }
                    Err(e) => return write_error(Flavour::V1, e.into()),
                }
                results.push(json!({ "statement_id": i }));
            }
            ["SHOW", "DATABASES"] => {
                // Every node's: a database made through another is one
                // of the cluster's.
                let sensors = sensors.clone();
                let names = match crate::blocking(move || sensors.databases()).await {
                    Ok((names, _)) => names,
                    Err(e) => {
                        return error(Flavour::V1, StatusCode::INTERNAL_SERVER_ERROR, &e)
                    }
                };
                let names: Vec<Value> = names.into_iter().map(|n| json!([n])).collect();
                results.push(json!({
                    "statement_id": i,
                    "series": [{ "name": "databases", "columns": ["name"], "values": names }],
                }));
            }
            _ => {
                return error(
                    Flavour::V1,
                    StatusCode::BAD_REQUEST,
                    &format!("Rill answers only CREATE DATABASE and SHOW DATABASES of InfluxQL, not {stmt:?}; read samples with /api/v1/export"),
                )
            }
        }
    }
    json_text(StatusCode::OK, json!({ "results": results }).to_string())
}

/// The InfluxDB release whose HTTP API the node answers, as InfluxDB's
/// `/ping` names its own.
const INFLUXDB_VERSION: &str = "1.8.10";

/// `/ping`: Riak's answer to GET (`200 OK`, which Riak's clients expect),
/// InfluxDB's to HEAD (`204`); both with InfluxDB's version headers.
pub(crate) fn ping(req: &Req) -> Response {
    let mut r = if req.method == Method::HEAD {
        empty(StatusCode::NO_CONTENT)
    } else {
        super::util::text(StatusCode::OK, "OK")
    };
    let h = r.headers_mut();
    h.insert(
        "X-Influxdb-Version",
        HeaderValue::from_static(INFLUXDB_VERSION),
    );
    h.insert("X-Influxdb-Build", HeaderValue::from_static("OSS"));
    r
}

/// `/health`: InfluxDB 2.x's health check (`status` `pass` while the
/// sensor service runs, `fail` with `503` when it does not).
pub(crate) fn health(ctx: &Ctx) -> Response {
    let up = ctx.sensors.is_some();
    let body = serde_json::json!({
        "name": "rill",
        "message": if up {
            "ready for queries and writes"
        } else {
            "the sensor-data service is not running on this node"
        },
        "status": if up { "pass" } else { "fail" },
        "checks": [],
        "version": INFLUXDB_VERSION,
        "commit": format!("rill-{}", env!("CARGO_PKG_VERSION")),
    });
    let status = if up {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    super::util::json_text(status, body.to_string())
}
