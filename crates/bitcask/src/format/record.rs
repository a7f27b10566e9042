//! Data-file records (format versions 1 and 2; docs/format.md, "Data record").
//!
//! A record is a fixed 36-byte header followed by the key and the value.
//! Two checksums: one over the header, so a reader scanning for the next
//! record after damage can reject a candidate offset without touching the
//! body, and one over key and value.

use crate::error::DecodeError;

/// Bytes in a record header.
pub const RECORD_HEADER_LEN: usize = 36;

/// The record is a delete marker; it has no value.
pub const FLAG_TOMBSTONE: u8 = 0x01;
/// The record carries an expiry time in `expiry_s`.
pub const FLAG_EXPIRES: u8 = 0x02;
/// The record is one of a batch written as one (format 2): all of the
/// batch is read back, or none of it.
pub const FLAG_BATCH: u8 = 0x04;
/// With [`FLAG_BATCH`]: the batch's first record.
pub const FLAG_BATCH_FIRST: u8 = 0x08;
/// With [`FLAG_BATCH`]: the batch's last record.
pub const FLAG_BATCH_LAST: u8 = 0x10;
const FLAGS_KNOWN: u8 =
    FLAG_TOMBSTONE | FLAG_EXPIRES | FLAG_BATCH | FLAG_BATCH_FIRST | FLAG_BATCH_LAST;

/// Where a record sits in a batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BatchPos {
    /// Written alone.
    #[default]
    Alone,
    First,
    Middle,
    Last,
}

/// Largest key the format can hold (its length is a u16).
pub const MAX_KEY_LEN: usize = u16::MAX as usize;

/// The fixed part of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub body_crc: u32,
    pub flags: u8,
    pub key_len: u16,
    pub value_len: u32,
    /// Store-wide sequence number: the newest record of a key is the one with
    /// the highest `seq`, whatever file it sits in (merge keeps `seq`).
    pub seq: u64,
    /// Wall-clock time of the write, microseconds since the Unix epoch.
    pub timestamp_us: u64,
    /// Expiry, seconds since the Unix epoch; 0 when `FLAG_EXPIRES` is clear.
    pub expiry_s: u32,
}

impl RecordHeader {
    pub fn is_tombstone(&self) -> bool {
        self.flags & FLAG_TOMBSTONE != 0
    }

    pub fn expiry(&self) -> Option<u32> {
        (self.flags & FLAG_EXPIRES != 0).then_some(self.expiry_s)
    }

    /// Where the record sits in a batch.
    pub fn batch(&self) -> BatchPos {
        match (
            self.flags & FLAG_BATCH != 0,
            self.flags & FLAG_BATCH_FIRST != 0,
            self.flags & FLAG_BATCH_LAST != 0,
        ) {
            (false, ..) => BatchPos::Alone,
            (true, true, _) => BatchPos::First,
            (true, false, true) => BatchPos::Last,
            (true, false, false) => BatchPos::Middle,
        }
    }

    /// Total bytes of the record on disk: header, key and value.
    pub fn record_len(&self) -> u64 {
        RECORD_HEADER_LEN as u64 + u64::from(self.key_len) + u64::from(self.value_len)
    }

    /// Decodes and checks a header. The body is checked separately with
    /// [`RecordHeader::check_body`].
    pub fn decode(buf: &[u8]) -> Result<RecordHeader, DecodeError> {
        if buf.len() < RECORD_HEADER_LEN {
            return Err(DecodeError::Truncated {
                needed: RECORD_HEADER_LEN,
                found: buf.len(),
            });
        }
        let stored = u32_at(buf, 0);
        let computed = crc32fast::hash(&buf[4..RECORD_HEADER_LEN]);
        if stored != computed {
            return Err(DecodeError::HeaderChecksum {
                expected: stored,
                got: computed,
            });
        }
        let header = RecordHeader {
            body_crc: u32_at(buf, 4),
            flags: buf[8],
            key_len: u16::from_le_bytes([buf[10], buf[11]]),
            value_len: u32_at(buf, 12),
            seq: u64_at(buf, 16),
            timestamp_us: u64_at(buf, 24),
            expiry_s: u32_at(buf, 32),
        };
        if header.flags & !FLAGS_KNOWN != 0 || buf[9] != 0 {
            return Err(DecodeError::UnknownFlags(header.flags));
        }
        if header.is_tombstone() && header.value_len != 0 {
            return Err(DecodeError::Invalid("tombstone with a value"));
        }
        if header.flags & FLAG_EXPIRES == 0 && header.expiry_s != 0 {
            return Err(DecodeError::Invalid("expiry set without its flag"));
        }
        let edges = FLAG_BATCH_FIRST | FLAG_BATCH_LAST;
        if header.flags & FLAG_BATCH == 0 && header.flags & edges != 0 {
            return Err(DecodeError::Invalid(
                "batch position without the batch flag",
            ));
        }
        if header.flags & edges == edges {
            return Err(DecodeError::Invalid("a batch of one record"));
        }
        Ok(header)
    }

    /// Checks key and value against the header's body checksum.
    pub fn check_body(&self, key: &[u8], value: &[u8]) -> Result<(), DecodeError> {
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(key);
        hasher.update(value);
        let got = hasher.finalize();
        if got != self.body_crc {
            return Err(DecodeError::BodyChecksum {
                expected: self.body_crc,
                got,
            });
        }
        Ok(())
    }
}

/// What a record says, before it is encoded.
#[derive(Clone, Copy, Debug)]
pub struct RecordMeta {
    pub seq: u64,
    pub timestamp_us: u64,
    pub expiry_s: Option<u32>,
    pub tombstone: bool,
    pub batch: BatchPos,
}

