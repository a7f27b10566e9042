//! `rill-bench mixed`: the workload of leveled's volume test ("Riak +
//! leveled - volume testing with 2i", Martin Sumner's mailing-list
//! report, 2017): per 122 operations, 100 GETs, 20 updates (half of them
//! replacing the object's index entries with four new ones) and 2 index
//! range queries returning their terms, on objects of 8 KB, with the data
//! larger than the memory the run may use. Per backend side by side in
//! one run: throughput and latency percentiles per interval, and what the
//! backend wrote: bytes written to the disk per byte put (from
//! /proc/self/io) and bytes on disk per live byte at the end.
//!
//! Engines: Rill's `leveled`, `leveldb` and `bitcask` backends (Bitcask
//! merged by the node's merge scheduler with Riak's classic policy), each
//! in a fresh directory, through the backend trait a vnode uses.

use crate::child;
use crate::ingest::fill;
use crate::limit::Limit;
use crate::report::Report;
use crate::stores::{self, open, Store};
use anyhow::{bail, Result};
use figures::{compare, figures, report, write_csv, Figures, Interval, Sampled};
use rill_backend::{IndexEntry, Term};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// Engines to run, in order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "leveled,leveldb,rocksdb,bitcask"
    )]
    engines: Vec<String>,
    /// Objects loaded before the mix (default 600 thousand, 4.9 GB; 5
    /// thousand with --quick).
    #[arg(long)]
    keys: Option<u64>,
    /// Bytes per object.
    #[arg(long, default_value_t = 8000)]
    value_bytes: usize,
    /// Seconds of the mix per engine (default 900; 10 with --quick).
    #[arg(long)]
    seconds: Option<u64>,
    /// Worker threads.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Length of an interval, s (default 30; 1 with --quick).
    #[arg(long)]
    interval_s: Option<u64>,
    /// Memory the run may use, MiB, page cache included (a memory
    /// cgroup); 0 for no limit (default 2048; 0 with --quick).
    #[arg(long)]
    memory_limit_mib: Option<u64>,
    /// The LSM engines' budget for block cache and write buffers, percent
    /// of the memory limit (Riak's default share is 70; the runs on
    /// record use 50, since at 70 fjall's memtables, which Rill did not
    /// yet hold to their cap, took a run past a 1 GiB limit).
    #[arg(long, default_value_t = 50)]
    engine_memory_percent: u64,
    /// Scratch directory (each engine's data is removed after its run).
    #[arg(long, default_value = "bench-data/mixed")]
    dir: PathBuf,
    /// Where the CSV files and the plot go.
    #[arg(long, default_value = "bench-results/mixed")]
    out: PathBuf,
    /// A short run for CI.
    #[arg(long)]
    quick: bool,
    /// Run the one engine named in this process (how the run starts each
    /// engine) and leave its figures in the output directory.
    #[arg(long, hide = true)]
    child: bool,
}

fn key(i: u64) -> Vec<u8> {
    format!("obj{i:010}").into_bytes()
}

/// The four terms of key `i`'s index generation `g` (0: none), spread
/// over the term space so a range query finds some.
fn terms(i: u64, g: u32) -> Vec<IndexEntry> {
    if g == 0 {
        return Vec::new();
    }
    (0..4u64)
        .map(|n| {
            let x = (i ^ (u64::from(g) << 20) ^ (n << 40)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            (
                b"idx_bin".to_vec(),
                Term::Bin(format!("t{:08}", x % 100_000_000).into_bytes()),
            )
        })
        .collect()
}

/// An object: half random bytes, half a repeated text (about 2:1 under
/// LZ4, as JSON documents are).
fn value(buf: &mut [u8], seed: u64) {
    let half = buf.len() / 2;
    fill(&mut buf[..half], seed | 1);
    const TEXT: &[u8] = b"{\"sensor\":\"temperature\",\"unit\":\"C\"} ";
    for (j, b) in buf[half..].iter_mut().enumerate() {
        *b = TEXT[j % TEXT.len()];
    }
}

/// A head as a vnode would keep it beside the value (clock and metadata).
const HEAD: [u8; 160] = [0x5a; 160];

struct Xorshift(u64);
impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

mod figures;

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Get,
    Update,
    Query,
}

/// Bytes this process has caused to be read from and written to
/// storage (page-cache misses and write-back, from /proc/self/io).
fn io_bytes() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (field("read_bytes: "), field("write_bytes: "))
}

fn written_bytes() -> u64 {
    io_bytes().1
}

