//! The Prometheus HTTP API that Grafana's Prometheus data source uses,
//! answering as VictoriaMetrics 1.79 answers (docs/sensors.md,
//! "Queries"): `/api/v1/query` (instant; a number is a series without
//! labels, as VictoriaMetrics gives it), `/api/v1/query_range`,
//! `/api/v1/series`, `/api/v1/labels`, `/api/v1/label/NAME/values` and
//! `/api/v1/status/buildinfo`. Parameters come in the query string or a
//! form body; errors are 422 with `errorType` the status, as
//! VictoriaMetrics sends them.

use super::query_thread::answer;
use super::util::{json_text, percent_decode_lenient};
use super::{Ctx, Req};
use axum::http::StatusCode;
use axum::response::Response;
use rill_promql::eval::{self as peval, EvalError, Options};
use rill_promql::value::{Labels, Point, Series as PSeries, Value};
use rill_promql::{Expr, Matcher as PMatcher, ParseError};
use rill_sensor::Series;
use rill_sensor_cluster::{ClusterSource, SensorCluster};
use rill_tsdb::engine::ReadBudget;
use std::collections::BTreeSet;
use std::fmt::Write;
use std::sync::Arc;

/// Default step and look-back of a query, ms.
const DEFAULT_STEP_MS: i64 = 300_000;

/// A request's parameters, in order, repeated names kept.
type Params = Vec<(String, String)>;

/// Why a query is refused or failed, in Prometheus's words: a request
/// that cannot be read is `400 bad_data`, one that fails as it runs
/// `422 execution`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PromError {
    #[error("invalid parameter \"query\": missing `query`")]
    MissingQuery,
    #[error("missing `match[]` arg")]
    MissingMatch,
    #[error("invalid parameter \"{name}\": cannot parse {given:?} to a valid timestamp")]
    BadTime { name: &'static str, given: String },
    /// Not a duration, or not longer than zero.
    #[error("invalid parameter \"step\": cannot parse {given:?} to a valid duration")]
    BadStep { given: String },
    #[error("error parsing lookback delta duration: cannot parse {given:?} to a valid duration")]
    BadLookback { given: String },
    #[error("exceeded maximum resolution of {MAX_POINTS} points per timeseries. Try decreasing the query resolution (?step=XX)")]
    TooManyPoints,
    #[error("invalid parameter \"extra_label\": expected name=value, got {given:?}")]
    BadExtraLabel { given: String },
    #[error("invalid parameter \"query\": {0}")]
    Parse(#[from] ParseError),
    #[error("invalid parameter \"match[]\": {0}")]
    BadMatch(ParseError),
    #[error(transparent)]
    Eval(#[from] EvalError),
}

impl PromError {
    /// Prometheus's status and `errorType` for the error.
    fn kind(&self) -> (StatusCode, &'static str) {
        match self {
            PromError::Eval(_) => (StatusCode::UNPROCESSABLE_ENTITY, "execution"),
            _ => (StatusCode::BAD_REQUEST, "bad_data"),
        }
    }
}

/// Most points a range query gives a series (VictoriaMetrics'
/// `-search.maxPointsPerTimeseries`; Prometheus takes 11,000).
const MAX_POINTS: i64 = 30_000;

/// Every parameter, query string and form body together (repeated names
/// kept).
pub(crate) fn params(req: &Req) -> Params {
    let decode = |s: &str| {
        String::from_utf8_lossy(&percent_decode_lenient(&s.replace('+', " "))).into_owned()
    };
    let mut out = Vec::new();
    let form = req
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    let body = if form {
        String::from_utf8_lossy(&req.body).into_owned()
    } else {
        String::new()
    };
    // The form first, as Go's `FormValue` reads them.
    for part in body.split('&').chain(req.raw_query.split('&')) {
        if part.is_empty() {
            continue;
        }
        let (k, v) = part.split_once('=').unwrap_or((part, ""));
        out.push((decode(k), decode(v)));
    }
    out
}

/// The first value of `name`; `None` when missing or empty (an empty
/// value means the default, as in VictoriaMetrics).
pub(crate) fn param<'a>(p: &'a [(String, String)], name: &str) -> Option<&'a str> {
    p.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    json_text(
        status,
        serde_json::json!({"status": "error", "errorType": kind, "error": message}).to_string(),
    )
}

fn fail(e: &PromError) -> Response {
    let (status, kind) = e.kind();
    error(status, kind, &e.to_string())
}

