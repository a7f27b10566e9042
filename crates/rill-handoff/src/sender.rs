//! The sending side of one transfer.

use crate::{Cursor, Item, ToReceiver, ToSender, TransferId};
use std::collections::VecDeque;

#[derive(Clone, Debug)]
pub struct SenderConfig {
    /// Items in one batch at most.
    pub batch_items: usize,
    /// Bytes of keys and values in one batch at most (a single larger
    /// item still goes, alone).
    pub batch_bytes: usize,
    /// Batches sent and not yet acknowledged, at most.
    pub window: usize,
    /// A batch not acknowledged in this long starts a new session.
    pub ack_timeout_ms: u64,
    /// With nothing sent for this long, a keepalive goes.
    pub keepalive_ms: u64,
    /// Sessions started after the first, before giving up.
    pub max_retries: u32,
}

impl Default for SenderConfig {
    fn default() -> SenderConfig {
        SenderConfig {
            batch_items: 1000,
            batch_bytes: 1 << 20,
            window: 2,
            ack_timeout_ms: 60_000,
            keepalive_ms: 10_000,
            max_retries: 10,
        }
    }
}

/// What the caller must do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SenderEffect {
    Send(ToReceiver),
    /// Read the next items after `after` (`None`: from the start), at
    /// most this many and about this many bytes, and call
    /// [`Sender::read`] with them and this session (a read that ends
    /// after a new session began is ignored).
    Read {
        session: u64,
        after: Option<Cursor>,
        max_items: usize,
        max_bytes: usize,
    },
    /// The receiver has everything: mark the transfer done.
    Done,
    /// Given up; the transfer will be tried again later.
    Failed(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the receiver's Resume.
    Opening,
    Sending,
    /// Finish sent; waiting for Done.
    Finishing,
    Over,
}

#[derive(Debug)]
pub struct Sender {
    cfg: SenderConfig,
    transfer: TransferId,
    phase: Phase,
    session: u64,
    retries: u32,
    next_seq: u64,
    /// Sent, not acknowledged: (seq, sent at).
    unacked: VecDeque<(u64, u64)>,
    /// Where the next read starts.
    read_after: Option<Cursor>,
    reading: bool,
    /// Nothing left to read in this session.
    exhausted: bool,
    /// When the session began or the last ack came.
    progress_ms: u64,
    last_sent_ms: u64,
    /// Items sent, all sessions (for progress reports).
    pub items_sent: u64,
}

impl Sender {
    pub fn start(
        cfg: SenderConfig,
        transfer: TransferId,
        now_ms: u64,
    ) -> (Sender, Vec<SenderEffect>) {
        let mut s = Sender {
            cfg,
            transfer,
            phase: Phase::Opening,
            session: 0,
            retries: 0,
            next_seq: 0,
            unacked: VecDeque::new(),
            read_after: None,
            reading: false,
            exhausted: false,
            progress_ms: now_ms,
            last_sent_ms: now_ms,
            items_sent: 0,
        };
        let e = s.open(now_ms);
        (s, e)
    }

    pub fn is_over(&self) -> bool {
        self.phase == Phase::Over
    }

    pub fn session(&self) -> u64 {
        self.session
    }

    fn open(&mut self, now_ms: u64) -> Vec<SenderEffect> {
        self.session += 1;
        self.phase = Phase::Opening;
        self.unacked.clear();
        self.next_seq = 0;
        self.reading = false;
        self.exhausted = false;
        self.progress_ms = now_ms;
        self.last_sent_ms = now_ms;
        vec![SenderEffect::Send(ToReceiver::Open {
            transfer: self.transfer.clone(),
            session: self.session,
        })]
    }

    /// Starts a new session (after a timeout or a lost connection), or
    /// gives up after `max_retries`.
    fn retry(&mut self, why: &str, now_ms: u64) -> Vec<SenderEffect> {
        if self.retries >= self.cfg.max_retries {
            self.phase = Phase::Over;
            return vec![SenderEffect::Failed(format!(
                "{why}; gave up after {} retries",
                self.retries
            ))];
        }
        self.retries += 1;
        self.open(now_ms)
    }

    /// Asks for the next batch when the window has room.
    fn pump(&mut self) -> Vec<SenderEffect> {
        if self.phase != Phase::Sending || self.reading || self.exhausted {
            return Vec::new();
        }
        if self.unacked.len() >= self.cfg.window.max(1) {
            return Vec::new();
        }
        self.reading = true;
        vec![SenderEffect::Read {
            session: self.session,
            after: self.read_after.clone(),
            max_items: self.cfg.batch_items.max(1),
            max_bytes: self.cfg.batch_bytes.max(1),
        }]
    }

