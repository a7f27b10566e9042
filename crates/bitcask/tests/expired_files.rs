//! Files whose every record has expired are deleted unread: the storage
//! period of sensor data is kept by dropping whole files, with no merge
//! reading (or writing) a byte, and nothing expired comes back after a
//! restart. A file that another, older file could shadow is not.

mod common;

use bitcask::{PutOptions, Store};
use common::{closed_files, small_options, ManualClock};
use std::sync::Arc;
use std::time::Duration;

fn ttl(secs: u64) -> PutOptions {
    PutOptions {
        ttl: Some(Duration::from_secs(secs)),
    }
}

fn open(dir: &std::path::Path, clock: &Arc<ManualClock>) -> Store {
    let mut o = small_options();
    o.clock = clock.clone();
    Store::open(dir, o).unwrap()
}

#[test]
fn expired_files_go_unread_and_stay_gone() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::starting_at(1_700_000_000);
    let s = open(dir.path(), &clock);
    let value = vec![7u8; 1000];
    for i in 0..400 {
        s.put_with(format!("w1-{i}").as_bytes(), &value, ttl(60))
            .unwrap();
    }
    clock.advance(Duration::from_secs(30));
    for i in 0..400 {
        s.put_with(format!("w2-{i}").as_bytes(), &value, ttl(60))
            .unwrap();
    }
    s.put(b"kept", b"forever").unwrap();
    // The first window has expired, the second not yet.
    clock.advance(Duration::from_secs(31));
    let mut expired: Vec<u32> = s
        .file_stats()
        .iter()
        .filter(|f| !f.active && f.live_keys == 0 && f.expired_keys > 0)
        .map(|f| f.file_id)
        .collect();
    expired.sort_unstable();
    assert!(expired.len() >= 3, "{:?}", s.file_stats());
    // The oldest can go alone (the merge policy's cost of it is nothing);
    // the others can go with it.
    let unread: Vec<u32> = s
        .file_stats()
        .iter()
        .filter(|f| f.unread)
        .map(|f| f.file_id)
        .collect();
    assert_eq!(unread, vec![expired[0]]);
    let report = s.merge(&expired).unwrap();
    assert_eq!(report.files_deleted_unread, expired.len(), "{report:?}");
    assert_eq!(
        (report.bytes_read, report.bytes_written),
        (0, 0),
        "{report:?}"
    );
    for i in 0..400 {
        assert_eq!(s.get(format!("w1-{i}").as_bytes()).unwrap(), None);
        assert_eq!(
            s.get(format!("w2-{i}").as_bytes()).unwrap().as_deref(),
            Some(&value[..])
        );
    }
    // Once the second window has expired too, every closed file goes
    // unread (the oldest first: none holds an older record of another's key).
    clock.advance(Duration::from_secs(30));
    let closed = closed_files(&s);
    let report = s.merge(&closed).unwrap();
    assert_eq!(report.files_deleted_unread, closed.len(), "{report:?}");
    assert_eq!(
        (report.bytes_read, report.bytes_written),
        (0, 0),
        "{report:?}"
    );
    assert_eq!(closed_files(&s), Vec::<u32>::new());
    let left = common::data_files(dir.path());
    drop(s);
    let s = open(dir.path(), &clock);
    // The deleted files stay deleted (only the active file was left, and
    // the new one this open starts).
    assert!(common::data_files(dir.path()).len() <= left.len() + 1);
    assert!(left.iter().all(|f| f.exists()));
    for i in 0..400 {
        assert_eq!(s.get(format!("w1-{i}").as_bytes()).unwrap(), None);
        assert_eq!(s.get(format!("w2-{i}").as_bytes()).unwrap(), None);
    }
    assert_eq!(s.get(b"kept").unwrap().as_deref(), Some(&b"forever"[..]));
}

/// A key whose older record sits in an older file must not come back
/// when its newer, expired record's file goes: that file is read (its
/// hint) and leaves a tombstone.
#[test]
fn an_expired_file_with_older_records_elsewhere_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::starting_at(1_700_000_000);
    let s = open(dir.path(), &clock);
    let value = vec![1u8; 1000];
    s.put(b"k", b"old, no expiry").unwrap();
    for i in 0..100 {
        s.put(format!("pad-{i}").as_bytes(), &value).unwrap();
    }
    // The new record of k amid others of its kind, in a file of expired
    // records only (files hold about 60 of these).
    for i in 0..200 {
        if i == 100 {
            s.put_with(b"k", b"new, expiring", ttl(60)).unwrap();
        }
        s.put_with(format!("x-{i}").as_bytes(), &value, ttl(60))
            .unwrap();
    }
    s.put(b"last", b"v").unwrap();
    clock.advance(Duration::from_secs(61));
    let expired: Vec<u32> = s
        .file_stats()
        .iter()
        .filter(|f| !f.active && f.live_keys == 0 && f.expired_keys > 0)
        .map(|f| f.file_id)
        .collect();
    assert!(expired.len() >= 2, "{:?}", s.file_stats());
    // The file of k's first record is older than all of them.
    assert!(
        s.file_stats().iter().all(|f| !f.unread),
        "{:?}",
        s.file_stats()
    );
    let report = s.merge(&expired).unwrap();
    assert_eq!(report.files_deleted_unread, 0, "{report:?}");
    assert!(report.bytes_read > 0, "{report:?}");
    assert_eq!(s.get(b"k").unwrap(), None);
    drop(s);
    let s = open(dir.path(), &clock);
    assert_eq!(s.get(b"k").unwrap(), None);
    assert_eq!(s.get(b"pad-0").unwrap().as_deref(), Some(&value[..]));
}
