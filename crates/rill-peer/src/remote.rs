//! Vnode requests between nodes: the coordinator's side (`Link`, the
//! node's `Remote`) sends a request with an id and keeps where its reply
//! goes; the replica's side serves it on a blocking thread and answers on
//! the same lane kind. Requests and replies carrying more than 64 KiB
//! travel on the bulk lane, the rest on the small lane, so a small get
//! never waits behind a large value.

use crate::runtime::{Peer, Pending};
use rill_node::replicas::{Remote, ReplyTx};
use rill_node::vnode::msg::{VnodeReply, VnodeRequest};
use rill_node::wire::{self, Route};
use rill_node::KvError;
use rill_transport::{Lane, SendError};
use std::sync::{Arc, Weak};
use std::time::Instant;

/// Messages above this go on the bulk lane.
const SMALL_BYTES: usize = 64 << 10;

fn lane_for(bytes: usize) -> Lane {
    if bytes > SMALL_BYTES {
        Lane::Bulk
    } else {
        Lane::Small
    }
}

/// The node's way to its peers (holds the runtime weakly: the node must
/// be able to stop and record a clean shutdown).
pub(crate) struct Link {
    peer: Weak<Peer>,
    rt: tokio::runtime::Handle,
}

impl Link {
    pub fn new(peer: &Arc<Peer>) -> Link {
        Link {
            peer: Arc::downgrade(peer),
            rt: peer.rt.clone(),
        }
    }
}

/// A request could not be sent: its coordinator is told at once.
fn send_failed(peer: &Peer, node: &str, id: u64, e: SendError) {
    if matches!(e, SendError::Unreachable(_)) {
        let now = peer.now();
        let mut inner = peer.lock();
        let was = inner.detector.liveness(node, now);
        inner.detector.refused(node, now);
        // Requests from now on go to fallbacks, not only from the next
        // tick.
        if was != crate::detector::Liveness::Unreachable {
            peer.publish_view(&inner);
        }
    }
    let p = peer
        .pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id);
    if let Some(p) = p {
        let error = match e {
            // Overload, not absence: the coordinator answers so and does
            // not ask another replica instead.
            SendError::Overloaded(_) => KvError::Busy(format!("{e}")),
            SendError::TooLarge { len, max } => KvError::TooLarge {
                size_bytes: len,
                max_bytes: max,
            },
            // The message never left this node.
            _ => KvError::Unreachable {
                node: node.to_string(),
                why: format!(": {e}"),
                sent: false,
            },
        };
        let _ = p.tx.send((p.tag, VnodeReply::Failed(error)));
    }
}

fn decode_request(from: &str, b: &bytes::Bytes) -> Option<(Route, VnodeRequest)> {
    match wire::decode_request_shared(b) {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!(from, error = %e, "a malformed vnode request was dropped");
            None
        }
    }
}

/// A request to `node` failed: it never left or was never taken (`sent`
/// false), or it left and the node went down before answering.
fn unreachable(node: &str, sent: bool) -> VnodeReply {
    VnodeReply::Failed(KvError::Unreachable {
        node: node.to_string(),
        why: String::new(),
        sent,
    })
}

impl Remote for Link {
    fn call(&self, node: &str, partition: u32, request: VnodeRequest, tag: usize, tx: ReplyTx) {
        let Some(peer) = self.peer.upgrade() else {
            let _ = tx.send((tag, unreachable(node, false)));
            return;
        };
        let Some(addr) = peer.lock().addrs.get(node).copied() else {
            let _ = tx.send((tag, unreachable(node, false)));
            return;
        };
        let id = peer.id();
        let accepted = matches!(request, VnodeRequest::Coordinate { .. }).then_some(false);
        let msg = wire::encode_request_after(
            &crate::msg::vnode_prefix(false),
            Route {
                request_id: id,
                partition,
            },
            &request,
        );
        let lane = lane_for(msg.len());
        peer.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id,
                Pending {
                    tag,
                    tx,
                    node: node.to_string(),
                    sent: Instant::now(),
                    accepted,
                },
            );
        let weak = self.peer.clone();
        let node = node.to_string();
        peer.send_bytes_or(addr, lane, msg, move |e| {
            if let Some(peer) = weak.upgrade() {
                send_failed(&peer, &node, id, e);
            }
        });
    }

    fn runtime(&self) -> &tokio::runtime::Handle {
        &self.rt
    }

    fn may_reap(&self, partitions: &[u32], asked: Instant) -> bool {
        self.peer
            .upgrade()
            .is_some_and(|p| p.may_reap(partitions, asked))
    }
}

