//! Hint files with many entries are loaded by several threads at once.
//! The keydir and every file's statistics must come out exactly as if one
//! thread had loaded them, whatever the interleaving.

mod common;

use bitcask::{Options, Store};
use common::file_counts;

#[test]
fn big_hints_load_in_parallel_to_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        max_file_size_bytes: 8 << 20,
        ..Options::default()
    };
    let s = Store::open(dir.path(), opts.clone()).unwrap();
    let key = |i: u64| format!("key-{}", i % 90_000).into_bytes();
    // Several passes over the keys: overwrites within and across files,
    // deletes, re-puts after deletes.
    for i in 0..400_000u64 {
        if i % 11 == 0 {
            s.delete(&key(i)).unwrap();
        } else {
            s.put(&key(i), &i.to_le_bytes()).unwrap();
        }
    }
    let before = file_counts(&s);
    let mut expect = Vec::new();
    s.fold(|k, v| {
        expect.push((k.to_vec(), v.to_vec()));
        true
    })
    .unwrap();
    expect.sort();
    s.close().unwrap();
    assert!(
        before.iter().any(|f| f.2 > 2 * 65_536),
        "no file big enough: {before:?}"
    );
    for _ in 0..3 {
        let s = Store::open(dir.path(), opts.clone()).unwrap();
        assert_eq!(s.recovery_report().files_scanned, 0);
        assert_eq!(file_counts(&s), before);
        let mut got = Vec::new();
        s.fold(|k, v| {
            got.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
        got.sort();
        assert_eq!(got, expect);
        drop(s);
    }
}
