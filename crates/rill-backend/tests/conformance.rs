//! One suite, every backend: the same operations must give the same
//! answers from Bitcask and from memory, including after a reopen where
//! the backend persists; and a random model test against a BTreeMap.

use bitcask::{Options, Store};
use rill_backend::{
    BKey, Backend, BitcaskBackend, IndexQuery, IndexRange, MemoryBackend, MemoryOptions, Term,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

fn bitcask(dir: &Path) -> BitcaskBackend {
    let store = Store::open(dir, Options::default()).unwrap();
    BitcaskBackend::open(Arc::new(store)).unwrap()
}

/// Runs `check` on a memory backend and on a Bitcask backend.
fn each(check: impl Fn(&dyn Backend)) {
    check(&MemoryBackend::new(MemoryOptions::default()));
    let dir = tempfile::tempdir().unwrap();
    check(&bitcask(dir.path()));
}

fn k(t: &str, b: &str, key: &str) -> BKey {
    BKey::new(t.as_bytes(), b.as_bytes(), key.as_bytes())
}

fn bin(f: &str, t: &str) -> (Vec<u8>, Term) {
    (f.as_bytes().to_vec(), Term::Bin(t.as_bytes().to_vec()))
}

fn int(f: &str, t: i64) -> (Vec<u8>, Term) {
    (f.as_bytes().to_vec(), Term::Int(t))
}

fn query(b: &dyn Backend, bucket: &str, field: &str, range: IndexRange) -> Vec<(Term, String)> {
    let mut out = Vec::new();
    let q = IndexQuery {
        bucket_type: Vec::new(),
        bucket: bucket.as_bytes().to_vec(),
        field: field.as_bytes().to_vec(),
        range,
        after: None,
    };
    b.query_index(&q, &mut |t, key| {
        out.push((t.clone(), String::from_utf8(key.to_vec()).unwrap()));
        true
    })
    .unwrap();
    out
}

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
fn indexes_follow_their_values() {
    each(|b| {
        b.put(
            &k("", "p", "k1"),
            b"v",
            &[bin("name_bin", "alice"), int("age_int", 30)],
            &[],
        )
        .unwrap();
        b.put(
            &k("", "p", "k2"),
            b"v",
            &[bin("name_bin", "bob"), int("age_int", -4)],
            &[],
        )
        .unwrap();
        b.put(&k("", "p", "k3"), b"v", &[int("age_int", 1000)], &[])
            .unwrap();
        assert_eq!(
            query(
                b,
                "p",
                "age_int",
                IndexRange::Range(Term::Int(-10), Term::Int(100))
            ),
            vec![(Term::Int(-4), "k2".into()), (Term::Int(30), "k1".into())]
        );
        assert_eq!(
            query(
                b,
                "p",
                "name_bin",
                IndexRange::Eq(Term::Bin(b"bob".to_vec()))
            ),
            vec![(Term::Bin(b"bob".to_vec()), "k2".into())]
        );
        // Replacing k1's value moves its age entry.
        b.put(
            &k("", "p", "k1"),
            b"v2",
            &[int("age_int", 31)],
            &[int("age_int", 30)],
        )
        .unwrap();
        assert_eq!(
            query(b, "p", "age_int", IndexRange::Eq(Term::Int(30))),
            vec![]
        );
        assert_eq!(
            query(b, "p", "age_int", IndexRange::Eq(Term::Int(31))).len(),
            1
        );
        b.delete(
            &k("", "p", "k2"),
            &[bin("name_bin", "bob"), int("age_int", -4)],
        )
        .unwrap();
        assert_eq!(
            query(
                b,
                "p",
                "name_bin",
                IndexRange::Range(Term::Bin(vec![]), Term::Bin(vec![0xff]))
            ),
            vec![(Term::Bin(b"alice".to_vec()), "k1".into())]
        );
        // Continuation: strictly after (term, key).
        let q = IndexQuery {
            bucket_type: vec![],
            bucket: b"p".to_vec(),
            field: b"age_int".to_vec(),
            range: IndexRange::Range(Term::Int(i64::MIN), Term::Int(i64::MAX)),
            after: Some((Term::Int(31), b"k1".to_vec())),
        };
        let mut after = Vec::new();
        b.query_index(&q, &mut |t, _| {
            after.push(t.clone());
            true
        })
        .unwrap();
        assert_eq!(after, vec![Term::Int(1000)]);
    });
}

#[test]
fn bitcask_indexes_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let b = bitcask(dir.path());
        b.put(&k("", "p", "k1"), b"v", &[int("age_int", 7)], &[])
            .unwrap();
        b.put(&k("", "p", "k2"), b"v", &[int("age_int", 8)], &[])
            .unwrap();
        b.put(
            &k("", "p", "k2"),
            b"v",
            &[int("age_int", 9)],
            &[int("age_int", 8)],
        )
        .unwrap();
        b.sync().unwrap();
    }
    let b = bitcask(dir.path());
    assert_eq!(
        query(
            &b,
            "p",
            "age_int",
            IndexRange::Range(Term::Int(0), Term::Int(100))
        ),
        vec![(Term::Int(7), "k1".into()), (Term::Int(9), "k2".into())]
    );
    assert_eq!(b.get(&k("", "p", "k2")).unwrap().unwrap(), &b"v"[..]);
}

