//! The write-ahead log's bytes (docs/format.md, "Sensor write-ahead log",
//! version 2), pure: a segment's header, and records of entries.
//!
//! A segment starts with a 16-byte header: the magic `RSWL`, the version
//! (2; segments of version 1, without member entries, are read too),
//! three zero bytes, and the segment's number (u64, little-endian).
//! Records follow back to back: the payload's length (u32 LE), its CRC-32
//! (u32 LE), the payload. A payload is entries, each a kind byte and its
//! fields, integers as LEB128 varints:
//!
//! - `1` series: id, database length and bytes, key length and bytes
//!   (a series that is its own group, without a group key);
//! - `3` member (version 2): id, database length and bytes, key length
//!   and bytes, the group's id, the group key's length and bytes;
//! - `2` samples: series id, count, the first timestamp (zigzag), each
//!   later one as the zigzag difference from the one before, then each
//!   value as 8 bytes (f64 bits, LE).

use rill_sensor::{unzigzag, zigzag, Sample};

pub const MAGIC: &[u8; 4] = b"RSWL";
/// The version written; a reader takes 1 and 2.
pub const VERSION: u8 = 2;
pub const HEADER_BYTES: usize = 16;
/// Record framing: length and CRC.
pub const FRAME_BYTES: usize = 8;
/// No record is larger (a writer's batch is split below this).
pub const MAX_RECORD_BYTES: usize = 16 << 20;
/// Samples of one entry at most (a longer run is split).
pub const MAX_ENTRY_SAMPLES: usize = 1 << 16;
/// Series keys and database names are shorter.
pub const MAX_NAME_BYTES: usize = 64 << 10;

const SERIES: u8 = 1;
const SAMPLES: u8 = 2;
const MEMBER: u8 = 3;

/// One entry of the log.
#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    /// A series gets its id and its group (before its first samples);
    /// `group_key` is the group's key (empty for a series that is its own
    /// group without one).
    Series {
        id: u64,
        db: Vec<u8>,
        key: Vec<u8>,
        group: u64,
        group_key: Vec<u8>,
    },
    /// Samples of a series, in the order they were written.
    Samples { id: u64, samples: Vec<Sample> },
}

/// Why bytes are not a record or a segment header.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormatError {
    #[error("not a write-ahead log segment")]
    Magic,
    #[error("write-ahead log version {0}, newer than this build reads (1 and 2)")]
    Version(u8),
    #[error("record ends past the end")]
    Truncated,
    #[error("record checksum does not match")]
    Checksum,
    #[error("damaged record: {0}")]
    Invalid(&'static str),
}

pub fn segment_header(number: u64) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    h[..4].copy_from_slice(MAGIC);
    h[4] = VERSION;
    h[8..].copy_from_slice(&number.to_le_bytes());
    h
}

