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
    pub fn stats(&self) -> Vec<(&'static str, u64)> {
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
        vec![
            ("cluster_members", members),
            ("cluster_unreachable_members", unreachable),
            ("peer_send_backlog_bytes", backlog_bytes),
            ("peer_sends_overloaded_total", sends_overloaded),
            ("ring_pending_transfers", pending),
            ("handoffs_outbound", outbound),
            ("handoffs_inbound", inbound),
            ("handoff_repairs_waiting", repairs_waiting),
            (
                "handoff_items_sent_total",
                st.items_sent.load(Ordering::Relaxed),
            ),
            (
                "handoff_items_received_total",
                st.items_received.load(Ordering::Relaxed),
            ),
            (
                "handoffs_completed_total",
                st.completed.load(Ordering::Relaxed),
            ),
            ("handoffs_failed_total", st.failed.load(Ordering::Relaxed)),
            ("handoffs_resumed_total", st.resumed.load(Ordering::Relaxed)),
            (
                "partitions_held_not_owned",
                st.hinted_partitions.load(Ordering::Relaxed),
            ),
        ]
    }

    /// `rill admin transfer-limit N`.
    pub(crate) fn set_transfer_limit(&self, limit: usize) {
        self.handoffs().slots.set_limit(limit);
    }
}
