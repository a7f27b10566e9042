//! The cluster state kept and spread: the claimant's step after each
//! change, the view the node is told, gossip out and in, bucket types
//! sent to peers.

use super::{Inner, Peer};
use crate::msg::PeerMsg;
use rill_cluster::{codec, Status};
use rill_handoff::holdings::may_still_hold;
use rill_node::replicas::ClusterView;
use rill_ring::Ring;
use rill_transport::Lane;
use std::collections::{BTreeMap, BTreeSet};

/// Writes sent to a partition's old owner just before its owner changed
/// have landed by this long after.
const SETTLE_MS: u64 = 2_000;

impl Peer {
    /// The state changed here: the claimant's step, record having seen
    /// it, keep it on disk, tell the node and one peer.
    pub(crate) fn changed(&self, inner: &mut Inner) -> Result<(), crate::StateError> {
        let before = inner.state.digest();
        self.note_released(inner);
        let cx = self.claimant_context(inner);
        inner.last_cx = cx.clone();
        for _ in 0..4 {
            let step = rill_cluster::step(&mut inner.state, &self.me, self.cfg.target_n_val, &cx);
            if step.became_claimant {
                tracing::warn!(node = %self.me, "this node is the claimant now (the last one was unreachable or gone)");
            }
            if step.stayed {
                tracing::warn!(node = %self.me, "every member was leaving (changes committed on two sides of a partition): this node, the claimant, stays a member; stage its leave again once another member stays");
            }
            let saw = inner.state.see(&self.me);
            if !step.changed() && !saw {
                break;
            }
        }
        self.note_released(inner);
        self.file
            .save(&inner.state)
            .map_err(crate::StateError::Write)?;
        inner.addrs = inner
            .state
            .seen()
            .keys()
            .filter_map(|n| {
                let a = inner.state.address(n)?.parse().ok()?;
                Some((n.clone(), a))
            })
            .collect();
        // This node does not watch itself (it hears no pings from itself,
        // and is always up to itself).
        let mut members = inner.state.with_status(Status::is_member);
        members.retain(|n| *n != self.me);
        let now = self.now();
        inner.detector.track(&members, now);
        self.publish_view(inner);
        let peers = inner.peers(&self.me);
        let to: Vec<String> = if inner.state.digest() != before || inner.state.ring_ready() {
            // A new ring or membership (or the moment it is seen by all)
            // goes to everyone.
            inner
                .gossip
                .broadcast(&peers)
                .into_iter()
                .cloned()
                .collect()
        } else {
            let r = inner.random();
            inner
                .gossip
                .changed(&peers, r)
                .into_iter()
                .cloned()
                .collect()
        };
        for p in to {
            self.send_gossip(inner, &p);
        }
        Ok(())
    }

    /// Notes which nodes stopped owning a partition since the last look.
    fn note_released(&self, inner: &mut Inner) {
        let owners = inner.state.owners().to_vec();
        if owners.len() == inner.last_owners.len() {
            let now = self.now();
            for (old, new) in inner.last_owners.iter().zip(&owners) {
                if old != new {
                    inner.released_ms.insert(old.clone(), now);
                }
            }
        }
        inner.last_owners = owners;
    }

    /// What the claimant's step knows beyond the state: members silent
    /// for longer than the claimant's grace (twice the silence that makes
    /// a node unreachable), and members that hold, or may hold,
    /// data of partitions they do not own in this node's ring
    /// (`rill_handoff::holdings::may_still_hold`): no report yet, a
    /// report that lists some, or one looked at before writes in flight when the node
    /// last stopped owning a partition could have landed (`SETTLE_MS`
    /// after).
    pub(crate) fn claimant_context(&self, inner: &Inner) -> rill_cluster::Context {
        let now = self.now();
        let grace = 2 * self.cfg.down_after.as_millis() as u64;
        let members = inner.state.with_status(Status::is_member);
        rill_cluster::Context {
            unreachable: members
                .iter()
                .filter(|m| **m != self.me)
                // A member not tracked yet (this node just started) has its
                // grace from when it is.
                .filter(|m| inner.detector.silent_ms(m, now).is_some_and(|s| s >= grace))
                .cloned()
                .collect(),
            // Every member's, not only a leaving one's: a commit makes a
            // member leaving and may exit it in the same step (a joining
            // node that took fallback writes, then is told to leave).
            holding: members
                .iter()
                .filter(|m| {
                    let settled = inner.released_ms.get(*m).map_or(0, |t| t + SETTLE_MS);
                    may_still_hold(m, inner.holdings.get(*m), inner.state.owners(), settled)
                })
                .cloned()
                .collect(),
        }
    }

    /// Tells the node the ring and which nodes are up.
    pub(crate) fn publish_view(&self, inner: &Inner) {
        let now = self.now();
        let state = &inner.state;
        let Ok(ring) = Ring::new(state.owners().to_vec()) else {
            tracing::error!("the cluster state's ring is not a ring");
            return;
        };
        let reachable: BTreeSet<String> = inner.detector.reachable(now).into_iter().collect();
        let up = state
            // Not an exiting member: it owns nothing and is about to stop,
            // so it takes no fallback writes.
            .with_status(|s| matches!(s, Status::Valid | Status::Leaving | Status::Joining))
            .into_iter()
            .filter(|n| n == &self.me || reachable.contains(n))
            .collect();
        let moving: BTreeMap<u32, String> = state
            .ring()
            .next
            .iter()
            .map(|t| (t.partition, t.to.clone()))
            .collect();
        self.node.set_cluster_view(ClusterView {
            me: self.me.clone(),
            ring,
            up,
            moving,
        });
    }

    /// Sends this node's bucket types and properties to `to`.
    pub(crate) fn send_metadata(&self, inner: &Inner, to: &[String]) {
        if to.is_empty() {
            return;
        }
        let (json, _) = self.node.buckets().registry_json();
        let body = json.to_string().into_bytes();
        for p in to {
            self.send_to(inner, p, Lane::Control, PeerMsg::Metadata(body.clone()));
        }
    }

    pub(crate) fn send_gossip(&self, inner: &Inner, to: &str) {
        let msg = PeerMsg::Gossip(codec::encode(&inner.state));
        self.send_to(inner, to, Lane::Control, msg);
    }

    pub(super) fn gossip_in(&self, from: &str, b: &[u8]) {
        let theirs = match codec::decode(b) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(from, error = %e, "gossip that does not decode was dropped");
                return;
            }
        };
        let mut inner = self.lock();
        match inner.state.merge(&theirs) {
            Ok(true) => {
                if let Err(e) = self.changed(&mut inner) {
                    tracing::error!(error = %e, "the cluster state changed but was not kept");
                }
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(from, error = %e, "gossip from another cluster was refused");
                return;
            }
        }
        // The sender lacks something this node knows: it gets this
        // node's state back at once (riak_core_gossip's reconcile), so
        // a change reaches everyone and is seen in a few round trips.
        if inner.state != theirs {
            self.send_gossip(&inner, from);
        }
    }
}