/// The segment number a header holds.
pub fn parse_segment_header(b: &[u8]) -> Result<u64, FormatError> {
    if b.len() < HEADER_BYTES {
        return Err(FormatError::Truncated);
    }
    if &b[..4] != MAGIC {
        return Err(FormatError::Magic);
    }
    match b[4] {
        1 | VERSION => {}
        0 => return Err(FormatError::Invalid("version 0")),
        v => return Err(FormatError::Version(v)),
    }
    if b[5..8] != [0, 0, 0] {
        return Err(FormatError::Invalid("reserved header bytes"));
    }
    Ok(u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")))
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends one entry to a payload; refuses (writing nothing) what the
/// reader would refuse, so the log never acknowledges a record it cannot
/// read back.
pub fn encode_entry(out: &mut Vec<u8>, e: &Entry) -> Result<(), FormatError> {
    match e {
        Entry::Series {
            id,
            db,
            key,
            group,
            group_key,
        } => {
            if db.len() > MAX_NAME_BYTES
                || key.len() > MAX_NAME_BYTES
                || group_key.len() > MAX_NAME_BYTES
            {
                return Err(FormatError::Invalid("name longer than allowed"));
            }
            let member = group != id || !group_key.is_empty();
            out.push(if member { MEMBER } else { SERIES });
            put_varint(out, *id);
            put_varint(out, db.len() as u64);
            out.extend_from_slice(db);
            put_varint(out, key.len() as u64);
            out.extend_from_slice(key);
            if member {
                put_varint(out, *group);
                put_varint(out, group_key.len() as u64);
                out.extend_from_slice(group_key);
            }
            Ok(())
        }
        Entry::Samples { id, samples } => encode_samples(out, *id, samples),
    }
}

/// Appends a samples entry: 1 to [`MAX_ENTRY_SAMPLES`] samples (split a
/// longer run).
pub fn encode_samples(out: &mut Vec<u8>, id: u64, samples: &[Sample]) -> Result<(), FormatError> {
    if samples.is_empty() || samples.len() > MAX_ENTRY_SAMPLES {
        return Err(FormatError::Invalid("sample count"));
    }
    out.push(SAMPLES);
    put_varint(out, id);
    put_varint(out, samples.len() as u64);
    let mut prev = 0i64;
    for (i, s) in samples.iter().enumerate() {
        let d = if i == 0 {
            s.ts
        } else {
            s.ts.wrapping_sub(prev)
        };
        put_varint(out, zigzag(d));
        prev = s.ts;
    }
    for s in samples {
        out.extend_from_slice(&s.value.to_bits().to_le_bytes());
    }
    Ok(())
}

/// What goes before `payload` in its record: length and CRC.
pub fn frame_header(payload: &[u8]) -> [u8; FRAME_BYTES] {
    let mut h = [0u8; FRAME_BYTES];
    h[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[4..].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
    h
}

/// A record of `payload`: length, CRC, payload.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAME_BYTES + payload.len());
    out.extend_from_slice(&frame_header(payload));
    out.extend_from_slice(payload);
    out
}

/// The record at the start of `b`: its payload and the bytes it took.
pub fn read_record(b: &[u8]) -> Result<(&[u8], usize), FormatError> {
    if b.len() < FRAME_BYTES {
        return Err(FormatError::Truncated);
    }
    let len = u32::from_le_bytes(b[..4].try_into().expect("4 bytes")) as usize;
    if len > MAX_RECORD_BYTES {
        return Err(FormatError::Invalid("record longer than any written"));
    }
    if len == 0 {
        return Err(FormatError::Invalid("empty record"));
    }
    let Some(payload) = b.get(FRAME_BYTES..FRAME_BYTES + len) else {
        return Err(FormatError::Truncated);
    };
    let crc = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes"));
    if crc32fast::hash(payload) != crc {
        return Err(FormatError::Checksum);
    }
    Ok((payload, FRAME_BYTES + len))
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, FormatError> {
        let v = *self
            .b
            .get(self.at)
            .ok_or(FormatError::Invalid("entry past the record's end"))?;
        self.at += 1;
        Ok(v)
    }

    fn varint(&mut self) -> Result<u64, FormatError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return Err(FormatError::Invalid("varint over 64 bits"));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(FormatError::Invalid("varint over 64 bits"))
    }

    fn bytes(&mut self, max: usize) -> Result<Vec<u8>, FormatError> {
        let n = self.varint()?;
        if n > max as u64 {
            return Err(FormatError::Invalid("name longer than allowed"));
        }
        let end = self.at + n as usize;
        let v = self
            .b
            .get(self.at..end)
            .ok_or(FormatError::Invalid("name past the record's end"))?;
        self.at = end;
        Ok(v.to_vec())
    }
}

/// The entries of a record's payload, in order.
pub fn decode_payload(payload: &[u8]) -> Result<Vec<Entry>, FormatError> {
    let mut r = Reader { b: payload, at: 0 };
    let mut out = Vec::new();
    while r.at < payload.len() {
        match r.byte()? {
            kind @ (SERIES | MEMBER) => {
                let id = r.varint()?;
                let db = r.bytes(MAX_NAME_BYTES)?;
                let key = r.bytes(MAX_NAME_BYTES)?;
                let (group, group_key) = if kind == MEMBER {
                    (r.varint()?, r.bytes(MAX_NAME_BYTES)?)
                } else {
                    (id, Vec::new())
                };
                out.push(Entry::Series {
                    id,
                    db,
                    key,
                    group,
                    group_key,
                });
            }
            SAMPLES => {
                let id = r.varint()?;
                let n = r.varint()?;
                // Each sample takes at least 9 bytes: checked before
                // allocating for a count that damage made up.
                if n == 0 || n > MAX_ENTRY_SAMPLES as u64 || n * 9 > (payload.len() - r.at) as u64 {
                    return Err(FormatError::Invalid("sample count"));
                }
                let n = n as usize;
                let mut samples = Vec::with_capacity(n);
                let mut ts = 0i64;
                for i in 0..n {
                    let d = unzigzag(r.varint()?);
                    ts = if i == 0 { d } else { ts.wrapping_add(d) };
                    samples.push(Sample { ts, value: 0.0 });
                }
                let values =
                    r.b.get(r.at..r.at + 8 * n)
                        .ok_or(FormatError::Invalid("values past the record's end"))?;
                for (s, v) in samples.iter_mut().zip(values.chunks_exact(8)) {
                    s.value = f64::from_bits(u64::from_le_bytes(v.try_into().expect("8 bytes")));
                }
                r.at += 8 * n;
                out.push(Entry::Samples { id, samples });
            }
            _ => return Err(FormatError::Invalid("unknown entry kind")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entries() -> impl Strategy<Value = Vec<Entry>> {
        let series = (
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..20),
            proptest::collection::vec(any::<u8>(), 0..40),
            prop_oneof![Just(None), any::<u64>().prop_map(Some)],
            proptest::collection::vec(any::<u8>(), 0..3),
        )
            .prop_map(|(id, db, key, group, group_key)| Entry::Series {
                id,
                db,
                key,
                group: group.unwrap_or(id),
                group_key,
            });
        let samples = (
            any::<u64>(),
            proptest::collection::vec((any::<i64>(), any::<u64>()), 1..50),
        )
            .prop_map(|(id, s)| Entry::Samples {
                id,
                samples: s
                    .into_iter()
                    .map(|(ts, v)| Sample {
                        ts,
                        value: f64::from_bits(v),
                    })
                    .collect(),
            });
        proptest::collection::vec(prop_oneof![series, samples], 1..10)
    }

    fn same(a: &[Entry], b: &[Entry]) -> bool {
        // Bit for bit (NaN payloads included).
        format!("{a:?}") == format!("{b:?}")
            && a.iter().zip(b).all(|(x, y)| match (x, y) {
                (Entry::Samples { samples: s, .. }, Entry::Samples { samples: t, .. }) => s
                    .iter()
                    .zip(t)
                    .all(|(p, q)| p.ts == q.ts && p.value.to_bits() == q.value.to_bits()),
                _ => true,
            })
    }

    proptest! {
        #[test]
        fn records_round_trip(es in entries()) {
            let mut payload = Vec::new();
            for e in &es {
                encode_entry(&mut payload, e).unwrap();
            }
            let rec = frame(&payload);
            let (p, used) = read_record(&rec).unwrap();
            prop_assert_eq!(used, rec.len());
            prop_assert!(same(&decode_payload(p).unwrap(), &es));
        }

        #[test]
        fn any_bytes_decode_or_fail_without_panicking(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = read_record(&b);
            let _ = decode_payload(&b);
            let _ = parse_segment_header(&b);
        }

        #[test]
        fn a_flipped_bit_is_caught(es in entries(), at in any::<usize>(), bit in 0u8..8) {
            let mut payload = Vec::new();
            for e in &es {
                encode_entry(&mut payload, e).unwrap();
            }
            let mut rec = frame(&payload);
            let i = at % rec.len();
            rec[i] ^= 1 << bit;
            // (A flip in the length frames a shorter record, whose bytes
            // then fail the checksum.)
            prop_assert!(read_record(&rec).is_err());
        }
    }

    #[test]
    fn headers() {
        let h = segment_header(42);
        assert_eq!(parse_segment_header(&h), Ok(42));
        let mut older = h;
        older[4] = 1;
        assert_eq!(parse_segment_header(&older), Ok(42));
        let mut newer = h;
        newer[4] = 3;
        assert_eq!(parse_segment_header(&newer), Err(FormatError::Version(3)));
        assert_eq!(
            parse_segment_header(b"RSWX\x01\0\0\0\0\0\0\0\0\0\0\0"),
            Err(FormatError::Magic)
        );
        assert_eq!(parse_segment_header(&h[..15]), Err(FormatError::Truncated));
    }

    #[test]
    fn what_the_reader_refuses_is_never_encoded() {
        let mut out = Vec::new();
        let many = vec![Sample { ts: 1, value: 1.0 }; MAX_ENTRY_SAMPLES + 1];
        assert!(encode_samples(&mut out, 1, &many).is_err());
        assert!(encode_samples(&mut out, 1, &[]).is_err());
        let long = Entry::Series {
            id: 1,
            db: vec![b'd'; MAX_NAME_BYTES + 1],
            key: Vec::new(),
            group: 1,
            group_key: Vec::new(),
        };
        assert!(encode_entry(&mut out, &long).is_err());
        let long_group = Entry::Series {
            id: 1,
            db: Vec::new(),
            key: Vec::new(),
            group: 1,
            group_key: vec![b'g'; MAX_NAME_BYTES + 1],
        };
        assert!(encode_entry(&mut out, &long_group).is_err());
        assert!(out.is_empty());
        assert!(encode_samples(&mut out, 1, &many[..MAX_ENTRY_SAMPLES]).is_ok());
        assert_eq!(decode_payload(&out).unwrap().len(), 1);
    }

    #[test]
    fn a_hostile_count_is_refused_before_allocating() {
        let mut payload = vec![SAMPLES];
        put_varint(&mut payload, 1);
        put_varint(&mut payload, MAX_ENTRY_SAMPLES as u64);
        assert_eq!(
            decode_payload(&payload),
            Err(FormatError::Invalid("sample count"))
        );
    }
}
