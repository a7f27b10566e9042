//! Reaping tombstones in the simulation as a node's reaper does: a delete
//! whose tombstone every replica stored (a node reads the key after a
//! delete to learn it), or a read that finds the same tombstone on every
//! primary, asks for its reap (Riak's `delete_mode`, here
//! [`DELAY_TICKS`] after); when its time
//! comes, the tombstone is taken out of every replica if `rill-handoff`'s
//! reap rule allows, asked with the holdings reports the coordinating
//! node has memory since the ask; else it is tried again, and in the end
//! kept, as `rill-node`'s reaper does.

use super::net::Tag;
use super::{bkey, node_name, ClusterSim, Target};
use rill_handoff::holdings::may_reap_at;
use rill_node::vnode::msg::VnodeRequest;
use rill_object::VClock;

/// Ticks from a reap's ask to its first try (the runtime's `delete_mode`
/// is 3 s, many times a message's transit).
const DELAY_TICKS: u64 = 15;
/// Ticks between tries, and how many there are (the runtime's 1 s, 60).
const RETRY_TICKS: u64 = 5;
const TRIES: u32 = 60;

/// A reap waiting at its coordinating node (gone if the node stops).
pub(super) struct Job {
    due: u64,
    key: String,
    clock: VClock,
    targets: Vec<Target>,
    asked_ms: u64,
    tries: u32,
}

impl ClusterSim {
    /// Every replica of `targets` holds the same tombstone: its reap is
    /// asked at coordinator `c`, when all of them are primaries and none
    /// of their partitions is moving in its ring.
    pub(super) fn reap(&mut self, c: usize, key: &str, clock: VClock, targets: &[Target]) {
        let ring = self.nodes[c].state.ring();
        let moving = |p: u32| ring.next.iter().any(|t| t.partition == p);
        if targets.iter().any(|t| !t.2 || moving(t.1)) {
            return;
        }
        let job = Job {
            due: self.now + DELAY_TICKS,
            key: key.to_string(),
            clock,
            targets: targets.to_vec(),
            asked_ms: self.now_ms(),
            tries: 0,
        };
        self.log(format!("{key}: reap asked at {}", node_name(c)));
        self.nodes[c].memory.reaps.push(job);
    }

    /// Runs the reaps that are due on every running node.
    pub(super) fn reap_ticks(&mut self) {
        for c in 0..self.nodes.len() {
            if !self.nodes[c].up {
                continue;
            }
            let now = self.now;
            let (due, waiting) = std::mem::take(&mut self.nodes[c].memory.reaps)
                .into_iter()
                .partition(|j| j.due <= now);
            self.nodes[c].memory.reaps = waiting;
            for job in due {
                self.reap_job(c, job);
            }
        }
    }

    /// A reap whose time has come: done when no node other than the
    /// owners holds data of the key's partitions, as every member
    /// reported since it was asked (`rill_handoff::holdings::may_reap`,
    /// the rule the node's reaper asks); else tried again later.
    fn reap_job(&mut self, c: usize, mut job: Job) {
        let partitions: Vec<u32> = job.targets.iter().map(|t| t.1).collect();
        if !self.cfg.faults.reap_despite_fallbacks && !self.may_reap(c, &partitions, job.asked_ms) {
            job.tries += 1;
            if job.tries < TRIES {
                job.due = self.now + RETRY_TICKS;
                self.nodes[c].memory.reaps.push(job);
            } else {
                let key = &job.key;
                self.log(format!(
                    "{key}: tombstone kept (other nodes hold its partitions)"
                ));
            }
            return;
        }
        let key = job.key;
        self.log(format!("{key}: tombstone reaped by {}", node_name(c)));
        self.counts.reaps += 1;
        for &t in &job.targets {
            let request = VnodeRequest::Reap {
                key: bkey(&key),
                clock: job.clock.clone(),
            };
            self.ask(c, t, Tag::None, request);
        }
    }

    /// Whether coordinator `c` may reap a tombstone on `partitions`,
    /// asked at `asked_ms`, by its ring and the reports it has memory.
    fn may_reap(&self, c: usize, partitions: &[u32], asked_ms: u64) -> bool {
        let me = node_name(c);
        may_reap_at(
            &self.nodes[c].state,
            &me,
            |name| self.reachable(c, self.index_of(name)),
            &self.nodes[c].memory.holdings,
            partitions,
            asked_ms,
        )
    }
}