fn success(data: &str) -> Response {
    json_text(
        StatusCode::OK,
        format!("{{\"status\":\"success\",\"data\":{data}}}"),
    )
}

/// A success's body; when some of the cluster did not answer and the
/// answer may lack samples, it says so as Prometheus does (`warnings`)
/// and as VictoriaMetrics does (`isPartial`).
fn success_body(data: &str, partial: Option<String>) -> String {
    match partial {
        None => format!("{{\"status\":\"success\",\"data\":{data}}}"),
        Some(why) => format!(
            "{{\"status\":\"success\",\"isPartial\":true,\"data\":{data},\"warnings\":[{}]}}",
            serde_json::Value::from(why)
        ),
    }
}

use super::num::{push_num, push_ts, put_num, put_ts};

fn ts(ms: i64) -> String {
    let mut s = String::new();
    push_ts(&mut s, ms);
    s
}

/// `{"__name__":"m","k":"v",...}`: the name first (left out when empty),
/// then the labels in order.
fn metric(s: &Series) -> String {
    let mut pairs: Vec<(&str, &str)> = Vec::with_capacity(s.labels.len() + 1);
    if !s.name.is_empty() {
        pairs.push(("__name__", &s.name));
    }
    pairs.extend(s.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    json_object(pairs.into_iter())
}

/// A query result's labels, the name first.
fn metric_of(l: &Labels) -> String {
    let name = l.get("__name__");
    json_object(
        name.map(|n| ("__name__", n))
            .into_iter()
            .chain(l.iter().filter(|(k, _)| *k != "__name__")),
    )
}

fn json_object<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let q = |x: &str| serde_json::Value::from(x).to_string();
    let mut out = String::from("{");
    for (i, (k, v)) in pairs.enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{}:{}", q(k), q(v));
    }
    out.push('}');
    out
}

/// A time: Unix seconds (a fraction allowed), RFC 3339, or a duration
/// before now (`5m` or `-5m`); ms.
fn time_ms(name: &'static str, v: &str, now: i64) -> Result<i64, PromError> {
    let t = v.trim();
    let bad = || PromError::BadTime {
        name,
        given: v.to_string(),
    };
    let ms = if let Ok(secs) = t.parse::<f64>() {
        if !secs.is_finite() {
            return Err(bad());
        }
        (secs * 1e3).round() as i64
    } else if let Some(ms) = rfc3339_ms(t) {
        ms
    } else {
        let d = rill_promql::parse_duration(t.strip_prefix('-').unwrap_or(t)).ok_or_else(bad)?;
        now - d
    };
    Ok(ms.clamp(-MAX_TIME_MS, MAX_TIME_MS))
}

/// The latest time a query may name (the end of i64 nanoseconds, 2262).
const MAX_TIME_MS: i64 = i64::MAX / 1_000_000;

/// `2006-01-02T15:04:05[.frac](Z|±hh:mm)`, ms since the epoch.
fn rfc3339_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d, h, mi, se) = (
        n(0..4)?,
        n(5..7)?,
        n(8..10)?,
        n(11..13)?,
        n(14..16)?,
        n(17..19)?,
    );
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut frac_ms = 0i64;
    if let Some(f) = rest.strip_prefix('.') {
        let digits = f.find(|c: char| !c.is_ascii_digit()).unwrap_or(f.len());
        let padded = format!("{:0<3}", &f[..digits.min(3)]);
        frac_ms = padded.parse().ok()?;
        rest = &f[digits..];
    }
    let offset_min = match rest {
        "Z" | "z" => 0,
        o if o.len() == 6
            && (o.starts_with('+') || o.starts_with('-'))
            && o.as_bytes()[3] == b':' =>
        {
            let sign = if o.starts_with('-') { -1 } else { 1 };
            sign * (o[1..3].parse::<i64>().ok()? * 60 + o[4..6].parse::<i64>().ok()?)
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + h * 3600 + mi * 60 + se - offset_min * 60) * 1000) + frac_ms)
}

/// A duration as Prometheus's API reads one, in ms: seconds (a fraction
/// allowed) or a duration such as `5m`.
fn duration_ms(s: &str) -> Option<i64> {
    match s.parse::<f64>() {
        // Go's time.Duration of the seconds: ns, truncated; then ms.
        Ok(secs) if secs.is_finite() && secs.abs() < 9.2e9 => Some((secs * 1e9) as i64 / 1_000_000),
        Ok(_) => None,
        Err(_) => rill_promql::parse_duration(s),
    }
}

