//! The multi backend passes the suite and routes each bucket.

use super::{bin, bitcask, int, k, leveldb, query};
use rill_backend::{Backend, IndexRange, MemoryBackend, MemoryOptions, Term};
use std::sync::Arc;

/// The multi backend passes the suite (every bucket in its default), and
/// routes each bucket to the backend its property names.
#[test]
fn multi_routes_buckets_and_passes_the_suite() {
    use rill_backend::{MultiBackend, Router};
    let dir = tempfile::tempdir().unwrap();
    let ldir = tempfile::tempdir().unwrap();
    let (_store, lb) = leveldb(ldir.path());
    let route: Router = Arc::new(|_t: &[u8], b: &[u8]| match b {
        b"in_memory" => Some("mem".to_string()),
        b"in_leveldb" => Some("lsm".to_string()),
        b"nowhere" => Some("gone".to_string()),
        _ => None,
    });
    let m = MultiBackend::new(
        vec![
            (
                "bc".into(),
                Box::new(bitcask(dir.path())) as Box<dyn Backend>,
            ),
            ("lsm".into(), Box::new(lb)),
            (
                "mem".into(),
                Box::new(MemoryBackend::new(MemoryOptions::default())),
            ),
        ],
        "bc",
        route,
    )
    .unwrap();
    m.put(&k("", "in_memory", "a"), b"m", &[int("n_int", 1)], &[])
        .unwrap();
    m.put(&k("", "in_leveldb", "a"), b"l", &[int("n_int", 2)], &[])
        .unwrap();
    m.put(&k("", "plain", "a"), b"p", &[int("n_int", 3)], &[])
        .unwrap();
    assert_eq!(m.get(&k("", "in_memory", "a")).unwrap().unwrap(), &b"m"[..]);
    assert_eq!(
        m.get(&k("", "in_leveldb", "a")).unwrap().unwrap(),
        &b"l"[..]
    );
    assert_eq!(m.get(&k("", "plain", "a")).unwrap().unwrap(), &b"p"[..]);
    assert_eq!(
        query(
            &m,
            "in_leveldb",
            "n_int",
            IndexRange::Range(Term::Int(0), Term::Int(9))
        ),
        vec![(Term::Int(2), "a".into())]
    );
    let mut buckets = Vec::new();
    m.fold_buckets(&mut |_, b| {
        buckets.push(String::from_utf8(b.to_vec()).unwrap());
        true
    })
    .unwrap();
    assert_eq!(buckets, ["in_leveldb", "in_memory", "plain"]);
    let e = m.put(&k("", "nowhere", "a"), b"x", &[], &[]).unwrap_err();
    assert!(e.to_string().contains("undefined_backend,gone"), "{e}");
    assert!(MultiBackend::new(Vec::new(), "x", Arc::new(|_: &[u8], _: &[u8]| None)).is_err());
    // A bucket whose backend property changes: its older keys are read,
    // listed and deleted where they were written; nothing deleted
    // comes back.
    let now = Arc::new(std::sync::Mutex::new("bc".to_string()));
    let dir = tempfile::tempdir().unwrap();
    let route: Router = {
        let now = now.clone();
        Arc::new(move |_: &[u8], _: &[u8]| Some(now.lock().unwrap().clone()))
    };
    let m = MultiBackend::new(
        vec![
            (
                "bc".into(),
                Box::new(bitcask(dir.path())) as Box<dyn Backend>,
            ),
            (
                "mem".into(),
                Box::new(MemoryBackend::new(MemoryOptions::default())),
            ),
        ],
        "bc",
        route,
    )
    .unwrap();
    m.put(&k("", "moving", "old"), b"1", &[], &[]).unwrap();
    m.put(&k("", "moving", "both"), b"1", &[], &[]).unwrap();
    *now.lock().unwrap() = "mem".into();
    m.put(&k("", "moving", "both"), b"2", &[], &[]).unwrap();
    m.put(&k("", "moving", "new"), b"2", &[], &[]).unwrap();
    assert_eq!(m.get(&k("", "moving", "old")).unwrap().unwrap(), &b"1"[..]);
    assert_eq!(m.get(&k("", "moving", "both")).unwrap().unwrap(), &b"2"[..]);
    let mut keys = Vec::new();
    m.fold_keys(b"", b"moving", &mut |key| {
        keys.push(String::from_utf8(key.to_vec()).unwrap());
        true
    })
    .unwrap();
    keys.sort();
    assert_eq!(keys, ["both", "new", "old"]);
    m.delete(&k("", "moving", "both"), &[]).unwrap();
    m.delete(&k("", "moving", "old"), &[]).unwrap();
    assert_eq!(m.get(&k("", "moving", "both")).unwrap(), None);
    assert_eq!(m.get(&k("", "moving", "old")).unwrap(), None);
    assert!(!m.contains(&k("", "moving", "old")).unwrap());
    // The suite's operations, through the default backend.
    let dir = tempfile::tempdir().unwrap();
    let only = MultiBackend::new(
        vec![(
            "bc".into(),
            Box::new(bitcask(dir.path())) as Box<dyn Backend>,
        )],
        "bc",
        Arc::new(|_: &[u8], _: &[u8]| None),
    )
    .unwrap();
    only.put(&k("", "b", "x"), b"one", &[bin("f_bin", "t")], &[])
        .unwrap();
    assert_eq!(only.get(&k("", "b", "x")).unwrap().unwrap(), &b"one"[..]);
    assert!(only.holds_objects().unwrap());
    only.delete(&k("", "b", "x"), &[bin("f_bin", "t")]).unwrap();
    assert!(!only.holds_objects().unwrap());
}
