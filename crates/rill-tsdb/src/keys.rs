//! What the sensor stores hold (docs/format.md, "Sensor stores", version
//! 2), pure: block keys in a database's store, and series records in the
//! catalog store.
//!
//! - A block's key: `B`, the group's id (u64 BE; for a series that is its
//!   own group, the series' id), the window's start (i64 BE with its sign
//!   bit flipped, so byte order is time order), the part (u32 BE): 21
//!   bytes. Its value is a sensor block: version 1 holds the samples of
//!   the series the key names, version 2 (a group block) a column per
//!   series of the group.
//! - A series record's key: `S`, the series id (u64 BE); its value: the
//!   database's length (u16 BE), the database, the series key (the rest).
//!   The series is its own group.
//! - A member record's key (version 2, a series in a group): `M`, the
//!   series id (u64 BE); its value: the group's id (u64 BE), the
//!   database's length (u16 BE), the database, the group key's length
//!   (u32 BE), the group key, the series key (the rest).

use crate::catalog::Definition;

/// The first byte of a block's key.
pub const BLOCK: u8 = b'B';
/// The first byte of a series record's key.
pub const SERIES: u8 = b'S';
/// The first byte of a member record's key.
pub const MEMBER: u8 = b'M';
/// The key of the window record in the catalog store: the window length
/// the stores were written with (ns, i64 big-endian). Blocks are found
/// by their window's start, so data written with one window length is
/// not found under another.
pub const WINDOW: &[u8] = b"W";
/// The key of the id floor record in the catalog store: the first
/// series id that may be given (u64 big-endian), raised when series leave
/// the node, so an id the log may still name is never given again.
pub const NEXT_ID: &[u8] = b"N";
/// Bytes of a block's key.
pub const BLOCK_KEY_BYTES: usize = 21;
/// Database names and series keys are at most this long.
pub const MAX_NAME_BYTES: usize = 64 << 10;

/// The key of part `part` of `series`' window starting at `window`.
pub fn block_key(series: u64, window: i64, part: u32) -> [u8; BLOCK_KEY_BYTES] {
    let mut k = [0u8; BLOCK_KEY_BYTES];
    k[0] = BLOCK;
    k[1..9].copy_from_slice(&series.to_be_bytes());
    k[9..17].copy_from_slice(&((window as u64) ^ (1 << 63)).to_be_bytes());
    k[17..].copy_from_slice(&part.to_be_bytes());
    k
}

/// Series, window and part of a block's key (`None`: not one).
pub fn parse_block_key(k: &[u8]) -> Option<(u64, i64, u32)> {
    if k.len() != BLOCK_KEY_BYTES || k[0] != BLOCK {
        return None;
    }
    let series = u64::from_be_bytes(k[1..9].try_into().ok()?);
    let window = (u64::from_be_bytes(k[9..17].try_into().ok()?) ^ (1 << 63)) as i64;
    let part = u32::from_be_bytes(k[17..].try_into().ok()?);
    Some((series, window, part))
}

/// The key of series `id`'s record.
pub fn series_record_key(id: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = SERIES;
    k[1..].copy_from_slice(&id.to_be_bytes());
    k
}

/// The id of a series record's key (`None`: not one).
pub fn parse_series_record_key(k: &[u8]) -> Option<u64> {
    match k {
        [SERIES, id @ ..] => Some(u64::from_be_bytes(id.try_into().ok()?)),
        _ => None,
    }
}

/// Why bytes are not a series record.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordError {
    #[error("series record ends early")]
    Truncated,
    #[error("series record names are not UTF-8")]
    NotUtf8,
    #[error("series record name longer than {MAX_NAME_BYTES} bytes")]
    TooLong,
}

/// A series record's value: its database and key.
pub fn encode_series_record(db: &str, key: &str) -> Result<Vec<u8>, RecordError> {
    if db.len() > usize::from(u16::MAX) || key.len() > MAX_NAME_BYTES {
        return Err(RecordError::TooLong);
    }
    let mut v = Vec::with_capacity(2 + db.len() + key.len());
    v.extend_from_slice(&(db.len() as u16).to_be_bytes());
    v.extend_from_slice(db.as_bytes());
    v.extend_from_slice(key.as_bytes());
    Ok(v)
}

/// The database and key of a series record's value.
pub fn decode_series_record(v: &[u8]) -> Result<(String, String), RecordError> {
    let len_bytes: [u8; 2] = v
        .get(..2)
        .and_then(|b| b.try_into().ok())
        .ok_or(RecordError::Truncated)?;
    let db_len = usize::from(u16::from_be_bytes(len_bytes));
    let db = v.get(2..2 + db_len).ok_or(RecordError::Truncated)?;
    let key = &v[2 + db_len..];
    if key.len() > MAX_NAME_BYTES {
        return Err(RecordError::TooLong);
    }
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| RecordError::NotUtf8);
    Ok((text(db)?, text(key)?))
}

