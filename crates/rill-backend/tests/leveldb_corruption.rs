//! A flipped byte in a leveldb table file: reads give the right value or
//! a clear error, never a wrong value or a missing key; a scan ends; the
//! other keys are served and writes go on. A damaged journal is set
//! aside, on leveldb and on leveled (whose heads, values and index
//! entries stay in step).

mod common;

use rill_backend::{
    BKey, Backend, IndexQuery, IndexRange, JournalOptions, LeveldbOptions, LeveldbStore, Term,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn value(i: u32) -> Vec<u8> {
    // Compressible, so blocks are LZ4 (every level is compressed).
    format!("value {i} ").repeat(40).into_bytes()
}

fn key(i: u32) -> BKey {
    BKey::new(b"", b"b", format!("k{i:05}").as_bytes())
}

#[test]
fn a_flipped_byte_in_a_table_gives_errors_not_wrong_data() {
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
            b.put(&key(i), &value(i), &[], &[]).unwrap();
        }
        store.flush().unwrap();
        store.sync().unwrap();
    }
    // The largest table: the partition's (the journal is preallocated).
    // 3000 values of 400 bytes, LZ4 in every level: about 90 kB.
    common::flip_in_largest(dir.path(), "tables", 1.0 / 3.0, 50_000);

    let store = LeveldbStore::open(dir.path(), opts, 1).unwrap();
    let b = store.partition("0").unwrap();
    let mut errors = 0;
    let mut first_error = String::new();
    for i in 0..KEYS {
        match b.get(&key(i)) {
            Ok(Some(v)) => assert_eq!(&v[..], &value(i)[..], "a wrong value for k{i}"),
            Ok(None) => panic!("k{i} reads as missing: a corrupt block must give an error"),
            Err(e) => {
                errors += 1;
                if first_error.is_empty() {
                    first_error = e.to_string();
                }
            }
        }
    }
    assert!(errors > 0, "the flipped byte went unnoticed");
    assert_eq!(store.damaged_reads(), errors as u64);
    assert!(first_error.contains("damaged"), "{first_error}");
    assert!(
        errors < KEYS / 10,
        "{errors} of {KEYS} keys unreadable: more than one block"
    );
    assert!(
        !first_error.contains(&dir.path().display().to_string()),
        "the error names a path: {first_error}"
    );
    eprintln!("{errors} of {KEYS} keys unreadable: {first_error}");
    // A scan ends, with an error or all keys (never a loop).
    let mut seen = 0;
    let _ = b.fold_keys(b"", b"b", &mut |_| {
        seen += 1;
        true
    });
    assert!(seen <= KEYS as usize);
    // Writes go on, and read back.
    b.put(&key(KEYS), b"after", &[], &[]).unwrap();
    assert_eq!(&b.get(&key(KEYS)).unwrap().unwrap()[..], b"after");
}

/// A flipped byte in the journal (writes not yet in tables): fjall will
/// not recover such a journal, so the database sets it aside in `lost/`
/// and opens with what its tables hold; never a wrong value. Replicas on
/// other vnodes answer for what is lost here.
#[test]
fn a_damaged_journal_is_set_aside_and_the_tables_serve() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LeveldbOptions {
        max_memory_bytes: 256 << 20,
        ..LeveldbOptions::default()
    };
    const KEYS: u32 = 2000;
    {
        let store = LeveldbStore::open(dir.path(), opts.clone(), 1).unwrap();
        let b = store.partition("0").unwrap();
        for i in 0..KEYS / 2 {
            b.put(&key(i), &value(i), &[], &[]).unwrap();
        }
        store.flush().unwrap();
        for i in KEYS / 2..KEYS {
            b.put(&key(i), &value(i), &[], &[]).unwrap();
        }
        store.sync().unwrap();
    }
    flip_a_byte_in_the_newest_journal(dir.path());

    let store = LeveldbStore::open(dir.path(), opts, 1).unwrap();
    let b = store.partition("0").unwrap();
    let (mut kept, mut lost) = (0, 0);
    for i in 0..KEYS {
        match b.get(&key(i)).unwrap() {
            Some(v) => {
                assert_eq!(&v[..], &value(i)[..], "a wrong value for k{i}");
                kept += 1;
            }
            None => lost += 1,
        }
    }
    eprintln!("journal damage: {kept} keys kept, {lost} lost");
    assert!(
        kept >= KEYS / 2,
        "kept {kept}: what the tables held is gone"
    );
    let set_aside = std::fs::read_dir(dir.path().join("lost")).unwrap().count();
    assert!(set_aside > 0, "nothing set aside in lost/");
    b.put(&key(KEYS), b"after", &[], &[]).unwrap();
    assert_eq!(&b.get(&key(KEYS)).unwrap().unwrap()[..], b"after");
}

/// Flips a byte in the middle of the newest journal file of the database
/// in `dir` (which must hold at least 100 kB of writes).
fn flip_a_byte_in_the_newest_journal(dir: &Path) {
    let all = testkit::files_under(dir);
    let journals: Vec<&PathBuf> = all
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jnl"))
        .collect();
    let journal = journals.iter().max().expect("a journal file");
    let mut bytes = std::fs::read(journal).unwrap();
    let written = bytes.iter().rposition(|b| *b != 0).unwrap();
    assert!(written > 100_000, "journal holds {written} bytes");
    bytes[written / 2] ^= 0x5a;
    std::fs::write(journal, &bytes).unwrap();
}

