//! The scaling experiment of the sensor-data paper ("Riak KV performance
//! in sensor data storage application", section 6, fig. 13) on devrels of
//! this machine: the same line protocol into 1, 2, 3 and 5 nodes, every
//! node a collection port fed by writers of its own (the paper's variant
//! b). The single node keeps one copy (`sensor.n_val = 1`, `w = 1`); the
//! clusters keep three (`n_val = 3`, `w = 2`), so the ratios say what the
//! copies and the network cost: CPU-seconds per acknowledged sample, bytes
//! between nodes and on disk per sample, and a one-sensor query through
//! any node against the single node's, asked in turns with it so that a
//! slow stretch of the machine falls on both. Every node shares this
//! machine's cores, so wall throughput does not grow with the nodes here
//! as it did on the paper's five machines; the CPU figures are what
//! carries over. Then a node is killed during ingest and started again:
//! writers go on through the others, and every node answers every sample
//! exactly once afterwards.

use super::devrel::Cluster;
use super::gen::{Plan, FIELDS};
use super::http::{enc, Conn};
use super::queries::{self, Answer, Latency, Pick};
use super::systems::Kind;
use crate::report::Report;
use anyhow::{bail, Result};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Scale {
    /// Cluster sizes; 1 is the single node every size is compared with.
    pub nodes: Vec<u32>,
    pub dir: PathBuf,
    pub base_port: u16,
    pub rill: PathBuf,
    /// `key=value` settings for every node beyond the phase's own.
    pub settings: Vec<String>,
    pub clients: usize,
    pub kill: bool,
    /// Keep each devrel's directory (to look at what it wrote).
    pub keep: bool,
    /// Wait between a devrel's ingest and its queries for its slices to
    /// settle and anti-entropy to keep their digests.
    pub settle: bool,
}

/// What one ingest into a devrel did.
struct Ingested {
    wall_s: f64,
    cpu_s: Vec<f64>,
    net_bytes: u64,
    retries: u64,
}

/// One cluster size's figures.
struct Row {
    nodes: u32,
    samples_per_s: f64,
    cpu_s: f64,
    /// CPU-seconds of every node while the devrel settled after its
    /// ingest (anti-entropy's first digests of the backfill), if it did.
    settle_cpu_s: Option<f64>,
    net_bytes: u64,
    disk_bytes: u64,
    month: Latency,
    day: Latency,
    /// The single node's latencies, asked in the same turns.
    base_day: Latency,
    base_month: Latency,
    equal: usize,
    compared: usize,
}

/// Queries asked of one system in a row before the other's turn (as
/// `queries::run`).
const TURN: usize = 250;

