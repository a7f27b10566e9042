//! The cluster state every node keeps and gossips (riak_core's ring
//! state): the members and their status, the ring (owners, pending
//! transfers, claimant), the transfers done, and which version each node
//! has seen.
//!
//! The state is a join semilattice, so gossip converges whatever the
//! order, duplication or delay of messages: [`ClusterState::merge`] is
//! commutative, associative and idempotent (property-tested).
//! - Each member's entry is a last-writer-wins register ([`Member`]).
//! - The ring is one last-writer-wins register, ordered by (version,
//!   writer, digest): only the claimant writes it, and a node writes one
//!   version above the highest it has seen, so a newer ring wins; two
//!   claimants on both sides of a partition resolve the same way
//!   everywhere.
//! - Transfers done are marks on the ring register they belong to: two
//!   copies of the same register merge their marks (a grow-only set), and
//!   a newer register wins with its own marks (the claimant carries over
//!   those of transfers still pending). That is a lexicographic join, so
//!   the merge stays a join, and a mark can never be taken for a transfer
//!   of another ring (a node whose mark was on a ring that lost marks its
//!   transfer again).
//! - `seen` keeps, per node, the digest of the members and ring it last
//!   saw, with a counter only that node raises.

use crate::digest::Digest;
use crate::member::{Member, Status};
use std::collections::{BTreeMap, BTreeSet};

/// A partition changing owner: `from` hands its data to `to`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Transfer {
    pub partition: u32,
    pub from: String,
    pub to: String,
    /// The ring version that planned it: with the partition, it names the
    /// transfer, so a completion is never taken for a later one.
    pub id: u64,
}

impl Transfer {
    /// Names the transfer exactly: a mark for it is for it alone.
    pub fn key(&self) -> TransferKey {
        (self.partition, self.id, self.from.clone(), self.to.clone())
    }
}

/// (partition, planning version, from, to).
pub type TransferKey = (u32, u64, String, String);

/// The ring as the claimant last wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingRegister {
    pub version: u64,
    pub writer: String,
    pub claimant: String,
    /// The owner of each partition.
    pub owners: Vec<String>,
    /// Pending transfers, by partition.
    pub next: Vec<Transfer>,
    /// Transfers of `next` whose data has moved.
    pub done: BTreeSet<TransferKey>,
}

impl RingRegister {
    fn digest(&self, d: &mut Digest) {
        d.u64(self.version).str(&self.writer).str(&self.claimant);
        d.u64(self.owners.len() as u64);
        for o in &self.owners {
            d.str(o);
        }
        d.u64(self.next.len() as u64);
        for t in &self.next {
            d.u64(u64::from(t.partition))
                .str(&t.from)
                .str(&t.to)
                .u64(t.id);
        }
    }

    fn key(&self) -> (u64, &str, u64) {
        let mut d = Digest::new();
        self.digest(&mut d);
        (self.version, &self.writer, d.finish())
    }
}

/// What a node last saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub counter: u64,
    pub digest: u64,
    /// Where peers reach the node (its cluster listener, `host:port`);
    /// only the node itself writes it.
    pub addr: String,
}