/// This process's CPU time (user and system) and the machine's idle and
/// I/O-wait time, all in clock ticks (/proc/self/stat, /proc/stat).
fn cpu_ticks() -> (u64, u64, u64) {
    let own = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the command's closing parenthesis; utime and
            // stime are the 14th and 15th of the whole line.
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split(' ').collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0);
    let (idle, iowait) = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            let f: Vec<u64> = s
                .lines()
                .next()?
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            Some((*f.get(3)?, *f.get(4)?))
        })
        .unwrap_or((0, 0));
    (own, idle, iowait)
}

/// This process's major page faults (/proc/self/stat).
fn major_faults() -> u64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 2..];
            rest.split(' ').nth(9)?.parse().ok()
        })
        .unwrap_or(0)
}

/// The memory cgroup this process is in, as its `memory.stat` file
/// (cgroup v1's memory controller or the v2 unified tree).
fn cgroup_stat_file() -> Option<std::path::PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let v1 = text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
        ctl.split(',')
            .any(|c| c == "memory")
            .then(|| format!("/sys/fs/cgroup/memory{path}/memory.stat"))
    });
    let v2 = || {
        text.lines()
            .find_map(|l| l.strip_prefix("0::"))
            .map(|path| format!("/sys/fs/cgroup{path}/memory.stat"))
    };
    let file = std::path::PathBuf::from(v1.or_else(v2)?);
    file.exists().then_some(file)
}

/// The cgroup's page cache in bytes and the pages it has given back so
/// far (v1 `cache`, `pgpgout`; v2 `file`, `pgsteal`: reclaim and frees).
fn cgroup_memory(file: Option<&std::path::Path>) -> (u64, u64) {
    let Some(text) = file.and_then(|f| std::fs::read_to_string(f).ok()) else {
        return (0, 0);
    };
    let field = |names: &[&str]| {
        text.lines()
            .find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                names.contains(&k).then(|| v.trim().parse().ok()).flatten()
            })
            .unwrap_or(0)
    };
    (field(&["cache", "file"]), field(&["pgpgout", "pgsteal"]))
}

/// Samples the disk traffic and the engine's write pressure every 100 ms
/// into per-interval totals and maxima until `stop` is set.
fn watch(
    s: &Shared,
    start: Instant,
    every: Duration,
    slots: usize,
    stop: &AtomicBool,
) -> Vec<Sampled> {
    let mut out: Vec<Sampled> = (0..slots).map(|_| Sampled::default()).collect();
    let mut last = io_bytes();
    let mut last_cpu = cpu_ticks();
    let cgroup = cgroup_stat_file();
    let mut last_faults = major_faults();
    let mut last_out = cgroup_memory(cgroup.as_deref()).1;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        let slot = ((start.elapsed().as_nanos() / every.as_nanos()) as usize).min(slots - 1);
        let now = io_bytes();
        let cpu = cpu_ticks();
        let o = &mut out[slot];
        o.read_bytes += now.0.saturating_sub(last.0);
        o.write_bytes += now.1.saturating_sub(last.1);
        o.cpu_ticks += cpu.0.saturating_sub(last_cpu.0);
        o.idle_ticks += cpu.1.saturating_sub(last_cpu.1);
        o.iowait_ticks += cpu.2.saturating_sub(last_cpu.2);
        let faults = major_faults();
        o.major_faults += faults.saturating_sub(last_faults);
        let (cache, given_back) = cgroup_memory(cgroup.as_deref());
        o.cache_min = if o.cache_min == 0 {
            cache
        } else {
            o.cache_min.min(cache)
        };
        o.pages_out += given_back.saturating_sub(last_out);
        last = now;
        last_cpu = cpu;
        last_faults = faults;
        last_out = given_back;
        if let Some(p) = s.b.pressure() {
            o.l0_runs = o.l0_runs.max(p.l0_runs);
            o.sealed = o.sealed.max(p.sealed_memtables);
        }
    }
    out
}

struct Shared<'a> {
    b: &'a dyn Store,
    keys: u64,
    value_bytes: usize,
    /// Each key's index generation, under its lock (an update reads it,
    /// removes those terms and adds the next generation's).
    gens: Vec<Mutex<u32>>,
    put_bytes: AtomicU64,
}

