//! Handoff in the simulation, planned by `rill-handoff`'s planner and
//! carried by its machines, as the node's runtime drives them. Each round
//! of a node (`plan_round` over its own cluster state) starts ownership
//! transfers of the ring from it and hinted handoff of partitions it
//! holds without owning them. A `Sender`'s batches are read by a
//! `rill_handoff::pass` through the vnode's own handoff reader, as on a
//! node: the partition's keys a chunk at a time (chunks of three here, so
//! their seams are crossed often) in the order of their wire encoding
//! (the cursor is the last key sent), and a record of what was sent (a
//! hash of each key and of its clock); the receiving node runs a `Receiver` per session,
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
use rill_handoff::pass::{count_unsent, drop_sent, Pass, SentRecord};
use rill_handoff::plan::{
    after_listing, after_sent, may_drop_hinted, may_receive, plan_round, AfterSent, Kind, Local,
};
use rill_handoff::{
    Cursor, Receiver, ReceiverConfig, ReceiverEffect, Sender, SenderConfig, SenderEffect,
    ToReceiver, TransferId,
};
use rill_node::wire;
use std::collections::BTreeMap;

/// Keys a handoff pass lists at a time, at least.
const CHUNK: usize = 3;

/// Simulated milliseconds a tick.
pub(super) const TICK_MS: u64 = 10;

/// One partition being sent.
pub(super) struct Out {
    pub from: usize,
    to: usize,
    kind: Kind,
    /// Top-up passes before this one.
    topups: u32,
    sender: Sender,
    /// Reads the batches and records what was sent.
    pass: Pass,
}

/// A done ownership transfer and the record of what it sent.
type Retained = (Transfer, SentRecord);

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
    pub(super) fn now_ms(&self) -> u64 {
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
        let holding = self.look_at_holdings(x);
        let h = &self.handoffs;
        let local = Local {
            holding: Some(holding),
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
            let keys = self.nodes[x]
                .vnodes()
                .keys(s.partition)
                .expect("a store of the simulated disk lists");
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
            self.start_out(x, s.partition, s.kind, to, SentRecord::default(), 0);
        }
    }

    /// Node `x` removes what it handed off of `p`, each key only if still
    /// as sent (the vnode's handoff drop); returns how many went.
    fn drop_sent(&mut self, x: usize, p: u32, sent: &SentRecord) -> usize {
        let ignoring;
        let sent = if self.cfg.faults.drop_ignores_clocks {
            // The fault: every key sent goes, changed since or not.
            ignoring = self.as_now(x, p, |k| sent.clock_of(k).is_some());
            &ignoring
        } else {
            sent
        };
        let reader = if self.cfg.faults.keep_lost_epochs {
            self.nodes[x].vnodes().reader_keeping_epochs(p)
        } else {
            self.nodes[x].vnodes().reader(p)
        };
        let dropped = drop_sent(&reader, sent, CHUNK).expect("a simulated disk drops");
        self.counts.handed_off += dropped;
        dropped
    }

    /// The `drop_hinted_data` fault: a fallback drops what it holds.
    /// It drops each key as handoff's drop would, as if all were sent.
    fn drop_all(&mut self, x: usize, p: u32) {
        let everything = self.as_now(x, p, |_| true);
        let reader = self.nodes[x].vnodes().reader(p);
        drop_sent(&reader, &everything, CHUNK).expect("a simulated disk drops");
    }

    /// A record of the keys of `p` on node `x` that `keep` keeps, as they
    /// are now: handoff's drop of it removes them whatever was sent.
    fn as_now(&self, x: usize, p: u32, keep: impl Fn(&[u8]) -> bool) -> SentRecord {
        let reader = self.nodes[x].vnodes().reader(p);
        let mut pass = Pass::new(CHUNK, SentRecord::default(), false, false);
        let mut record = SentRecord::default();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let b = pass
                .read(&reader, after.as_deref(), usize::MAX, usize::MAX)
                .expect("a simulated disk reads");
            for (item, clock) in b.items.iter().zip(&b.clocks) {
                if keep(&item.key) {
                    record.insert(&item.key, *clock);
                }
            }
            if !b.more {
                break;
            }
            after = b.cursor;
        }
        record.seal();
        record
    }

    fn start_out(
        &mut self,
        x: usize,
        partition: u32,
        kind: Kind,
        to: usize,
        sent: SentRecord,
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
                pass: Pass::new(CHUNK, sent, topups > 0, true),
            },
        );
        self.drive_out(&tid, effects);
    }

    /// An ownership transfer's receiver has the partition: what was sent
    /// is retained until the switch, and the transfer is marked done in
    /// the sender's state (gossip carries it to the claimant).
    fn ownership_done(&mut self, x: usize, t: &Transfer, sent: SentRecord) {
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
                    max_bytes,
                } => {
                    let now = self.now_ms();
                    let reader = self.nodes[from].vnodes().reader(tid.partition);
                    let o = self.handoffs.out.get_mut(tid).expect("present");
                    let b = o
                        .pass
                        .read(&reader, after.as_deref(), max_items, max_bytes)
                        .expect("a simulated disk reads");
                    if o.sender.session() == session {
                        o.pass.record(&b);
                    }
                    let next = o.sender.read(session, b.items, b.cursor, b.more, now);
                    self.drive_out(tid, next);
                }
                SenderEffect::Done => {
                    let o = self.handoffs.out.remove(tid).expect("present");
                    let p = tid.partition;
                    let sent = o.pass.into_sent();
                    match after_sent(o.kind, o.topups) {
                        AfterSent::ListUnsent(t) => {
                            let reader = self.nodes[from].vnodes().reader(p);
                            let unsent = count_unsent(&reader, &sent, CHUNK)
                                .expect("a simulated disk lists");
                            if after_listing(unsent) {
                                self.log(format!("{}: {p} tops up {unsent} keys", tid.from));
                                let kind = Kind::Ownership(t);
                                self.start_out(from, p, kind, to, sent, o.topups + 1);
                            } else {
                                self.ownership_done(from, &t, sent);
                            }
                        }
                        AfterSent::MarkDone(t) => self.ownership_done(from, &t, sent),
                        AfterSent::DropSent => {
                            let ignore = self.cfg.faults.hinted_drop_ignores_ring;
                            if !ignore && !may_drop_hinted(&self.nodes[from].state, &tid.from, p) {
                                self.log(format!(
                                    "{} handed {p} to {}; keeps it (moving, or its own)",
                                    tid.from,
                                    node_name(to)
                                ));
                                return;
                            }
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
                let ignore = self.cfg.faults.hinted_drop_ignores_ring;
                if !ignore && !may_receive(&self.nodes[at].state, &node_name(at), &tid) {
                    return;
                }
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
                    let items = items
                        .into_iter()
                        .map(|i| {
                            let key = wire::decode_key(&i.key).expect("a key the sender encoded");
                            let object = rill_node::decode_object(&i.value)
                                .expect("an object the sender encoded");
                            (key, object)
                        })
                        .collect();
                    // Stored and made durable before the cursor moves
                    // and the batch is acknowledged, as a node does.
                    self.nodes[at]
                        .vnodes()
                        .handoff_store(tid.partition, items)
                        .expect("a handoff batch stored on the simulated disk");
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
