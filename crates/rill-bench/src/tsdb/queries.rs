//! The queries: one sensor's temperature over a day and over a month at
//! 1,000 points (`max_over_time` per step, as a dashboard asks), the
//! sensors and days drawn from the seed. Rill and VictoriaMetrics are
//! asked the same PromQL, InfluxDB its InfluxQL equivalent (the same
//! range and step, its own bucket alignment: timed, not compared).

use super::gen::{sensor_name, Plan, Rng};
use super::http::{enc, Conn};
use super::systems::{Kind, System};
use anyhow::{bail, Result};
use std::time::Instant;

#[derive(Clone, Debug)]
pub struct Pick {
    pub month: bool,
    sensor: String,
    start_ms: i64,
    end_ms: i64,
}

impl Pick {
    fn step_s(&self) -> i64 {
        ((self.end_ms - self.start_ms) / 1000 / 1000).max(1)
    }
}

/// `reps` day queries and `reps` month queries (a month, or the whole
/// data when shorter).
pub fn picks(plan: &Plan, reps: usize) -> Vec<Pick> {
    let mut rng = Rng::new(plan.seed ^ 0x5155_4552_5931);
    let span = plan.end_ms - plan.start_ms;
    let mut out = Vec::new();
    for month in [false, true] {
        for _ in 0..reps {
            let sensor = sensor_name((rng.next() % plan.sensors as u64) as usize);
            let (start_ms, end_ms) = if month {
                (plan.end_ms - span.min(30 * 86_400_000), plan.end_ms)
            } else {
                let len = span.min(86_400_000);
                let hours = ((span - len) / 3_600_000).max(0) as u64;
                let end = plan.end_ms - (rng.next() % (hours + 1)) as i64 * 3_600_000;
                (end - len, end)
            };
            out.push(Pick {
                month,
                sensor,
                start_ms,
                end_ms,
            });
        }
    }
    out
}

/// Latency percentiles of one kind of query.
#[derive(Clone, Copy, Debug, Default)]
pub struct Latency {
    pub p50_ms: f64,
    pub p99_ms: f64,
}

pub(super) fn latency(mut ms: Vec<f64>) -> Latency {
    if ms.is_empty() {
        return Latency::default();
    }
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() as f64 * q).ceil() as usize).clamp(1, ms.len()) - 1];
    Latency {
        p50_ms: at(0.5),
        p99_ms: at(0.99),
    }
}

/// A PromQL answer's points, by series (metric as JSON text).
pub type Answer = Vec<(String, Vec<(f64, f64)>)>;

