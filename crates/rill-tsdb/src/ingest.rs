//! Line protocol bodies as the engine takes them, pure: each point's
//! fields become samples of their series (named as VictoriaMetrics names
//! line protocol), grouped by series; bad lines become InfluxDB-worded
//! errors ("unable to parse ..."), which the protocols report.

use rill_sensor::line::parse;
use rill_sensor::series::DB_LABEL;
use rill_sensor::{mqtt, samples_of, Precision, Sample, Series};
use std::collections::HashMap;

/// A body's samples and errors.
#[derive(Debug, Default, PartialEq)]
pub struct Batch {
    /// Series keys and their samples, in the order first met.
    pub series: Vec<(String, Vec<Sample>)>,
    /// One per line that does not parse, in line order.
    pub errors: Vec<String>,
    /// Points that parse but cannot be stored (a string field, a time
    /// out of range): InfluxDB 2.x writes the rest and reports them.
    pub rejected: Vec<String>,
    /// Points whose samples are in `series`.
    pub points: usize,
}

impl Batch {
    pub fn samples(&self) -> usize {
        self.series.iter().map(|(_, v)| v.len()).sum()
    }
}

/// Samples gathered by series key from several bodies or messages.
#[derive(Debug, Default)]
pub struct Builder {
    batch: Batch,
    index: HashMap<String, usize>,
}

impl Builder {
    fn push(&mut self, key: String, sample: Sample) {
        let at = match self.index.get(&key) {
            Some(&at) => at,
            None => {
                self.index.insert(key.clone(), self.batch.series.len());
                self.batch.series.push((key, Vec::new()));
                self.batch.series.len() - 1
            }
        };
        self.batch.series[at].1.push(sample);
    }

    /// Adds a line protocol `body` written to database `db`, the
    /// timestamps in `precision`; a point without one is at `now` (ns)
    /// truncated to the precision, as InfluxDB stamps it. `tag` is added
    /// to every point that does not carry that tag itself; errors are
    /// prefixed with `context`.
    pub fn line_protocol(
        &mut self,
        body: &str,
        db: &str,
        precision: Precision,
        now: i64,
        tag: Option<(&str, &str)>,
        context: &str,
    ) {
        let unit = precision.to_ns(1).unwrap_or(1);
        let now = now - now.rem_euclid(unit);
        let (mut points, line_errors) = parse(body);
        self.batch.errors.extend(
            line_errors
                .iter()
                .map(|e| format!("{context}unable to parse line {}: {}", e.line, e.reason)),
        );
        for p in &mut points {
            let ts = match p.timestamp {
                None => now,
                Some(t) => match precision.to_ns(t) {
                    Some(ns) => ns,
                    None => {
                        self.batch.rejected.push(format!(
                            "{context}a point of {:?}: timestamp {t} is out of range (1677-2262)",
                            p.measurement
                        ));
                        continue;
                    }
                },
            };
            if let Some((k, v)) = tag {
                if !p.tags.iter().any(|(t, _)| t == k) {
                    p.tags.push((k.to_string().into(), v.to_string().into()));
                }
            }
            let samples = match samples_of(p, Some(db)) {
                Ok(s) => s,
                Err(e) => {
                    self.batch
                        .rejected
                        .push(format!("{context}a point of {:?}: {e}", p.measurement));
                    continue;
                }
            };
            self.batch.points += 1;
            for (series, value) in samples {
                self.push(series.key(), Sample { ts, value });
            }
        }
    }

    /// Adds one MQTT message on `topic` (rill_sensor::mqtt): line
    /// protocol (in `precision`) tagged with its topic, a JSON object of
    /// readings, or a bare number; its series carry the label `db` as
    /// line protocol's do.
    pub fn mqtt(&mut self, topic: &str, payload: &[u8], db: &str, precision: Precision, now: i64) {
        let context = format!("a message on {topic:?}: ");
        if mqtt::is_line_protocol(payload) {
            match std::str::from_utf8(payload) {
                Ok(text) => {
                    self.line_protocol(text, db, precision, now, Some(("topic", topic)), &context)
                }
                Err(_) => self.batch.errors.push(format!("{context}not UTF-8")),
            }
            return;
        }
        match mqtt::json_or_number(topic, payload, now) {
            Ok(samples) => {
                self.batch.points += 1;
                for (series, sample) in samples {
                    let series = if db.is_empty() || series.label(DB_LABEL).is_some() {
                        series
                    } else {
                        let mut labels = series.labels;
                        labels.push((DB_LABEL.to_string(), db.to_string()));
                        Series::new(series.name, labels)
                    };
                    self.push(series.key(), sample);
                }
            }
            Err(e) => self.batch.errors.push(e),
        }
    }

