//! The storage period under endless ingest (the sensor-data paper's
//! planing): a fresh Rill node with short windows and a short storage
//! period takes samples stamped "now" at a steady rate for a while, as
//! sensors send them; old windows expire whole and their store files are
//! deleted unread. Figures: the bytes merges read against the bytes of
//! blocks written (the target: at most 1 %), files deleted unread, and
//! the sensor directory's size in the last third of the run against the
//! middle third (flat: about 1).

use super::gen::Rng;
use super::http::Conn;
use super::systems::{Kind, System};
use crate::report::Report;
use anyhow::{bail, Result};
use std::path::Path;
use std::time::{Duration, Instant};

/// How the live run is shaped.
pub struct Live {
    pub seconds: u64,
    pub sensors: usize,
    pub window_s: u64,
    pub retention_s: u64,
}

impl Live {
    pub fn new(seconds: u64, quick: bool) -> Live {
        if quick {
            // About 250 kB of blocks a second: a 1 MB store file (the
            // smallest a node takes) closes every few seconds, so several
            // have expired by the end of a 30-second run.
            Live {
                seconds,
                sensors: 1000,
                window_s: 2,
                retention_s: 10,
            }
        } else {
            Live {
                seconds,
                sensors: 2000,
                window_s: 10,
                retention_s: 60,
            }
        }
    }
}

const FIELDS: usize = 5;
/// Rounds of samples a second: each sensor sends all its fields.
const ROUNDS_PER_S: u64 = 5;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// One round: a line per sensor, its fields wandering at two decimals.
fn round(walks: &mut [[f64; FIELDS]], rng: &mut Rng, ts_ms: i64) -> String {
    let mut body = String::with_capacity(walks.len() * 96);
    for (i, w) in walks.iter_mut().enumerate() {
        for x in w.iter_mut() {
            *x = ((*x + (rng.unit() - 0.5) * 0.2) * 100.0).round() / 100.0;
        }
        body.push_str(&format!(
            "live,sensor=s{i:05} a={},b={},c={},d={},e={} {ts_ms}\n",
            w[0], w[1], w[2], w[3], w[4]
        ));
    }
    body
}

/// Runs the live phase in `dir` and reports its figures into `r`.
pub fn run(
    live: &Live,
    dir: &Path,
    rill: Option<&Path>,
    extra: &str,
    r: &mut Report,
) -> Result<()> {
    // Usage U is measured against a capacity of its own, not the disk
    // the run happens to share: above the fisherman's target usage a
    // fuller host disk would start merges this figure is not about.
    let conf = format!(
        "sensor.window = {}s\nsensor.grace = 1s\nsensor.retention = {}s\n\
         sensor.max_file_size = 1MB\nsensor.log_segment_size = 1MB\n\
         sensor.capacity = 1TB\n{extra}",
        live.window_s, live.retention_s
    );
    let sys = System::start(Kind::Rill, dir, rill, &conf)?;
    println!(
        "live: {} sensors x {FIELDS} fields, {ROUNDS_PER_S} samples a second each, for {} s; windows of {} s kept {} s",
        live.sensors, live.seconds, live.window_s, live.retention_s
    );
    let mut rng = Rng::new(0x4c49_5645);
    let mut walks: Vec<[f64; FIELDS]> = (0..live.sensors)
        .map(|_| std::array::from_fn(|f| 10.0 * (f + 1) as f64 + (rng.unit() * 10.0).round()))
        .collect();
    let mut c = Conn::new(sys.addr);
    let sensor_dir = dir.join("data").join("sensor");
    let began = Instant::now();
    let period = Duration::from_millis(1000 / ROUNDS_PER_S);
    let (mut sent, mut busy, mut rounds) = (0u64, 0u64, 0u64);
    let mut usage: Vec<(f64, u64)> = Vec::new();
    let mut next_du = Duration::ZERO;
    while began.elapsed() < Duration::from_secs(live.seconds) {
        let body = round(&mut walks, &mut rng, now_ms());
        let refused_since = Instant::now();
        loop {
            match c.request("POST", sys.write_path(), body.as_bytes())? {
                (204, _) => break,
                (429 | 503, _) if refused_since.elapsed() < Duration::from_secs(60) => {
                    busy += 1;
                    std::thread::sleep(Duration::from_millis(100));
                }
                (st, b) => bail!("live: a write failed: {st} {}", String::from_utf8_lossy(&b)),
            }
        }
        sent += (live.sensors * FIELDS) as u64;
        rounds += 1;
        if began.elapsed() >= next_du {
            usage.push((began.elapsed().as_secs_f64(), testkit::du(&sensor_dir)));
            next_du += Duration::from_secs(1);
        }
        // The next round at its time (late rounds are sent at once).
        let due = period * rounds as u32;
        if let Some(wait) = due.checked_sub(began.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    let elapsed = began.elapsed().as_secs_f64();
    let (_, body) = c.request("GET", "/stats", b"")?;
    let st: serde_json::Value = serde_json::from_slice(&body)?;
    let num = |k: &str| st[k].as_u64().unwrap_or(0);
    let (written, read) = (
        num("sensor_block_bytes_stored_total"),
        num("sensor_merge_bytes_read_total"),
    );
    let deleted = num("sensor_files_deleted_unread_total");
    let third = |k: f64| {
        let span = elapsed / 3.0;
        usage
            .iter()
            .filter(|(t, _)| *t >= k * span && *t < (k + 1.0) * span)
            .map(|(_, b)| *b)
            .max()
            .unwrap_or(0)
    };
    let (middle, last) = (third(1.0), third(2.0));
    drop(sys);
    if deleted == 0 {
        bail!(
            "live: no store file expired in {} s: run longer than the storage period ({} s) and a few windows",
            live.seconds,
            live.retention_s
        );
    }
    r.num(
        "live_samples_per_s",
        sent as f64 / elapsed,
        "live: samples/s taken, stamped now",
    );
    r.int(
        "live_write_retries",
        busy,
        "live: writes answered 429/503 and sent again",
    );
    r.int(
        "live_block_bytes_written",
        written,
        "live: bytes of blocks written",
    );
    r.int("live_merge_bytes_read", read, "live: bytes read by merges");
    r.num(
        "live_merge_read_ratio",
        read as f64 / written.max(1) as f64,
        "live: merge bytes read / block bytes written (target <= 0.01)",
    );
    r.int(
        "live_files_deleted_unread",
        deleted,
        "live: store files of expired windows deleted unread",
    );
    r.num(
        "live_disk_last_vs_middle",
        last as f64 / middle.max(1) as f64,
        "live: sensor data on disk, last third's peak / middle third's (flat: about 1)",
    );
    Ok(())
}