#[test]
fn memory_cap_evicts_the_oldest() {
    let b = MemoryBackend::new(MemoryOptions {
        max_memory_bytes: Some(4000),
        ttl: None,
    });
    for i in 0..10 {
        b.put(
            &k("", "b", &format!("k{i}")),
            &[0u8; 1000],
            &[int("i_int", i)],
            &[],
        )
        .unwrap();
    }
    assert!(b.size_bytes() <= 4000);
    assert_eq!(b.get(&k("", "b", "k0")).unwrap(), None);
    assert!(b.get(&k("", "b", "k9")).unwrap().is_some());
    assert!(query(&b, "b", "i_int", IndexRange::Eq(Term::Int(0))).is_empty());
    // A value larger than the whole cap is refused, not stored and evicted.
    assert!(b.put(&k("", "b", "huge"), &[0u8; 5000], &[], &[]).is_err());
    assert!(b.get(&k("", "b", "k9")).unwrap().is_some());
}

#[test]
fn memory_ttl_expires() {
    let b = MemoryBackend::new(MemoryOptions {
        max_memory_bytes: None,
        ttl: Some(std::time::Duration::from_millis(50)),
    });
    b.put(&k("", "b", "k"), b"v", &[int("i_int", 1)], &[])
        .unwrap();
    assert!(b.get(&k("", "b", "k")).unwrap().is_some());
    std::thread::sleep(std::time::Duration::from_millis(80));
    assert_eq!(b.get(&k("", "b", "k")).unwrap(), None);
    assert!(query(&b, "b", "i_int", IndexRange::Eq(Term::Int(1))).is_empty());
    let mut n = 0;
    b.fold_keys(b"", b"b", &mut |_| {
        n += 1;
        true
    })
    .unwrap();
    assert_eq!(n, 0);
}

/// Random operations against both backends and a BTreeMap model.
#[test]
fn model() {
    let dir = tempfile::tempdir().unwrap();
    let backends: Vec<Box<dyn Backend>> = vec![
        Box::new(MemoryBackend::new(MemoryOptions::default())),
        Box::new(bitcask(dir.path())),
    ];
    for b in &backends {
        let mut model: BTreeMap<(u8, u8), (Vec<u8>, i64)> = BTreeMap::new();
        let mut seed = 0x9e3779b97f4a7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for i in 0..2000 {
            let bucket = (next() % 3) as u8;
            let key = (next() % 20) as u8;
            let bk = BKey::new(b"", &[b'b', bucket], &[b'k', key]);
            let old = model.get(&(bucket, key)).cloned();
            let old_idx: Vec<_> = old.iter().map(|(_, t)| int("n_int", *t)).collect();
            if next() % 4 == 0 {
                b.delete(&bk, &old_idx).unwrap();
                model.remove(&(bucket, key));
            } else {
                let term = (next() % 10) as i64;
                let v = format!("v{i}").into_bytes();
                b.put(&bk, &v, &[int("n_int", term)], &old_idx).unwrap();
                model.insert((bucket, key), (v, term));
            }
        }
        for bucket in 0..3u8 {
            for key in 0..20u8 {
                let got = b
                    .get(&BKey::new(b"", &[b'b', bucket], &[b'k', key]))
                    .unwrap();
                assert_eq!(
                    got,
                    model
                        .get(&(bucket, key))
                        .map(|(v, _)| bytes::Bytes::from(v.clone())),
                    "{}",
                    b.name()
                );
            }
            let got = query(
                b.as_ref(),
                std::str::from_utf8(&[b'b', bucket]).unwrap(),
                "n_int",
                IndexRange::Range(Term::Int(0), Term::Int(9)),
            );
            let mut want: Vec<(Term, String)> = model
                .iter()
                .filter(|((bk, _), _)| *bk == bucket)
                .map(|((_, key), (_, t))| {
                    (Term::Int(*t), String::from_utf8(vec![b'k', *key]).unwrap())
                })
                .collect();
            want.sort();
            assert_eq!(got, want, "{}", b.name());
        }
    }
}
