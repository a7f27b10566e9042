//! One round of the handoff loop: which transfers start (ownership
//! transfers of the ring, hinted handoff of partitions held but not
//! owned), what an owner's switch made safe to remove, and the
//! machines' ticks.

use super::{Key, Kind};
use crate::runtime::Peer;
use rill_cluster::Transfer;
use rill_node::VClock;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Peer {
    /// One round of the handoff loop: start what must start, tick what
    /// runs, remove what a switch made safe to remove.
    pub(crate) fn handoff_round(self: &Arc<Self>) {
        let now = self.now();
        let (owners, pending, moving, reachable) = {
            let inner = self.lock();
            let s = &inner.state;
            let pending: Vec<Transfer> = s
                .ring()
                .next
                .iter()
                .filter(|t| !s.is_done(t))
                .cloned()
                .collect();
            // Every partition the ring is moving, its transfer done or not:
            // until the owner switches, neither side hands it anywhere else.
            let moving: std::collections::BTreeSet<u32> =
                s.ring().next.iter().map(|t| t.partition).collect();
            (
                s.owners().to_vec(),
                pending,
                moving,
                inner.detector.reachable(now),
            )
        };
        let up = |n: &str| n == self.me || reachable.iter().any(|r| r == n);
        // Owners changed: what ownership handoffs sent may go.
        let switched: Vec<(u32, Vec<(Key, VClock)>)> = {
            let mut h = self.handoffs();
            let done: Vec<u32> = h
                .retained
                .keys()
                .copied()
                .filter(|p| owners[*p as usize] != self.me)
                .collect();
            done.into_iter()
                .filter_map(|p| h.retained.remove(&p).map(|s| (p, s)))
                .collect()
        };
        for (p, sent) in switched {
            let peer = self.clone();
            self.rt.spawn_blocking(move || match peer.node.vnodes().handoff_drop(p, &sent) {
                Ok(n) => tracing::info!(partition = p, removed = n, "partition handed off; its data here is removed"),
                Err(e) => tracing::warn!(partition = p, error = %e, "removing handed-off data failed; it will be handed off again"),
            });
        }
        let mut want: Vec<(u32, Kind, String)> = pending
            .iter()
            .filter(|t| t.from == self.me && up(&t.to))
            .map(|t| (t.partition, Kind::Ownership(t.clone()), t.to.clone()))
            .collect();
        let scan = {
            let mut h = self.handoffs();
            let due = now.saturating_sub(h.last_hinted_scan)
                >= self.handoff_cfg.hinted_scan.as_millis() as u64;
            if due {
                h.last_hinted_scan = now;
            }
            due
        };
        // What this node holds without owning it: reported with every
        // ping (tombstones of those partitions are not reaped), and handed
        // home at each scan.
        let holding = self.look_at_holdings(&owners);
        if scan {
            let mut held = 0;
            for p in holding {
                let owner = &owners[p as usize];
                held += 1;
                let incoming_here = moving.contains(&p)
                    || self.handoffs().incoming.keys().any(|t| t.partition == p);
                let retained = self.handoffs().retained.contains_key(&p);
                let running = want.iter().any(|(q, _, _)| *q == p);
                if !(incoming_here || retained || running || !up(owner)) {
                    want.push((p, Kind::Hinted, owner.clone()));
                }
            }
            self.handoff_stats
                .hinted_partitions
                .store(held, Ordering::Relaxed);
            self.clean_cursors();
        }
        for (p, kind, to) in want {
            self.start_out(p, kind, to, now);
        }
        // Time for the machines.
        let mut sender_effects = Vec::new();
        let mut receiver_effects = Vec::new();
        {
            let mut h = self.handoffs();
            for (t, o) in h.out.iter_mut() {
                sender_effects.push((t.clone(), o.sender.tick(now)));
            }
            for (t, i) in h.incoming.iter_mut() {
                receiver_effects.push((t.clone(), i.receiver.tick(now)));
            }
        }
        for (t, e) in sender_effects {
            self.drive_out(&t, e);
        }
        for (t, e) in receiver_effects {
            self.drive_in(&t, e);
        }
    }
}
