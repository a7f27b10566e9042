//! Sending a partition: a sender started over a key snapshot, its
//! batches read off the async threads, top-up passes for keys written
//! during the transfer, and what happens when it completes or fails.

use super::{Key, Kind, Out};
use crate::runtime::Peer;
use rill_cluster::Transfer;
use rill_handoff::codec::HandoffMsg;
use rill_handoff::plan::{after_listing, after_sent, AfterSent};
use rill_handoff::{Item, Sender, SenderEffect, TransferId};
use rill_node::VClock;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Peer {
    /// Starts a transfer of `partition` of `kind` to `to`. `false`: no
    /// slot was free (a sender of it running already counts as started).
    pub(super) fn start_out(
        self: &Arc<Self>,
        partition: u32,
        kind: Kind,
        to: String,
        now: u64,
    ) -> bool {
        self.start_out_with(partition, kind, to, now, None, BTreeMap::new(), 0)
    }

    /// Starts a sender of `partition` over `keys` (all the partition's
    /// when `None`; for a repair, those of its source that the partition
    /// is a replica of), carrying what earlier passes sent. `false`: no
    /// slot was free.
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
    ) -> bool {
        let tid = TransferId {
            partition,
            id: kind.id(),
            from: self.me.clone(),
        };
        let source = match kind {
            Kind::Repair { source } => source,
            _ => partition,
        };
        {
            // One transfer of a partition at a time; a repair of it (this
            // node sends a neighbour's copies) runs beside the others.
            let h = self.handoffs();
            let running = match kind {
                Kind::Repair { .. } => h.out.contains_key(&tid),
                _ => h
                    .out
                    .iter()
                    .any(|(t, o)| t.partition == partition && !o.is_repair()),
            };
            if running {
                return true;
            }
        }
        if !self.handoffs().slots.try_acquire(&tid, now) {
            return false;
        }
        let listed = match keys {
            Some(k) => Ok(k),
            None if source != partition => self.repair_keys(source, partition),
            None => self.node.vnodes().handoff_keys(partition),
        };
        let keys = match listed {
            Ok(k) => Arc::new(k),
            Err(e) => {
                tracing::warn!(partition, source, error = %e, "cannot list a partition for handoff");
                self.handoffs().slots.release(&tid);
                return true;
            }
        };
        tracing::info!(partition, source, to = %to, keys = keys.len(), kind = ?kind, "handoff starts");
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
                    source,
                    keys,
                    sent,
                    gen,
                    topups,
                },
            );
        }
        self.drive_out(&tid, effects);
        true
    }

    pub(super) fn drive_out(self: &Arc<Self>, tid: &TransferId, effects: Vec<SenderEffect>) {
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
                    let Some((keys, gen, source, keep_sent)) = self
                        .handoffs()
                        .out
                        .get(tid)
                        .map(|o| (o.keys.clone(), o.gen, o.source, !o.is_repair()))
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
                                .vnodes()
                                .handoff_read(source, std::slice::from_ref(key))
                            {
                                Ok(found) => {
                                    for (k, o) in found {
                                        let value = rill_node::encode_object(&o);
                                        bytes += enc.len() + value.len();
                                        if keep_sent {
                                            read.push((enc.clone(), k, o.clock.clone()));
                                        }
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
        match after_sent(o.kind, o.topups) {
            AfterSent::ListUnsent(t) => {
                // Keys the snapshot did not have (written since, on this
                // node only) go in a top-up pass before the transfer is
                // marked done. The receiver removed its cursor when it
                // finished, so the pass starts from its first key.
                let peer = self.clone();
                let tid = tid.clone();
                let sent_map = o.sent;
                let (to, topups) = (o.to, o.topups);
                self.rt.spawn_blocking(move || {
                    let unsent: Vec<(Vec<u8>, Key)> = match peer.node.vnodes().handoff_keys(tid.partition) {
                        Ok(all) => all.into_iter().filter(|(k, _)| !sent_map.contains_key(k)).collect(),
                        Err(e) => {
                            tracing::warn!(partition = tid.partition, error = %e, "cannot list a partition after its handoff; it will be handed off again");
                            return;
                        }
                    };
                    if !after_listing(unsent.len()) {
                        peer.ownership_done(&t, sent_map.into_values().collect());
                    } else {
                        tracing::info!(partition = tid.partition, keys = unsent.len(), "handoff tops up keys written during it");
                        let now = peer.now();
                        peer.start_out_with(tid.partition, Kind::Ownership(t), to, now, Some(unsent), sent_map, topups + 1);
                    }
                });
            }
            AfterSent::MarkDone(t) => {
                self.ownership_done(&t, o.sent.into_values().collect());
            }
            AfterSent::Keep => {
                tracing::info!(partition = tid.partition, to = %o.to, items = o.sender.items_sent, "repair sent");
            }
            AfterSent::DropSent => {
                let sent: Vec<(Key, VClock)> = o.sent.into_values().collect();
                let peer = self.clone();
                let p = tid.partition;
                self.rt.spawn_blocking(move || {
                    if let Err(e) = peer.node.vnodes().handoff_drop(p, &sent) {
                        tracing::warn!(partition = p, error = %e, "removing handed-off data failed; it will be handed off again");
                    }
                });
            }
        }
    }

    /// The receiver has the partition: keep what was sent until the owner
    /// switches, and mark the transfer done.
    fn ownership_done(self: &Arc<Self>, t: &Transfer, sent: Vec<(Key, VClock)>) {
        self.handoffs()
            .retained
            .insert(t.partition, (t.clone(), sent));
        let mut inner = self.lock();
        inner.state.mark_done(t);
        if let Err(e) = self.changed(&mut inner) {
            tracing::error!(error = %e, "a transfer is done but the cluster state was not kept");
        }
    }
}