/// A step: seconds (a fraction allowed) or a duration.
fn step_ms(p: &[(String, String)]) -> Result<i64, PromError> {
    let Some(s) = param(p, "step") else {
        return Ok(DEFAULT_STEP_MS);
    };
    match duration_ms(s) {
        Some(ms) if ms > 0 => Ok(ms),
        _ => Err(PromError::BadStep {
            given: s.to_string(),
        }),
    }
}

fn sensors(ctx: &Ctx) -> Result<Arc<SensorCluster>, Response> {
    ctx.sensors.clone().ok_or_else(|| {
        error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "execution",
            "the sensor-data service is not running on this node (sensor = off, or it could not start: see the node's log)",
        )
    })
}

/// The matchers `extra_label=name=value` (VictoriaMetrics' argument,
/// repeatable) and `db=D` (the label `db` of the database a write named)
/// add to every selector of the query.
pub(crate) fn extra_matchers(p: &[(String, String)]) -> Result<Vec<PMatcher>, PromError> {
    let mut out = Vec::new();
    for (k, v) in p {
        match k.as_str() {
            "extra_label" => {
                let (name, value) = v
                    .split_once('=')
                    .filter(|(n, _)| !n.is_empty())
                    .ok_or_else(|| PromError::BadExtraLabel { given: v.clone() })?;
                out.push(PMatcher::eq(name, value));
            }
            "db" if !v.is_empty() => out.push(PMatcher::eq("db", v)),
            _ => {}
        }
    }
    Ok(out)
}

/// What both query APIs start from, read in Prometheus's order (the
/// times, the lookback, then the query): the engine, what `times` reads
/// of the parameters at now (ms), now, the options and the query.
fn query_args<T>(
    ctx: &Ctx,
    req: &Req,
    times: impl FnOnce(&[(String, String)], i64) -> Result<T, PromError>,
) -> Result<(Arc<SensorCluster>, T, i64, Options, Expr), Response> {
    let engine = sensors(ctx)?;
    let p = params(req);
    let now = crate::unix_now_ns() / 1_000_000;
    let t = times(&p, now).map_err(|e| fail(&e))?;
    let opts = options(&p).map_err(|e| fail(&e))?;
    let q = param(&p, "query").ok_or_else(|| fail(&PromError::MissingQuery))?;
    let mut expr = rill_promql::parse(q).map_err(|e| fail(&PromError::from(e)))?;
    for m in extra_matchers(&p).map_err(|e| fail(&e))? {
        expr.add_matcher(&m);
    }
    Ok((engine, t, now, opts, expr))
}

/// How a query is evaluated: `lookback_delta` as Prometheus reads it
/// (seconds or a duration; not above zero, the default of 5m).
fn options(p: &[(String, String)]) -> Result<Options, PromError> {
    let mut o = Options::default();
    if let Some(s) = param(p, "lookback_delta").filter(|s| !s.is_empty()) {
        match duration_ms(s) {
            Some(d) if d <= rill_promql::MAX_DURATION_MS => {
                if d > 0 {
                    o.lookback_ms = d;
                }
            }
            _ => {
                return Err(PromError::BadLookback {
                    given: s.to_string(),
                })
            }
        }
    }
    Ok(o)
}

/// `/api/v1/query_range`.
pub(crate) async fn query_range(ctx: &Arc<Ctx>, req: &Req) -> Response {
    let times = |p: &[(String, String)], now: i64| -> Result<(i64, i64, i64), PromError> {
        let start = match param(p, "start") {
            Some(v) => time_ms("start", v, now)?,
            None => (now - DEFAULT_STEP_MS) / 1000 * 1000,
        };
        let mut end = match param(p, "end") {
            Some(v) => time_ms("end", v, now)?,
            None => now / 1000 * 1000,
        };
        if start > end {
            end = start.saturating_add(DEFAULT_STEP_MS);
        }
        let step = step_ms(p)?;
        if (end - start) / step + 1 > MAX_POINTS {
            return Err(PromError::TooManyPoints);
        }
        Ok((start, end, step))
    };
    let (engine, (start, end, step), now, opts, expr) = match query_args(ctx, req, times) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let run = move |budget: Option<&Arc<ReadBudget>>| -> Result<String, PromError> {
        let src = ClusterSource::new(&engine, now.saturating_mul(1_000_000), budget);
        let out = peval::range(&src, &expr, start, end, step, &opts)?;
        Ok(success_body(&matrix(&out), src.partial()))
    };
    match answer(run).await {
        Ok(body) => json_text(StatusCode::OK, body),
        Err(e) => fail(&e),
    }
}

