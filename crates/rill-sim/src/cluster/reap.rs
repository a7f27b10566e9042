//! Reaping tombstones in the simulation: a read that finds the same
//! tombstone on every primary reaps it (Riak's `delete_mode` immediate)
//! when `rill-handoff`'s reap rule allows, asked as the node's reaper
//! asks it, with every member's holdings report as it is now.

use super::net::Tag;
use super::{bkey, ClusterSim, Target};
use rill_cluster::Status;
use rill_handoff::holdings::{may_reap, Member};
use rill_node::vnode::msg::VnodeRequest;
use rill_object::VClock;
use std::collections::{BTreeMap, BTreeSet};

impl ClusterSim {
    /// Every replica holds the same tombstone: it is reaped from each
    /// (Riak's `delete_mode` immediate) unless a node other than the
    /// owners holds data of the key's partitions, which could hand the
    /// value back once the tombstone is gone, or a member cannot be
    /// asked, or a partition is moving (`rill_handoff::holdings::
    /// may_reap`, the rule the node's reaper asks, here with every
    /// member's holdings as they are now).
    pub(super) fn reap(&mut self, c: usize, key: &str, clock: VClock, targets: &[Target]) {
        if targets.iter().any(|t| !t.2) {
            return;
        }
        let partitions: Vec<u32> = targets.iter().map(|t| t.1).collect();
        if !self.cfg.faults.reap_despite_fallbacks && !self.may_reap(c, &partitions) {
            self.log(format!(
                "{key}: reap put off (other nodes hold its partitions)"
            ));
            return;
        }
        self.log(format!("{key}: tombstone reaped"));
        self.counts.reaps += 1;
        for &t in targets {
            let request = VnodeRequest::Reap {
                key: bkey(key),
                clock: clock.clone(),
            };
            self.ask(c, t, Tag::None, request);
        }
    }

    /// Whether coordinator `c` may reap a tombstone on `partitions` now.
    fn may_reap(&self, c: usize, partitions: &[u32]) -> bool {
        let s = &self.nodes[c].state;
        let mut members = Vec::new();
        let mut reports = BTreeMap::new();
        for name in s.with_status(Status::is_member) {
            let i = self.index_of(&name);
            reports.insert(name.clone(), self.report(i));
            members.push(Member {
                reachable: i == c || self.reachable(c, i),
                name,
            });
        }
        let moving: BTreeSet<u32> = s.ring().next.iter().map(|t| t.partition).collect();
        may_reap(&members, &reports, s.owners(), &moving, partitions, 0)
    }
}
