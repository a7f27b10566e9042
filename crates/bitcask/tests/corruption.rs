//! Corruption: flipped bytes, truncated files, damaged or missing hints.
//! Recovery must keep every intact record, report what it skipped, and
//! never panic or loop.

mod common;

use bitcask::{Error, Options, Store};
use common::{data_files, small_options, Rng};
use std::fs::OpenOptions;
use std::path::Path;

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

fn value(i: u32, gen: u32) -> Vec<u8> {
    format!("value-{i}-{gen}-").repeat(20).into_bytes()
}

/// Writes 2000 keys twice over (so several closed files exist), closes.
fn populate(dir: &Path) -> Options {
    let opts = small_options();
    let s = Store::open(dir, opts.clone()).unwrap();
    for gen in 0..2 {
        for i in 0..2000 {
            s.put(&key(i), &value(i, gen)).unwrap();
        }
    }
    s.close().unwrap();
    opts
}

fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x5a;
    std::fs::write(path, bytes).unwrap();
}

fn remove_hints(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "hint") {
            std::fs::remove_file(p).unwrap();
        }
    }
}

fn check_all_but(store: &Store, damaged: &[u32]) {
    for i in 0..2000 {
        let got = store.get(&key(i));
        if damaged.contains(&i) {
            continue;
        }
        assert_eq!(got.unwrap(), Some(value(i, 1)), "key {i}");
    }
}

/// The key whose newest record sits at a given place: found by scanning.
fn newest_record_in(path: &Path) -> (u64, u32) {
    let bytes = std::fs::read(path).unwrap();
    // Pick the second record of the file.
    let mut scanner = bitcask::recovery::scan::Scanner::new(&bytes, 16);
    scanner.next_event().unwrap();
    match scanner.next_event().unwrap() {
        bitcask::recovery::scan::ScanEvent::Record { offset, key, .. } => {
            let k = std::str::from_utf8(key).unwrap();
            (offset, k[4..].parse().unwrap())
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn flipped_byte_with_hint_reads_as_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let opts = populate(dir.path());
    let last_closed = data_files(dir.path()).into_iter().rev().nth(1).unwrap();
    let (offset, victim) = newest_record_in(&last_closed);
    flip(&last_closed, offset + 40);
    let s = Store::open(dir.path(), opts).unwrap();
    match s.get(&key(victim)) {
        Err(Error::Corrupt { offset: at, .. }) => assert_eq!(at, offset),
        other => panic!("expected a corruption error, got {other:?}"),
    }
    check_all_but(&s, &[victim]);
}

#[test]
fn flipped_byte_without_hint_is_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let opts = populate(dir.path());
    let last_closed = data_files(dir.path()).into_iter().rev().nth(1).unwrap();
    let (offset, victim) = newest_record_in(&last_closed);
    flip(&last_closed, offset + 40);
    remove_hints(dir.path());
    let s = Store::open(dir.path(), opts.clone()).unwrap();
    let r = s.recovery_report().clone();
    assert_eq!(r.corrupt_regions, 1, "{r:?}");
    assert_eq!(r.torn_bytes, 0, "{r:?}");
    // The damaged key falls back to its older version.
    assert_eq!(s.get(&key(victim)).unwrap(), Some(value(victim, 0)));
    check_all_but(&s, &[victim]);
    drop(s);
    // The hint written by the scan is used next time.
    let s = Store::open(dir.path(), opts).unwrap();
    assert_eq!(s.recovery_report().files_scanned, 0);
    check_all_but(&s, &[victim]);
}

#[test]
fn torn_tail_is_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let opts = populate(dir.path());
    let newest = data_files(dir.path()).pop().unwrap();
    // Cut 10 bytes off the newest file and drop its hint, as a crash in the
    // middle of an append would leave it.
    let len = std::fs::metadata(&newest).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&newest)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    std::fs::remove_file(newest.with_extension("hint")).unwrap();
    let s = Store::open(dir.path(), opts).unwrap();
    let r = s.recovery_report().clone();
    assert!(r.torn_bytes > 0 && r.torn_bytes < 10_000, "{r:?}");
    assert_eq!(r.corrupt_regions, 0);
    let now = std::fs::metadata(&newest).unwrap().len();
    assert_eq!(
        now,
        len - 10 - r.torn_bytes,
        "the torn tail was cut off on disk"
    );
    // Exactly one key lost its newest version: it reads as the older one.
    let mut older = 0;
    for i in 0..2000 {
        let v = s.get(&key(i)).unwrap().unwrap();
        if v != value(i, 1) {
            assert_eq!(v, value(i, 0));
            older += 1;
        }
    }
    assert_eq!(older, 1);
}

