//! One round of the handoff loop, planned by `rill_handoff::plan`: which
//! transfers start (ownership transfers of the ring, hinted handoff of
//! partitions held but not owned, then repairs asked), what an owner's switch made safe to
//! remove, and the machines' ticks.

use crate::runtime::Peer;
use rill_handoff::plan::{plan_round, Local};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Peer {
    /// One round of the handoff loop: start what must start, tick what
    /// runs, remove what a switch made safe to remove.
    pub(crate) fn handoff_round(self: &Arc<Self>) {
        let now = self.now();
        let (state, reachable) = {
            let inner = self.lock();
            (inner.state.clone(), inner.detector.reachable(now))
        };
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
        let holding = self.look_at_holdings(state.owners());
        if scan {
            self.handoff_stats
                .hinted_partitions
                .store(holding.len() as u64, Ordering::Relaxed);
            self.clean_cursors();
        }
        let local = {
            let h = self.handoffs();
            Local {
                holding: scan.then_some(holding),
                sending: h
                    .out
                    .iter()
                    .filter(|(_, o)| !o.is_repair())
                    .map(|(t, _)| t.partition)
                    .chain(h.counting.iter().copied())
                    .collect(),
                receiving: h.incoming.keys().map(|t| t.partition).collect(),
                retained: h
                    .retained
                    .iter()
                    .map(|(p, (t, _))| (*p, t.clone()))
                    .collect(),
            }
        };
        let plan = plan_round(
            &state,
            &self.me,
            |n| reachable.iter().any(|r| r == n),
            &local,
        );
        // Owners changed: what ownership handoffs sent may go.
        for p in plan.release {
            let Some((_, sent)) = self.handoffs().retained.remove(&p) else {
                continue;
            };
            let peer = self.clone();
            self.rt.spawn_blocking(move || peer.drop_sent(p, &sent));
        }
        if !plan.mark_again.is_empty() {
            let mut inner = self.lock();
            for t in &plan.mark_again {
                inner.state.mark_done(t);
            }
            if let Err(e) = self.changed(&mut inner) {
                tracing::error!(error = %e, "a transfer is done but the cluster state was not kept");
            }
        }
        for s in plan.start {
            self.start_out(s.partition, s.kind, s.to, now);
        }
        // Repairs an operator asked for take the slots left.
        self.start_repairs(now);
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
