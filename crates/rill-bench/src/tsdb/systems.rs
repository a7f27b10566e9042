//! The three systems the benchmark compares, each started by it on
//! loopback with its data in a directory of its own: Rill (the `rill`
//! binary built beside `rill-bench`), VictoriaMetrics and InfluxDB 1.x
//! (Debian's `victoria-metrics` and `influxdb`). For each: the server
//! process's CPU time, a way to have it flush and merge what it took, and
//! its bytes on disk.

use super::http::Conn;
use anyhow::{bail, Context, Result};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Rill,
    Vm,
    Influx,
}

impl Kind {
    pub fn parse(s: &str) -> Result<Kind> {
        Ok(match s {
            "rill" => Kind::Rill,
            "victoriametrics" | "vm" => Kind::Vm,
            "influxdb" | "influx" => Kind::Influx,
            _ => bail!("unknown system {s:?}: rill, victoriametrics or influxdb"),
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Kind::Rill => "rill",
            Kind::Vm => "victoriametrics",
            Kind::Influx => "influxdb",
        }
    }
}

pub struct System {
    pub kind: Kind,
    pub addr: SocketAddr,
    child: Child,
    dir: PathBuf,
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn need(bin: &str, package: &str) -> Result<()> {
    if !Path::new(bin).exists() {
        bail!("{bin} is missing: apt-get install {package}");
    }
    Ok(())
}

/// The `rill` binary named, or the one beside this one.
pub fn rill_bin(named: Option<&Path>) -> Result<PathBuf> {
    let bin = match named {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()?.with_file_name("rill"),
    };
    if !bin.exists() {
        bail!(
            "{} is missing: build it with cargo build --release -p rill",
            bin.display()
        );
    }
    Ok(bin)
}

impl System {
    /// Starts `kind` in `dir`; `rill` and `rill_extra` (config lines) are
    /// for Rill.
    pub fn start(kind: Kind, dir: &Path, rill: Option<&Path>, rill_extra: &str) -> Result<System> {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir)?;
        let port = free_port()?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let log = std::fs::File::create(dir.join("server.log"))?;
        let mut cmd = match kind {
            Kind::Rill => {
                let conf = dir.join("rill.conf");
                std::fs::write(
                    &conf,
                    format!(
                        "platform_data_dir = {}\nring_size = 8\nlistener.http.internal = 127.0.0.1:{port}\n\
                         listener.protobuf.internal = 127.0.0.1:{}\nlistener.cluster.internal = 127.0.0.1:0\n\
                         sensor.retention = 3650d\n{rill_extra}",
                        dir.join("data").display(),
                        free_port()?
                    ),
                )?;
                let mut c = Command::new(rill_bin(rill)?);
                c.arg("-c").arg(&conf).arg("console");
                c
            }
            Kind::Vm => {
                need("/usr/bin/victoria-metrics", "victoria-metrics")?;
                let mut c = Command::new("/usr/bin/victoria-metrics");
                c.arg(format!("-httpListenAddr=127.0.0.1:{port}"))
                    .arg(format!("-storageDataPath={}", dir.join("data").display()))
                    .args([
                        "-retentionPeriod=100y",
                        "-search.disableCache",
                        "-search.maxStepForPointsAdjustment=0",
                        "-search.latencyOffset=1s",
                        "-loggerLevel=ERROR",
                    ]);
                c
            }
            Kind::Influx => {
                need("/usr/bin/influxd", "influxdb")?;
                let conf = dir.join("influxdb.conf");
                std::fs::write(
                    &conf,
                    format!(
                        "reporting-disabled = true\nbind-address = \"127.0.0.1:{}\"\n\
                         [meta]\n  dir = \"{d}/meta\"\n\
                         [data]\n  dir = \"{d}/data\"\n  wal-dir = \"{d}/wal\"\n  query-log-enabled = false\n\
                         \x20 cache-snapshot-write-cold-duration = \"5s\"\n  compact-full-write-cold-duration = \"20s\"\n\
                         [http]\n  bind-address = \"127.0.0.1:{port}\"\n  log-enabled = false\n\
                         [monitor]\n  store-enabled = false\n\
                         [continuous_queries]\n  enabled = false\n",
                        free_port()?,
                        d = dir.display()
                    ),
                )?;
                let mut c = Command::new("/usr/bin/influxd");
                c.arg("-config").arg(&conf);
                c
            }
        };
        let child = cmd
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {}", kind.name()))?;
        let mut s = System {
            kind,
            addr,
            child,
            dir: dir.to_path_buf(),
        };
        s.wait_ready()?;
        if kind == Kind::Influx {
            let (st, body) =
                Conn::new(addr).request("POST", "/query?q=CREATE%20DATABASE%20bench", b"")?;
            if st != 200 {
                bail!(
                    "influxdb: CREATE DATABASE: {st} {}",
                    String::from_utf8_lossy(&body)
                );
            }
        }
        Ok(s)
    }