#[test]
fn damaged_or_missing_hints_are_rebuilt_from_data() {
    let dir = tempfile::tempdir().unwrap();
    let opts = populate(dir.path());
    let hints: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "hint"))
        .collect();
    assert!(hints.len() >= 3);
    flip(&hints[0], 30);
    std::fs::remove_file(&hints[1]).unwrap();
    let len = std::fs::metadata(&hints[2]).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&hints[2])
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let s = Store::open(dir.path(), opts.clone()).unwrap();
    assert_eq!(s.recovery_report().files_scanned, 3);
    check_all_but(&s, &[]);
    drop(s);
    let s = Store::open(dir.path(), opts).unwrap();
    assert_eq!(s.recovery_report().files_scanned, 0);
    check_all_but(&s, &[]);
}

#[test]
fn foreign_or_future_files_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let opts = populate(dir.path());
    let first = data_files(dir.path()).remove(0);
    flip(&first, 8); // the version byte
    match Store::open(dir.path(), opts) {
        Err(Error::Corrupt { source, path, .. }) => {
            assert_eq!(path, first);
            assert!(source.to_string().contains("version"), "{source}");
        }
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("opened a file of an unknown version"),
    }
}

#[test]
fn a_data_file_shorter_than_its_header_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let opts = populate(dir.path());
    let stub = dir.path().join("0000009999.data");
    std::fs::write(&stub, b"RILL").unwrap();
    let s = Store::open(dir.path(), opts).unwrap();
    assert!(!stub.exists());
    check_all_but(&s, &[]);
}

#[test]
fn random_damage_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let opts = populate(dir.path());
    let pristine = tempfile::tempdir().unwrap();
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.file_name().unwrap() != "LOCK")
        .collect();
    for p in &names {
        std::fs::copy(p, pristine.path().join(p.file_name().unwrap())).unwrap();
    }
    let mut rng = Rng::new(7);
    for round in 0..40 {
        for p in &names {
            std::fs::copy(pristine.path().join(p.file_name().unwrap()), p).unwrap();
        }
        for _ in 0..1 + rng.below(6) {
            let p = &names[rng.below(names.len() as u64) as usize];
            let len = std::fs::metadata(p).unwrap().len();
            if rng.chance(20) {
                let cut = rng.below(len + 1);
                OpenOptions::new()
                    .write(true)
                    .open(p)
                    .unwrap()
                    .set_len(cut)
                    .unwrap();
            } else if len > 0 {
                flip(p, rng.below(len));
            }
        }
        // Either a clear error or a store whose reads are values or errors.
        if let Ok(s) = Store::open(dir.path(), opts.clone()) {
            for i in 0..2000 {
                if let Ok(Some(v)) = s.get(&key(i)) {
                    assert!(
                        v == value(i, 1) || v == value(i, 0),
                        "round {round} key {i}"
                    );
                }
            }
        }
        // Leave no files written by this round behind for the next.
        for e in std::fs::read_dir(dir.path()).unwrap() {
            let p = e.unwrap().path();
            if !names.contains(&p) && p.file_name().unwrap() != "LOCK" {
                std::fs::remove_file(p).unwrap();
            }
        }
    }
}
