//! Holdings reports as `rill-peer`'s runtime keeps them: a node looks at
//! which partitions it holds data of in its handoff rounds and on a tick
//! of its own (the runtime's handoff round, each second), pings every
//! peer with its last look as an age on another tick (the runtime's
//! pings, each second), and keeps the others' reports dated by its own
//! clock at arrival minus that age. The claimant's step and the reaper
//! read these reports, late as they are, not the nodes' stores.

use super::handoff::TICK_MS;
use super::net::Body;
use super::{node_name, ClusterSim};
use rill_cluster::Status;
use rill_handoff::holdings::{may_still_hold, Report};
use std::collections::{BTreeMap, BTreeSet};

/// How long after a member stopped owning a partition writes in flight
/// to it may still land (four times the network's longest delay; the
/// runtime waits 2 s): a report looked at no later than that is not
/// taken to be complete.
const SETTLE_MS: u64 = 20 * TICK_MS;

/// Ticks between a node's looks at its holdings, and between its pings,
/// each carrying its last look to every peer (the runtime does both
/// every second and reaps 3 s after a delete; [`super::reap`] waits
/// three pings). A ping goes [`PING_PHASE`] ticks after a look, so a
/// report is that old when it leaves.
const PING_TICKS: u64 = 5;
const PING_PHASE: u64 = 3;

/// What a node keeps in memory, gone when it stops: the holdings
/// reports it has, when members gave partitions up, its waiting reaps.
#[derive(Default)]
pub(super) struct NodeMemory {
    /// Each member's last report, this node's own included.
    pub holdings: BTreeMap<String, Report>,
    /// When each member last stopped owning a partition, by this node's
    /// ring.
    released_ms: BTreeMap<String, u64>,
    /// The owners at the last look for releases.
    last_owners: Vec<String>,
    /// Reaps waiting for their time (`reap`).
    pub reaps: Vec<super::reap::Job>,
}

impl ClusterSim {
    /// Node `x` looks at which partitions it holds data of (those it
    /// owns listed without a look, as the runtime does) and keeps it as
    /// its report; returns those it does not own in its ring.
    pub(super) fn look_at_holdings(&mut self, x: usize) -> BTreeSet<u32> {
        let me = node_name(x);
        let owners = self.nodes[x].state.owners().to_vec();
        let vnodes = self.nodes[x].vnodes();
        let report = Report::look(&me, &owners, self.now_ms(), |p| vnodes.holds_data(p).ok());
        let not_owned = report.not_owned(&me, &owners).collect();
        self.nodes[x].memory.holdings.insert(me, report);
        not_owned
    }

    /// Every running node that ever joined looks at its holdings every
    /// [`PING_TICKS`], and [`PING_PHASE`] ticks later pings its peers
    /// (the nodes its state names) with its last look.
    pub(super) fn ping_ticks(&mut self) {
        let phase = self.now % PING_TICKS;
        if phase != 0 && phase != PING_PHASE {
            return;
        }
        for x in 0..self.nodes.len() {
            if !self.nodes[x].up || !self.nodes[x].joined {
                continue;
            }
            if phase == 0 {
                self.look_at_holdings(x);
            } else {
                for to in self.peers(x) {
                    self.send_holdings(x, to);
                }
            }
        }
    }

    /// Node `x` sends its last report to `to` (with its ping).
    pub(super) fn send_holdings(&mut self, x: usize, to: usize) {
        let Some(own) = self.nodes[x].memory.holdings.get(&node_name(x)) else {
            return;
        };
        let body = Body::Holdings {
            age_ms: self.now_ms().saturating_sub(own.looked_ms),
            partitions: own.partitions.iter().copied().collect(),
        };
        self.send(x, to, body);
    }

    /// A report from `from` arrives at `at`: dated arrival minus its age,
    /// kept when no newer one is.
    pub(super) fn holdings_in(
        &mut self,
        at: usize,
        from: usize,
        age_ms: u64,
        partitions: Vec<u32>,
    ) {
        let looked_ms = self.now_ms().saturating_sub(age_ms);
        let memory = &mut self.nodes[at].memory.holdings;
        let name = node_name(from);
        if memory.get(&name).is_none_or(|r| r.looked_ms <= looked_ms) {
            let partitions = partitions.into_iter().collect();
            memory.insert(
                name,
                Report {
                    partitions,
                    looked_ms,
                },
            );
        }
    }

    /// Node `x`'s ring changed: each member that stopped owning a
    /// partition is noted with the time.
    pub(super) fn note_released(&mut self, x: usize) {
        let now = self.now_ms();
        let owners = self.nodes[x].state.owners().to_vec();
        let memory = &mut self.nodes[x].memory;
        if owners.len() == memory.last_owners.len() {
            for (old, new) in memory.last_owners.iter().zip(&owners) {
                if old != new {
                    memory.released_ms.insert(old.clone(), now);
                }
            }
        }
        memory.last_owners = owners;
    }

    /// The members node `x`'s claimant step takes to hold, or maybe hold,
    /// data of partitions they do not own in its ring, by the reports it
    /// has (`rill_handoff::holdings::may_still_hold`).
    pub(super) fn may_still_hold(&self, x: usize) -> BTreeSet<String> {
        let s = &self.nodes[x].state;
        let memory = &self.nodes[x].memory;
        s.with_status(Status::is_member)
            .into_iter()
            .filter(|m| {
                let settled = memory.released_ms.get(m).map_or(0, |t| t + SETTLE_MS);
                may_still_hold(m, memory.holdings.get(m), s.owners(), settled)
            })
            .collect()
    }
}
