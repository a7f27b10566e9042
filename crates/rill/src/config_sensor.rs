//! The sensor-data service's settings (`sensor.*`, docs/sensors.md).

use crate::config::{bytesize, duration};
use crate::config_backends::on_off;
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
            sync_on_write: true,
            max_file_bytes: 64 << 20,
            log_segment_bytes: 64 << 20,
            block_cache_bytes: rill_tsdb::engine::DEFAULT_BLOCK_CACHE_BYTES as u64,
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

fn positive(key: &str, v: &str) -> Result<Duration, String> {
    match duration(v)? {
        d if d.is_zero() => Err(format!("{key} must be more than zero")),
        d if d.as_nanos() > i64::MAX as u128 / 4 => Err(format!("{key} is too long: {v:?}")),
        d => Ok(d),
    }
}

/// A database name setting: 1 to `MAX_DB_NAME_BYTES` bytes.
fn db_name(key: &str, v: &str) -> Result<String, String> {
    let max = rill_tsdb::engine::MAX_DB_NAME_BYTES;
    match v.trim() {
        "" => Err(format!("{key} needs a database name")),
        db if db.len() > max => Err(format!("{key} is longer than {max} bytes")),
        db => Ok(db.to_string()),
    }
}

/// Sets a `sensor.*` key; `None` if `key` is not one.
pub fn set_sensor(c: &mut SensorConfig, key: &str, v: &str) -> Option<Result<(), String>> {
    if let Some(db) = key.strip_prefix("sensor.retention.") {
        return Some(positive(key, v).map(|d| {
            c.retention_of.insert(db.to_string(), d);
        }));
    }
    Some(match key {
        "sensor" => on_off(key, v).map(|on| c.enabled = on),
        "sensor.window" => positive(key, v).map(|d| c.window = d),
        "sensor.grace" => duration(v).map(|d| c.grace = d),
        "sensor.retention" => positive(key, v).map(|d| c.retention = d),
        "sensor.sync_on_write" => on_off(key, v).map(|on| c.sync_on_write = on),
        "sensor.block_samples" => match v.trim().parse::<usize>() {
            Ok(n) if (16..=65_536).contains(&n) => {
                c.block_samples = n;
                Ok(())
            }
            _ => Err(format!(
                "sensor.block_samples must be an integer from 16 to 65536, found {v:?}"
            )),
        },
        "sensor.max_file_size" => bytesize(v).and_then(|b| {
            if (1 << 20..=1 << 31).contains(&b) {
                c.max_file_bytes = b;
                Ok(())
            } else {
                Err(format!(
                    "sensor.max_file_size must be from 1MB to 2GB, found {v:?}"
                ))
            }
        }),
        "sensor.block_cache" => bytesize(v).and_then(|b| {
            if b <= 1 << 40 {
                c.block_cache_bytes = b;
                Ok(())
            } else {
                Err(format!(
                    "sensor.block_cache must be at most 1TB (0 keeps none), found {v:?}"
                ))
            }
        }),
        "sensor.log_segment_size" => bytesize(v).and_then(|b| {
            if (1 << 20..=1 << 30).contains(&b) {
                c.log_segment_bytes = b;
                Ok(())
            } else {
                Err(format!(
                    "sensor.log_segment_size must be from 1MB to 1GB, found {v:?}"
                ))
            }
        }),
        "sensor.listener.line" => match v.trim() {
            "off" | "" => {
                c.line_listener = None;
                Ok(())
            }
            a => a
                .parse()
                .map(|addr| c.line_listener = Some(addr))
                .map_err(|_| format!("sensor.listener.line must be an address such as 127.0.0.1:8089, or off; found {v:?}")),
        },
        "sensor.listener.line.db" => db_name(key, v).map(|db| c.line_db = db),
        "sensor.listener.line.precision" => {
            rill_sensor::Precision::parse(Some(v.trim()))
                .map(|p| c.line_precision = p)
                .map_err(|e| e.to_string())
        }
        "sensor.mqtt.broker" => match v.trim() {
            "off" | "" => {
                c.mqtt_broker = None;
                Ok(())
            }
            a => match a.rsplit_once(':').map(|(h, p)| (h, p.parse::<u16>())) {
                Some((h, Ok(p))) if !h.is_empty() && p > 0 => {
                    let h = h.trim_start_matches('[').trim_end_matches(']');
                    c.mqtt_broker = Some((h.to_string(), p));
                    Ok(())
                }
                _ => Err(format!("sensor.mqtt.broker must be host:port such as 127.0.0.1:1883, or off; found {v:?}")),
            },
        },
        "sensor.mqtt.topics" => {
            let topics: Vec<String> = v.split(',').map(|t| t.trim().to_string()).collect();
            match topics.iter().find(|t| !rill_api::mqtt::valid_topic_filter(t)) {
                Some(bad) => Err(format!("sensor.mqtt.topics: {bad:?} is not an MQTT topic filter (levels split by /, + for one level, # last for the rest)")),
                None => {
                    c.mqtt_topics = topics;
                    Ok(())
                }
            }
        }
        "sensor.mqtt.qos" => match v.trim() {
            "1" | "2" => {
                c.mqtt_qos = if v.trim() == "1" { 1 } else { 2 };
                Ok(())
            }
            _ => Err(format!("sensor.mqtt.qos must be 1 or 2 (0 would let the broker drop samples), found {v:?}")),
        },
        "sensor.mqtt.db" => db_name(key, v).map(|db| c.mqtt_db = db),
        "sensor.mqtt.precision" => {
            rill_sensor::Precision::parse(Some(v.trim()))
                .map(|p| c.mqtt_precision = p)
                .map_err(|e| e.to_string())
        }
        "sensor.mqtt.client_id" => match v.trim() {
            "" => Err("sensor.mqtt.client_id must not be empty".into()),
            id => {
                c.mqtt_client_id = Some(id.to_string());
                Ok(())
            }
        },
        "sensor.mqtt.username" => {
            c.mqtt_username = Some(v.trim().to_string());
            Ok(())
        }
        "sensor.mqtt.password" => match v.trim() {
            "" => Err("sensor.mqtt.password is empty (leave it out for none)".into()),
            p => {
                c.mqtt_password = Some(p.to_string());
                Ok(())
            }
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensor_keys_are_read_and_checked() {
        let mut c = SensorConfig::default();
        assert_eq!(set_sensor(&mut c, "sensor.retention", "90d"), Some(Ok(())));
        assert_eq!(c.retention, Duration::from_secs(90 * 86_400));
        assert_eq!(
            set_sensor(&mut c, "sensor.retention.telegraf", "2h"),
            Some(Ok(()))
        );
        assert_eq!(c.retention_of["telegraf"], Duration::from_secs(7200));
        assert_eq!(set_sensor(&mut c, "sensor", "off"), Some(Ok(())));
        assert!(!c.enabled);
        assert!(set_sensor(&mut c, "sensor.window", "0s").unwrap().is_err());
        assert!(set_sensor(&mut c, "sensor.block_samples", "3")
            .unwrap()
            .is_err());
        assert!(set_sensor(&mut c, "sensor.max_file_size", "1KB")
            .unwrap()
            .is_err());
        assert_eq!(
            set_sensor(&mut c, "sensor.block_samples", "4096"),
            Some(Ok(()))
        );
        assert_eq!(c.block_cache_bytes, 64 << 20);
        assert_eq!(set_sensor(&mut c, "sensor.block_cache", "0"), Some(Ok(())));
        assert_eq!(c.block_cache_bytes, 0);
        assert_eq!(
            set_sensor(&mut c, "sensor.block_cache", "256MB"),
            Some(Ok(()))
        );
        assert_eq!(c.block_cache_bytes, 256 << 20);
        assert!(set_sensor(&mut c, "sensor.block_cache", "lots")
            .unwrap()
            .is_err());
        assert_eq!(set_sensor(&mut c, "storage_backend", "x"), None);
        assert_eq!(
            set_sensor(&mut c, "sensor.mqtt.broker", "broker.local:1883"),
            Some(Ok(()))
        );
        assert_eq!(c.mqtt_broker, Some(("broker.local".to_string(), 1883)));
        assert!(set_sensor(&mut c, "sensor.mqtt.broker", "1883")
            .unwrap()
            .is_err());
        assert_eq!(
            set_sensor(&mut c, "sensor.mqtt.topics", "plant/+/temp, lab/#"),
            Some(Ok(()))
        );
        assert_eq!(c.mqtt_topics, vec!["plant/+/temp", "lab/#"]);
        assert!(set_sensor(&mut c, "sensor.mqtt.topics", "a/#/b")
            .unwrap()
            .is_err());
        assert!(set_sensor(&mut c, "sensor.mqtt.qos", "0").unwrap().is_err());
    }
}
