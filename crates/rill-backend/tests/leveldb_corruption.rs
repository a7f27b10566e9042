//! A flipped byte in a leveldb table file: reads give the right value or
//! a clear error, never a wrong value or a missing key; a scan ends; the
//! other keys are served and writes go on.

use rill_backend::{BKey, Backend, LeveldbOptions, LeveldbStore};
use std::path::PathBuf;

fn value(i: u32) -> Vec<u8> {
    // Compressible, so blocks are LZ4 in the deeper levels too.
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
    let all = testkit::files_under(dir.path());
    let table = all
        .iter()
        .filter(|p| p.parent().is_some_and(|d| d.ends_with("tables")))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap()
        .clone();
    let mut bytes = std::fs::read(&table).unwrap();
    assert!(
        bytes.len() > 100_000,
        "{} is {} bytes",
        table.display(),
        bytes.len()
    );
    let at = bytes.len() / 3;
    bytes[at] ^= 0x5a;
    std::fs::write(&table, &bytes).unwrap();

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
    let all = testkit::files_under(dir.path());
    let journals: Vec<&PathBuf> = all
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jnl"))
        .collect();
    // The newest journal holds the second half.
    let journal = journals.iter().max().expect("a journal file");
    let mut bytes = std::fs::read(journal).unwrap();
    let written = bytes.iter().rposition(|b| *b != 0).unwrap();
    assert!(written > 100_000, "journal holds {written} bytes");
    bytes[written / 2] ^= 0x5a;
    std::fs::write(journal, &bytes).unwrap();

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
