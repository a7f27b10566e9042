//! What an operator reads and sets: `rill admin transfers`, the
//! cluster and handoff figures of `/stats`, the transfer limit.

use super::Kind;
use crate::runtime::Peer;
use std::sync::atomic::Ordering;

impl Peer {
    /// `rill admin transfers`: what moves now.
    pub(crate) fn active_transfers(&self) -> String {
        let h = self.handoffs();
        let mut out = String::new();
        for (t, o) in &h.out {
            let what = match o.kind {
                Kind::Ownership(_) => format!("ownership handoff of partition {}", t.partition),
                Kind::Hinted => format!("hinted handoff of partition {}", t.partition),
                Kind::Repair { source } => {
                    format!(
                        "repair of partition {} from partition {source}",
                        t.partition
                    )
                }
            };
            // The partition's size as the pass last listed it (a top-up
            // sends only the keys written since, of all of them).
            let of = if o.total > 0 {
                format!(" (of {} in the partition)", o.total)
            } else {
                String::new()
            };
            out.push_str(&format!(
                "  {what} to '{}': {} keys sent{of}\n",
                o.to, o.sender.items_sent
            ));
        }
        for (t, to) in &h.repairs {
            let source = rill_handoff::repair::source_of(t.id).unwrap_or(t.partition);
            out.push_str(&format!(
                "  repair of partition {} from partition {source} to '{to}': waiting for a transfer slot\n",
                t.partition
            ));
        }
        for t in h.incoming.keys() {
            out.push_str(&format!(
                "  receiving partition {} from '{}'\n",
                t.partition, t.from
            ));
        }
        out
    }

    /// Cluster and handoff figures for `/stats`.
    pub fn stats(&self) -> Vec<(&'static str, &'static str, u64)> {
        let (outbound, inbound, repairs_waiting) = {
            let h = self.handoffs();
            (
                h.out.len() as u64,
                h.incoming.len() as u64,
                h.repairs.len() as u64,
            )
        };
        let (members, unreachable, pending) = {
            let inner = self.lock();
            let members = inner.state.with_status(rill_cluster::Status::is_member);
            // As the node routes requests: a member counted unreachable
            // here has its replicas taken by fallbacks already.
            let view = self.node.cluster_view();
            let unreachable = members.iter().filter(|m| !view.is_up(m)).count();
            let s = &inner.state;
            let pending = s.ring().next.iter().filter(|t| !s.is_done(t)).count();
            (members.len() as u64, unreachable as u64, pending as u64)
        };
        let (backlog_bytes, sends_overloaded) = {
            let b = self.backlogs.lock().unwrap_or_else(|e| e.into_inner());
            (b.bytes() as u64, b.refused)
        };
        let st = &self.handoff_stats;
        let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        vec![
            ("cluster_members", "Members of the cluster.", members),
            (
                "cluster_unreachable_members",
                "Members this node cannot reach now (fallbacks take their replicas).",
                unreachable,
            ),
            (
                "cluster_bytes_sent_total",
                "Bytes this node wrote to other nodes (every lane, framing included).",
                self.transport.traffic().sent_bytes(),
            ),
            (
                "cluster_bytes_received_total",
                "Bytes this node read from other nodes (every lane, framing included).",
                self.transport.traffic().received_bytes(),
            ),
            (
                "peer_send_backlog_bytes",
                "Bytes waiting to be sent to other nodes.",
                backlog_bytes,
            ),
            (
                "peer_sends_overloaded_total",
                "Messages to other nodes refused because their backlog was full.",
                sends_overloaded,
            ),
            (
                "ring_pending_transfers",
                "Ownership transfers of the ring not finished.",
                pending,
            ),
            (
                "handoffs_outbound",
                "Handoffs this node is sending now.",
                outbound,
            ),
            (
                "handoffs_inbound",
                "Handoffs this node is receiving now.",
                inbound,
            ),
            (
                "handoff_repairs_waiting",
                "Repairs other nodes asked of this one, waiting for a transfer slot.",
                repairs_waiting,
            ),
            (
                "handoff_items_sent_total",
                "Objects sent by handoffs.",
                l(&st.items_sent),
            ),
            (
                "handoff_items_received_total",
                "Objects received by handoffs.",
                l(&st.items_received),
            ),
            (
                "handoffs_completed_total",
                "Handoffs that finished.",
                l(&st.completed),
            ),
            (
                "handoffs_failed_total",
                "Handoffs that failed (a transfer is tried again; a repair is asked for again).",
                l(&st.failed),
            ),
            (
                "handoffs_resumed_total",
                "Handoffs received that resumed after the last batch this node had stored.",
                l(&st.resumed),
            ),
            (
                "partitions_held_not_owned",
                "Partitions this node holds data of without owning them (to hand off).",
                l(&st.hinted_partitions),
            ),
        ]
    }

    /// `rill admin transfer-limit N`.
    pub(crate) fn set_transfer_limit(&self, limit: usize) {
        self.handoffs().slots.set_limit(limit);
    }
}
