//! `Store::try_get` answers only what it can without waiting, and what it
//! answers is what `Store::get` answers.

mod common;

use bitcask::Store;
use common::small_options;

#[test]
fn try_get_answers_as_get_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), small_options()).unwrap();
    for i in 0..500u32 {
        let v = vec![(i % 251) as u8; 100 + (i as usize % 300)];
        store.put(format!("k{i}").as_bytes(), &v).unwrap();
    }
    for i in (0..500u32).step_by(7) {
        store.delete(format!("k{i}").as_bytes()).unwrap();
    }
    store.sync().unwrap();
    let mut answered = 0;
    for i in 0..520u32 {
        let k = format!("k{i}");
        let want = store.get(k.as_bytes()).unwrap();
        if let Some(got) = store.try_get(k.as_bytes(), usize::MAX) {
            assert_eq!(got.unwrap(), want, "{k}");
            answered += 1;
        }
    }
    // Just written: the bytes are in the page cache or the write buffer.
    assert!(answered > 0, "no read was answered without waiting");
    // A record over the limit is left to `get`.
    assert!(store.try_get(b"k1", 10).is_none());
}

/// A read that must not wait never opens a file: a data file not open
/// yet (after a restart) is left to `get`, which opens it; then it is
/// answered in place.
#[test]
fn try_get_leaves_files_not_open_to_get() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path(), small_options()).unwrap();
        for i in 0..500u32 {
            store.put(format!("k{i}").as_bytes(), &[7u8; 300]).unwrap();
        }
        store.sync().unwrap();
    }
    let store = Store::open(dir.path(), small_options()).unwrap();
    assert!(
        store.try_get(b"k1", usize::MAX).is_none(),
        "the oldest file is not open after the restart"
    );
    assert_eq!(store.get(b"k1").unwrap(), Some(vec![7u8; 300]));
    let again = store.try_get(b"k1", usize::MAX);
    assert!(
        again.is_none() || again.unwrap().unwrap() == Some(vec![7u8; 300]),
        "answered as get, or left to it"
    );
}
