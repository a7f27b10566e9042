//! Exports of the sensor-data service, as VictoriaMetrics exports:
//! `GET /api/v1/export` (JSON lines, one per series) and
//! `GET /api/v1/export/csv?format=...` (one row per sample), both with
//! `match[]` series selectors and `start`/`end` in Unix seconds. On a
//! node alone both are streamed, a series at a time, so an export of a
//! year holds one series' samples in memory, not the whole answer; in a
//! cluster the series are asked of every node and merged first (each
//! sample once, to the ms), then written.

use super::prom::{param, params};
use super::sensor::{sensors, Flavour};
use super::stream::stream_body;
use super::util::text;
use super::{Ctx, Req};
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use rill_sensor::{Sample, Series};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::sync::Arc;

/// Why an export's arguments are refused (a 400, the text its body).
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(
        "missing `format` arg: the columns, such as format=__name__,__value__,__timestamp__:unix_s"
    )]
    MissingFormat,
    #[error("unsupported time format {given:?}: unix_s, unix_ms, unix_ns or rfc3339")]
    UnsupportedTimeFormat { given: String },
    #[error("an empty column in `format`")]
    EmptyColumn,
    #[error("missing match[] (a series selector such as cpu_usage{{host=\"a\"}})")]
    MissingMatch,
    #[error("invalid parameter \"match[]\": {0}")]
    Selector(#[from] rill_promql::ParseError),
    /// A bad `extra_label`.
    #[error("{0}")]
    Extra(String),
    #[error("cannot parse time {given:?}: give Unix seconds, such as 1700000000 or 1700000000.5")]
    BadTime { given: String },
    #[error("cannot parse time {given:?}")]
    TimeNotFinite { given: String },
}

