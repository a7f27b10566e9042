//! Handoff at run time, over `rill-handoff`'s machines: which partitions
//! this node must hand off, and to whom; reading them in batches from a
//! sorted key snapshot; storing what arrives; removing what was handed
//! off once that is safe.
//!
//! - **Ownership**: a transfer of the ring from this node. When the
//!   receiver has everything, the transfer is marked done in the cluster
//!   state (the claimant then changes the owner); the handed-off keys
//!   stay here until this node sees the new owner, then those still as
//!   they were sent are removed (the node served them until the switch).
//! - **Hinted**: a partition this node does not own holds data (it stood
//!   in for a down owner, or kept writes after an ownership switch):
//!   once the owner is reachable, the data goes to it and what was sent
//!   unchanged is removed.
//!
//! Before anything is removed the vnode retires its epochs (durably), so
//! it never continues an old count. At most `transfer_limit` transfers
//! leave this node at once.

use crate::msg::PeerMsg;
use crate::runtime::Peer;
use rill_cluster::Transfer;
use rill_handoff::codec::HandoffMsg;
use rill_handoff::{
    Item, Receiver, ReceiverConfig, ReceiverEffect, Sender, SenderConfig, SenderEffect, Slots,
    ToReceiver, TransferId,
};
use rill_node::wire;
use rill_node::{Object, VClock};
use rill_transport::Lane;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

type Key = rill_node::BKey;

#[derive(Clone, Debug)]
enum Kind {
    Ownership(Transfer),
    Hinted,
}

struct Out {
    sender: Sender,
    to: String,
    kind: Kind,
    /// The partition's keys when the transfer began, in cursor order.
    keys: Arc<Vec<(Vec<u8>, Key)>>,
    /// Each key read, with the clock it was read with (the latest read).
    sent: BTreeMap<Vec<u8>, (Key, VClock)>,
    /// Which sender this is: a read that completes after the transfer was
    /// restarted belongs to the old one and is dropped.
    gen: u64,
    /// Passes that sent keys the first pass's snapshot did not have.
    topups: u32,
}

struct In {
    receiver: Receiver,
    /// Which receiver this is (an Open replaces it): a store that
    /// completes for an older one acknowledges nothing.
    gen: u64,
}

/// Top-up passes of an ownership transfer at most, before it is marked
/// done anyway (what is left goes by hinted handoff after the switch).
const MAX_TOPUPS: u32 = 3;

/// Progress an operator reads (`rill admin transfers`, `/stats`).
#[derive(Default)]
pub struct HandoffStats {
    pub items_sent: AtomicU64,
    pub items_received: AtomicU64,
    pub completed: AtomicU64,
    pub failed: AtomicU64,
    /// Receivers that resumed after a cursor they had kept.
    pub resumed: AtomicU64,
    /// Partitions this node does not own that held data at the last
    /// check (hinted handoff still to do).
    pub hinted_partitions: AtomicU64,
}

pub(crate) struct Handoffs {
    slots: Slots<TransferId>,
    out: HashMap<TransferId, Out>,
    incoming: HashMap<TransferId, In>,
    /// Ownership transfers done: what to remove once the owner changed.
    retained: BTreeMap<u32, Vec<(Key, VClock)>>,
    next_hinted: u64,
    last_hinted_scan: u64,
    next_gen: u64,
}

impl Handoffs {
    pub fn new(limit: usize) -> Handoffs {
        let base = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_millis() as u64);
        Handoffs {
            slots: Slots::new(limit),
            out: HashMap::new(),
            incoming: HashMap::new(),
            retained: BTreeMap::new(),
            next_hinted: base << 8,
            last_hinted_scan: 0,
            next_gen: 1,
        }
    }
}

/// Handoff settings.
#[derive(Clone, Debug)]
pub struct HandoffConfig {
    /// Riak's `transfer_limit`: transfers leaving a node at once.
    pub transfer_limit: usize,
    pub sender: SenderConfig,
    pub receiver: ReceiverConfig,
    /// How often partitions this node does not own are checked for data.
    pub hinted_scan: Duration,
}

impl Default for HandoffConfig {
    fn default() -> HandoffConfig {
        HandoffConfig {
            transfer_limit: 2,
            sender: SenderConfig {
                ack_timeout_ms: 15_000,
                keepalive_ms: 5_000,
                ..SenderConfig::default()
            },
            receiver: ReceiverConfig {
                idle_timeout_ms: 30_000,
            },
            hinted_scan: Duration::from_secs(5),
        }
    }
}

