//! The sensor-data service's settings (`sensor.*`, docs/sensors.md).

use super::setting::{Arg, Initial, Kind, Setting};
use std::collections::HashMap;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub struct SensorConfig {
    /// `sensor`: the service runs (its HTTP write and query paths).
    pub enabled: bool,
    /// `sensor.window`: a block never spans two windows.
    pub window: Duration,
    /// `sensor.block_samples`: samples of a full block (the paper's B).
    pub block_samples: usize,
    /// `sensor.grace`: a window is cut this long after its end.
    pub grace: Duration,
    /// `sensor.retention`: how long a database keeps samples (the
    /// paper's Y).
    pub retention: Duration,
    /// `sensor.retention.<db>`: a database's own.
    pub retention_of: HashMap<String, Duration>,
    /// `sensor.n_val`: copies of each series in the cluster (on
    /// distinct nodes where there are enough).
    pub n_val: u32,
    /// `sensor.w`: distinct nodes that hold a write durably before it is
    /// acknowledged.
    pub w: rill_node::Quorum,
    /// `sensor.anti_entropy`: replicas compare and repair what they hold
    /// (`active`) or not (`passive`).
    pub anti_entropy: bool,
    /// `sensor.anti_entropy.interval`: between two rounds of exchanges.
    pub anti_entropy_interval: Duration,
    /// `sensor.sync_on_write`: a write is acknowledged once on the disk
    /// (fsync of the log, shared by writers arriving together); `off`:
    /// once in the kernel.
    pub sync_on_write: bool,
    /// `sensor.max_file_size`: a block store's data file is closed past
    /// this (smaller files are deleted sooner by retention).
    pub max_file_bytes: u64,
    /// `sensor.log_segment_size`: a log segment is closed past this (a
    /// segment is deleted once all its samples are in stored blocks).
    pub log_segment_bytes: u64,
    /// `sensor.block_cache`: memory for blocks written or read lately
    /// (0: none).
    pub block_cache_bytes: u64,
    /// `sensor.capacity`: usage U of the block stores measured against
    /// this many bytes instead of the filesystem holding them.
    pub capacity_bytes: Option<u64>,
    /// `sensor.listener.line`: the collection port, line protocol over
    /// TCP (`off`: none).
    pub line_listener: Option<std::net::SocketAddr>,
    /// `sensor.listener.line.db`: the database its lines go to.
    pub line_db: String,
    /// `sensor.listener.line.precision`: its timestamps' unit.
    pub line_precision: rill_sensor::Precision,
    /// `sensor.mqtt.broker`: the MQTT broker subscribed to, `host:port`
    /// (`off`: none).
    pub mqtt_broker: Option<(String, u16)>,
    /// `sensor.mqtt.topics`: topic filters, comma-separated.
    pub mqtt_topics: Vec<String>,
    /// `sensor.mqtt.qos`: 1 or 2.
    pub mqtt_qos: u8,
    /// `sensor.mqtt.db`: the database its samples go to.
    pub mqtt_db: String,
    /// `sensor.mqtt.precision`: line protocol payloads' timestamp unit.
    pub mqtt_precision: rill_sensor::Precision,
    /// `sensor.mqtt.client_id`: default `rill-` and the node's name.
    pub mqtt_client_id: Option<String>,
    /// `sensor.mqtt.username` and `.password`.
    pub mqtt_username: Option<String>,
    pub mqtt_password: Option<String>,
}

impl Default for SensorConfig {
    fn default() -> SensorConfig {
        SensorConfig {
            enabled: true,
            window: Duration::from_secs(86_400),
            block_samples: 2048,
            grace: Duration::from_secs(300),
            retention: Duration::from_secs(30 * 86_400),
            retention_of: HashMap::new(),
            n_val: 3,
            w: rill_node::Quorum::Quorum,
            anti_entropy: true,
            anti_entropy_interval: Duration::from_secs(60),
            sync_on_write: true,
            max_file_bytes: 64 << 20,
            log_segment_bytes: 64 << 20,
            block_cache_bytes: rill_tsdb::engine::DEFAULT_BLOCK_CACHE_BYTES as u64,
            capacity_bytes: None,
            line_listener: None,
            line_db: "sensors".into(),
            line_precision: rill_sensor::Precision::Ns,
            mqtt_broker: None,
            mqtt_topics: vec!["#".into()],
            mqtt_qos: 1,
            mqtt_db: "sensors".into(),
            mqtt_precision: rill_sensor::Precision::Ns,
            mqtt_client_id: None,
            mqtt_username: None,
            mqtt_password: None,
        }
    }
}

