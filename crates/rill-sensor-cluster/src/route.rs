//! Where a write goes and when it is done, pure: each series hashes to
//! its home partition (by its group's key, so the fields of one line
//! stay together), each home partition's samples go to its owners, the
//! first `n` distinct nodes walking the ring from it
//! (`Ring::distinct_preflist`, with fallbacks for owners that are down),
//! one message per node, and the write is acknowledged once, for every
//! home partition, `w` distinct nodes hold its samples durably.
//!
//! A cluster with fewer nodes than `n_val` keeps each sample once per
//! node: two replicas on one machine are one copy. So a home partition
//! needs `min(w, its owners)` acknowledgements, the owners counted
//! whether up or not: a single node with `n_val 3` takes writes, a
//! 3-node cluster with one node down needs both of the others for
//! `w 2`, and with two down it refuses (Riak would let the one left
//! count its fallbacks and hold the only copy).

use rill_ring::{key_hash, KeyHash, Ring};
use std::collections::BTreeMap;

/// The bucket type under which series keys are hashed onto the ring
/// (no object of Riak's has it: a bucket type's name cannot hold `\0`).
const HASH_TYPE: &[u8] = b"\0sensor";

/// The hash placing a series on the ring: its database and its group's
/// key (the series' own key when it is its own group).
pub fn series_hash(db: &str, group_or_key: &str) -> KeyHash {
    key_hash(HASH_TYPE, db.as_bytes(), group_or_key.as_bytes())
}

/// The engine's placer on a ring of `ring_size` partitions: each series
/// in the partition [`plan`] sends it to, so a node keeps each home
/// partition's sensor data in shards of its own.
pub fn placer(ring_size: u32) -> rill_tsdb::Placer {
    rill_tsdb::Placer::new(move |db, k| Ring::responsible_in(ring_size, &series_hash(db, k)).0)
}

/// One home partition's share of a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Home {
    pub partition: u32,
    /// Positions of its series in the write.
    pub series: Vec<usize>,
    /// The nodes it goes to: its owners that are up, then fallbacks.
    pub nodes: Vec<String>,
    /// How many owners it has, up or not: W is at most this.
    pub owners: u32,
}

/// A write's plan: the home partitions, and one message per node naming
/// the homes it gets (positions in `homes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub homes: Vec<Home>,
    pub messages: Vec<(String, Vec<usize>)>,
}

/// Plans a write of series whose placing keys `keys` gives (by
/// position), with `n` replicas, on `ring`, `up` saying which nodes are
/// reachable (Riak's sloppy quorum: fallbacks stand in for primaries
/// that are not).
pub fn plan<'a>(
    db: &str,
    keys: impl Iterator<Item = &'a str>,
    n: u32,
    ring: &Ring,
    up: impl Fn(&str) -> bool,
) -> Plan {
    let mut by_home: BTreeMap<u32, (KeyHash, Vec<usize>)> = BTreeMap::new();
    for (i, k) in keys.enumerate() {
        let h = series_hash(db, k);
        let p = ring.responsible(&h).0;
        by_home
            .entry(p)
            .or_insert_with(|| (h, Vec::new()))
            .1
            .push(i);
    }
    let mut homes = Vec::with_capacity(by_home.len());
    let mut messages: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (partition, (h, series)) in by_home {
        let first = ring.responsible(&h);
        let nodes = ring.distinct_preflist(first, n, &up);
        let owners = ring.distinct_owners(first, n).len() as u32;
        for node in &nodes {
            messages.entry(node.clone()).or_default().push(homes.len());
        }
        homes.push(Home {
            partition,
            series,
            nodes,
            owners,
        });
    }
    Plan {
        homes,
        messages: messages.into_iter().collect(),
    }
}

/// How a write stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Waiting for more answers.
    Open,
    /// Every home partition has its acknowledgements.
    Done,
    /// Some home partition can no longer get them.
    Failed,
}

/// The acknowledgements a write waits for.
#[derive(Clone, Debug)]
pub struct Acks {
    /// Per home partition: acknowledgements still needed, and messages
    /// holding it not answered yet.
    need: Vec<u32>,
    open: Vec<u32>,
    /// Per message, the homes it holds.
    holds: Vec<Vec<usize>>,
    answered: Vec<bool>,
}

impl Acks {
    /// For `plan`, each home needing `min(w, its owners)`.
    pub fn new(plan: &Plan, w: u32) -> Acks {
        let mut open = vec![0u32; plan.homes.len()];
        for (_, homes) in &plan.messages {
            for &h in homes {
                open[h] += 1;
            }
        }
        Acks {
            need: plan.homes.iter().map(|h| w.min(h.owners)).collect(),
            open,
            holds: plan.messages.iter().map(|(_, h)| h.clone()).collect(),
            answered: vec![false; plan.messages.len()],
        }
    }

    /// Message `m` was answered: its node holds the samples (`ok`) or
    /// not. A second answer to one message is ignored.
    pub fn answer(&mut self, m: usize, ok: bool) {
        if self.answered.get(m).copied() != Some(false) {
            return;
        }
        self.answered[m] = true;
        for &h in &self.holds[m] {
            self.open[h] -= 1;
            if ok {
                self.need[h] = self.need[h].saturating_sub(1);
            }
        }
    }

