//! Answers of several replicas made one, pure: each series once, each of
//! its samples once; and whether nodes that did not answer may have held
//! samples no other answer has.

use crate::msg::{Found, FoundDigest};
use crate::service::Replication;
use rill_promql::value::{Labels, Point, Series};
use rill_ring::{Partition, Ring};
use std::collections::{BTreeMap, BTreeSet, HashMap};

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

/// The digest of a series' points over a select's range: xxh3-64 of
/// each point's time (ms) and value bits (i64 and u64 LE) in time order.
/// Replicas holding the same samples give the same digest, whatever
/// their blocks.
pub fn points_digest(points: impl Iterator<Item = (i64, f64)>) -> u64 {
    // Hashed a few KB at a time: an update per point costs more than
    // the hash.
    const CHUNK: usize = 4096;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = [0u8; CHUNK];
    let mut at = 0;
    for (t, v) in points {
        if at == CHUNK {
            h.update(&buf);
            at = 0;
        }
        buf[at..at + 8].copy_from_slice(&t.to_le_bytes());
        buf[at + 8..at + 16].copy_from_slice(&v.to_bits().to_le_bytes());
        at += 16;
    }
    h.update(&buf[..at]);
    h.digest()
}

/// A series' digest as a digest read compares it: (points, digest).
type Summary = (u64, u64);

/// What a digest read fetches, pure: given this node's series and the
/// digests other nodes offer, each series whose digest differs from
/// this node's (or that this node lacks) is fetched once for each
/// distinct digest, from one node that offered it; if that node does
/// not send it, from another that offered the same, until none is left.
#[derive(Default)]
pub struct DigestRead {
    mine: HashMap<String, Summary>,
    /// Series to fetch: by key, each digest not this node's with the
    /// nodes that offered it.
    other: BTreeMap<String, BTreeMap<Summary, BTreeSet<String>>>,
    /// What the last [`fetches`](Self::fetches) asked of each node.
    asked: BTreeMap<String, Vec<(String, Summary)>>,
}

impl DigestRead {
    /// A read of which this node holds `local`.
    pub fn new(local: &[Series]) -> DigestRead {
        Self::of(local.iter().map(|s| {
            (
                key_of(&s.labels),
                s.points.len() as u64,
                points_digest(s.points.iter().map(|p| (p.t, p.v))),
            )
        }))
    }

    /// A read of which this node holds `local`, as a replica answers a
    /// select.
    pub fn of_found(local: &[Found]) -> DigestRead {
        Self::of(local.iter().map(|f| {
            (
                f.key.clone(),
                f.points.len() as u64,
                points_digest(f.points.iter().copied()),
            )
        }))
    }

    fn of(mine: impl Iterator<Item = (String, u64, u64)>) -> DigestRead {
        DigestRead {
            mine: mine.map(|(k, n, d)| (k, (n, d))).collect(),
            ..DigestRead::default()
        }
    }

    /// The digests node `node` offers.
    pub fn offer(&mut self, node: &str, found: Vec<FoundDigest>) {
        for f in found {
            let summary = (f.points, f.digest);
            if f.points == 0 || self.mine.get(&f.key) == Some(&summary) {
                continue;
            }
            self.other
                .entry(f.key)
                .or_default()
                .entry(summary)
                .or_default()
                .insert(node.to_string());
        }
    }

    /// The keys to fetch of each node now, sorted: for each series and
    /// digest still wanted, of the nodes offering it one already asked
    /// for another series if there is one (so fewer nodes are asked),
    /// else the first by name. Empty when nothing is left to fetch.
    pub fn fetches(&mut self) -> BTreeMap<String, Vec<String>> {
        self.asked.clear();
        for (key, digests) in &self.other {
            for (summary, nodes) in digests {
                let node = nodes
                    .iter()
                    .find(|n| self.asked.contains_key(*n))
                    .or_else(|| nodes.iter().next())
                    .expect("a digest left is offered by some node");
                self.asked
                    .entry(node.clone())
                    .or_default()
                    .push((key.clone(), *summary));
            }
        }
        self.asked
            .iter()
            .map(|(node, wanted)| {
                let mut keys: Vec<String> = wanted.iter().map(|(k, _)| k.clone()).collect();
                keys.dedup();
                (node.clone(), keys)
            })
            .collect()
    }

