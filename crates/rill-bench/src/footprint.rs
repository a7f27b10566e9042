//! `rill-bench footprint`: the comparison of the blog post "Riak – from
//! Bitcask to LevelDB" (one node's 1.4 TB of Bitcask became 430 GB of
//! LevelDB for the same data, and its restart went from 60 minutes,
//! loading every key into memory, to 9 seconds). The same keys and
//! compressible values are loaded into each engine; then a fresh process
//! opens the store, with the page cache dropped first where the run may
//! (root), and measures how long the store takes to answer its first
//! read, its resident memory after reading a sample of keys (each value
//! checked), and the bytes its directory takes on disk.
//!
//! Engines: Rill's `bitcask`, `leveldb` and `leveled` backends, through
//! the trait a vnode uses, and `rocksdb` (the system's librocksdb), each
//! loaded and restarted in processes of their own.

use crate::child;
use crate::limit::Limit;
use crate::report::Report;
use crate::stores::{self, open};
use anyhow::{bail, ensure, Context, Result};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// Engines to run, in order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "bitcask,leveldb,leveled,rocksdb"
    )]
    engines: Vec<String>,
    /// Keys loaded (default 10 million; 50 thousand with --quick).
    #[arg(long)]
    keys: Option<u64>,
    /// Bytes per value: JSON-like text, as a service stores documents.
    #[arg(long, default_value_t = 1000)]
    value_bytes: usize,
    /// Writer threads for the load.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Keys read after the restart, each value checked (default 10
    /// thousand; 1 thousand with --quick).
    #[arg(long)]
    sample: Option<u64>,
    /// Memory the run may use, MiB, page cache included (a memory
    /// cgroup); 0 for no limit (default 2048; 0 with --quick).
    #[arg(long)]
    memory_limit_mib: Option<u64>,
    /// The LSM engines' budget for block cache and write buffers, percent
    /// of the memory limit (Riak's `leveldb.maximum_memory.percent`
    /// default).
    #[arg(long, default_value_t = 70)]
    engine_memory_percent: u64,
    /// Scratch directory (each engine's data is removed after its run).
    #[arg(long, default_value = "bench-data/footprint")]
    dir: PathBuf,
    /// Where the figures go.
    #[arg(long, default_value = "bench-results/footprint")]
    out: PathBuf,
    /// A short run for CI.
    #[arg(long)]
    quick: bool,
    /// Run one phase (load or restart) of the one engine named, in this
    /// process (how the run starts each engine).
    #[arg(long, hide = true)]
    child: Option<String>,
}

impl Args {
    fn keys(&self) -> u64 {
        self.keys
            .unwrap_or(if self.quick { 50_000 } else { 10_000_000 })
    }
    fn sample(&self) -> u64 {
        self.sample
            .unwrap_or(if self.quick { 1_000 } else { 10_000 })
    }
    fn figures_file(&self, engine: &str, phase: &str) -> PathBuf {
        self.out.join(format!("footprint-{engine}.{phase}"))
    }
}

