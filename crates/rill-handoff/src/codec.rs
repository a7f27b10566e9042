//! Handoff messages as bytes (docs/format.md, "Handoff messages"), each
//! with the transfer it belongs to, so one connection carries several
//! transfers. Big-endian. Every decoder refuses what it cannot read
//! whole, and is fuzzed.

use crate::{Cursor, Item, ToReceiver, ToSender, TransferId};

const MAGIC: &[u8; 2] = b"RH";
const VERSION: u8 = 1;
const TO_RECEIVER: u8 = 0;
const TO_SENDER: u8 = 1;

/// A handoff message and its transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandoffMsg {
    ToReceiver(TransferId, ToReceiver),
    ToSender(TransferId, ToSender),
    /// The receiver-to-be asks the node named in the transfer to send it
    /// (a repair, `crate::repair`).
    Ask(TransferId),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum CodecError {
    #[error("not a handoff message (bad magic bytes)")]
    Magic,
    #[error("handoff message version {0}; this node reads 1")]
    Version(u8),
    #[error("the handoff message ends early")]
    Short,
    #[error("the handoff message is malformed: {0}")]
    Malformed(&'static str),
}

fn u32b(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}
fn u64b(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}
fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    u32b(out, b.len() as u32);
    out.extend_from_slice(b);
}