fn points(body: &[u8]) -> Result<Answer> {
    let v: serde_json::Value = serde_json::from_slice(body)?;
    if v["status"] != "success" {
        bail!("{v}");
    }
    // A cluster's answer that misses a part is no answer to time.
    if v["isPartial"] == true || v.get("warnings").is_some() {
        bail!("a partial answer: {}", v["warnings"]);
    }
    let mut out = Vec::new();
    for r in v["data"]["result"].as_array().into_iter().flatten() {
        let pts = r["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p[0].as_f64()?, p[1].as_str()?.parse().ok()?)))
            .collect();
        // Prometheus drops the name of `max_over_time`'s series where
        // MetricsQL keeps it: answers are compared without it.
        let mut metric = r["metric"].clone();
        if let Some(m) = metric.as_object_mut() {
            m.remove("__name__");
        }
        out.push((metric.to_string(), pts));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// What one system answered: day and month latencies, and the PromQL
/// answers (empty for InfluxDB).
pub struct Asked {
    pub day: Latency,
    pub month: Latency,
    pub answers: Vec<Answer>,
}

/// Queries asked of one system in a row before the next system's turn.
const TURN: usize = 250;

/// Runs every pick against every system, in turns of [`TURN`] picks:
/// each turn's picks are asked of each system in a row, the systems
/// taking turns (a different one first each time), so that a slow stretch
/// of the machine (another tenant of the host, which lasts from a tenth
/// of a second to seconds here) falls on all of them alike instead of on
/// whichever system's queries it meets. Not one query each in turn: then
/// every query would find its server idle for the other's, and measure
/// how fast this virtual machine wakes an idle core (a few hundred
/// microseconds here, halt polling being off) more than the query.
pub fn run(systems: &[&System], picks: &[Pick]) -> Result<Vec<Asked>> {
    let n = systems.len();
    let mut conns: Vec<Conn> = systems.iter().map(|s| Conn::new(s.addr)).collect();
    let mut day = vec![Vec::new(); n];
    let mut month = vec![Vec::new(); n];
    let mut answers = vec![Vec::new(); n];
    let mut slowest = vec![(0.0f64, 0usize); n];
    for (turn, chunk) in picks.chunks(TURN).enumerate() {
        for k in 0..n {
            let j = (turn + k) % n;
            for (i, p) in chunk.iter().enumerate() {
                let ms = ask(systems[j].kind, &mut conns[j], p, &mut answers[j])?;
                if p.month { &mut month[j] } else { &mut day[j] }.push(ms);
                if ms > slowest[j].0 {
                    slowest[j] = (ms, turn * TURN + i);
                }
            }
        }
    }
    for (j, sys) in systems.iter().enumerate() {
        if let Some(p) = picks.get(slowest[j].1) {
            println!(
                "{}: slowest query {} of {} ({}, {}): {:.1} ms",
                sys.kind.name(),
                slowest[j].1 + 1,
                picks.len(),
                p.sensor,
                if p.month { "month" } else { "day" },
                slowest[j].0
            );
        }
    }
    let mut out = Vec::new();
    for ((d, m), a) in day.into_iter().zip(month).zip(answers) {
        out.push(Asked {
            day: latency(d),
            month: latency(m),
            answers: a,
        });
    }
    Ok(out)
}

/// Asks `p` of a system of `kind` over `c`, keeps its answer, returns
/// its latency in ms.
pub fn ask(kind: Kind, c: &mut Conn, p: &Pick, answers: &mut Vec<Answer>) -> Result<f64> {
    let step = p.step_s();
    let path = match kind {
        Kind::Rill | Kind::Vm => format!(
            "/api/v1/query_range?query={}&start={}&end={}&step={step}&nocache=1",
            enc(&format!(
                "max_over_time(iot_temperature{{sensor=\"{}\"}}[{step}s])",
                p.sensor
            )),
            p.start_ms / 1000,
            p.end_ms / 1000
        ),
        Kind::Influx => format!(
            "/query?db=bench&epoch=ms&q={}",
            enc(&format!(
                "SELECT max(\"temperature\") FROM \"iot\" WHERE \"sensor\"='{}' AND time > {}ms AND time <= {}ms GROUP BY time({step}s)",
                p.sensor,
                p.start_ms - step * 1000,
                p.end_ms
            ))
        ),
    };
    let began = Instant::now();
    let (status, body) = c.request("GET", &path, b"")?;
    let ms = began.elapsed().as_secs_f64() * 1000.0;
    if status != 200 {
        bail!(
            "{}: {path}: {status} {}",
            kind.name(),
            String::from_utf8_lossy(&body)
        );
    }
    answers.push(match kind {
        Kind::Influx => Vec::new(),
        _ => points(&body)?,
    });
    Ok(ms)
}

/// How many answers are equal (points at the same times, values within
/// a relative 1e-9), of how many, and the first difference.
pub fn compare(a: &[Answer], b: &[Answer]) -> (usize, usize, Option<String>) {
    let mut same = 0;
    let mut first = None;
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let eq = x.len() == y.len()
            && x.iter().zip(y).all(|(sx, sy)| {
                sx.0 == sy.0
                    && sx.1.len() == sy.1.len()
                    && sx.1.iter().zip(&sy.1).all(|(p, q)| {
                        p.0 == q.0
                            && (p.1 == q.1 || (p.1 - q.1).abs() <= 1e-9 * p.1.abs().max(q.1.abs()))
                    })
            });
        if eq {
            same += 1;
        } else if first.is_none() {
            let n = |a: &Answer| a.iter().map(|s| s.1.len()).sum::<usize>();
            first = Some(format!(
                "query {i}: {} series, {} points vs {} series, {} points",
                x.len(),
                n(x),
                y.len(),
                n(y)
            ));
        }
    }
    (same, a.len().min(b.len()), first)
}