pub fn run(
    s: &Scale,
    plan: &Plan,
    batches: &[(String, u64)],
    samples: u64,
    picks: &[Pick],
    r: &mut Report,
) -> Result<()> {
    let settings = |n_val: u32, w: u32| {
        let mut v = vec![
            "sensor.retention=3650d".to_string(),
            format!("sensor.n_val={n_val}"),
            format!("sensor.w={w}"),
        ];
        v.extend(s.settings.iter().cloned());
        v
    };
    println!("scale: the single node (n_val 1, w 1)");
    let base = Cluster::up(
        &s.rill,
        &s.dir.join("scale-1"),
        1,
        s.base_port,
        &settings(1, 1),
    )?;
    let one = ingest(&base, batches, samples, s.clients, None)?;
    let mut rows = Vec::new();
    for &n in s.nodes.iter().filter(|&&n| n > 1) {
        println!("scale: {n} nodes (n_val 3, w 2)");
        let dir = s.dir.join(format!("scale-{n}"));
        let c = Cluster::up(&s.rill, &dir, n, s.base_port + 100, &settings(3, 2))?;
        let got = ingest(&c, batches, samples, s.clients, None)?;
        let settle_cpu_s = if s.settle {
            let before: f64 = c.cpu_seconds().iter().sum();
            settle(&c, grace_s(&s.settings))?;
            Some(c.cpu_seconds().iter().sum::<f64>() - before)
        } else {
            None
        };
        let (asked, base_asked) = ask_in_turns(&c, &base, picks)?;
        let (equal, compared, first) = queries::compare(&asked.answers, &base_asked.answers);
        if let Some(f) = first {
            println!("scale: {n} nodes: first answer unlike the single node's: {f}");
        }
        let disk: Vec<u64> = c.stop_and_measure()?;
        if !s.keep {
            std::fs::remove_dir_all(&dir).ok();
        }
        rows.push(Row {
            nodes: n,
            samples_per_s: samples as f64 / got.wall_s,
            cpu_s: got.cpu_s.iter().sum(),
            settle_cpu_s,
            net_bytes: got.net_bytes,
            disk_bytes: disk.iter().sum(),
            month: asked.month,
            day: asked.day,
            base_day: base_asked.day,
            base_month: base_asked.month,
            equal,
            compared,
        });
        println!(
            "scale: {n} nodes: {:.0} samples/s, CPU-s per node {:?}, {} write retries",
            samples as f64 / got.wall_s,
            got.cpu_s
                .iter()
                .map(|c| (c * 10.0).round() / 10.0)
                .collect::<Vec<_>>(),
            got.retries
        );
    }
    // The single node's queries: as asked with the first cluster, or
    // alone when no cluster was asked with it.
    let base_row_latency = match rows.first() {
        Some(first) => (first.base_day, first.base_month),
        None => {
            let mut c = Conn::new(base.http(1));
            let (mut day, mut month, mut answers) = (Vec::new(), Vec::new(), Vec::new());
            for p in picks {
                let ms = queries::ask(Kind::Rill, &mut c, p, &mut answers)?;
                if p.month { &mut month } else { &mut day }.push(ms);
            }
            (queries::latency(day), queries::latency(month))
        }
    };
    let base_disk: u64 = base.stop_and_measure()?.iter().sum();
    if !s.keep {
        std::fs::remove_dir_all(s.dir.join("scale-1")).ok();
    }
    let base_row = Row {
        nodes: 1,
        samples_per_s: samples as f64 / one.wall_s,
        cpu_s: one.cpu_s.iter().sum(),
        settle_cpu_s: None,
        net_bytes: one.net_bytes,
        disk_bytes: base_disk,
        day: base_row_latency.0,
        month: base_row_latency.1,
        base_day: base_row_latency.0,
        base_month: base_row_latency.1,
        equal: 0,
        compared: 0,
    };
    report(r, samples, &base_row, &rows);
    write_csv(s, samples, &base_row, &rows)?;
    let kill_nodes = if s.nodes.contains(&3) {
        Some(3)
    } else {
        s.nodes.iter().copied().filter(|&n| n > 1).max()
    };
    if let (true, Some(n)) = (s.kill, kill_nodes) {
        kill_run(s, n, plan, batches, samples, &settings(3, 2), r)?;
    }
    Ok(())
}