    pub fn outcome(&self) -> Outcome {
        if self.need.iter().zip(&self.open).any(|(n, o)| n > o) {
            Outcome::Failed
        } else if self.need.iter().all(|&n| n == 0) {
            Outcome::Done
        } else {
            Outcome::Open
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(nodes: &[&str], size: usize) -> Ring {
        Ring::new(
            (0..size)
                .map(|i| nodes[i % nodes.len()].to_string())
                .collect(),
        )
        .unwrap()
    }

    fn keys(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("cpu,host=h{i}")).collect()
    }

    #[test]
    fn every_series_has_one_home_and_each_home_its_replicas() {
        let r = ring(&["a", "b", "c", "d"], 64);
        let k = keys(500);
        let p = plan("db", k.iter().map(String::as_str), 3, &r, |_| true);
        let mut seen: Vec<usize> = p.homes.iter().flat_map(|h| h.series.clone()).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..500).collect::<Vec<_>>());
        assert!(p.homes.len() > 40, "500 series spread over the ring");
        for h in &p.homes {
            assert_eq!(h.nodes.len(), 3);
        }
        assert_eq!(p.messages.len(), 4);
        // The same key always lands in the same home.
        let again = plan("db", k.iter().map(String::as_str), 3, &r, |_| true);
        assert_eq!(again, p);
        // Another database places the same keys elsewhere.
        let other = plan("db2", k.iter().map(String::as_str), 3, &r, |_| true);
        assert_ne!(other.homes, p.homes);
    }

    // 64 partitions over three nodes: the homes whose partitions wrap
    // around (62: c a a, 63: a a b) still get three machines.
    #[test]
    fn every_home_gets_n_machines_where_its_partitions_name_one_twice() {
        let r = ring(&["a", "b", "c"], 64);
        let k = keys(2000);
        let p = plan("db", k.iter().map(String::as_str), 3, &r, |_| true);
        assert!(p.homes.iter().any(|h| h.partition == 63));
        for h in &p.homes {
            let mut nodes = h.nodes.clone();
            nodes.sort_unstable();
            assert_eq!(nodes, ["a", "b", "c"], "home {}", h.partition);
            assert_eq!(h.owners, 3);
        }
    }

    #[test]
    fn a_down_node_is_stood_in_for_where_the_cluster_allows() {
        let r = ring(&["a", "b", "c", "d"], 64);
        let k = keys(100);
        let p = plan("db", k.iter().map(String::as_str), 3, &r, |n| n != "b");
        for h in &p.homes {
            assert_eq!(h.nodes.len(), 3, "a fallback stands in for b");
            assert!(!h.nodes.contains(&"b".to_string()));
        }
        let three = ring(&["a", "b", "c"], 64);
        let p = plan("db", k.iter().map(String::as_str), 3, &three, |n| n != "b");
        for h in &p.homes {
            assert!(h.nodes.iter().all(|n| n == "a" || n == "c"));
            assert_eq!(h.nodes.len(), 2, "no third machine: two copies");
        }
        // W 2 with a and c answering: done.
        let mut acks = Acks::new(&p, 2);
        for m in 0..p.messages.len() {
            acks.answer(m, true);
        }
        assert_eq!(acks.outcome(), Outcome::Done);
        // Only a up: one copy is not W 2, though a serves the whole list.
        let p = plan("db", k.iter().map(String::as_str), 3, &three, |n| n == "a");
        assert_eq!(p.messages.len(), 1);
        let mut acks = Acks::new(&p, 2);
        acks.answer(0, true);
        assert_eq!(acks.outcome(), Outcome::Failed);
    }

    #[test]
    fn a_write_is_done_when_every_home_has_w_nodes() {
        let r = ring(&["a", "b", "c", "d"], 64);
        let k = keys(200);
        let p = plan("db", k.iter().map(String::as_str), 3, &r, |_| true);
        // Every node but one answers: each home keeps two of its three.
        let mut acks = Acks::new(&p, 2);
        assert_eq!(acks.outcome(), Outcome::Open);
        acks.answer(0, true);
        acks.answer(1, true);
        acks.answer(1, false); // a repeated answer changes nothing
        assert_eq!(acks.outcome(), Outcome::Open);
        acks.answer(3, false);
        assert_eq!(acks.outcome(), Outcome::Open);
        acks.answer(2, true);
        assert_eq!(acks.outcome(), Outcome::Done);
        // Two neighbours fail: the homes they share cannot get two.
        let mut acks = Acks::new(&p, 2);
        acks.answer(0, false);
        assert_eq!(acks.outcome(), Outcome::Open);
        acks.answer(1, false);
        assert_eq!(acks.outcome(), Outcome::Failed);
        // W = all: one failure is enough.
        let mut all = Acks::new(&p, 3);
        all.answer(0, true);
        all.answer(1, true);
        all.answer(2, true);
        assert_eq!(all.outcome(), Outcome::Open);
        all.answer(3, false);
        assert_eq!(all.outcome(), Outcome::Failed);
    }

    #[test]
    fn one_node_holding_every_replica_counts_once() {
        let r = ring(&["a"], 64);
        let k = keys(50);
        let p = plan("db", k.iter().map(String::as_str), 3, &r, |_| true);
        assert_eq!(p.messages.len(), 1);
        let mut acks = Acks::new(&p, 2);
        acks.answer(0, true);
        assert_eq!(acks.outcome(), Outcome::Done);
        let mut acks = Acks::new(&p, 2);
        acks.answer(0, false);
        assert_eq!(acks.outcome(), Outcome::Failed);
    }

    #[test]
    fn an_empty_write_is_done_at_once() {
        let r = ring(&["a", "b"], 8);
        let p = plan("db", std::iter::empty(), 3, &r, |_| true);
        assert_eq!(Acks::new(&p, 2).outcome(), Outcome::Done);
    }
}
