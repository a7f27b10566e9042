//! Answers of several replicas made one, pure: each series once, each of
//! its samples once; and whether nodes that did not answer may have held
//! samples no other answer has.

use crate::msg::Found;
use crate::service::Replication;
use rill_promql::value::{Labels, Point, Series};
use rill_ring::Ring;
use std::collections::{BTreeMap, BTreeSet};

/// A series' key as the messages carry it (the stored series key of its
/// labels, `__name__` as the name).
pub fn key_of(labels: &Labels) -> String {
    rill_sensor::Series {
        name: labels.value("__name__").to_string(),
        labels: labels
            .iter()
            .filter(|(n, _)| *n != "__name__")
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
    }
    .key()
}

/// The labels of a key from [`key_of`].
pub fn labels_of_key(key: &str) -> Option<Labels> {
    rill_sensor::Series::parse_key(key).map(|s| rill_tsdb::prom_source::labels_of(&s))
}

/// Series of several answers, by key.
#[derive(Default)]
pub struct Merged {
    series: BTreeMap<String, (Labels, Vec<Point>)>,
}

/// Two runs of points in time order as one; where both have a time, the
/// larger value by IEEE total order, so every merge of the same answers
/// gives the same series whatever their order (replicas hold the same
/// value unless two writers sent different ones for one time).
fn union(a: Vec<Point>, b: Vec<Point>) -> Vec<Point> {
    if a.is_empty() {
        return b;
    }
    if b.is_empty() || a == b {
        return a;
    }
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].t.cmp(&b[j].t) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                let v = if a[i].v.total_cmp(&b[j].v).is_ge() {
                    a[i]
                } else {
                    b[j]
                };
                out.push(v);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

impl Merged {
    fn add(&mut self, key: String, labels: impl FnOnce() -> Option<Labels>, points: Vec<Point>) {
        match self.series.get_mut(&key) {
            Some((_, have)) => *have = union(std::mem::take(have), points),
            None => {
                let Some(labels) = labels() else {
                    tracing::warn!(key, "a replica answered a series key that does not parse");
                    return;
                };
                self.series.insert(key, (labels, points));
            }
        }
    }

    pub fn add_series(&mut self, series: Vec<Series>) {
        for s in series {
            let key = key_of(&s.labels);
            let labels = s.labels;
            self.add(key, || Some(labels), s.points);
        }
    }

    pub fn add_found(&mut self, found: Vec<Found>) {
        for f in found {
            let points = f.points.into_iter().map(|(t, v)| Point { t, v }).collect();
            let key = f.key;
            let labels = || labels_of_key(&key);
            let labels = labels();
            self.add(key, || labels, points);
        }
    }

    /// Every series in key order.
    pub fn into_series(self) -> Vec<Series> {
        self.series
            .into_values()
            .filter(|(_, points)| !points.is_empty())
            .map(|(labels, points)| Series { labels, points })
            .collect()
    }
}

/// Why an answer may lack samples when the nodes `missing` did not
/// answer: for some home partition, at least as many nodes that may hold
/// its samples are missing as a write needs (a sample acknowledged by W
/// nodes is missing only if all of them are); `None` when every
/// acknowledged sample is in it. A node that may hold a home's samples:
/// one of its owners, or any node that does not own it (it may have
/// taken them as a fallback).
pub fn partial(
    ring: &Ring,
    replication: Replication,
    missing: &BTreeSet<String>,
) -> Option<String> {
    if missing.is_empty() {
        return None;
    }
    let lost = ring.partitions().any(|p| {
        let nodes = ring.distinct_owners(p, replication.n_val);
        let need = replication.w().min(nodes.len() as u32) as usize;
        let owners_missing = nodes.iter().filter(|x| missing.contains(**x)).count();
        let others_missing = missing
            .iter()
            .filter(|m| !nodes.contains(&m.as_str()))
            .count();
        owners_missing + others_missing >= need
    });
    lost.then(|| {
        format!(
            "the answer may lack samples: node(s) {} did not answer",
            missing.iter().cloned().collect::<Vec<_>>().join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(v: &[(i64, f64)]) -> Vec<Point> {
        v.iter().map(|&(t, v)| Point { t, v }).collect()
    }

    #[test]
    fn a_sample_held_twice_is_answered_once() {
        let a = pts(&[(1, 1.0), (3, 3.0), (5, 5.0)]);
        let b = pts(&[(2, 2.0), (3, 3.0), (6, 6.0)]);
        let u = union(a.clone(), b.clone());
        assert_eq!(u, pts(&[(1, 1.0), (2, 2.0), (3, 3.0), (5, 5.0), (6, 6.0)]));
        assert_eq!(union(b, a), u, "in either order");
        let x = pts(&[(1, 1.0)]);
        let y = pts(&[(1, 2.0)]);
        assert_eq!(
            union(x.clone(), y.clone()),
            union(y, x),
            "a differing value: the same one wins"
        );
    }

    #[test]
    fn series_merge_by_key_with_their_labels() {
        let labels = Labels::new(vec![
            ("__name__".into(), "cpu".into()),
            ("host".into(), "a b\"c".into()),
        ]);
        let key = key_of(&labels);
        assert_eq!(labels_of_key(&key), Some(labels.clone()));
        let mut m = Merged::default();
        m.add_series(vec![Series {
            labels: labels.clone(),
            points: pts(&[(1, 1.0)]),
        }]);
        m.add_found(vec![Found {
            key: key.clone(),
            points: vec![(1, 1.0), (2, 2.0)],
        }]);
        m.add_found(vec![Found {
            key: "not a key{".into(),
            points: vec![(1, 1.0)],
        }]);
        let out = m.into_series();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].labels, labels);
        assert_eq!(out[0].points, pts(&[(1, 1.0), (2, 2.0)]));
    }

    #[test]
    fn an_answer_is_partial_only_when_a_write_may_be_missing() {
        let owners = |nodes: &[&str]| {
            Ring::new(
                (0..16)
                    .map(|i| nodes[i % nodes.len()].to_string())
                    .collect(),
            )
            .unwrap()
        };
        let r = owners(&["a", "b", "c", "d", "e"]);
        let repl = Replication::default();
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(partial(&r, repl, &set(&[])), None);
        assert_eq!(
            partial(&r, repl, &set(&["a"])),
            None,
            "w 2: another holds it"
        );
        assert!(
            partial(&r, repl, &set(&["a", "b"])).is_some(),
            "a and b share partitions"
        );
        // An owner and a node that may have stood in for another: a
        // sample acknowledged by them alone is missing.
        assert!(partial(&r, repl, &set(&["a", "e"])).is_some());
        let one = Replication {
            n_val: 3,
            w: rill_node::Quorum::One,
        };
        assert!(partial(&r, one, &set(&["a"])).is_some());
        let single = owners(&["a"]);
        assert!(partial(&single, repl, &set(&["a"])).is_some());
    }
}
