//! `promtool query instant|range` against the real binary and against
//! Prometheus itself (Debian's `prometheus` package, 2.42, which
//! scripts/test-all installs), the same samples remote-written to both:
//! `sum by`, `rate`, `increase`, `histogram_quantile` over classic
//! buckets and `offset` must answer the same series with values within a
//! relative 1e-9.
//!
//! Prometheus 2.x reads a range `[t - d, t]`, 3.x (whose PromQL Rill
//! evaluates) `(t - d, t]`: the samples sit half a second off the
//! evaluation times, so that no sample is on a window's edge and both
//! definitions select the same ones.

mod common;

use common::sensor::now_s;
use common::Node;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

const PROMETHEUS: &str = "/usr/bin/prometheus";
const PROMTOOL: &str = "/usr/bin/promtool";

struct Prometheus {
    addr: SocketAddr,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start() -> Prometheus {
        for bin in [PROMETHEUS, PROMTOOL] {
            assert!(
                std::path::Path::new(bin).exists(),
                "{bin} is not installed: run scripts/test-all, or apt-get install prometheus"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, "global:\n  scrape_interval: 1m\n").unwrap();
        for _ in 0..4 {
            let port = common::free_ports().0;
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
            let mut child = Command::new(PROMETHEUS)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--web.enable-remote-write-receiver")
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("prometheus starts");
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline {
                if common::http(addr, "GET", "/-/ready", &[], b"").is_some_and(|r| r.status == 200)
                {
                    return Prometheus {
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
            "prometheus did not start: {}",
            std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default()
        );
    }
}

impl Drop for Prometheus {
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
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

type Samples = Vec<(i64, f64)>;

/// Counters of requests (one reset), cumulative buckets of a classic
/// histogram, and gauges: a sample every 15 s from `from_s`, each half a
/// second after its 15 s mark, for 44 minutes.
fn data(from_s: i64) -> Vec<(Vec<(String, String)>, Samples)> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let times: Vec<i64> = (0..=176)
        .map(|k| from_s * 1000 + k * 15_000 + 500)
        .collect();
    let mut out = Vec::new();
    let named = |name: &str, labels: &[(&str, &str)]| {
        let mut l: Vec<(String, String)> = vec![("__name__".into(), name.into())];
        l.extend(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        l.sort();
        l
    };
    for job in ["api", "web"] {
        for instance in ["a", "b", "c"] {
            let mut v = rng.below(1000) as f64;
            let samples = times
                .iter()
                .enumerate()
                .map(|(k, &t)| {
                    v += rng.below(40) as f64;
                    if job == "web" && instance == "b" && k == 90 {
                        v = rng.below(10) as f64;
                    }
                    (t, v)
                })
                .collect();
            out.push((
                named(
                    "http_requests_total",
                    &[("job", job), ("instance", instance)],
                ),
                samples,
            ));
        }
        let bounds = ["0.1", "0.5", "1", "+Inf"];
        let mut counts = [0.0; 4];
        let mut per_bucket: Vec<Samples> = vec![Vec::new(); 4];
        for &t in &times {
            let mut below = 0.0;
            for (b, count) in counts.iter_mut().enumerate() {
                below += rng.below(20) as f64;
                *count += below;
                per_bucket[b].push((t, *count));
            }
        }
        for (le, samples) in bounds.iter().zip(per_bucket) {
            out.push((
                named(
                    "request_duration_seconds_bucket",
                    &[("job", job), ("le", le)],
                ),
                samples,
            ));
        }
    }
    for room in ["hall", "lab"] {
        let mut v = 20.0;
        let samples = times
            .iter()
            .map(|&t| {
                v += (rng.below(21) as f64 - 10.0) / 8.0;
                (t, v)
            })
            .collect();
        out.push((named("temperature", &[("room", room)]), samples));
    }
    out
}

/// Writes the series to `addr`'s remote write endpoint.
fn remote_write(addr: SocketAddr, path: &str, series: &[(Vec<(String, String)>, Samples)]) {
    let batch: Vec<(Vec<(&str, &str)>, Samples)> = series
        .iter()
        .map(|(l, s)| {
            (
                l.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect(),
                s.clone(),
            )
        })
        .collect();
    let body = rill_sensor::remote_write::encode(&batch);
    let r = common::http(
        addr,
        "POST",
        path,
        &[
            ("Content-Encoding", "snappy"),
            ("Content-Type", "application/x-protobuf"),
            ("X-Prometheus-Remote-Write-Version", "0.1.0"),
        ],
        &body,
    )
    .expect("the server answers");
    assert!(
        r.status == 204 || r.status == 200,
        "{path}: {} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
}

/// One answer of `promtool query -o json`: each series' labels and
/// points (seconds, value).
type Answer = BTreeMap<BTreeMap<String, String>, Vec<(f64, f64)>>;

fn promtool(addr: SocketAddr, args: &[String]) -> Answer {
    let mut cmd = Command::new(PROMTOOL);
    cmd.args(["query", "-o", "json"]).args(&args[..1]);
    cmd.arg(format!("http://{addr}")).args(&args[1..]);
    let out = cmd.output().expect("promtool runs");
    assert!(
        out.status.success(),
        "promtool {args:?} against {addr}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let point = |p: &Value| {
        (
            p[0].as_f64().unwrap(),
            p[1].as_str().unwrap().parse::<f64>().unwrap(),
        )
    };
    let mut answer = Answer::new();
    for s in v.as_array().unwrap() {
        let labels = s["metric"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect();
        let points = match (s.get("value"), s.get("values")) {
            (Some(p), _) => vec![point(p)],
            (_, Some(ps)) => ps.as_array().unwrap().iter().map(point).collect(),
            _ => panic!("neither value nor values: {s}"),
        };
        assert!(
            answer.insert(labels, points).is_none(),
            "two series with one label set from {addr}: {v}"
        );
    }
    answer
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

#[test]
fn promtool_answers_as_prometheus_2_42_answers() {
    let prometheus = Prometheus::start();
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), "");
    let from = (now_s() - 2700) / 60 * 60;
    let series = data(from);
    remote_write(n.http, "/api/v1/write", &series);
    remote_write(prometheus.addr, "/api/v1/write", &series);

    let at = (from + 2400).to_string();
    let (start, end) = ((from + 1200).to_string(), (from + 2400).to_string());
    let queries = [
        "sum by (job) (rate(http_requests_total[5m]))",
        "rate(http_requests_total[1m])",
        "increase(http_requests_total[10m])",
        "histogram_quantile(0.9, sum by (le, job) (rate(request_duration_seconds_bucket[5m])))",
        "sum by (job) (http_requests_total offset 10m)",
        "http_requests_total offset 5m",
        "avg_over_time(temperature[10m])",
        "max by (room) (temperature) - min by (room) (temperature offset 15m)",
    ];
    let mut asked = Vec::new();
    for q in queries {
        asked.push(vec![
            "instant".to_string(),
            q.to_string(),
            format!("--time={at}"),
        ]);
        asked.push(vec![
            "range".to_string(),
            q.to_string(),
            format!("--start={start}"),
            format!("--end={end}"),
            "--step=1m".to_string(),
        ]);
    }
    let mut compared = 0;
    for args in &asked {
        let want = promtool(prometheus.addr, args);
        let got = promtool(n.http, args);
        assert!(!want.is_empty(), "{args:?}: Prometheus answered nothing");
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{args:?}: the series differ"
        );
        for (labels, want_points) in &want {
            let got_points = &got[labels];
            assert_eq!(
                got_points.len(),
                want_points.len(),
                "{args:?} {labels:?}: {got_points:?} against {want_points:?}"
            );
            for (g, w) in got_points.iter().zip(want_points) {
                assert!(
                    g.0 == w.0 && close(g.1, w.1),
                    "{args:?} {labels:?}: {g:?} where Prometheus answers {w:?}"
                );
                compared += 1;
            }
        }
    }
    // 8 instant and 8 range queries over 2 to 6 series; a range of 21
    // steps.
    assert!(compared > 500, "only {compared} points compared");
}
