//! The 16-byte header that opens every data and hint file
//! (docs/format.md, "File header").

use crate::error::DecodeError;

pub const FILE_HEADER_LEN: usize = 16;
/// The only format version this build writes; the readers accept it alone.
pub const FORMAT_VERSION: u8 = 1;

pub const DATA_MAGIC: [u8; 8] = *b"RILLBCD\0";
pub const HINT_MAGIC: [u8; 8] = *b"RILLBCH\0";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Data,
    Hint,
}

impl FileKind {
    fn magic(self) -> [u8; 8] {
        match self {
            FileKind::Data => DATA_MAGIC,
            FileKind::Hint => HINT_MAGIC,
        }
    }
}

pub fn encode_file_header(kind: FileKind, file_id: u32) -> [u8; FILE_HEADER_LEN] {
    let mut out = [0u8; FILE_HEADER_LEN];
    out[..8].copy_from_slice(&kind.magic());
    out[8] = FORMAT_VERSION;
    out[12..16].copy_from_slice(&file_id.to_le_bytes());
    out
}

/// Checks magic, version and file id; returns the file id stored.
pub fn decode_file_header(kind: FileKind, buf: &[u8]) -> Result<u32, DecodeError> {
    if buf.len() < FILE_HEADER_LEN {
        return Err(DecodeError::Truncated {
            needed: FILE_HEADER_LEN,
            found: buf.len(),
        });
    }
    if buf[..8] != kind.magic() {
        return Err(DecodeError::BadMagic);
    }
    if buf[8] != FORMAT_VERSION {
        return Err(DecodeError::UnsupportedVersion(buf[8]));
    }
    if buf[9..12] != [0, 0, 0] {
        return Err(DecodeError::Invalid("reserved header bytes are not zero"));
    }
    Ok(u32::from_le_bytes(buf[12..16].try_into().expect("4 bytes")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejections() {
        let h = encode_file_header(FileKind::Data, 42);
        assert_eq!(decode_file_header(FileKind::Data, &h).unwrap(), 42);
        assert!(matches!(
            decode_file_header(FileKind::Hint, &h),
            Err(DecodeError::BadMagic)
        ));
        let mut v2 = h;
        v2[8] = 2;
        assert!(matches!(
            decode_file_header(FileKind::Data, &v2),
            Err(DecodeError::UnsupportedVersion(2))
        ));
    }
}
