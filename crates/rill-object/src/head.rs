//! An object's head (docs/format.md, "Object head"): everything of a
//! stored object but its values, with each value's length, so a backend
//! that keeps heads apart from values (leveled) answers a head request, a
//! clock check or a fold over metadata without reading a value.

use crate::codec::{decode_object, encode_object_into, DecodeError};
use crate::object::Object;
use bytes::Bytes;

const HEAD_MAGIC: u8 = 0xB1;
/// Version of the head format.
pub const HEAD_FORMAT_VERSION: u8 = 1;

/// A decoded head: the object with every value empty, and the length
/// each value had, sibling by sibling.
#[derive(Clone, Debug, PartialEq)]
pub struct Head {
    pub object: Object,
    pub value_lengths: Vec<u64>,
}

impl Head {
    /// The values' bytes together.
    pub fn value_bytes(&self) -> u64 {
        self.value_lengths.iter().sum()
    }
}

/// The head of `o`.
pub fn encode_head(o: &Object) -> Vec<u8> {
    let mut stripped = o.clone();
    for c in &mut stripped.contents {
        c.value = Bytes::new();
    }
    let mut out = Vec::with_capacity(64 + 8 * o.contents.len());
    out.push(HEAD_MAGIC);
    out.push(HEAD_FORMAT_VERSION);
    out.extend_from_slice(&(o.contents.len() as u32).to_be_bytes());
    for c in &o.contents {
        out.extend_from_slice(&(c.value.len() as u64).to_be_bytes());
    }
    encode_object_into(&mut out, &stripped);
    out
}

/// A head from its bytes.
pub fn decode_head(bytes: &[u8]) -> Result<Head, DecodeError> {
    let what = "object head";
    let truncated = |field, at| DecodeError::Truncated { what, field, at };
    match bytes.first() {
        None => return Err(truncated("magic", 0)),
        Some(&m) if m != HEAD_MAGIC => {
            return Err(DecodeError::BadMagic {
                what,
                expected: HEAD_MAGIC,
                found: m,
            })
        }
        _ => {}
    }
    match bytes.get(1) {
        None => return Err(truncated("version", 1)),
        Some(&v) if v != HEAD_FORMAT_VERSION => {
            return Err(DecodeError::UnknownVersion {
                what,
                found: v,
                known: HEAD_FORMAT_VERSION,
            })
        }
        _ => {}
    }
    let n = bytes
        .get(2..6)
        .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")) as usize)
        .ok_or(truncated("sibling count", 2))?;
    let left = bytes.len() - 6;
    if n > left / 8 {
        return Err(DecodeError::BadCount {
            what,
            field: "value lengths",
            count: n as u64,
            left,
        });
    }
    let value_lengths: Vec<u64> = bytes[6..6 + 8 * n]
        .chunks_exact(8)
        .map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes")))
        .collect();
    let object = decode_object(&bytes[6 + 8 * n..])?;
    if object.contents.len() != n {
        return Err(DecodeError::BadCount {
            what,
            field: "value lengths for the siblings",
            count: n as u64,
            left: object.contents.len(),
        });
    }
    Ok(Head {
        object,
        value_lengths,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{Content, Metadata};
    use crate::VClock;

    fn object(values: &[&[u8]]) -> Object {
        Object {
            clock: VClock::new(),
            contents: values
                .iter()
                .map(|v| Content {
                    value: Bytes::copy_from_slice(v),
                    meta: Metadata {
                        content_type: Some(b"text/plain".to_vec()),
                        last_modified_us: 7,
                        indexes: vec![(b"f_bin".to_vec(), b"t".to_vec())],
                        ..Metadata::default()
                    },
                    dot: None,
                })
                .collect(),
        }
    }

    #[test]
    fn a_head_keeps_all_but_the_values() {
        let o = object(&[b"first value", b"", b"x"]);
        let h = decode_head(&encode_head(&o)).unwrap();
        assert_eq!(h.value_lengths, [11, 0, 1]);
        assert_eq!(h.value_bytes(), 12);
        assert_eq!(h.object.clock, o.clock);
        for (got, want) in h.object.contents.iter().zip(&o.contents) {
            assert!(got.value.is_empty());
            assert_eq!(got.meta, want.meta);
        }
    }

    #[test]
    fn damaged_heads_are_refused() {
        let good = encode_head(&object(&[b"v"]));
        for cut in 0..good.len() {
            assert!(decode_head(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = good.clone();
        bad[0] = 0xB0;
        assert!(matches!(
            decode_head(&bad),
            Err(DecodeError::BadMagic { .. })
        ));
        let mut bad = good.clone();
        bad[1] = 9;
        assert!(matches!(
            decode_head(&bad),
            Err(DecodeError::UnknownVersion { .. })
        ));
        let mut bad = good;
        bad[5] = 2; // two lengths for one sibling
        assert!(decode_head(&bad).is_err());
        assert!(decode_head(&[HEAD_MAGIC, 1, 0xff, 0xff, 0xff, 0xff]).is_err());
    }
}