/// Why a change to the state was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateError {
    #[error("{node} cannot go from {from} to {to}")]
    Transition {
        node: String,
        from: String,
        to: Status,
    },
    #[error("this node belongs to cluster {ours}, the other to {theirs}")]
    OtherCluster { ours: String, theirs: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterState {
    pub(crate) name: String,
    pub(crate) members: BTreeMap<String, Member>,
    pub(crate) ring: RingRegister,
    pub(crate) seen: BTreeMap<String, Seen>,
}

impl ClusterState {
    /// A new cluster of one valid node owning every partition.
    pub fn new(name: &str, node: &str, ring_size: u32) -> ClusterState {
        let mut members = BTreeMap::new();
        members.insert(
            node.to_string(),
            Member {
                status: Status::Valid,
                version: 1,
                writer: node.to_string(),
            },
        );
        let mut s = ClusterState {
            name: name.to_string(),
            members,
            ring: RingRegister {
                version: 1,
                writer: node.to_string(),
                claimant: node.to_string(),
                owners: vec![node.to_string(); ring_size as usize],
                next: Vec::new(),
                done: BTreeSet::new(),
            },
            seen: BTreeMap::new(),
        };
        s.see(node);
        s
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn ring(&self) -> &RingRegister {
        &self.ring
    }

    pub fn owners(&self) -> &[String] {
        &self.ring.owners
    }

    pub fn claimant(&self) -> &str {
        &self.ring.claimant
    }

    pub fn ring_size(&self) -> u32 {
        self.ring.owners.len() as u32
    }

    /// Every node ever known, with its entry (invalid ones included).
    pub fn members(&self) -> &BTreeMap<String, Member> {
        &self.members
    }

    pub fn status(&self, node: &str) -> Option<Status> {
        self.members.get(node).map(|m| m.status)
    }

    /// Nodes with one of the given statuses, in name order.
    pub fn with_status(&self, wanted: impl Fn(Status) -> bool) -> Vec<String> {
        self.members
            .iter()
            .filter(|(_, m)| wanted(m.status))
            .map(|(n, _)| n.clone())
            .collect()
    }

    pub fn is_done(&self, t: &Transfer) -> bool {
        self.ring.done.contains(&t.key())
    }

    pub fn seen(&self) -> &BTreeMap<String, Seen> {
        &self.seen
    }

    /// The digest of what every node must agree on: members and ring.
    pub fn digest(&self) -> u64 {
        let mut d = Digest::new();
        d.str(&self.name);
        for (n, m) in &self.members {
            d.str(n)
                .u64(m.version)
                .str(&m.writer)
                .str(m.status.as_str());
        }
        self.ring.digest(&mut d);
        d.finish()
    }

    /// Every member that must see the ring (valid, leaving, exiting) has
    /// seen this version of it (riak_core's `ring_ready`).
    pub fn ring_ready(&self) -> bool {
        self.ring_ready_without(&BTreeSet::new())
    }

    /// [`ClusterState::ring_ready`], not waiting for the members in
    /// `unreachable` (not reached for longer than the claimant's grace:
    /// they take the state when they return, and it merges).
    pub fn ring_ready_without(&self, unreachable: &BTreeSet<String>) -> bool {
        let digest = self.digest();
        self.members
            .iter()
            .filter(|(n, m)| m.status.must_see_the_ring() && !unreachable.contains(*n))
            .all(|(n, _)| self.seen.get(n).is_some_and(|s| s.digest == digest))
    }

    /// Records that `node` has seen the current state.
    pub fn see(&mut self, node: &str) -> bool {
        let digest = self.digest();
        let counter = self.seen.get(node).map_or(0, |s| s.counter);
        if self.seen.get(node).is_some_and(|s| s.digest == digest) {
            return false;
        }
        let addr = self
            .seen
            .get(node)
            .map(|s| s.addr.clone())
            .unwrap_or_default();
        self.seen.insert(
            node.to_string(),
            Seen {
                counter: counter + 1,
                digest,
                addr,
            },
        );
        true
    }

    /// Records where peers reach `node` (written by the node itself, at
    /// each start). True when it changed.
    pub fn set_address(&mut self, node: &str, addr: &str) -> bool {
        if self.address(node) == Some(addr) {
            return false;
        }
        let counter = self.seen.get(node).map_or(0, |s| s.counter);
        let digest = self.seen.get(node).map_or(0, |s| s.digest);
        self.seen.insert(
            node.to_string(),
            Seen {
                counter: counter + 1,
                digest,
                addr: addr.to_string(),
            },
        );
        true
    }

    /// Where peers reach `node`, if it has said.
    pub fn address(&self, node: &str) -> Option<&str> {
        self.seen
            .get(node)
            .map(|s| s.addr.as_str())
            .filter(|a| !a.is_empty())
    }

    /// The claimant `me`, leaving, stays: its status is valid again (the
    /// one way back from leaving, for the claimant's step alone).
    pub(crate) fn stay(&mut self, me: &str) {
        if let Some(m) = self.members.get(me).filter(|m| m.status == Status::Leaving) {
            let version = m.version + 1;
            self.members.insert(
                me.to_string(),
                Member {
                    status: Status::Valid,
                    version,
                    writer: me.to_string(),
                },
            );
        }
    }

    /// `actor` sets `node`'s status. A node not yet known may only join.
    pub fn set_status(&mut self, actor: &str, node: &str, to: Status) -> Result<(), StateError> {
        let from = self.members.get(node).map(|m| m.status);
        let allowed = match from {
            None => to == Status::Joining,
            Some(f) => f.may_become(to),
        };
        if !allowed {
            return Err(StateError::Transition {
                node: node.to_string(),
                from: from.map_or("not a member".to_string(), |f| f.to_string()),
                to,
            });
        }
        let version = self.members.get(node).map_or(0, |m| m.version) + 1;
        self.members.insert(
            node.to_string(),
            Member {
                status: to,
                version,
                writer: actor.to_string(),
            },
        );
        Ok(())
    }

    /// `actor` writes a new version of the ring.
    pub fn write_ring(&mut self, actor: &str, change: impl FnOnce(&mut RingRegister)) {
        let mut next = self.ring.clone();
        change(&mut next);
        next.version = self.ring.version + 1;
        next.writer = actor.to_string();
        next.next.sort();
        let pending: BTreeSet<TransferKey> = next.next.iter().map(Transfer::key).collect();
        next.done.retain(|k| pending.contains(k));
        self.ring = next;
    }

    /// Records a transfer of the current ring as done (its data is at the
    /// new owner); a transfer the ring no longer plans is not marked.
    pub fn mark_done(&mut self, t: &Transfer) {
        if self.ring.next.contains(t) {
            self.ring.done.insert(t.key());
        }
    }

    /// Takes in another node's state. True when this one changed.
    pub fn merge(&mut self, other: &ClusterState) -> Result<bool, StateError> {
        if other.name != self.name {
            return Err(StateError::OtherCluster {
                ours: self.name.clone(),
                theirs: other.name.clone(),
            });
        }
        let before = self.clone();
        for (n, m) in &other.members {
            let merged = match self.members.get(n) {
                Some(mine) => Member::merge(mine, m),
                None => m.clone(),
            };
            self.members.insert(n.clone(), merged);
        }
        match other.ring.key().cmp(&self.ring.key()) {
            std::cmp::Ordering::Greater => self.ring = other.ring.clone(),
            std::cmp::Ordering::Equal => self.ring.done.extend(other.ring.done.iter().cloned()),
            std::cmp::Ordering::Less => {}
        }
        for (n, s) in &other.seen {
            let take = match self.seen.get(n) {
                Some(mine) => {
                    (s.counter, s.digest, &s.addr) > (mine.counter, mine.digest, &mine.addr)
                }
                None => true,
            };
            if take {
                self.seen.insert(n.clone(), s.clone());
            }
        }
        Ok(*self != before)
    }
}