    fn finish_if_all_acked(&mut self, now_ms: u64) -> Vec<SenderEffect> {
        if self.phase == Phase::Sending
            && self.exhausted
            && self.unacked.is_empty()
            && !self.reading
        {
            self.phase = Phase::Finishing;
            self.last_sent_ms = now_ms;
            self.progress_ms = now_ms;
            return vec![SenderEffect::Send(ToReceiver::Finish {
                session: self.session,
                batches: self.next_seq,
            })];
        }
        Vec::new()
    }

    /// A message from the receiver.
    pub fn receive(&mut self, msg: ToSender, now_ms: u64) -> Vec<SenderEffect> {
        match msg {
            ToSender::Resume { session, after } if session == self.session => {
                if self.phase != Phase::Opening {
                    return Vec::new();
                }
                self.phase = Phase::Sending;
                self.read_after = after;
                self.progress_ms = now_ms;
                self.pump()
            }
            ToSender::Ack { session, seq } if session == self.session => {
                let before = self.unacked.len();
                self.unacked.retain(|(s, _)| *s > seq);
                if self.unacked.len() < before {
                    self.progress_ms = now_ms;
                    self.retries = 0;
                }
                let mut out = self.pump();
                out.extend(self.finish_if_all_acked(now_ms));
                out
            }
            ToSender::Done { session } if session == self.session => {
                if self.phase != Phase::Finishing {
                    return Vec::new();
                }
                self.phase = Phase::Over;
                vec![SenderEffect::Done]
            }
            // Another session's message: stale.
            _ => Vec::new(),
        }
    }

    /// The items read after the cursor asked for; `cursor` is the position
    /// after the last of them; `more` is false when the data ends there.
    pub fn read(
        &mut self,
        session: u64,
        items: Vec<Item>,
        cursor: Option<Cursor>,
        more: bool,
        now_ms: u64,
    ) -> Vec<SenderEffect> {
        if session != self.session || !self.reading || self.phase != Phase::Sending {
            return Vec::new();
        }
        self.reading = false;
        let mut out = Vec::new();
        // A read may pass over items it leaves out and return none, with
        // the cursor after them: the next read starts there.
        if let Some(c) = &cursor {
            self.read_after = Some(c.clone());
        }
        if !items.is_empty() {
            let Some(cursor) = cursor else {
                return self.retry("a read returned items without a cursor", now_ms);
            };
            let seq = self.next_seq;
            self.next_seq += 1;
            self.items_sent += items.len() as u64;
            self.unacked.push_back((seq, now_ms));
            self.last_sent_ms = now_ms;
            out.push(SenderEffect::Send(ToReceiver::Batch {
                session: self.session,
                seq,
                items,
                cursor,
            }));
        }
        if !more {
            self.exhausted = true;
        }
        out.extend(self.pump());
        out.extend(self.finish_if_all_acked(now_ms));
        out
    }

    /// The read asked for failed: a new session (after which the read is
    /// asked again), or giving up after the retries.
    pub fn read_failed(&mut self, session: u64, why: &str, now_ms: u64) -> Vec<SenderEffect> {
        if session != self.session || !self.reading || self.phase == Phase::Over {
            return Vec::new();
        }
        self.retry(&format!("reading the partition failed: {why}"), now_ms)
    }

    /// The connection to the receiver broke: a new session.
    pub fn connection_lost(&mut self, now_ms: u64) -> Vec<SenderEffect> {
        if self.phase == Phase::Over {
            return Vec::new();
        }
        self.retry("the connection was lost", now_ms)
    }

    /// Time passes: timeouts and keepalives.
    pub fn tick(&mut self, now_ms: u64) -> Vec<SenderEffect> {
        if self.phase == Phase::Over {
            return Vec::new();
        }
        // Waiting for an answer since: the open, the oldest batch not
        // acknowledged (or the last ack, if later), the finish.
        let since = match self.phase {
            Phase::Opening | Phase::Finishing => Some(self.progress_ms),
            Phase::Sending => self
                .unacked
                .front()
                .map(|(_, sent)| (*sent).max(self.progress_ms)),
            Phase::Over => None,
        };
        if since.is_some_and(|t| now_ms.saturating_sub(t) >= self.cfg.ack_timeout_ms) {
            return self.retry("the receiver did not answer in time", now_ms);
        }
        if self.phase != Phase::Opening
            && now_ms.saturating_sub(self.last_sent_ms) >= self.cfg.keepalive_ms
        {
            self.last_sent_ms = now_ms;
            return vec![SenderEffect::Send(ToReceiver::Keepalive {
                session: self.session,
            })];
        }
        Vec::new()
    }
}
