//! Puts, gets, deletes and folds, on every backend.

use super::{each, k};
use std::collections::BTreeSet;

#[test]
fn put_get_delete() {
    each(|b| {
        assert_eq!(b.get(&k("", "b", "x")).unwrap(), None);
        b.put(&k("", "b", "x"), b"one", &[], &[]).unwrap();
        b.put(&k("t", "b", "x"), b"typed", &[], &[]).unwrap();
        assert_eq!(b.get(&k("", "b", "x")).unwrap().unwrap(), &b"one"[..]);
        assert_eq!(b.get(&k("t", "b", "x")).unwrap().unwrap(), &b"typed"[..]);
        b.put(&k("", "b", "x"), b"two", &[], &[]).unwrap();
        assert_eq!(b.get(&k("", "b", "x")).unwrap().unwrap(), &b"two"[..]);
        b.delete(&k("", "b", "x"), &[]).unwrap();
        assert_eq!(b.get(&k("", "b", "x")).unwrap(), None);
        assert_eq!(b.get(&k("t", "b", "x")).unwrap().unwrap(), &b"typed"[..]);
    });
}

#[test]
fn folds_see_buckets_and_keys_by_type() {
    each(|b| {
        for (t, bucket, key) in [
            ("", "b1", "a"),
            ("", "b1", "b"),
            ("", "b2", "c"),
            ("t", "b1", "d"),
        ] {
            b.put(&k(t, bucket, key), b"v", &[], &[]).unwrap();
        }
        let mut buckets = BTreeSet::new();
        b.fold_buckets(&mut |t, bucket| {
            buckets.insert((t.to_vec(), bucket.to_vec()));
            true
        })
        .unwrap();
        let want: BTreeSet<(Vec<u8>, Vec<u8>)> = [("", "b1"), ("", "b2"), ("t", "b1")]
            .iter()
            .map(|(t, b)| (t.as_bytes().to_vec(), b.as_bytes().to_vec()))
            .collect();
        assert_eq!(buckets, want);
        let mut keys = BTreeSet::new();
        b.fold_keys(b"", b"b1", &mut |key| {
            keys.insert(key.to_vec());
            true
        })
        .unwrap();
        assert_eq!(keys, [b"a".to_vec(), b"b".to_vec()].into_iter().collect());
    });
}

#[test]
fn holds_objects_while_some_object_is_stored() {
    each(|b| {
        assert!(!b.holds_objects().unwrap(), "empty");
        let idx = [super::bin("f_bin", "term")];
        b.put(&k("", "b", "x"), b"one", &idx, &[]).unwrap();
        b.put(&k("t", "b", "y"), b"two", &[], &[]).unwrap();
        assert!(b.holds_objects().unwrap());
        b.delete(&k("", "b", "x"), &idx).unwrap();
        assert!(b.holds_objects().unwrap(), "one left");
        b.delete(&k("t", "b", "y"), &[]).unwrap();
        assert!(!b.holds_objects().unwrap(), "all deleted");
    });
}
