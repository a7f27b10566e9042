//! The `riak.conf`-style configuration file: `key = value` lines, `#`
//! comments, Riak's key names where the concept is the same. Every key
//! is checked: an unknown key or a bad value names its line.
//!
//! Each setting is described once, in a table by subject ([`node`],
//! [`cluster`], [`backends`], [`sensor`]): its key, the kind of value it
//! takes, its default, its help and where its value goes. The defaults
//! ([`Config::defaults`] applies every table default), the parser, `rill
//! chkconfig --keys` and docs/settings.md all come from those tables.

mod aae;
mod backends;
mod cluster;
mod memory;
mod node;
pub mod sensor;
pub mod setting;
pub mod units;

pub use sensor::SensorConfig;

use rill_node::NodeConfig;
use setting::{Arg, Initial};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything the `rill` binary runs from.
pub struct Config {
    pub node: NodeConfig,
    pub pb_listener: SocketAddr,
    pub http_listener: SocketAddr,
    /// `listener.cluster.internal`: where other nodes reach this one
    /// (gossip, replicas, handoff). Port 0: any free port, advertised to
    /// the cluster at each start.
    pub cluster_listener: SocketAddr,
    /// `listener.cluster.advertise`: the address other nodes are told to
    /// reach this one at, when it is not the listener's (a listener on
    /// every interface, a NAT). Port 0: the listener's port.
    pub cluster_advertise: Option<SocketAddr>,
    /// `transfer_limit`: handoffs leaving this node at once.
    pub transfer_limit: usize,
    /// `handoff.batch_items`: objects per handoff batch at most.
    pub handoff_batch_items: usize,
    /// `handoff.timeout`: a batch not acknowledged in this long starts a
    /// new session (which resumes after the last stored batch).
    pub handoff_timeout: Duration,
    /// `cluster.down_after`: silence after which a node is taken for
    /// down (suspected after half of it).
    pub down_after: Duration,
    /// Test only (`test.link.delay`, `test.link.loss`): every message to
    /// another node waits this long, and this share of them is lost, so
    /// tests and benchmarks can give loopback a wide-area link's latency
    /// (this kernel has no `netem`). Each node delays what it sends: the
    /// round trip is twice the delay.
    pub test_link_delay: Duration,
    pub test_link_loss: f64,
    pub pb_max_frame_bytes: usize,
    /// `runtime.worker_threads`: threads that serve connections and run
    /// the cluster runtime (Riak's `erlang.schedulers.online`); `None`:
    /// one per core. Nodes sharing a machine (a devrel) split its cores.
    pub worker_threads: Option<usize>,
    pub log_level: String,
    /// Where `rill start` writes the node's pid.
    pub pid_file: PathBuf,
    /// The sensor-data service (`sensor.*`).
    pub sensor: SensorConfig,
    /// `bitcask.sync.interval`, for `bitcask.sync.strategy = interval`.
    pub bitcask_sync_interval: Duration,
    /// `bitcask.merge.target_usage`, U_m of the fisherman.
    pub merge_target_usage: f64,
}

/// A problem with one line.
#[derive(Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.message)
        } else {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }
}

/// `raw` without its comment (see [`Config::parse`]).
fn strip_comment(raw: &str) -> &str {
    let b = raw.as_bytes();
    let eq = raw.find('=');
    // A `#` that starts a value is the value's.
    let starts_value = |i: usize| eq.is_some_and(|e| e < i && raw[e + 1..i].trim().is_empty());
    let comment = (0..b.len()).find(|&i| {
        b[i] == b'#' && (i == 0 || b[i - 1] == b' ' || b[i - 1] == b'\t') && !starts_value(i)
    });
    match comment {
        Some(i) => &raw[..i],
        None => raw,
    }
}

