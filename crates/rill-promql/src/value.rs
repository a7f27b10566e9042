//! What queries read and answer: label sets, series of (ms, value)
//! points, and the values an expression evaluates to.

use std::fmt;

/// Prometheus's marker of a series that went stale: a NaN with this
/// bit pattern, written when a target disappears.
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// Whether `v` is the stale marker.
pub fn is_stale(v: f64) -> bool {
    v.to_bits() == STALE_NAN_BITS
}

pub const METRIC_NAME: &str = "__name__";

/// A series' labels, sorted by name, no empty value.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Labels(Vec<(String, String)>);

impl Labels {
    pub fn new(mut pairs: Vec<(String, String)>) -> Labels {
        pairs.retain(|(_, v)| !v.is_empty());
        pairs.sort();
        pairs.dedup_by(|a, b| a.0 == b.0);
        Labels(pairs)
    }

    pub fn empty() -> Labels {
        Labels(Vec::new())
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| self.0[i].1.as_str())
    }

    /// The value of `name`, "" when absent.
    pub fn value(&self, name: &str) -> &str {
        self.get(name).unwrap_or("")
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Sets `name` (an empty value removes it).
    pub fn set(&mut self, name: &str, value: &str) {
        match self.0.binary_search_by(|(n, _)| n.as_str().cmp(name)) {
            Ok(i) if value.is_empty() => {
                self.0.remove(i);
            }
            Ok(i) => self.0[i].1 = value.to_string(),
            Err(_) if value.is_empty() => {}
            Err(i) => self.0.insert(i, (name.to_string(), value.to_string())),
        }
    }

    pub fn remove(&mut self, name: &str) {
        self.set(name, "");
    }

    /// Without the metric name.
    pub fn without_name(&self) -> Labels {
        let mut l = self.clone();
        l.remove(METRIC_NAME);
        l
    }

    /// Only the labels named.
    pub fn keep(&self, names: &[String]) -> Labels {
        Labels(
            self.0
                .iter()
                .filter(|(n, _)| names.iter().any(|k| k == n))
                .cloned()
                .collect(),
        )
    }

    /// Without the labels named.
    pub fn drop(&self, names: &[String]) -> Labels {
        Labels(
            self.0
                .iter()
                .filter(|(n, _)| !names.iter().any(|k| k == n))
                .cloned()
                .collect(),
        )
    }
}

impl fmt::Display for Labels {
    /// As Prometheus prints a label set: `{a="b", c="d"}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (n, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{n}={v:?}")?;
        }
        f.write_str("}")
    }
}

/// A sample: ms and value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub t: i64,
    pub v: f64,
}

/// A series and its points, in time order.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub labels: Labels,
    pub points: Vec<Point>,
}

/// What a query answers.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// At the query's time (an instant query).
    Scalar(Point),
    String(String),
    /// Each series with one point at the query's time.
    Vector(Vec<Series>),
    /// Range queries, and a range vector at an instant.
    Matrix(Vec<Series>),
}

/// A value as Prometheus writes one (Go's `FormatFloat(v, 'f', -1,
/// 64)`): the shortest digits that read back the same, no exponent;
/// `+Inf`, `-Inf`, `NaN`.
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v == f64::INFINITY {
        "+Inf".to_string()
    } else if v == f64::NEG_INFINITY {
        "-Inf".to_string()
    } else {
        format!("{v}")
    }
}

/// Whether `a` and `b` are equal within a relative `eps` (both NaN
/// counts as equal), as Prometheus's `almost.Equal` tells.
pub fn almost_equal(a: f64, b: f64, eps: f64) -> bool {
    if a.is_nan() && b.is_nan() || a == b {
        return true;
    }
    let min_normal = f64::from_bits(0x0010_0000_0000_0000);
    let abs_sum = a.abs() + b.abs();
    let diff = (a - b).abs();
    if a == 0.0 || b == 0.0 || abs_sum < min_normal {
        return diff < eps * min_normal;
    }
    diff / abs_sum.min(f64::MAX) < eps
}
