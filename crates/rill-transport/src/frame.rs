//! Frames on the wire (docs/format.md, "Transport frames"), big-endian:
//!
//! ```text
//! frame  = length (u32: bytes after this field) | version (u8) | kind (u8) | body
//! hello  = kind 0: lane (u8) | name length (u16) | node name (UTF-8)
//! chunk  = kind 1: flags (u8: bit 0 first, bit 1 last) | message id (u64)
//!          | total length (u64, first chunk only) | payload
//! ```
//!
//! A connection starts with one hello (which node, which lane), then
//! carries chunks; a message is its chunks' payloads in order, from a
//! first chunk to a last one (both flags on a message of one chunk).

use thiserror::Error;

/// The protocol version this build speaks.
pub const VERSION: u8 = 1;
/// Payload bytes in one chunk at most.
pub const CHUNK_BYTES: usize = 64 << 10;
/// Bytes of a frame after its length field, at most.
pub const MAX_FRAME_BYTES: usize = CHUNK_BYTES + 32;

const KIND_HELLO: u8 = 0;
const KIND_CHUNK: u8 = 1;
const FLAG_FIRST: u8 = 1;
const FLAG_LAST: u8 = 2;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    Hello { lane: u8, name: String },
    Chunk(Chunk),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub msg_id: u64,
    /// The message's total length, on its first chunk.
    pub total: Option<u64>,
    pub last: bool,
    pub payload: Vec<u8>,
}

#[derive(Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    #[error("a frame of {0} bytes exceeds the limit of {MAX_FRAME_BYTES}")]
    TooLong(usize),
    #[error("the peer speaks transport version {0}; this node speaks {VERSION}")]
    Version(u8),
    #[error("unknown frame kind {0}")]
    Kind(u8),
    #[error("a frame of kind {kind} ends after {len} bytes")]
    Short { kind: u8, len: usize },
    #[error("unknown chunk flags {0:#04x}")]
    Flags(u8),
    #[error("the node name is not UTF-8")]
    Name,
}

/// A hello frame.
pub fn encode_hello(lane: u8, name: &str) -> Vec<u8> {
    let name = &name.as_bytes()[..name.len().min(u16::MAX as usize)];
    let len = 2 + 1 + 2 + name.len();
    let mut b = Vec::with_capacity(4 + len);
    b.extend_from_slice(&(len as u32).to_be_bytes());
    b.extend_from_slice(&[VERSION, KIND_HELLO, lane]);
    b.extend_from_slice(&(name.len() as u16).to_be_bytes());
    b.extend_from_slice(name);
    b
}

/// The bytes before a chunk's payload (the payload is written after
/// them, from the message, without a copy).
pub fn chunk_header(msg_id: u64, total: Option<u64>, last: bool, payload_len: usize) -> Vec<u8> {
    let flags = if total.is_some() { FLAG_FIRST } else { 0 } | if last { FLAG_LAST } else { 0 };
    let len = 2 + 1 + 8 + if total.is_some() { 8 } else { 0 } + payload_len;
    let mut b = Vec::with_capacity(4 + len - payload_len);
    b.extend_from_slice(&(len as u32).to_be_bytes());
    b.extend_from_slice(&[VERSION, KIND_CHUNK, flags]);
    b.extend_from_slice(&msg_id.to_be_bytes());
    if let Some(t) = total {
        b.extend_from_slice(&t.to_be_bytes());
    }
    b
}

