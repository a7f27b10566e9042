//! How (type, bucket, key) and index entries become backend keys.
//!
//! Object key: `b'o' | u16 type_len | type | u16 bucket_len | bucket | key`
//! Index key (version 2): `b'j' | u16 type_len | type | u16 bucket_len |
//! bucket | u16 field_len | field | position`, where the position is
//! `u8 term_kind | term | key` in an encoding whose byte order is index
//! order: term order, then key order (docs/format.md, "Backend keys").
//! An `_int` term is 8 bytes big-endian with the sign bit flipped; a
//! `_bin` term has each 0x00 written as 0x00 0xFF and ends with 0x00 0x00,
//! so a term sorts before every longer term it begins. A sorted store
//! answers a range query with one scan from the lower term's position.
//!
//! Version 1 index keys (`b'i'`, the term as `u32 length | bytes`, whose
//! byte order is not term order) are still decoded, so a store written by
//! an earlier build can be migrated.

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
/// Index entries, version 2 (order-preserving terms).
pub(crate) const INDEX: u8 = b'j';
/// Index entries as builds before version 2 wrote them.
pub(crate) const INDEX_V1: u8 = b'i';
/// A leveled object's value (beside its head under the object key).
pub(crate) const VALUE: u8 = b'v';

const TERM_INT: u8 = 1;
const TERM_BIN: u8 = 2;

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

/// The prefix of every index key of one field of one bucket.
pub(crate) fn index_field_prefix(
    bucket_type: &[u8],
    bucket: &[u8],
    field: &[u8],
) -> Result<Vec<u8>> {
    let mut out = bucket_prefix(INDEX, bucket_type, bucket)?;
    name(&mut out, field)?;
    Ok(out)
}

/// The keys of `entries` of object `k`.
pub(crate) fn index_keys<'a>(
    k: &BKey,
    entries: impl IntoIterator<Item = &'a crate::IndexEntry>,
) -> Result<Vec<Vec<u8>>> {
    entries
        .into_iter()
        .map(|(f, t)| index_key(k, f, t))
        .collect()
}

pub(crate) fn index_key(k: &BKey, field: &[u8], term: &Term) -> Result<Vec<u8>> {
    let mut out = index_field_prefix(&k.bucket_type, &k.bucket, field)?;
    out.extend_from_slice(&index_position(term, &k.key));
    Ok(out)
}

/// Where (term, key) sorts among a field's entries: `term_kind | term |
/// key`, byte order being index order. Also a 2i continuation's body.
pub fn index_position(term: &Term, key: &[u8]) -> Vec<u8> {
    let mut out = term_prefix(term);
    out.extend_from_slice(key);
    out
}

/// The start of every position of `term` (whatever the key).
pub fn term_prefix(term: &Term) -> Vec<u8> {
    match term {
        Term::Int(i) => {
            let mut out = vec![TERM_INT];
            out.extend_from_slice(&((*i as u64) ^ (1 << 63)).to_be_bytes());
            out
        }
        Term::Bin(b) => {
            let mut out = Vec::with_capacity(b.len() + 3);
            out.push(TERM_BIN);
            for &byte in b {
                out.push(byte);
                if byte == 0 {
                    out.push(0xFF);
                }
            }
            out.extend_from_slice(&[0, 0]);
            out
        }
    }
}

/// The least byte string greater than every string that begins with
/// `prefix`; `None` if there is none (all bytes 0xFF). The end of a scan
/// over a prefix.
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.pop() {
        if last < 0xFF {
            out.push(last + 1);
            return Some(out);
        }
    }
    None
}

/// (term, key) of a position; `None` if it is not one (any bytes may
/// come: a client's continuation, a damaged store).
pub fn split_position(p: &[u8]) -> Option<(Term, &[u8])> {
    let (&kind, rest) = p.split_first()?;
    match kind {
        TERM_INT => {
            let (t, key) = rest.split_at_checked(8)?;
            let u = u64::from_be_bytes(t.try_into().ok()?);
            Some((Term::Int((u ^ (1 << 63)) as i64), key))
        }
        TERM_BIN => {
            let mut term = Vec::new();
            let mut i = 0;
            loop {
                match (rest.get(i)?, rest.get(i + 1)) {
                    (0, Some(0)) => return Some((Term::Bin(term), &rest[i + 2..])),
                    (0, Some(0xFF)) => {
                        term.push(0);
                        i += 2;
                    }
                    (0, _) => return None,
                    (&b, _) => {
                        term.push(b);
                        i += 1;
                    }
                }
            }
        }
        _ => None,
    }
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
    let (term, key) = split_position(c.0)?;
    Some((field, term, key))
}