fn cursor_name(t: &TransferId) -> String {
    let from: String = t.from.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{from}", t.partition, t.id)
}

impl Peer {
    pub(crate) fn handoffs(&self) -> std::sync::MutexGuard<'_, Handoffs> {
        self.handoffs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cursor_path(&self, t: &TransferId) -> std::path::PathBuf {
        self.node
            .config()
            .data_dir
            .join("meta")
            .join("handoff")
            .join(cursor_name(t))
    }

    fn load_cursor(&self, t: &TransferId) -> Option<Vec<u8>> {
        std::fs::read(self.cursor_path(t)).ok()
    }

    fn save_cursor(&self, t: &TransferId, cursor: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        let path = self.cursor_path(t);
        let dir = path.parent().expect("a parent");
        std::fs::create_dir_all(dir)?;
        let tmp = path.with_extension("tmp");
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(cursor)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(dir)?.sync_all()
    }

    fn send_handoff(&self, to: &str, msg: HandoffMsg) {
        let inner = self.lock();
        self.send_to(&inner, to, Lane::Handoff, PeerMsg::Handoff(msg.encode()));
    }

    /// One round of the handoff loop: start what must start, tick what
    /// runs, remove what a switch made safe to remove.
    pub(crate) fn handoff_round(self: &Arc<Self>) {
        let now = self.now();
        let (owners, pending, moving, reachable) = {
            let inner = self.lock();
            let s = &inner.state;
            let pending: Vec<Transfer> = s
                .ring()
                .next
                .iter()
                .filter(|t| !s.is_done(t))
                .cloned()
                .collect();
            // Every partition the ring is moving, its transfer done or not:
            // until the owner switches, neither side hands it anywhere else.
            let moving: std::collections::BTreeSet<u32> =
                s.ring().next.iter().map(|t| t.partition).collect();
            (
                s.owners().to_vec(),
                pending,
                moving,
                inner.detector.reachable(now),
            )
        };
        let up = |n: &str| n == self.me || reachable.iter().any(|r| r == n);
        // Owners changed: what ownership handoffs sent may go.
        let switched: Vec<(u32, Vec<(Key, VClock)>)> = {
            let mut h = self.handoffs();
            let done: Vec<u32> = h
                .retained
                .keys()
                .copied()
                .filter(|p| owners[*p as usize] != self.me)
                .collect();
            done.into_iter()
                .filter_map(|p| h.retained.remove(&p).map(|s| (p, s)))
                .collect()
        };
        for (p, sent) in switched {
            let peer = self.clone();
            self.rt.spawn_blocking(move || match peer.node.handoff_drop(p, &sent) {
                Ok(n) => tracing::info!(partition = p, removed = n, "partition handed off; its data here is removed"),
                Err(e) => tracing::warn!(partition = p, error = %e, "removing handed-off data failed; it will be handed off again"),
            });
        }
        let mut want: Vec<(u32, Kind, String)> = pending
            .iter()
            .filter(|t| t.from == self.me && up(&t.to))
            .map(|t| (t.partition, Kind::Ownership(t.clone()), t.to.clone()))
            .collect();
        let scan = {
            let mut h = self.handoffs();
            let due = now.saturating_sub(h.last_hinted_scan)
                >= self.handoff_cfg.hinted_scan.as_millis() as u64;
            if due {
                h.last_hinted_scan = now;
            }
            due
        };
        if scan {
            let mut held = 0;
            for (p, owner) in owners.iter().enumerate() {
                let p = p as u32;
                if owner == &self.me || !self.node.holds_data(p).unwrap_or(false) {
                    continue;
                }
                held += 1;
                let incoming_here = moving.contains(&p)
                    || self.handoffs().incoming.keys().any(|t| t.partition == p);
                let retained = self.handoffs().retained.contains_key(&p);
                let running = want.iter().any(|(q, _, _)| *q == p);
                if !(incoming_here || retained || running || !up(owner)) {
                    want.push((p, Kind::Hinted, owner.clone()));
                }
            }
            self.handoff_stats
                .hinted_partitions
                .store(held, Ordering::Relaxed);
        }
        for (p, kind, to) in want {
            self.start_out(p, kind, to, now);
        }
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

    fn start_out(self: &Arc<Self>, partition: u32, kind: Kind, to: String, now: u64) {
        self.start_out_with(partition, kind, to, now, None, BTreeMap::new(), 0);
    }

    /// Starts a sender of `partition` over `keys` (all the partition's
    /// when `None`), carrying what earlier passes sent.
    #[allow(clippy::too_many_arguments)]
    fn start_out_with(
        self: &Arc<Self>,
        partition: u32,
        kind: Kind,
        to: String,
        now: u64,
        keys: Option<Vec<(Vec<u8>, Key)>>,
        sent: BTreeMap<Vec<u8>, (Key, VClock)>,
        topups: u32,
    ) {
        let id = {
            let mut h = self.handoffs();
            let running = h.out.iter().any(|(t, _)| t.partition == partition);
            if running {
                return;
            }
            match &kind {
                Kind::Ownership(t) => t.id,
                Kind::Hinted => {
                    h.next_hinted += 1;
                    h.next_hinted
                }
            }
        };
        let tid = TransferId {
            partition,
            id,
            from: self.me.clone(),
        };
        if !self.handoffs().slots.try_acquire(&tid, now) {
            return;
        }
        let listed = match keys {
            Some(k) => Ok(k),
            None => self.node.handoff_keys(partition),
        };
        let keys = match listed {
            Ok(k) => Arc::new(k),
            Err(e) => {
                tracing::warn!(partition, error = %e, "cannot list a partition for handoff");
                self.handoffs().slots.release(&tid);
                return;
            }
        };
        tracing::info!(partition, to = %to, keys = keys.len(), kind = ?kind, "handoff starts");
        let (sender, effects) = Sender::start(self.handoff_cfg.sender.clone(), tid.clone(), now);
        {
            let mut h = self.handoffs();
            let gen = h.next_gen;
            h.next_gen += 1;
            h.out.insert(
                tid.clone(),
                Out {
                    sender,
                    to,
                    kind,
                    keys,
                    sent,
                    gen,
                    topups,
                },
            );
        }
        self.drive_out(&tid, effects);
    }

    fn drive_out(self: &Arc<Self>, tid: &TransferId, effects: Vec<SenderEffect>) {
        for e in effects {
            match e {
                SenderEffect::Send(m) => {
                    let to = match self.handoffs().out.get(tid) {
                        Some(o) => o.to.clone(),
                        None => return,
                    };
                    self.send_handoff(&to, HandoffMsg::ToReceiver(tid.clone(), m));
                }
                SenderEffect::Read {
                    session,
                    after,
                    max_items,
                    max_bytes,
                } => {
                    let Some((keys, gen)) = self
                        .handoffs()
                        .out
                        .get(tid)
                        .map(|o| (o.keys.clone(), o.gen))
                    else {
                        return;
                    };
                    let peer = self.clone();
                    let tid = tid.clone();
                    self.rt.spawn_blocking(move || {
                        let start = after.as_ref().map_or(0, |c| {
                            keys.partition_point(|(k, _)| k.as_slice() <= c.as_slice())
                        });
                        let mut items = Vec::new();
                        let mut read = Vec::new();
                        let mut bytes = 0usize;
                        let mut end = start;
                        let mut failed = None;
                        while end < keys.len()
                            && items.len() < max_items
                            && (bytes < max_bytes || items.is_empty())
                        {
                            let (enc, key) = &keys[end];
                            end += 1;
                            match peer
                                .node
                                .handoff_read(tid.partition, std::slice::from_ref(key))
                            {
                                Ok(found) => {
                                    for (k, o) in found {
                                        let value = rill_node::encode_object(&o);
                                        bytes += enc.len() + value.len();
                                        read.push((enc.clone(), k, o.clock.clone()));
                                        items.push(Item {
                                            key: enc.clone(),
                                            value,
                                        });
                                    }
                                }
                                Err(e) => {
                                    failed = Some(e.to_string());
                                    break;
                                }
                            }
                        }
                        let now = peer.now();
                        let effects = {
                            let mut h = peer.handoffs();
                            let Some(o) = h.out.get_mut(&tid).filter(|o| o.gen == gen) else {
                                return;
                            };
                            match failed {
                                Some(why) => o.sender.read_failed(session, &why, now),
                                None => {
                                    for (enc, k, c) in read {
                                        o.sent.insert(enc, (k, c));
                                    }
                                    let cursor = (end > start).then(|| keys[end - 1].0.clone());
                                    let n = items.len() as u64;
                                    let e = o.sender.read(
                                        session,
                                        items,
                                        cursor,
                                        end < keys.len(),
                                        now,
                                    );
                                    peer.handoff_stats
                                        .items_sent
                                        .fetch_add(n, Ordering::Relaxed);
                                    e
                                }
                            }
                        };
                        peer.drive_out(&tid, effects);
                    });
                }
                SenderEffect::Done => self.out_done(tid),
                SenderEffect::Failed(why) => {
                    let o = {
                        let mut h = self.handoffs();
                        h.slots.release(tid);
                        h.out.remove(tid)
                    };
                    self.handoff_stats.failed.fetch_add(1, Ordering::Relaxed);
                    if let Some(o) = o {
                        tracing::warn!(partition = tid.partition, to = %o.to, why, "handoff failed; it will be tried again");
                    }
                }
            }
        }
    }

    fn out_done(self: &Arc<Self>, tid: &TransferId) {
        let Some(o) = ({
            let mut h = self.handoffs();
            h.slots.release(tid);
            h.out.remove(tid)
        }) else {
            return;
        };
        self.handoff_stats.completed.fetch_add(1, Ordering::Relaxed);
        tracing::info!(partition = tid.partition, to = %o.to, items = o.sender.items_sent, "handoff complete");
        match o.kind {
            Kind::Ownership(t) if o.topups < MAX_TOPUPS => {
                // Keys the snapshot did not have (written since, on this
                // node only) go in a top-up pass before the transfer is
                // marked done. The receiver removed its cursor when it
                // finished, so the pass starts from its first key.
                let peer = self.clone();
                let tid = tid.clone();
                let sent_map = o.sent;
                let (to, topups) = (o.to, o.topups);
                self.rt.spawn_blocking(move || {
                    let unsent: Vec<(Vec<u8>, Key)> = match peer.node.handoff_keys(tid.partition) {
                        Ok(all) => all.into_iter().filter(|(k, _)| !sent_map.contains_key(k)).collect(),
                        Err(e) => {
                            tracing::warn!(partition = tid.partition, error = %e, "cannot list a partition after its handoff; it will be handed off again");
                            return;
                        }
                    };
                    if unsent.is_empty() {
                        peer.ownership_done(&t, sent_map.into_values().collect());
                    } else {
                        tracing::info!(partition = tid.partition, keys = unsent.len(), "handoff tops up keys written during it");
                        let now = peer.now();
                        peer.start_out_with(tid.partition, Kind::Ownership(t), to, now, Some(unsent), sent_map, topups + 1);
                    }
                });
            }
            Kind::Ownership(t) => {
                self.ownership_done(&t, o.sent.into_values().collect());
            }
            Kind::Hinted => {
                let sent: Vec<(Key, VClock)> = o.sent.into_values().collect();
                let peer = self.clone();
                let p = tid.partition;
                self.rt.spawn_blocking(move || {
                    if let Err(e) = peer.node.handoff_drop(p, &sent) {
                        tracing::warn!(partition = p, error = %e, "removing handed-off data failed; it will be handed off again");
                    }
                });
            }
        }
    }

    /// The receiver has the partition: keep what was sent until the owner
    /// switches, and mark the transfer done.
    fn ownership_done(self: &Arc<Self>, t: &Transfer, sent: Vec<(Key, VClock)>) {
        self.handoffs().retained.insert(t.partition, sent);
        let mut inner = self.lock();
        inner.state.mark_done(t);
        if let Err(e) = self.changed(&mut inner) {
            tracing::error!(error = %e, "a transfer is done but the cluster state was not kept");
        }
    }

    /// A handoff message from a peer.
    pub(crate) fn handoff_in(self: &Arc<Self>, from: &str, b: &[u8]) {
        let msg = match HandoffMsg::decode(b) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(from, error = %e, "a malformed handoff message was dropped");
                return;
            }
        };
        let now = self.now();
        match msg {
            HandoffMsg::ToReceiver(tid, ToReceiver::Open { session, .. }) => {
                if tid.from != from {
                    tracing::warn!(from, claimed = %tid.from, "a handoff opened in another node's name was refused");
                    return;
                }
                let cursor = self.load_cursor(&tid);
                if cursor.is_some() {
                    self.handoff_stats.resumed.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(partition = tid.partition, from = %tid.from, "handoff resumes after the last batch stored here");
                }
                let (receiver, effects) = Receiver::open(
                    self.handoff_cfg.receiver.clone(),
                    tid.clone(),
                    session,
                    cursor,
                    now,
                );
                {
                    let mut h = self.handoffs();
                    let gen = h.next_gen;
                    h.next_gen += 1;
                    h.incoming.insert(tid.clone(), In { receiver, gen });
                }
                self.drive_in(&tid, effects);
            }
            HandoffMsg::ToReceiver(tid, m) => {
                let effects = match self.handoffs().incoming.get_mut(&tid) {
                    Some(i) => i.receiver.receive(m, now),
                    None => return,
                };
                self.drive_in(&tid, effects);
            }
            HandoffMsg::ToSender(tid, m) => {
                let effects = match self.handoffs().out.get_mut(&tid) {
                    Some(o) => o.sender.receive(m, now),
                    None => return,
                };
                self.handoffs().slots.touch(&tid, now);
                self.drive_out(&tid, effects);
            }
        }
    }

    fn drive_in(self: &Arc<Self>, tid: &TransferId, effects: Vec<ReceiverEffect>) {
        for e in effects {
            match e {
                ReceiverEffect::Send(m) => {
                    self.send_handoff(&tid.from, HandoffMsg::ToSender(tid.clone(), m))
                }
                ReceiverEffect::Store { seq, items, cursor } => {
                    let peer = self.clone();
                    let tid = tid.clone();
                    let Some(gen) = self.handoffs().incoming.get(&tid).map(|i| i.gen) else {
                        return;
                    };
                    self.rt.spawn_blocking(move || {
                        // One store at a time: a receiver replaced by a new
                        // session never writes a cursor past the new one's.
                        let _one = peer.handoff_store.lock().unwrap_or_else(|e| e.into_inner());
                        let current = |peer: &Peer| {
                            peer.handoffs().incoming.get(&tid).is_some_and(|i| i.gen == gen)
                        };
                        if !current(&peer) {
                            return;
                        }
                        let n = items.len() as u64;
                        let decoded: Result<Vec<(Key, Object)>, String> = items
                            .into_iter()
                            .map(|i| {
                                let k = wire::decode_key(&i.key).map_err(|e| e.to_string())?;
                                let o = rill_node::decode_object(&i.value).map_err(|e| e.to_string())?;
                                Ok((k, o))
                            })
                            .collect();
                        let stored = decoded
                            .and_then(|items| {
                                peer.node.handoff_store(tid.partition, items).map_err(|e| e.to_string())
                            })
                            .and_then(|()| peer.save_cursor(&tid, &cursor).map_err(|e| e.to_string()));
                        if let Err(e) = stored {
                            // Not acknowledged: the sender times out and
                            // resumes from the last cursor kept.
                            tracing::warn!(partition = tid.partition, from = %tid.from, error = %e, "a handoff batch was not stored");
                            return;
                        }
                        peer.handoff_stats.items_received.fetch_add(n, Ordering::Relaxed);
                        let now = peer.now();
                        let effects = match peer.handoffs().incoming.get_mut(&tid) {
                            Some(i) if i.gen == gen => i.receiver.stored(seq, now),
                            _ => return,
                        };
                        peer.drive_in(&tid, effects);
                    });
                }
                ReceiverEffect::Finished => {
                    let _ = std::fs::remove_file(self.cursor_path(tid));
                    tracing::info!(partition = tid.partition, from = %tid.from, "handoff received");
                }
                ReceiverEffect::Abort(why) => {
                    self.handoffs().incoming.remove(tid);
                    tracing::info!(partition = tid.partition, from = %tid.from, why, "handoff receiver stopped");
                }
            }
        }
        let over = self
            .handoffs()
            .incoming
            .get(tid)
            .is_some_and(|i| i.receiver.is_over());
        if over {
            self.handoffs().incoming.remove(tid);
        }
    }

    /// `rill admin transfers`: what moves now.
    pub(crate) fn active_transfers(&self) -> String {
        let h = self.handoffs();
        let mut out = String::new();
        for (t, o) in &h.out {
            let kind = match o.kind {
                Kind::Ownership(_) => "ownership",
                Kind::Hinted => "hinted",
            };
            out.push_str(&format!(
                "  {kind} handoff of partition {} to '{}': {} of {} keys sent\n",
                t.partition,
                o.to,
                o.sender.items_sent,
                o.keys.len()
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
        let (outbound, inbound) = {
            let h = self.handoffs();
            (h.out.len() as u64, h.incoming.len() as u64)
        };
        let (members, unreachable, pending) = {
            let inner = self.lock();
            let now = self.now();
            let members = inner.state.with_status(rill_cluster::Status::is_member);
            let reachable = inner.detector.reachable(now);
            let unreachable = members
                .iter()
                .filter(|m| **m != self.me && !reachable.contains(m))
                .count();
            let s = &inner.state;
            let pending = s.ring().next.iter().filter(|t| !s.is_done(t)).count();
            (members.len() as u64, unreachable as u64, pending as u64)
        };
        let st = &self.handoff_stats;
        vec![
            ("cluster_members", members),
            ("cluster_unreachable_members", unreachable),
            ("ring_pending_transfers", pending),
            ("handoffs_outbound", outbound),
            ("handoffs_inbound", inbound),
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
