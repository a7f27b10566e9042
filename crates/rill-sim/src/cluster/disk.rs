//! Each node's disk and the three ways a node stops.
//!
//! A node's vnodes keep their data in Bitcask stores and their counter
//! lease on a simulated disk (`bitcask::vfs::SimVfs`) that keeps only
//! what was made durable when the power goes. A node writes `o_sync`
//! (every put synced before it is acknowledged) or as Rill does by
//! default (every put handed to the kernel, synced by the kernel's
//! writeback: here every [`WRITEBACK_TICKS`]). It stops:
//! - cleanly: every store synced, the lease marked clean;
//! - by a kill of its process: the page cache keeps every write;
//! - by a power loss: the disk keeps what was durable and, as the seed
//!   picks, some of the rest (torn sectors, lengths, names).
//!
//! Each stop reopens the vnodes from the disk at once, as the restart
//! will find it (the node stays down until it starts): the epochs are
//! continued by `rill-node`'s start rules and the trees built from the
//! stores. A power loss of a node that did not write `o_sync` may take
//! acknowledged writes with it; a write is forgiven only when the loss
//! took its every trace: no vnode's clock has seen it afterwards
//! (`lost_to_power`). A replica a crash set back must come back from the
//! others.

use super::{node_name, ClusterSim};
use bitcask::vfs::SimVfs;
use rill_node::vnode::standalone::{Disk, StandaloneVnodes};
use rill_object::{Actor, Dot};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Writes a power loss took every trace of: of `key`, the counts of
/// `actor` above `above` and up to `upto`, at tick `at`.
#[derive(Clone, Debug)]
pub(super) struct LostRange {
    key: String,
    actor: Actor,
    above: u64,
    upto: u64,
    at: u64,
}

/// Ticks between two writebacks of the kernel's page cache.
pub(super) const WRITEBACK_TICKS: u64 = 50;

/// How a node stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stop {
    Clean,
    ProcessKilled,
    PowerLoss,
}

/// A node's disk and what its vnodes need to open on it.
pub(super) struct NodeDisk {
    /// The disk as the node's running process sees it.
    pub disk: SimVfs,
    /// Times the node's machine started again after a power loss.
    pub boots: u64,
    /// The node syncs every put before acknowledging it.
    pub o_sync: bool,
    /// The bucket registry's directory (on the machine's filesystem).
    pub meta: PathBuf,
}

impl NodeDisk {
    /// Node `i`'s vnodes on this disk, with the vnodes' `faults`
    /// (`trust_stored_clocks`, `keep_lost_epochs`).
    pub(super) fn open(
        &self,
        i: usize,
        ring_size: u32,
        now_ms: u64,
        faults: &super::Faults,
    ) -> StandaloneVnodes {
        let mut boot_id = [0u8; 16];
        boot_id[..8].copy_from_slice(&(self.boots + 1).to_be_bytes());
        let disk = Disk {
            vfs: Arc::new(self.disk.clone()),
            dir: "/data".into(),
            o_sync: self.o_sync,
            boot_id,
            trust_stored_clocks: faults.trust_stored_clocks,
            continue_lost_epochs: faults.keep_lost_epochs,
        };
        let id = |p: u32| {
            let mut id = [0u8; 8];
            id[..4].copy_from_slice(&(i as u32).to_be_bytes());
            id[4..].copy_from_slice(&p.to_be_bytes());
            id
        };
        StandaloneVnodes::open_on_disk(&self.meta, &disk, ring_size, id, true, now_ms)
            .expect("vnodes open on the simulated disk")
    }
}

impl ClusterSim {
    /// How the next stop happens: a third each.
    pub(super) fn pick_stop(&mut self) -> Stop {
        match self.rng.below(3) {
            0 => Stop::Clean,
            1 => Stop::ProcessKilled,
            _ => Stop::PowerLoss,
        }
    }

    /// Node `x` stops as `how`; its vnodes are opened again from what
    /// its disk keeps.
    pub(super) fn stop_vnodes(&mut self, x: usize, how: Stop) {
        // Only a node that acknowledges before syncing may lose what it
        // acknowledged: on an o_sync node a loss is a bug to find.
        let may_lose = how == Stop::PowerLoss && !self.nodes[x].disk.o_sync;
        let before = if may_lose {
            self.seen(&[x])
        } else {
            BTreeMap::new()
        };
        let seed = self.rng.next_u64();
        let n = &mut self.nodes[x];
        let disk = match how {
            Stop::Clean => n.disk.disk.clone(),
            Stop::ProcessKilled => n.disk.disk.kill_process(),
            Stop::PowerLoss => {
                n.disk.boots += 1;
                n.disk.disk.crash(seed)
            }
        };
        // The old vnodes go first (a clean stop syncs and records the
        // lease; after a kill or a crash their files are dead): the
        // new ones take the stores' locks.
        let old = n.vnodes.take();
        if let (Stop::Clean, Some(v)) = (how, old) {
            v.stop_cleanly().expect("a clean stop");
        }
        n.disk.disk = disk;
        let now_ms = self.now_ms();
        let n = &mut self.nodes[x];
        n.vnodes = Some(n.disk.open(x, self.cfg.ring_size, now_ms, &self.cfg.faults));
        if how == Stop::PowerLoss {
            let everyone: Vec<usize> = (0..self.nodes.len()).collect();
            let after = self.seen(&everyone);
            let mut gone = 0;
            for ((key, actor), &counter) in &before {
                let left = after
                    .get(&(key.clone(), actor.clone()))
                    .copied()
                    .unwrap_or(0);
                if left < counter {
                    gone += counter - left;
                    self.lost_to_power.push(LostRange {
                        key: key.clone(),
                        actor: actor.clone(),
                        above: left,
                        upto: counter,
                        at: self.now,
                    });
                }
            }
            let o_sync = if self.nodes[x].disk.o_sync {
                " (o_sync)"
            } else {
                ""
            };
            self.log(format!(
                "{} loses power{o_sync}: {gone} writes gone from every vnode",
                node_name(x),
            ));
        }
    }

    /// The kernel's writeback on every running node.
    pub(super) fn writeback(&mut self) {
        for n in self.nodes.iter().filter(|n| n.up) {
            n.vnodes().sync().expect("a sync of the simulated disk");
        }
    }

    /// Per key and actor, the highest count the clocks of the vnodes of
    /// `nodes` have seen.
    fn seen(&self, nodes: &[usize]) -> BTreeMap<(String, Actor), u64> {
        let mut seen = BTreeMap::new();
        for &x in nodes {
            for key in self.keys() {
                for p in 0..self.cfg.ring_size {
                    let o = self.nodes[x].vnodes().get(p, &super::bkey(&key));
                    if let Some(o) = o.expect("a read of the simulated disk") {
                        for (actor, counter, _) in o.clock.entries() {
                            let e = seen.entry((key.clone(), actor.clone())).or_insert(0);
                            *e = counter.max(*e);
                        }
                    }
                }
            }
        }
        seen
    }

    /// Whether a power loss took every trace of the write of `key` that
    /// `dot` names, made at tick `made` (a write made after the loss with
    /// a dot in a lost range is a dot issued twice: never forgiven).
    pub(super) fn lost_to_power(&self, key: &str, dot: &Dot, made: u64) -> bool {
        self.lost_to_power.iter().any(|r| {
            r.key == key
                && r.actor == dot.actor
                && (r.above + 1..=r.upto).contains(&dot.counter)
                && made <= r.at
        })
    }
}
