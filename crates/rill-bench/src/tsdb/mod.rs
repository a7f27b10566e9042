//! `rill-bench tsdb`: the sensor-data service against VictoriaMetrics and
//! InfluxDB (Debian's packages), each started by the benchmark on
//! loopback and given the same seeded line protocol over HTTP (IoT-like:
//! many sensors, five fields, random walks at realistic precision, some
//! samples missing and some late). Side by side in one run: samples of
//! ingest per CPU-second of the server process (from /proc), bytes per
//! sample on disk once each has flushed and merged, latency p50/p99 of
//! one sensor over a day and over a month at 1,000 points, and whether
//! Rill and VictoriaMetrics answer those queries alike. Each system
//! ingests alone; the queries are then asked of the systems in turns of
//! 250, so that a slow stretch of the machine falls on each alike. Before the
//! servers, the value codecs are compared on the same data and on
//! real-shaped series (`codecs`); after them, an aggregation over 1,000
//! series of a day, Rill against VictoriaMetrics (`sum`), and Rill keeps
//! a short storage period under endless ingest, and merges read next to
//! nothing (`live`). Last, the sensor-data paper's scaling experiment
//! on devrels of 1, 2, 3 and 5 nodes, and a node killed during ingest
//! (`scale`).

mod codecs;
mod devrel;
mod gen;
mod http;
mod live;
mod queries;
mod scale;
mod sum;
mod systems;

use crate::report::Report;
use anyhow::{bail, Result};
use gen::Plan;
use http::Conn;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use systems::{Kind, System};

#[derive(clap::Args)]
pub struct Args {
    /// Systems to run, in order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "rill,victoriametrics,influxdb"
    )]
    systems: Vec<String>,
    /// Sensors (five fields each; default 200, 20 with --quick).
    #[arg(long)]
    sensors: Option<usize>,
    /// Days of data, ending now (default 30, 2 with --quick).
    #[arg(long)]
    days: Option<u64>,
    /// Seconds between a sensor's samples.
    #[arg(long, default_value_t = 60)]
    interval_s: u64,
    /// Seed of the data and of the sensors queried.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Concurrent writers.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Lines per write request (five samples a line).
    #[arg(long, default_value_t = 1000)]
    batch_lines: usize,
    /// Queries of each kind per system (default 1,000, so that a p99 is
    /// the tenth slowest, not one hiccup of the machine; 10 with --quick).
    #[arg(long)]
    queries: Option<usize>,
    /// Settings for the Rill node beyond the benchmark's own, as
    /// `key=value` (repeatable; e.g. `--rill-set sensor.window=1d`).
    #[arg(long)]
    rill_set: Vec<String>,
    /// The `rill` binary to run (default: the one beside rill-bench).
    #[arg(long)]
    rill_bin: Option<PathBuf>,
    /// Scratch directory (each system's data is removed after its run).
    #[arg(long, default_value = "bench-data/tsdb")]
    dir: PathBuf,
    /// Keep each system's data directory (to look at what it wrote).
    #[arg(long)]
    keep: bool,
    /// Seconds of the live phase, Rill's storage period under endless
    /// ingest (default 180, 30 with --quick; 0 leaves it out).
    #[arg(long)]
    live_s: Option<u64>,
    /// Aggregations over every counter series asked of Rill and of
    /// VictoriaMetrics in the sum phase (default a fifth of --queries,
    /// at least 5; 0 leaves the phase out). Its series: five a sensor.
    #[arg(long)]
    sum_queries: Option<usize>,
    /// Cluster sizes of the scaling phase, devrels of `rill devrel`
    /// (default 1,2,3,5; 1,3 with --quick; 1 is the single node with one
    /// copy that every size is compared with).
    #[arg(long, value_delimiter = ',')]
    scale_nodes: Option<Vec<u32>>,
    /// Leave the scaling phase out.
    #[arg(long, conflicts_with = "scale_only")]
    no_scale: bool,
    /// Run the scaling phase only (no other system, no single-node
    /// phases).
    #[arg(long)]
    scale_only: bool,
    /// Leave out the scaling phase's run with a node killed.
    #[arg(long)]
    scale_no_kill: bool,
    /// Ask a devrel's queries right after its ingest, not once the
    /// slices written have settled (`sensor.grace` after the last write)
    /// and every node has done two anti-entropy rounds since, which keep
    /// their digests: the steady state queries meet (no wait with
    /// --quick).
    #[arg(long)]
    scale_no_settle: bool,
    /// The scaling phase's devrels listen from this port up (the single
    /// node's, then base + 100 for a cluster, base + 200 for the kill).
    #[arg(long, default_value_t = 23000)]
    scale_base_port: u16,
    /// A short run for CI.
    #[arg(long)]
    quick: bool,
}