/// Appends one encoded record to `out`.
pub fn encode_record(out: &mut Vec<u8>, meta: &RecordMeta, key: &[u8], value: &[u8]) {
    debug_assert!(key.len() <= MAX_KEY_LEN);
    debug_assert!(!meta.tombstone || value.is_empty());
    let mut header = [0u8; RECORD_HEADER_LEN];
    encode_header(&mut header, meta, key, value);
    out.reserve(RECORD_HEADER_LEN + key.len() + value.len());
    out.extend_from_slice(&header);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// Fills a record header for `key` and `value` (both checksums included).
pub fn encode_header(
    header: &mut [u8; RECORD_HEADER_LEN],
    meta: &RecordMeta,
    key: &[u8],
    value: &[u8],
) {
    let mut flags = 0;
    if meta.tombstone {
        flags |= FLAG_TOMBSTONE;
    }
    if meta.expiry_s.is_some() {
        flags |= FLAG_EXPIRES;
    }
    flags |= match meta.batch {
        BatchPos::Alone => 0,
        BatchPos::First => FLAG_BATCH | FLAG_BATCH_FIRST,
        BatchPos::Middle => FLAG_BATCH,
        BatchPos::Last => FLAG_BATCH | FLAG_BATCH_LAST,
    };
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(key);
    hasher.update(value);
    header[4..8].copy_from_slice(&hasher.finalize().to_le_bytes());
    header[8] = flags;
    header[9] = 0;
    header[10..12].copy_from_slice(&(key.len() as u16).to_le_bytes());
    header[12..16].copy_from_slice(&(value.len() as u32).to_le_bytes());
    header[16..24].copy_from_slice(&meta.seq.to_le_bytes());
    header[24..32].copy_from_slice(&meta.timestamp_us.to_le_bytes());
    header[32..36].copy_from_slice(&meta.expiry_s.unwrap_or(0).to_le_bytes());
    let crc = crc32fast::hash(&header[4..]);
    header[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// A whole record decoded from a buffer that holds it.
#[derive(Debug)]
pub struct DecodedRecord<'a> {
    pub header: RecordHeader,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// Decodes and checks the record at the start of `buf`.
pub fn decode_record(buf: &[u8]) -> Result<DecodedRecord<'_>, DecodeError> {
    let header = RecordHeader::decode(buf)?;
    let len = header.record_len();
    if (buf.len() as u64) < len {
        return Err(DecodeError::Truncated {
            needed: len as usize,
            found: buf.len(),
        });
    }
    let key_end = RECORD_HEADER_LEN + header.key_len as usize;
    let key = &buf[RECORD_HEADER_LEN..key_end];
    let value = &buf[key_end..len as usize];
    header.check_body(key, value)?;
    Ok(DecodedRecord { header, key, value })
}

pub(crate) fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

pub(crate) fn u64_at(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(seq: u64) -> RecordMeta {
        RecordMeta {
            seq,
            timestamp_us: 1_700_000_000_000_000,
            expiry_s: Some(1_800_000_000),
            tombstone: false,
            batch: BatchPos::Alone,
        }
    }

    #[test]
    fn batch_positions_round_trip_and_bad_combinations_are_refused() {
        for pos in [
            BatchPos::Alone,
            BatchPos::First,
            BatchPos::Middle,
            BatchPos::Last,
        ] {
            let mut buf = Vec::new();
            encode_record(
                &mut buf,
                &RecordMeta {
                    batch: pos,
                    ..meta(5)
                },
                b"k",
                b"v",
            );
            assert_eq!(decode_record(&buf).unwrap().header.batch(), pos);
        }
        for flags in [
            FLAG_BATCH_FIRST,
            FLAG_BATCH_LAST,
            FLAG_BATCH | FLAG_BATCH_FIRST | FLAG_BATCH_LAST,
            0x20,
        ] {
            let mut buf = Vec::new();
            encode_record(&mut buf, &meta(5), b"k", b"v");
            buf[8] |= flags;
            let crc = crc32fast::hash(&buf[4..RECORD_HEADER_LEN]);
            buf[0..4].copy_from_slice(&crc.to_le_bytes());
            assert!(decode_record(&buf).is_err(), "flags {flags:#x}");
        }
    }

    #[test]
    fn round_trip() {
        let mut buf = Vec::new();
        encode_record(&mut buf, &meta(7), b"key", b"value");
        assert_eq!(buf.len(), RECORD_HEADER_LEN + 8);
        let rec = decode_record(&buf).unwrap();
        assert_eq!(rec.key, b"key");
        assert_eq!(rec.value, b"value");
        assert_eq!(rec.header.seq, 7);
        assert_eq!(rec.header.expiry(), Some(1_800_000_000));
        assert!(!rec.header.is_tombstone());
    }

    #[test]
    fn a_value_that_looks_like_a_tombstone_is_still_a_value() {
        // Riak's Bitcask marks deletes with a magic value; ours is a flag, so
        // no value can read as deleted.
        let mut buf = Vec::new();
        encode_record(&mut buf, &meta(1), b"k", b"bitcask_tombstone2");
        assert!(!decode_record(&buf).unwrap().header.is_tombstone());
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let mut clean = Vec::new();
        encode_record(&mut clean, &meta(3), b"some key", b"some value bytes");
        for at in 0..clean.len() {
            let mut bad = clean.clone();
            bad[at] ^= 0x40;
            assert!(decode_record(&bad).is_err(), "flip at {at} went unnoticed");
        }
    }

    #[test]
    fn truncation_is_reported() {
        let mut buf = Vec::new();
        encode_record(&mut buf, &meta(3), b"k", b"v");
        for len in 0..buf.len() {
            assert!(decode_record(&buf[..len]).is_err());
        }
    }
}
