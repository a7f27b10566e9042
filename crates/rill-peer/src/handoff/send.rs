//! Sending a partition: a sender whose batches a `rill_handoff::pass`
//! reads off the async threads (a chunk of the partition's keys at a
//! time, and a record of what was sent), top-up passes for keys written
//! during the transfer, and what happens when it completes or fails.

use super::{Kind, Out};
use crate::runtime::Peer;
use rill_cluster::Transfer;
use rill_handoff::codec::HandoffMsg;
use rill_handoff::pass::{count_unsent, drop_sent, Pass, SentRecord, CHUNK_MIN};
use rill_handoff::plan::{after_listing, after_sent, AfterSent};
use rill_handoff::{Sender, SenderEffect, TransferId};
use rill_node::vnode::handoff::PartitionReader;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

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
        self.start_out_with(partition, kind, to, now, SentRecord::default(), 0)
    }

    /// Starts a sender of `partition` (for a repair, of its source's keys
    /// that the partition is a replica of), carrying what earlier passes
    /// sent; a pass after the first sends only keys they did not.
    /// `false`: no slot was free.
    fn start_out_with(
        self: &Arc<Self>,
        partition: u32,
        kind: Kind,
        to: String,
        now: u64,
        sent: SentRecord,
        topups: u32,
    ) -> bool {
        let tid = TransferId {
            partition,
            id: kind.id(),
            from: self.me.clone(),
        };
        let (source, recording) = match kind {
            Kind::Repair { source } => (source, false),
            _ => (partition, true),
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
        tracing::info!(partition, source, to = %to, topups, kind = ?kind, "handoff starts");
        let pass = Pass::new(CHUNK_MIN, sent, topups > 0, recording);
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
                    pass: Arc::new(Mutex::new(pass)),
                    total: 0,
                    gen,
                    topups,
                },
            );
        }
        self.drive_out(&tid, effects);
        true
    }

    /// Reads through the vnode a transfer of `partition` reads: the whole
    /// vnode of the partition, or for a repair (another `source`) the
    /// source's keys that the partition is a replica of.
    fn with_reader<T>(
        &self,
        partition: u32,
        source: u32,
        read: impl FnOnce(&PartitionReader<'_>) -> Result<T, String>,
    ) -> Result<T, String> {
        let vnodes = self.node.vnodes();
        if source == partition {
            read(&vnodes.reader(source, None).map_err(|e| e.to_string())?)
        } else {
            let keep = self.repair_filter(partition);
            read(
                &vnodes
                    .reader(source, Some(&keep))
                    .map_err(|e| e.to_string())?,
            )
        }
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
                    let Some((pass, gen, source)) = self
                        .handoffs()
                        .out
                        .get(tid)
                        .map(|o| (o.pass.clone(), o.gen, o.source))
                    else {
                        return;
                    };
                    let peer = self.clone();
                    let tid = tid.clone();
                    self.rt.spawn_blocking(move || {
                        // The pass's lock alone while reading: never the
                        // handoffs' lock inside it.
                        let (read, total) = {
                            let mut pass = pass.lock().unwrap_or_else(|e| e.into_inner());
                            let read = peer.with_reader(tid.partition, source, |r| {
                                pass.read(r, after.as_deref(), max_items, max_bytes)
                            });
                            (read, pass.total)
                        };
                        let now = peer.now();
                        let effects = {
                            let mut h = peer.handoffs();
                            let Some(o) = h.out.get_mut(&tid).filter(|o| o.gen == gen) else {
                                return;
                            };
                            o.total = total;
                            match read {
                                Err(why) => o.sender.read_failed(session, &why, now),
                                Ok(b) => {
                                    if o.sender.session() == session {
                                        o.pass.lock().unwrap_or_else(|e| e.into_inner()).record(&b);
                                    }
                                    let n = b.items.len() as u64;
                                    let e = o.sender.read(session, b.items, b.cursor, b.more, now);
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
                    match o {
                        Some(o) if o.is_repair() => {
                            tracing::warn!(partition = tid.partition, to = %o.to, why, "a repair failed; ask for it again")
                        }
                        Some(o) => {
                            tracing::warn!(partition = tid.partition, to = %o.to, why, "handoff failed; it will be tried again")
                        }
                        None => {}
                    }
                }
            }
        }
    }

    fn out_done(self: &Arc<Self>, tid: &TransferId) {
        let p = tid.partition;
        let Some((o, next)) = ({
            let mut h = self.handoffs();
            h.out.remove(tid).map(|o| {
                let next = after_sent(o.kind.clone(), o.topups);
                if matches!(next, AfterSent::ListUnsent(_)) {
                    // Until the count decides, the transfer keeps its
                    // slot and counts as sending: a round must not start
                    // it again from its first key.
                    h.counting.insert(p);
                } else {
                    h.slots.release(tid);
                }
                (o, next)
            })
        }) else {
            return;
        };
        self.handoff_stats.completed.fetch_add(1, Ordering::Relaxed);
        tracing::info!(partition = tid.partition, to = %o.to, items = o.sender.items_sent, "handoff complete");
        let sent = {
            let mut pass = o.pass.lock().unwrap_or_else(|e| e.into_inner());
            let mut sent = std::mem::take(&mut pass.sent);
            sent.seal();
            sent
        };
        match next {
            AfterSent::ListUnsent(t) => {
                // Keys the record does not have (written since they were
                // passed, on this node only) go in a top-up pass before
                // the transfer is marked done. The receiver removed its
                // cursor when it finished, so the pass starts from its
                // first key.
                let peer = self.clone();
                let tid = tid.clone();
                let (to, topups) = (o.to, o.topups);
                self.rt.spawn_blocking(move || {
                    let counted = peer.with_reader(p, p, |r| count_unsent(r, &sent, CHUNK_MIN));
                    let done_counting = |peer: &Peer| {
                        let mut h = peer.handoffs();
                        h.counting.remove(&p);
                        h.slots.release(&tid);
                    };
                    match counted {
                        Err(e) => {
                            done_counting(&peer);
                            tracing::warn!(partition = p, error = %e, "cannot list a partition after its handoff; it will be handed off again");
                        }
                        Ok(n) if !after_listing(n) => {
                            // Retained before it stops counting: never
                            // neither, or a round would start it again.
                            peer.ownership_done(&t, sent);
                            done_counting(&peer);
                        }
                        Ok(n) => {
                            tracing::info!(partition = p, keys = n, "handoff tops up keys written during it");
                            let now = peer.now();
                            // The slot is still this transfer's.
                            peer.start_out_with(p, Kind::Ownership(t), to, now, sent, topups + 1);
                            peer.handoffs().counting.remove(&p);
                        }
                    }
                });
            }
            AfterSent::MarkDone(t) => self.ownership_done(&t, sent),
            AfterSent::Keep => {
                tracing::info!(partition = p, to = %o.to, items = o.sender.items_sent, "repair sent");
            }
            AfterSent::DropSent => {
                if !rill_handoff::plan::may_drop_hinted(&self.lock().state, &self.me, p) {
                    tracing::info!(partition = p, "partition handed off; its data here stays (it is moving, or is this node's now)");
                    return;
                }
                let peer = self.clone();
                self.rt.spawn_blocking(move || peer.drop_sent(p, &sent));
            }
        }
    }

    /// Removes the keys of `p` handed off, those still as sent.
    pub(super) fn drop_sent(&self, p: u32, sent: &SentRecord) {
        match self.with_reader(p, p, |r| drop_sent(r, sent, CHUNK_MIN)) {
            Ok(n) => {
                tracing::info!(
                    partition = p,
                    removed = n,
                    "partition handed off; its data here is removed"
                )
            }
            Err(e) => {
                tracing::warn!(partition = p, error = %e, "removing handed-off data failed; it will be handed off again")
            }
        }
    }

    /// The receiver has the partition: keep the record of what was sent
    /// until the owner switches, and mark the transfer done.
    fn ownership_done(self: &Arc<Self>, t: &Transfer, sent: SentRecord) {
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
