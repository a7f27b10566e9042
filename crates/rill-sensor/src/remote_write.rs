//! Prometheus remote write 1.0 ("Prometheus Remote-Write Specification"),
//! pure: a body is a protobuf `WriteRequest` compressed with Snappy's block
//! format; each time series is a label set (`__name__` its metric name)
//! and samples of milliseconds and doubles.
//!
//! As the specification asks of a receiver: label names must be valid and
//! not repeated (a series breaking that is refused, the rest of the
//! request kept, and the request answered 400); a label with an empty
//! value is absent. Prometheus' stale markers (a NaN of one bit pattern)
//! and other NaNs are kept bit for bit, so a query's lookback ends where
//! a series went stale, as in Prometheus (VictoriaMetrics drops them).
//! Labels need not arrive sorted.

use crate::block::Sample;
use crate::series::Series;
use prost::Message;

/// `prometheus.WriteRequest` (the fields a receiver reads; others are
/// skipped).
#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<PbSample>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PbSample {
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Milliseconds since the Unix epoch.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// Prometheus' stale marker (`value.StaleNaN`).
pub const STALE_NAN: u64 = 0x7ff0_0000_0000_0002;

/// Why a body is not a write request.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemoteWriteError {
    #[error("the request decompresses to {0} bytes, more than allowed")]
    TooLarge(usize),
    #[error("the body is not Snappy (block format): {0}")]
    Snappy(#[source] snap::Error),
    #[error("the body is not a remote write request: {0}")]
    Protobuf(#[source] prost::DecodeError),
}

/// A series of a request that is refused, or a sample of it; `series`
/// is its labels as sent (cut to 200 characters) or its key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidSeries {
    #[error("series {series}: label {label:?} given twice")]
    LabelTwice { series: String, label: String },
    #[error("series {series}: invalid label name {label:?}")]
    BadLabelName { series: String, label: String },
    #[error("series {series}: no metric name (__name__)")]
    NoMetricName { series: String },
    #[error("series {series}: invalid metric name {name:?}")]
    BadMetricName { series: String, name: String },
    /// A sample's time (ms) that nanoseconds since 1970 in an i64 cannot
    /// hold: the sample is dropped, the series' others kept.
    #[error("{series}: timestamp {timestamp_ms} ms is out of range (1677-2262)")]
    TimestampOutOfRange { series: String, timestamp_ms: i64 },
}

/// A request's series and what was refused of it.
#[derive(Debug, Default, PartialEq)]
pub struct Decoded {
    pub series: Vec<(Series, Vec<Sample>)>,
    /// One per refused series (or sample out of range).
    pub invalid: Vec<InvalidSeries>,
    /// Stale markers among the samples.
    pub stale: u64,
    /// Other NaN samples among them.
    pub nan: u64,
}