impl Peer {
    /// A peer's request for one of this node's vnodes (on a blocking
    /// thread: vnodes read and write the disk).
    pub(crate) fn serve(&self, from: &str, b: &bytes::Bytes) {
        if let Some((route, request)) = decode_request(from, b) {
            self.serve_decoded(from, route, request);
        }
    }

    pub(crate) fn serve_decoded(&self, from: &str, route: Route, request: VnodeRequest) {
        if matches!(request, VnodeRequest::Coordinate { .. }) {
            // Taken: the coordinator must not ask another replica to make
            // this version if this node dies from here on. (Were this
            // node killed after making the version but before this left
            // its send queue, the coordinator would have it made twice,
            // two versions of one write, as Riak's forwarded puts can.)
            self.reply_to(from, route, &VnodeReply::Accepted);
        }
        let reply = self.node.vnodes().serve(route.partition, request);
        self.reply_to(from, route, &reply);
    }

    /// Serves a small request at once if it is a read the vnode answers
    /// without waiting (so on the inbox, with no thread hand-off); else
    /// gives it back, decoded, to be served where blocking is allowed.
    pub(crate) fn try_serve(&self, from: &str, b: &bytes::Bytes) -> Option<(Route, VnodeRequest)> {
        let (route, request) = decode_request(from, b)?;
        match self.node.vnodes().try_serve(route.partition, &request) {
            Some(reply) => {
                self.reply_to(from, route, &reply);
                None
            }
            None => Some((route, request)),
        }
    }

    fn reply_to(&self, from: &str, route: Route, reply: &VnodeReply) {
        let msg = wire::encode_reply_after(&crate::msg::vnode_prefix(true), route, reply);
        let addr = self.lock().addrs.get(from).copied();
        if let Some(addr) = addr {
            self.send_bytes(addr, lane_for(msg.len()), msg);
        }
    }

    /// Answers a peer's request with `Failed(Busy)` without doing it (an
    /// overloaded or expired queue).
    pub(crate) fn refuse(&self, from: &str, b: &bytes::Bytes, why: &str) {
        let Ok((route, _)) = wire::decode_request_shared(b) else {
            return;
        };
        self.reply_to(from, route, &VnodeReply::Failed(KvError::Busy(why.into())));
    }

    /// A reply to a request this node sent.
    pub(crate) fn reply_in(&self, b: &bytes::Bytes) {
        let (route, reply) = match wire::decode_reply_shared(b) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "a malformed vnode reply was dropped");
                return;
            }
        };
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if let VnodeReply::Accepted = reply {
            if let Some(p) = pending.get_mut(&route.request_id) {
                p.accepted = Some(true);
            }
            return;
        }
        let p = pending.remove(&route.request_id);
        drop(pending);
        // A reply after its coordinator gave up finds nothing waiting.
        if let Some(p) = p {
            let _ = p.tx.send((p.tag, reply));
        }
    }

    /// Requests to a node now unreachable fail at once (their
    /// coordinators move on), and requests whose coordinator stopped
    /// waiting long ago are forgotten.
    pub(crate) fn fail_pending_of_unreachable(&self) {
        let now = self.now();
        let reachable = self.lock().detector.reachable(now);
        let timeout = self.node.config().request_timeout;
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let gone: Vec<u64> = pending
            .iter()
            .filter(|(_, p)| {
                !reachable.contains(&p.node) || p.tx.is_closed() || p.sent.elapsed() > timeout
            })
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            if let Some(p) = pending.remove(&id) {
                let _ = p.tx.send((p.tag, unreachable(&p.node, p.may_have_run())));
            }
        }
    }
}
