//! Hint files (format version 1; docs/format.md, "Hint file").
//!
//! A hint file lists every record of one data file, in file order, without
//! values: enough to rebuild the keydir and the file's statistics without
//! reading the data file. It ends with a trailer holding the entry count and
//! a checksum over all entries; a hint without a valid trailer is damaged and
//! the data file is scanned instead.

use super::file_header::{decode_file_header, FileKind, FILE_HEADER_LEN};
use super::record::{u32_at, u64_at, FLAG_EXPIRES, FLAG_TOMBSTONE};
use crate::error::DecodeError;

pub const HINT_ENTRY_FIXED_LEN: usize = 24;
pub const HINT_TRAILER_LEN: usize = 16;
pub const HINT_TRAILER_MAGIC: [u8; 4] = *b"HEND";

/// One record as a hint file describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HintEntry<'a> {
    pub key: &'a [u8],
    pub tombstone: bool,
    pub expiry_s: Option<u32>,
    /// Offset of the record in the data file.
    pub offset: u32,
    /// Total record length (header, key and value).
    pub record_len: u32,
    pub seq: u64,
}

pub fn encode_hint_entry(out: &mut Vec<u8>, e: &HintEntry<'_>) {
    let mut flags = 0u8;
    if e.tombstone {
        flags |= FLAG_TOMBSTONE;
    }
    if e.expiry_s.is_some() {
        flags |= FLAG_EXPIRES;
    }
    out.push(flags);
    out.push(0);
    out.extend_from_slice(&(e.key.len() as u16).to_le_bytes());
    out.extend_from_slice(&e.record_len.to_le_bytes());
    out.extend_from_slice(&e.offset.to_le_bytes());
    out.extend_from_slice(&e.expiry_s.unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&e.seq.to_le_bytes());
    out.extend_from_slice(e.key);
}

/// `crc` covers the file header and every entry.
pub fn encode_hint_trailer(entry_count: u64, crc: u32) -> [u8; HINT_TRAILER_LEN] {
    let mut out = [0u8; HINT_TRAILER_LEN];
    out[..8].copy_from_slice(&entry_count.to_le_bytes());
    out[8..12].copy_from_slice(&crc.to_le_bytes());
    out[12..16].copy_from_slice(&HINT_TRAILER_MAGIC);
    out
}

/// A whole hint file, checked: header, trailer, checksum and every entry's
/// bounds. Iterating yields the entries in order.
#[derive(Debug)]
pub struct HintFile<'a> {
    pub file_id: u32,
    entries: &'a [u8],
    count: u64,
}

impl<'a> HintFile<'a> {
    pub fn parse(buf: &'a [u8]) -> Result<HintFile<'a>, DecodeError> {
        let file_id = decode_file_header(FileKind::Hint, buf)?;
        if buf.len() < FILE_HEADER_LEN + HINT_TRAILER_LEN {
            return Err(DecodeError::Truncated {
                needed: FILE_HEADER_LEN + HINT_TRAILER_LEN,
                found: buf.len(),
            });
        }
        let trailer = &buf[buf.len() - HINT_TRAILER_LEN..];
        if trailer[12..16] != HINT_TRAILER_MAGIC {
            return Err(DecodeError::Invalid("hint trailer missing"));
        }
        let count = u64_at(trailer, 0);
        let expected = u32_at(trailer, 8);
        let entries = &buf[FILE_HEADER_LEN..buf.len() - HINT_TRAILER_LEN];
        // The checksum covers the file header too, so the file id is checked.
        let got = crc32fast::hash(&buf[..buf.len() - HINT_TRAILER_LEN]);
        if got != expected {
            return Err(DecodeError::BodyChecksum { expected, got });
        }
        let hint = HintFile {
            file_id,
            entries,
            count,
        };
        // Walk once so iteration afterwards cannot fail.
        let mut seen = 0u64;
        let mut rest = entries;
        while !rest.is_empty() {
            let (_, used) = decode_entry(rest)?;
            rest = &rest[used..];
            seen += 1;
        }
        if seen != count {
            return Err(DecodeError::Invalid(
                "hint entry count does not match trailer",
            ));
        }
        Ok(hint)
    }

    pub fn len(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn iter(&self) -> HintIter<'a> {
        HintIter { rest: self.entries }
    }

    /// The entries cut into runs of at most `per_chunk`, for loading them
    /// from several threads.
    pub fn chunks(&self, per_chunk: usize) -> Vec<HintIter<'a>> {
        let per_chunk = per_chunk.max(1);
        let mut out = Vec::new();
        let mut start = 0;
        let mut at = 0;
        let mut n = 0;
        while at < self.entries.len() {
            let key_len = u16::from_le_bytes([self.entries[at + 2], self.entries[at + 3]]) as usize;
            at += HINT_ENTRY_FIXED_LEN + key_len;
            n += 1;
            if n == per_chunk {
                out.push(HintIter {
                    rest: &self.entries[start..at],
                });
                start = at;
                n = 0;
            }
        }
        if start < at {
            out.push(HintIter {
                rest: &self.entries[start..at],
            });
        }
        out
    }
}

