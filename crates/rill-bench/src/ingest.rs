//! `rill-bench ingest`: sequential keys loaded as fast as the store takes
//! them, per backend side by side in one run, with throughput and the
//! maximum latency of every interval. Basho's test of LevelDB stalls
//! ("LevelDB in Riak 1.2": 10 million sequentially ordered keys preloaded
//! by basho_bench; Riak 1.1's LevelDB stalled 10-90 s every few minutes).
//!
//! Engines: `rocksdb` (the system's librocksdb, its defaults), `leveldb`
//! (Rill's leveldb backend on fjall), `leveled` (its heads and values
//! apart, each put with a head as a vnode writes) and `bitcask` (Rill's
//! Bitcask backend), each writing objects from several threads into a fresh
//! directory. The run joins a memory cgroup (`--memory-limit`) so the
//! data outgrows what the store may cache, as it would on a full node.

use crate::limit::Limit;
use crate::report::Report;
use anyhow::{bail, Context, Result};
use rill_backend::{
    BKey, Backend, BitcaskBackend, JournalOptions, LeveldbOptions, LeveldbStore, Pressure,
};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// Engines to run, in order.
    #[arg(long, value_delimiter = ',', default_value = "rocksdb,leveldb,leveled")]
    engines: Vec<String>,
    /// Keys to load (default 10 million; 300 thousand with --quick).
    #[arg(long)]
    keys: Option<u64>,
    /// Bytes per value (random, so incompressible).
    #[arg(long, default_value_t = 1000)]
    value_bytes: usize,
    /// Writer threads.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Length of an interval, ms.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Memory the run may use, MiB, page cache included (a memory
    /// cgroup); 0 for no limit (default 2048; 0 with --quick).
    #[arg(long)]
    memory_limit_mib: Option<u64>,
    /// Scratch directory (each engine's data is removed after its run).
    #[arg(long, default_value = "bench-data/ingest")]
    dir: PathBuf,
    /// Where the CSV files and the plot go.
    #[arg(long, default_value = "bench-results/ingest")]
    out: PathBuf,
    /// A short run for CI.
    #[arg(long)]
    quick: bool,
}

/// What one engine must do: store a key's value.
trait Target: Send + Sync {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Bytes on disk at the end; `None` where the engine does not say.
    fn disk_bytes(&self) -> Option<u64>;
    /// Puts held back while the write buffers were over their budget
    /// (Rill's LSM backends).
    fn held_writes(&self) -> Option<u64> {
        None
    }
    /// The most level-0 runs and sealed memtables of any partition now
    /// (Rill's LSM backends).
    fn pressure(&self) -> Option<Pressure> {
        None
    }
}

struct Rocks(rocksdb_dl::RocksDb);

impl Target for Rocks {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.0.put(key, value)?)
    }
    fn disk_bytes(&self) -> Option<u64> {
        self.0.table_bytes()
    }
}

/// A head as a vnode passes it to a backend that keeps heads (leveled):
/// a clock and metadata, about this size.
const HEAD: [u8; 160] = [0x5a; 160];

struct Rill {
    backend: Box<dyn Backend>,
    _store: Option<LeveldbStore>,
}

impl Target for Rill {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let k = BKey::new(b"", b"ingest", key);
        Ok(self.backend.put_with_head(&k, value, &HEAD, &[], &[])?)
    }
    fn held_writes(&self) -> Option<u64> {
        self._store.as_ref().map(LeveldbStore::held_writes)
    }
    fn pressure(&self) -> Option<Pressure> {
        self._store.as_ref().map(LeveldbStore::pressure)
    }
    fn disk_bytes(&self) -> Option<u64> {
        Some(self.backend.size_bytes())
    }
}

fn open(engine: &str, dir: &Path, memory: Option<u64>) -> Result<Box<dyn Target>> {
    Ok(match engine {
        "rocksdb" => {
            rocksdb_dl::available().context("librocksdb (apt-get install librocksdb7.8)")?;
            Box::new(Rocks(rocksdb_dl::RocksDb::open(
                dir,
                &rocksdb_dl::Tuning::default(),
            )?))
        }
        "leveldb" | "leveled" => {
            // Riak's default share (70 %) of what the run may use.
            let opts = LeveldbOptions {
                max_memory_bytes: crate::stores::budget(memory.map(|m| m >> 20), 70),
                ..LeveldbOptions::default()
            };
            let store = LeveldbStore::open(dir, opts, 1)?;
            let backend: Box<dyn Backend> = if engine == "leveled" {
                Box::new(store.leveled_partition("0", &JournalOptions::default())?)
            } else {
                Box::new(store.partition("0")?)
            };
            Box::new(Rill {
                backend,
                _store: Some(store),
            })
        }
        "bitcask" => {
            let opts = bitcask::Options {
                write_buffer_bytes: 0,
                ..bitcask::Options::default()
            };
            let store = Arc::new(bitcask::Store::open(dir, opts)?);
            Box::new(Rill {
                backend: Box::new(BitcaskBackend::open(store)?),
                _store: None,
            })
        }
        other => bail!("unknown engine {other:?}: rocksdb, leveldb, leveled or bitcask"),
    })
}

