//! `rill devrel`: a cluster of N nodes on this machine for development
//! and tests (Riak's `make devrel`): `dev1` .. `devN` under one
//! directory, each with its config, data and log; node K listens on
//! base + 10K + 7 (PB), + 8 (HTTP) and + 9 (cluster), so dev1 has Riak's
//! devrel ports 10017, 10018, 10019. The nodes are started, joined to
//! dev1, the plan committed, and the command returns once the ring is
//! ready and no transfer is pending.

use crate::admin;
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub struct Devrel {
    pub nodes: u32,
    pub dir: PathBuf,
    pub ring_size: u32,
    pub base_port: u16,
    pub backend: String,
    /// `key = value` lines added to every node's configuration (checked
    /// as the node starts).
    pub settings: Vec<(String, String)>,
}

pub struct DevNode {
    pub name: String,
    pub conf: PathBuf,
    pub pb: SocketAddr,
    pub http: SocketAddr,
    pub cluster: SocketAddr,
}

fn addr(port: u32) -> Result<SocketAddr> {
    let port =
        u16::try_from(port).map_err(|_| anyhow!("port {port} is past 65535; lower --base-port"))?;
    Ok(SocketAddr::from(([127, 0, 0, 1], port)))
}

impl Devrel {
    pub fn node(&self, k: u32) -> Result<DevNode> {
        let base = u32::from(self.base_port) + 10 * k;
        Ok(DevNode {
            name: format!("dev{k}@127.0.0.1"),
            conf: self.dir.join(format!("dev{k}")).join("rill.conf"),
            pb: addr(base + 7)?,
            http: addr(base + 8)?,
            cluster: addr(base + 9)?,
        })
    }

    /// The nodes share this machine's cores: each gets its share (at
    /// least one thread), so they do not hand work between more threads
    /// than there are cores (measured in docs/benchmarks.md).
    fn worker_threads(&self) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cores / self.nodes.max(1) as usize).max(1)
    }

    fn write_configs(&self) -> Result<()> {
        for k in 1..=self.nodes {
            let n = self.node(k)?;
            let home = n.conf.parent().expect("dev dir");
            std::fs::create_dir_all(home)
                .with_context(|| format!("cannot create {}", home.display()))?;
            let data = std::fs::canonicalize(home)?.join("data");
            let text = format!(
                "nodename = {}\nring_size = {}\nstorage_backend = {}\nplatform_data_dir = {}\n\
                 listener.protobuf.internal = {}\nlistener.http.internal = {}\n\
                 listener.cluster.internal = {}\nruntime.worker_threads = {}\n",
                n.name,
                self.ring_size,
                self.backend,
                data.display(),
                n.pb,
                n.http,
                n.cluster,
                self.worker_threads()
            ) + &self
                .settings
                .iter()
                .map(|(k, v)| format!("{k} = {v}\n"))
                .collect::<String>();
            // An existing config is kept (the operator may have edited it).
            if !n.conf.exists() {
                std::fs::write(&n.conf, text)
                    .with_context(|| format!("cannot write {}", n.conf.display()))?;
            }
        }
        Ok(())
    }

    fn rill(&self, conf: &Path, args: &[&str]) -> Result<std::process::Output> {
        Command::new(std::env::current_exe()?)
            .arg("-c")
            .arg(conf)
            .args(args)
            .output()
            .context("cannot run rill")
    }

    /// Creates, starts and joins the nodes.
    pub fn up(&self) -> Result<()> {
        if self.nodes == 0 {
            bail!("a devrel needs at least one node");
        }
        self.write_configs()?;
        for k in 1..=self.nodes {
            let n = self.node(k)?;
            let out = self.rill(&n.conf, &["start"])?;
            let text = String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr);
            if !out.status.success() && !text.contains("already running") {
                bail!("{} did not start: {}", n.name, text.trim());
            }
            println!(
                "{} running: PB {}, HTTP {}, cluster {}",
                n.name, n.pb, n.http, n.cluster
            );
        }
        let first = self.node(1)?;
        let mut joined = 0;
        for k in 2..=self.nodes {
            let n = self.node(k)?;
            let a = op(
                n.http,
                json!({"op": "join", "target": first.cluster.to_string()}),
            )?;
            if a.0 {
                joined += 1;
            } else if !a.1.contains("already a member") {
                bail!("{} could not join: {}", n.name, a.1);
            }
        }
        if joined > 0 {
            // Plan once dev1 has heard of every join, and plan again if
            // the cluster changed between the plan and the commit.
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let members = members_seen(first.http);
                let plan = op(first.http, json!({"op": "plan"}))?;
                if members == Some(u64::from(self.nodes)) && plan.0 {
                    let commit = op(first.http, json!({"op": "commit"}))?;
                    if commit.0 {
                        break;
                    }
                    if Instant::now() > deadline {
                        bail!("commit refused: {}", commit.1);
                    }
                } else if Instant::now() > deadline {
                    bail!("the cluster did not converge for a plan: {}", plan.1);
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            println!(
                "joined {joined} node(s) to {}; waiting for the transfers",
                first.name
            );
        }
        self.wait_settled(Duration::from_secs(600))?;
        let status = op(first.http, json!({"op": "member-status"}))?;
        println!("{}", status.1.trim_end());
        Ok(())
    }

    /// Waits until every node agrees on the members and no transfer is
    /// pending.
    pub fn wait_settled(&self, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let mut settled = true;
            for k in 1..=self.nodes {
                let n = self.node(k)?;
                let r = admin::request(n.http, "GET", "/stats", None)?;
                let v: Value = serde_json::from_str(&r.body).unwrap_or(Value::Null);
                settled &= v["cluster_members"].as_u64() == Some(u64::from(self.nodes))
                    && v["ring_pending_transfers"].as_u64() == Some(0);
            }
            if settled {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the devrel did not settle in {within:?}; see 'rill admin ring-status'");
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    pub fn stop(&self) -> Result<()> {
        for k in 1..=self.nodes {
            let n = self.node(k)?;
            if !n.conf.exists() {
                continue;
            }
            let out = self.rill(&n.conf, &["stop"])?;
            let text = String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr);
            println!("{}: {}", n.name, text.trim());
        }
        Ok(())
    }
}

fn op(http: SocketAddr, command: Value) -> Result<(bool, String)> {
    let r = admin::request(http, "POST", "/rill/cluster", Some(&command.to_string()))?;
    let v: Value = serde_json::from_str(&r.body)
        .map_err(|_| anyhow!("the node at {http} answered: {}", r.body.trim()))?;
    Ok((
        v["ok"].as_bool() == Some(true),
        v["text"].as_str().unwrap_or_default().to_string(),
    ))
}

/// How many members (joining ones included) the node at `http` knows.
fn members_seen(http: SocketAddr) -> Option<u64> {
    let r = admin::request(http, "GET", "/stats", None).ok()?;
    let v: Value = serde_json::from_str(&r.body).ok()?;
    v["cluster_members"].as_u64()
}