/// What one system did.
struct Outcome {
    kind: Kind,
    samples: u64,
    ingest_s: f64,
    ingest_cpu_s: f64,
    settle_cpu_s: f64,
    retries: u64,
    disk_bytes: u64,
    rss_bytes: u64,
    day: queries::Latency,
    month: queries::Latency,
    answers: Vec<queries::Answer>,
}

pub fn run(args: Args) -> Result<()> {
    let quick = args.quick;
    let sensors = args.sensors.unwrap_or(if quick { 20 } else { 200 });
    let days = args.days.unwrap_or(if quick { 2 } else { 30 });
    let reps = args.queries.unwrap_or(if quick { 10 } else { 1000 });
    let kinds: Vec<Kind> = args
        .systems
        .iter()
        .map(|s| Kind::parse(s))
        .collect::<Result<_>>()?;
    std::fs::create_dir_all(&args.dir)?;
    crate::machine::Machine::describe(&args.dir).print();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    // Whole minutes, ending a minute ago (every system has taken it).
    let end_ms = (now_ms / 60_000 - 1) * 60_000;
    let plan = Plan {
        sensors,
        start_ms: end_ms - days as i64 * 86_400_000,
        end_ms,
        interval_ms: args.interval_s as i64 * 1000,
        seed: args.seed,
    };
    let mut batches: Vec<(String, u64)> = Vec::new();
    gen::generate(&plan, args.batch_lines, |b, n| batches.push((b, n)));
    let samples: u64 = batches.iter().map(|b| b.1).sum();
    let bytes: usize = batches.iter().map(|b| b.0.len()).sum();
    println!(
        "tsdb: {sensors} sensors x {} fields, {days} days at {} s: {samples} samples in {} requests ({:.0} MB of line protocol), {} writers",
        gen::FIELDS.len(),
        args.interval_s,
        batches.len(),
        bytes as f64 / 1e6,
        args.clients
    );
    let mut r = Report::new("tsdb", quick);
    r.int("samples", samples, "samples written to each system");
    let picks = queries::picks(&plan, reps);
    if !args.scale_only {
        single_nodes(&args, kinds, &batches, samples, &picks, &mut r)?;
    }
    if !args.no_scale {
        let s = scale::Scale {
            nodes: args.scale_nodes.clone().unwrap_or(if quick {
                vec![1, 3]
            } else {
                vec![1, 2, 3, 5]
            }),
            dir: args.dir.clone(),
            base_port: args.scale_base_port,
            rill: systems::rill_bin(args.rill_bin.as_deref())?,
            settings: args.rill_set.clone(),
            clients: args.clients,
            kill: !args.scale_no_kill,
            keep: args.keep,
            settle: !(quick || args.scale_no_settle),
        };
        scale::run(&s, &plan, &batches, samples, &picks, &mut r)?;
    }
    println!("{}", r.json());
    Ok(())
}

