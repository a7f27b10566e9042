//! Needs the system's librocksdb (scripts/test-all installs it).

use rocksdb_dl::{RocksDb, Tuning};

#[test]
fn puts_read_back_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let db = RocksDb::open(&path, &Tuning::default()).expect("librocksdb loads and opens");
        for i in 0u32..2000 {
            db.put(&i.to_be_bytes(), &vec![i as u8; 100 + (i as usize % 50)])
                .unwrap();
        }
        db.put(&7u32.to_be_bytes(), b"seven").unwrap();
        assert_eq!(
            db.get(&7u32.to_be_bytes()).unwrap().as_deref(),
            Some(&b"seven"[..])
        );
        assert_eq!(db.get(b"absent").unwrap(), None);
        let keys: u64 = db
            .property("rocksdb.estimate-num-keys")
            .expect("a known property")
            .parse()
            .unwrap();
        assert!(keys > 0);
        assert_eq!(db.property("no.such.property"), None);
    }
    let db = RocksDb::open(&path, &Tuning::default()).unwrap();
    for i in (0u32..2000).filter(|&i| i != 7) {
        let v = db
            .get(&i.to_be_bytes())
            .unwrap()
            .expect("kept across reopen");
        assert_eq!(v, vec![i as u8; 100 + (i as usize % 50)]);
    }
    assert_eq!(
        db.get(&7u32.to_be_bytes()).unwrap().as_deref(),
        Some(&b"seven"[..])
    );
}

#[test]
fn open_errors_are_reported_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let e = RocksDb::open(&file, &Tuning::default())
        .err()
        .expect("a file is no database");
    assert!(e.to_string().starts_with("RocksDB: "), "{e}");
}

#[test]
fn batches_apply_whole_and_iterators_walk_in_order() {
    use rocksdb_dl::WriteBatch;
    let dir = tempfile::tempdir().unwrap();
    let tuning = Tuning {
        block_cache_bytes: Some(8 << 20),
        bloom_bits_per_key: Some(10.0),
        lz4: true,
        ..Tuning::default()
    };
    let db = RocksDb::open(&dir.path().join("db"), &tuning).unwrap();
    let mut b = WriteBatch::new().unwrap();
    for k in [&b"b2"[..], b"a1", b"c3", b"b1"] {
        b.put(k, &[k[1]; 3]);
    }
    b.delete(b"c3");
    db.write(&b).unwrap();
    db.flush().unwrap();
    assert!(db.table_bytes().unwrap() > 0);
    let mut it = db.iter();
    it.seek(b"b");
    let mut seen = Vec::new();
    while let Some((k, v)) = it.current().unwrap() {
        seen.push((k.to_vec(), v.to_vec()));
        it.advance();
    }
    assert_eq!(
        seen,
        vec![
            (b"b1".to_vec(), b"111".to_vec()),
            (b"b2".to_vec(), b"222".to_vec())
        ]
    );
    it.advance();
    assert_eq!(it.current().unwrap(), None);
    drop(it);
    assert_eq!(db.get(b"c3").unwrap(), None);
    assert_eq!(db.get(b"a1").unwrap().as_deref(), Some(&b"111"[..]));
}
