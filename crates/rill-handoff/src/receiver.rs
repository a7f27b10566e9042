//! The receiving side of one transfer. The caller keeps, durably, the
//! cursor after the last batch it stored for the transfer, and hands it
//! back when the receiver is made again (after a restart).

use crate::{Cursor, Item, ToReceiver, ToSender, TransferId};
use std::collections::BTreeMap;

/// Batches a receiver holds while it stores another, at most.
pub const BUFFERED_BATCHES: usize = 16;

#[derive(Clone, Debug)]
pub struct ReceiverConfig {
    /// Hearing nothing (not even a keepalive) for this long ends the
    /// receiver; the sender will open a new session.
    pub idle_timeout_ms: u64,
}

impl Default for ReceiverConfig {
    fn default() -> ReceiverConfig {
        ReceiverConfig {
            idle_timeout_ms: 120_000,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReceiverEffect {
    Send(ToSender),
    /// Store these items into the vnode, then record `cursor` for the
    /// transfer (durably), then call [`Receiver::stored`] with `seq`.
    Store {
        seq: u64,
        items: Vec<Item>,
        cursor: Cursor,
    },
    /// Every item is stored: the transfer's data is here.
    Finished,
    /// The sender went silent; forget this receiver (its cursor stays).
    Abort(String),
}

#[derive(Debug)]
pub struct Receiver {
    cfg: ReceiverConfig,
    transfer: TransferId,
    session: u64,
    /// The next batch to store.
    expected: u64,
    /// A batch handed to the caller to store, not yet confirmed.
    storing: Option<u64>,
    /// Batches that came while another was being stored, by sequence
    /// (at most [`BUFFERED_BATCHES`]: a sender's window is smaller).
    buffered: BTreeMap<u64, (Vec<Item>, Cursor)>,
    /// Finish came before the last batch was stored.
    finish_pending: Option<u64>,
    last_heard_ms: u64,
    over: bool,
}

impl Receiver {
    /// Answers an Open: the sender resumes after `stored_cursor`, the
    /// cursor the caller recorded for this transfer (`None`: nothing yet).
    pub fn open(
        cfg: ReceiverConfig,
        transfer: TransferId,
        session: u64,
        stored_cursor: Option<Cursor>,
        now_ms: u64,
    ) -> (Receiver, Vec<ReceiverEffect>) {
        let r = Receiver {
            cfg,
            transfer,
            session,
            expected: 0,
            storing: None,
            buffered: BTreeMap::new(),
            finish_pending: None,
            last_heard_ms: now_ms,
            over: false,
        };
        let e = vec![ReceiverEffect::Send(ToSender::Resume {
            session,
            after: stored_cursor,
        })];
        (r, e)
    }

    pub fn transfer(&self) -> &TransferId {
        &self.transfer
    }

    pub fn session(&self) -> u64 {
        self.session
    }

    pub fn is_over(&self) -> bool {
        self.over
    }

    /// A message of this receiver's session (others are the caller's to
    /// route: a newer Open makes a new receiver).
    pub fn receive(&mut self, msg: ToReceiver, now_ms: u64) -> Vec<ReceiverEffect> {
        if self.over {
            return Vec::new();
        }
        match msg {
            ToReceiver::Batch {
                session,
                seq,
                items,
                cursor,
            } if session == self.session => {
                self.last_heard_ms = now_ms;
                let ahead = seq.saturating_sub(self.expected);
                if seq < self.expected
                    || self.storing == Some(seq)
                    || ahead as usize >= BUFFERED_BATCHES
                {
                    // A repeat, or too far ahead: a sender that lost track
                    // opens a new session; nothing is stored twice.
                    return Vec::new();
                }
                self.buffered.entry(seq).or_insert((items, cursor));
                self.next_store()
            }
            ToReceiver::Keepalive { session } if session == self.session => {
                self.last_heard_ms = now_ms;
                Vec::new()
            }
            ToReceiver::Finish { session, batches } if session == self.session => {
                self.last_heard_ms = now_ms;
                self.finish_pending = Some(batches);
                self.maybe_finish()
            }
            _ => Vec::new(),
        }
    }

    /// Hands the next batch in order to the caller, if it is here and
    /// none is being stored.
    fn next_store(&mut self) -> Vec<ReceiverEffect> {
        if self.storing.is_some() {
            return Vec::new();
        }
        match self.buffered.remove(&self.expected) {
            Some((items, cursor)) => {
                self.storing = Some(self.expected);
                vec![ReceiverEffect::Store {
                    seq: self.expected,
                    items,
                    cursor,
                }]
            }
            None => Vec::new(),
        }
    }

    /// The caller stored batch `seq` and recorded its cursor.
    pub fn stored(&mut self, seq: u64, now_ms: u64) -> Vec<ReceiverEffect> {
        if self.storing != Some(seq) {
            return Vec::new();
        }
        self.storing = None;
        self.expected += 1;
        self.last_heard_ms = now_ms;
        let mut out = vec![ReceiverEffect::Send(ToSender::Ack {
            session: self.session,
            seq,
        })];
        out.extend(self.next_store());
        out.extend(self.maybe_finish());
        out
    }

    fn maybe_finish(&mut self) -> Vec<ReceiverEffect> {
        match self.finish_pending {
            Some(n) if n == self.expected && self.storing.is_none() && self.buffered.is_empty() => {
                self.over = true;
                vec![
                    ReceiverEffect::Finished,
                    ReceiverEffect::Send(ToSender::Done {
                        session: self.session,
                    }),
                ]
            }
            _ => Vec::new(),
        }
    }

    pub fn tick(&mut self, now_ms: u64) -> Vec<ReceiverEffect> {
        if self.over || self.storing.is_some() {
            return Vec::new();
        }
        if now_ms.saturating_sub(self.last_heard_ms) >= self.cfg.idle_timeout_ms {
            self.over = true;
            return vec![ReceiverEffect::Abort(
                "the sender went silent; it will open a new session".into(),
            )];
        }
        Vec::new()
    }
}
