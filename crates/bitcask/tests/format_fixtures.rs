//! Files written by earlier format versions stay readable. The fixture in
//! tests/fixtures/v1 was written by format version 1 and is kept as it is;
//! `cargo test -p bitcask --test format_fixtures -- --ignored` rewrites it
//! (only ever do that for a brand-new version's own fixture directory).

mod common;

use bitcask::{Options, PutOptions, Store};
use common::ManualClock;
use std::path::{Path, PathBuf};
use std::time::Duration;

const FIXTURE_CLOCK_S: u64 = 1_790_000_000;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1")
}

fn options(clock_s: u64) -> Options {
    Options {
        max_file_size_bytes: 4096,
        clock: ManualClock::starting_at(clock_s),
        ..Options::default()
    }
}

fn value(i: u32) -> Vec<u8> {
    format!("fixture value {i} ")
        .repeat(i as usize % 5 + 1)
        .into_bytes()
}

#[test]
#[ignore = "rewrites the committed fixture"]
fn write_v1_fixture() {
    let dir = fixture_dir();
    let _ = std::fs::remove_dir_all(&dir);
    let s = Store::open(&dir, options(FIXTURE_CLOCK_S)).unwrap();
    for i in 0..100u32 {
        s.put(format!("key-{i}").as_bytes(), &value(i)).unwrap();
    }
    for i in (0..100u32).step_by(10) {
        s.delete(format!("key-{i}").as_bytes()).unwrap();
    }
    let ttl = |secs| PutOptions {
        ttl: Some(Duration::from_secs(secs)),
    };
    s.put_with(b"expires-soon", b"gone", ttl(60)).unwrap();
    s.put_with(b"expires-late", b"kept", ttl(10 * 365 * 86_400))
        .unwrap();
    s.close().unwrap();
    std::fs::remove_file(dir.join("LOCK")).unwrap();
}

#[test]
fn v1_fixture_reads() {
    let copy = tempfile::tempdir().unwrap();
    let mut data_files = 0;
    for e in std::fs::read_dir(fixture_dir()).expect("fixture present") {
        let p = e.unwrap().path();
        data_files += usize::from(p.extension().is_some_and(|x| x == "data"));
        std::fs::copy(&p, copy.path().join(p.file_name().unwrap())).unwrap();
    }
    assert!(data_files >= 3, "the fixture spans several data files");
    // Read an hour after it was written: the 60 s record has expired.
    let s = Store::open(copy.path(), options(FIXTURE_CLOCK_S + 3600)).unwrap();
    assert_eq!(s.recovery_report().files_scanned, 0, "hints are used");
    for i in 0..100u32 {
        let got = s.get(format!("key-{i}").as_bytes()).unwrap();
        let want = (i % 10 != 0).then(|| value(i));
        assert_eq!(got, want, "key-{i}");
    }
    assert_eq!(s.get(b"expires-soon").unwrap(), None);
    assert_eq!(
        s.get(b"expires-late").unwrap().as_deref(),
        Some(&b"kept"[..])
    );
    let mut n = 0;
    s.fold_keys(|_| {
        n += 1;
        true
    })
    .unwrap();
    assert_eq!(n, 91);
    // And once more with the hints gone: the data files alone suffice.
    drop(s);
    for e in std::fs::read_dir(copy.path()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "hint") {
            std::fs::remove_file(p).unwrap();
        }
    }
    let s = Store::open(copy.path(), options(FIXTURE_CLOCK_S + 3600)).unwrap();
    assert_eq!(s.get(b"key-7").unwrap(), Some(value(7)));
    assert_eq!(s.get(b"key-20").unwrap(), None);
}