/// `/api/v1/query`.
pub(crate) async fn query(ctx: &Arc<Ctx>, req: &Req) -> Response {
    let times = |p: &[(String, String)], now: i64| match param(p, "time") {
        Some(v) => time_ms("time", v, now),
        None => Ok(now),
    };
    let (engine, time, now, opts, expr) = match query_args(ctx, req, times) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let run = move |budget: Option<&Arc<ReadBudget>>| -> Result<String, PromError> {
        let src = ClusterSource::new(&engine, now.saturating_mul(1_000_000), budget);
        let data = match peval::instant(&src, &expr, time, &opts)? {
            Value::Scalar(Point { t, v }) => {
                let mut d = String::from("{\"resultType\":\"scalar\",\"result\":[");
                push_ts(&mut d, t);
                d.push_str(",\"");
                push_num(&mut d, v);
                d.push_str("\"]}");
                d
            }
            Value::String(text) => format!(
                "{{\"resultType\":\"string\",\"result\":[{},{}]}}",
                ts(time),
                serde_json::Value::from(text)
            ),
            Value::Vector(v) => {
                let mut d = String::from("{\"resultType\":\"vector\",\"result\":[");
                for (i, s) in v.iter().enumerate() {
                    if i > 0 {
                        d.push(',');
                    }
                    let _ = write!(d, "{{\"metric\":{},\"value\":[", metric_of(&s.labels));
                    push_ts(&mut d, time);
                    d.push_str(",\"");
                    push_num(&mut d, s.points.first().map_or(f64::NAN, |p| p.v));
                    d.push_str("\"]}");
                }
                d.push_str("]}");
                d
            }
            Value::Matrix(m) => matrix(&m),
        };
        Ok(success_body(&data, src.partial()))
    };
    match answer(run).await {
        Ok(body) => json_text(StatusCode::OK, body),
        Err(e) => fail(&e),
    }
}

/// A matrix answer: each series with its points (ms, value).
fn matrix(series: &[PSeries]) -> String {
    // Built as bytes (numbers written as ASCII digits), checked as text
    // once at the end.
    let points: usize = series.iter().map(|s| s.points.len()).sum();
    let mut data = Vec::with_capacity(4096 + points.saturating_mul(POINT_BYTES));
    data.extend_from_slice(b"{\"resultType\":\"matrix\",\"result\":[");
    for (i, s) in series.iter().enumerate() {
        if i > 0 {
            data.push(b',');
        }
        data.extend_from_slice(b"{\"metric\":");
        data.extend_from_slice(metric_of(&s.labels).as_bytes());
        data.extend_from_slice(b",\"values\":[");
        for (k, p) in s.points.iter().enumerate() {
            if k > 0 {
                data.push(b',');
            }
            data.push(b'[');
            put_ts(&mut data, p.t);
            data.extend_from_slice(b",\"");
            put_num(&mut data, p.v);
            data.extend_from_slice(b"\"]");
        }
        data.extend_from_slice(b"]}");
    }
    data.extend_from_slice(b"]}");
    String::from_utf8(data).expect("JSON text and ASCII numbers")
}

/// About what a point takes in an answer (`[1700000000,"21.37"],`).
const POINT_BYTES: usize = 24;

/// The series every `match[]` selects (all series when there is none and
/// `all` is set) on every node, with the matchers of `db=` and
/// `extra_label=` added to each, sorted, each once; and why the answer
/// may lack some, if it may.
fn selected(
    sensors: &SensorCluster,
    p: &[(String, String)],
    all: bool,
) -> Result<(Vec<Series>, Option<String>), PromError> {
    let mut sets = p
        .iter()
        .filter(|(k, _)| k == "match[]")
        .map(|(_, v)| rill_promql::parse_selector(v).map_err(PromError::BadMatch))
        .collect::<Result<Vec<_>, _>>()?;
    if sets.is_empty() {
        if !all {
            return Err(PromError::MissingMatch);
        }
        sets.push(Vec::new());
    }
    let extra = extra_matchers(p)?;
    for set in &mut sets {
        set.extend(extra.iter().cloned());
    }
    sensors
        .series(&sets)
        .map_err(|e| PromError::Eval(rill_promql::eval::EvalError::Source(e)))
}

