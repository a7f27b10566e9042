//! Hinted handoff in the simulation, by `rill-handoff`'s machines as the
//! node's runtime drives them: a node's vnode of a partition it does not
//! own runs a `Sender` to the owner once reachable, over a snapshot of
//! its keys in the order of their wire encoding (the cursor is the last
//! key sent); the owner runs a `Receiver` per session, merges each batch
//! into its vnode (siblings kept), keeps the cursor after it (kept across
//! the owner's stops) and acknowledges; a new session resumes after that
//! cursor. When the sender is done, the vnode drops what it sent by its
//! own handoff drop (epochs retired first, each key only if unchanged).
//! Messages cross as the bytes of `rill-handoff`'s codec.

use super::net::Body;
use super::ClusterSim;
use rill_handoff::codec::HandoffMsg;
use rill_handoff::{
    Cursor, Item, Receiver, ReceiverConfig, ReceiverEffect, Sender, SenderConfig, SenderEffect,
    ToReceiver, TransferId,
};
use rill_node::{wire, BKey};
use rill_object::VClock;
use std::collections::BTreeMap;

/// Simulated milliseconds a tick.
const TICK_MS: u64 = 10;

/// One partition being sent.
pub(super) struct Out {
    pub from: usize,
    to: usize,
    sender: Sender,
    /// The keys to send, by their encoding.
    keys: Vec<(Vec<u8>, BKey)>,
    /// What was read and sent, with the clock it had.
    sent: BTreeMap<Vec<u8>, (BKey, VClock)>,
}

/// The handoff state of the cluster: senders, receivers, and the cursors
/// receivers keep (on their node's disk).
#[derive(Default)]
pub(super) struct Handoffs {
    pub out: BTreeMap<TransferId, Out>,
    /// Receivers by (receiving node, transfer).
    incoming: BTreeMap<(usize, TransferId), Receiver>,
    cursors: BTreeMap<(usize, TransferId), Cursor>,
}

impl Handoffs {
    pub fn node_stopped(&mut self, x: usize) {
        self.out.retain(|_, o| o.from != x);
        self.incoming.retain(|(at, _), _| *at != x);
    }

    pub fn idle(&self) -> bool {
        self.out.is_empty() && self.incoming.is_empty()
    }
}

fn sender_config(timeout_ticks: u64) -> SenderConfig {
    SenderConfig {
        batch_items: 2,
        batch_bytes: 1 << 20,
        window: 2,
        ack_timeout_ms: timeout_ticks * TICK_MS,
        keepalive_ms: timeout_ticks * TICK_MS / 3,
        max_retries: 3,
    }
}

impl ClusterSim {
    fn now_ms(&self) -> u64 {
        self.now * TICK_MS
    }

    /// Node `x` starts a transfer of every partition it holds data of but
    /// does not own, to owners it can reach (one at a time a partition).
    pub(super) fn hand_off(&mut self, x: usize) {
        for p in 0..self.cfg.ring_size {
            let owner = self.owner(p);
            let tid = TransferId {
                partition: p,
                id: 0,
                from: super::node_name(x),
            };
            if owner == x || self.handoffs.out.contains_key(&tid) || !self.reachable(x, owner) {
                continue;
            }
            let keys = self.nodes[x].vnodes.keys(p).expect("a memory store lists");
            if keys.is_empty() {
                continue;
            }
            if self.cfg.faults.drop_hinted_data {
                let all: Vec<(BKey, VClock)> = keys
                    .into_iter()
                    .filter_map(|k| {
                        let o = self.nodes[x].vnodes.get(p, &k).ok()??;
                        Some((k, o.clock))
                    })
                    .collect();
                self.nodes[x]
                    .vnodes
                    .handed_off(p, &all)
                    .expect("a memory store drops");
                continue;
            }
            let mut keys: Vec<(Vec<u8>, BKey)> = keys
                .into_iter()
                .map(|k| (wire::encode_key(&k), k))
                .collect();
            keys.sort();
            self.log(format!(
                "{} hands {} keys of {p} to {}",
                super::node_name(x),
                keys.len(),
                super::node_name(owner)
            ));
            let (sender, effects) = Sender::start(
                sender_config(self.cfg.timeout_ticks),
                tid.clone(),
                self.now_ms(),
            );
            self.handoffs.out.insert(
                tid.clone(),
                Out {
                    from: x,
                    to: owner,
                    sender,
                    keys,
                    sent: BTreeMap::new(),
                },
            );
            self.drive_out(&tid, effects);
        }
    }

    fn send_handoff(&mut self, from: usize, to: usize, msg: HandoffMsg) {
        self.send(from, to, Body::Handoff(msg.encode()));
    }

