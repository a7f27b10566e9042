//! `rill-bench sensor`: the test program of the sensor-data paper ("Riak KV
//! performance in sensor data storage application", §1.1).
//!
//! M writers cycle over S sensors each, putting B-byte random blocks under
//! 32-bit big-endian keys (writer id in the high 8 bits, sensor number in
//! the low 24), so the live data stays at V = S·B·M / C while every put
//! overwrites. It runs on a filesystem of a fixed size (a loop-mounted ext4
//! image it creates and removes), so usage U is real, and prints MB/s per
//! interval with an EWMA, U and merge activity, side by side for each
//! engine: the ceiling writer, Bitcask with Riak's classic merge policy,
//! Bitcask with the Fisherman, and RocksDB (default leveled compaction,
//! loaded from the system's librocksdb).

mod targets;

use crate::machine::Machine;
use crate::report::Report;
use anyhow::{bail, Context, Result};
use merge_control::filesystem_usage;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use targets::Target;
use testkit::LoopFs;

#[derive(clap::Args, Clone)]
pub struct Args {
    /// Engines to run, in order: ceiling, classic, fisherman, rocksdb.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ceiling,classic,fisherman,rocksdb"
    )]
    engines: Vec<String>,
    /// Filesystem capacity C, MiB (default 8192; 1024 with --quick).
    #[arg(long)]
    capacity_mib: Option<u64>,
    /// Vnodes n_i (default 64; 8 with --quick).
    #[arg(long)]
    vnodes: Option<usize>,
    /// Writers M.
    #[arg(long, default_value_t = 8)]
    writers: usize,
    /// Block (value) size B, KiB.
    #[arg(long, default_value_t = 128)]
    block_kib: usize,
    /// Live data share V; the sensor count S follows from it.
    #[arg(long, default_value_t = 0.6)]
    live_share: f64,
    /// Rotation size R, MiB (default: the planing bound of eq. 4, at least 1).
    #[arg(long)]
    file_size_mib: Option<u64>,
    /// Passes over the live data each engine writes (default 4; 12 with
    /// --quick).
    #[arg(long)]
    passes: Option<u64>,
    /// Longest run per engine, seconds (the run stops by itself; at most
    /// 25 with --quick).
    #[arg(long, default_value_t = 1800)]
    max_seconds: u64,
    /// Reporting interval, milliseconds (at most 500 with --quick).
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Where the CSV files go.
    #[arg(long, default_value = "bench-results/sensor")]
    out: PathBuf,
    /// A short run for CI: every engine in well under two minutes.
    #[arg(long)]
    quick: bool,
    /// Internal: run the one engine on this mounted filesystem (the parent
    /// process mounts it and starts one child per engine).
    #[arg(long, hide = true)]
    child_mount: Option<PathBuf>,
}

const ENGINES: &[&str] = &["ceiling", "classic", "fisherman", "rocksdb"];

struct Plan {
    capacity_mib: u64,
    vnodes: usize,
    passes: u64,
    max_seconds: u64,
}