/// `/api/v1/series?match[]=...` (every series the selectors pick; the
/// time range is not applied).
pub(crate) async fn series(ctx: &Arc<Ctx>, req: &Req) -> Response {
    let sensors = match sensors(ctx) {
        Ok(e) => e,
        Err(r) => return r,
    };
    let p = params(req);
    match crate::blocking(move || selected(&sensors, &p, false)).await {
        Ok((all, partial)) => {
            let items: Vec<String> = all.iter().map(metric).collect();
            json_text(
                StatusCode::OK,
                success_body(&format!("[{}]", items.join(",")), partial),
            )
        }
        Err(e) => fail(&e),
    }
}

/// `/api/v1/labels` and `/api/v1/label/NAME/values`.
pub(crate) async fn labels(ctx: &Arc<Ctx>, req: &Req, values_of: Option<String>) -> Response {
    let sensors = match sensors(ctx) {
        Ok(e) => e,
        Err(r) => return r,
    };
    let p = params(req);
    let run = move || -> Result<(BTreeSet<String>, Option<String>), PromError> {
        let (all, partial) = selected(&sensors, &p, true)?;
        let set = match &values_of {
            None => all
                .iter()
                .flat_map(|s| s.labels.iter().map(|(k, _)| k.clone()))
                .chain((!all.is_empty()).then(|| "__name__".to_string()))
                .collect(),
            Some(name) => all
                .iter()
                .filter_map(|s| s.label(name).map(str::to_string))
                .collect(),
        };
        Ok((set, partial))
    };
    match crate::blocking(run).await {
        Ok((set, partial)) => {
            let items: Vec<String> = set
                .iter()
                .map(|x| serde_json::Value::from(x.as_str()).to_string())
                .collect();
            json_text(
                StatusCode::OK,
                success_body(&format!("[{}]", items.join(",")), partial),
            )
        }
        Err(e) => fail(&e),
    }
}

/// The Prometheus release whose PromQL the node evaluates (Grafana reads
/// the version to choose what it asks).
const PROMETHEUS_VERSION: &str = "3.5.0";

/// `/api/v1/status/buildinfo`: Prometheus's fields, the version that of
/// the PromQL evaluated, the revision Rill's.
pub(crate) fn buildinfo() -> Response {
    success(
        &serde_json::json!({
            "version": PROMETHEUS_VERSION,
            "revision": format!("rill-{}", env!("CARGO_PKG_VERSION")),
            "branch": "",
            "buildUser": "",
            "buildDate": "",
            "goVersion": "",
        })
        .to_string(),
    )
}

/// `/api/v1/metadata`: no metric has metadata yet (remote write 1.0's
/// metadata is not kept), as VictoriaMetrics answers.
pub(crate) fn metadata() -> Response {
    success("{}")
}

/// `/api/v1/format_query`: the query written as Prometheus's `Prettify`
/// writes it (no sensor data needed).
pub(crate) fn format_query(req: &Req) -> Response {
    let p = params(req);
    // No query is an empty one, which does not parse, as in Prometheus.
    match rill_promql::parse(param(&p, "query").unwrap_or("")) {
        Ok(e) => success(&serde_json::Value::from(rill_promql::pretty(&e)).to_string()),
        Err(e) => fail(&PromError::from(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_in_each_form() {
        let now = 1_700_000_000_000;
        let time_ms = |v: &str, now: i64| time_ms("time", v, now).ok();
        assert_eq!(time_ms("1700000000.123", now), Some(1_700_000_000_123));
        assert_eq!(
            time_ms("2023-11-14T22:13:20Z", now),
            Some(1_700_000_000_000)
        );
        assert_eq!(
            time_ms("2023-11-14T23:13:20.5+01:00", now),
            Some(1_700_000_000_500)
        );
        assert_eq!(time_ms("5m", now), Some(now - 300_000));
        assert_eq!(time_ms("-5m", now), Some(now - 300_000));
        assert_eq!(time_ms("-100", now), Some(-100_000));
        assert!(time_ms("yesterday", now).is_none());
        // A zone offset of other characters is refused, not a panic.
        assert!(time_ms("2023-11-14T22:13:20-0\u{e9}00", now).is_none());
    }

    #[test]
    fn metrics_put_the_name_first() {
        let s = Series::new(
            "up",
            vec![("Zone".into(), "a\"b".into()), ("job".into(), "x".into())],
        );
        assert_eq!(
            metric(&s),
            "{\"__name__\":\"up\",\"Zone\":\"a\\\"b\",\"job\":\"x\"}"
        );
        assert_eq!(metric(&Series::new("", vec![])), "{}");
    }
}