impl Config {
    /// The settings' defaults, each from its table.
    pub fn defaults() -> Config {
        let data = PathBuf::from("./data");
        let mut c = Config {
            pid_file: data.join("rill.pid"),
            node: rill_node::NodeConfig::new(data),
            pb_listener: ([127, 0, 0, 1], 8087).into(),
            http_listener: ([127, 0, 0, 1], 8098).into(),
            cluster_listener: ([127, 0, 0, 1], 8099).into(),
            cluster_advertise: None,
            transfer_limit: 2,
            handoff_batch_items: 1000,
            handoff_timeout: Duration::from_secs(15),
            down_after: Duration::from_secs(6),
            test_link_delay: Duration::ZERO,
            test_link_loss: 0.0,
            pb_max_frame_bytes: 64 << 20,
            worker_threads: None,
            log_level: "info".into(),
            sensor: SensorConfig::default(),
            bitcask_sync_interval: Duration::from_secs(1),
            merge_target_usage: 0.8,
        };
        for s in setting::all() {
            if let Initial::Value(v) = s.default {
                if let Err(e) = c.set(s.key, v) {
                    unreachable!("the default of {} does not parse: {e}", s.key);
                }
            }
        }
        backends::finish(&mut c);
        c
    }

    pub fn load(path: &Path) -> Result<Config, Vec<ConfigError>> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            vec![ConfigError {
                line: 0,
                message: format!("cannot read {}: {e}", path.display()),
            }]
        })?;
        Config::parse(&text)
    }

    /// Parses a whole file; every problem is reported, not just the first.
    /// A `#` at the start of a line or after a space or tab begins a
    /// comment; one inside a value or starting it (MQTT topic filters
    /// `plant/#` and `#`, a password) is part of it.
    pub fn parse(text: &str) -> Result<Config, Vec<ConfigError>> {
        let mut c = Config::defaults();
        let mut errors = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let content = strip_comment(raw).trim();
            if content.is_empty() {
                continue;
            }
            let Some((key, value)) = content.split_once('=') else {
                errors.push(ConfigError {
                    line,
                    message: format!("expected key = value, found {content:?}"),
                });
                continue;
            };
            if let Err(message) = c.set(key.trim(), value.trim()) {
                errors.push(ConfigError { line, message });
            }
        }
        let problems = backends::finish(&mut c)
            .into_iter()
            .chain(c.cluster_advertised().err());
        errors.extend(problems.map(|message| ConfigError { line: 0, message }));
        if errors.is_empty() {
            Ok(c)
        } else {
            Err(errors)
        }
    }

    /// Sets one key from its text, as its table says.
    fn set(&mut self, key: &str, v: &str) -> Result<(), String> {
        let Some((s, name)) = setting::find(key) else {
            return Err(format!(
                "unknown setting {key:?} (`rill chkconfig --keys` lists the settings this build knows)"
            ));
        };
        let value = s.parse(key, v)?;
        (s.apply)(self, &Arg { key, name, value })
    }

    /// The address other nodes are told to reach this one at (port 0:
    /// the listener's port once bound): `listener.cluster.advertise`, else
    /// the listener's address, else, for a listener on every interface
    /// (0.0.0.0 or ::), the nodename's host, which must then be an IP
    /// address (as Riak's nodes reach each other by their names' hosts).
    pub fn cluster_advertised(&self) -> Result<SocketAddr, String> {
        if let Some(a) = self.cluster_advertise {
            if a.ip().is_unspecified() {
                return Err(format!(
                    "listener.cluster.advertise must be an address other nodes can reach, found {a}"
                ));
            }
            return Ok(a);
        }
        let listen = self.cluster_listener;
        if !listen.ip().is_unspecified() {
            return Ok(listen);
        }
        let host = self.node.nodename.rsplit_once('@').map_or("", |(_, h)| h);
        match host.parse::<std::net::IpAddr>() {
            Ok(ip) if !ip.is_unspecified() => Ok(SocketAddr::new(ip, listen.port())),
            _ => Err(format!(
                "listener.cluster.internal ({listen}) listens on every interface and the nodename's host ({host:?}) is not an IP address: set listener.cluster.advertise to the address other nodes reach this one at"
            )),
        }
    }
}

#[cfg(test)]
mod tests;
