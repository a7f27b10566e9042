//! `LeveldbStore::verify` and `repair` (what `rill admin leveldb verify |
//! repair` run with the node stopped): a flipped byte in a table or a
//! leveled journal file is found as a lost range; after the repair every
//! read answers (the lost keys as missing, never an error or a wrong
//! value), objects and index entries match, the lost ranges are recorded
//! in `lost/damaged-ranges`, and the database serves and takes writes.

mod common;

use rill_backend::{BKey, Backend, IndexRange, JournalOptions, LeveldbOptions, LeveldbStore, Term};
use std::collections::BTreeSet;
use std::path::Path;

fn value(i: u32) -> Vec<u8> {
    format!("value {i} ").repeat(40).into_bytes()
}

fn key(i: u32) -> BKey {
    BKey::new(b"", b"b", format!("k{i:05}").as_bytes())
}

fn term(i: u32) -> Vec<(Vec<u8>, Term)> {
    vec![(
        b"f_bin".to_vec(),
        Term::Bin(format!("t{:05}", (i * 7919) % 100_000).into_bytes()),
    )]
}

/// Every (term, key) of field `f_bin`.
fn index(b: &dyn Backend) -> BTreeSet<(Vec<u8>, Vec<u8>)> {
    let all = IndexRange::Range(Term::Bin(Vec::new()), Term::Bin(vec![0xFF; 8]));
    common::query(b, "b", "f_bin", all)
        .into_iter()
        .map(|(t, k)| {
            let Term::Bin(t) = t else {
                panic!("a _bin term")
            };
            (t, k)
        })
        .collect()
}

/// Reads every key after a repair: each answers with its value or as
/// missing, never an error; the keys missing.
fn missing_after_repair(b: &dyn Backend, keys: u32, value: impl Fn(u32) -> Vec<u8>) -> Vec<u32> {
    let mut missing = Vec::new();
    for i in 0..keys {
        match b.get(&key(i)) {
            Ok(Some(v)) => assert_eq!(&v[..], &value(i)[..], "a wrong value for k{i}"),
            Ok(None) => missing.push(i),
            Err(e) => panic!("k{i} still fails after the repair: {e}"),
        }
    }
    missing
}

/// Objects and index entries match: every index entry's object is there
/// and every object has its entry.
fn assert_objects_and_index_match(b: &dyn Backend, keys: u32, missing: &[u32]) {
    let want: BTreeSet<(Vec<u8>, Vec<u8>)> = (0..keys)
        .filter(|i| !missing.contains(i))
        .map(|i| {
            let Term::Bin(t) = term(i).remove(0).1 else {
                unreachable!()
            };
            (t, key(i).key)
        })
        .collect();
    assert_eq!(index(b), want, "index entries and objects disagree");
}

fn lost_lines(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("lost/damaged-ranges"))
        .unwrap()
        .lines()
        .inspect(|l| assert!(l.starts_with("{\"time\":") && l.contains("\"keyspace\":\"")))
        .count()
}