pub fn run(args: Args) -> Result<()> {
    let plan = Plan {
        capacity_mib: args
            .capacity_mib
            .unwrap_or(if args.quick { 1024 } else { 8192 }),
        vnodes: args.vnodes.unwrap_or(if args.quick { 8 } else { 64 }),
        // Quick runs fill a small disk in a second: more passes, so the
        // steady state after the first one has intervals to measure.
        passes: args.passes.unwrap_or(if args.quick { 12 } else { 4 }),
        max_seconds: if args.quick {
            args.max_seconds.min(25)
        } else {
            args.max_seconds
        },
    };
    if !(0.0..1.0).contains(&args.live_share) || args.live_share == 0.0 {
        bail!("--live-share must be in (0, 1)");
    }
    for engine in &args.engines {
        if !ENGINES.contains(&engine.as_str()) {
            bail!("unknown engine {engine:?}: use {}", ENGINES.join(", "));
        }
        if engine == "rocksdb" {
            rocksdb_dl::available()?;
        }
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    if let Some(mnt) = &args.child_mount {
        // One engine, in the child process the parent started for it.
        run_engine(&args, &plan, &args.engines[0], mnt)?;
        return Ok(());
    }
    let mut csvs = Vec::new();
    for engine in &args.engines {
        let Some(fs) = LoopFs::mount(plan.capacity_mib) else {
            bail!(
                "cannot create and loop-mount a {} MiB ext4 image (needs root, mkfs.ext4, mount)",
                plan.capacity_mib
            );
        };
        csvs.push((engine.clone(), run_child(&args, &plan, engine, fs.path())?));
    }
    let name = format!("sensor-v{:.2}-b{}k", args.live_share, args.block_kib);
    let panels = [
        crate::plot::Panel {
            column: "mb_s_ewma",
            label: "MB/s (EWMA)",
            max: None,
        },
        crate::plot::Panel {
            column: "usage",
            label: "usage U",
            max: Some(1.02),
        },
    ];
    match crate::plot::draw(&args.out, &name, &csvs, &panels) {
        Ok(png) => eprintln!("plot: {}", png.display()),
        Err(e) => eprintln!("no plot drawn: {e}"),
    }
    Ok(())
}

/// Runs one engine in a child process (this program again), so that an
/// engine that aborts (librocksdb asserts on some disk-full paths) ends
/// its own run only. The parent owns the filesystem and unmounts it.
fn run_child(args: &Args, plan: &Plan, engine: &str, mnt: &Path) -> Result<PathBuf> {
    let mut argv: Vec<String> = Vec::new();
    let mut skip = false;
    for a in std::env::args().skip(1) {
        if skip {
            skip = false;
        } else if a == "--engines" {
            skip = true;
        } else if !a.starts_with("--engines=") {
            argv.push(a);
        }
    }
    let exe = std::env::current_exe().context("finding rill-bench's own path")?;
    let status = std::process::Command::new(exe)
        .args(&argv)
        .arg("--engines")
        .arg(engine)
        .arg("--child-mount")
        .arg(mnt)
        .status()
        .with_context(|| format!("starting the {engine} run"))?;
    let csv = csv_path(args, engine);
    if !status.success() {
        // The child's CSV has every interval it finished: the figures
        // are computed from it, and the JSON line says how the run ended.
        let w = Workload::of(args, plan, mnt)?;
        let rows = read_csv(&csv).unwrap_or_default();
        let mut r = summary(args, engine, &w, &rows, &csv);
        r.text("aborted", &status.to_string());
        println!("{}", r.json());
    }
    Ok(csv)
}

fn csv_path(args: &Args, engine: &str) -> PathBuf {
    args.out.join(format!(
        "sensor-{engine}-v{:.2}-b{}k.csv",
        args.live_share, args.block_kib
    ))
}

/// (t_s, MB/s, U, put errors) of each interval in a CSV the run wrote.
fn read_csv(path: &Path) -> Result<Vec<Interval>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            Some(Interval {
                t: f.first()?.parse().ok()?,
                mb_s: f.get(1)?.parse().ok()?,
                usage: f.get(3)?.parse().ok()?,
                errors: f.last()?.parse().ok()?,
            })
        })
        .collect())
}

#[derive(Clone, Copy, Debug, Default)]
struct Interval {
    t: f64,
    mb_s: f64,
    usage: f64,
    errors: u64,
}

/// What one run writes: sizes derived from the filesystem and arguments.
struct Workload {
    capacity: u64,
    block: usize,
    sensors: u64,
    live_bytes: u64,
    file_size: u64,
    vnodes: usize,
}