#[derive(Clone)]
pub struct HintIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for HintIter<'a> {
    type Item = HintEntry<'a>;

    fn next(&mut self) -> Option<HintEntry<'a>> {
        if self.rest.is_empty() {
            return None;
        }
        // `HintFile::parse` validated every entry.
        let (entry, used) = decode_entry(self.rest).expect("validated hint entry");
        self.rest = &self.rest[used..];
        Some(entry)
    }
}

fn decode_entry(buf: &[u8]) -> Result<(HintEntry<'_>, usize), DecodeError> {
    if buf.len() < HINT_ENTRY_FIXED_LEN {
        return Err(DecodeError::Truncated {
            needed: HINT_ENTRY_FIXED_LEN,
            found: buf.len(),
        });
    }
    let flags = buf[0];
    if flags & !(FLAG_TOMBSTONE | FLAG_EXPIRES) != 0 || buf[1] != 0 {
        return Err(DecodeError::UnknownFlags(flags));
    }
    let key_len = u16::from_le_bytes([buf[2], buf[3]]) as usize;
    let used = HINT_ENTRY_FIXED_LEN + key_len;
    if buf.len() < used {
        return Err(DecodeError::Truncated {
            needed: used,
            found: buf.len(),
        });
    }
    let record_len = u32_at(buf, 4);
    let min_len = super::record::RECORD_HEADER_LEN + key_len;
    if (record_len as usize) < min_len {
        return Err(DecodeError::Invalid(
            "hint record length shorter than its key",
        ));
    }
    let expiry = u32_at(buf, 12);
    if flags & FLAG_EXPIRES == 0 && expiry != 0 {
        return Err(DecodeError::Invalid("expiry set without its flag"));
    }
    let entry = HintEntry {
        key: &buf[HINT_ENTRY_FIXED_LEN..used],
        tombstone: flags & FLAG_TOMBSTONE != 0,
        expiry_s: (flags & FLAG_EXPIRES != 0).then_some(expiry),
        offset: u32_at(buf, 8),
        record_len,
        seq: u64_at(buf, 16),
    };
    Ok((entry, used))
}

#[cfg(test)]
mod tests {
    use super::super::file_header::encode_file_header;
    use super::*;

    fn build(entries: &[HintEntry<'_>]) -> Vec<u8> {
        let mut out = encode_file_header(FileKind::Hint, 9).to_vec();
        let mut body = Vec::new();
        for e in entries {
            encode_hint_entry(&mut body, e);
        }
        out.extend_from_slice(&body);
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&encode_hint_trailer(entries.len() as u64, crc));
        out
    }

    fn sample() -> Vec<HintEntry<'static>> {
        vec![
            HintEntry {
                key: b"alpha",
                tombstone: false,
                expiry_s: None,
                offset: 16,
                record_len: 100,
                seq: 1,
            },
            HintEntry {
                key: b"beta",
                tombstone: true,
                expiry_s: Some(12),
                offset: 116,
                record_len: 40,
                seq: 2,
            },
        ]
    }

    #[test]
    fn round_trip() {
        let bytes = build(&sample());
        let hint = HintFile::parse(&bytes).unwrap();
        assert_eq!(hint.file_id, 9);
        assert_eq!(hint.iter().collect::<Vec<_>>(), sample());
        for per in 1..4 {
            let chunks = hint.chunks(per);
            assert_eq!(chunks.len(), sample().len().div_ceil(per));
            let joined: Vec<_> = chunks.into_iter().flatten().collect();
            assert_eq!(joined, sample());
        }
    }

    #[test]
    fn any_damage_is_detected() {
        let bytes = build(&sample());
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x01;
            assert!(HintFile::parse(&bad).is_err(), "flip at {at}");
        }
        for len in 0..bytes.len() {
            assert!(HintFile::parse(&bytes[..len]).is_err(), "cut at {len}");
        }
    }
}
