//! `rill-bench engine`: the Bitcask engine against the disk it runs on.
//!
//! Every figure is measured in one run on one directory: a plain
//! sequential append (the disk's own speed as a program sees it), puts of
//! 4 KiB and 128 KiB values from 8 writers through buffered and O_DIRECT
//! appends, random gets, keydir bytes per key, and restart time from hints
//! and from data files alone.

use crate::machine::{rss_bytes, Machine};
use crate::report::Report;
use anyhow::{ensure, Context, Result};
use bitcask::{Options, Store, SyncStrategy, WriteMode};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const MB: f64 = 1e6;
const WRITERS: u64 = 8;
const READERS: u64 = 8;
const GATHER_BYTES: usize = 1 << 20;

#[derive(clap::Args)]
pub struct Args {
    /// Scratch directory (created, and removed at the end).
    #[arg(long, default_value = "bench-data/engine")]
    dir: PathBuf,
    /// A short run for CI (well under a minute).
    #[arg(long)]
    quick: bool,
    /// Keys for the keydir and restart figures (default 10 million; 1
    /// million with --quick).
    #[arg(long)]
    keys: Option<u64>,
    /// The engine's write buffer (appends are gathered into writes of this
    /// size), KiB.
    #[arg(long, default_value_t = 1024)]
    write_buffer_kib: usize,
}

struct Plan {
    bytes_128k: u64,
    bytes_4k: u64,
    get_seconds: u64,
    keys: u64,
}

pub fn run(args: Args) -> Result<()> {
    let plan = if args.quick {
        Plan {
            bytes_128k: 256 << 20,
            bytes_4k: 64 << 20,
            get_seconds: 2,
            keys: args.keys.unwrap_or(1_000_000),
        }
    } else {
        Plan {
            bytes_128k: 4 << 30,
            bytes_4k: 1 << 30,
            get_seconds: 10,
            keys: args.keys.unwrap_or(10_000_000),
        }
    };
    if args.dir.exists() {
        std::fs::remove_dir_all(&args.dir)
            .with_context(|| format!("clearing {}", args.dir.display()))?;
    }
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let machine = Machine::describe(&args.dir);
    machine.print();
    let mut r = Report::new("engine", args.quick);
    r.text(
        "machine",
        &format!("{}, {} cores", machine.cpu, machine.cores),
    );
    r.text("filesystem", &machine.filesystem);
    let pool = random_pool(2 << 20);
    let buffer_bytes = args.write_buffer_kib << 10;
    r.int(
        "write_buffer_kib",
        args.write_buffer_kib as u64,
        "write buffer, KiB",
    );

    let mut puts: Vec<(String, f64)> = Vec::new();
    for (block, total, name) in [
        (128usize << 10, plan.bytes_128k, "128k"),
        (4 << 10, plan.bytes_4k, "4k"),
    ] {
        // The baseline runs before and after the puts and the better run
        // counts, so a slow moment of the disk cannot flatter the engine.
        let append_path = args.dir.join("append");
        let mut append = append_baseline(&append_path, &pool, block, total)?;
        for (mode, suffix) in [(WriteMode::Buffered, ""), (WriteMode::Direct, "_direct")] {
            let dir = args.dir.join(format!("put-{name}{suffix}"));
            let put = put_bench(&dir, &pool, store_options(mode, buffer_bytes), block, total)?;
            r.num(
                &format!("put_{name}{suffix}_mb_s"),
                put,
                &format!("put {name} values, 8 writers, {mode:?} appends, MB/s"),
            );
            if name == "4k" && mode == WriteMode::Buffered {
                let opts = store_options(mode, buffer_bytes);
                let (ops, misses) = get_bench(&dir, opts, block, total, plan.get_seconds)?;
                r.num(
                    "get_4k_ops_s",
                    ops,
                    "random gets of 4k values, 8 readers, ops/s",
                );
                ensure!(misses == 0, "{misses} gets of written keys found nothing");
            }
            std::fs::remove_dir_all(&dir)?;
            puts.push((format!("{name}{suffix}"), put));
        }
        append = append.max(append_baseline(&append_path, &pool, block, total)?);
        r.num(
            &format!("append_{name}_mb_s"),
            append,
            &format!("plain sequential append, {name} blocks, MB/s (best of 2)"),
        );
        for (case, put) in puts.drain(..) {
            r.num(
                &format!("put_{case}_vs_append"),
                put / append,
                &format!("ratio of put_{case} to the plain append"),
            );
        }
    }
    let opts = store_options(WriteMode::Buffered, buffer_bytes);
    keydir_and_restart(&args.dir.join("keys"), opts, plan.keys, &mut r)?;
    std::fs::remove_dir_all(&args.dir)?;
    println!("{}", r.json());
    Ok(())
}

/// `len` incompressible bytes; values are slices of it.
pub(crate) fn random_pool(len: usize) -> Vec<u8> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn value_of(pool: &[u8], n: u64, len: usize) -> &[u8] {
    let start = (n.wrapping_mul(4099) as usize) % (pool.len() - len);
    &pool[start..start + len]
}

/// One writer appending `block`-sized pieces to one file in 1 MiB writes,
/// fsync at the end included.
fn append_baseline(path: &Path, pool: &[u8], block: usize, total: u64) -> Result<f64> {
    let start = Instant::now();
    let mut file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut gather = Vec::with_capacity(GATHER_BYTES + block);
    let mut written = 0u64;
    let mut n = 0u64;
    while written < total {
        gather.extend_from_slice(value_of(pool, n, block));
        n += 1;
        written += block as u64;
        if gather.len() >= GATHER_BYTES {
            file.write_all(&gather)?;
            gather.clear();
        }
    }
    file.write_all(&gather)?;
    file.sync_all()?;
    let secs = start.elapsed().as_secs_f64();
    drop(file);
    std::fs::remove_file(path)?;
    Ok(written as f64 / MB / secs)
}