impl HandoffMsg {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        let t = match self {
            HandoffMsg::ToReceiver(t, _) => {
                out.push(TO_RECEIVER);
                t
            }
            HandoffMsg::ToSender(t, _) | HandoffMsg::Ask(t) => {
                out.push(TO_SENDER);
                t
            }
        };
        u32b(&mut out, t.partition);
        u64b(&mut out, t.id);
        bytes(&mut out, t.from.as_bytes());
        match self {
            HandoffMsg::ToReceiver(_, m) => match m {
                ToReceiver::Open { session, .. } => {
                    out.push(1);
                    u64b(&mut out, *session);
                }
                ToReceiver::Batch {
                    session,
                    seq,
                    items,
                    cursor,
                } => {
                    out.push(2);
                    u64b(&mut out, *session);
                    u64b(&mut out, *seq);
                    bytes(&mut out, cursor);
                    u32b(&mut out, items.len() as u32);
                    for i in items {
                        bytes(&mut out, &i.key);
                        bytes(&mut out, &i.value);
                    }
                }
                ToReceiver::Keepalive { session } => {
                    out.push(3);
                    u64b(&mut out, *session);
                }
                ToReceiver::Finish { session, batches } => {
                    out.push(4);
                    u64b(&mut out, *session);
                    u64b(&mut out, *batches);
                }
            },
            HandoffMsg::ToSender(_, m) => match m {
                ToSender::Resume { session, after } => {
                    out.push(1);
                    u64b(&mut out, *session);
                    match after {
                        Some(c) => {
                            out.push(1);
                            bytes(&mut out, c);
                        }
                        None => out.push(0),
                    }
                }
                ToSender::Ack { session, seq } => {
                    out.push(2);
                    u64b(&mut out, *session);
                    u64b(&mut out, *seq);
                }
                ToSender::Done { session } => {
                    out.push(3);
                    u64b(&mut out, *session);
                }
            },
            HandoffMsg::Ask(_) => out.push(4),
        }
        out
    }

    /// A message from its bytes; never panics on any input.
    pub fn decode(b: &[u8]) -> Result<HandoffMsg, CodecError> {
        let mut r = Reader(b);
        if r.take(2).map_err(|_| CodecError::Magic)? != MAGIC {
            return Err(CodecError::Magic);
        }
        let v = r.u8()?;
        if v != VERSION {
            return Err(CodecError::Version(v));
        }
        let dir = r.u8()?;
        let partition = r.u32()?;
        let id = r.u64()?;
        let from = String::from_utf8(r.bytes()?.to_vec())
            .map_err(|_| CodecError::Malformed("a node name is not UTF-8"))?;
        let transfer = TransferId {
            partition,
            id,
            from,
        };
        let kind = r.u8()?;
        let msg = match (dir, kind) {
            (TO_RECEIVER, 1) => HandoffMsg::ToReceiver(
                transfer.clone(),
                ToReceiver::Open {
                    transfer,
                    session: r.u64()?,
                },
            ),
            (TO_RECEIVER, 2) => {
                let session = r.u64()?;
                let seq = r.u64()?;
                let cursor: Cursor = r.bytes()?.to_vec();
                let n = r.u32()? as usize;
                if n.saturating_mul(8) > r.0.len() {
                    return Err(CodecError::Short);
                }
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    let key = r.bytes()?.to_vec();
                    let value = r.bytes()?.to_vec();
                    items.push(Item { key, value });
                }
                HandoffMsg::ToReceiver(
                    transfer,
                    ToReceiver::Batch {
                        session,
                        seq,
                        items,
                        cursor,
                    },
                )
            }
            (TO_RECEIVER, 3) => {
                HandoffMsg::ToReceiver(transfer, ToReceiver::Keepalive { session: r.u64()? })
            }
            (TO_RECEIVER, 4) => {
                let session = r.u64()?;
                let batches = r.u64()?;
                HandoffMsg::ToReceiver(transfer, ToReceiver::Finish { session, batches })
            }
            (TO_SENDER, 1) => {
                let session = r.u64()?;
                let after = match r.u8()? {
                    0 => None,
                    1 => Some(r.bytes()?.to_vec()),
                    _ => return Err(CodecError::Malformed("a cursor flag")),
                };
                HandoffMsg::ToSender(transfer, ToSender::Resume { session, after })
            }
            (TO_SENDER, 2) => {
                let session = r.u64()?;
                let seq = r.u64()?;
                HandoffMsg::ToSender(transfer, ToSender::Ack { session, seq })
            }
            (TO_SENDER, 3) => HandoffMsg::ToSender(transfer, ToSender::Done { session: r.u64()? }),
            (TO_SENDER, 4) => HandoffMsg::Ask(transfer),
            _ => return Err(CodecError::Malformed("an unknown direction or kind")),
        };
        if !r.0.is_empty() {
            return Err(CodecError::Malformed("bytes after the message"));
        }
        Ok(msg)
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if self.0.len() < n {
            return Err(CodecError::Short);
        }
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, CodecError> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn u64(&mut self) -> Result<u64, CodecError> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn bytes(&mut self) -> Result<&'a [u8], CodecError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_every_cut_is_refused() {
        let t = TransferId {
            partition: 5,
            id: 9,
            from: "dev1@127.0.0.1".into(),
        };
        let all = [
            HandoffMsg::ToReceiver(
                t.clone(),
                ToReceiver::Open {
                    transfer: t.clone(),
                    session: 2,
                },
            ),
            HandoffMsg::ToReceiver(
                t.clone(),
                ToReceiver::Batch {
                    session: 2,
                    seq: 0,
                    items: vec![
                        Item {
                            key: b"k".to_vec(),
                            value: b"v".to_vec(),
                        },
                        Item {
                            key: vec![],
                            value: vec![0; 300],
                        },
                    ],
                    cursor: b"k".to_vec(),
                },
            ),
            HandoffMsg::ToReceiver(t.clone(), ToReceiver::Keepalive { session: 3 }),
            HandoffMsg::ToReceiver(
                t.clone(),
                ToReceiver::Finish {
                    session: 3,
                    batches: 7,
                },
            ),
            HandoffMsg::ToSender(
                t.clone(),
                ToSender::Resume {
                    session: 1,
                    after: None,
                },
            ),
            HandoffMsg::ToSender(
                t.clone(),
                ToSender::Resume {
                    session: 1,
                    after: Some(b"c".to_vec()),
                },
            ),
            HandoffMsg::ToSender(t.clone(), ToSender::Ack { session: 1, seq: 4 }),
            HandoffMsg::ToSender(t.clone(), ToSender::Done { session: 1 }),
            HandoffMsg::Ask(TransferId {
                id: crate::repair::REPAIR_ID | 4,
                ..t.clone()
            }),
        ];
        for m in &all {
            let b = m.encode();
            assert_eq!(HandoffMsg::decode(&b).as_ref(), Ok(m));
            for cut in 0..b.len() {
                assert!(HandoffMsg::decode(&b[..cut]).is_err(), "{m:?} cut at {cut}");
            }
            let mut longer = b.clone();
            longer.push(0);
            assert!(HandoffMsg::decode(&longer).is_err());
        }
        let mut v = all[0].encode();
        v[2] = 3;
        assert_eq!(HandoffMsg::decode(&v), Err(CodecError::Version(3)));
    }
}