/// One interval's completions and its slowest put.
#[derive(Clone, Copy, Default)]
struct Interval {
    ops: u64,
    max_us: u64,
}

/// What the store showed during an interval, sampled every few
/// milliseconds: the most level-0 runs and the most sealed memtables of
/// any of its partitions, and the puts held by the write budget.
#[derive(Clone, Copy, Default)]
struct Seen {
    l0_runs: usize,
    sealed: usize,
    held: u64,
}

/// Samples the store's pressure every 5 ms into per-interval maxima
/// until `done` is set.
fn watch(target: &dyn Target, start: Instant, every: Duration, done: &AtomicBool) -> Vec<Seen> {
    let mut seen: Vec<Seen> = Vec::new();
    let mut held_before = target.held_writes().unwrap_or(0);
    while !done.load(Ordering::Relaxed) {
        let Some(p) = target.pressure() else {
            return seen;
        };
        let slot = (start.elapsed().as_nanos() / every.as_nanos()) as usize;
        if seen.len() <= slot {
            seen.resize(slot + 1, Seen::default());
        }
        let held = target.held_writes().unwrap_or(0);
        let s = &mut seen[slot];
        s.l0_runs = s.l0_runs.max(p.l0_runs);
        s.sealed = s.sealed.max(p.sealed_memtables);
        s.held += held.saturating_sub(held_before);
        held_before = held;
        std::thread::sleep(Duration::from_millis(5));
    }
    seen
}

/// Keys in the order they are loaded: fixed width, so byte order is
/// numeric order.
fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(b"ingest00");
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

/// Random bytes (xorshift), a fresh value per key.
pub(crate) fn fill(buf: &mut [u8], mut seed: u64) {
    for chunk in buf.chunks_mut(8) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let b = seed.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

struct Outcome {
    intervals: Vec<Interval>,
    seen: Vec<Seen>,
    seconds: f64,
    disk_bytes: Option<u64>,
    held_writes: Option<u64>,
}

fn load(
    target: &dyn Target,
    keys: u64,
    value_bytes: usize,
    threads: usize,
    every: Duration,
) -> Result<Outcome> {
    let next = AtomicU64::new(0);
    let start = Instant::now();
    let done = AtomicBool::new(false);
    let mut seen = Vec::new();
    let per_thread: Vec<Result<Vec<Interval>>> = std::thread::scope(|s| {
        let watcher = s.spawn(|| watch(target, start, every, &done));
        // Stops the watcher however the writers end (a panic included).
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let stop = Stop(&done);
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let next = &next;
                s.spawn(move || {
                    let mut mine: Vec<Interval> = Vec::new();
                    let mut value = vec![0u8; value_bytes];
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= keys {
                            return Ok(mine);
                        }
                        fill(
                            &mut value,
                            i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1 | t as u64,
                        );
                        let began = Instant::now();
                        target.put(&key(i), &value)?;
                        let done = Instant::now();
                        let slot =
                            (done.duration_since(start).as_nanos() / every.as_nanos()) as usize;
                        if mine.len() <= slot {
                            mine.resize(slot + 1, Interval::default());
                        }
                        mine[slot].ops += 1;
                        let us = done.duration_since(began).as_micros() as u64;
                        mine[slot].max_us = mine[slot].max_us.max(us);
                    }
                })
            })
            .collect();
        let all = handles
            .into_iter()
            .map(|h| h.join().expect("a writer panicked"))
            .collect();
        drop(stop);
        seen = watcher.join().expect("the watcher panicked");
        all
    });
    let seconds = start.elapsed().as_secs_f64();
    let mut intervals: Vec<Interval> = Vec::new();
    for r in per_thread {
        for (i, iv) in r?.into_iter().enumerate() {
            if intervals.len() <= i {
                intervals.resize(i + 1, Interval::default());
            }
            intervals[i].ops += iv.ops;
            intervals[i].max_us = intervals[i].max_us.max(iv.max_us);
        }
    }
    Ok(Outcome {
        intervals,
        seen,
        seconds,
        disk_bytes: target.disk_bytes(),
        held_writes: target.held_writes(),
    })
}