#[test]
fn a_damaged_table_block_is_found_and_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LeveldbOptions {
        max_memory_bytes: 32 << 20,
        ..LeveldbOptions::default()
    };
    const KEYS: u32 = 3000;
    {
        let store = LeveldbStore::open(dir.path(), opts.clone(), 1).unwrap();
        let b = store.partition("0").unwrap();
        for i in 0..KEYS {
            b.put(&key(i), &value(i), &term(i), &[]).unwrap();
        }
        store.flush().unwrap();
        store.sync().unwrap();
        assert!(store.verify().unwrap().iter().all(|c| c.lost.is_empty()));
    }
    // Past the index entries (which sort first), among the objects.
    common::flip_in_largest(dir.path(), "tables", 0.5, 100_000);
    {
        let store = LeveldbStore::open(dir.path(), opts.clone(), 1).unwrap();
        let checks = store.verify().unwrap();
        assert_eq!(checks.len(), 1, "{checks:?}");
        assert_eq!(checks[0].keyspace, "p0");
        assert_eq!(checks[0].lost.len(), 1, "{checks:?}");
        let repaired = store.repair(&JournalOptions::default()).unwrap();
        assert_eq!(repaired[0].lost, checks[0].lost, "the same range twice");
        assert!(repaired[0].unmatched > 0, "the lost objects' index entries");
        assert!(store.verify().unwrap().iter().all(|c| c.lost.is_empty()));
    }
    assert_eq!(lost_lines(dir.path()), 1);
    let store = LeveldbStore::open(dir.path(), opts, 1).unwrap();
    let b = store.partition("0").unwrap();
    let missing = missing_after_repair(&b, KEYS, value);
    eprintln!("{} of {KEYS} keys lost: {missing:?}", missing.len());
    // About one block's keys (4 KiB of 400-byte values), and at most
    // two before it that the merge read ahead of.
    assert!(!missing.is_empty() && missing.len() <= 16, "{missing:?}");
    // The lost keys are one run: the damaged block's.
    assert_eq!(
        missing.last().unwrap() - missing[0] + 1,
        missing.len() as u32
    );
    assert_objects_and_index_match(&b, KEYS, &missing);
    assert_eq!(store.damaged_reads(), 0);
    b.put(&key(missing[0]), &value(missing[0]), &term(missing[0]), &[])
        .unwrap();
    assert_eq!(
        &b.get(&key(missing[0])).unwrap().unwrap()[..],
        &value(missing[0])[..]
    );
}

#[test]
fn a_damaged_leveled_value_is_found_and_repaired() {
    const KEYS: u32 = 400;
    let dir = tempfile::tempdir().unwrap();
    let opts = LeveldbOptions::default();
    let journal = common::plain_journal();
    let big = |i: u32| common::journal_value(value(i), i);
    common::load_leveled(dir.path(), &journal, KEYS, |i| (key(i), big(i), term(i)));
    common::flip_in_largest(dir.path(), "blobs", 0.5, 100_000);
    {
        let store = LeveldbStore::open(dir.path(), opts.clone(), 1).unwrap();
        let checks = store.repair(&journal).unwrap();
        assert_eq!(checks.len(), 1, "{checks:?}");
        assert_eq!(checks[0].keyspace, "lv0");
        assert_eq!(checks[0].lost.len(), 1, "{checks:?}");
        // The damaged value's head and index entry.
        assert_eq!(checks[0].unmatched, 2, "{checks:?}");
    }
    let store = LeveldbStore::open(dir.path(), opts, 1).unwrap();
    let b = store.leveled_partition("0", &journal).unwrap();
    let missing = missing_after_repair(&b, KEYS, big);
    assert_eq!(missing.len(), 1, "one value held the flipped byte");
    assert_eq!(b.get_head(&key(missing[0])).unwrap().unwrap(), None);
    for i in (0..KEYS).filter(|i| !missing.contains(i)) {
        assert_eq!(
            b.get_head(&key(i)).unwrap().unwrap().as_deref(),
            Some(&b"head"[..])
        );
    }
    assert_objects_and_index_match(&b, KEYS, &missing);
    assert_eq!(lost_lines(dir.path()), 1);
}

#[test]
fn an_undamaged_database_is_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let store = LeveldbStore::open(dir.path(), LeveldbOptions::default(), 2).unwrap();
    let (a, b) = (store.partition("0").unwrap(), store.partition("1").unwrap());
    for i in 0..100 {
        a.put(&key(i), &value(i), &term(i), &[]).unwrap();
        b.put(&key(i), &value(i), &[], &[]).unwrap();
    }
    let checks = store.repair(&JournalOptions::default()).unwrap();
    assert_eq!(checks.len(), 2);
    for c in &checks {
        assert!(c.lost.is_empty() && c.unmatched == 0, "{c:?}");
    }
    // Objects and index entries: 100 and 100 in p0, 100 in p1.
    assert_eq!(checks[0].entries, 200);
    assert_eq!(checks[1].entries, 100);
    assert!(!dir.path().join("lost/damaged-ranges").exists());
    assert_eq!(missing_after_repair(&a, 100, value), Vec::<u32>::new());
}
