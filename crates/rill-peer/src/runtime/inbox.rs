//! What peers send, taken in order: pings, gossip, handoff, joins and
//! admin requests handled at once; vnode requests answered at once,
//! gathered to be served together, or sent to the bulk pool.

use super::Peer;
use crate::msg::PeerMsg;
use futures_util::FutureExt;
use rill_cluster::codec;
use rill_transport::{Incoming, Lane};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Messages taken from the inbox before the small vnode requests among
/// them are sent to be served together (`Peer::inbox`).
const READS_TOGETHER: usize = 64;

/// Small vnode requests gathered to be served together, decoded.
type Reads = Vec<(
    String,
    rill_node::wire::Route,
    rill_node::vnode::msg::VnodeRequest,
)>;

impl Peer {
    /// Takes what peers send, in order. A read a vnode answers without
    /// waiting (from memory or the page cache: `Backend::try_get`) is
    /// answered here at once. Other small vnode requests are gathered
    /// from what has arrived and served together on one blocking thread:
    /// one thread hand-off for many requests (measured on a 3-node devrel
    /// at 1 KiB, docs/benchmarks.md), and a request that must wait for the
    /// disk holds up only those gathered with it, never the inbox. At most
    /// 64 such batches run at once; past that the inbox waits (peers then
    /// wait on their queues: back-pressure), never the reverse.
    pub(super) async fn inbox(peer: std::sync::Weak<Peer>, mut rx: mpsc::Receiver<Incoming>) {
        while let Some(first) = rx.recv().await {
            let Some(peer) = peer.upgrade() else { return };
            let mut reads = Vec::new();
            let mut next = Some(first);
            // Messages taken, not only requests gathered: reads answered
            // here must not keep a gathered write from its thread.
            let mut taken = 0;
            while let Some(m) = next.take() {
                // A message that makes its handling panic is dropped (its
                // coordinator times out), and the inbox goes on: one bad
                // message must not leave the node deaf to its peers.
                let from = m.from.clone();
                let took = std::panic::AssertUnwindSafe(peer.take(m, &mut reads))
                    .catch_unwind()
                    .await;
                if took.is_err() {
                    tracing::error!(from = %from, "handling a message from a peer panicked; the message was dropped");
                }
                taken += 1;
                if taken < READS_TOGETHER {
                    next = rx.try_recv().ok();
                }
            }
            if !reads.is_empty() {
                let Ok(permit) = peer.serving.clone().acquire_owned().await else {
                    return;
                };
                let p = peer.clone();
                tokio::task::spawn_blocking(move || {
                    let _permit = permit;
                    for (from, route, request) in reads {
                        let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            p.serve_decoded(&from, route, request)
                        }));
                        if served.is_err() {
                            tracing::error!(from = %from, "serving a request of a peer panicked; the request was dropped");
                        }
                    }
                });
            }
        }
    }

    /// Takes one message; a small vnode request is left in `reads` to be
    /// served with others.
    async fn take(self: &Arc<Self>, m: Incoming, reads: &mut Reads) {
        // Vnode messages (which may carry large values) are read where
        // they lie, not copied out by `decode`.
        let msg = match crate::msg::vnode_kind(&m.data) {
            Some(false) => PeerMsg::VnodeRequest(Vec::new()),
            Some(true) => PeerMsg::VnodeReply(Vec::new()),
            None => match PeerMsg::decode(&m.data) {
                Ok(msg) => msg,
                Err(e) => {
                    tracing::warn!(from = %m.from, error = %e, "a malformed message from a peer was dropped");
                    return;
                }
            },
        };
        let body = m.data.slice(4.min(m.data.len())..);
        {
            let mut inner = self.lock();
            let now = self.now();
            let was_unreachable = inner.detector.heard(&m.from, now);
            // A node that speaks is listening: a connect to it that failed
            // before (it was starting, or restarting) is tried again at
            // once. Pings come every second, so this costs little.
            if was_unreachable || matches!(msg, PeerMsg::Ping) {
                if let Some(addr) = inner.addrs.get(&m.from) {
                    self.transport.reachable_again(*addr);
                }
            }
            if was_unreachable {
                tracing::info!(node = %m.from, "a node is reachable again");
                self.publish_view(&inner);
            }
        }
        match msg {
            PeerMsg::Ping => {}
            PeerMsg::Holdings { age_ms, partitions } => {
                self.holdings_in(&m.from, age_ms, partitions)
            }
            PeerMsg::Gossip(b) => self.gossip_in(&m.from, &b),
            PeerMsg::VnodeRequest(_) if body.len() > rill_node::bulk::BULK_BYTES => {
                // A large value: served by the node's bulk pool (lower CPU
                // priority, a few at once), queued there without holding
                // the inbox, so small requests and replies behind it go on.
                let peer = self.clone();
                let from = m.from.clone();
                let expiry = self.node.bulk_serve_expiry();
                let job = body.clone();
                let queued = self.node.bulk_serve().spawn(body.len(), move |waited| {
                    if waited <= expiry {
                        peer.serve(&from, &job);
                    } else {
                        peer.refuse(&from, &job, "a replica write waited too long; retry");
                    }
                });
                if queued.is_err() {
                    self.refuse(&m.from, &body, "the replica is overloaded; retry");
                }
            }
            PeerMsg::VnodeRequest(_) => {
                if let Some((route, request)) = self.try_serve(&m.from, &body) {
                    reads.push((m.from.clone(), route, request));
                }
            }
            PeerMsg::VnodeReply(_) => self.reply_in(&body),
            PeerMsg::Handoff(b) => self.handoff_in(&m.from, &b),
            PeerMsg::Metadata(b) => {
                let node = self.node.clone();
                let from = m.from.clone();
                // Merging writes buckets.json: off the inbox task.
                tokio::task::spawn_blocking(move || {
                    let merged = serde_json::from_slice(&b)
                        .map_err(|e| e.to_string())
                        .and_then(|v| node.buckets().merge_registry(&v).map_err(|e| e.to_string()));
                    if let Err(e) = merged {
                        tracing::warn!(from = %from, error = %e, "a peer's bucket types were not taken in");
                    }
                });
            }
            PeerMsg::JoinAsk { id, addr } => {
                let Ok(addr) = addr.parse::<SocketAddr>() else {
                    tracing::warn!(from = %m.from, "a join ask without a usable address");
                    return;
                };
                let state = codec::encode(&self.lock().state);
                self.send_addr(addr, Lane::Control, PeerMsg::JoinState { id, state });
            }
            msg @ (PeerMsg::JoinState { .. } | PeerMsg::AdminReply { .. }) => {
                let id = match &msg {
                    PeerMsg::JoinState { id, .. } | PeerMsg::AdminReply { id, .. } => *id,
                    _ => unreachable!("matched above"),
                };
                let w = self
                    .waiters
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id);
                if let Some(w) = w {
                    let _ = w.send(msg);
                }
            }
            PeerMsg::AdminRequest { id, json } => {
                let answer = self.admin_here(&json);
                let inner = self.lock();
                self.send_to(
                    &inner,
                    &m.from,
                    Lane::Control,
                    PeerMsg::AdminReply { id, json: answer },
                );
            }
        }
    }
}