impl Workload {
    fn of(args: &Args, plan: &Plan, mnt: &Path) -> Result<Workload> {
        let capacity = usable_bytes(mnt);
        let block = args.block_kib << 10;
        let sensors =
            (args.live_share * capacity as f64 / (block as f64 * args.writers as f64)) as u64;
        if sensors == 0 || sensors >= 1 << 24 {
            bail!("{sensors} sensors per writer: choose another V, B or capacity");
        }
        let live_bytes = sensors * block as u64 * args.writers as u64;
        let file_size = args.file_size_mib.map(|m| m << 20).unwrap_or_else(|| {
            merge_control::advise(capacity, plan.vnodes as u32, 0.8, args.live_share)
                .max_file_size_bytes
                .unwrap_or(1 << 20)
                .max(1 << 20)
        });
        Ok(Workload {
            capacity,
            block,
            sensors,
            live_bytes,
            file_size,
            vnodes: plan.vnodes,
        })
    }
}

/// The final figures of a run, from its intervals: steady-state MB/s is
/// the median of the intervals after the first full pass (and the mean
/// is given too: on a page-cached disk intervals are bimodal).
fn summary(args: &Args, engine: &str, w: &Workload, rows: &[Interval], csv: &Path) -> Report {
    let mut written = 0f64;
    let mut last_t = 0f64;
    let mut steady: Vec<f64> = Vec::new();
    let mut steady_bytes = 0f64;
    let mut steady_secs = 0f64;
    for r in rows {
        let dt = r.t - last_t;
        if written >= w.live_bytes as f64 {
            steady.push(r.mb_s);
            steady_bytes += r.mb_s * dt;
            steady_secs += dt;
        }
        written += r.mb_s * 1e6 * dt;
        last_t = r.t;
    }
    steady.sort_by(f64::total_cmp);
    let median = steady.get(steady.len() / 2).copied().unwrap_or(0.0);
    let mean = if steady_secs > 0.0 {
        steady_bytes / steady_secs
    } else {
        0.0
    };
    let max_usage = rows.iter().map(|r| r.usage).fold(0.0, f64::max);
    let errors = rows.last().map_or(0, |r| r.errors);
    let mut r = Report::new("sensor", args.quick);
    r.text("engine", engine);
    r.num("live_share", args.live_share, "live share V");
    r.int("block_bytes", w.block as u64, "block size B");
    r.int("file_size_bytes", w.file_size, "rotation size R");
    r.int("vnodes", w.vnodes as u64, "vnodes");
    r.int("capacity_bytes", w.capacity, "capacity C");
    r.num(
        "steady_mb_s",
        median,
        "steady MB/s (median after the first pass)",
    );
    r.num(
        "steady_mean_mb_s",
        mean,
        "steady MB/s (mean after the first pass)",
    );
    r.num("max_usage", max_usage, "max U");
    r.int("put_errors", errors, "put errors");
    r.num("seconds", last_t, "run time, s");
    r.text("csv", &csv.display().to_string());
    r
}

/// Capacity C as usage U counts it: used plus available bytes.
fn usable_bytes(dir: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return 0;
    };
    // SAFETY: statvfs writes only into the struct we pass.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return 0;
    }
    (st.f_blocks - st.f_bfree + st.f_bavail) * st.f_frsize
}