impl Shared<'_> {
    fn update(&self, i: u64, reindex: bool, buf: &mut [u8], seed: u64) -> Result<()> {
        let k = key(i);
        let mut g = self.gens[i as usize].lock().expect("no panics");
        // A vnode reads before it writes: the update carries the clock
        // its client read, so a vnode on leveled reads the head only
        // (rill-node's `Vnode::update`).
        self.b.read_for_update(&k)?;
        value(buf, seed);
        let (add, remove) = if reindex {
            (terms(i, *g + 1), terms(i, *g))
        } else {
            (Vec::new(), Vec::new())
        };
        self.b.update(&k, buf, &HEAD, &add, &remove)?;
        if reindex {
            *g += 1;
        }
        self.put_bytes
            .fetch_add(self.value_bytes as u64, Ordering::Relaxed);
        Ok(())
    }

    fn query(&self, rng: &mut Xorshift) -> Result<u64> {
        let lo = rng.next() % 100_000_000;
        let (lo, hi) = (format!("t{lo:08}"), format!("t{:08}", lo + 100_000));
        self.b.query(b"idx_bin", lo.as_bytes(), hi.as_bytes(), 100)
    }
}

/// Loads every key with its first index generation.
fn load(s: &Shared, threads: usize) -> Result<()> {
    let next = AtomicU64::new(0);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> Result<()> {
                    let mut buf = vec![0u8; s.value_bytes];
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= s.keys {
                            return Ok(());
                        }
                        s.update(i, true, &mut buf, i.wrapping_mul(0x2545_f491_4f6c_dd1d))?;
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().expect("a loader panicked"))
    })
}

/// The mix for `run_for`, in intervals of `every`.
fn mix(
    s: &Shared,
    threads: usize,
    run_for: Duration,
    every: Duration,
) -> Result<(Vec<Interval>, Vec<Sampled>)> {
    let start = Instant::now();
    let stop = AtomicBool::new(false);
    let slots = (run_for.as_nanos() / every.as_nanos()) as usize + 1;
    let (per, mut sampled) = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| watch(s, start, every, slots, &stop));
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let stop = &stop;
                scope.spawn(move || -> Result<Vec<Interval>> {
                    let mut mine: Vec<Interval> = (0..slots).map(|_| Interval::new()).collect();
                    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15 ^ (t as u64 + 1) << 32);
                    let mut buf = vec![0u8; s.value_bytes];
                    while !stop.load(Ordering::Relaxed) {
                        let r = rng.next();
                        let op = match r % 122 {
                            0..=99 => Op::Get,
                            100..=119 => Op::Update,
                            _ => Op::Query,
                        };
                        let i = (r >> 8) % s.keys;
                        let began = Instant::now();
                        match op {
                            Op::Get => drop(s.b.get(&key(i))?),
                            Op::Update => s.update(i, (r >> 7) & 1 == 1, &mut buf, r)?,
                            Op::Query => drop(s.query(&mut rng)?),
                        }
                        let done = Instant::now();
                        let at = done.duration_since(start);
                        if at >= run_for {
                            stop.store(true, Ordering::Relaxed);
                            break;
                        }
                        let slot = (at.as_nanos() / every.as_nanos()) as usize;
                        let us = done.duration_since(began).as_micros().max(1) as u64;
                        mine[slot].of(op).saturating_record(us);
                    }
                    Ok(mine)
                })
            })
            .collect();
        let per: Vec<Result<Vec<Interval>>> = workers
            .into_iter()
            .map(|w| w.join().expect("a worker panicked"))
            .collect();
        stop.store(true, Ordering::Relaxed);
        (per, watcher.join().expect("the watcher panicked"))
    });
    let mut all: Vec<Interval> = (0..slots).map(|_| Interval::new()).collect();
    for r in per {
        for (i, iv) in r?.iter().enumerate() {
            all[i].add(iv);
        }
    }
    // The last slot is the part of an interval past the end.
    let whole = (run_for.as_nanos() / every.as_nanos()).max(1) as usize;
    all.truncate(whole);
    sampled.truncate(whole);
    Ok((all, sampled))
}

/// The run's sizes, from the arguments and their defaults.
struct Plan {
    keys: u64,
    run_for: Duration,
    every: Duration,
}

impl Args {
    fn plan(&self) -> Plan {
        let quick = self.quick;
        Plan {
            keys: self.keys.unwrap_or(if quick { 5_000 } else { 600_000 }),
            run_for: Duration::from_secs(self.seconds.unwrap_or(if quick { 10 } else { 900 })),
            every: Duration::from_secs(
                self.interval_s.unwrap_or(if quick { 1 } else { 30 }).max(1),
            ),
        }
    }

    fn figures_file(&self, engine: &str) -> PathBuf {
        self.out.join(format!("mixed-{engine}.figures"))
    }
}

