//! A leveldb partition is dropped whole.

use super::{int, k, query};
use rill_backend::{Backend, IndexRange, LeveldbOptions, LeveldbStore, Term};

/// A leveldb partition dropped whole leaves the others as they were.
#[test]
fn a_leveldb_partition_is_dropped_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = LeveldbStore::open(dir.path(), LeveldbOptions::default(), 2).unwrap();
    let (p0, p1) = (store.partition("0").unwrap(), store.partition("1").unwrap());
    p0.put(&k("", "b", "x"), b"zero", &[int("n_int", 1)], &[])
        .unwrap();
    p1.put(&k("", "b", "x"), b"one", &[int("n_int", 1)], &[])
        .unwrap();
    drop(p0);
    store.drop_partition("0").unwrap();
    let p0 = store.partition("0").unwrap();
    assert_eq!(p0.get(&k("", "b", "x")).unwrap(), None);
    assert!(!p0.holds_objects().unwrap());
    assert!(query(&p0, "b", "n_int", IndexRange::Eq(Term::Int(1))).is_empty());
    assert_eq!(p1.get(&k("", "b", "x")).unwrap().unwrap(), &b"one"[..]);
    assert_eq!(
        query(&p1, "b", "n_int", IndexRange::Eq(Term::Int(1))).len(),
        1
    );
}
