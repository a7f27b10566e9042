//! Repair at run time (`rill admin repair-partition P`, `repair-node`):
//! the owner of a partition asks the owners of the neighbours that
//! `rill_handoff::repair::sources` chooses to send it their copies of
//! its keys; each ask waits on the sending node for a slot of the
//! transfer limit, and runs as a transfer of kind `Repair` (progress in
//! `rill admin transfers`).

use super::{Key, Kind, MAX_REPAIRS_WAITING};
use crate::admin::AdminAnswer;
use crate::msg::PeerMsg;
use crate::runtime::Peer;
use rill_handoff::codec::HandoffMsg;
use rill_handoff::repair::{replica_of, source_of, sources};
use rill_handoff::TransferId;
use rill_transport::Lane;
use serde_json::Value;
use std::sync::Arc;

impl Peer {
    /// Which keys a repair of `target` sends: those `target` is a
    /// replica of, each under its bucket's n_val.
    pub(super) fn repair_filter(&self, target: u32) -> impl Fn(&Key) -> bool + Sync {
        let size = self.node.ring_size();
        let buckets = self.node.buckets().clone();
        move |k: &Key| {
            let hash = rill_ring::key_hash(&k.bucket_type, &k.bucket, &k.key);
            let first = rill_ring::Ring::responsible_in(size, &hash).0;
            let n = buckets.n_val_of(&k.bucket_type, &k.bucket);
            replica_of(first, n, target, size)
        }
    }

    /// `from` asks this node to send it a repair.
    pub(super) fn repair_asked(&self, from: &str, tid: TransferId) {
        let size = self.node.ring_size();
        let valid = tid.from == self.me
            && tid.partition < size
            && source_of(tid.id).is_some_and(|s| s < size && s != tid.partition);
        if !valid {
            tracing::warn!(
                from,
                partition = tid.partition,
                "a malformed repair ask was dropped"
            );
            return;
        }
        let mut h = self.handoffs();
        if h.repairs.len() >= MAX_REPAIRS_WAITING && !h.repairs.contains_key(&tid) {
            tracing::warn!(
                from,
                partition = tid.partition,
                waiting = h.repairs.len(),
                "a repair ask was refused: too many wait already; ask again later"
            );
            return;
        }
        tracing::info!(
            from,
            partition = tid.partition,
            source = source_of(tid.id),
            "a repair was asked of this node"
        );
        h.repairs.insert(tid, from.to_string());
    }

    /// Starts the repairs asked of this node while slots are free. An ask
    /// the ring has overtaken (this node no longer owns the source, or the
    /// asker the partition repaired, or the source is being handed away)
    /// is dropped, with a log line: its operator asks again.
    pub(super) fn start_repairs(self: &Arc<Self>, now: u64) {
        let waiting: Vec<(TransferId, String)> = self
            .handoffs()
            .repairs
            .iter()
            .map(|(t, to)| (t.clone(), to.clone()))
            .collect();
        let view = self.node.cluster_view();
        for (tid, to) in waiting {
            let Some(source) = source_of(tid.id) else {
                continue;
            };
            let owner = |p: u32| view.ring.owner(rill_ring::Partition(p)).to_string();
            let handed_away = self.handoffs().retained.contains_key(&source);
            if owner(source) != self.me || owner(tid.partition) != to || handed_away {
                self.handoffs().repairs.remove(&tid);
                tracing::warn!(partition = tid.partition, source, to = %to, "a repair asked of this node was dropped: the ring changed since it was asked; ask again");
                continue;
            }
            if !self.start_out(tid.partition, Kind::Repair { source }, to, now) {
                return;
            }
            self.handoffs().repairs.remove(&tid);
        }
    }

    /// `rill admin repair-partition P` (`{"partition": P}`, its number on
    /// the ring or Riak's index) and `rill admin repair-node`: asks for
    /// the repair of each partition named that this node owns.
    pub(crate) fn repair_admin(&self, v: &Value) -> AdminAnswer {
        let view = self.node.cluster_view();
        let size = view.ring.size();
        let partitions: Vec<u32> = if v["op"] == "repair-node" {
            (0..size)
                .filter(|p| view.ring.owner(rill_ring::Partition(*p)) == self.me)
                .collect()
        } else {
            let asked = v["partition"]
                .as_str()
                .map(str::to_string)
                .or_else(|| v["partition"].as_u64().map(|n| n.to_string()))
                .unwrap_or_default();
            match partition_named(&view.ring, &asked) {
                Some(p) => vec![p],
                None => {
                    return AdminAnswer::failed(format!(
                        "Failed: {asked:?} is not a partition of this ring: give its number \
                         (0 to {}) or its index as 'rill admin ring-status' prints it",
                        size - 1
                    ))
                }
            }
        };
        if partitions.is_empty() {
            return AdminAnswer::failed(format!("Failed: '{}' owns no partition", self.me));
        }
        let owners: Vec<String> = (0..size)
            .map(|p| view.ring.owner(rill_ring::Partition(p)).to_string())
            .collect();
        let n_vals = self.node.buckets().n_vals_in_use();
        let inner = self.lock();
        let mut text = String::new();
        let mut asked = 0;
        for p in &partitions {
            match sources(&owners, &self.me, *p, &n_vals, |n| view.is_up(n)) {
                Ok(from) => {
                    let names: Vec<String> = from
                        .iter()
                        .map(|s| format!("partition {} on '{}'", s.partition, s.node))
                        .collect();
                    for s in from {
                        let tid = TransferId {
                            partition: *p,
                            id: Kind::Repair {
                                source: s.partition,
                            }
                            .id(),
                            from: s.node.clone(),
                        };
                        // On the control lane: a handoff lane full of
                        // batches would refuse it.
                        let msg = PeerMsg::Handoff(HandoffMsg::Ask(tid).encode());
                        self.send_to(&inner, &s.node, Lane::Control, msg);
                    }
                    asked += 1;
                    text.push_str(&format!(
                        "Repair of partition {p} asked of {}\n",
                        names.join(" and ")
                    ));
                }
                Err(e) => text.push_str(&format!("Failed: {e}\n")),
            }
        }
        if asked == 0 {
            return AdminAnswer::failed(text.trim_end().to_string());
        }
        text.push_str("Follow the repairs with 'rill admin transfers'.");
        AdminAnswer::ok(text)
    }
}

/// A partition by its number on the ring or by Riak's index of it.
fn partition_named(ring: &rill_ring::Ring, name: &str) -> Option<u32> {
    let name = name.trim();
    if let Ok(n) = name.parse::<u32>() {
        if n < ring.size() {
            return Some(n);
        }
    }
    ring.partitions()
        .find(|p| ring.index_decimal(*p) == name)
        .map(|p| p.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_is_named_by_its_number_or_riaks_index() {
        let ring = rill_ring::Ring::single(64, "a").unwrap();
        assert_eq!(partition_named(&ring, "0"), Some(0));
        assert_eq!(partition_named(&ring, " 63 "), Some(63));
        let index = ring.index_decimal(rill_ring::Partition(5));
        assert_eq!(partition_named(&ring, &index), Some(5));
        assert_eq!(partition_named(&ring, "64"), None);
        assert_eq!(partition_named(&ring, "x"), None);
        assert_eq!(partition_named(&ring, ""), None);
    }
}
