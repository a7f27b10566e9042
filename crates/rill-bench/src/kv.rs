//! `rill-bench kv`: a load on any Riak-compatible PB endpoint, in the
//! spirit of basho_bench: a mix of gets, puts and deletes over a key
//! space drawn uniformly, sequentially or from a normal distribution, by
//! many concurrent clients for a fixed time. Per interval it prints ops/s
//! and latency percentiles (and writes them to CSV); it ends with one
//! JSON line of the whole run.

use crate::machine;
use crate::report::Report;
use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use rill_client::Client;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// PB endpoints, host:port, comma separated; clients spread over them.
    #[arg(long, default_value = "127.0.0.1:8087", value_delimiter = ',')]
    targets: Vec<String>,
    /// Operation mix as op:weight, e.g. get:10,put:1 (ops: get, put, delete).
    #[arg(long, default_value = "get:10,put:1")]
    mix: String,
    /// Keys in the key space.
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    /// How keys are drawn: uniform, sequential or normal (mean in the
    /// middle, standard deviation a sixth of the space).
    #[arg(long, default_value = "uniform")]
    key_dist: String,
    /// Value size in bytes.
    #[arg(long, default_value_t = 1024)]
    value_bytes: usize,
    /// Concurrent clients, one connection each.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Seconds to run.
    #[arg(long, default_value_t = 60)]
    duration_s: u64,
    /// Reporting interval.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Bucket to use.
    #[arg(long, default_value = "rill-bench")]
    bucket: String,
    /// Write every key once before measuring, so gets find values.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    preload: bool,
    /// Per-interval figures as CSV.
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
    /// Also get a small (1 KiB) key every this many ms while the load
    /// runs, and report its latency (0: no probe).
    #[arg(long, default_value_t = 0)]
    probe_ms: u64,
    /// Before the load, measure loopback TCP throughput for this many
    /// seconds: the physical bound on bytes moved (0: skip).
    #[arg(long, default_value_t = 0.0)]
    loopback_bound_s: f64,
    /// Nice value of the load's client threads (not the probe's): when
    /// the nodes share this machine's cores with the load, a positive
    /// value stands for clients on other machines, which would not take
    /// the nodes' CPU.
    #[arg(long, default_value_t = 0)]
    load_nice: i32,
    /// A short run for CI: 5 s, 8 clients, 2 000 keys.
    #[arg(long)]
    quick: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    Get,
    Put,
    Delete,
}

const OPS: [Op; 3] = [Op::Get, Op::Put, Op::Delete];

fn op_name(o: Op) -> &'static str {
    match o {
        Op::Get => "get",
        Op::Put => "put",
        Op::Delete => "delete",
    }
}

fn parse_mix(s: &str) -> Result<Vec<(Op, u32)>> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let (name, w) = part.split_once(':').context("mix entries are op:weight")?;
        let op = match name.trim() {
            "get" => Op::Get,
            "put" => Op::Put,
            "delete" => Op::Delete,
            other => bail!("unknown operation {other:?} in --mix (get, put, delete)"),
        };
        out.push((op, w.trim().parse().context("a weight is a whole number")?));
    }
    if out.iter().all(|(_, w)| *w == 0) {
        bail!("--mix needs at least one operation with a weight above 0");
    }
    Ok(out)
}

/// A small, fast generator per client (xorshift*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct KeyGen {
    dist: String,
    keys: u64,
    next_seq: u64,
}

impl KeyGen {
    fn key(&mut self, rng: &mut Rng) -> u64 {
        match self.dist.as_str() {
            "sequential" => {
                self.next_seq = (self.next_seq + 1) % self.keys;
                self.next_seq
            }
            "normal" => {
                // Box-Muller.
                let (u1, u2) = (rng.unit().max(1e-12), rng.unit());
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                let k = self.keys as f64 / 2.0 + z * self.keys as f64 / 6.0;
                (k.max(0.0) as u64).min(self.keys - 1)
            }
            _ => rng.next() % self.keys,
        }
    }
}

struct Interval {
    hist: Vec<Histogram<u64>>,
    errors: [u64; 3],
    /// Gets that found a value, and the value bytes gets and puts moved
    /// between clients and nodes.
    found: u64,
    value_bytes: u64,
}