fn store_options(mode: WriteMode, write_buffer_bytes: usize) -> Options {
    Options {
        max_file_size_bytes: 256 << 20,
        sync: SyncStrategy::None,
        write_mode: mode,
        write_buffer_bytes,
        ..Options::default()
    }
}

fn bench_key(writer: u64, n: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = writer as u8;
    k[1..].copy_from_slice(&n.to_be_bytes());
    k
}

/// 8 writers put `total` bytes of `block`-sized values; the final sync is
/// inside the timed region.
fn put_bench(dir: &Path, pool: &[u8], opts: Options, block: usize, total: u64) -> Result<f64> {
    let store = Store::open(dir, opts)?;
    let per_writer = total / block as u64 / WRITERS;
    let start = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..WRITERS)
            .map(|w| {
                let store = &store;
                s.spawn(move || -> Result<()> {
                    for n in 0..per_writer {
                        store.put(&bench_key(w, n), value_of(pool, n * WRITERS + w, block))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().expect("writer thread")?;
        }
        Ok(())
    })?;
    store.sync()?;
    let secs = start.elapsed().as_secs_f64();
    store.close()?;
    Ok((per_writer * WRITERS * block as u64) as f64 / MB / secs)
}

/// Random gets of the keys `put_bench` wrote, for `seconds`.
fn get_bench(
    dir: &Path,
    opts: Options,
    block: usize,
    total: u64,
    seconds: u64,
) -> Result<(f64, u64)> {
    let store = Store::open(dir, opts)?;
    let per_writer = total / block as u64 / WRITERS;
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    let misses = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..READERS)
            .map(|t| {
                let (store, stop, ops, misses) = (&store, &stop, &ops, &misses);
                s.spawn(move || -> Result<()> {
                    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ t;
                    let mut done = 0;
                    while !stop.load(Ordering::Relaxed) {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let key = bench_key(x % WRITERS, (x >> 8) % per_writer);
                        if store.get(&key)?.is_none() {
                            misses.fetch_add(1, Ordering::Relaxed);
                        }
                        done += 1;
                    }
                    ops.fetch_add(done, Ordering::Relaxed);
                    Ok(())
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(seconds));
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().expect("reader thread")?;
        }
        Ok(())
    })?;
    let secs = start.elapsed().as_secs_f64();
    store.close()?;
    Ok((
        ops.load(Ordering::Relaxed) as f64 / secs,
        misses.load(Ordering::Relaxed),
    ))
}

fn sensor_key(n: u64) -> [u8; 16] {
    let mut k = *b"sensor0000000000";
    let digits = format!("{n:010}");
    k[6..].copy_from_slice(digits.as_bytes());
    k
}

/// Keydir bytes per key with `keys` 16-byte keys, and restart time from
/// hints and from data files alone.
fn keydir_and_restart(dir: &Path, opts: Options, keys: u64, r: &mut Report) -> Result<()> {
    let rss_before = rss_bytes();
    let store = Store::open(dir, opts.clone())?;
    let start = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..2u64)
            .map(|t| {
                let store = &store;
                s.spawn(move || -> Result<()> {
                    for n in (t..keys).step_by(2) {
                        store.put(&sensor_key(n), &n.to_le_bytes())?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().expect("loader thread")?;
        }
        Ok(())
    })?;
    let load_secs = start.elapsed().as_secs_f64();
    r.int("keys", keys, "keys written (16-byte keys, 8-byte values)");
    r.num(
        "load_keys_per_s",
        keys as f64 / load_secs,
        "puts of small values, 2 writers, keys/s",
    );
    store.close()?;

    let (restart_hints, store) = timed_open(dir, &opts, keys)?;
    let stats = store.stats();
    let rss_after = rss_bytes();
    let key_bytes = 16.0;
    r.num(
        "keydir_overhead_bytes_per_key",
        stats.keydir_overhead_bytes_per_key(),
        "keydir bytes per key beyond the key (engine's count)",
    );
    r.num(
        "keydir_rss_bytes_per_key",
        rss_after.saturating_sub(rss_before) as f64 / keys as f64 - key_bytes,
        "  the same from process RSS growth (allocator incl.)",
    );
    let label = millions(keys);
    r.num(
        &format!("restart_hints_{label}_s"),
        restart_hints,
        &format!("restart with {label} keys from hints, s"),
    );
    store.close()?;
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "hint") {
            std::fs::remove_file(p)?;
        }
    }
    let (restart_scan, store) = timed_open(dir, &opts, keys)?;
    r.num(
        &format!("restart_nohints_{label}_s"),
        restart_scan,
        &format!("restart with {label} keys, no hints (scan data), s"),
    );
    store.close()?;
    Ok(())
}

fn timed_open(dir: &Path, opts: &Options, keys: u64) -> Result<(f64, Store)> {
    let start = Instant::now();
    let store = Store::open(dir, opts.clone())?;
    let secs = start.elapsed().as_secs_f64();
    let found = store.stats().keydir_entries as u64;
    ensure!(found == keys, "reopened with {found} keys, expected {keys}");
    Ok((secs, store))
}

fn millions(keys: u64) -> String {
    if keys.is_multiple_of(1_000_000) {
        format!("{}m", keys / 1_000_000)
    } else {
        format!("{keys}")
    }
}
