//! A Bitcask store whose index entries an earlier build wrote (index keys
//! version 1: the term behind its length, so byte order was not term
//! order) opens with every entry answered, in term order, and rewritten
//! in version 2; a second open finds nothing left to rewrite.

mod common;

use bitcask::{Options, Store};
use rill_backend::{BKey, Backend, BitcaskBackend, IndexRange, Term};
use std::path::Path;
use std::sync::Arc;

/// A version 1 index key, as builds before version 2 wrote it.
fn v1_key(bucket: &[u8], field: &[u8], term: &Term, key: &[u8]) -> Vec<u8> {
    let mut out = vec![b'i', 0, 0];
    out.extend_from_slice(&(bucket.len() as u16).to_be_bytes());
    out.extend_from_slice(bucket);
    out.extend_from_slice(&(field.len() as u16).to_be_bytes());
    out.extend_from_slice(field);
    let (kind, t) = match term {
        Term::Int(i) => (1u8, ((*i as u64) ^ (1 << 63)).to_be_bytes().to_vec()),
        Term::Bin(b) => (2u8, b.clone()),
    };
    out.push(kind);
    out.extend_from_slice(&(t.len() as u32).to_be_bytes());
    out.extend_from_slice(&t);
    out.extend_from_slice(key);
    out
}

/// An object key of bucket `b` of the default type.
fn object_key(key: &str) -> Vec<u8> {
    let mut out = vec![b'o', 0, 0, 0, 1, b'b'];
    out.extend_from_slice(key.as_bytes());
    out
}

fn kinds(dir: &Path) -> (usize, usize) {
    let store = Store::open(dir, Options::default()).unwrap();
    let (mut v1, mut v2) = (0, 0);
    store.scan_keys(|k| {
        match k[0] {
            b'i' => v1 += 1,
            b'j' => v2 += 1,
            _ => {}
        }
        true
    });
    (v1, v2)
}

fn query(b: &dyn Backend, field: &str, range: IndexRange) -> Vec<(Term, Vec<u8>)> {
    common::query(b, "b", field, range)
}

#[test]
fn version_1_index_entries_are_migrated_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let terms: Vec<&[u8]> = vec![b"b", b"aa", b"a", b"a\x00", b"", b"\xff"];
    {
        let store = Store::open(dir.path(), Options::default()).unwrap();
        for (i, t) in terms.iter().enumerate() {
            let key = format!("k{i}");
            store.put(&object_key(&key), b"v").unwrap();
            let term = Term::Bin(t.to_vec());
            store
                .put(&v1_key(b"b", b"f_bin", &term, key.as_bytes()), b"")
                .unwrap();
            let int = Term::Int(i as i64 * 1000 - 2500);
            store
                .put(&v1_key(b"b", b"n_int", &int, key.as_bytes()), b"")
                .unwrap();
        }
        // Besides the entries: one that does not decode is left alone.
        store.put(b"i\x00\x00\x00\x01b\x00", b"").unwrap();
        store.sync().unwrap();
    }
    assert_eq!(kinds(dir.path()), (2 * terms.len() + 1, 0));
    let open = || {
        let store = Store::open(dir.path(), Options::default()).unwrap();
        BitcaskBackend::open(Arc::new(store)).unwrap()
    };
    let check = |b: &BitcaskBackend| {
        let all = query(
            b,
            "f_bin",
            IndexRange::Range(Term::Bin(Vec::new()), Term::Bin(b"\xff\xff".to_vec())),
        );
        let got: Vec<&[u8]> = all
            .iter()
            .map(|(t, _)| match t {
                Term::Bin(b) => &b[..],
                Term::Int(_) => panic!("an integer in a _bin field"),
            })
            .collect();
        let want: Vec<&[u8]> = vec![b"", b"a", b"a\x00", b"aa", b"b", b"\xff"];
        assert_eq!(got, want);
        let ints = query(
            b,
            "n_int",
            IndexRange::Range(Term::Int(-2000), Term::Int(1000)),
        );
        assert_eq!(
            ints,
            vec![
                (Term::Int(-1500), b"k1".to_vec()),
                (Term::Int(-500), b"k2".to_vec()),
                (Term::Int(500), b"k3".to_vec()),
            ]
        );
    };
    let b = open();
    check(&b);
    // New writes and removals work on migrated entries.
    let k0 = BKey::new(b"", b"b", b"k0");
    b.put(
        &k0,
        b"v2",
        &[(b"f_bin".to_vec(), Term::Bin(b"c".to_vec()))],
        &[(b"f_bin".to_vec(), Term::Bin(b"b".to_vec()))],
    )
    .unwrap();
    drop(b);
    // Only the entry that did not decode is left in version 1.
    assert_eq!(kinds(dir.path()), (1, 2 * terms.len()));
    let b = open();
    let got = query(&b, "f_bin", IndexRange::Eq(Term::Bin(b"c".to_vec())));
    assert_eq!(got, vec![(Term::Bin(b"c".to_vec()), b"k0".to_vec())]);
    assert!(query(&b, "f_bin", IndexRange::Eq(Term::Bin(b"b".to_vec()))).is_empty());
    drop(b);
    assert_eq!(kinds(dir.path()), (1, 2 * terms.len()));
}