/// Key `i`: 16 hex digits of a bijection of `i`, so the keys are
/// distinct and arrive in no order (as hashed or random ids do).
fn key(i: u64) -> [u8; 16] {
    let x = (i ^ (i >> 31)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut k = [0u8; 16];
    k.copy_from_slice(format!("{x:016x}").as_bytes());
    k
}

/// Key `i`'s value, exactly `len` bytes of JSON-like text (device
/// readings: field names repeat, numbers vary), the same for the same `i`.
fn document(i: u64, len: usize, out: &mut Vec<u8>) {
    use std::fmt::Write;
    let mut x = i.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut s = String::with_capacity(len + 160);
    let _ = write!(
        s,
        "{{\"device\":\"dev-{i:08}\",\"site\":\"site-{:03}\",\"firmware\":\"2.{}.{}\",\"readings\":[",
        next() % 200,
        next() % 10,
        next() % 30
    );
    let mut t = 1_764_000_000 + next() % 1_000_000;
    while s.len() < len {
        let r = next();
        t += 30 + r % 5;
        let _ = write!(
            s,
            "{{\"t\":{t},\"temperature\":{}.{},\"humidity\":{}.{},\"battery\":{},\"status\":\"{}\"}},",
            15 + (r >> 8) % 20,
            (r >> 16) % 10,
            30 + (r >> 24) % 50,
            (r >> 32) % 10,
            60 + (r >> 40) % 40,
            ["ok", "ok", "ok", "low"][((r >> 48) % 4) as usize]
        );
    }
    out.clear();
    out.extend_from_slice(&s.as_bytes()[..len]);
}

/// A head as a vnode passes it to a backend that keeps heads.
const HEAD: [u8; 160] = [0x5a; 160];

/// Bytes the files under `dir` take on disk (allocated blocks).
fn disk_bytes(dir: &Path) -> Result<u64> {
    testkit::files_under(dir)
        .iter()
        .map(|f| Ok(std::fs::metadata(f)?.blocks() * 512))
        .sum()
}

/// Writes dirty pages out and drops the page cache; false where the run
/// may not (not root).
fn drop_page_cache() -> bool {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

pub fn run(args: Args) -> Result<()> {
    match args.child.as_deref() {
        Some("load") => return load(&args),
        Some("restart") => return restart(&args),
        Some(other) => bail!("unknown phase {other:?}"),
        None => {}
    }
    let keys = args.keys();
    let limit = Limit::prepare(
        &args.dir,
        &args.out,
        args.memory_limit_mib,
        args.quick,
        "rill-footprint",
    )?;
    let data = keys * args.value_bytes as u64;
    println!(
        "footprint: {keys} keys, values of {} bytes of JSON-like text ({:.2} GB), memory {}",
        args.value_bytes,
        data as f64 / 1e9,
        limit.describe(data)
    );
    let mut r = Report::new("footprint", args.quick);
    r.int("keys", keys, "keys per engine");
    r.int("value_bytes", args.value_bytes as u64, "bytes per value");
    r.int(
        "memory_limit_bytes",
        limit.joined_bytes(),
        "memory the run may use (0: not limited)",
    );
    let mut all: Vec<(String, [f64; 3])> = Vec::new();
    let mut rows: Vec<String> = Vec::new();
    let mut cold = true;
    for engine in &args.engines {
        let dir = args.dir.join(engine);
        let _ = std::fs::remove_dir_all(&dir);
        let load_s = phase(&args, engine, "load", limit.bytes, 1)?[0];
        cold &= drop_page_cache();
        let f = phase(&args, engine, "restart", limit.bytes, 4)?;
        let _ = std::fs::remove_dir_all(&dir);
        let (restart_s, resident, disk, opened) = (f[0], f[1], f[2], f[3]);
        r.num(
            &format!("{engine}_load_keys_per_s"),
            keys as f64 / load_s.max(1e-9),
            &format!("{engine}: keys/s loaded"),
        );
        r.num(
            &format!("{engine}_disk_gb"),
            disk / 1e9,
            &format!("{engine}: GB on disk after the load"),
        );
        r.num(
            &format!("{engine}_disk_per_value_byte"),
            disk / data as f64,
            &format!("{engine}: bytes on disk per byte of value"),
        );
        r.num(
            &format!("{engine}_restart_s"),
            restart_s,
            &format!("{engine}: restart to the first read, s"),
        );
        r.num(
            &format!("{engine}_rss_bytes_per_key"),
            resident / keys as f64,
            &format!("{engine}: resident bytes per key after the restart"),
        );
        r.num(
            &format!("{engine}_opened_rss_bytes_per_key"),
            opened / keys as f64,
            &format!("{engine}: resident bytes per key at the first read (before the sample)"),
        );
        all.push((engine.clone(), [disk, restart_s, resident]));
        rows.push(format!(
            "{engine},{keys},{:.0},{disk:.0},{:.4},{restart_s:.3},{:.2},{:.2}",
            keys as f64 / load_s.max(1e-9),
            disk / data as f64,
            opened / keys as f64,
            resident / keys as f64
        ));
    }
    let csv = args.out.join("footprint.csv");
    let header = "engine,keys,load_keys_per_s,disk_bytes,disk_per_value_byte,restart_s,rss_bytes_per_key_at_first_read,rss_bytes_per_key_after_sample";
    std::fs::write(&csv, format!("{header}\n{}\n", rows.join("\n")))
        .with_context(|| format!("writing {}", csv.display()))?;
    println!("figures per engine: {}", csv.display());
    r.text("page_cache_dropped", if cold { "yes" } else { "no" });
    println!(
        "page cache dropped before each restart: {}",
        if cold { "yes" } else { "no (not root)" }
    );
    compare(&mut r, &all);
    println!("{}", r.json());
    Ok(())
}

/// The targets from "Riak – from Bitcask to LevelDB": leveldb against
/// Bitcask (leveled and RocksDB beside it, for scale).
fn compare(r: &mut Report, all: &[(String, [f64; 3])]) {
    let get = |n: &str| all.iter().find(|(e, _)| e == n).map(|(_, f)| f);
    let Some(b) = get("bitcask") else { return };
    for (e, f) in all.iter().filter(|(e, _)| e != "bitcask") {
        let ratio = |i: usize| f[i] / b[i].max(1e-9);
        r.num(
            &format!("{e}_over_bitcask_disk"),
            ratio(0),
            &format!("{e} / bitcask, bytes on disk"),
        );
        r.num(
            &format!("{e}_over_bitcask_restart"),
            ratio(1),
            &format!("{e} / bitcask, restart time"),
        );
        r.num(
            &format!("{e}_over_bitcask_rss_per_key"),
            ratio(2),
            &format!("{e} / bitcask, resident memory per key"),
        );
    }
    if let Some(l) = get("leveldb") {
        let ok = l[0] <= 0.4 * b[0] && l[1] <= 0.1 * b[1] && l[2] <= 0.2 * b[2];
        println!(
            "target (leveldb / bitcask: bytes on disk <= 0.4, restart <= 0.1, resident memory per key <= 0.2): {}",
            if ok { "met" } else { "NOT met" }
        );
    }
}

/// Runs one phase of `engine` in its own process; its `n` figures.
fn phase(
    args: &Args,
    engine: &str,
    phase: &str,
    memory: Option<u64>,
    n: usize,
) -> Result<Vec<f64>> {
    let file = args.figures_file(engine, phase);
    let _ = std::fs::remove_file(&file);
    let mut argv = vec!["footprint".to_string(), "--child".into(), phase.into()];
    argv.extend(child::flags(&[
        ("--engines", engine.to_string()),
        ("--keys", args.keys().to_string()),
        ("--value-bytes", args.value_bytes.to_string()),
        ("--threads", args.threads.to_string()),
        ("--sample", args.sample().to_string()),
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
    child::run(&format!("{engine} {phase}"), &argv)?;
    child::read(&file, n)
}

/// The one engine a child runs, its directory and its memory budget.
fn engine(args: &Args) -> Result<(&str, PathBuf, u64)> {
    let [engine] = &args.engines[..] else {
        bail!("a child process runs one engine");
    };
    let budget = stores::budget(args.memory_limit_mib, args.engine_memory_percent);
    Ok((engine, args.dir.join(engine), budget))
}

/// The load, in a child: every key into a fresh store, then the store
/// closed as a node stops.
fn load(args: &Args) -> Result<()> {
    let (name, dir, budget) = engine(args)?;
    std::fs::create_dir_all(&dir)?;
    let store = open(name, &dir, budget)?;
    let keys = args.keys();
    let next = AtomicU64::new(0);
    let began = Instant::now();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..args.threads.max(1))
            .map(|_| {
                scope.spawn(|| -> Result<()> {
                    let mut buf = Vec::with_capacity(args.value_bytes);
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= keys {
                            return Ok(());
                        }
                        document(i, args.value_bytes, &mut buf);
                        store.update(&key(i), &buf, &HEAD, &[], &[])?;
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().expect("a loader panicked"))
    })?;
    let secs = began.elapsed().as_secs_f64();
    // As the node stops.
    store.stop()?;
    drop(store);
    println!("{name}: {keys} keys loaded in {secs:.1} s");
    child::write(&args.figures_file(name, "load"), &[secs])
}

/// The restart, in a child: open, first read, a checked sample.
fn restart(args: &Args) -> Result<()> {
    let (name, dir, budget) = engine(args)?;
    let keys = args.keys();
    let began = Instant::now();
    let store = open(name, &dir, budget)?;
    let first = store.get(&key(0))?;
    let restart_s = began.elapsed().as_secs_f64();
    let opened = crate::machine::rss_bytes();
    let mut want = Vec::with_capacity(args.value_bytes);
    let mut check = |i: u64, got: Option<bytes::Bytes>| -> Result<()> {
        document(i, args.value_bytes, &mut want);
        let got =
            got.ok_or_else(|| anyhow::anyhow!("{name}: key {i} is missing after the restart"))?;
        // RocksDB holds the head before the value, as eleveldb holds a
        // whole object.
        ensure!(
            got.ends_with(&want),
            "{name}: key {i} has a wrong value after the restart"
        );
        Ok(())
    };
    check(0, first)?;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..args.sample() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = x % keys;
        check(i, store.get(&key(i))?)?;
    }
    let resident = crate::machine::rss_bytes();
    let disk = disk_bytes(&dir)?;
    println!(
        "{name}: restarted in {restart_s:.2} s ({} MB resident); {} sampled keys checked, then {} MB resident; {:.2} GB on disk",
        opened >> 20,
        args.sample(),
        resident >> 20,
        disk as f64 / 1e9
    );
    drop(store);
    child::write(
        &args.figures_file(name, "restart"),
        &[restart_s, resident as f64, disk as f64, opened as f64],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_exact_repeatable_and_keys_distinct() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for i in [0, 1, 99_999] {
            document(i, 1000, &mut a);
            document(i, 1000, &mut b);
            assert_eq!(a.len(), 1000);
            assert_eq!(a, b);
        }
        document(1, 1000, &mut b);
        document(2, 1000, &mut a);
        assert_ne!(a, b);
        let keys: std::collections::HashSet<_> = (0..100_000).map(key).collect();
        assert_eq!(keys.len(), 100_000);
    }
}
