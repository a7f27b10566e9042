//! The Prometheus query API of the real binary against VictoriaMetrics
//! (Debian's `victoria-metrics`, 1.79, which scripts/test-all installs),
//! started by the test on loopback: the same line protocol written to
//! both, then the queries on which Prometheus's definitions (Rill's) and
//! MetricsQL's agree (rollups over a window, arithmetic on them, instant
//! and range, the series and label APIs, the export) must give the same
//! answers, values within a relative 1e-9, names aside.

mod common;

use common::sensor::{enc, now_s};
use common::Node;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

struct Vm {
    addr: SocketAddr,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Vm {
    fn start() -> Vm {
        let bin = "/usr/bin/victoria-metrics";
        assert!(
            std::path::Path::new(bin).exists(),
            "victoria-metrics is not installed: run scripts/test-all, or apt-get install victoria-metrics"
        );
        let dir = tempfile::tempdir().unwrap();
        for _ in 0..4 {
            let port = common::free_ports().0;
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let log = std::fs::File::create(dir.path().join("vm.log")).unwrap();
            let mut child = std::process::Command::new(bin)
                .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
                .arg(format!(
                    "-storageDataPath={}",
                    dir.path().join("data").display()
                ))
                .args([
                    "-retentionPeriod=100y",
                    "-search.disableCache",
                    "-search.maxStepForPointsAdjustment=0",
                    "-search.latencyOffset=1s",
                ])
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("victoria-metrics starts");
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while std::time::Instant::now() < deadline {
                if common::http(addr, "GET", "/health", &[], b"").is_some_and(|r| r.status == 200) {
                    return Vm {
                        addr,
                        child,
                        _dir: dir,
                    };
                }
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "victoria-metrics did not start: {}",
            std::fs::read_to_string(dir.path().join("vm.log")).unwrap_or_default()
        );
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A small seeded generator (xorshift), so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Two hours of 8 environment sensors (temperature and humidity random
/// walks at two decimals) and 4 pulse counters (with resets), a sample
/// every 10 s with jitter, 3 % missing, and the lines of each sensor
/// shuffled in chunks (out of order within a window).
fn data(seed: u64, t0_ms: i64) -> Vec<String> {
    let mut rng = Rng(seed | 1);
    let mut lines = Vec::new();
    for site in ["a", "b"] {
        for sensor in 0..4 {
            let (mut temp, mut hum) = (20.0 + rng.unit() * 5.0, 40.0 + rng.unit() * 20.0);
            let mut pulses = 0u64;
            let mut mine = Vec::new();
            for k in 0..720i64 {
                let ts = t0_ms + k * 10_000 + (rng.next() % 4000) as i64 - 2000;
                temp += (rng.unit() - 0.5) * 0.4;
                hum += (rng.unit() - 0.5) * 1.0;
                pulses = if rng.unit() < 0.005 {
                    rng.next() % 10
                } else {
                    pulses + rng.next() % 50
                };
                if rng.unit() < 0.03 {
                    continue;
                }
                mine.push(format!(
                    "env,site={site},sensor={sensor} temp={temp:.2},hum={hum:.2} {ts}"
                ));
                if sensor < 2 {
                    mine.push(format!(
                        "pump,site={site},sensor={sensor} pulses={pulses}i {ts}"
                    ));
                }
            }
            for chunk in mine.chunks_mut(7) {
                let r = rng.next() as usize % chunk.len();
                chunk.swap(0, r);
            }
            lines.extend(mine);
        }
    }
    lines
}

fn get(addr: SocketAddr, path: &str) -> Value {
    let r = common::http(addr, "GET", path, &[], b"").expect("an answer");
    let body = String::from_utf8_lossy(&r.body).into_owned();
    assert_eq!(r.status, 200, "{addr} {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

/// A query's result as metric (JSON text) to (time, value) points.
fn points(v: &Value) -> BTreeMap<String, Vec<(f64, f64)>> {
    assert_eq!(v["status"], "success", "{v}");
    let mut out = BTreeMap::new();
    let result = &v["data"]["result"];
    let as_point = |p: &Value| {
        (
            p[0].as_f64().unwrap(),
            p[1].as_str().unwrap().parse::<f64>().unwrap(),
        )
    };
    for r in result.as_array().unwrap() {
        let pts = match (&r["values"], &r["value"]) {
            (Value::Array(vs), _) => vs.iter().map(as_point).collect(),
            (_, Value::Array(_)) => vec![as_point(&r["value"])],
            _ => panic!("a result without values: {r}"),
        };
        // Prometheus drops the name where MetricsQL keeps it (`min`,
        // `max` and `avg_over_time`): the series are compared without it.
        let mut metric = r["metric"].clone();
        if let Some(m) = metric.as_object_mut() {
            m.remove("__name__");
        }
        out.insert(metric.to_string(), pts);
    }
    out
}

fn same(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

fn compare(what: &str, rill: &Value, vm: &Value) -> usize {
    assert_eq!(
        rill["data"]["resultType"], vm["data"]["resultType"],
        "{what}: result types"
    );
    let (r, v) = (points(rill), points(vm));
    assert_eq!(
        r.keys().collect::<Vec<_>>(),
        v.keys().collect::<Vec<_>>(),
        "{what}: the series"
    );
    let mut n = 0;
    for (metric, rp) in &r {
        let vp = &v[metric];
        assert_eq!(
            rp.iter().map(|p| p.0).collect::<Vec<_>>(),
            vp.iter().map(|p| p.0).collect::<Vec<_>>(),
            "{what}: the times of {metric}"
        );
        for (x, y) in rp.iter().zip(vp) {
            assert!(
                same(x.1, y.1),
                "{what}: {metric} at {}: rill {} vs VictoriaMetrics {}",
                x.0,
                x.1,
                y.1
            );
            n += 1;
        }
    }
    n
}

#[test]
fn prometheus_answers_equal_victoriametrics() {
    let vm = Vm::start();
    let dir = tempfile::tempdir().unwrap();
    // Short windows, so most of the data is in stored blocks and the
    // rest in buffers.
    let n = Node::start(dir.path(), "sensor.window = 10m\nsensor.grace = 1s");
    let end_s = (now_s() - 3600) / 60 * 60;
    let t0_s = end_s - 7200;
    let lines = data(0x5eed_0013, t0_s * 1000);
    for chunk in lines.chunks(2000) {
        let body = chunk.join("\n");
        for addr in [n.http, vm.addr] {
            let r = common::http(
                addr,
                "POST",
                "/write?db=plant&precision=ms",
                &[],
                body.as_bytes(),
            )
            .expect("an answer");
            assert_eq!(
                r.status,
                204,
                "{addr}: {}",
                String::from_utf8_lossy(&r.body)
            );
        }
    }
    let r = common::http(vm.addr, "GET", "/internal/force_flush", &[], b"").unwrap();
    assert_eq!(r.status, 200);
    // Blocks of the ended windows stored (a tick a second).
    common::until("rill stored its blocks", Duration::from_secs(30), || {
        n.stats()["sensor_blocks_stored_total"]
            .as_u64()
            .unwrap_or(0)
            > 0
    });
    // Where Prometheus's definitions, which Rill follows, and MetricsQL's
    // agree: rollups over a window given. (Bare selectors look back 5
    // minutes in Prometheus and over a gap estimated from the series in
    // VictoriaMetrics; `rate` extrapolates in Prometheus and does not in
    // VictoriaMetrics; a number is a scalar in Prometheus and a series
    // in VictoriaMetrics: docs/sensors.md, "Queries". Those are held to
    // Prometheus's own tests, in promql_reference.rs.)
    let selectors = [
        "env_temp",
        "env_temp{site=\"a\"}",
        "env_hum{sensor=~\"[12]\"}",
        "env_hum{site!=\"a\",sensor!~\"0|3\"}",
        "pump_pulses",
    ];
    let mut queries: Vec<String> = selectors
        .iter()
        .map(|s| format!("last_over_time({s}[2m])"))
        .collect();
    for f in [
        "min_over_time",
        "max_over_time",
        "avg_over_time",
        "sum_over_time",
        "count_over_time",
        "last_over_time",
    ] {
        queries.push(format!("{f}(env_temp[5m])"));
        queries.push(format!("{f}(env_hum{{site=\"b\"}}[1m])"));
    }
    queries.extend([
        "max_over_time(pump_pulses[5m]) - min_over_time(pump_pulses[5m])".to_string(),
        "last_over_time(env_temp[1m]) * 2 + 1".to_string(),
        "avg_over_time(env_temp[10m]) / 2 - 1".to_string(),
    ]);
    let mut compared = 0;
    for q in &queries {
        for (step, from, to) in [
            (60, t0_s + 600, end_s),
            (300, t0_s, end_s + 600),
            (17, t0_s + 1234, t0_s + 2234),
        ] {
            let path = format!(
                "/api/v1/query_range?query={}&start={from}&end={to}&step={step}",
                enc(q)
            );
            let what = format!("query_range {q} step {step}");
            compared += compare(&what, &get(n.http, &path), &get(vm.addr, &path));
        }
        for at in [t0_s + 1800, end_s - 7, end_s + 200] {
            let path = format!("/api/v1/query?query={}&time={at}", enc(q));
            compared += compare(
                &format!("query {q} at {at}"),
                &get(n.http, &path),
                &get(vm.addr, &path),
            );
        }
    }
    assert!(compared > 20_000, "only {compared} points compared");
    // The series and label APIs.
    let range = format!("start={t0_s}&end={end_s}");
    let set = |v: Value| -> Vec<String> {
        assert_eq!(v["status"], "success", "{v}");
        let mut s: Vec<String> = v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.to_string())
            .collect();
        s.sort();
        s
    };
    for path in [
        format!(
            "/api/v1/series?match[]={}&{range}",
            enc("env_temp{site=\"a\"}")
        ),
        format!(
            "/api/v1/series?match[]={}&{range}",
            enc("{__name__=~\"pump.*\"}")
        ),
        format!("/api/v1/labels?{range}"),
        format!("/api/v1/label/sensor/values?{range}"),
        format!("/api/v1/label/__name__/values?{range}"),
    ] {
        assert_eq!(set(get(n.http, &path)), set(get(vm.addr, &path)), "{path}");
    }
    // The CSV export, row for row.
    let mut rows = 0;
    for (sel, format) in [
        (
            "env_temp",
            "__name__,site,sensor,__timestamp__:unix_ms,__value__",
        ),
        (
            "pump_pulses{site=\"b\"}",
            "__timestamp__:rfc3339,__value__,sensor,db",
        ),
        (
            "env_hum",
            "__timestamp__:unix_s,__value__,__name__,nosuchlabel",
        ),
    ] {
        let path = format!(
            "/api/v1/export/csv?format={format}&match[]={}&start={}&end={}",
            enc(sel),
            t0_s + 600,
            end_s - 600
        );
        let csv = |addr| {
            let r = common::http(addr, "GET", &path, &[], b"").expect("an answer");
            assert_eq!(r.status, 200, "{path}");
            let mut lines: Vec<String> = String::from_utf8(r.body)
                .unwrap()
                .lines()
                .map(String::from)
                .collect();
            lines.sort();
            lines
        };
        let (mine, theirs) = (csv(n.http), csv(vm.addr));
        assert!(!mine.is_empty(), "{path}");
        assert_eq!(mine, theirs, "{path}");
        rows += mine.len();
    }
    eprintln!(
        "{} queries, {compared} points equal to VictoriaMetrics', and {rows} rows of CSV export",
        queries.len()
    );
}