impl Interval {
    fn new() -> Interval {
        Interval {
            hist: (0..3)
                .map(|_| Histogram::new_with_bounds(1, 60_000_000, 3).expect("bounds"))
                .collect(),
            errors: [0; 3],
            found: 0,
            value_bytes: 0,
        }
    }
}

pub fn run(mut a: Args) -> Result<()> {
    if a.quick {
        a.duration_s = a.duration_s.min(5);
        a.clients = a.clients.min(8);
        a.keys = a.keys.min(2000);
    }
    if a.keys == 0 || a.clients == 0 {
        bail!("--keys and --clients must be at least 1");
    }
    let mix = parse_mix(&a.mix)?;
    let total_weight: u32 = mix.iter().map(|(_, w)| w).sum();
    let m = machine::Machine::describe(std::path::Path::new("."));
    let machine_name = format!("{} ({} cores), {:.1} GiB RAM", m.cpu, m.cores, m.memory_gib);
    println!("machine: {machine_name}");
    println!(
        "kv: targets {}, mix {}, {} keys ({}), {} B values, {} clients, {} s",
        a.targets.join(","),
        a.mix,
        a.keys,
        a.key_dist,
        a.value_bytes,
        a.clients,
        a.duration_s
    );
    let mut seed_rng = Rng(0x9E37_79B9_7F4A_7C15 ^ std::process::id() as u64);
    let value: Arc<Vec<u8>> = Arc::new((0..a.value_bytes).map(|_| seed_rng.next() as u8).collect());
    let bucket = a.bucket.clone().into_bytes();
    if a.preload {
        let started = Instant::now();
        let next = Arc::new(AtomicU64::new(0));
        std::thread::scope(|s| -> Result<()> {
            let mut handles = Vec::new();
            for c in 0..a.clients {
                let (next, value, bucket) = (next.clone(), value.clone(), bucket.clone());
                let target = a.targets[c % a.targets.len()].clone();
                let keys = a.keys;
                handles.push(s.spawn(move || -> Result<()> {
                    let mut client = Client::connect(&target)
                        .with_context(|| format!("connecting to {target}"))?;
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= keys {
                            return Ok(());
                        }
                        // A node with too many large writes waiting answers
                        // busy; a client waits and retries, within a bound.
                        let key = format!("k{k:010}");
                        let give_up = Instant::now() + Duration::from_secs(120);
                        let mut pause = Duration::from_millis(10);
                        loop {
                            match client.put(
                                &bucket,
                                key.as_bytes(),
                                &value,
                                "application/octet-stream",
                            ) {
                                Ok(_) => break,
                                Err(e)
                                    if e.to_string().contains("busy")
                                        && Instant::now() < give_up =>
                                {
                                    std::thread::sleep(pause);
                                    pause = (pause * 2).min(Duration::from_secs(1));
                                }
                                Err(e) => return Err(e.into()),
                            }
                        }
                    }
                }));
            }
            for h in handles {
                h.join().expect("preload thread")?;
            }
            Ok(())
        })?;
        println!(
            "preloaded {} keys in {:.1} s",
            a.keys,
            started.elapsed().as_secs_f64()
        );
    }
    let loopback = if a.loopback_bound_s > 0.0 {
        let b = crate::kv_bound::loopback_bytes_s(a.loopback_bound_s)?;
        println!("loopback TCP bound: {:.0} MB/s", b / 1e6);
        Some(b)
    } else {
        None
    };
    let probe = if a.probe_ms > 0 {
        Some(crate::kv_bound::Probe::start(
            &a.targets[0],
            Duration::from_millis(a.probe_ms),
        )?)
    } else {
        None
    };
    let lo_before = crate::kv_bound::lo_bytes();
    let current = Arc::new(Mutex::new(Interval::new()));
    let total = Arc::new(Mutex::new(Interval::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut csv = match &a.csv {
        Some(p) => {
            let mut f =
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
            writeln!(f, "t_s,op,count,ops_s,p50_us,p95_us,p99_us,max_us,errors")?;
            Some(f)
        }
        None => None,
    };
    let started = Instant::now();
    let (mut measured, mut lo_after) = (0.0, None);
    std::thread::scope(|s| -> Result<()> {
        for c in 0..a.clients {
            let (current, stop, value, bucket) =
                (current.clone(), stop.clone(), value.clone(), bucket.clone());
            let target = a.targets[c % a.targets.len()].clone();
            let mix = mix.clone();
            let mut keygen = KeyGen {
                dist: a.key_dist.clone(),
                keys: a.keys,
                next_seq: (c as u64 * a.keys) / a.clients as u64,
            };
            let mut rng = Rng(0xDEAD_BEEF ^ (c as u64 + 1).wrapping_mul(0x9E37_79B9));
            let load_nice = a.load_nice;
            s.spawn(move || {
                if load_nice != 0 {
                    crate::kv_bound::renice_this_thread(load_nice);
                }
                let mut client = match Client::connect(&target) {
                    Ok(c) => c,
                    Err(e) => {
                        eprintln!("client {c}: cannot connect to {target}: {e}");
                        return;
                    }
                };
                while !stop.load(Ordering::Relaxed) {
                    let mut pick = (rng.next() % total_weight as u64) as u32;
                    let op = mix
                        .iter()
                        .find(|(_, w)| {
                            if pick < *w {
                                true
                            } else {
                                pick -= w;
                                false
                            }
                        })
                        .map(|(o, _)| *o)
                        .unwrap_or(Op::Get);
                    let key = format!("k{:010}", keygen.key(&mut rng));
                    let t = Instant::now();
                    let r = match op {
                        Op::Get => client.get_len(&bucket, key.as_bytes()),
                        Op::Put => client
                            .put(&bucket, key.as_bytes(), &value, "application/octet-stream")
                            .map(|()| Some(value.len())),
                        Op::Delete => client.delete(&bucket, key.as_bytes()).map(|()| None),
                    };
                    let us = t.elapsed().as_micros().max(1) as u64;
                    let i = OPS.iter().position(|o| *o == op).expect("op");
                    let mut cur = current.lock().unwrap_or_else(|e| e.into_inner());
                    match r {
                        Ok(moved) => {
                            let _ = cur.hist[i].record(us.min(60_000_000));
                            if let Some(n) = moved {
                                cur.value_bytes += n as u64;
                                cur.found += u64::from(op == Op::Get);
                            }
                        }
                        Err(e) => {
                            cur.errors[i] += 1;
                            if let rill_client::Error::Io(_) | rill_client::Error::Protocol(_) = e {
                                drop(cur);
                                if let Ok(c2) = Client::connect(&target) {
                                    client = c2;
                                }
                            }
                        }
                    }
                }
            });
        }
        let interval = Duration::from_millis(a.interval_ms.max(100));
        let deadline = started + Duration::from_secs(a.duration_s);
        let mut tick = started;
        while Instant::now() < deadline {
            tick += interval;
            std::thread::sleep(tick.saturating_duration_since(Instant::now()));
            let done = std::mem::replace(
                &mut *current.lock().unwrap_or_else(|e| e.into_inner()),
                Interval::new(),
            );
            let t_s = started.elapsed().as_secs_f64();
            let secs = interval.as_secs_f64();
            let mut line = format!("t {t_s:6.1} s");
            let mut tot = total.lock().unwrap_or_else(|e| e.into_inner());
            for (i, op) in OPS.iter().enumerate() {
                let h = &done.hist[i];
                if h.is_empty() && done.errors[i] == 0 {
                    continue;
                }
                line.push_str(&format!(
                    "  {} {:8.0}/s p50 {:6} p99 {:7} max {:7} us{}",
                    op_name(*op),
                    h.len() as f64 / secs,
                    h.value_at_quantile(0.5),
                    h.value_at_quantile(0.99),
                    h.max(),
                    if done.errors[i] > 0 {
                        format!(" errors {}", done.errors[i])
                    } else {
                        String::new()
                    }
                ));
                if let Some(f) = csv.as_mut() {
                    writeln!(
                        f,
                        "{t_s:.3},{},{},{:.1},{},{},{},{},{}",
                        op_name(*op),
                        h.len(),
                        h.len() as f64 / secs,
                        h.value_at_quantile(0.5),
                        h.value_at_quantile(0.95),
                        h.value_at_quantile(0.99),
                        h.max(),
                        done.errors[i]
                    )?;
                }
                tot.hist[i].add(h).expect("same bounds");
                tot.errors[i] += done.errors[i];
            }
            tot.found += done.found;
            tot.value_bytes += done.value_bytes;
            line.push_str(&format!(
                "  values {:.0} MB/s",
                done.value_bytes as f64 / secs / 1e6
            ));
            println!("{line}");
        }
        // The measured window ends at the last interval: operations still
        // running when it closes are not counted, nor the time they take.
        measured = (tick - started).as_secs_f64();
        lo_after = crate::kv_bound::lo_bytes();
        stop.store(true, Ordering::Relaxed);
        Ok(())
    })?;
    let elapsed = measured;
    let lo_moved = lo_before.zip(lo_after).map(|(a, b)| b.saturating_sub(a));
    let probe = probe.map(|p| p.finish());
    let tot = total.lock().unwrap_or_else(|e| e.into_inner());
    let mut report = Report::new("kv", a.quick);
    report.text("machine", &machine_name);
    report.text("targets", &a.targets.join(","));
    report.text("mix", &a.mix);
    report.text("key_dist", &a.key_dist);
    report.int("keys", a.keys, "keys");
    report.int("value_bytes", a.value_bytes as u64, "value bytes");
    report.int("clients", a.clients as u64, "clients");
    report.int(
        "load_nice",
        a.load_nice.max(0) as u64,
        "nice value of the load's client threads",
    );
    let all: u64 = tot.hist.iter().map(|h| h.len()).sum();
    report.num(
        "ops_s",
        all as f64 / elapsed,
        "operations per second, all kinds",
    );
    for (i, op) in OPS.iter().enumerate() {
        let h = &tot.hist[i];
        if h.is_empty() && tot.errors[i] == 0 {
            continue;
        }
        let n = op_name(*op);
        report.num(
            &format!("{n}_ops_s"),
            h.len() as f64 / elapsed,
            &format!("{n}s per second"),
        );
        report.int(
            &format!("{n}_p50_us"),
            h.value_at_quantile(0.5),
            &format!("{n} latency p50, us"),
        );
        report.int(
            &format!("{n}_p99_us"),
            h.value_at_quantile(0.99),
            &format!("{n} latency p99, us"),
        );
        report.int(
            &format!("{n}_max_us"),
            h.max(),
            &format!("{n} latency max, us"),
        );
        report.int(
            &format!("{n}_errors"),
            tot.errors[i],
            &format!("{n} errors"),
        );
    }
    let gets = tot.hist[0].len();
    if gets > 0 {
        report.num(
            "get_found_share",
            tot.found as f64 / gets as f64,
            "share of gets that found a value",
        );
    }
    report.num(
        "value_mb_s",
        tot.value_bytes as f64 / elapsed / 1e6,
        "value MB/s between clients and nodes (found gets and puts)",
    );
    if let Some(lo) = lo_moved {
        report.num(
            "loopback_moved_mb_s",
            lo as f64 / elapsed / 1e6,
            "MB/s the loopback interface carried (clients and nodes, all traffic)",
        );
    }
    if let Some(b) = loopback {
        report.num(
            "loopback_bound_mb_s",
            b / 1e6,
            "loopback TCP throughput of one connection, measured before the load",
        );
        if let Some(lo) = lo_moved {
            report.num(
                "moved_to_bound",
                lo as f64 / elapsed / b,
                "loopback MB/s during the run over the bound",
            );
        }
    }
    if let Some((h, errors)) = probe {
        report.int("probe_gets", h.len(), "small gets of the probe");
        report.int(
            "probe_p50_us",
            h.value_at_quantile(0.5),
            "small get p50, us",
        );
        report.int(
            "probe_p99_us",
            h.value_at_quantile(0.99),
            "small get p99, us",
        );
        report.int("probe_max_us", h.max(), "small get max, us");
        report.int("probe_errors", errors, "probe gets failed");
    }
    println!("{}", report.json());
    Ok(())
}
