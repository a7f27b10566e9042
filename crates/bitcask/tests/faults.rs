//! Injected disk faults: ENOSPC, EIO, failed fsync and torn writes.
//! A full disk is reported as such and the store works again once space
//! returns; any other write or fsync failure stops writes until reopen.
//! Nothing acknowledged is ever lost.

mod common;

use bitcask::vfs::{Fault, FaultyVfs, StdVfs};
use bitcask::{Error, Options, Store, SyncStrategy};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

fn faulty_options(sync: SyncStrategy) -> (Options, FaultyVfs) {
    let vfs = FaultyVfs::new(Arc::new(StdVfs));
    let opts = Options {
        sync,
        max_file_size_bytes: 64 << 10,
        write_buffer_bytes: 4096,
        vfs: Arc::new(vfs.clone()),
        ..Options::default()
    };
    (opts, vfs)
}

fn value(i: u32) -> Vec<u8> {
    format!("v{i}-").repeat(30).into_bytes()
}

fn check_reopened(dir: &Path, acked: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let s = Store::open(dir, Options::default()).unwrap();
    for (k, v) in acked {
        assert_eq!(
            s.get(k).unwrap().as_ref(),
            Some(v),
            "{}",
            String::from_utf8_lossy(k)
        );
    }
}

/// Every `large_every`-th value (none when 0) is 40 KiB: large records
/// skip the write buffer and go out in one vectored write with whatever the
/// buffer held, so a failure can tear both.
fn disk_full_then_space_returns(sync: SyncStrategy, large_every: u32) {
    let value = |i: u32| {
        if large_every > 0 && i.is_multiple_of(large_every) {
            let mut v = value(i);
            v.resize(40 << 10, (i % 251) as u8);
            v
        } else {
            value(i)
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let (opts, vfs) = faulty_options(sync);
    let s = Store::open(dir.path(), opts).unwrap();
    let mut acked = BTreeMap::new();
    vfs.inject(Fault::WritesFailAfter {
        budget_bytes: 200_000,
        errno: libc::ENOSPC,
    });
    let mut full_errors = 0;
    for i in 0..3000u32 {
        let k = format!("k{i}").into_bytes();
        match s.put(&k, &value(i)) {
            Ok(()) => {
                acked.insert(k, value(i));
            }
            Err(e) => {
                assert!(matches!(e, Error::DiskFull { .. }), "{e}");
                assert!(e.to_string().contains("disk is full"), "{e}");
                full_errors += 1;
            }
        }
    }
    assert!(full_errors > 100, "the disk never filled");

    // Reads go on while the disk is full.
    for (k, v) in &acked {
        assert_eq!(s.get(k).unwrap().as_ref(), Some(v));
    }
    vfs.heal();
    for i in 3000..3500u32 {
        let k = format!("k{i}").into_bytes();
        s.put(&k, &value(i)).unwrap();
        acked.insert(k, value(i));
    }
    s.close().unwrap();
    check_reopened(dir.path(), &acked);
}

#[test]
fn disk_full_under_o_sync() {
    disk_full_then_space_returns(SyncStrategy::OSync, 0);
}

#[test]
fn disk_full_with_buffered_appends() {
    disk_full_then_space_returns(SyncStrategy::None, 0);
}

#[test]
fn disk_full_with_large_values_under_o_sync() {
    disk_full_then_space_returns(SyncStrategy::OSync, 3);
}

#[test]
fn disk_full_with_large_values_buffered() {
    disk_full_then_space_returns(SyncStrategy::None, 3);
}

/// An I/O error other than a full disk: writes are refused until reopen,
/// reads go on, and reopening recovers everything acknowledged.
fn refuses_writes_until_reopen(fault: Fault) {
    refuses_writes_until_reopen_after(fault, b"x");
}

fn refuses_writes_until_reopen_after(fault: Fault, doomed: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let (opts, vfs) = faulty_options(SyncStrategy::OSync);
    let s = Store::open(dir.path(), opts).unwrap();
    let mut acked = BTreeMap::new();
    for i in 0..200u32 {
        let k = format!("k{i}").into_bytes();
        s.put(&k, &value(i)).unwrap();
        acked.insert(k, value(i));
    }
    vfs.inject(fault);
    let err = s.put(b"doomed", doomed).unwrap_err();
    assert!(!matches!(err, Error::DiskFull { .. }), "{err}");
    vfs.heal();
    match s.put(b"after", b"y") {
        Err(Error::PreviousIo { cause }) => {
            assert!(
                matches!(&*cause, Error::Io { .. }),
                "the failure kept its kind: {cause:?}"
            )
        }
        other => panic!("expected PreviousIo, got {other:?}"),
    }
    assert!(s
        .put(b"after", b"y")
        .unwrap_err()
        .to_string()
        .contains("reopen"));
    for (k, v) in &acked {
        assert_eq!(s.get(k).unwrap().as_ref(), Some(v));
    }
    drop(s);
    check_reopened(dir.path(), &acked);
}

#[test]
fn eio_on_write() {
    refuses_writes_until_reopen(Fault::WritesFailAfter {
        budget_bytes: 0,
        errno: libc::EIO,
    });
}

#[test]
fn torn_write_then_eio() {
    refuses_writes_until_reopen(Fault::WritesFailAfter {
        budget_bytes: 20,
        errno: libc::EIO,
    });
}

/// A large record goes out with the buffered bytes in one vectored write;
/// tearing it loses neither the records before it nor the store.
#[test]
fn torn_large_write_then_eio() {
    refuses_writes_until_reopen_after(
        Fault::WritesFailAfter {
            budget_bytes: 20,
            errno: libc::EIO,
        },
        &[7u8; 40 << 10],
    );
}

#[test]
fn failed_fsync() {
    refuses_writes_until_reopen(Fault::SyncFails { errno: libc::EIO });
}

#[test]
fn file_creation_failing_on_rotation_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (opts, vfs) = faulty_options(SyncStrategy::None);
    let s = Store::open(dir.path(), opts).unwrap();
    vfs.inject(Fault::CreateFails {
        errno: libc::ENOSPC,
    });
    let mut failed = 0;
    let mut acked = BTreeMap::new();
    for i in 0..400u32 {
        let k = format!("k{i}").into_bytes();
        match s.put(&k, &value(i)) {
            Ok(()) => {
                acked.insert(k, value(i));
            }
            Err(e) => {
                assert!(e.is_disk_full(), "{e}");
                failed += 1;
            }
        }
    }
    assert!(failed > 0, "rotation never happened");
    vfs.heal();
    s.put(b"again", b"works").unwrap();
    acked.insert(b"again".to_vec(), b"works".to_vec());
    s.close().unwrap();
    check_reopened(dir.path(), &acked);
}