pub fn run(args: Args) -> Result<()> {
    if args.child {
        return child(&args);
    }
    let plan = args.plan();
    let limit = Limit::prepare(
        &args.dir,
        &args.out,
        args.memory_limit_mib,
        args.quick,
        "rill-mixed",
    )?;
    let live = plan.keys * args.value_bytes as u64;
    println!(
        "mixed: {} objects of {} bytes ({:.2} GB), GET:update:2i = 100:20:2, {} workers, {} s per engine, memory {}",
        plan.keys,
        args.value_bytes,
        live as f64 / 1e9,
        args.threads,
        plan.run_for.as_secs(),
        limit.describe(live)
    );
    let mut r = Report::new("mixed", args.quick);
    r.int("keys", plan.keys, "objects per engine");
    r.int("value_bytes", args.value_bytes as u64, "bytes per object");
    r.int(
        "seconds",
        plan.run_for.as_secs(),
        "seconds of the mix per engine",
    );
    let mut csvs = Vec::new();
    let mut all = Vec::new();
    for engine in &args.engines {
        let f = spawn(&args, engine, limit.bytes)?;
        csvs.push((engine.clone(), args.out.join(format!("mixed-{engine}.csv"))));
        report(&mut r, &f);
        all.push(f);
    }
    compare(&mut r, &all);
    let panel = |column, label| crate::plot::Panel {
        column,
        label,
        max: None,
    };
    let panels = [
        panel("ops_per_s", "operations/s"),
        panel("put_p99_ms", "update p99, ms"),
        panel("get_p99_ms", "GET p99, ms"),
        panel("query_p99_ms", "2i range p99, ms"),
    ];
    match crate::plot::draw(&args.out, "mixed", &csvs, &panels) {
        Ok(png) => println!("plot: {}", png.display()),
        Err(e) => eprintln!("no plot: {e:#}"),
    }
    println!("{}", r.json());
    Ok(())
}

/// Runs `engine` in a process of its own and reads back its figures.
fn spawn(args: &Args, engine: &str, memory: Option<u64>) -> Result<Figures> {
    let plan = args.plan();
    let file = args.figures_file(engine);
    let _ = std::fs::remove_file(&file);
    let mut argv = vec!["mixed".to_string(), "--child".into()];
    argv.extend(child::flags(&[
        ("--engines", engine.to_string()),
        ("--keys", plan.keys.to_string()),
        ("--value-bytes", args.value_bytes.to_string()),
        ("--seconds", plan.run_for.as_secs().to_string()),
        ("--threads", args.threads.to_string()),
        ("--interval-s", plan.every.as_secs().to_string()),
        (
            "--memory-limit-mib",
            (memory.unwrap_or(0) >> 20).to_string(),
        ),
        (
            "--engine-memory-percent",
            args.engine_memory_percent.to_string(),
        ),
        ("--dir", args.dir.display().to_string()),
        ("--out", args.out.display().to_string()),
    ]));
    if args.quick {
        argv.push("--quick".into());
    }
    child::run(engine, &argv)?;
    Figures::from_numbers(engine, &child::read(&file, 7)?)
}

/// One engine's run, in this process: load, mix, figures to a file.
fn child(args: &Args) -> Result<()> {
    let [engine] = &args.engines[..] else {
        bail!("a child process runs one engine");
    };
    let plan = args.plan();
    let budget = stores::budget(args.memory_limit_mib, args.engine_memory_percent);
    let dir = args.dir.join(engine);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let e = open(engine, &dir, budget)?;
    let s = Shared {
        b: e.as_ref(),
        keys: plan.keys,
        value_bytes: args.value_bytes,
        gens: (0..plan.keys).map(|_| Mutex::new(0)).collect(),
        put_bytes: AtomicU64::new(0),
    };
    let began = Instant::now();
    load(&s, args.threads)?;
    println!(
        "{engine}: loaded in {:.1} s; mixing",
        began.elapsed().as_secs_f64()
    );
    let (written0, put0) = (written_bytes(), s.put_bytes.load(Ordering::Relaxed));
    let (intervals, sampled) = mix(&s, args.threads, plan.run_for, plan.every)?;
    let written = written_bytes() - written0;
    let put = s.put_bytes.load(Ordering::Relaxed) - put0;
    let disk = e.disk_bytes()?;
    if let Some(what) = e.background() {
        println!("{engine}: {what}");
    }
    let live = plan.keys * args.value_bytes as u64;
    let f = figures(engine, &intervals, plan.every, written, put, disk, live);
    write_csv(&args.out, engine, &intervals, &sampled, plan.every)?;
    child::write(&args.figures_file(engine), &f.numbers())?;
    drop(s);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
