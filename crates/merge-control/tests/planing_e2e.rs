//! End to end on a real, small filesystem at V = 0.9 (the sensor-data paper, §4.1, area
//! C): several writers overwrite their sensors cyclically, running through
//! the disk several times, while the node's merge scheduler (Fisherman) and
//! put throttling keep usage in bounds. No put may fail (no ENOSPC reaches
//! a writer) and U must never pass U_h.

use bitcask::{Options, Store};
use merge_control::{
    filesystem_usage, Fisherman, MergeScheduler, SchedulerSettings, ThrottleSettings, UsageSource,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testkit::LoopFs;

const VNODES: usize = 4;
const WRITERS: u64 = 4;
const BLOCK: usize = 16 << 10;
const LIVE_SHARE: f64 = 0.9;
const PASSES: u64 = 3;
/// U_h, Riak's and the paper's default: at U_h each put waits a second.
/// Merge output can take U past a lower U_h by up to R / C for a moment
/// (the copy is written before the originals go), so the test uses the
/// default and checks that the disk never fills.
const HIGH_USAGE: f64 = 1.0;

fn sensor_key(writer: u64, sensor: u64) -> [u8; 4] {
    // The paper's key: writer id in the high 8 bits, sensor in the low 24.
    (((writer as u32) << 24) | sensor as u32).to_be_bytes()
}

fn vnode_of(key: &[u8; 4]) -> usize {
    let h = u32::from_be_bytes(*key).wrapping_mul(0x9E37_79B1);
    (h >> 16) as usize % VNODES
}

#[test]
fn fisherman_keeps_a_nearly_full_disk_writable() {
    let Some(fs) = LoopFs::mount_or_skip(64) else {
        return;
    };
    let mnt = fs.path();
    assert!(filesystem_usage(mnt).unwrap() < 0.2);
    let capacity = usable_bytes(mnt);
    let scheduler = MergeScheduler::start(SchedulerSettings {
        usage: UsageSource::Filesystem(mnt.to_path_buf()),
        policy: Box::new(Fisherman::default()),
        throttle: ThrottleSettings {
            high_usage: HIGH_USAGE,
            ..ThrottleSettings::default()
        },
        workers: 1,
        idle_tick: Duration::from_millis(5),
    });
    let stores: Vec<Arc<Store>> = (0..VNODES)
        .map(|v| {
            let opts = Options {
                max_file_size_bytes: 1 << 20,
                write_buffer_bytes: 64 << 10,
                put_gate: Some(scheduler.throttle()),
                ..Options::default()
            };
            let s = Arc::new(Store::open(mnt.join(format!("vnode-{v}")), opts).unwrap());
            scheduler.add_store(s.clone());
            s
        })
        .collect();
    // S sensors per writer so that V = S * B * M / C = 0.9.
    let sensors = (LIVE_SHARE * capacity as f64 / (BLOCK as f64 * WRITERS as f64)) as u64;
    let stop = AtomicBool::new(false);
    let max_usage_ppm = AtomicU64::new(0);
    let put_errors = AtomicU64::new(0);
    let written = AtomicU64::new(0);
    let deadline = Instant::now() + Duration::from_secs(240);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let u = filesystem_usage(mnt).unwrap();
                max_usage_ppm.fetch_max((u * 1e6) as u64, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (stores, put_errors, written) = (&stores, &put_errors, &written);
                s.spawn(move || {
                    let mut value = vec![w as u8; BLOCK];
                    for pass in 0..PASSES {
                        for sensor in 0..sensors {
                            if Instant::now() > deadline {
                                return;
                            }
                            value[..8].copy_from_slice(&(pass * sensors + sensor).to_le_bytes());
                            let key = sensor_key(w, sensor);
                            match stores[vnode_of(&key)].put(&key, &value) {
                                Ok(()) => {
                                    written.fetch_add(BLOCK as u64, Ordering::Relaxed);
                                }
                                Err(e) => {
                                    eprintln!("put failed: {e}");
                                    put_errors.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    let m = scheduler.metrics();
    let max_u = max_usage_ppm.load(Ordering::Relaxed) as f64 / 1e6;
    let total = written.load(Ordering::Relaxed);
    eprintln!(
        "capacity {capacity} B, {sensors} sensors x {WRITERS} writers, wrote {total} B \
         ({:.1} passes over the disk), max U {max_u:.4}, {m:?}",
        total as f64 / capacity as f64
    );
    assert_eq!(put_errors.load(Ordering::Relaxed), 0, "a put failed");
    assert!(
        Instant::now() <= deadline,
        "the writers did not finish in time"
    );
    assert!(
        total as f64 >= 2.5 * capacity as f64,
        "the writers did not run through the disk"
    );
    assert!(max_u < HIGH_USAGE, "usage reached {max_u}");
    assert!(m.merges > 0);
    // Every sensor holds its last block.
    for w in 0..WRITERS {
        for sensor in (0..sensors).step_by(7) {
            let key = sensor_key(w, sensor);
            let v = stores[vnode_of(&key)].get(&key).unwrap().unwrap();
            let seq = u64::from_le_bytes(v[..8].try_into().unwrap());
            assert_eq!(seq, (PASSES - 1) * sensors + sensor);
        }
    }
}

/// Usable bytes of the filesystem holding `dir` (used + available).
fn usable_bytes(dir: &std::path::Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: statvfs writes only into the struct we pass.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
    (st.f_blocks - st.f_bfree + st.f_bavail) * st.f_frsize
}
