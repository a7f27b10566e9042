//! The `riak.conf`-style configuration file: `key = value` lines, `#`
//! comments, Riak's key names where the concept is the same. Every key
//! is checked: an unknown key or a bad value names its line.

use crate::config_backends::{
    machine_memory_bytes, set_leveldb, set_leveled, set_memory, set_multi,
};
pub use crate::config_keys::KEYS;
use bitcask::SyncStrategy;
use rill_node::{BackendKind, DeleteMode, MergePolicyKind, NodeConfig};
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
    pub sensor: crate::config_sensor::SensorConfig,
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

/// Sizes as cuttlefish reads them: KB, MB, GB, TB are powers of 1024.
pub fn bytesize(v: &str) -> Result<u64, String> {
    let t = v.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("expected a size such as 2GB or 512MB, found {v:?}"))?;
    let mult: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "KB" | "KIB" => 1 << 10,
        "MB" | "MIB" => 1 << 20,
        "GB" | "GIB" => 1 << 30,
        "TB" | "TIB" => 1 << 40,
        u => {
            return Err(format!(
                "unknown size unit {u:?} in {v:?} (use KB, MB, GB or TB)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size {v:?} is too large"))
}

/// Durations as cuttlefish reads them: `10ms`, `3s`, `5m`, `1h`, `1d`.
pub fn duration(v: &str) -> Result<Duration, String> {
    let t = v.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("expected a duration such as 3s or 1d, found {v:?}"))?;
    if unit.trim() == "us" {
        return Ok(Duration::from_micros(n));
    }
    let ms = match unit.trim() {
        "ms" => 1,
        "s" | "" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        u => {
            return Err(format!(
                "unknown duration unit {u:?} in {v:?} (use us, ms, s, m, h, d or w)"
            ))
        }
    };
    Ok(Duration::from_millis(n * ms))
}

fn share(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(format!("expected a number between 0 and 1, found {v:?}")),
    }
}