/// leveled with a damaged journal set aside: the writes since the last
/// flush are lost, but every key's head, value and index entry are of the
/// same write (the partition's tables hold a prefix of its writes): never
/// a value the ledger does not list, a head of another version, or an
/// index entry of a write whose value is gone.
#[test]
fn a_damaged_journal_leaves_leveled_heads_values_and_indexes_in_step() {
    const KEYS: u32 = 300;
    const ROUNDS: u32 = 12;
    let dir = tempfile::tempdir().unwrap();
    // Write buffers of 2 MiB: the 14 MB written reach tables in several
    // flushes, the last ones stay in the journal.
    let opts = LeveldbOptions {
        max_memory_bytes: 8 << 20,
        ..LeveldbOptions::default()
    };
    let field = b"round_int".to_vec();
    let versioned = |round: u32, i: u32| {
        let mut v = format!("{round:08}").into_bytes();
        v.resize(4096, i as u8);
        v
    };
    {
        let store = LeveldbStore::open(dir.path(), opts.clone(), 1).unwrap();
        let b = store
            .leveled_partition("0", &JournalOptions::default())
            .unwrap();
        for round in 1..=ROUNDS {
            for i in 0..KEYS {
                let add = [(field.clone(), Term::Int(round.into()))];
                let remove = [(field.clone(), Term::Int((round - 1).into()))];
                let head = format!("{round:08}");
                b.put_with_head(
                    &key(i),
                    &versioned(round, i),
                    head.as_bytes(),
                    &add,
                    &remove,
                )
                .unwrap();
            }
        }
        store.sync().unwrap();
    }
    flip_a_byte_in_the_newest_journal(dir.path());

    let store = LeveldbStore::open(dir.path(), opts, 1).unwrap();
    let b = store
        .leveled_partition("0", &JournalOptions::default())
        .unwrap();
    let mut indexed = BTreeMap::new();
    let q = IndexQuery {
        bucket_type: Vec::new(),
        bucket: b"b".to_vec(),
        field,
        range: IndexRange::Range(Term::Int(0), Term::Int(i64::MAX)),
        after: None,
    };
    b.query_index(&q, &mut |t, k| {
        assert!(
            indexed.insert(k.to_vec(), t.clone()).is_none(),
            "two index entries for one key"
        );
        true
    })
    .unwrap();
    let round_of = |b: &[u8]| -> u32 { std::str::from_utf8(&b[..8]).unwrap().parse().unwrap() };
    let mut rounds = BTreeMap::new();
    for i in 0..KEYS {
        let k = key(i);
        let value = b.get(&k).unwrap();
        let head = b.get_head(&k).unwrap().unwrap();
        let round = value.as_ref().map(|v| round_of(v));
        if let Some(r) = round {
            assert_eq!(
                value.as_deref(),
                Some(&versioned(r, i)[..]),
                "a wrong value for k{i}"
            );
        }
        assert_eq!(
            head.as_ref().map(|h| round_of(h)),
            round,
            "head and value of k{i}"
        );
        assert_eq!(
            indexed.get(&k.key),
            round.map(|r| Term::Int(r.into())).as_ref(),
            "index entry and value of k{i}"
        );
        *rounds.entry(round).or_insert(0) += 1;
    }
    eprintln!("leveled journal damage: keys by the round they hold {rounds:?}");
    assert!(
        rounds.get(&Some(ROUNDS)).copied().unwrap_or(0) < KEYS,
        "every key holds the last round, though the journal holding its end was set aside"
    );
    assert!(
        rounds.keys().any(|r| r.is_some()),
        "nothing of what the tables held is served"
    );
}

/// A flipped byte in a leveled journal (blob) file: the value it lies in
/// reads as a clear error, counted, never as wrong data or as missing;
/// its head and every other key are served, and writes go on.
#[test]
fn a_flipped_byte_in_a_leveled_journal_file_gives_errors_not_wrong_data() {
    const KEYS: u32 = 400;
    let dir = tempfile::tempdir().unwrap();
    let opts = LeveldbOptions::default();
    let journal = common::plain_journal();
    let big = |i: u32| common::journal_value(value(i), i);
    common::load_leveled(dir.path(), &journal, KEYS, |i| (key(i), big(i), Vec::new()));
    common::flip_in_largest(dir.path(), "blobs", 0.5, 1_000_000);

    let store = LeveldbStore::open(dir.path(), opts, 1).unwrap();
    let b = store.leveled_partition("0", &journal).unwrap();
    let mut errors = 0;
    for i in 0..KEYS {
        match b.get(&key(i)) {
            Ok(Some(v)) => assert_eq!(&v[..], &big(i)[..], "a wrong value for k{i}"),
            Ok(None) => panic!("k{i} reads as missing: a damaged value must give an error"),
            Err(e) => {
                errors += 1;
                let e = e.to_string();
                assert!(e.contains("damaged"), "{e}");
                assert!(!e.contains(&dir.path().display().to_string()), "{e}");
            }
        }
        assert_eq!(
            b.get_head(&key(i)).unwrap().unwrap().as_deref(),
            Some(&b"head"[..])
        );
    }
    eprintln!("leveled journal: {errors} of {KEYS} values unreadable");
    assert_eq!(errors, 1, "one value holds the flipped byte");
    assert_eq!(store.damaged_reads(), 1);
    b.put_with_head(&key(KEYS), &big(KEYS), b"head", &[], &[])
        .unwrap();
    assert_eq!(&b.get(&key(KEYS)).unwrap().unwrap()[..], &big(KEYS)[..]);
}