/// The catalog store's record of a series: its key and value (a series
/// record where the series is its own group without a group key, else a
/// member record).
pub fn record_of(d: &Definition) -> Result<(Vec<u8>, Vec<u8>), RecordError> {
    if d.db.len() > usize::from(u16::MAX)
        || d.key.len() > MAX_NAME_BYTES
        || d.group_key.len() > MAX_NAME_BYTES
    {
        return Err(RecordError::TooLong);
    }
    if d.group == d.id && d.group_key.is_empty() {
        return Ok((
            series_record_key(d.id).to_vec(),
            encode_series_record(&d.db, &d.key)?,
        ));
    }
    let mut v = Vec::with_capacity(14 + d.db.len() + d.group_key.len() + d.key.len());
    v.extend_from_slice(&d.group.to_be_bytes());
    v.extend_from_slice(&(d.db.len() as u16).to_be_bytes());
    v.extend_from_slice(d.db.as_bytes());
    v.extend_from_slice(&(d.group_key.len() as u32).to_be_bytes());
    v.extend_from_slice(d.group_key.as_bytes());
    v.extend_from_slice(d.key.as_bytes());
    let mut k = series_record_key(d.id);
    k[0] = MEMBER;
    Ok((k.to_vec(), v))
}

/// The definition a catalog store record holds (`None`: not a record).
pub fn definition_of(k: &[u8], v: &[u8]) -> Option<Result<Definition, RecordError>> {
    match k.first() {
        Some(&SERIES) => {
            let id = parse_series_record_key(k)?;
            Some(decode_series_record(v).map(|(db, key)| Definition {
                id,
                db,
                key,
                group: id,
                group_key: String::new(),
            }))
        }
        Some(&MEMBER) if k.len() == 9 => {
            let id = u64::from_be_bytes(k[1..].try_into().ok()?);
            Some(decode_member_record(id, v))
        }
        _ => None,
    }
}

fn decode_member_record(id: u64, v: &[u8]) -> Result<Definition, RecordError> {
    let take = |at: usize, n: usize| v.get(at..at + n).ok_or(RecordError::Truncated);
    let group = u64::from_be_bytes(take(0, 8)?.try_into().expect("8 bytes"));
    let db_len = usize::from(u16::from_be_bytes(take(8, 2)?.try_into().expect("2 bytes")));
    let db = take(10, db_len)?;
    let at = 10 + db_len;
    let g_len = u32::from_be_bytes(take(at, 4)?.try_into().expect("4 bytes")) as usize;
    if g_len > MAX_NAME_BYTES {
        return Err(RecordError::TooLong);
    }
    let group_key = take(at + 4, g_len)?;
    let key = &v[at + 4 + g_len..];
    if key.len() > MAX_NAME_BYTES {
        return Err(RecordError::TooLong);
    }
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| RecordError::NotUtf8);
    Ok(Definition {
        id,
        db: text(db)?,
        key: text(key)?,
        group,
        group_key: text(group_key)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn block_keys_sort_as_series_window_part(
            a in (any::<u64>(), any::<i64>(), any::<u32>()),
            b in (any::<u64>(), any::<i64>(), any::<u32>()),
        ) {
            let (ka, kb) = (block_key(a.0, a.1, a.2), block_key(b.0, b.1, b.2));
            prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            prop_assert_eq!(parse_block_key(&ka), Some(a));
        }

        #[test]
        fn series_records_come_back(db in ".{0,40}", key in ".{0,200}", id in any::<u64>()) {
            let v = encode_series_record(&db, &key).unwrap();
            prop_assert_eq!(decode_series_record(&v), Ok((db, key)));
            prop_assert_eq!(parse_series_record_key(&series_record_key(id)), Some(id));
        }

        #[test]
        fn definitions_come_back(
            db in ".{0,40}", key in ".{0,200}", gk in ".{0,60}", id in any::<u64>(),
            group in any::<u64>(), own in any::<bool>(),
        ) {
            let d = Definition {
                id,
                db,
                key,
                group: if own { id } else { group },
                group_key: gk,
            };
            let (k, v) = record_of(&d).unwrap();
            prop_assert_eq!(k[0], if d.group == id && d.group_key.is_empty() { SERIES } else { MEMBER });
            prop_assert_eq!(definition_of(&k, &v), Some(Ok(d)));
        }

        #[test]
        fn any_bytes_decode_or_fail_cleanly(v in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = definition_of(&v, &v);
            let _ = definition_of(b"M12345678", &v);
            let _ = decode_series_record(&v);
            let _ = parse_block_key(&v);
            let _ = parse_series_record_key(&v);
        }
    }

    #[test]
    fn bad_records_are_refused() {
        assert_eq!(decode_series_record(&[]), Err(RecordError::Truncated));
        assert_eq!(
            decode_series_record(&[0, 5, b'a']),
            Err(RecordError::Truncated)
        );
        assert_eq!(
            decode_series_record(&[0, 1, 0xff]),
            Err(RecordError::NotUtf8)
        );
        assert_eq!(
            decode_series_record(&[0, 0]),
            Ok((String::new(), String::new()))
        );
        assert_eq!(parse_block_key(&block_key(1, 2, 3)[..20]), None);
        assert_eq!(parse_series_record_key(b"Sshort"), None);
        assert_eq!(parse_series_record_key(&block_key(1, 2, 3)), None);
        assert!(encode_series_record(&"x".repeat(MAX_NAME_BYTES + 1), "k").is_err());
    }
}
