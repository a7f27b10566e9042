//! Handoff messages from peers, and receiving a partition: a receiver
//! opened (resuming after a kept cursor), its batches decoded and stored
//! one at a time, acknowledged only once stored.

use super::{In, Key};
use crate::runtime::Peer;
use rill_handoff::codec::HandoffMsg;
use rill_handoff::{Receiver, ReceiverEffect, ToReceiver, TransferId};
use rill_node::wire;
use rill_node::Object;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Peer {
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
                if !rill_handoff::plan::may_receive(&self.lock().state, &self.me, &tid) {
                    // This node's ring does not know of the move yet: the
                    // sender retries after its timeout, by when gossip has
                    // brought the ring.
                    tracing::debug!(partition = tid.partition, from = %tid.from, "a handoff of a move this ring does not know yet waits");
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
            HandoffMsg::Ask(tid) => self.repair_asked(from, tid),
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

    pub(super) fn drive_in(self: &Arc<Self>, tid: &TransferId, effects: Vec<ReceiverEffect>) {
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
                                peer.node.vnodes().handoff_store(tid.partition, items).map_err(|e| e.to_string())
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
}