    fn wait_ready(&mut self) -> Result<()> {
        let path = match self.kind {
            Kind::Rill => "/ping",
            Kind::Vm => "/health",
            Kind::Influx => "/ping",
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Some(st) = self.child.try_wait()? {
                bail!(
                    "{} exited ({st}): {}",
                    self.kind.name(),
                    std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
                );
            }
            if let Ok((200 | 204, _)) = Conn::new(self.addr).request("GET", path, b"") {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("{} did not answer within 60 s", self.kind.name())
    }

    /// The server process's CPU time (user and system), seconds.
    pub fn cpu_seconds(&self) -> f64 {
        cpu_seconds_of(self.child.id())
    }

    /// Resident memory of the server process, bytes.
    pub fn rss_bytes(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .unwrap_or(0)
            * 1024
    }

    pub fn write_path(&self) -> &'static str {
        "/write?db=bench&precision=ms"
    }

    /// Waits until what ingest left in memory to be written is written
    /// (its CPU is ingest's): Rill's cut blocks stored, VictoriaMetrics'
    /// buffered rows flushed; InfluxDB's cache stays (its WAL holds it).
    pub fn drain(&self) -> Result<()> {
        let mut c = Conn::new(self.addr);
        match self.kind {
            Kind::Rill => drain_rill(&[self.addr]),
            Kind::Vm => {
                c.request("GET", "/internal/force_flush", b"")?;
                Ok(())
            }
            Kind::Influx => Ok(()),
        }
    }

    /// Waits until the system has merged or compacted what it wrote, as
    /// it does on its own: VictoriaMetrics' force merge; InfluxDB's cache
    /// written to TSM files and fully compacted (cold after 20 s); Rill
    /// has nothing to merge (its stores took blocks as windows ended; its
    /// clean stop stores the rest).
    pub fn settle(&self) -> Result<()> {
        let mut c = Conn::new(self.addr);
        match self.kind {
            Kind::Rill => Ok(()),
            Kind::Vm => {
                c.request("GET", "/internal/force_merge", b"")?;
                let deadline = Instant::now() + Duration::from_secs(600);
                loop {
                    std::thread::sleep(Duration::from_secs(2));
                    let (_, m) = c.request("GET", "/metrics", b"")?;
                    let m = String::from_utf8_lossy(&m);
                    let busy = m.lines().any(|l| {
                        (l.starts_with("vm_active_merges")
                            || l.starts_with("vm_active_force_merges"))
                            && !l.ends_with(" 0")
                    });
                    if !busy || Instant::now() > deadline {
                        return Ok(());
                    }
                }
            }
            Kind::Influx => {
                // Stable sizes for 30 s past the full compaction's 20 s.
                let deadline = Instant::now() + Duration::from_secs(600);
                let mut last = (u64::MAX, 0u32);
                loop {
                    std::thread::sleep(Duration::from_secs(5));
                    let now =
                        testkit::du(&self.dir.join("data")) + testkit::du(&self.dir.join("wal"));
                    last = if now == last.0 {
                        (now, last.1 + 1)
                    } else {
                        (now, 0)
                    };
                    if last.1 >= 6 || Instant::now() > deadline {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Stops the server (cleanly: Rill stores every buffered sample,
    /// VictoriaMetrics writes its in-memory parts) and returns its bytes
    /// on disk: Rill's sensor directory, VictoriaMetrics' data and index
    /// (its caches and snapshots left out), InfluxDB's TSM files and WAL.
    pub fn stop_and_measure(mut self) -> Result<u64> {
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                bail!("{} did not stop within 120 s", self.kind.name());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(match self.kind {
            Kind::Rill => testkit::du(&self.dir.join("data").join("sensor")),
            Kind::Vm => {
                let d = self.dir.join("data");
                testkit::du(&d.join("data"))
                    + testkit::du(&d.join("indexdb"))
                    + testkit::du(&d.join("metadata"))
            }
            Kind::Influx => {
                testkit::du(&self.dir.join("data")) + testkit::du(&self.dir.join("wal"))
            }
        })
    }
}

/// A process's CPU time (user and system), seconds; 0 once it is gone.
pub fn cpu_seconds_of(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(close) = stat.rfind(')') else {
        return 0.0;
    };
    let f: Vec<&str> = stat[close + 2..].split(' ').collect();
    let tick = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    (tick(11) + tick(12)) as f64 / 100.0
}

/// Waits until no Rill node at `nodes` has a cut block waiting to be
/// stored for more than two ticks (the first tick after the last write
/// finds the ended windows it wrote just written; the next cuts them).
pub fn drain_rill(nodes: &[SocketAddr]) -> Result<()> {
    let mut conns: Vec<Conn> = nodes.iter().map(|a| Conn::new(*a)).collect();
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut empty_since: Option<Instant> = None;
    loop {
        let mut waiting = 0;
        for c in &mut conns {
            let (_, body) = c.request("GET", "/stats", b"")?;
            let stats: serde_json::Value = serde_json::from_slice(&body)?;
            waiting += stats["sensor_blocks_waiting"]
                .as_u64()
                .unwrap_or(u64::MAX / 8);
        }
        if waiting == 0 {
            let since = *empty_since.get_or_insert_with(Instant::now);
            if since.elapsed() > Duration::from_millis(2500) {
                return Ok(());
            }
        } else {
            empty_since = None;
        }
        if Instant::now() > deadline {
            bail!("rill: blocks still waiting to be stored after 600 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for System {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