    fn drive_out(&mut self, tid: &TransferId, effects: Vec<SenderEffect>) {
        for e in effects {
            let Some(o) = self.handoffs.out.get(tid) else {
                return;
            };
            let (from, to) = (o.from, o.to);
            match e {
                SenderEffect::Send(m) => {
                    self.send_handoff(from, to, HandoffMsg::ToReceiver(tid.clone(), m))
                }
                SenderEffect::Read {
                    session,
                    after,
                    max_items,
                    ..
                } => {
                    let start = after.as_ref().map_or(0, |c| {
                        o.keys
                            .partition_point(|(k, _)| k.as_slice() <= c.as_slice())
                    });
                    let end = (start + max_items).min(o.keys.len());
                    let mut items = Vec::new();
                    let mut read = Vec::new();
                    for (enc, k) in &o.keys[start..end] {
                        let stored = self.nodes[from]
                            .vnodes
                            .get(tid.partition, k)
                            .expect("a memory store reads");
                        if let Some(obj) = stored {
                            read.push((enc.clone(), k.clone(), obj.clock.clone()));
                            items.push(Item {
                                key: enc.clone(),
                                value: rill_node::encode_object(&obj),
                            });
                        }
                    }
                    let cursor = (end > start).then(|| o.keys[end - 1].0.clone());
                    let more = end < o.keys.len();
                    let now = self.now_ms();
                    let o = self.handoffs.out.get_mut(tid).expect("present");
                    for (enc, k, c) in read {
                        o.sent.insert(enc, (k, c));
                    }
                    let next = o.sender.read(session, items, cursor, more, now);
                    self.drive_out(tid, next);
                }
                SenderEffect::Done => {
                    let o = self.handoffs.out.remove(tid).expect("present");
                    let sent: Vec<(BKey, VClock)> = o.sent.into_values().collect();
                    let dropped = self.nodes[from]
                        .vnodes
                        .handed_off(tid.partition, &sent)
                        .expect("a memory store drops");
                    self.counts.handed_off += dropped;
                    self.log(format!(
                        "{} handed {} of {} to {}",
                        tid.from,
                        dropped,
                        tid.partition,
                        super::node_name(to)
                    ));
                }
                SenderEffect::Failed(why) => {
                    self.handoffs.out.remove(tid);
                    self.log(format!(
                        "{}'s handoff of {} failed: {why}",
                        tid.from, tid.partition
                    ));
                }
            }
        }
    }

    /// A handoff message arrives at node `at`.
    pub(super) fn handoff_in(&mut self, at: usize, bytes: &[u8]) {
        let msg = HandoffMsg::decode(bytes).expect("the codec reads what it wrote");
        let now = self.now_ms();
        match msg {
            HandoffMsg::ToReceiver(tid, ToReceiver::Open { session, .. }) => {
                let cursor = self.handoffs.cursors.get(&(at, tid.clone())).cloned();
                let (r, effects) = Receiver::open(
                    ReceiverConfig {
                        idle_timeout_ms: 2 * self.cfg.timeout_ticks * TICK_MS,
                    },
                    tid.clone(),
                    session,
                    cursor,
                    now,
                );
                self.handoffs.incoming.insert((at, tid.clone()), r);
                self.drive_in(at, &tid, effects);
            }
            HandoffMsg::ToReceiver(tid, m) => {
                let Some(r) = self.handoffs.incoming.get_mut(&(at, tid.clone())) else {
                    return;
                };
                let effects = r.receive(m, now);
                self.drive_in(at, &tid, effects);
            }
            HandoffMsg::ToSender(tid, m) => {
                let Some(o) = self.handoffs.out.get_mut(&tid) else {
                    return;
                };
                let effects = o.sender.receive(m, now);
                self.drive_out(&tid, effects);
            }
        }
    }

    fn drive_in(&mut self, at: usize, tid: &TransferId, effects: Vec<ReceiverEffect>) {
        let from = self.index_of(&tid.from);
        for e in effects {
            match e {
                ReceiverEffect::Send(m) => {
                    self.send_handoff(at, from, HandoffMsg::ToSender(tid.clone(), m))
                }
                ReceiverEffect::Store { seq, items, cursor } => {
                    let now_ms = self.now_ms();
                    for i in items {
                        let key = wire::decode_key(&i.key).expect("a key the sender encoded");
                        let object = rill_node::decode_object(&i.value)
                            .expect("an object the sender encoded");
                        let request = rill_node::vnode::msg::VnodeRequest::Merge {
                            key,
                            object,
                            allow_mult: true,
                            prune: None,
                            return_object: false,
                        };
                        self.nodes[at].vnodes.handle(tid.partition, request);
                    }
                    self.handoffs.cursors.insert((at, tid.clone()), cursor);
                    let Some(r) = self.handoffs.incoming.get_mut(&(at, tid.clone())) else {
                        return;
                    };
                    let next = r.stored(seq, now_ms);
                    self.drive_in(at, tid, next);
                }
                ReceiverEffect::Finished => {
                    self.handoffs.cursors.remove(&(at, tid.clone()));
                }
                ReceiverEffect::Abort(_) => {
                    self.handoffs.incoming.remove(&(at, tid.clone()));
                }
            }
        }
        if self
            .handoffs
            .incoming
            .get(&(at, tid.clone()))
            .is_some_and(|r| r.is_over())
        {
            self.handoffs.incoming.remove(&(at, tid.clone()));
        }
    }

    /// Time passes for every sender and receiver.
    pub(super) fn handoff_ticks(&mut self) {
        let now = self.now_ms();
        let tids: Vec<TransferId> = self.handoffs.out.keys().cloned().collect();
        for tid in tids {
            if let Some(o) = self.handoffs.out.get_mut(&tid) {
                let effects = o.sender.tick(now);
                self.drive_out(&tid, effects);
            }
        }
        let keys: Vec<(usize, TransferId)> = self.handoffs.incoming.keys().cloned().collect();
        for (at, tid) in keys {
            if let Some(r) = self.handoffs.incoming.get_mut(&(at, tid.clone())) {
                let effects = r.tick(now);
                self.drive_in(at, &tid, effects);
            }
        }
    }
}
