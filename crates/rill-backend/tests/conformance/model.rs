//! Random operations against every backend and a BTreeMap model.

use super::{bitcask, int, leveldb, leveled, query};
use rill_backend::{BKey, Backend, IndexRange, MemoryBackend, MemoryOptions, Term};
use std::collections::BTreeMap;
use std::sync::Arc;

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
