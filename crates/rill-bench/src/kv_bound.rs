//! What `rill-bench kv` measures beside its load: the loopback TCP
//! throughput of this machine (the physical bound on bytes moved, since
//! a devrel's nodes and clients all talk over loopback), the bytes the
//! loopback interface carried during the run, and the latency of a small
//! get issued at a steady pace while the load runs (the small request
//! that must not wait behind large values).

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use rill_client::Client;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes per second one TCP connection over 127.0.0.1 carries, moving
/// 8 MiB writes for `secs` (a writer and a reader thread, as a node and
/// its peer would).
pub fn loopback_bytes_s(secs: f64) -> Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0").context("binding a loopback socket")?;
    let addr = listener.local_addr()?;
    let reader = std::thread::spawn(move || -> std::io::Result<u64> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 8 << 20];
        let mut total = 0u64;
        loop {
            match s.read(&mut buf)? {
                0 => return Ok(total),
                n => total += n as u64,
            }
        }
    });
    let mut w = TcpStream::connect(addr).context("connecting over loopback")?;
    let chunk: Vec<u8> = (0..8u32 << 20).map(|i| (i % 251) as u8).collect();
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(secs);
    while Instant::now() < until {
        w.write_all(&chunk)?;
    }
    drop(w);
    let total = reader.join().expect("reader thread")?;
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// Sets this thread's nice value (raising it needs no privilege).
pub fn renice_this_thread(nice: i32) {
    // SAFETY: setpriority on this thread's own id; no memory involved.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice);
    }
}

/// Bytes the loopback interface has received so far (`/proc/net/dev`),
/// if this system says.
pub fn lo_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/dev").ok()?;
    text.lines().find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        if name.trim() != "lo" {
            return None;
        }
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// A client that gets one small key every `every`, timing each.
pub struct Probe {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<(Histogram<u64>, u64)>,
}

pub const PROBE_BUCKET: &[u8] = b"rill-bench-probe";
const PROBE_KEY: &[u8] = b"small";

impl Probe {
    /// Writes the probe's 1 KiB value, then starts getting it.
    pub fn start(target: &str, every: Duration) -> Result<Probe> {
        let mut client =
            Client::connect(target).with_context(|| format!("probe connecting to {target}"))?;
        client.put(
            PROBE_BUCKET,
            PROBE_KEY,
            &[7u8; 1024],
            "application/octet-stream",
        )?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut h = Histogram::new_with_bounds(1, 60_000_000, 3).expect("bounds");
            let mut errors = 0;
            let mut next = Instant::now();
            while !s.load(Ordering::Relaxed) {
                next += every;
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
                let t = Instant::now();
                match client.get_len(PROBE_BUCKET, PROBE_KEY) {
                    Ok(found) => {
                        let _ = h.record((t.elapsed().as_micros() as u64).clamp(1, 60_000_000));
                        // A memory backend at its cap drops the oldest
                        // writes: write the key again (a not-found
                        // answer took the same path, so it counts).
                        if found != Some(1024) {
                            let _ = client.put(
                                PROBE_BUCKET,
                                PROBE_KEY,
                                &[7u8; 1024],
                                "application/octet-stream",
                            );
                        }
                    }
                    Err(_) => errors += 1,
                }
            }
            (h, errors)
        });
        Ok(Probe { stop, handle })
    }

    /// Stops it: the latencies and the gets that failed or found
    /// something else.
    pub fn finish(self) -> (Histogram<u64>, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("probe thread")
    }
}
