//! The merge manifest (docs/format.md, "Merge manifest"): the list of
//! input files a merge deletes, made durable before the first of them is
//! unlinked, so the deletion is all or nothing across a crash.
//!
//! ```text
//! magic "RILLBCM\0" | version u8 = 1 | reserved [0; 3] | count u32 |
//! count x file id u32 | crc32 u32 (of every byte before it)
//! ```

use crate::error::DecodeError;

pub const MANIFEST_MAGIC: [u8; 8] = *b"RILLBCM\0";
pub const MANIFEST_VERSION: u8 = 1;
const FIXED_LEN: usize = 16;

/// Encodes the ids of the files a merge deletes.
pub fn encode_manifest(file_ids: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FIXED_LEN + 4 * file_ids.len() + 4);
    out.extend_from_slice(&MANIFEST_MAGIC);
    out.push(MANIFEST_VERSION);
    out.extend_from_slice(&[0; 3]);
    out.extend_from_slice(&(file_ids.len() as u32).to_le_bytes());
    for id in file_ids {
        out.extend_from_slice(&id.to_le_bytes());
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a manifest; any damage is an error (a manifest is fsynced
/// before it is acted on, so a torn one was never acted on).
pub fn decode_manifest(buf: &[u8]) -> Result<Vec<u32>, DecodeError> {
    if buf.len() < FIXED_LEN + 4 {
        return Err(DecodeError::Truncated {
            needed: FIXED_LEN + 4,
            found: buf.len(),
        });
    }
    if buf[..8] != MANIFEST_MAGIC {
        return Err(DecodeError::BadMagic);
    }
    if buf[8] != MANIFEST_VERSION {
        return Err(DecodeError::UnsupportedVersion(buf[8]));
    }
    if buf[9..12] != [0; 3] {
        return Err(DecodeError::Invalid("reserved manifest bytes are not zero"));
    }
    let count = u32::from_le_bytes(buf[12..16].try_into().expect("4 bytes")) as usize;
    let want = count
        .checked_mul(4)
        .and_then(|n| n.checked_add(FIXED_LEN + 4))
        .ok_or(DecodeError::Invalid("manifest count overflows"))?;
    if buf.len() != want {
        return Err(DecodeError::Truncated {
            needed: want,
            found: buf.len(),
        });
    }
    let body = &buf[..want - 4];
    let stored = u32::from_le_bytes(buf[want - 4..].try_into().expect("4 bytes"));
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(DecodeError::BodyChecksum {
            expected: stored,
            got: computed,
        });
    }
    Ok(body[FIXED_LEN..]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_damage_is_refused() {
        let ids = [3u32, 7, 4_000_000_000];
        let bytes = encode_manifest(&ids);
        assert_eq!(decode_manifest(&bytes).unwrap(), ids);
        assert_eq!(
            decode_manifest(&encode_manifest(&[])).unwrap(),
            Vec::<u32>::new()
        );
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x40;
            assert!(decode_manifest(&bad).is_err(), "flip at {at}");
        }
        for len in 0..bytes.len() {
            assert!(decode_manifest(&bytes[..len]).is_err(), "cut at {len}");
        }
    }
}