fn run_engine(args: &Args, plan: &Plan, engine: &str, mnt: &Path) -> Result<()> {
    let w = Workload::of(args, plan, mnt)?;
    let (capacity, block, sensors, live_bytes, file_size) =
        (w.capacity, w.block, w.sensors, w.live_bytes, w.file_size);
    let dir = mnt.join("data");
    let target: Box<dyn Target> = match engine {
        "ceiling" => Box::new(targets::Ceiling::new(
            &dir,
            args.writers,
            sensors,
            file_size,
        )?),
        "rocksdb" => Box::new(targets::Rocks::new(&dir)?),
        policy => Box::new(targets::Bitcask::new(&dir, plan.vnodes, file_size, policy)?),
    };
    let machine = Machine::describe(mnt);
    machine.print();
    println!(
        "sensor: engine {engine}, C = {capacity} B, n_i = {}, M = {}, S = {sensors}, B = {block}, \
         V = {:.3}, R = {file_size} B, {} passes",
        plan.vnodes,
        args.writers,
        live_bytes as f64 / capacity as f64,
        plan.passes
    );
    let csv_path = csv_path(args, engine);
    let mut csv = std::fs::File::create(&csv_path)
        .with_context(|| format!("creating {}", csv_path.display()))?;
    writeln!(
        csv,
        "t_s,mb_s,mb_s_ewma,usage,merges,files_deleted_unread,merge_read_mb,merge_written_mb,throttle_ms,take_threshold,put_errors"
    )?;
    let pool = crate::engine::random_pool(8 << 20);
    let written = AtomicU64::new(0);
    let put_errors = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let total_target = plan.passes * live_bytes;
    let start = Instant::now();
    let deadline = start + Duration::from_secs(plan.max_seconds);
    std::thread::scope(|s| -> Result<()> {
        for w in 0..args.writers {
            let (target, pool, written, put_errors, stop) =
                (&target, &pool, &written, &put_errors, &stop);
            s.spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let sensor = n % sensors;
                    let key = ((w as u32) << 24 | sensor as u32).to_be_bytes();
                    let off = (n.wrapping_mul(7919) as usize + w * 131) % (pool.len() - block);
                    match target.put(w, key, n, &pool[off..off + block]) {
                        Ok(()) => {
                            written.fetch_add(block as u64, Ordering::Relaxed);
                        }
                        Err(e) => {
                            if put_errors.fetch_add(1, Ordering::Relaxed) < 5 {
                                eprintln!("put failed: {e}");
                            }
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                    n += 1;
                }
            });
        }
        let interval_ms = if args.quick {
            args.interval_ms.min(500)
        } else {
            args.interval_ms
        };
        let interval = Duration::from_millis(interval_ms.max(50));
        let mut last_bytes = 0u64;
        let mut last_t = 0f64;
        let mut ewma = 0f64;
        loop {
            std::thread::sleep(interval);
            let t = start.elapsed().as_secs_f64();
            let bytes = written.load(Ordering::Relaxed);
            let mb_s = (bytes - last_bytes) as f64 / 1e6 / (t - last_t);
            ewma = if last_t == 0.0 {
                mb_s
            } else {
                ewma + (mb_s - ewma) / 8.0
            };
            let usage = filesystem_usage(mnt).unwrap_or(0.0);
            let m = target.merge_metrics();
            let errors = put_errors.load(Ordering::Relaxed);
            let (merges, unread) = (m.merges, m.files_deleted_unread);
            let (read_mb, written_mb) = (
                m.merge_bytes_read as f64 / 1e6,
                m.merge_bytes_written as f64 / 1e6,
            );
            let (throttle_ms, d_m) = (m.throttle_delay.as_millis(), m.take_threshold);
            writeln!(
                csv,
                "{t:.2},{mb_s:.1},{ewma:.1},{usage:.4},{merges},{unread},{read_mb:.1},{written_mb:.1},{throttle_ms},{d_m:.3},{errors}",
            )?;
            println!(
                "{t:7.1} s {mb_s:8.1} MB/s (ewma {ewma:7.1})  U {usage:.3}  merges {merges}  unread {unread}  merge r/w {read_mb:.0}/{written_mb:.0} MB  throttle {throttle_ms} ms  D_m {d_m:.2}  errors {errors}",
            );
            last_bytes = bytes;
            last_t = t;
            if bytes >= total_target || Instant::now() >= deadline {
                stop.store(true, Ordering::Relaxed);
                break;
            }
        }
        Ok(())
    })?;
    drop(target);
    drop(csv);
    let rows = read_csv(&csv_path)?;
    println!("{}", summary(args, engine, &w, &rows, &csv_path).json());
    Ok(())
}
