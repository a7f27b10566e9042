//! Prometheus's own PromQL test suite through the real binary: the test
//! files of the Prometheus Go module (Prometheus 3.5, fetched with `go
//! mod download`), their series written to a node by remote write and
//! each evaluation asked of its Prometheus query API, the answers
//! compared as Prometheus's own runner compares them. Each file's
//! passes and failures are printed; evaluations whose expected answer
//! or whose selected series hold native histograms are out of scope
//! (Rill stores floats) and counted apart. At least 95 % of the float
//! evaluations of the ten files must pass (docs/sensors.md has the
//! counts). `PROMQL_VERBOSE=1` prints each failure.

mod common;

use common::sensor::enc;
use common::Node;
use rill_promql::promqltest::{
    judge, over_histograms, parse_file, Command, Eval, EvalKind, FILES, MODULE,
};
use rill_promql::value::{Labels, Point, Series, Value};

/// The test data's directory, downloaded into Go's module cache if it is
/// not there yet.
fn test_data() -> std::path::PathBuf {
    let scratch = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("go")
        .args(["mod", "download", "-json", MODULE])
        .current_dir(scratch.path())
        .env("GOFLAGS", "-mod=mod")
        .output()
        .expect("the go command runs (Go is needed to fetch Prometheus's test data)");
    assert!(
        out.status.success(),
        "go mod download {MODULE} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let dir = std::path::PathBuf::from(info["Dir"].as_str().expect("the module's directory"))
        .join("promql/promqltest/testdata");
    assert!(dir.is_dir(), "{} is missing", dir.display());
    dir
}

/// A value as Prometheus's JSON writes it.
fn number(v: &serde_json::Value) -> f64 {
    let s = v.as_str().expect("a value is a string");
    match s {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        _ => s.parse().expect("a number"),
    }
}

/// A result's labels, without the `db` label the runner's database adds.
fn labels(m: &serde_json::Value) -> Labels {
    Labels::new(
        m.as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| *k != "db")
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect(),
    )
}

fn point(p: &serde_json::Value) -> Point {
    Point {
        t: (p[0].as_f64().unwrap() * 1000.0).round() as i64,
        v: number(&p[1]),
    }
}

/// An answer of the query API as a value, or its error.
fn value(status: u16, body: &[u8]) -> Result<Value, String> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("{status}: {}", v["error"]));
    }
    let d = &v["data"];
    let result = &d["result"];
    Ok(match d["resultType"].as_str().unwrap() {
        "scalar" => Value::Scalar(point(result)),
        "string" => Value::String(result[1].as_str().unwrap().to_string()),
        kind => {
            let series = result
                .as_array()
                .unwrap()
                .iter()
                .map(|s| Series {
                    labels: labels(&s["metric"]),
                    points: if kind == "vector" {
                        vec![point(&s["value"])]
                    } else {
                        s["values"].as_array().unwrap().iter().map(point).collect()
                    },
                })
                .collect();
            if kind == "vector" {
                Value::Vector(series)
            } else {
                Value::Matrix(series)
            }
        }
    })
}

fn secs(ms: i64) -> String {
    format!("{:.3}", ms as f64 / 1000.0)
}

/// Asks the node for `e` over database `db`'s series.
fn ask(n: &Node, e: &Eval, db: &str) -> Result<Value, String> {
    let path = match e.kind {
        EvalKind::Instant(t) => format!(
            "/api/v1/query?db={db}&query={}&time={}",
            enc(&e.query),
            secs(t)
        ),
        EvalKind::Range(start, end, step) => format!(
            "/api/v1/query_range?db={db}&query={}&start={}&end={}&step={}",
            enc(&e.query),
            secs(start),
            secs(end),
            secs(step)
        ),
    };
    let r = n.http("GET", &path, &[], b"").expect("the node answers");
    value(r.status, &r.body)
}

/// Writes `series` into database `db` by remote write.
fn load(n: &Node, db: &str, series: &[Series]) {
    for chunk in series.chunks(50) {
        let labels: Vec<Vec<(&str, &str)>> =
            chunk.iter().map(|s| s.labels.iter().collect()).collect();
        let body = rill_sensor::remote_write::encode(
            &chunk
                .iter()
                .zip(labels)
                .map(|(s, l)| (l, s.points.iter().map(|p| (p.t, p.v)).collect()))
                .collect::<Vec<_>>(),
        );
        let r = n
            .http(
                "POST",
                &format!("/api/v1/write?db={db}"),
                &[("Content-Encoding", "snappy")],
                &body,
            )
            .expect("the node answers");
        assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    }
}

#[test]
fn prometheus_promql_tests_pass_through_the_query_api() {
    let data = test_data();
    let dir = tempfile::tempdir().unwrap();
    // The series are of 1970: a storage period reaching back to it.
    let n = Node::start(dir.path(), "sensor.retention = 2200000000s");
    let verbose = std::env::var("PROMQL_VERBOSE").is_ok();
    let (mut passed, mut failed, mut histograms) = (0usize, 0usize, 0usize);
    let mut segment = 0;
    let mut report = Vec::new();
    for name in FILES {
        let text = std::fs::read_to_string(data.join(format!("{name}.test"))).unwrap();
        let cmds = parse_file(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (mut pass, mut fail, mut hist) = (0, 0, 0);
        let mut hist_series: Vec<Labels> = Vec::new();
        segment += 1;
        for c in cmds {
            let db = format!("ref{segment}");
            match c {
                Command::Clear => {
                    segment += 1;
                    hist_series.clear();
                }
                Command::Load {
                    series, histograms, ..
                } => {
                    load(&n, &db, &series);
                    hist_series.extend(histograms);
                }
                Command::Eval(e) => {
                    if over_histograms(&e, &hist_series) {
                        hist += 1;
                        continue;
                    }
                    let outcome = judge(&e, ask(&n, &e, &db));
                    match outcome {
                        Ok(()) => pass += 1,
                        Err(why) => {
                            fail += 1;
                            if verbose {
                                eprintln!("{name}:{} {}\n    {why}", e.line, e.query);
                            }
                        }
                    }
                }
            }
        }
        report.push(format!(
            "{name}: {pass} passed, {fail} failed, {hist} over native histograms"
        ));
        passed += pass;
        failed += fail;
        histograms += hist;
    }
    for l in &report {
        eprintln!("{l}");
    }
    eprintln!(
        "all: {passed} of {} float evaluations passed; {histograms} over native histograms left out",
        passed + failed
    );
    assert!(
        passed * 100 >= (passed + failed) * 95,
        "{passed} of {} float evaluations passed",
        passed + failed
    );
}