/// A column of a CSV export.
#[derive(Clone, Debug, PartialEq)]
pub enum Col {
    Name,
    Value,
    Time(TimeFormat),
    Label(String),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TimeFormat {
    UnixS,
    UnixMs,
    UnixNs,
    Rfc3339,
}

/// VictoriaMetrics' `format`: `__name__`, `__value__`,
/// `__timestamp__[:unix_s|unix_ms|unix_ns|rfc3339]` (ms when bare) and
/// label names, comma-separated.
pub fn parse_format(f: &str) -> Result<Vec<Col>, ExportError> {
    if f.trim().is_empty() {
        return Err(ExportError::MissingFormat);
    }
    f.split(',')
        .map(|c| {
            let c = c.trim();
            Ok(match c {
                "__name__" => Col::Name,
                "__value__" => Col::Value,
                "__timestamp__" | "__timestamp__:unix_ms" => Col::Time(TimeFormat::UnixMs),
                "__timestamp__:unix_s" => Col::Time(TimeFormat::UnixS),
                "__timestamp__:unix_ns" => Col::Time(TimeFormat::UnixNs),
                "__timestamp__:rfc3339" => Col::Time(TimeFormat::Rfc3339),
                t if t.starts_with("__timestamp__:") => {
                    return Err(ExportError::UnsupportedTimeFormat {
                        given: t["__timestamp__:".len()..].to_string(),
                    })
                }
                "" => return Err(ExportError::EmptyColumn),
                label => Col::Label(label.to_string()),
            })
        })
        .collect()
}

/// A field, quoted (with backslash escapes, as VictoriaMetrics quotes)
/// when it holds a comma, a quote or a line break.
fn field(out: &mut String, s: &str) {
    if !s.contains([',', '"', '\n', '\r']) {
        out.push_str(s);
        return;
    }
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The rows of one series' samples.
pub fn csv_rows(out: &mut String, cols: &[Col], s: &Series, samples: &[Sample]) {
    for x in samples {
        for (i, c) in cols.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            match c {
                Col::Name => field(out, &s.name),
                Col::Value => super::num::push_num(out, x.value),
                Col::Time(f) => {
                    let ms = x.ts.div_euclid(1_000_000);
                    let _ = match f {
                        TimeFormat::UnixS => write!(out, "{}", x.ts.div_euclid(1_000_000_000)),
                        TimeFormat::UnixMs => write!(out, "{ms}"),
                        TimeFormat::UnixNs => write!(out, "{}", ms.saturating_mul(1_000_000)),
                        TimeFormat::Rfc3339 => {
                            out.push_str(&super::util::rfc3339(x.ts.div_euclid(1_000_000_000)));
                            Ok(())
                        }
                    };
                }
                Col::Label(l) => field(out, s.label(l).unwrap_or("")),
            }
        }
        out.push('\n');
    }
}

/// One series as a JSON line.
/// The series `matchers` select (any of the sets) with their readings
/// from `start` to `end` ns, from every node, merged, in key order (stale
/// markers left out, as below).
fn from_cluster(
    sensors: &rill_sensor_cluster::SensorCluster,
    matchers: &[Vec<rill_promql::Matcher>],
    start: i64,
    end: i64,
    now: i64,
) -> Result<Vec<(Series, Vec<Sample>)>, String> {
    let (mint, maxt) = (start.div_euclid(1_000_000), end.div_euclid(1_000_000));
    let mut all = rill_sensor_cluster::merge::Merged::default();
    for m in matchers {
        let got = sensors.select(m, mint, maxt, now)?;
        if let Some(why) = got.partial {
            tracing::warn!(why, "a sensor export may lack samples");
        }
        all.add_series(got.series);
    }
    Ok(all
        .into_series()
        .into_iter()
        .map(|s| {
            let series = Series::new(
                s.labels.value("__name__"),
                s.labels
                    .iter()
                    .filter(|(n, _)| *n != "__name__")
                    .map(|(n, v)| (n.to_string(), v.to_string()))
                    .collect(),
            );
            let samples: Vec<Sample> = s
                .points
                .iter()
                .filter(|p| p.v.to_bits() != rill_sensor::remote_write::STALE_NAN)
                .map(|p| Sample {
                    ts: p.t.saturating_mul(1_000_000),
                    value: p.v,
                })
                .collect();
            (series, samples)
        })
        .filter(|(_, v)| !v.is_empty())
        .collect())
}

fn json_line(out: &mut String, s: &Series, samples: &[Sample]) {
    let mut metric = serde_json::Map::new();
    metric.insert("__name__".into(), json!(s.name));
    for (k, v) in &s.labels {
        metric.insert(k.clone(), json!(v));
    }
    let values: Vec<Value> = samples.iter().map(|x| json!(x.value)).collect();
    let timestamps: Vec<i64> = samples.iter().map(|x| x.ts.div_euclid(1_000_000)).collect();
    out.push_str(
        &json!({ "metric": metric, "values": values, "timestamps": timestamps }).to_string(),
    );
    out.push('\n');
}

/// A time of the exports: Unix seconds, with a fraction or not.
fn time_param(v: Option<&str>, default: i64) -> Result<i64, ExportError> {
    let Some(v) = v else {
        return Ok(default);
    };
    let secs: f64 = v.parse().map_err(|_| ExportError::BadTime {
        given: v.to_string(),
    })?;
    if !secs.is_finite() {
        return Err(ExportError::TimeNotFinite {
            given: v.to_string(),
        });
    }
    Ok((secs * 1e9).clamp(i64::MIN as f64, i64::MAX as f64) as i64)
}

/// `GET /api/v1/export` (`csv` false) or `/api/v1/export/csv`.
pub(crate) async fn export(ctx: &Arc<Ctx>, req: &Req, csv: bool) -> Response {
    let sensors = match sensors(ctx, Flavour::V1) {
        Ok(e) => e,
        Err(r) => return r,
    };
    let bad = |e: ExportError| text(StatusCode::BAD_REQUEST, format!("{e}\n"));
    // As the query API reads its arguments (a POST form too).
    let p = params(req);
    let cols = if csv {
        match parse_format(param(&p, "format").unwrap_or("")) {
            Ok(c) => Some(c),
            Err(e) => return bad(e),
        }
    } else {
        None
    };
    let selectors: Vec<&str> = p
        .iter()
        .filter(|(k, _)| k == "match[]")
        .map(|(_, v)| v.as_str())
        .collect();
    if selectors.is_empty() {
        return bad(ExportError::MissingMatch);
    }
    // `db=` and `extra_label=` narrow each selector, as they narrow
    // queries.
    let extra = match super::prom::extra_matchers(&p) {
        Ok(m) => m,
        Err(e) => return bad(ExportError::Extra(e.to_string())),
    };
    let mut matchers = Vec::new();
    for s in selectors {
        match rill_promql::parse_selector(s) {
            Ok(mut m) => {
                m.extend(extra.iter().cloned());
                matchers.push(m);
            }
            Err(e) => return bad(e.into()),
        }
    }
    let now = crate::unix_now_ns();
    let (start, end) = match (
        time_param(param(&p, "start"), i64::MIN),
        time_param(param(&p, "end"), now),
    ) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return bad(e),
    };
    let stream = stream_body(move |tx| {
        if !sensors.alone() {
            let cluster = match from_cluster(&sensors, &matchers, start, end, now) {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(error = %e, "a sensor export failed");
                    let _ = tx.blocking_send(Err(std::io::Error::other(e)));
                    return;
                }
            };
            let mut out = String::new();
            for (s, samples) in cluster {
                match &cols {
                    Some(cols) => csv_rows(&mut out, cols, &s, &samples),
                    None => json_line(&mut out, &s, &samples),
                }
            }
            if !out.is_empty() {
                let _ = tx.blocking_send(Ok(out.into()));
            }
            return;
        }
        let engine = sensors.engine();
        let mut chosen: Vec<(String, Series)> =
            matchers.iter().flat_map(|m| engine.select(m)).collect();
        chosen.sort_by_cached_key(|(db, s)| (db.clone(), s.key()));
        chosen.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
        let mut out = String::new();
        for (db, s) in chosen {
            let samples = match engine.read(&db, &s.key(), start, end, now) {
                // Prometheus' stale markers end a series for queries; an
                // export, as VictoriaMetrics', holds readings only.
                Ok(mut v) => {
                    v.retain(|x| x.value.to_bits() != rill_sensor::remote_write::STALE_NAN);
                    v
                }
                Err(e) => {
                    // The status is sent: the body ends with an error, so
                    // the client sees a broken answer, not a short one.
                    tracing::error!(error = %e, "a sensor export failed");
                    let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
                    return;
                }
            };
            match &cols {
                Some(cols) => csv_rows(&mut out, cols, &s, &samples),
                None if samples.is_empty() => {}
                None => json_line(&mut out, &s, &samples),
            }
            if out.len() >= 64 << 10 {
                let chunk = std::mem::take(&mut out);
                if tx.blocking_send(Ok(chunk.into())).is_err() {
                    return; // the client went away
                }
            }
        }
        if !out.is_empty() {
            let _ = tx.blocking_send(Ok(out.into()));
        }
    });
    let mut r = Response::new(Body::from_stream(stream));
    let kind = if csv {
        "text/csv"
    } else {
        "application/stream+json"
    };
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static(kind));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_as_victoriametrics_writes_it() {
        let cols =
            parse_format("__timestamp__:rfc3339,__timestamp__:unix_s,a,b,__name__,__value__,zz")
                .unwrap();
        let s = Series::new(
            "q_v",
            vec![
                ("a".into(), "say\"hi\"".into()),
                ("b".into(), "new line".into()),
            ],
        );
        let mut out = String::new();
        let ts = 1_795_805_378_123_000_000;
        csv_rows(&mut out, &cols, &s, &[Sample { ts, value: 2.25 }]);
        assert_eq!(
            out,
            "2026-11-27T18:49:38Z,1795805378,\"say\\\"hi\\\"\",new line,q_v,2.25,\n"
        );
        let mut out = String::new();
        let cols = parse_format("__timestamp__,__value__,__timestamp__:unix_ns").unwrap();
        csv_rows(&mut out, &cols, &s, &[Sample { ts, value: 1e21 }]);
        assert_eq!(
            out,
            "1795805378123,1000000000000000000000,1795805378123000000\n"
        );
        assert!(parse_format("")
            .unwrap_err()
            .to_string()
            .contains("missing `format`"));
        assert!(parse_format("__timestamp__:custom:2006,__value__")
            .unwrap_err()
            .to_string()
            .contains("unsupported time format"));
        let mut out = String::new();
        field(&mut out, "x,y");
        assert_eq!(out, "\"x,y\"");
    }
}
