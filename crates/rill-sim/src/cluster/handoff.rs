//! Handoff in the simulation, planned by `rill-handoff`'s planner and
//! carried by its machines, as the node's runtime drives them. Each round
//! of a node (`plan_round` over its own cluster state) starts ownership
//! transfers of the ring from it and hinted handoff of partitions it
//! holds without owning them. A `Sender` goes over a snapshot of the
//! partition's keys in the order of their wire encoding (the cursor is
//! the last key sent); the receiving node runs a `Receiver` per session,
//! merges each batch into its vnode (siblings kept), keeps the cursor
//! after it (across its stops) and acknowledges; a new session resumes
//! after that cursor. When the sender is done (`after_sent`): a hinted
//! partition's vnode drops what it sent by its own handoff drop (epochs
//! retired first, each key only if unchanged); an ownership transfer
//! sends keys written since in top-up passes, then is marked done in the
//! node's state and what it sent is retained until the node's ring names
//! the new owner (the round's `release`). Messages cross as the bytes of
//! `rill-handoff`'s codec.

use super::net::Body;
use super::{node_name, ClusterSim};
use rill_cluster::Transfer;
use rill_handoff::codec::HandoffMsg;
use rill_handoff::plan::{after_listing, after_sent, plan_round, AfterSent, Kind, Local};
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
    kind: Kind,
    /// Top-up passes before this one.
    topups: u32,
    sender: Sender,
    /// The keys to send, by their encoding.
    keys: Vec<(Vec<u8>, BKey)>,
    /// What was read and sent, with the clock it had.
    sent: BTreeMap<Vec<u8>, (BKey, VClock)>,
}

/// A done ownership transfer and the keys it sent, with their clocks.
type Retained = (Transfer, Vec<(BKey, VClock)>);

/// The handoff state of the cluster: senders, receivers, and the cursors
/// receivers keep (on their node's disk).
#[derive(Default)]
pub(super) struct Handoffs {
    pub out: BTreeMap<TransferId, Out>,
    /// Receivers by (receiving node, transfer).
    incoming: BTreeMap<(usize, TransferId), Receiver>,
    cursors: BTreeMap<(usize, TransferId), Cursor>,
    /// What a node's done ownership transfers sent, by (node,
    /// partition), kept until its ring names the new owner (in memory: a
    /// node that stops forgets it, and hinted handoff carries the rest).
    retained: BTreeMap<(usize, u32), Retained>,
}