    /// Node `node` sent what it was asked for.
    pub fn fetched(&mut self, node: &str) {
        for (key, summary) in self.asked.remove(node).unwrap_or_default() {
            if let Some(digests) = self.other.get_mut(&key) {
                digests.remove(&summary);
                if digests.is_empty() {
                    self.other.remove(&key);
                }
            }
        }
    }

    /// Node `node` did not send what it was asked for: what it offered
    /// is wanted of the others that offered the same.
    pub fn failed(&mut self, node: &str) {
        self.asked.remove(node);
        self.other.retain(|_, digests| {
            digests.retain(|_, nodes| {
                nodes.remove(node);
                !nodes.is_empty()
            });
            !digests.is_empty()
        });
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
    let size = ring.size();
    let n = replication.n_val.min(size);
    let lost = ring.partitions().any(|p| {
        let mut nodes: Vec<&str> = (0..n)
            .map(|i| ring.owner(Partition((p.0 + i) % size)))
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
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

    fn offered(key: &str, points: &[(i64, f64)]) -> FoundDigest {
        FoundDigest {
            key: key.into(),
            points: points.len() as u64,
            digest: points_digest(points.iter().copied()),
        }
    }

    #[test]
    fn a_digest_read_fetches_only_what_differs_once_per_digest() {
        let labels = |host: &str| {
            Labels::new(vec![
                ("__name__".into(), "cpu".into()),
                ("host".into(), host.into()),
            ])
        };
        let (a, b, c) = (labels("a"), labels("b"), labels("c"));
        let (ka, kb, kc) = (key_of(&a), key_of(&b), key_of(&c));
        let same = [(1, 1.0), (2, 2.0)];
        let more = [(1, 1.0), (2, 2.0), (3, 3.0)];
        let mut read = DigestRead::new(&[
            Series {
                labels: a,
                points: pts(&same),
            },
            Series {
                labels: b,
                points: pts(&same),
            },
        ]);
        // Node x agrees on a, holds more of b and c (which this node
        // lacks); y agrees on a and b, holds the same c as x; z holds
        // another c, and an empty series.
        read.offer(
            "x",
            vec![
                offered(&ka, &same),
                offered(&kb, &more),
                offered(&kc, &more),
            ],
        );
        read.offer(
            "y",
            vec![
                offered(&ka, &same),
                offered(&kb, &same),
                offered(&kc, &more),
            ],
        );
        read.offer(
            "z",
            vec![offered(&kc, &same), offered("cpu{host=\"d\"}", &[])],
        );
        let f = read.fetches();
        assert_eq!(f.get("x"), Some(&vec![kb.clone(), kc.clone()]), "{f:?}");
        assert_eq!(f.get("y"), None, "x sends c, y's is the same: {f:?}");
        assert_eq!(f.get("z"), Some(&vec![kc.clone()]), "{f:?}");
        assert_eq!(f.len(), 2);
        // z sends its c; x does not answer: y's c (the same as x's) is
        // asked of y, x's b of nobody (no other node offered it).
        read.fetched("z");
        read.failed("x");
        let f = read.fetches();
        assert_eq!(f.get("y"), Some(&vec![kc.clone()]), "{f:?}");
        assert_eq!(f.len(), 1, "{f:?}");
        read.fetched("y");
        assert!(read.fetches().is_empty());
        // The order of the values counts, not only their set.
        assert_ne!(
            points_digest([(1, 1.0), (2, 2.0)].into_iter()),
            points_digest([(1, 2.0), (2, 1.0)].into_iter())
        );
        let mut agreed = DigestRead::new(&[]);
        agreed.offer("x", vec![offered(&ka, &[])]);
        assert!(agreed.fetches().is_empty());
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