pub fn run(args: Args) -> Result<()> {
    let keys = args
        .keys
        .unwrap_or(if args.quick { 300_000 } else { 10_000_000 });
    let limit = Limit::prepare(
        &args.dir,
        &args.out,
        args.memory_limit_mib,
        args.quick,
        "rill-ingest",
    )?;
    let data = keys * (args.value_bytes as u64 + 16);
    println!(
        "ingest: {keys} sequential keys of {} bytes ({:.2} GB), {} writers, memory {}",
        args.value_bytes,
        data as f64 / 1e9,
        args.threads,
        limit.describe(data)
    );
    let mut r = Report::new("ingest", args.quick);
    r.int("keys", keys, "keys loaded per engine");
    r.int("value_bytes", args.value_bytes as u64, "bytes per value");
    r.int(
        "memory_limit_bytes",
        limit.joined_bytes(),
        "memory the run may use (0: not limited)",
    );
    let every = Duration::from_millis(args.interval_ms.max(1));
    let mut csvs = Vec::new();
    let mut rates = Vec::new();
    for engine in &args.engines {
        let dir = args.dir.join(engine);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let target = open(engine, &dir, limit.bytes)?;
        println!("{engine}: loading");
        let o = load(target.as_ref(), keys, args.value_bytes, args.threads, every)?;
        drop(target);
        let csv = args.out.join(format!("ingest-{engine}.csv"));
        let mut f = std::fs::File::create(&csv)?;
        writeln!(
            f,
            "t_s,ops_per_s,max_latency_ms,l0_runs_max,sealed_memtables_max,held_puts"
        )?;
        for (i, iv) in o.intervals.iter().enumerate() {
            let t = (i as f64 + 1.0) * every.as_secs_f64();
            let seen = o.seen.get(i).copied().unwrap_or_default();
            writeln!(
                f,
                "{t:.1},{:.0},{:.3},{},{},{}",
                iv.ops as f64 / every.as_secs_f64(),
                iv.max_us as f64 / 1000.0,
                seen.l0_runs,
                seen.sealed,
                seen.held
            )?;
        }
        if !o.seen.is_empty() {
            let slow = |iv: &Interval| iv.max_us >= 250_000;
            let stalled = |s: &Seen| s.sealed >= 4 || s.l0_runs >= 20;
            let both = o
                .intervals
                .iter()
                .zip(&o.seen)
                .filter(|(iv, s)| slow(iv) && stalled(s))
                .count();
            let slow_n = o.intervals.iter().filter(|iv| slow(iv)).count();
            println!(
                "{engine}: {slow_n} intervals with a put >= 250 ms, {both} of them at fjall's stall points (4 sealed memtables or 20 level-0 runs); most level-0 runs {}, most sealed memtables {}",
                o.seen.iter().map(|s| s.l0_runs).max().unwrap_or(0),
                o.seen.iter().map(|s| s.sealed).max().unwrap_or(0)
            );
        }
        csvs.push((engine.clone(), csv));
        let rate = keys as f64 / o.seconds;
        let zero = o.intervals.iter().filter(|iv| iv.ops == 0).count() as u64;
        let worst = o.intervals.iter().map(|iv| iv.max_us).max().unwrap_or(0) as f64 / 1000.0;
        r.num(
            &format!("{engine}_ops_per_s"),
            rate,
            &format!("{engine}: puts/s over the whole load"),
        );
        r.int(
            &format!("{engine}_zero_intervals"),
            zero,
            &format!("{engine}: intervals with no put done"),
        );
        r.num(
            &format!("{engine}_worst_max_latency_ms"),
            worst,
            &format!("{engine}: slowest put, ms"),
        );
        if let Some(held) = o.held_writes {
            r.int(
                &format!("{engine}_held_writes"),
                held,
                &format!("{engine}: puts held while the write buffers were over budget"),
            );
        }
        if let Some(bytes) = o.disk_bytes {
            r.num(
                &format!("{engine}_disk_gb"),
                bytes as f64 / 1e9,
                &format!("{engine}: GB on disk at the end"),
            );
        }
        rates.push((engine.clone(), rate, zero, worst));
        let _ = std::fs::remove_dir_all(&dir);
    }
    let get = |name: &str| rates.iter().find(|(e, ..)| e == name);
    if let (Some(l), Some(k)) = (get("leveldb"), get("rocksdb")) {
        r.num(
            "leveldb_over_rocksdb",
            l.1 / k.1,
            "leveldb / rocksdb, puts/s (target >= 1.0)",
        );
        let ok = l.1 >= k.1 && l.2 == 0 && l.3 < 1000.0;
        println!(
            "target (leveldb >= 1.0x rocksdb, no empty interval, worst max latency < 1 s): {}",
            if ok { "met" } else { "NOT met" }
        );
    }
    let panels = [
        crate::plot::Panel {
            column: "ops_per_s",
            label: "puts/s",
            max: None,
        },
        crate::plot::Panel {
            column: "max_latency_ms",
            label: "max latency, ms",
            max: None,
        },
    ];
    match crate::plot::draw(&args.out, "ingest", &csvs, &panels) {
        Ok(png) => println!("plot: {}", png.display()),
        Err(e) => eprintln!("no plot: {e:#}"),
    }
    println!("{}", r.json());
    Ok(())
}
