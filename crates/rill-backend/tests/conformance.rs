//! One suite, every backend: the same operations must give the same
//! answers from Bitcask and from memory, including after a reopen where
//! the backend persists; and a random model test against a BTreeMap.

mod common;

use bitcask::{Options, Store};
use rill_backend::{
    BKey, Backend, BitcaskBackend, IndexQuery, IndexRange, LeveldbOptions, LeveldbStore,
    MemoryBackend, MemoryOptions, Term,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

fn bitcask(dir: &Path) -> BitcaskBackend {
    let store = Store::open(dir, Options::default()).unwrap();
    BitcaskBackend::open(Arc::new(store)).unwrap()
}

/// A leveldb database in `dir` and one partition's backend of it.
fn leveldb(dir: &Path) -> (LeveldbStore, rill_backend::LeveldbBackend) {
    let store = LeveldbStore::open(dir, LeveldbOptions::default(), 4).unwrap();
    let b = store.partition("0").unwrap();
    (store, b)
}

/// A leveled partition of a database in `dir`.
fn leveled(dir: &Path) -> (LeveldbStore, rill_backend::LeveledBackend) {
    let store = LeveldbStore::open(dir, LeveldbOptions::default(), 4).unwrap();
    let b = store
        .leveled_partition("0", &rill_backend::JournalOptions::default())
        .unwrap();
    (store, b)
}

/// Runs `check` on a memory backend, a Bitcask backend, a leveldb
/// backend, a leveled backend and a multi backend.
fn each(check: impl Fn(&dyn Backend)) {
    check(&MemoryBackend::new(MemoryOptions::default()));
    let dir = tempfile::tempdir().unwrap();
    check(&bitcask(dir.path()));
    let dir = tempfile::tempdir().unwrap();
    let (_store, b) = leveldb(dir.path());
    check(&b);
    let dir = tempfile::tempdir().unwrap();
    let (_store, b) = leveled(dir.path());
    check(&b);
    // Multi, every bucket in a leveldb backend beside a memory one.
    let dir = tempfile::tempdir().unwrap();
    let (_store, b) = leveldb(dir.path());
    let m = rill_backend::MultiBackend::new(
        vec![
            (
                "mem".into(),
                Box::new(MemoryBackend::new(MemoryOptions::default())) as Box<dyn Backend>,
            ),
            ("lsm".into(), Box::new(b)),
        ],
        "lsm",
        Arc::new(|_: &[u8], _: &[u8]| None),
    )
    .unwrap();
    check(&m);
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
    common::query(b, bucket, field, range)
        .into_iter()
        .map(|(t, k)| (t, String::from_utf8(k).unwrap()))
        .collect()
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
fn indexes_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ldir = tempfile::tempdir().unwrap();
    let vdir = tempfile::tempdir().unwrap();
    let open = |which: usize| -> (Option<LeveldbStore>, Box<dyn Backend>) {
        match which {
            0 => (None, Box::new(bitcask(dir.path()))),
            1 => {
                let (s, b) = leveldb(ldir.path());
                (Some(s), Box::new(b))
            }
            _ => {
                let (s, b) = leveled(vdir.path());
                (Some(s), Box::new(b))
            }
        }
    };
    for which in 0..3 {
        restart_keeps_indexes(|| open(which));
    }
}

fn restart_keeps_indexes(open: impl Fn() -> (Option<LeveldbStore>, Box<dyn Backend>)) {
    {
        let (_s, b) = open();
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
    let (_s, b) = open();
    assert_eq!(
        query(
            b.as_ref(),
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
    let ldir = tempfile::tempdir().unwrap();
    let (_store, lb) = leveldb(ldir.path());
    let vdir = tempfile::tempdir().unwrap();
    let (_vstore, vb) = leveled(vdir.path());
    // Multi: bucket b0 in Bitcask, b1 in leveled, the rest in the default
    // (leveldb), so the model's buckets span three backends.
    let (mdir, mldir, mvdir) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let (_mlstore, mlb) = leveldb(mldir.path());
    let (_mvstore, mvb) = leveled(mvdir.path());
    let multi = rill_backend::MultiBackend::new(
        vec![
            (
                "bc".into(),
                Box::new(bitcask(mdir.path())) as Box<dyn Backend>,
            ),
            ("lv".into(), Box::new(mvb)),
            ("lsm".into(), Box::new(mlb)),
        ],
        "lsm",
        Arc::new(|_: &[u8], bucket: &[u8]| match bucket {
            b"b\x00" => Some("bc".to_string()),
            b"b\x01" => Some("lv".to_string()),
            _ => None,
        }),
    )
    .unwrap();
    let backends: Vec<Box<dyn Backend>> = vec![
        Box::new(MemoryBackend::new(MemoryOptions::default())),
        Box::new(bitcask(dir.path())),
        Box::new(lb),
        Box::new(vb),
        Box::new(multi),
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

/// Terms with 0x00 and 0xFF bytes, terms that begin others, negative and
/// extreme integers: every backend answers in term order, then key order;
/// paging with every page size from 1 up (resuming strictly after the
/// last result, as continuations do) rebuilds the whole answer with no
/// duplicate or gap while keys are written into and deleted from the
/// paged range between pages; an
/// overwrite or a delete leaves no stale entry.
#[test]
fn index_order_and_paging_on_every_backend() {
    let bins: Vec<&[u8]> = vec![
        b"",
        b"\x00",
        b"\x00\x00",
        b"\x00\xff",
        b"a",
        b"a\x00",
        b"a\x00b",
        b"a\xff",
        b"aa",
        b"ab",
        b"b",
        b"\xff",
        b"\xff\x00",
        b"\xff\xff",
    ];
    let ints = [
        i64::MIN,
        i64::MIN + 1,
        -256,
        -1,
        0,
        1,
        255,
        256,
        i64::MAX - 1,
        i64::MAX,
    ];
    each(|b| {
        for (i, t) in bins.iter().enumerate() {
            // Two keys per term, one of them a prefix of the other.
            for key in [format!("k{i}"), format!("k{i}x")] {
                let entries = [
                    (b"t_bin".to_vec(), Term::Bin(t.to_vec())),
                    int("n_int", ints[i % ints.len()]),
                ];
                b.put(&k("", "o", &key), b"v", &entries, &[]).unwrap();
            }
        }
        let field = |f: &str, range: IndexRange, after: Option<(Term, Vec<u8>)>| IndexQuery {
            bucket_type: Vec::new(),
            bucket: b"o".to_vec(),
            field: f.as_bytes().to_vec(),
            range,
            after,
        };
        let all_bins =
            IndexRange::Range(Term::Bin(Vec::new()), Term::Bin(b"\xff\xff\xff".to_vec()));
        let mut want: Vec<(Term, Vec<u8>)> = Vec::new();
        for (i, t) in bins.iter().enumerate() {
            for key in [format!("k{i}"), format!("k{i}x")] {
                want.push((Term::Bin(t.to_vec()), key.into_bytes()));
            }
        }
        want.sort();
        let page = |q: &IndexQuery, n: usize| {
            let mut out = Vec::new();
            b.query_index(q, &mut |t, key| {
                out.push((t.clone(), key.to_vec()));
                out.len() < n
            })
            .unwrap();
            out
        };
        assert_eq!(
            page(&field("t_bin", all_bins.clone(), None), usize::MAX),
            want,
            "{}",
            b.name()
        );
        let t_bin = |t: &Term| [(b"t_bin".to_vec(), t.clone())];
        // Entries written meanwhile that the pages met (the writes do
        // land in the paged range).
        let mut met = 0;
        for size in 1..=want.len() + 1 {
            let mut joined: Vec<(Term, Vec<u8>)> = Vec::new();
            let mut after = None;
            let mut round = 0;
            // Entries written into the paged range while paging goes on.
            let mut churn: Vec<(Term, Vec<u8>)> = Vec::new();
            loop {
                // Between pages: a new key in the paged range, its term
                // cycling through every term (so before, at and after
                // the cursor), every third round the delete of an earlier
                // one, and a write to another bucket.
                round += 1;
                let term = Term::Bin(bins[(size + round) % bins.len()].to_vec());
                let key = format!("c{size}-{round}");
                b.put(&k("", "o", &key), b"v", &t_bin(&term), &[]).unwrap();
                churn.push((term, key.into_bytes()));
                if round.is_multiple_of(3) {
                    let (t, key) = &churn[round - 3];
                    b.delete(&k("", "o", std::str::from_utf8(key).unwrap()), &t_bin(t))
                        .unwrap();
                }
                b.put(
                    &k("", "other", &format!("w{size}-{round}")),
                    b"v",
                    &t_bin(&Term::Bin(b"a".to_vec())),
                    &[],
                )
                .unwrap();
                let got = page(&field("t_bin", all_bins.clone(), after.clone()), size);
                joined.extend(got.iter().cloned());
                if got.len() < size {
                    break;
                }
                after = got.last().cloned();
            }
            // In order with no duplicate; every entry present throughout
            // exactly once (no gap); nothing else but what was written
            // meanwhile.
            assert!(
                joined.windows(2).all(|w| w[0] < w[1]),
                "{} pages of {size}: out of order or repeated",
                b.name()
            );
            let kept: Vec<_> = joined
                .iter()
                .filter(|e| want.contains(e))
                .cloned()
                .collect();
            assert_eq!(kept, want, "{} pages of {size}", b.name());
            assert!(
                joined.iter().all(|e| want.contains(e) || churn.contains(e)),
                "{} pages of {size}: an entry never written",
                b.name()
            );
            met += joined.iter().filter(|e| churn.contains(e)).count();
            // Gone again before the next size (a second delete of one
            // already deleted is harmless).
            for (t, key) in &churn {
                let key = std::str::from_utf8(key).unwrap();
                b.delete(&k("", "o", key), &t_bin(t)).unwrap();
            }
        }
        assert!(met > 0, "{}: no write met by a page", b.name());
        // One term exactly, and a term that begins others.
        let eq = page(
            &field("t_bin", IndexRange::Eq(Term::Bin(b"a".to_vec())), None),
            usize::MAX,
        );
        assert_eq!(
            eq,
            vec![
                (Term::Bin(b"a".to_vec()), b"k4".to_vec()),
                (Term::Bin(b"a".to_vec()), b"k4x".to_vec())
            ],
            "{}",
            b.name()
        );
        let ranged = page(
            &field(
                "t_bin",
                IndexRange::Range(Term::Bin(b"a".to_vec()), Term::Bin(b"a\xff".to_vec())),
                None,
            ),
            usize::MAX,
        );
        let terms: Vec<&[u8]> = ranged
            .iter()
            .map(|(t, _)| match t {
                Term::Bin(b) => &b[..],
                Term::Int(_) => unreachable!(),
            })
            .collect();
        assert_eq!(
            terms,
            [
                &b"a"[..],
                b"a",
                b"a\x00",
                b"a\x00",
                b"a\x00b",
                b"a\x00b",
                b"aa",
                b"aa",
                b"ab",
                b"ab",
                b"a\xff",
                b"a\xff"
            ],
            "{}",
            b.name()
        );
        // Integers in numeric order.
        let got = page(
            &field(
                "n_int",
                IndexRange::Range(Term::Int(i64::MIN), Term::Int(i64::MAX)),
                None,
            ),
            usize::MAX,
        );
        let nums: Vec<i64> = got
            .iter()
            .map(|(t, _)| match t {
                Term::Int(i) => *i,
                Term::Bin(_) => unreachable!(),
            })
            .collect();
        let mut sorted = nums.clone();
        sorted.sort();
        assert_eq!(nums, sorted, "{}", b.name());
        assert_eq!(nums.len(), 2 * bins.len(), "{}", b.name());
        // An overwrite with another term, and a delete: no stale entry.
        b.put(
            &k("", "o", "k4"),
            b"v2",
            &[(b"t_bin".to_vec(), Term::Bin(b"zz".to_vec()))],
            &[(b"t_bin".to_vec(), Term::Bin(b"a".to_vec()))],
        )
        .unwrap();
        b.delete(
            &k("", "o", "k4x"),
            &[(b"t_bin".to_vec(), Term::Bin(b"a".to_vec()))],
        )
        .unwrap();
        assert!(
            page(
                &field("t_bin", IndexRange::Eq(Term::Bin(b"a".to_vec())), None),
                usize::MAX
            )
            .is_empty(),
            "{}",
            b.name()
        );
        assert_eq!(
            page(
                &field("t_bin", IndexRange::Eq(Term::Bin(b"zz".to_vec())), None),
                usize::MAX
            ),
            vec![(Term::Bin(b"zz".to_vec()), b"k4".to_vec())],
            "{}",
            b.name()
        );
    });
}

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