/// The frame at the start of `buf`, and the bytes it took; `Ok(None)`
/// while the frame is not all there yet.
pub fn decode(buf: &[u8]) -> Result<Option<(Frame, usize)>, FrameError> {
    let Some(len) = buf.get(..4) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(FrameError::TooLong(len));
    }
    let Some(body) = buf.get(4..4 + len) else {
        return Ok(None);
    };
    let short = |kind| FrameError::Short { kind, len };
    let (&version, rest) = body.split_first().ok_or(short(0))?;
    if version != VERSION {
        return Err(FrameError::Version(version));
    }
    let (&kind, rest) = rest.split_first().ok_or(short(0))?;
    let frame = match kind {
        KIND_HELLO => {
            let (&lane, rest) = rest.split_first().ok_or(short(kind))?;
            let n = rest.get(..2).ok_or(short(kind))?;
            let n = u16::from_be_bytes(n.try_into().expect("2 bytes")) as usize;
            let name = rest.get(2..2 + n).ok_or(short(kind))?;
            if rest.len() != 2 + n {
                return Err(short(kind));
            }
            let name = std::str::from_utf8(name).map_err(|_| FrameError::Name)?;
            Frame::Hello {
                lane,
                name: name.to_string(),
            }
        }
        KIND_CHUNK => {
            let (&flags, rest) = rest.split_first().ok_or(short(kind))?;
            if flags & !(FLAG_FIRST | FLAG_LAST) != 0 {
                return Err(FrameError::Flags(flags));
            }
            let id = rest.get(..8).ok_or(short(kind))?;
            let msg_id = u64::from_be_bytes(id.try_into().expect("8 bytes"));
            let mut rest = &rest[8..];
            let total = if flags & FLAG_FIRST != 0 {
                let t = rest.get(..8).ok_or(short(kind))?;
                rest = &rest[8..];
                Some(u64::from_be_bytes(t.try_into().expect("8 bytes")))
            } else {
                None
            };
            Frame::Chunk(Chunk {
                msg_id,
                total,
                last: flags & FLAG_LAST != 0,
                payload: rest.to_vec(),
            })
        }
        other => return Err(FrameError::Kind(other)),
    };
    Ok(Some((frame, 4 + len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_every_cut_is_incomplete() {
        let hello = encode_hello(2, "rill@10.0.0.1");
        let mut chunk = chunk_header(7, Some(5), true, 5);
        chunk.extend_from_slice(b"hello");
        let mut middle = chunk_header(7, None, false, 3);
        middle.extend_from_slice(b"abc");
        for (bytes, want) in [
            (
                &hello,
                Frame::Hello {
                    lane: 2,
                    name: "rill@10.0.0.1".into(),
                },
            ),
            (
                &chunk,
                Frame::Chunk(Chunk {
                    msg_id: 7,
                    total: Some(5),
                    last: true,
                    payload: b"hello".to_vec(),
                }),
            ),
            (
                &middle,
                Frame::Chunk(Chunk {
                    msg_id: 7,
                    total: None,
                    last: false,
                    payload: b"abc".to_vec(),
                }),
            ),
        ] {
            assert_eq!(decode(bytes), Ok(Some((want, bytes.len()))));
            for cut in 0..bytes.len() {
                assert_eq!(decode(&bytes[..cut]), Ok(None), "cut at {cut}");
            }
        }
    }

    #[test]
    fn bad_frames_are_refused() {
        let mut b = encode_hello(0, "n");
        b[4] = 9;
        assert_eq!(decode(&b), Err(FrameError::Version(9)));
        let mut b = encode_hello(0, "n");
        b[5] = 7;
        assert_eq!(decode(&b), Err(FrameError::Kind(7)));
        let mut b = chunk_header(1, None, true, 0);
        b[6] = 0x80;
        assert_eq!(decode(&b), Err(FrameError::Flags(0x80)));
        let huge = ((MAX_FRAME_BYTES + 1) as u32).to_be_bytes();
        assert_eq!(decode(&huge), Err(FrameError::TooLong(MAX_FRAME_BYTES + 1)));
        // A hello whose name runs past its frame.
        let mut b = encode_hello(0, "node");
        b[8] = 0xff;
        assert!(matches!(decode(&b), Err(FrameError::Short { .. })));
        let mut b = encode_hello(0, "n\u{e9}");
        let at = b.len() - 1;
        b[at] = 0xff;
        assert_eq!(decode(&b), Err(FrameError::Name));
    }
}
