//! The order in which one connection sends the chunks of the messages in
//! flight on it: each message in turn sends one chunk (round robin), so a
//! message queued behind a large one waits for one chunk of it, not for
//! all of it. Pure: the writer asks for the next chunk and writes it.

use crate::frame::CHUNK_BYTES;
use bytes::Bytes;
use std::collections::VecDeque;

/// A message being sent.
#[derive(Debug)]
struct InFlight {
    id: u64,
    data: Bytes,
    sent: usize,
}

/// One chunk to write.
#[derive(Debug, PartialEq, Eq)]
pub struct NextChunk {
    pub msg_id: u64,
    /// The message's length, on its first chunk.
    pub total: Option<u64>,
    pub last: bool,
    pub payload: Bytes,
}

#[derive(Debug, Default)]
pub struct Schedule {
    active: VecDeque<InFlight>,
    next_id: u64,
}

impl Schedule {
    /// Adds a message; returns its id on this connection.
    pub fn push(&mut self, data: Bytes) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.active.push_back(InFlight { id, data, sent: 0 });
        id
    }

    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    /// Messages in flight.
    pub fn len(&self) -> usize {
        self.active.len()
    }

    /// The next chunk, from the message whose turn it is.
    pub fn next_chunk(&mut self) -> Option<NextChunk> {
        let mut m = self.active.pop_front()?;
        let end = (m.sent + CHUNK_BYTES).min(m.data.len());
        let chunk = NextChunk {
            msg_id: m.id,
            total: (m.sent == 0).then_some(m.data.len() as u64),
            last: end == m.data.len(),
            payload: m.data.slice(m.sent..end),
        };
        m.sent = end;
        if !chunk.last {
            self.active.push_back(m);
        }
        Some(chunk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(s: &mut Schedule) -> Vec<(u64, bool)> {
        std::iter::from_fn(|| s.next_chunk())
            .map(|c| (c.msg_id, c.last))
            .collect()
    }

    #[test]
    fn a_small_message_waits_for_one_chunk_of_a_large_one() {
        let mut s = Schedule::default();
        let large = s.push(Bytes::from(vec![1u8; 4 * CHUNK_BYTES]));
        let first = s.next_chunk().unwrap();
        assert_eq!(
            (first.msg_id, first.total),
            (large, Some(4 * CHUNK_BYTES as u64))
        );
        let small = s.push(Bytes::from_static(b"get k"));
        assert_eq!(
            order(&mut s),
            vec![(large, false), (small, true), (large, false), (large, true)]
        );
    }

    #[test]
    fn chunks_add_up_to_the_message_and_empty_messages_send_one_chunk() {
        let mut s = Schedule::default();
        let data: Vec<u8> = (0..(2 * CHUNK_BYTES + 5)).map(|i| i as u8).collect();
        s.push(Bytes::from(data.clone()));
        s.push(Bytes::new());
        let mut got = Vec::new();
        let mut empty = 0;
        while let Some(c) = s.next_chunk() {
            if c.msg_id == 0 {
                got.extend_from_slice(&c.payload);
            } else {
                assert!(c.last && c.total == Some(0) && c.payload.is_empty());
                empty += 1;
            }
        }
        assert_eq!(got, data);
        assert_eq!(empty, 1);
        assert!(s.is_empty());
    }

    #[test]
    fn two_large_messages_share_the_link() {
        let mut s = Schedule::default();
        s.push(Bytes::from(vec![0u8; 3 * CHUNK_BYTES]));
        s.push(Bytes::from(vec![0u8; 3 * CHUNK_BYTES]));
        let ids: Vec<u64> = order(&mut s).into_iter().map(|(id, _)| id).collect();
        assert_eq!(ids, vec![0, 1, 0, 1, 0, 1]);
    }
}