/// Each system alone on one node: ingest, queries, the sum and live
/// phases.
fn single_nodes(
    args: &Args,
    kinds: Vec<Kind>,
    batches: &[(String, u64)],
    samples: u64,
    picks: &[queries::Pick],
    r: &mut Report,
) -> Result<()> {
    let quick = args.quick;
    let sensors = args.sensors.unwrap_or(if quick { 20 } else { 200 });
    let reps = args.queries.unwrap_or(if quick { 10 } else { 1000 });
    codecs::run(batches, r);
    // Each system takes the data alone (its CPU and the machine to
    // itself), then stays up, idle, while the others take theirs.
    let mut ingested = Vec::new();
    for kind in kinds {
        ingested.push(ingest(kind, args, batches, samples)?);
    }
    // The kernel's writeback of what ingest wrote, done before the
    // queries (else it takes CPU from whichever query it meets).
    unsafe { libc::sync() };
    let systems: Vec<&System> = ingested.iter().map(|(s, _)| s).collect();
    let asked = queries::run(&systems, picks)?;
    let mut outcomes = Vec::new();
    for ((sys, mut o), a) in ingested.into_iter().zip(asked) {
        o.rss_bytes = sys.rss_bytes();
        o.disk_bytes = sys.stop_and_measure()?;
        if !args.keep {
            let _ = std::fs::remove_dir_all(args.dir.join(o.kind.name()));
        }
        (o.day, o.month, o.answers) = (a.day, a.month, a.answers);
        outcomes.push(o);
    }
    report(r, &outcomes);
    let sum_reps = args.sum_queries.unwrap_or((reps / 5).max(5));
    let both = |k: Kind| outcomes.iter().any(|o| o.kind == k);
    if sum_reps > 0 && both(Kind::Rill) && both(Kind::Vm) {
        sum::run(
            sensors,
            sum_reps,
            &args.dir,
            args.rill_bin.as_deref(),
            &rill_extra(args),
            args.seed,
            r,
        )?;
    }
    let live_s = args.live_s.unwrap_or(if quick { 30 } else { 180 });
    if live_s > 0 && outcomes.iter().any(|o| o.kind == Kind::Rill) {
        live::run(
            &live::Live::new(live_s, quick),
            &args.dir.join("rill-live"),
            args.rill_bin.as_deref(),
            &rill_extra(args),
            r,
        )?;
        if !args.keep {
            let _ = std::fs::remove_dir_all(args.dir.join("rill-live"));
        }
    }
    Ok(())
}

/// The `--rill-set` settings as config lines.
fn rill_extra(args: &Args) -> String {
    args.rill_set
        .iter()
        .map(|kv| format!("{}\n", kv.replacen('=', " = ", 1)))
        .collect()
}