/// Storage periods, windows: at least 1 ms, at most a quarter of the
/// nanoseconds an i64 holds (the engine's times).
const PERIOD: Kind = Kind::Duration {
    min: Duration::from_millis(1),
    max: Duration::from_secs(i64::MAX as u64 / 4 / 1_000_000_000),
};

/// A database name: 1 to `MAX_DB_NAME_BYTES` bytes.
fn db_name(a: &Arg<'_>) -> Result<String, String> {
    let max = rill_tsdb::engine::MAX_DB_NAME_BYTES;
    match a.text() {
        db if db.len() > max => Err(format!("{} is longer than {max} bytes", a.key)),
        db => Ok(db.to_string()),
    }
}

fn precision(a: &Arg<'_>) -> rill_sensor::Precision {
    let unit = a.word().unwrap_or_else(|| a.text());
    rill_sensor::Precision::parse(Some(unit)).expect("the table's choices are precisions")
}

const PRECISIONS: Kind = Kind::Choice(&["ns", "us", "ms", "s", "m", "h"]);
/// InfluxDB's other names of ns and us.
const PRECISION_ALIASES: &[&str] = &["n", "u", "µ"];

pub static SETTINGS: &[Setting] = &[
    Setting {
        key: "sensor",
        kind: Kind::OnOff,
        words: &[],
        default: Initial::Value("on"),
        help: "the sensor-data service: InfluxDB line protocol on /write and /api/v2/write, Prometheus remote write and queries, export on /api/v1/export (docs/sensors.md)",
        apply: |c, a| {
            c.sensor.enabled = a.on();
            Ok(())
        },
    },
    Setting {
        key: "sensor.window",
        kind: PERIOD,
        words: &[],
        default: Initial::Value("1d"),
        help: "sensor blocks never span two windows of this length; windows expire whole, so a database keeps up to one window beyond its storage period; fixed once data is written",
        apply: |c, a| {
            c.sensor.window = a.duration();
            Ok(())
        },
    },
    Setting {
        key: "sensor.block_samples",
        kind: Kind::Count { min: 16, max: 65_536 },
        words: &[],
        default: Initial::Value("2048"),
        help: "samples of a full sensor block, the sensor-data paper's B",
        apply: |c, a| {
            c.sensor.block_samples = a.count() as usize;
            Ok(())
        },
    },
    Setting {
        key: "sensor.grace",
        kind: Kind::Duration {
            min: Duration::ZERO,
            max: Duration::from_secs(i64::MAX as u64 / 4 / 1_000_000_000),
        },
        words: &[],
        default: Initial::Value("5m"),
        help: "a window is cut into blocks this long after it ends, for late samples",
        apply: |c, a| {
            c.sensor.grace = a.duration();
            Ok(())
        },
    },
    Setting {
        key: "sensor.retention",
        kind: PERIOD,
        words: &[],
        default: Initial::Value("30d"),
        help: "how long a sensor database keeps samples, the paper's Y",
        apply: |c, a| {
            c.sensor.retention = a.duration();
            Ok(())
        },
    },
    Setting {
        key: "sensor.retention.DB",
        kind: PERIOD,
        words: &[],
        default: Initial::Unset("sensor.retention"),
        help: "database DB's own storage period (e.g. sensor.retention.telegraf = 90d)",
        apply: |c, a| {
            c.sensor.retention_of.insert(a.name.to_string(), a.duration());
            Ok(())
        },
    },
    Setting {
        key: "sensor.n_val",
        kind: Kind::Count { min: 1, max: 16 },
        words: &[],
        default: Initial::Value("3"),
        help: "copies of each sensor series in a cluster, on distinct nodes where there are enough (Riak's n_val); a node holds a series once however many of its replicas it serves",
        apply: |c, a| {
            c.sensor.n_val = a.count() as u32;
            Ok(())
        },
    },
    Setting {
        key: "sensor.w",
        kind: Kind::Count { min: 1, max: 16 },
        words: &["one", "quorum", "all"],
        default: Initial::Value("quorum"),
        help: "distinct nodes that must hold a sensor write durably before it is acknowledged (Riak's w; quorum is n_val/2+1; never more than the nodes holding a series: n_val, or the cluster's nodes if fewer)",
        apply: |c, a| {
            c.sensor.w = match a.word() {
                Some("one") => rill_node::Quorum::One,
                Some("quorum") => rill_node::Quorum::Quorum,
                Some("all") => rill_node::Quorum::All,
                _ => rill_node::Quorum::N(a.count() as u32),
            };
            Ok(())
        },
    },
    Setting {
        key: "sensor.anti_entropy",
        kind: Kind::Choice(&["active", "passive"]),
        words: &[],
        default: Initial::Value("active"),
        help: "the replicas of each sensor home partition compare digests of its settled hours and send each other what the other lacks (active), or not (passive)",
        apply: |c, a| {
            c.sensor.anti_entropy = a.text() == "active";
            Ok(())
        },
    },
    Setting {
        key: "sensor.anti_entropy.interval",
        kind: Kind::Duration {
            min: Duration::from_millis(100),
            max: Duration::from_secs(86_400),
        },
        words: &[],
        default: Initial::Value("1m"),
        help: "time between two rounds of sensor anti-entropy, each comparing every home partition this node holds and owns with the next owner",
        apply: |c, a| {
            c.sensor.anti_entropy_interval = a.duration();
            Ok(())
        },
    },
    Setting {
        key: "sensor.sync_on_write",
        kind: Kind::OnOff,
        words: &[],
        default: Initial::Value("on"),
        help: "on: a sample is acknowledged once on the disk (one fsync shared by writers arriving together); off: once in the kernel",
        apply: |c, a| {
            c.sensor.sync_on_write = a.on();
            Ok(())
        },
    },
    Setting {
        key: "sensor.max_file_size",
        kind: Kind::Size { min: 1 << 20, max: 2 << 30 },
        words: &[],
        default: Initial::Value("64MB"),
        help: "a sensor block store's data file is closed past this size (smaller files are deleted sooner by retention)",
        apply: |c, a| {
            c.sensor.max_file_bytes = a.bytes();
            Ok(())
        },
    },
    Setting {
        key: "sensor.block_cache",
        kind: Kind::Size { min: 0, max: 1 << 40 },
        words: &[],
        default: Initial::Value("64MB"),
        help: "memory for sensor blocks written or read lately, so a dashboard's refresh reads its blocks from memory; 0 keeps none",
        apply: |c, a| {
            c.sensor.block_cache_bytes = a.bytes();
            Ok(())
        },
    },
    Setting {
        key: "sensor.capacity",
        kind: Kind::Size { min: 1 << 20, max: 1 << 60 },
        words: &["off"],
        default: Initial::Value("off"),
        help: "a capacity for the usage U that drives merges of the sensor block stores (the stores' own bytes against it) instead of the filesystem's",
        apply: |c, a| {
            c.sensor.capacity_bytes = a.word().is_none().then(|| a.bytes());
            Ok(())
        },
    },
    Setting {
        key: "sensor.log_segment_size",
        kind: Kind::Size { min: 1 << 20, max: 1 << 30 },
        words: &[],
        default: Initial::Value("64MB"),
        help: "a sensor write-ahead log segment is closed past this size; segments are deleted once their samples are in stored blocks, at most 16 kept",
        apply: |c, a| {
            c.sensor.log_segment_bytes = a.bytes();
            Ok(())
        },
    },
    Setting {
        key: "sensor.listener.line",
        kind: Kind::Address,
        words: &["off", ""],
        default: Initial::Value("off"),
        help: "the collection port: InfluxDB line protocol over TCP",
        apply: |c, a| {
            c.sensor.line_listener = a.word().is_none().then(|| a.address());
            Ok(())
        },
    },
    Setting {
        key: "sensor.listener.line.db",
        kind: Kind::Text,
        words: &[],
        default: Initial::Value("sensors"),
        help: "the database the collection port's lines go to",
        apply: |c, a| {
            c.sensor.line_db = db_name(a)?;
            Ok(())
        },
    },
    Setting {
        key: "sensor.listener.line.precision",
        kind: PRECISIONS,
        words: PRECISION_ALIASES,
        default: Initial::Value("ns"),
        help: "the collection port's timestamp unit",
        apply: |c, a| {
            c.sensor.line_precision = precision(a);
            Ok(())
        },
    },
    Setting {
        key: "sensor.mqtt.broker",
        kind: Kind::Text,
        words: &["off", ""],
        default: Initial::Value("off"),
        help: "the MQTT broker the sensor service subscribes to, host:port such as 127.0.0.1:1883",
        apply: |c, a| {
            if a.word().is_some() {
                c.sensor.mqtt_broker = None;
                return Ok(());
            }
            match a.text().rsplit_once(':').map(|(h, p)| (h, p.parse::<u16>())) {
                Some((h, Ok(p))) if !h.is_empty() && p > 0 => {
                    let h = h.trim_start_matches('[').trim_end_matches(']');
                    c.sensor.mqtt_broker = Some((h.to_string(), p));
                    Ok(())
                }
                _ => Err(format!(
                    "sensor.mqtt.broker must be host:port such as 127.0.0.1:1883, or off; found {:?}",
                    a.text()
                )),
            }
        },
    },
    Setting {
        key: "sensor.mqtt.topics",
        kind: Kind::Text,
        words: &[],
        default: Initial::Value("#"),
        help: "the MQTT topic filters subscribed to, comma-separated (#: every topic)",
        apply: |c, a| {
            let topics: Vec<String> = a.text().split(',').map(|t| t.trim().to_string()).collect();
            if let Some(bad) = topics.iter().find(|t| !rill_api::mqtt::valid_topic_filter(t)) {
                return Err(format!("sensor.mqtt.topics: {bad:?} is not an MQTT topic filter (levels split by /, + for one level, # last for the rest)"));
            }
            c.sensor.mqtt_topics = topics;
            Ok(())
        },
    },
    Setting {
        key: "sensor.mqtt.qos",
        kind: Kind::Count { min: 1, max: 2 },
        words: &[],
        default: Initial::Value("1"),
        help: "the subscription's QoS, 1 or 2 (0 would let the broker drop samples); a message is acknowledged once its samples are durable",
        apply: |c, a| {
            c.sensor.mqtt_qos = a.count() as u8;
            Ok(())
        },
    },
    Setting {
        key: "sensor.mqtt.db",
        kind: Kind::Text,
        words: &[],
        default: Initial::Value("sensors"),
        help: "the database MQTT samples go to",
        apply: |c, a| {
            c.sensor.mqtt_db = db_name(a)?;
            Ok(())
        },
    },
    Setting {
        key: "sensor.mqtt.precision",
        kind: PRECISIONS,
        words: PRECISION_ALIASES,
        default: Initial::Value("ns"),
        help: "the timestamp unit of line protocol in MQTT messages",
        apply: |c, a| {
            c.sensor.mqtt_precision = precision(a);
            Ok(())
        },
    },
    Setting {
        key: "sensor.mqtt.client_id",
        kind: Kind::Text,
        words: &[],
        default: Initial::Unset("rill- and the node's name"),
        help: "the MQTT client id, fixed so the broker keeps the session across restarts",
        apply: |c, a| {
            c.sensor.mqtt_client_id = Some(a.text().to_string());
            Ok(())
        },
    },
    Setting {
        key: "sensor.mqtt.username",
        kind: Kind::Text,
        words: &[""],
        default: Initial::Unset("none"),
        help: "the MQTT user name",
        apply: |c, a| {
            c.sensor.mqtt_username = Some(a.word().unwrap_or_else(|| a.text()).to_string());
            Ok(())
        },
    },
    Setting {
        key: "sensor.mqtt.password",
        kind: Kind::Text,
        words: &[],
        default: Initial::Unset("none"),
        help: "the MQTT password",
        apply: |c, a| {
            c.sensor.mqtt_password = Some(a.text().to_string());
            Ok(())
        },
    },
];