fn addr(v: &str) -> Result<SocketAddr, String> {
    v.parse()
        .map_err(|_| format!("expected an address such as 127.0.0.1:8087, found {v:?}"))
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
    /// Riak's defaults with data under `./data`.
    pub fn defaults() -> Config {
        let data = PathBuf::from("./data");
        let mut node = NodeConfig::new(data.clone());
        // Riak's leveldb.maximum_memory.percent = 70: a bound the cache
        // grows to with the data read, not memory taken at start.
        node.leveldb.max_memory_bytes = machine_memory_bytes() / 100 * 70;
        node.leveled.max_memory_bytes = node.leveldb.max_memory_bytes;
        Config {
            pid_file: data.join("rill.pid"),
            node,
            pb_listener: "127.0.0.1:8087".parse().expect("address"),
            http_listener: "127.0.0.1:8098".parse().expect("address"),
            cluster_listener: "127.0.0.1:8099".parse().expect("address"),
            cluster_advertise: None,
            transfer_limit: 2,
            handoff_batch_items: 1000,
            handoff_timeout: Duration::from_secs(15),
            test_link_delay: Duration::ZERO,
            test_link_loss: 0.0,
            pb_max_frame_bytes: 64 << 20,
            worker_threads: None,
            log_level: "info".into(),
            sensor: Default::default(),
        }
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
        let mut sync_interval: Option<u64> = None;
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
            let (key, value) = (key.trim(), value.trim());
            if let Err(message) = c.set(key, value, &mut sync_interval) {
                errors.push(ConfigError { line, message });
            }
        }
        if let (SyncStrategy::Interval { .. }, Some(ms)) = (c.node.bitcask.sync, sync_interval) {
            c.node.bitcask.sync = SyncStrategy::Interval { interval_ms: ms };
        }
        let shares = c
            .node
            .multi
            .iter()
            .filter(|b| matches!(b.kind, BackendKind::Leveldb | BackendKind::Leveled))
            .count()
            .max(1) as u64;
        if c.node
            .multi
            .iter()
            .any(|b| b.leveldb.max_memory_bytes == u64::MAX)
        {
            let share = machine_memory_bytes() / 100 * 70 / shares;
            for b in &mut c.node.multi {
                if b.leveldb.max_memory_bytes == u64::MAX {
                    b.leveldb.max_memory_bytes = share;
                }
            }
        }
        for b in &c.node.multi {
            if b.kind == BackendKind::Multi {
                errors.push(ConfigError {
                    line: 0,
                    message: format!(
                        "multi_backend.{0}.storage_backend is not set (bitcask, leveldb, leveled or memory) though other multi_backend.{0}.* settings are",
                        b.name
                    ),
                });
            }
        }
        if c.node.backend == BackendKind::Multi {
            let names: Vec<&str> = c.node.multi.iter().map(|b| b.name.as_str()).collect();
            let message = match c.node.multi_default.as_deref() {
                _ if names.is_empty() => Some("storage_backend = multi needs backends: multi_backend.NAME.storage_backend = bitcask, leveldb, leveled or memory".to_string()),
                None => Some("storage_backend = multi needs multi_backend.default = NAME".to_string()),
                Some(d) if !names.contains(&d) => Some(format!(
                    "multi_backend.default = {d} names no backend (the backends: {})",
                    names.join(", ")
                )),
                Some(_) => None,
            };
            if let Some(message) = message {
                errors.push(ConfigError { line: 0, message });
            }
        }
        let t = &c.node.throttle;
        if t.low_usage >= t.high_usage {
            errors.push(ConfigError {
                line: 0,
                message: format!(
                    "bitcask.throttle.low_usage ({}) must be below bitcask.throttle.high_usage ({})",
                    t.low_usage, t.high_usage
                ),
            });
        }
        if let Err(message) = c.cluster_advertised() {
            errors.push(ConfigError { line: 0, message });
        }
        if errors.is_empty() {
            Ok(c)
        } else {
            Err(errors)
        }
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

    fn set(&mut self, key: &str, v: &str, sync_interval: &mut Option<u64>) -> Result<(), String> {
        let n = &mut self.node;
        if let Some(rest) = key.strip_prefix("multi_backend.") {
            return set_multi(n, rest, v);
        }
        if let Some(r) = set_leveldb(&mut n.leveldb, key, key, v) {
            return r;
        }
        if let Some(r) = set_leveled(&mut n.leveled, &mut n.leveled_journal, key, key, v) {
            return r;
        }
        if let Some(r) = set_memory(&mut n.memory_max_bytes, &mut n.memory_ttl, key, v) {
            return r;
        }
        if let Some(r) = crate::config_sensor::set_sensor(&mut self.sensor, key, v) {
            return r;
        }
        match key {
            "nodename" => {
                if !v.contains('@') {
                    return Err(format!("nodename must be name@host, found {v:?}"));
                }
                n.nodename = v.to_string();
            }
            "ring_size" => {
                let size: u32 = v.parse().map_err(|_| format!("ring_size must be an integer, found {v:?}"))?;
                if !size.is_power_of_two() || !(1..=16384).contains(&size) {
                    return Err(format!("ring_size must be a power of two between 1 and 16384, found {size}"));
                }
                n.ring_size = size;
            }
            "storage_backend" => {
                n.backend = match v {
                    "bitcask" => BackendKind::Bitcask,
                    "memory" => BackendKind::Memory,
                    "leveldb" => BackendKind::Leveldb,
                    "leveled" => BackendKind::Leveled,
                    "multi" => BackendKind::Multi,
                    _ => return Err(format!("storage_backend must be bitcask, leveldb, leveled, memory or multi, found {v:?}")),
                }
            }
            "platform_data_dir" => {
                n.data_dir = PathBuf::from(v);
                self.pid_file = n.data_dir.join("rill.pid");
            }
            "listener.protobuf.internal" => self.pb_listener = addr(v)?,
            "listener.http.internal" => self.http_listener = addr(v)?,
            "listener.cluster.internal" => self.cluster_listener = addr(v)?,
            "listener.cluster.advertise" => self.cluster_advertise = Some(addr(v)?),
            "transfer_limit" => {
                self.transfer_limit = v
                    .parse()
                    .map_err(|_| format!("transfer_limit must be a count, found {v:?}"))?
            }
            "handoff.batch_items" => {
                let n: usize = v
                    .parse()
                    .map_err(|_| format!("handoff.batch_items must be a count, found {v:?}"))?;
                if n == 0 {
                    return Err("handoff.batch_items must be at least 1".into());
                }
                self.handoff_batch_items = n;
            }
            "handoff.timeout" => self.handoff_timeout = duration(v)?,
            "test.link.delay" => self.test_link_delay = duration(v)?,
            "test.link.loss" => self.test_link_loss = share(v)?,
            "runtime.worker_threads" => {
                let n: usize = v.parse().map_err(|_| {
                    format!("runtime.worker_threads must be a count, found {v:?}")
                })?;
                if !(1..=1024).contains(&n) {
                    return Err("runtime.worker_threads must be between 1 and 1024".into());
                }
                self.worker_threads = Some(n);
            }
            "protobuf.max_message_size" => self.pb_max_frame_bytes = bytesize(v)? as usize,
            "delete_mode" => {
                n.delete_mode = match v {
                    "keep" => DeleteMode::Keep,
                    "immediate" => DeleteMode::Immediate,
                    d => DeleteMode::After(duration(d)?),
                }
            }
            "object.size.warning_threshold" => n.object_size_warning_bytes = bytesize(v)? as usize,
            "object.size.maximum" => n.object_size_max_bytes = bytesize(v)? as usize,
            "object.siblings.warning_threshold" => {
                n.siblings_warning = v.parse().map_err(|_| format!("expected an integer, found {v:?}"))?
            }
            "object.siblings.maximum" => {
                n.siblings_max = v.parse().map_err(|_| format!("expected an integer, found {v:?}"))?
            }
            "bitcask.max_file_size" => {
                n.bitcask_max_file_size = if v == "auto" {
                    None
                } else {
                    let b = bytesize(v)?;
                    if !(4096..=u64::from(u32::MAX)).contains(&b) {
                        return Err(format!(
                            "bitcask.max_file_size must be from 4KB to 4GB, or auto, found {v:?}"
                        ));
                    }
                    Some(b)
                }
            }
            "bitcask.sync.strategy" => {
                n.bitcask.sync = match v {
                    "none" => SyncStrategy::None,
                    "o_sync" => SyncStrategy::OSync,
                    "interval" => SyncStrategy::Interval { interval_ms: 1000 },
                    _ => return Err(format!("bitcask.sync.strategy must be none, o_sync or interval, found {v:?}")),
                }
            }
            "bitcask.write_buffer_size" => n.bitcask.write_buffer_bytes = bytesize(v)? as usize,
            "bitcask.sync.interval" => *sync_interval = Some(duration(v)?.as_millis() as u64),
            "bitcask.expiry" => {
                n.bitcask.default_ttl = if v == "off" { None } else { Some(duration(v)?) };
            }
            "bitcask.merge.policy" => {
                n.merge_policy = match v {
                    "fisherman" => MergePolicyKind::Fisherman { target_usage: 0.8 },
                    "classic" => MergePolicyKind::Classic,
                    _ => return Err(format!("bitcask.merge.policy must be fisherman or classic, found {v:?}")),
                }
            }
            "bitcask.merge.target_usage" => {
                let u = share(v)?;
                if let MergePolicyKind::Fisherman { target_usage } = &mut n.merge_policy {
                    *target_usage = u;
                }
            }
            "bitcask.capacity" => {
                n.bitcask_capacity_bytes = if v == "off" { None } else { Some(bytesize(v)?) };
            }
            "bitcask.throttle.low_usage" => n.throttle.low_usage = share(v)?,
            "bitcask.throttle.high_usage" => n.throttle.high_usage = share(v)?,
            "bitcask.reserve" => n.reserve_bytes = bytesize(v)?,
            "leveldb.data_root" => n.leveldb_dir = Some(PathBuf::from(v)),
            "leveled.data_root" => n.leveled_dir = Some(PathBuf::from(v)),
            "log.console.level" => match v {
                "debug" | "info" | "warning" | "error" => self.log_level = v.replace("warning", "warn"),
                _ => return Err(format!("log.console.level must be debug, info, warning or error, found {v:?}")),
            },
            _ => {
                return Err(format!(
                    "unknown setting {key:?} (`rill chkconfig --keys` lists the settings this build knows)"
                ))
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_start_at_a_line_or_after_a_space() {
        let c = Config::parse(
            "# a comment\nsensor.mqtt.topics = plant/#,lab/# # two trees\n\tsensor.mqtt.password = p#ss\n",
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(c.sensor.mqtt_topics, vec!["plant/#", "lab/#"]);
        assert_eq!(c.sensor.mqtt_password.as_deref(), Some("p#ss"));
        let c = Config::parse("sensor.mqtt.topics = #  # every topic\nsensor.mqtt.password = #x\n")
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(c.sensor.mqtt_topics, vec!["#"]);
        assert_eq!(c.sensor.mqtt_password.as_deref(), Some("#x"));
        assert!(Config::parse("sensor.mqtt.password =\n").is_err());
    }

    #[test]
    fn leveled_settings_use_riaks_names() {
        let c = Config::parse(
            "storage_backend = leveled\nleveled.data_root = /tmp/lv\nleveled.journal_size = 8MB\n\
             leveled.singlefile_compactionpercentage = 40.0\nleveled.compression_method = none\n\
             leveled.sync_strategy = sync\nleveled.maximum_memory = 64MB\n\
             multi_backend.x.storage_backend = leveled\nmulti_backend.x.leveled.journal_size = 2MB\n",
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(c.node.backend, BackendKind::Leveled);
        assert_eq!(c.node.leveled_dir.as_deref(), Some(Path::new("/tmp/lv")));
        let j = &c.node.leveled_journal;
        assert_eq!(
            (j.file_bytes, j.compaction_percent, j.compression),
            (8 << 20, 40, false)
        );
        assert!(c.node.leveled.sync_on_write);
        assert_eq!(c.node.leveled.max_memory_bytes, 64 << 20);
        assert_eq!(c.node.multi[0].journal.file_bytes, 2 << 20);
        let c = Config::parse("leveled.sync_strategy = riak_sync\n")
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert!(
            c.node.leveled.sync_on_write,
            "riak_sync syncs each write, as leveled's"
        );
        let e = Config::parse("leveled.compression_method = zstd\nleveled.sync_strategy = maybe\n")
            .err()
            .expect("refused");
        assert!(e[0].message.contains("zstd is not offered"), "{e:?}");
        assert!(e[1].message.contains("none, riak_sync or sync"), "{e:?}");
    }

    #[test]
    fn multi_backends_are_checked_and_share_leveldb_memory() {
        let e = Config::parse(
            "storage_backend = multi\nmulti_backend.default = a\n\
             multi_backend.a.storage_backend = leveldb\nmulti_backend.b.leveldb.maximum_memory = 64MB\n",
        )
        .err().expect("refused");
        assert!(
            e.iter().any(|e| e
                .message
                .contains("multi_backend.b.storage_backend is not set")),
            "{e:?}"
        );
        let c = Config::parse(
            "storage_backend = multi\nmulti_backend.default = a\n\
             multi_backend.a.storage_backend = leveldb\nmulti_backend.b.storage_backend = leveldb\n",
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        let (a, b) = (&c.node.multi[0].leveldb, &c.node.multi[1].leveldb);
        assert_eq!(a.max_memory_bytes, b.max_memory_bytes);
        assert_eq!(a.max_memory_bytes, machine_memory_bytes() / 100 * 70 / 2);
        let e =
            Config::parse("storage_backend = multi\nmulti_backend.a.storage_backend = memory\n")
                .err()
                .expect("refused");
        assert!(
            e.iter()
                .any(|e| e.message.contains("multi_backend.default")),
            "{e:?}"
        );
    }

    #[test]
    fn a_file_with_riak_names() {
        let c = Config::parse(
            "## comment\nnodename = rill@127.0.0.1\nring_size = 32\nstorage_backend = memory\n\
             listener.protobuf.internal = 127.0.0.1:10017\nbitcask.max_file_size = 64MB\n\
             bitcask.sync.strategy = interval\nbitcask.sync.interval = 250ms\ndelete_mode = immediate\n",
        )
        .unwrap();
        assert_eq!(c.node.ring_size, 32);
        assert_eq!(c.node.backend, BackendKind::Memory);
        assert_eq!(c.pb_listener.port(), 10017);
        assert_eq!(c.node.bitcask_max_file_size, Some(64 << 20));
        assert_eq!(
            c.node.bitcask.sync,
            SyncStrategy::Interval { interval_ms: 250 }
        );
        assert_eq!(c.node.delete_mode, DeleteMode::Immediate);
    }

    #[test]
    fn every_bad_line_is_named() {
        let errs = Config::parse(
            "ring_size = 48\nbogus = 1\nno equals sign\nbitcask.max_file_size = 2 furlongs\n",
        )
        .err()
        .unwrap();
        let lines: Vec<usize> = errs.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![1, 2, 3, 4]);
        assert!(errs[0].to_string().contains("power of two"), "{}", errs[0]);
        assert!(
            errs[1].to_string().contains("unknown setting \"bogus\""),
            "{}",
            errs[1]
        );
    }

    #[test]
    fn sizes_and_durations() {
        assert_eq!(bytesize("2GB").unwrap(), 2 << 30);
        assert_eq!(bytesize("4096").unwrap(), 4096);
        assert_eq!(duration("3s").unwrap(), Duration::from_secs(3));
        assert_eq!(duration("1d").unwrap(), Duration::from_secs(86400));
        assert_eq!(duration("500us").unwrap(), Duration::from_micros(500));
        assert!(bytesize("x").is_err());
    }

    #[test]
    fn the_test_only_link_settings() {
        let c = Config::parse(
            "test.link.delay = 500us
test.link.loss = 0.25
",
        )
        .unwrap();
        assert_eq!(c.test_link_delay, Duration::from_micros(500));
        assert_eq!(c.test_link_loss, 0.25);
        let d = Config::parse("").unwrap();
        assert!(
            d.test_link_delay.is_zero() && d.test_link_loss == 0.0,
            "off by default"
        );
        let errs = Config::parse(
            "test.link.delay = soon
test.link.loss = 2
",
        )
        .err()
        .unwrap();
        assert_eq!(errs.iter().map(|e| e.line).collect::<Vec<_>>(), vec![1, 2]);
        assert!(
            errs[1].to_string().contains("between 0 and 1"),
            "{}",
            errs[1]
        );
    }

    #[test]
    fn the_advertised_cluster_address() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.cluster_advertised().unwrap(), c.cluster_listener);
        let c =
            Config::parse("nodename = rill@10.1.2.3\nlistener.cluster.internal = 0.0.0.0:8099\n")
                .unwrap();
        assert_eq!(
            c.cluster_advertised().unwrap(),
            "10.1.2.3:8099".parse().unwrap()
        );
        let c = Config::parse(
            "nodename = rill@db1\nlistener.cluster.internal = 0.0.0.0:0\nlistener.cluster.advertise = 192.0.2.7:0\n",
        )
        .unwrap();
        assert_eq!(
            c.cluster_advertised().unwrap(),
            "192.0.2.7:0".parse().unwrap()
        );
        let errs = Config::parse("nodename = rill@db1\nlistener.cluster.internal = [::]:8099\n")
            .err()
            .unwrap();
        assert!(
            errs[0].message.contains("listener.cluster.advertise"),
            "{}",
            errs[0]
        );
        let errs = Config::parse("listener.cluster.advertise = 0.0.0.0:8099\n")
            .err()
            .unwrap();
        assert!(errs[0].message.contains("can reach"), "{}", errs[0]);
    }

    #[test]
    fn worker_threads() {
        assert_eq!(Config::parse("").unwrap().worker_threads, None);
        let c = Config::parse("runtime.worker_threads = 3\n").unwrap();
        assert_eq!(c.worker_threads, Some(3));
        let errs = Config::parse("runtime.worker_threads = 0\nruntime.worker_threads = many\n")
            .err()
            .unwrap();
        assert_eq!(errs.iter().map(|e| e.line).collect::<Vec<_>>(), vec![1, 2]);
        assert!(errs[0].to_string().contains("between 1"), "{}", errs[0]);
    }
}