/// Starts `kind` and has it take every batch, flush and merge; returns
/// it still running, and what it did so far.
fn ingest(
    kind: Kind,
    args: &Args,
    batches: &[(String, u64)],
    samples: u64,
) -> Result<(System, Outcome)> {
    let dir = args.dir.join(kind.name());
    let sys = System::start(kind, &dir, args.rill_bin.as_deref(), &rill_extra(args))?;
    let cpu0 = sys.cpu_seconds();
    let began = Instant::now();
    let next = AtomicUsize::new(0);
    let retries = AtomicU64::new(0);
    let failed: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..args.clients.max(1) {
            s.spawn(|| {
                let mut c = Conn::new(sys.addr);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((body, _)) = batches.get(i) else {
                        return;
                    };
                    loop {
                        match c.request("POST", sys.write_path(), body.as_bytes()) {
                            Ok((204, _)) => break,
                            Ok((429 | 503, _)) => {
                                retries.fetch_add(1, Ordering::Relaxed);
                                std::thread::sleep(Duration::from_millis(100));
                            }
                            Ok((st, b)) => {
                                *failed.lock().unwrap() =
                                    Some(format!("{st}: {}", String::from_utf8_lossy(&b)));
                                next.store(usize::MAX / 2, Ordering::Relaxed);
                                return;
                            }
                            Err(e) => {
                                *failed.lock().unwrap() = Some(e.to_string());
                                next.store(usize::MAX / 2, Ordering::Relaxed);
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = failed.into_inner().unwrap() {
        bail!("{}: a write failed: {e}", kind.name());
    }
    let ingest_s = began.elapsed().as_secs_f64();
    // What ingest left to write in memory is ingest's work too.
    sys.drain()?;
    let ingest_cpu_s = sys.cpu_seconds() - cpu0;
    println!(
        "{}: {samples} samples in {ingest_s:.1} s ({:.0}/s), {ingest_cpu_s:.1} CPU-s of the server; settling",
        kind.name(),
        samples as f64 / ingest_s
    );
    sys.settle()?;
    let settle_cpu_s = sys.cpu_seconds() - cpu0 - ingest_cpu_s;
    // Its writeback done before the next system's ingest.
    unsafe { libc::sync() };
    let o = Outcome {
        kind,
        samples,
        ingest_s,
        ingest_cpu_s,
        settle_cpu_s,
        retries: retries.into_inner(),
        disk_bytes: 0,
        rss_bytes: 0,
        day: queries::Latency::default(),
        month: queries::Latency::default(),
        answers: Vec::new(),
    };
    Ok((sys, o))
}

fn report(r: &mut Report, outcomes: &[Outcome]) {
    for o in outcomes {
        let n = o.kind.name();
        r.num(
            &format!("{n}_ingest_samples_per_s"),
            o.samples as f64 / o.ingest_s,
            &format!("{n}: samples/s of ingest (wall)"),
        );
        r.num(
            &format!("{n}_samples_per_cpu_s"),
            o.samples as f64 / o.ingest_cpu_s.max(0.01),
            &format!("{n}: samples per server CPU-second of ingest"),
        );
        r.num(
            &format!("{n}_settle_cpu_s"),
            o.settle_cpu_s,
            &format!("{n}: server CPU-seconds flushing and merging after"),
        );
        r.int(
            &format!("{n}_write_retries"),
            o.retries,
            &format!("{n}: writes answered 429/503 and sent again"),
        );
        r.num(
            &format!("{n}_bytes_per_sample"),
            o.disk_bytes as f64 / o.samples as f64,
            &format!("{n}: bytes on disk per sample"),
        );
        r.num(
            &format!("{n}_rss_mb"),
            o.rss_bytes as f64 / 1e6,
            &format!("{n}: server resident memory after the queries, MB"),
        );
        for (what, l) in [("day", &o.day), ("month", &o.month)] {
            r.num(
                &format!("{n}_{what}_p50_ms"),
                l.p50_ms,
                &format!("{n}: one sensor over a {what}, p50 ms"),
            );
            r.num(
                &format!("{n}_{what}_p99_ms"),
                l.p99_ms,
                &format!("{n}: one sensor over a {what}, p99 ms"),
            );
        }
    }
    let find = |k: Kind| outcomes.iter().find(|o| o.kind == k);
    if let (Some(rill), Some(vm)) = (find(Kind::Rill), find(Kind::Vm)) {
        let per_cpu = |o: &Outcome| o.samples as f64 / o.ingest_cpu_s.max(0.01);
        r.num(
            "bytes_per_sample_vs_vm",
            rill.disk_bytes as f64 / vm.disk_bytes.max(1) as f64,
            "Rill/VictoriaMetrics bytes per sample (target <= 1)",
        );
        r.num(
            "ingest_per_cpu_vs_vm",
            per_cpu(rill) / per_cpu(vm),
            "Rill/VictoriaMetrics ingest per CPU-second (target >= 1.25)",
        );
        r.num(
            "month_p99_vs_vm",
            rill.month.p99_ms / vm.month.p99_ms.max(1e-6),
            "Rill/VictoriaMetrics month query p99 (target <= 0.5)",
        );
        let (same, total, worst) = queries::compare(&rill.answers, &vm.answers);
        r.int(
            "answers_compared",
            total as u64,
            "queries whose answers were compared with VictoriaMetrics'",
        );
        r.int(
            "answers_equal",
            same as u64,
            "of them equal (points, values within 1e-9)",
        );
        if let Some(w) = worst {
            println!("first difference: {w}");
        }
    }
    if let (Some(rill), Some(influx)) = (find(Kind::Rill), find(Kind::Influx)) {
        r.num(
            "bytes_per_sample_vs_influxdb",
            rill.disk_bytes as f64 / influx.disk_bytes.max(1) as f64,
            "Rill/InfluxDB bytes per sample",
        );
    }
}