fn valid_label_name(n: &str) -> bool {
    let mut c = n.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

fn valid_metric_name(n: &str) -> bool {
    let mut c = n.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

/// Decodes a body of at most `max` bytes once decompressed.
pub fn decode(body: &[u8], max: usize) -> Result<Decoded, RemoteWriteError> {
    let len = snap::raw::decompress_len(body).map_err(RemoteWriteError::Snappy)?;
    if len > max {
        return Err(RemoteWriteError::TooLarge(len));
    }
    let raw = snap::raw::Decoder::new()
        .decompress_vec(body)
        .map_err(RemoteWriteError::Snappy)?;
    let req = WriteRequest::decode(&raw[..]).map_err(RemoteWriteError::Protobuf)?;
    let mut out = Decoded::default();
    for ts in req.timeseries {
        match series_of(ts.labels) {
            Ok(series) => {
                let mut samples = Vec::with_capacity(ts.samples.len());
                for s in &ts.samples {
                    // Kept bit for bit: a query's lookback ends at a stale
                    // marker, as Prometheus's does.
                    if s.value.to_bits() == STALE_NAN {
                        out.stale += 1;
                    } else if s.value.is_nan() {
                        out.nan += 1;
                    }
                    match s.timestamp.checked_mul(1_000_000) {
                        Some(ns) => samples.push(Sample {
                            ts: ns,
                            value: s.value,
                        }),
                        None => out.invalid.push(InvalidSeries::TimestampOutOfRange {
                            series: series.key(),
                            timestamp_ms: s.timestamp,
                        }),
                    }
                }
                if !samples.is_empty() {
                    out.series.push((series, samples));
                }
            }
            Err(why) => out.invalid.push(why),
        }
    }
    Ok(out)
}

/// A label set as a series, or why it is refused.
fn series_of(mut labels: Vec<Label>) -> Result<Series, InvalidSeries> {
    labels.retain(|l| !l.value.is_empty());
    labels.sort_by(|a, b| a.name.cmp(&b.name));
    let shown = {
        let parts: Vec<String> = labels
            .iter()
            .map(|l| format!("{}={:?}", l.name, l.value))
            .collect();
        let text = parts.join(",");
        match text.char_indices().nth(200) {
            Some((at, _)) => format!("{{{}...}}", &text[..at]),
            None => format!("{{{text}}}"),
        }
    };
    if let Some(w) = labels.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(InvalidSeries::LabelTwice {
            series: shown,
            label: w[0].name.clone(),
        });
    }
    if let Some(bad) = labels.iter().find(|l| !valid_label_name(&l.name)) {
        return Err(InvalidSeries::BadLabelName {
            series: shown,
            label: bad.name.clone(),
        });
    }
    let Some(at) = labels.iter().position(|l| l.name == "__name__") else {
        return Err(InvalidSeries::NoMetricName { series: shown });
    };
    let name = labels.remove(at).value;
    if !valid_metric_name(&name) {
        return Err(InvalidSeries::BadMetricName {
            series: shown,
            name,
        });
    }
    Ok(Series::new(
        name,
        labels.into_iter().map(|l| (l.name, l.value)).collect(),
    ))
}

/// A series to send: its labels and its samples (ms, value).
pub type Outgoing<'a> = (Vec<(&'a str, &'a str)>, Vec<(i64, f64)>);

/// A body as Prometheus sends it (for tests and benchmarks).
pub fn encode(series: &[Outgoing<'_>]) -> Vec<u8> {
    let req = WriteRequest {
        timeseries: series
            .iter()
            .map(|(labels, samples)| TimeSeries {
                labels: labels
                    .iter()
                    .map(|(n, v)| Label {
                        name: n.to_string(),
                        value: v.to_string(),
                    })
                    .collect(),
                samples: samples
                    .iter()
                    .map(|&(timestamp, value)| PbSample { value, timestamp })
                    .collect(),
            })
            .collect(),
    };
    snap::raw::Encoder::new()
        .compress_vec(&req.encode_to_vec())
        .expect("snappy compresses any input")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_and_samples_come_out_checked() {
        let body = encode(&[
            (
                vec![("job", "node"), ("__name__", "up"), ("empty", "")],
                vec![
                    (1000, 1.0),
                    (2000, f64::from_bits(STALE_NAN)),
                    (2500, f64::NAN),
                    (3000, 0.0),
                ],
            ),
            (
                vec![("a", "1"), ("a", "2"), ("__name__", "x")],
                vec![(1, 1.0)],
            ),
            (vec![("0bad", "1"), ("__name__", "x")], vec![(1, 1.0)]),
            (vec![("job", "j")], vec![(1, 1.0)]),
            (vec![("__name__", "1x")], vec![(1, 1.0)]),
            (vec![("__name__", "big")], vec![(i64::MAX, 1.0), (5, 2.0)]),
        ]);
        let d = decode(&body, 1 << 20).unwrap();
        assert_eq!((d.stale, d.nan), (1, 1));
        assert_eq!(d.series.len(), 2);
        assert_eq!(d.series[0].0.key(), "up{job=\"node\"}");
        let bits: Vec<(i64, u64)> = d.series[0]
            .1
            .iter()
            .map(|s| (s.ts, s.value.to_bits()))
            .collect();
        assert_eq!(
            bits,
            vec![
                (1_000_000_000, 1f64.to_bits()),
                (2_000_000_000, STALE_NAN),
                (2_500_000_000, f64::NAN.to_bits()),
                (3_000_000_000, 0f64.to_bits()),
            ]
        );
        assert_eq!(
            d.series[1].1,
            vec![Sample {
                ts: 5_000_000,
                value: 2.0
            }]
        );
        assert_eq!(d.invalid.len(), 5, "{:?}", d.invalid);
        for (line, want) in d.invalid.iter().zip([
            "twice",
            "invalid label name",
            "no metric name",
            "invalid metric name",
            "out of range",
        ]) {
            assert!(line.to_string().contains(want), "{line}");
        }
    }

    #[test]
    fn bad_bodies_are_refused() {
        assert!(matches!(
            decode(b"not snappy at all", 1 << 20),
            Err(RemoteWriteError::Snappy(_))
        ));
        let junk = snap::raw::Encoder::new().compress_vec(&[0xff; 40]).unwrap();
        assert!(matches!(
            decode(&junk, 1 << 20),
            Err(RemoteWriteError::Protobuf(_))
        ));
        let big = encode(&[(vec![("__name__", "x")], vec![(1, 1.0); 1000])]);
        assert!(matches!(
            decode(&big, 100),
            Err(RemoteWriteError::TooLarge(_))
        ));
        assert_eq!(decode(&encode(&[]), 100).unwrap(), Decoded::default());
    }
}
