//! Framing: `<u32 big-endian L><code><L-1 bytes>`, L counting the code.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Riak's default `pb_max_message_size`... Riak has none below its 2 GiB
/// ceiling; Rill refuses frames above this unless configured otherwise,
/// so a peer cannot make the node allocate without bound.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 64 << 20;

/// One frame off the wire, not yet decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawFrame {
    pub code: u8,
    pub body: Bytes,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    #[error("frame length 0: a frame holds at least its one-byte message code")]
    Empty,
    #[error("frame of {len_bytes} bytes is larger than the limit of {max_bytes} bytes")]
    TooLarge { len_bytes: usize, max_bytes: usize },
}

/// Cuts frames out of a byte stream. Feed it what the socket gave.
#[derive(Clone, Copy, Debug)]
pub struct FrameDecoder {
    max_frame_bytes: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new(DEFAULT_MAX_FRAME_BYTES)
    }
}

impl FrameDecoder {
    pub fn new(max_frame_bytes: usize) -> FrameDecoder {
        FrameDecoder {
            max_frame_bytes: max_frame_bytes.max(1),
        }
    }

    pub fn max_frame_bytes(&self) -> usize {
        self.max_frame_bytes
    }

    /// The next whole frame in `buf`, taken out of it; `None` when more
    /// bytes are needed. After an error the stream is out of step and the
    /// connection should be answered and closed.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<RawFrame>, FrameError> {
        if buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len == 0 {
            return Err(FrameError::Empty);
        }
        if len > self.max_frame_bytes {
            return Err(FrameError::TooLarge {
                len_bytes: len,
                max_bytes: self.max_frame_bytes,
            });
        }
        if buf.len() < 4 + len {
            // Reserve what the frame needs (bounded by the limit above).
            buf.reserve(4 + len - buf.len());
            return Ok(None);
        }
        buf.advance(4);
        let code = buf.get_u8();
        let body = buf.split_to(len - 1).freeze();
        Ok(Some(RawFrame { code, body }))
    }
}

/// Appends one frame carrying `code` and `body` to `out`.
pub fn encode_frame(code: u8, body: &[u8], out: &mut BytesMut) {
    out.reserve(5 + body.len());
    out.put_u32(body.len() as u32 + 1);
    out.put_u8(code);
    out.put_slice(body);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_anywhere_come_out_whole() {
        let mut wire = BytesMut::new();
        encode_frame(1, b"", &mut wire);
        encode_frame(9, b"hello", &mut wire);
        let wire = wire.freeze();
        for cut in 0..wire.len() {
            let d = FrameDecoder::default();
            let mut buf = BytesMut::from(&wire[..cut]);
            let mut got = Vec::new();
            while let Some(f) = d.decode(&mut buf).unwrap() {
                got.push(f);
            }
            buf.extend_from_slice(&wire[cut..]);
            while let Some(f) = d.decode(&mut buf).unwrap() {
                got.push(f);
            }
            assert_eq!(got.len(), 2, "cut at {cut}");
            assert_eq!(got[0].code, 1);
            assert_eq!(&got[1].body[..], b"hello");
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn empty_and_oversized_frames_are_refused() {
        let d = FrameDecoder::new(100);
        let mut buf = BytesMut::from(&[0u8, 0, 0, 0][..]);
        assert_eq!(d.decode(&mut buf), Err(FrameError::Empty));
        let mut buf = BytesMut::from(&[0u8, 0, 0, 101, 1][..]);
        assert_eq!(
            d.decode(&mut buf),
            Err(FrameError::TooLarge {
                len_bytes: 101,
                max_bytes: 100
            })
        );
    }
}
