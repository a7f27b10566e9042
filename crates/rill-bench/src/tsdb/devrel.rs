//! A devrel for the scaling phase: `rill devrel N` run by the benchmark
//! (dev1..devN under a directory of their own, node K's HTTP on base +
//! 10K + 8), with the node processes' CPU time from /proc, their stats,
//! a kill and a restart, and their bytes on disk once stopped.

use super::http::Conn;
use super::systems::{cpu_seconds_of, drain_rill};
use anyhow::{bail, Context, Result};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub struct Cluster {
    pub nodes: u32,
    dir: PathBuf,
    base_port: u16,
    rill: PathBuf,
    stopped: bool,
}

impl Cluster {
    /// A new devrel of `nodes` nodes in `dir` (what was there is
    /// removed), every node with `settings` (`key=value`), started,
    /// joined and settled.
    pub fn up(
        rill: &Path,
        dir: &Path,
        nodes: u32,
        base_port: u16,
        settings: &[String],
    ) -> Result<Cluster> {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir)?;
        let c = Cluster {
            nodes,
            dir: dir.to_path_buf(),
            base_port,
            rill: rill.to_path_buf(),
            stopped: false,
        };
        let mut cmd = Command::new(rill);
        cmd.arg("devrel")
            .arg(nodes.to_string())
            .arg("--dir")
            .arg(dir)
            .arg("--base-port")
            .arg(base_port.to_string());
        for s in settings {
            cmd.arg("--set").arg(s);
        }
        let out = cmd.output().context("cannot run rill devrel")?;
        if !out.status.success() {
            bail!(
                "rill devrel {nodes} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(c)
    }

    /// Node `k`'s HTTP address (1-based).
    pub fn http(&self, k: u32) -> SocketAddr {
        let port = u32::from(self.base_port) + 10 * k + 8;
        SocketAddr::from(([127, 0, 0, 1], port as u16))
    }

    pub fn addrs(&self) -> Vec<SocketAddr> {
        (1..=self.nodes).map(|k| self.http(k)).collect()
    }

    fn node_dir(&self, k: u32) -> PathBuf {
        self.dir.join(format!("dev{k}"))
    }

    /// Node `k`'s process id, from its pid file.
    pub fn pid(&self, k: u32) -> Option<u32> {
        std::fs::read_to_string(self.node_dir(k).join("data").join("rill.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Each node's CPU time so far, seconds (0 for a node not running).
    pub fn cpu_seconds(&self) -> Vec<f64> {
        (1..=self.nodes)
            .map(|k| self.pid(k).map_or(0.0, cpu_seconds_of))
            .collect()
    }

    /// Node `k`'s `/stats`.
    pub fn stats(&self, k: u32) -> Result<serde_json::Value> {
        let (st, body) = Conn::new(self.http(k)).request("GET", "/stats", b"")?;
        if st != 200 {
            bail!("dev{k}: /stats answered {st}");
        }
        Ok(serde_json::from_slice(&body)?)
    }

    /// The sum of a counter over every node.
    pub fn total(&self, stat: &str) -> Result<u64> {
        let mut sum = 0;
        for k in 1..=self.nodes {
            sum += self.stats(k)?[stat].as_u64().unwrap_or(0);
        }
        Ok(sum)
    }

    /// Waits until no node has a block waiting to be stored.
    pub fn drain(&self) -> Result<()> {
        drain_rill(&self.addrs())
    }

    /// `kill -9` of node `k`.
    pub fn kill(&self, k: u32) -> Result<()> {
        let pid = self.pid(k).context("no pid file")?;
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Path::new(&format!("/proc/{pid}")).exists() {
            if Instant::now() > deadline {
                bail!("dev{k} (pid {pid}) did not die of SIGKILL in 30 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Starts node `k` again and waits until every node sees every
    /// member up.
    pub fn restart(&self, k: u32) -> Result<()> {
        let out = Command::new(&self.rill)
            .arg("-c")
            .arg(self.node_dir(k).join("rill.conf"))
            .arg("start")
            .output()
            .context("cannot run rill start")?;
        if !out.status.success() {
            bail!(
                "dev{k} did not start: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let up = (1..=self.nodes).all(|j| {
                self.stats(j)
                    .is_ok_and(|s| s["cluster_unreachable_members"].as_u64() == Some(0))
            });
            if up {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("dev{k} restarted but not every node sees it up after 120 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops every node cleanly (each stores what it buffered) and
    /// returns each node's bytes of sensor data on disk.
    pub fn stop_and_measure(mut self) -> Result<Vec<u64>> {
        let out = Command::new(&self.rill)
            .arg("devrel")
            .arg(self.nodes.to_string())
            .arg("--dir")
            .arg(&self.dir)
            .arg("--base-port")
            .arg(self.base_port.to_string())
            .arg("--stop")
            .output()
            .context("cannot run rill devrel --stop")?;
        if !out.status.success() {
            bail!(
                "rill devrel --stop failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        self.stopped = true;
        let said = String::from_utf8_lossy(&out.stdout);
        if said.contains("did not stop") {
            bail!("a node did not stop cleanly: {said}");
        }
        Ok((1..=self.nodes)
            .map(|k| testkit::du(&self.node_dir(k).join("data").join("sensor")))
            .collect())
    }
}

impl Drop for Cluster {
    /// A benchmark that failed leaves no node running.
    fn drop(&mut self) {
        if !self.stopped {
            for k in 1..=self.nodes {
                if let Some(pid) = self.pid(k) {
                    unsafe {
                        libc::kill(pid as i32, libc::SIGKILL);
                    }
                }
            }
        }
    }
}
