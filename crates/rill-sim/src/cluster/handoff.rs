//! Hinted handoff in the simulation: a node's vnode of a partition it
//! does not own sends what it holds to the owner, once reachable, as
//! merges (siblings kept, as a node's handoff stores them); what the
//! owner acknowledged is dropped by the vnode's own handoff drop (its
//! epochs retired first, each key only if unchanged since it was sent).

use super::{ClusterSim, Tag};
use rill_node::vnode::msg::{VnodeReply, VnodeRequest};
use rill_node::BKey;
use rill_object::VClock;

pub(super) struct Running {
    /// The node handing off.
    pub from: usize,
    partition: u32,
    /// Each item sent, and whether the owner stored it.
    sent: Vec<(BKey, VClock, bool)>,
    deadline: u64,
}

impl ClusterSim {
    /// Node `x` hands off every partition it holds data of but does not
    /// own, to owners it can reach (one transfer a partition at a time).
    pub(super) fn hand_off(&mut self, x: usize) {
        for p in 0..self.cfg.ring_size {
            let owner = self.owner(p);
            let busy = self
                .handoffs
                .values()
                .any(|h| h.from == x && h.partition == p);
            if owner == x || busy || !self.reachable(x, owner) {
                continue;
            }
            let vnodes = &self.nodes[x].vnodes;
            let keys = vnodes.keys(p).expect("a memory store lists");
            if keys.is_empty() {
                continue;
            }
            let items: Vec<(BKey, rill_object::Object)> = keys
                .into_iter()
                .filter_map(|k| {
                    let o = vnodes.get(p, &k).expect("a memory store reads")?;
                    Some((k, o))
                })
                .collect();
            let id = self.id();
            self.log(format!(
                "{} hands {} objects of {p} to {}",
                super::node_name(x),
                items.len(),
                super::node_name(owner)
            ));
            let sent = items
                .iter()
                .map(|(k, o)| (k.clone(), o.clock.clone(), false))
                .collect();
            self.handoffs.insert(
                id,
                Running {
                    from: x,
                    partition: p,
                    sent,
                    deadline: self.now + self.cfg.timeout_ticks,
                },
            );
            if self.cfg.faults.drop_hinted_data {
                self.finish_handoff(id, true);
                continue;
            }
            for (item, (key, object)) in items.into_iter().enumerate() {
                let request = VnodeRequest::Merge {
                    key,
                    object,
                    allow_mult: true,
                    prune: None,
                    return_object: false,
                };
                self.ask(x, (owner, p, true), Tag::Handoff { id, item }, request);
            }
        }
    }

    pub(super) fn handoff_replied(&mut self, id: u64, item: usize, reply: VnodeReply) {
        let Some(h) = self.handoffs.get_mut(&id) else {
            return;
        };
        if matches!(reply, VnodeReply::Merged | VnodeReply::Stored(_)) {
            h.sent[item].2 = true;
        }
        if h.sent.iter().all(|s| s.2) {
            self.finish_handoff(id, false);
        }
    }

    /// Drops what the owner stored (everything sent, with the fault).
    fn finish_handoff(&mut self, id: u64, all: bool) {
        let Some(h) = self.handoffs.remove(&id) else {
            return;
        };
        let stored: Vec<(BKey, VClock)> = h
            .sent
            .into_iter()
            .filter(|s| all || s.2)
            .map(|(k, c, _)| (k, c))
            .collect();
        let dropped = self.nodes[h.from]
            .vnodes
            .handed_off(h.partition, &stored)
            .expect("a memory store drops");
        self.counts.handed_off += dropped;
    }

    /// A transfer that heard nothing for a while drops what was stored;
    /// the rest goes at a later round.
    pub(super) fn handoff_timeouts(&mut self) {
        let due: Vec<u64> = self
            .handoffs
            .iter()
            .filter(|(_, h)| h.deadline <= self.now)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.finish_handoff(id, false);
        }
    }
}
