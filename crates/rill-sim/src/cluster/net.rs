//! The simulated network: messages between nodes are delayed (so they
//! reorder), lost and partitioned, and cross as the bytes of the wire
//! formats; a node's message to itself is a call. Delivery hands a
//! request to the vnode asked and routes its reply by its tag.

use super::{ClusterSim, Target};
use rill_node::vnode::msg::{VnodeReply, VnodeRequest};

/// Why a request is sent, so its reply finds its way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tag {
    /// A replica's answer to get `op`, as replica `idx`.
    Get { op: u64, idx: usize },
    /// A replica's answer to attempt `attempt` of put `op`, as replica
    /// `idx` (0: its coordinator).
    Put { op: u64, attempt: u32, idx: usize },
    /// Side 0 (the exchange's own vnode) or 1 of exchange `id`.
    Exchange { id: u64, side: usize },
    /// Nothing waits (read repair).
    None,
}

pub(super) enum Body {
    Request {
        tag: Tag,
        partition: u32,
        request: VnodeRequest,
    },
    Reply {
        tag: Tag,
        reply: VnodeReply,
    },
    /// A handoff message, as `rill-handoff`'s codec writes it.
    Handoff(Vec<u8>),
    /// A node's cluster state, as `rill-cluster`'s codec writes it.
    Gossip(Vec<u8>),
    /// A node's holdings report, as `rill-peer`'s ping carries it.
    Holdings {
        age_ms: u64,
        partitions: Vec<u32>,
    },
}

/// A message on its way; the queue orders them by (due tick, sequence).
pub(super) struct Envelope {
    from: usize,
    to: usize,
    body: Body,
}

impl Envelope {
    /// A holdings ping, sent every few ticks for as long as a node runs.
    pub(super) fn is_ping(&self) -> bool {
        matches!(self.body, Body::Holdings { .. })
    }
}

/// `body` as another node reads it: encoded as `rill-node`'s wire
/// carries vnode messages, and decoded.
fn through_wire(body: Body) -> Body {
    use rill_node::wire::{decode_reply, decode_request, encode_reply, encode_request, Route};
    let route = Route {
        request_id: 0,
        partition: 0,
    };
    match body {
        Body::Request {
            tag,
            partition,
            request,
        } => {
            let bytes = encode_request(route, &request);
            let (_, request) = decode_request(&bytes).expect("a request decodes");
            Body::Request {
                tag,
                partition,
                request,
            }
        }
        Body::Reply { tag, reply } => {
            let bytes = encode_reply(route, &reply);
            let (_, reply) = decode_reply(&bytes).expect("a reply decodes");
            Body::Reply { tag, reply }
        }
        body @ (Body::Handoff(_) | Body::Gossip(_) | Body::Holdings { .. }) => body,
    }
}

impl ClusterSim {
    /// Sends `body` from `from` to `to`: lost (`drop_per_mille`, or the
    /// two cannot reach each other) or delivered after 0 to
    /// `max_delay_ticks` ticks. A node's message to itself is a call:
    /// never lost, delivered at the next delivery.
    pub(super) fn send(&mut self, from: usize, to: usize, body: Body) {
        self.send_after(from, to, body, 0);
    }

    pub(super) fn send_after(&mut self, from: usize, to: usize, body: Body, wait: u64) {
        let (delay, body) = if from == to {
            (0, body)
        } else {
            if self.rng.chance(self.cfg.drop_per_mille) || !self.reachable(from, to) {
                return;
            }
            (
                self.rng.below(self.cfg.max_delay_ticks + 1),
                through_wire(body),
            )
        };
        self.seq += 1;
        self.net.insert(
            (self.now + delay + wait, self.seq),
            Envelope { from, to, body },
        );
    }

    pub(super) fn ask(&mut self, from: usize, to: Target, tag: Tag, request: VnodeRequest) {
        let (node, partition, _) = to;
        let body = Body::Request {
            tag,
            partition,
            request,
        };
        self.send(from, node, body);
    }

    pub(super) fn deliver(&mut self) {
        while self
            .net
            .first_key_value()
            .is_some_and(|((at, _), _)| *at <= self.now)
        {
            let (_, env) = self.net.pop_first().expect("looked at");
            // A message in flight to or from a node that stopped is lost
            // with its connection.
            if !self.nodes[env.to].up || !self.nodes[env.from].up {
                continue;
            }
            match env.body {
                Body::Request {
                    tag,
                    partition,
                    request,
                } => {
                    if let Tag::Put { idx: 0, .. } = tag {
                        // A coordinator answers that it took the request
                        // before it carries it out.
                        let reply = VnodeReply::Accepted;
                        self.send(env.to, env.from, Body::Reply { tag, reply });
                    }
                    let reply = self.execute(env.to, partition, tag, request);
                    if tag != Tag::None {
                        self.send(env.to, env.from, Body::Reply { tag, reply });
                    }
                }
                Body::Reply { tag, reply } => self.replied(env.to, tag, reply),
                Body::Handoff(bytes) => self.handoff_in(env.to, &bytes),
                Body::Gossip(bytes) => self.gossip_in(env.to, env.from, &bytes),
                Body::Holdings { age_ms, partitions } => {
                    self.holdings_in(env.to, env.from, age_ms, partitions)
                }
            }
        }
    }

    fn replied(&mut self, at: usize, tag: Tag, reply: VnodeReply) {
        match tag {
            Tag::Get { op, idx } => self.get_replied(at, op, idx, reply),
            Tag::Put { op, attempt, idx } => self.put_replied(at, op, attempt, idx, reply),
            Tag::Exchange { id, side } => self.exchange_replied(id, side, reply),
            Tag::None => {}
        }
    }
}
