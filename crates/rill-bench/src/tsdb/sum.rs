//! The aggregation phase: an aggregation over many series, as a
//! dashboard's first panel asks. Five counters a sensor
//! (`bench_requests_total{sensor, path}`: 1,000 series at 200 sensors)
//! over a day at 60 s are written to a fresh Rill and a fresh
//! VictoriaMetrics, each alone, then both are asked `sum by (sensor)
//! (rate(bench_requests_total[5m]))` over the day at 1,000 points, in
//! turns. Timed, and the answers' series counted, not compared:
//! MetricsQL's `rate` does not extrapolate to the window's edges as
//! Prometheus's does.

use super::gen::{sensor_name, Rng};
use super::http::{enc, Conn};
use super::queries::{latency, Latency};
use super::systems::{Kind, System};
use crate::report::Report;
use anyhow::{bail, Result};
use std::path::Path;
use std::time::Instant;

/// Paths a sensor counts requests of: series per sensor.
const PATHS: usize = 5;

/// Line protocol of the counters, a line a series and minute, in batches
/// of about 5,000 lines; the first sample a minute after `start_ms`.
fn batches(sensors: usize, start_ms: i64, end_ms: i64, seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed ^ 0x5355_4d5f_5241_5445);
    let mut counts = vec![0u64; sensors * PATHS];
    let mut out = Vec::new();
    let mut batch = String::new();
    let mut t = start_ms + 60_000;
    while t <= end_ms {
        for s in 0..sensors {
            for p in 0..PATHS {
                let c = &mut counts[s * PATHS + p];
                *c += rng.next() % 100;
                batch.push_str(&format!(
                    "bench,sensor={},path=p{p} requests_total={c}i {t}\n",
                    sensor_name(s)
                ));
            }
        }
        if batch.len() > 250_000 {
            out.push(std::mem::take(&mut batch));
        }
        t += 60_000;
    }
    if !batch.is_empty() {
        out.push(batch);
    }
    out
}

/// One system's answers: latency and the series of its last answer.
struct Asked {
    latency: Latency,
    series: usize,
}

/// Writes the counters to a fresh `kind` in `dir` and leaves it running.
fn load(
    kind: Kind,
    dir: &Path,
    rill: Option<&Path>,
    rill_extra: &str,
    batches: &[String],
) -> Result<System> {
    let sys = System::start(kind, dir, rill, rill_extra)?;
    let mut c = Conn::new(sys.addr);
    for b in batches {
        loop {
            match c.request("POST", sys.write_path(), b.as_bytes())? {
                (204, _) => break,
                (429 | 503, _) => std::thread::sleep(std::time::Duration::from_millis(100)),
                (st, body) => bail!(
                    "{}: a write failed: {st} {}",
                    kind.name(),
                    String::from_utf8_lossy(&body)
                ),
            }
        }
    }
    sys.drain()?;
    sys.settle()?;
    Ok(sys)
}

/// Runs the phase for Rill and VictoriaMetrics (`sensors` sensors,
/// `reps` queries each) in `dir`, and reports its figures.
pub fn run(
    sensors: usize,
    reps: usize,
    dir: &Path,
    rill: Option<&Path>,
    rill_extra: &str,
    seed: u64,
    r: &mut Report,
) -> Result<()> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    let end_ms = (now_ms / 60_000 - 1) * 60_000;
    let start_ms = end_ms - 86_400_000;
    let data = batches(sensors, start_ms - 300_000, end_ms, seed);
    println!(
        "sum: {} series of counters over a day at 60 s, sum by (sensor) (rate(bench_requests_total[5m])) at 1,000 points, {reps} times a system",
        sensors * PATHS
    );
    let mut systems = Vec::new();
    for kind in [Kind::Rill, Kind::Vm] {
        systems.push(load(
            kind,
            &dir.join(format!("sum-{}", kind.name())),
            rill,
            rill_extra,
            &data,
        )?);
    }
    unsafe { libc::sync() };
    let step = 86_400 / 1000;
    let path = format!(
        "/api/v1/query_range?query={}&start={}&end={}&step={step}&nocache=1",
        enc("sum by (sensor) (rate(bench_requests_total[5m]))"),
        start_ms / 1000,
        end_ms / 1000
    );
    let mut conns: Vec<Conn> = systems.iter().map(|s| Conn::new(s.addr)).collect();
    let mut ms = vec![Vec::new(); systems.len()];
    let mut series = vec![0; systems.len()];
    // In turns of 25 a system, a different one first each time (as the
    // other queries: a slow stretch of the machine falls on both).
    for turn in 0..reps.div_ceil(25) {
        for k in 0..systems.len() {
            let j = (turn + k) % systems.len();
            for _ in 0..25.min(reps - turn * 25) {
                let began = Instant::now();
                let (status, body) = conns[j].request("GET", &path, b"")?;
                ms[j].push(began.elapsed().as_secs_f64() * 1000.0);
                if status != 200 {
                    bail!(
                        "{}: {path}: {status} {}",
                        systems[j].kind.name(),
                        String::from_utf8_lossy(&body)
                    );
                }
                let v: serde_json::Value = serde_json::from_slice(&body)?;
                series[j] = v["data"]["result"].as_array().map_or(0, Vec::len);
            }
        }
    }
    let mut asked = Vec::new();
    for (j, sys) in systems.into_iter().enumerate() {
        let n = sys.kind.name();
        sys.stop_and_measure()?;
        let a = Asked {
            latency: latency(std::mem::take(&mut ms[j])),
            series: series[j],
        };
        r.num(
            &format!("{n}_sum_rate_p50_ms"),
            a.latency.p50_ms,
            &format!("{n}: sum by sensor of rates of every series, a day, p50 ms"),
        );
        r.num(
            &format!("{n}_sum_rate_p99_ms"),
            a.latency.p99_ms,
            &format!("{n}: sum by sensor of rates of every series, a day, p99 ms"),
        );
        asked.push(a);
    }
    let _ = std::fs::remove_dir_all(dir.join("sum-rill"));
    let _ = std::fs::remove_dir_all(dir.join("sum-victoriametrics"));
    if asked[0].series != sensors || asked[1].series != sensors {
        bail!(
            "sum: {} and {} series in the answers, not one a sensor ({sensors})",
            asked[0].series,
            asked[1].series
        );
    }
    r.num(
        "sum_rate_p99_vs_vm",
        asked[0].latency.p99_ms / asked[1].latency.p99_ms.max(1e-6),
        "Rill/VictoriaMetrics sum of rates over every series p99 (target <= 0.5)",
    );
    Ok(())
}
