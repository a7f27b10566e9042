//! The 16-byte header that opens every data and hint file
//! (docs/format.md, "File header").

use crate::error::DecodeError;

pub const FILE_HEADER_LEN: usize = 16;
/// The format version of the data files this build writes: 2 (records
/// may carry batch flags). Version 1 data files are read as well; they
/// hold no batches. Hint files are version 1.
pub const FORMAT_VERSION: u8 = 2;
/// The hint file format version (unchanged by data format 2).
pub const HINT_FORMAT_VERSION: u8 = 1;

pub const DATA_MAGIC: [u8; 8] = *b"RILLBCD\0";
pub const HINT_MAGIC: [u8; 8] = *b"RILLBCH\0";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Data,
    Hint,
}

impl FileKind {
    fn version(self) -> u8 {
        match self {
            FileKind::Data => FORMAT_VERSION,
            FileKind::Hint => HINT_FORMAT_VERSION,
        }
    }

    fn reads_version(self, v: u8) -> bool {
        match self {
            FileKind::Data => v == 1 || v == 2,
            FileKind::Hint => v == HINT_FORMAT_VERSION,
        }
    }

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
    out[8] = kind.version();
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
    if !kind.reads_version(buf[8]) {
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
        assert_eq!(h[8], 2, "data files are written as version 2");
        let mut v1 = h;
        v1[8] = 1;
        assert_eq!(decode_file_header(FileKind::Data, &v1).unwrap(), 42);
        let mut v3 = h;
        v3[8] = 3;
        assert!(matches!(
            decode_file_header(FileKind::Data, &v3),
            Err(DecodeError::UnsupportedVersion(3))
        ));
        let hint = encode_file_header(FileKind::Hint, 7);
        assert_eq!(hint[8], 1, "hint files stay version 1");
        let mut hint2 = hint;
        hint2[8] = 2;
        assert!(matches!(
            decode_file_header(FileKind::Hint, &hint2),
            Err(DecodeError::UnsupportedVersion(2))
        ));
    }
}
