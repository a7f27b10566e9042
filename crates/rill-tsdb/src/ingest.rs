//! Line protocol bodies as the engine takes them, pure: each point's
//! fields become samples of their series (named as VictoriaMetrics names
//! line protocol), grouped by series; bad lines become InfluxDB-worded
//! errors ("unable to parse ..."), which the protocols report.

use rill_sensor::line::parse;
use rill_sensor::{samples_of, Precision, Sample};
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

/// The samples of a line protocol `body` written to database `db`, the
/// timestamps in `precision`; a point without one is at `now` (ns)
/// truncated to the precision, as InfluxDB stamps it.
pub fn line_protocol(body: &str, db: &str, precision: Precision, now: i64) -> Batch {
    let unit = precision.to_ns(1).unwrap_or(1);
    let now = now - now.rem_euclid(unit);
    let (points, line_errors) = parse(body);
    let mut batch = Batch {
        errors: line_errors
            .iter()
            .map(|e| format!("unable to parse line {}: {}", e.line, e.reason))
            .collect(),
        ..Batch::default()
    };
    let mut index: HashMap<String, usize> = HashMap::new();
    for p in &points {
        let ts = match p.timestamp {
            None => now,
            Some(t) => match precision.to_ns(t) {
                Some(ns) => ns,
                None => {
                    batch.rejected.push(format!(
                        "a point of {:?}: timestamp {t} is out of range (1677-2262)",
                        p.measurement
                    ));
                    continue;
                }
            },
        };
        let samples = match samples_of(p, Some(db)) {
            Ok(s) => s,
            Err(e) => {
                batch
                    .rejected
                    .push(format!("a point of {:?}: {e}", p.measurement));
                continue;
            }
        };
        batch.points += 1;
        for (series, value) in samples {
            let key = series.key();
            let at = *index.entry(key.clone()).or_insert_with(|| {
                batch.series.push((key, Vec::new()));
                batch.series.len() - 1
            });
            batch.series[at].1.push(Sample { ts, value });
        }
    }
    batch
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
}