/// (field, term, key) of the rest of a version 1 index key.
pub(crate) fn split_index_rest_v1(rest: &[u8]) -> Option<(&[u8], Term, &[u8])> {
    let mut c = Cursor(rest);
    let field = c.name()?;
    let kind = c.take(1)?[0];
    let l = c.take(4)?;
    let t = c.take(u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize)?;
    let term = match kind {
        TERM_INT => Term::Int((u64::from_be_bytes(t.try_into().ok()?) ^ (1 << 63)) as i64),
        TERM_BIN => Term::Bin(t.to_vec()),
        _ => return None,
    };
    Some((field, term, c.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keys_split_back() {
        let k = BKey::new(b"maps", b"b", b"k\x00ey");
        let raw = object_key(&k).unwrap();
        assert_eq!(
            split(&raw),
            Some((OBJECT, &b"maps"[..], &b"b"[..], &b"k\x00ey"[..]))
        );
        for term in [Term::Int(-5), Term::Bin(b"a\x00\xffb".to_vec())] {
            let raw = index_key(&k, b"f_bin", &term).unwrap();
            let (kind, t, b, rest) = split(&raw).unwrap();
            assert_eq!((kind, t, b), (INDEX, &b"maps"[..], &b"b"[..]));
            assert_eq!(
                split_index_rest(rest),
                Some((&b"f_bin"[..], term, &b"k\x00ey"[..]))
            );
        }
        assert!(split(b"o\x00").is_none());
    }

    #[test]
    fn bin_terms_are_escaped_and_terminated() {
        assert_eq!(
            term_prefix(&Term::Bin(b"a\x00".to_vec())),
            b"\x02a\x00\xff\x00\x00"
        );
        assert_eq!(term_prefix(&Term::Bin(Vec::new())), b"\x02\x00\x00");
        assert_eq!(
            term_prefix(&Term::Int(0)),
            b"\x01\x80\x00\x00\x00\x00\x00\x00\x00"
        );
        // "b" sorts after "aa", as terms do (length-prefixed, it did not).
        assert!(
            index_position(&Term::Bin(b"aa".to_vec()), b"")
                < index_position(&Term::Bin(b"b".to_vec()), b"")
        );
        // Not positions: an unterminated term, a bad escape, an unknown kind,
        // a short integer.
        for bad in [
            &b"\x02ab"[..],
            b"\x02a\x00\x01",
            b"\x03",
            b"\x01\x00\x00",
            b"",
        ] {
            assert_eq!(split_position(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn version_1_index_keys_still_decode() {
        // b'i' | "" | "b" | "f_bin" | kind 2 | len 2 | "aa" | key "k"
        let mut raw = vec![INDEX_V1, 0, 0, 0, 1, b'b', 0, 5];
        raw.extend_from_slice(b"f_bin\x02\x00\x00\x00\x02aak");
        let (kind, t, b, rest) = split(&raw).unwrap();
        assert_eq!((kind, t, b), (INDEX_V1, &b""[..], &b"b"[..]));
        assert_eq!(
            split_index_rest_v1(rest),
            Some((&b"f_bin"[..], Term::Bin(b"aa".to_vec()), &b"k"[..]))
        );
        let mut raw = vec![0, 5];
        raw.extend_from_slice(b"f_int\x01\x00\x00\x00\x08");
        raw.extend_from_slice(&((-3i64 as u64) ^ (1 << 63)).to_be_bytes());
        assert_eq!(
            split_index_rest_v1(&raw),
            Some((&b"f_int"[..], Term::Int(-3), &b""[..]))
        );
    }

    #[test]
    fn prefix_successors() {
        assert_eq!(prefix_successor(b"a\x00\x00"), Some(b"a\x00\x01".to_vec()));
        assert_eq!(prefix_successor(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(b"\xff"), None);
    }

    fn term() -> impl Strategy<Value = Term> {
        prop_oneof![
            any::<i64>().prop_map(Term::Int),
            // Few distinct bytes, so zeros, shared prefixes and equal
            // terms are common.
            proptest::collection::vec(
                prop_oneof![Just(0u8), Just(1), Just(b'a'), Just(0xFF)],
                0..6
            )
            .prop_map(Term::Bin),
        ]
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(prop_oneof![Just(0u8), Just(b'k'), Just(0xFF)], 0..4)
    }

    proptest! {
        /// Byte order of positions is (term, key) order, and a position
        /// splits back into its term and key.
        #[test]
        fn positions_sort_as_terms_then_keys(a in term(), ka in key(), b in term(), kb in key()) {
            let (pa, pb) = (index_position(&a, &ka), index_position(&b, &kb));
            prop_assert_eq!(pa.cmp(&pb), (&a, &ka).cmp(&(&b, &kb)));
            prop_assert_eq!(split_position(&pa), Some((a.clone(), &ka[..])));
            // Every position of a term lies between its prefix and that
            // prefix's successor.
            let p = term_prefix(&a);
            prop_assert!(pa >= p);
            if let Some(end) = prefix_successor(&p) {
                prop_assert!(pa < end);
                prop_assert_eq!(pb < end && pb >= p, a == b);
            }
        }

        /// Any bytes: a position or `None`, never a panic; a position
        /// that decodes encodes back to the same bytes.
        #[test]
        fn split_position_takes_any_bytes(raw in proptest::collection::vec(any::<u8>(), 0..24)) {
            if let Some((t, k)) = split_position(&raw) {
                prop_assert_eq!(index_position(&t, k), raw.clone());
            }
        }

        /// Any bytes read back as a key of either version: parts or
        /// `None`, never a panic (a damaged store).
        #[test]
        fn index_keys_of_any_bytes(raw in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Some((_, _, _, rest)) = split(&raw) {
                let _ = split_index_rest(rest);
                let _ = split_index_rest_v1(rest);
            }
            let _ = split_index_rest(&raw);
            let _ = split_index_rest_v1(&raw);
        }
    }
}