/// Writes every batch into `c`, writer i through node i mod N (the next
/// node when one refuses or cannot be reached), killing node `kill` when a
/// third of the batches are acknowledged and starting it again at two
/// thirds.
fn ingest(
    c: &Cluster,
    batches: &[(String, u64)],
    samples: u64,
    clients: usize,
    kill: Option<u32>,
) -> Result<Ingested> {
    let n = c.nodes as usize;
    let addrs = c.addrs();
    let cpu0 = c.cpu_seconds();
    let net0 = c.total("cluster_bytes_sent_total")?;
    let began = Instant::now();
    let next = AtomicUsize::new(0);
    let acked = AtomicUsize::new(0);
    let retries = AtomicU64::new(0);
    let failed: Mutex<Option<String>> = Mutex::new(None);
    let stop = |e: String| {
        failed.lock().unwrap().get_or_insert(e);
        next.store(usize::MAX / 2, Ordering::Relaxed);
    };
    std::thread::scope(|sc| {
        for w in 0..clients.max(n) {
            let (next, acked, retries, addrs, stop) = (&next, &acked, &retries, &addrs, &stop);
            sc.spawn(move || {
                let mut conns: Vec<Conn> = addrs.iter().map(|a| Conn::new(*a)).collect();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((body, _)) = batches.get(i) else {
                        return;
                    };
                    let mut attempt = 0;
                    loop {
                        let k = (w + attempt) % n;
                        match conns[k].request(
                            "POST",
                            "/write?db=bench&precision=ms",
                            body.as_bytes(),
                        ) {
                            Ok((204, _)) => break,
                            Ok((429 | 503, _)) | Err(_) if attempt < 600 => {
                                retries.fetch_add(1, Ordering::Relaxed);
                                attempt += 1;
                                if attempt % n == 0 {
                                    std::thread::sleep(Duration::from_millis(100));
                                }
                            }
                            Ok((st, b)) => {
                                return stop(format!(
                                    "node {}: {st}: {}",
                                    k + 1,
                                    String::from_utf8_lossy(&b)
                                ))
                            }
                            Err(e) => return stop(format!("node {}: {e}", k + 1)),
                        }
                    }
                    acked.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        if let Some(k) = kill {
            let until = |share: usize| {
                while acked.load(Ordering::Relaxed) < batches.len() * share / 3
                    && next.load(Ordering::Relaxed) < usize::MAX / 4
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
            };
            until(1);
            println!("scale: kill -9 of dev{k}");
            if let Err(e) = c.kill(k) {
                stop(e.to_string());
            }
            until(2);
            println!("scale: starting dev{k} again");
            if let Err(e) = c.restart(k) {
                stop(e.to_string());
            }
        }
    });
    if let Some(e) = failed.into_inner().unwrap() {
        bail!("scale: {} nodes: a write failed: {e}", c.nodes);
    }
    let wall_s = began.elapsed().as_secs_f64();
    c.drain()?;
    let cpu_s = c
        .cpu_seconds()
        .iter()
        .zip(&cpu0)
        .map(|(a, b)| (a - b).max(0.0))
        .collect();
    let net_bytes = c.total("cluster_bytes_sent_total")?.saturating_sub(net0);
    // What anti-entropy did meanwhile (its reads are part of the CPU).
    println!(
        "scale: {} nodes: anti-entropy: {} exchanges, {} slices differing, {} samples repaired",
        c.nodes,
        c.total("sensor_aae_exchanges_total")?,
        c.total("sensor_aae_slices_differing_total")?,
        c.total("sensor_aae_repaired_samples_total")?
    );
    println!(
        "scale: {} nodes took {samples} samples in {wall_s:.1} s",
        c.nodes
    );
    Ok(Ingested {
        wall_s,
        cpu_s,
        net_bytes,
        retries: retries.into_inner(),
    })
}

/// `sensor.grace` in seconds as the settings give it (`30s`, `5m`, `1h`),
/// else the node's default, 5 minutes.
fn grace_s(settings: &[String]) -> u64 {
    let Some(v) = settings
        .iter()
        .rev()
        .find_map(|s| s.strip_prefix("sensor.grace="))
    else {
        return 300;
    };
    let (n, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len()));
    let n: u64 = n.parse().unwrap_or(300);
    match unit {
        "m" => n * 60,
        "h" => n * 3600,
        "ms" => n.div_ceil(1000),
        _ => n,
    }
}

/// Waits after an ingest until its slices have settled (`grace_s` since
/// it ended) and every node has done two anti-entropy rounds since: the
/// second begun after the first settled slice, so every home's digests
/// are kept, as they are in a steady state (a backfill leaves the slices
/// it wrote busy for the grace period, and a digest read compares kept
/// digests instead of reading). Bounded: a node that does not get there
/// in 20 minutes fails the run.
fn settle(c: &Cluster, grace_s: u64) -> Result<()> {
    println!(
        "scale: {} nodes: waiting {grace_s} s for the slices to settle, then two anti-entropy rounds",
        c.nodes
    );
    let began = Instant::now();
    std::thread::sleep(Duration::from_secs(grace_s + 5));
    let rounds = |k: u32| -> Result<u64> {
        Ok(c.stats(k)?["sensor_aae_rounds_total"].as_u64().unwrap_or(0))
    };
    let from: Vec<u64> = (1..=c.nodes).map(rounds).collect::<Result<_>>()?;
    let deadline = Instant::now() + Duration::from_secs(1200);
    loop {
        let now: Vec<u64> = (1..=c.nodes).map(rounds).collect::<Result<_>>()?;
        if now.iter().zip(&from).all(|(n, f)| *n >= f + 2) {
            println!(
                "scale: {} nodes: settled after {:.0} s",
                c.nodes,
                began.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("scale: anti-entropy rounds did not come in 20 minutes: {from:?} -> {now:?}");
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

struct Asked {
    day: Latency,
    month: Latency,
    answers: Vec<Answer>,
}

/// Every pick asked of the cluster (query i through node i mod N) and of
/// the single node, in turns of [`TURN`], the first to go alternating.
fn ask_in_turns(c: &Cluster, base: &Cluster, picks: &[Pick]) -> Result<(Asked, Asked)> {
    let mut conns: Vec<Conn> = c.addrs().into_iter().map(Conn::new).collect();
    let mut one = Conn::new(base.http(1));
    let mut lat = [(Vec::new(), Vec::new()), (Vec::new(), Vec::new())];
    let mut answers = [Vec::new(), Vec::new()];
    for (turn, chunk) in picks.chunks(TURN).enumerate() {
        for side in [turn % 2, 1 - turn % 2] {
            for (i, p) in chunk.iter().enumerate() {
                let conn = if side == 0 {
                    let k = (turn * TURN + i) % conns.len();
                    &mut conns[k]
                } else {
                    &mut one
                };
                let ms = queries::ask(Kind::Rill, conn, p, &mut answers[side])?;
                let (day, month) = &mut lat[side];
                if p.month { month } else { day }.push(ms);
            }
        }
    }
    let [(cd, cm), (bd, bm)] = lat;
    let [ca, ba] = answers;
    Ok((
        Asked {
            day: queries::latency(cd),
            month: queries::latency(cm),
            answers: ca,
        },
        Asked {
            day: queries::latency(bd),
            month: queries::latency(bm),
            answers: ba,
        },
    ))
}

fn report(r: &mut Report, samples: u64, base: &Row, rows: &[Row]) {
    let per_m = |cpu: f64| cpu / (samples as f64 / 1e6);
    let per_sample = |b: u64| b as f64 / samples as f64;
    println!(
        "{:>5} {:>12} {:>14} {:>14} {:>12} {:>12} {:>14}",
        "nodes",
        "samples/s",
        "CPU-s/M total",
        "CPU-s/M node",
        "net B/sample",
        "disk B/samp",
        "month p99 ms"
    );
    for row in std::iter::once(base).chain(rows) {
        println!(
            "{:>5} {:>12.0} {:>14.2} {:>14.2} {:>12.2} {:>12.3} {:>14.2}",
            row.nodes,
            row.samples_per_s,
            per_m(row.cpu_s),
            per_m(row.cpu_s) / row.nodes as f64,
            per_sample(row.net_bytes),
            per_sample(row.disk_bytes),
            row.month.p99_ms
        );
    }
    for row in std::iter::once(base).chain(rows) {
        let n = row.nodes;
        r.num(
            &format!("scale{n}_samples_per_s"),
            row.samples_per_s,
            &format!("{n} node(s): samples acknowledged per second (wall)"),
        );
        r.num(
            &format!("scale{n}_cpu_s_per_m"),
            per_m(row.cpu_s),
            &format!("{n} node(s): CPU-seconds per million samples, every node"),
        );
        r.num(
            &format!("scale{n}_cpu_s_per_m_per_node"),
            per_m(row.cpu_s) / n as f64,
            &format!("{n} node(s): CPU-seconds per million samples, per node"),
        );
        r.num(
            &format!("scale{n}_net_bytes_per_sample"),
            per_sample(row.net_bytes),
            &format!("{n} node(s): bytes sent between nodes per sample"),
        );
        r.num(
            &format!("scale{n}_disk_bytes_per_sample"),
            per_sample(row.disk_bytes),
            &format!("{n} node(s): bytes on disk per sample, every copy"),
        );
        if n == 1 {
            continue;
        }
        if let Some(cpu) = row.settle_cpu_s {
            r.num(
                &format!("scale{n}_settle_cpu_s_per_m"),
                per_m(cpu),
                &format!("{n} nodes: CPU-seconds per million samples while settling after the ingest (anti-entropy), every node"),
            );
        }
        r.num(
            &format!("scale{n}_month_p99_ms"),
            row.month.p99_ms,
            &format!("{n} nodes: one sensor over a month through any node, p99 ms"),
        );
        r.num(
            &format!("scale{n}_day_p99_ms"),
            row.day.p99_ms,
            &format!("{n} nodes: one sensor over a day through any node, p99 ms"),
        );
        let t = |target: &str| {
            if n == 3 {
                format!(" (target <= {target})")
            } else {
                String::new()
            }
        };
        r.num(
            &format!("scale{n}_cpu_vs_1"),
            row.cpu_s / base.cpu_s.max(1e-3),
            &format!(
                "{n} nodes (n_val 3)/single node (n_val 1): CPU per sample{}",
                t("3.75")
            ),
        );
        r.num(
            &format!("scale{n}_disk_vs_1"),
            row.disk_bytes as f64 / base.disk_bytes.max(1) as f64,
            &format!(
                "{n} nodes/single node: bytes on disk per sample{}",
                t("3.1")
            ),
        );
        r.num(
            &format!("scale{n}_month_p99_vs_1"),
            row.month.p99_ms / row.base_month.p99_ms.max(1e-6),
            &format!(
                "{n} nodes/single node: month query p99, asked in turns{}",
                t("1.5")
            ),
        );
        r.int(
            &format!("scale{n}_answers_compared"),
            row.compared as u64,
            &format!("{n} nodes: answers compared with the single node's"),
        );
        r.int(
            &format!("scale{n}_answers_equal"),
            row.equal as u64,
            &format!("{n} nodes: of them equal"),
        );
    }
}

/// `scale.csv` and its plot beside the phase's data.
fn write_csv(s: &Scale, samples: u64, base: &Row, rows: &[Row]) -> Result<()> {
    let mut csv = String::from(
        "nodes,samples_per_s,cpu_s_per_m_per_node,net_bytes_per_sample,disk_bytes_per_sample\n",
    );
    for row in std::iter::once(base).chain(rows) {
        let m = samples as f64 / 1e6;
        csv.push_str(&format!(
            "{},{:.0},{:.3},{:.3},{:.4}\n",
            row.nodes,
            row.samples_per_s,
            row.cpu_s / m / row.nodes as f64,
            row.net_bytes as f64 / samples as f64,
            row.disk_bytes as f64 / samples as f64
        ));
    }
    let path = s.dir.join("scale.csv");
    std::fs::write(&path, csv)?;
    println!("scale: figures in {}", path.display());
    if rows.is_empty() {
        return Ok(());
    }
    let panels = [
        crate::plot::Panel {
            column: "samples_per_s",
            label: "samples acknowledged/s",
            max: None,
        },
        crate::plot::Panel {
            column: "cpu_s_per_m_per_node",
            label: "CPU-s per M samples per node",
            max: None,
        },
        crate::plot::Panel {
            column: "disk_bytes_per_sample",
            label: "bytes on disk per sample",
            max: None,
        },
    ];
    match crate::plot::draw_over(
        &s.dir,
        "sensor-scale",
        &[("rill".into(), path)],
        &panels,
        ("nodes", "nodes"),
    ) {
        Ok(png) => println!("scale: plot in {}", png.display()),
        Err(e) => println!("scale: no plot: {e}"),
    }
    Ok(())
}

/// Ingest into `n` nodes with one killed at a third and started again at
/// two thirds; then every node must answer every sample exactly once.
fn kill_run(
    s: &Scale,
    n: u32,
    plan: &Plan,
    batches: &[(String, u64)],
    samples: u64,
    settings: &[String],
    r: &mut Report,
) -> Result<()> {
    println!("scale: {n} nodes, dev{n} killed during ingest");
    let dir = s.dir.join("scale-kill");
    let c = Cluster::up(&s.rill, &dir, n, s.base_port + 200, settings)?;
    let got = ingest(&c, batches, samples, s.clients, Some(n))?;
    let mut least = u64::MAX;
    let mut most = 0;
    for k in 1..=n {
        let counted = count(&c, k, plan)?;
        println!("scale: dev{k} answers {counted} of {samples} samples");
        least = least.min(counted);
        most = most.max(counted);
    }
    c.stop_and_measure()?;
    if !s.keep {
        std::fs::remove_dir_all(&dir).ok();
    }
    r.num(
        "kill_samples_per_s",
        samples as f64 / got.wall_s,
        &format!("{n} nodes, one killed and restarted: samples acknowledged per second"),
    );
    r.int(
        "kill_write_retries",
        got.retries,
        "writes sent again to another node (refused or cut by the kill)",
    );
    r.int(
        "kill_samples_missing",
        samples.saturating_sub(least),
        "acknowledged samples some node does not answer after the restart (must be 0)",
    );
    // A query merges replicas (a time held twice is answered once), so
    // this counts samples answered that were never written.
    r.int(
        "kill_samples_extra",
        most.saturating_sub(samples),
        "samples some node answers beyond those written (must be 0)",
    );
    if least != samples || most != samples {
        bail!("scale: after the kill, nodes answer {least} to {most} of {samples} samples");
    }
    Ok(())
}

/// How many samples node `k` answers for the whole plan: the sum over the
/// five fields of `count_over_time` over every series.
fn count(c: &Cluster, k: u32, plan: &Plan) -> Result<u64> {
    let mut conn = Conn::new(c.http(k));
    let at_s = plan.end_ms / 1000 + 60;
    let range_s = (plan.end_ms - plan.start_ms) / 1000 + 3600;
    let mut total = 0u64;
    for f in FIELDS {
        let q = format!("sum(count_over_time(iot_{f}[{range_s}s]))");
        let (st, body) = conn.request(
            "GET",
            &format!("/api/v1/query?query={}&time={at_s}", enc(&q)),
            b"",
        )?;
        let v: serde_json::Value = serde_json::from_slice(&body)?;
        if st != 200 || v["status"] != "success" || v["isPartial"] == true {
            bail!("dev{k}: {q}: {st} {v}");
        }
        let n = v["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|x| x.parse::<f64>().ok())
            .unwrap_or(0.0);
        total += n as u64;
    }
    Ok(total)
}
