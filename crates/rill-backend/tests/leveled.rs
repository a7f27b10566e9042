//! What leveled adds to the shared suite: heads kept apart from values
//! (read, folded, written without one), a partition dropped whole, and a
//! journal whose dead values are given back as it is rewritten.

use rill_backend::{
    BKey, Backend, JournalOptions, LeveldbOptions, LeveldbStore, MemoryBackend, MemoryOptions,
};
use std::time::{Duration, Instant};

fn store(dir: &std::path::Path) -> LeveldbStore {
    LeveldbStore::open(dir, LeveldbOptions::default(), 2).unwrap()
}

fn k(key: &str) -> BKey {
    BKey::new(b"t", b"b", key.as_bytes())
}

#[test]
fn heads_are_read_and_folded_without_values() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let b = s
        .leveled_partition("0", &JournalOptions::default())
        .unwrap();
    assert!(b.keeps_heads());
    b.put_with_head(&k("a"), b"value a", b"head a", &[], &[])
        .unwrap();
    b.put_with_head(&k("c"), b"value c", b"head c", &[], &[])
        .unwrap();
    // Written without a head: an empty one says "read the object".
    b.put(&k("b"), b"value b", &[], &[]).unwrap();
    b.put_with_head(&BKey::new(b"t", b"other", b"x"), b"v", b"h", &[], &[])
        .unwrap();
    assert_eq!(
        b.get_head(&k("a")).unwrap().unwrap().unwrap(),
        &b"head a"[..]
    );
    assert_eq!(b.get_head(&k("b")).unwrap().unwrap().unwrap(), &b""[..]);
    assert_eq!(b.get_head(&k("z")).unwrap().unwrap(), None);
    assert_eq!(b.get(&k("a")).unwrap().unwrap(), &b"value a"[..]);
    let mut folded = Vec::new();
    b.fold_heads(b"t", b"b", &mut |key, head| {
        folded.push((key.to_vec(), head.to_vec()));
        true
    })
    .unwrap();
    assert_eq!(
        folded,
        [
            (b"a".to_vec(), b"head a".to_vec()),
            (b"b".to_vec(), Vec::new()),
            (b"c".to_vec(), b"head c".to_vec()),
        ]
    );
    b.delete(&k("a"), &[]).unwrap();
    assert_eq!(b.get_head(&k("a")).unwrap().unwrap(), None);
    assert_eq!(b.get(&k("a")).unwrap(), None);
    // A backend that keeps no heads says so.
    let m = MemoryBackend::new(MemoryOptions::default());
    assert!(!m.keeps_heads());
    assert!(m.get_head(&k("a")).is_none());
    assert!(m.fold_heads(b"t", b"b", &mut |_, _| true).is_err());
}

#[test]
fn heads_and_values_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = store(dir.path());
        let b = s
            .leveled_partition("0", &JournalOptions::default())
            .unwrap();
        b.put_with_head(&k("a"), b"value a", b"head a", &[], &[])
            .unwrap();
        b.sync().unwrap();
    }
    let s = store(dir.path());
    let b = s
        .leveled_partition("0", &JournalOptions::default())
        .unwrap();
    assert_eq!(
        b.get_head(&k("a")).unwrap().unwrap().unwrap(),
        &b"head a"[..]
    );
    assert_eq!(b.get(&k("a")).unwrap().unwrap(), &b"value a"[..]);
}

#[test]
fn a_leveled_partition_is_dropped_whole() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let j = JournalOptions::default();
    let (p0, p1) = (
        s.leveled_partition("0", &j).unwrap(),
        s.leveled_partition("1", &j).unwrap(),
    );
    p0.put_with_head(&k("x"), b"zero", b"h0", &[], &[]).unwrap();
    p1.put_with_head(&k("x"), b"one", b"h1", &[], &[]).unwrap();
    drop(p0);
    s.drop_partition("0").unwrap();
    let p0 = s.leveled_partition("0", &j).unwrap();
    assert_eq!(p0.get(&k("x")).unwrap(), None);
    assert_eq!(p0.get_head(&k("x")).unwrap().unwrap(), None);
    assert!(!p0.holds_objects().unwrap());
    assert_eq!(p1.get(&k("x")).unwrap().unwrap(), &b"one"[..]);
}

/// Values overwritten many times over: the journal's files are given
/// back (dead values moved out or whole files deleted) while writes go
/// on, so its size stays near the live data; every value reads right.
#[test]
fn the_journal_gives_back_dead_values() {
    const KEYS: usize = 100;
    const VALUE: usize = 8 << 10;
    let dir = tempfile::tempdir().unwrap();
    let s = LeveldbStore::open(
        dir.path(),
        LeveldbOptions {
            max_memory_bytes: 16 << 20,
            ..LeveldbOptions::default()
        },
        1,
    )
    .unwrap();
    let j = JournalOptions {
        file_bytes: 1 << 20,
        compaction_percent: 30,
        compression: false,
    };
    let b = s.leveled_partition("0", &j).unwrap();
    let value = |i: usize, round: u32| {
        let mut v = vec![(i % 251) as u8; VALUE];
        v[..4].copy_from_slice(&round.to_be_bytes());
        v
    };
    let live = (KEYS * VALUE) as u64;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut round = 0u32;
    let mut written = 0u64;
    loop {
        round += 1;
        for i in 0..KEYS {
            b.put_with_head(&k(&format!("k{i:03}")), &value(i, round), b"h", &[], &[])
                .unwrap();
        }
        written += live;
        s.flush().unwrap();
        let st = b.journal_stats();
        // Past 40x the live data written, the journal must hold under 8x
        // (dead files wait for the ledger tables pointing into them to be
        // compacted: about four flushes' worth here).
        if written > 40 * live && st.bytes < 8 * live {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after {round} rounds ({written} bytes written) the journal still holds {st:?} for {live} live bytes"
        );
    }
    for i in 0..KEYS {
        assert_eq!(
            b.get(&k(&format!("k{i:03}"))).unwrap().unwrap(),
            value(i, round)
        );
    }
}