    pub fn finish(self) -> Batch {
        self.batch
    }
}

/// The samples of a line protocol `body` written to database `db`, the
/// timestamps in `precision`; a point without one is at `now` (ns)
/// truncated to the precision, as InfluxDB stamps it.
pub fn line_protocol(body: &str, db: &str, precision: Precision, now: i64) -> Batch {
    let mut b = Builder::default();
    b.line_protocol(body, db, precision, now, None, "");
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_become_series_and_bad_lines_errors() {
        let body = "cpu,host=a usage=1.5,idle=2i 10\nbad line\ncpu,host=a usage=2 20\nm s=\"x\" 5\nm v=1\n";
        let b = line_protocol(body, "telegraf", Precision::S, 99_500_000_000);
        assert_eq!(b.points, 3);
        assert_eq!(
            b.series,
            vec![
                (
                    "cpu_usage{db=\"telegraf\",host=\"a\"}".to_string(),
                    vec![
                        Sample {
                            ts: 10_000_000_000,
                            value: 1.5
                        },
                        Sample {
                            ts: 20_000_000_000,
                            value: 2.0
                        }
                    ]
                ),
                (
                    "cpu_idle{db=\"telegraf\",host=\"a\"}".to_string(),
                    vec![Sample {
                        ts: 10_000_000_000,
                        value: 2.0
                    }]
                ),
                (
                    "m_v{db=\"telegraf\"}".to_string(),
                    vec![Sample {
                        ts: 99_000_000_000,
                        value: 1.0
                    }]
                ),
            ]
        );
        assert_eq!(b.errors.len(), 1, "{:?}", b.errors);
        assert_eq!(b.rejected.len(), 1, "{:?}", b.rejected);
        assert!(b.rejected[0].contains("string"), "{}", b.rejected[0]);
        assert!(
            b.errors[0].starts_with("unable to parse line 2: "),
            "{}",
            b.errors[0]
        );
        assert_eq!(b.samples(), 4);
        let far = line_protocol("m v=1 9223372036854775807", "d", Precision::S, 0);
        assert_eq!(far.points, 0);
        assert!(
            far.rejected[0].contains("out of range"),
            "{:?}",
            far.rejected
        );
        // A point without a time takes now, truncated to the precision.
        let now = line_protocol("m v=1", "d", Precision::S, 12_345_678_901);
        assert_eq!(now.series[0].1[0].ts, 12_000_000_000);
    }

    #[test]
    fn mqtt_messages_gather_by_series() {
        let mut b = Builder::default();
        let now = 5_000_000_000;
        b.mqtt("plant/1", b"21.5", "s", Precision::Ns, now);
        b.mqtt(
            "plant/1",
            b"{\"temp\": 3, \"ts\": 7}",
            "s",
            Precision::Ns,
            now,
        );
        b.mqtt("plant/2", b"press,topic=own v=2 9", "s", Precision::S, now);
        b.mqtt("plant/2", b"press v=1 8", "s", Precision::S, now);
        b.mqtt("plant/3", b"{\"name\": \"x\"}", "s", Precision::S, now);
        b.mqtt("plant/3", b"press v=", "s", Precision::S, now);
        let b = b.finish();
        let keys: Vec<&str> = b.series.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            vec![
                "value{db=\"s\",topic=\"plant/1\"}",
                "temp{db=\"s\",topic=\"plant/1\"}",
                "press_v{db=\"s\",topic=\"own\"}",
                "press_v{db=\"s\",topic=\"plant/2\"}",
            ]
        );
        assert_eq!(
            b.series[0].1[0],
            Sample {
                ts: now,
                value: 21.5
            }
        );
        assert_eq!(b.series[1].1[0].ts, 7_000_000_000);
        assert_eq!(b.series[3].1[0].ts, 8_000_000_000);
        assert_eq!(b.points, 4);
        assert_eq!(b.errors.len(), 2, "{:?}", b.errors);
        assert!(
            b.errors.iter().all(|e| e.contains("plant/3")),
            "{:?}",
            b.errors
        );
    }
}
