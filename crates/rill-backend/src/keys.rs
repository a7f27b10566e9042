//! How (type, bucket, key) and index entries become backend keys.
//!
//! Object key: `b'o' | u16 type_len | type | u16 bucket_len | bucket | key`
//! Index key:  `b'i' | u16 type_len | type | u16 bucket_len | bucket |
//!             u16 field_len | field | u8 term_kind | u32 term_len | term | key`
//! (docs/format.md, "Backend keys"). Integer terms are 8 bytes big-endian
//! with the sign bit flipped, so byte order is numeric order.

use crate::index::Term;
use crate::{Error, Result};

/// A bucket type, bucket and key; the empty type is the default type.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BKey {
    pub bucket_type: Vec<u8>,
    pub bucket: Vec<u8>,
    pub key: Vec<u8>,
}

impl BKey {
    pub fn new(bucket_type: &[u8], bucket: &[u8], key: &[u8]) -> BKey {
        BKey {
            bucket_type: bucket_type.to_vec(),
            bucket: bucket.to_vec(),
            key: key.to_vec(),
        }
    }
}

pub(crate) const OBJECT: u8 = b'o';
pub(crate) const INDEX: u8 = b'i';

fn name(out: &mut Vec<u8>, n: &[u8]) -> Result<()> {
    let len = u16::try_from(n.len()).map_err(|_| Error::NameTooLong(n.len()))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(n);
    Ok(())
}

pub(crate) fn bucket_prefix(kind: u8, bucket_type: &[u8], bucket: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(5 + bucket_type.len() + bucket.len());
    out.push(kind);
    name(&mut out, bucket_type)?;
    name(&mut out, bucket)?;
    Ok(out)
}

pub(crate) fn object_key(k: &BKey) -> Result<Vec<u8>> {
    let mut out = bucket_prefix(OBJECT, &k.bucket_type, &k.bucket)?;
    out.extend_from_slice(&k.key);
    Ok(out)
}

pub(crate) fn index_key(k: &BKey, field: &[u8], term: &Term) -> Result<Vec<u8>> {
    let mut out = bucket_prefix(INDEX, &k.bucket_type, &k.bucket)?;
    name(&mut out, field)?;
    let t = term.sortable_bytes();
    out.push(term.kind());
    out.extend_from_slice(&(t.len() as u32).to_be_bytes());
    out.extend_from_slice(&t);
    out.extend_from_slice(&k.key);
    Ok(out)
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn name(&mut self) -> Option<&'a [u8]> {
        let l = self.take(2)?;
        self.take(u16::from_be_bytes([l[0], l[1]]) as usize)
    }
}

/// (kind, type, bucket, rest) of a backend key.
pub(crate) type Parts<'a> = (u8, &'a [u8], &'a [u8], &'a [u8]);

pub(crate) fn split(raw: &[u8]) -> Option<Parts<'_>> {
    let mut c = Cursor(raw);
    let kind = c.take(1)?[0];
    let t = c.name()?;
    let b = c.name()?;
    Some((kind, t, b, c.0))
}

/// (field, term, key) of the rest of an index key.
pub(crate) fn split_index_rest(rest: &[u8]) -> Option<(&[u8], Term, &[u8])> {
    let mut c = Cursor(rest);
    let field = c.name()?;
    let kind = c.take(1)?[0];
    let l = c.take(4)?;
    let t = c.take(u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize)?;
    let term = Term::from_sortable(kind, t)?;
    Some((field, term, c.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_back() {
        let k = BKey::new(b"maps", b"b", b"k\x00ey");
        let raw = object_key(&k).unwrap();
        assert_eq!(
            split(&raw),
            Some((OBJECT, &b"maps"[..], &b"b"[..], &b"k\x00ey"[..]))
        );
        let raw = index_key(&k, b"age_int", &Term::Int(-5)).unwrap();
        let (kind, t, b, rest) = split(&raw).unwrap();
        assert_eq!((kind, t, b), (INDEX, &b"maps"[..], &b"b"[..]));
        assert_eq!(
            split_index_rest(rest),
            Some((&b"age_int"[..], Term::Int(-5), &b"k\x00ey"[..]))
        );
        assert!(split(b"o\x00").is_none());
    }
}