impl Handoffs {
    pub fn node_stopped(&mut self, x: usize) {
        self.out.retain(|_, o| o.from != x);
        self.incoming.retain(|(at, _), _| *at != x);
        self.retained.retain(|(at, _), _| *at != x);
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

    /// One handoff round of node `x`, as its planner says: what a switch
    /// made safe to remove goes, and the transfers due start.
    pub(super) fn hand_off(&mut self, x: usize) {
        // A node removed from the cluster hands off what it holds too.
        if !self.nodes[x].joined || !self.nodes[x].up {
            return;
        }
        let name = node_name(x);
        let h = &self.handoffs;
        let local = Local {
            holding: Some(self.holding(x)),
            sending: h
                .out
                .keys()
                .filter(|t| t.from == name)
                .map(|t| t.partition)
                .collect(),
            receiving: h
                .incoming
                .keys()
                .filter(|(at, _)| *at == x)
                .map(|(_, t)| t.partition)
                .collect(),
            retained: h
                .retained
                .iter()
                .filter(|((at, _), _)| *at == x)
                .map(|((_, p), (t, _))| (*p, t.clone()))
                .collect(),
        };
        let plan = plan_round(
            &self.nodes[x].state,
            &name,
            |n| self.reachable(x, self.index_of(n)),
            &local,
        );
        for p in plan.release {
            let Some((_, sent)) = self.handoffs.retained.remove(&(x, p)) else {
                continue;
            };
            let dropped = self.drop_sent(x, p, &sent);
            self.log(format!(
                "{name}: {p} switched owner, {dropped} handed-off keys removed"
            ));
        }
        if !plan.mark_again.is_empty() {
            for t in &plan.mark_again {
                self.nodes[x].state.mark_done(t);
            }
            self.log(format!(
                "{name}: {} transfers marked done again",
                plan.mark_again.len()
            ));
            self.gossip(x);
        }
        for s in plan.start {
            let keys = self.sorted_keys(x, s.partition);
            let to = self.index_of(&s.to);
            if s.kind == Kind::Hinted {
                if keys.is_empty() {
                    continue;
                }
                if self.cfg.faults.drop_hinted_data {
                    self.drop_all(x, s.partition);
                    continue;
                }
            }
            self.log(format!(
                "{name} hands {} keys of {} to {} ({})",
                keys.len(),
                s.partition,
                s.to,
                if s.kind == Kind::Hinted {
                    "hinted"
                } else {
                    "ownership"
                }
            ));
            self.start_out(x, s.partition, s.kind, to, keys, BTreeMap::new(), 0);
        }
    }

    /// The keys node `x` holds of `partition`, in the order of their wire
    /// encoding.
    fn sorted_keys(&self, x: usize, partition: u32) -> Vec<(Vec<u8>, BKey)> {
        let keys = self.nodes[x]
            .vnodes
            .keys(partition)
            .expect("a memory store lists");
        let mut keys: Vec<(Vec<u8>, BKey)> = keys
            .into_iter()
            .map(|k| (wire::encode_key(&k), k))
            .collect();
        keys.sort();
        keys
    }

    /// Node `x` removes what it handed off of `p`, each key only if still
    /// as sent (the vnode's handoff drop); returns how many went.
    fn drop_sent(&mut self, x: usize, p: u32, sent: &[(BKey, VClock)]) -> usize {
        let dropped = self.nodes[x]
            .vnodes
            .handed_off(p, sent)
            .expect("a memory store drops");
        self.counts.handed_off += dropped;
        dropped
    }

    /// The `drop_hinted_data` fault: a fallback drops what it holds.
    fn drop_all(&mut self, x: usize, p: u32) {
        let keys = self.nodes[x].vnodes.keys(p).expect("a memory store lists");
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
    }

    #[allow(clippy::too_many_arguments)]
    fn start_out(
        &mut self,
        x: usize,
        partition: u32,
        kind: Kind,
        to: usize,
        keys: Vec<(Vec<u8>, BKey)>,
        sent: BTreeMap<Vec<u8>, (BKey, VClock)>,
        topups: u32,
    ) {
        let tid = TransferId {
            partition,
            id: kind.id(),
            from: node_name(x),
        };
        if self.handoffs.out.contains_key(&tid) {
            return;
        }
        let (sender, effects) = Sender::start(
            sender_config(self.cfg.timeout_ticks),
            tid.clone(),
            self.now_ms(),
        );
        self.handoffs.out.insert(
            tid.clone(),
            Out {
                from: x,
                to,
                kind,
                topups,
                sender,
                keys,
                sent,
            },
        );
        self.drive_out(&tid, effects);
    }

    /// An ownership transfer's receiver has the partition: what was sent
    /// is retained until the switch, and the transfer is marked done in
    /// the sender's state (gossip carries it to the claimant).
    fn ownership_done(&mut self, x: usize, t: &Transfer, sent: Vec<(BKey, VClock)>) {
        self.handoffs
            .retained
            .insert((x, t.partition), (t.clone(), sent));
        self.nodes[x].state.mark_done(t);
        self.log(format!(
            "{}: transfer of {} to {} done",
            t.from, t.partition, t.to
        ));
        self.gossip(x);
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
                    let p = tid.partition;
                    match after_sent(o.kind, o.topups) {
                        AfterSent::ListUnsent(t) => {
                            let unsent: Vec<(Vec<u8>, BKey)> = self
                                .sorted_keys(from, p)
                                .into_iter()
                                .filter(|(k, _)| !o.sent.contains_key(k))
                                .collect();
                            if after_listing(unsent.len()) {
                                self.log(format!(
                                    "{}: {p} tops up {} keys",
                                    tid.from,
                                    unsent.len()
                                ));
                                let kind = Kind::Ownership(t);
                                self.start_out(from, p, kind, to, unsent, o.sent, o.topups + 1);
                            } else {
                                self.ownership_done(from, &t, o.sent.into_values().collect());
                            }
                        }
                        AfterSent::MarkDone(t) => {
                            self.ownership_done(from, &t, o.sent.into_values().collect())
                        }
                        AfterSent::DropSent => {
                            let sent: Vec<(BKey, VClock)> = o.sent.into_values().collect();
                            let dropped = self.drop_sent(from, p, &sent);
                            self.log(format!(
                                "{} handed {dropped} of {p} to {}",
                                tid.from,
                                node_name(to)
                            ));
                        }
                        // The simulation's operator asks for no repairs.
                        AfterSent::Keep => {}
                    }
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
            // Only an operator's repair asks, and the simulation's does not.
            HandoffMsg::Ask(_) => {}
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
                    let items = if self.cfg.faults.handoff_stores_nothing {
                        Vec::new()
                    } else {
                        items
                    };
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
