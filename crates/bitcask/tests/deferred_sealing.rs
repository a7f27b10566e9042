//! Deferred sealing under `sync = none`: rotation neither fsyncs nor waits;
//! closed files are sealed later by the background thread, on `sync()` their
//! data is made durable, on close they are sealed, and a file merge deletes
//! first is never fsynced at all.

use bitcask::vfs::{FaultyVfs, StdVfs};
use bitcask::{Options, Store, SyncStrategy};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const VALUE: [u8; 1000] = [7u8; 1000];

fn open(dir: &Path, vfs: &FaultyVfs, seal_delay_ms: u64) -> Store {
    Store::open(
        dir,
        Options {
            sync: SyncStrategy::None,
            max_file_size_bytes: 16 << 10,
            seal_delay_ms,
            vfs: Arc::new(vfs.clone()),
            ..Options::default()
        },
    )
    .unwrap()
}

fn count(dir: &Path, suffix: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(suffix)
        })
        .count()
}

/// Puts `n` keys of 1000 bytes: about 15 per 16 KiB file.
fn fill(s: &Store, n: u32) {
    for i in 0..n {
        s.put(format!("k{i:05}").as_bytes(), &VALUE).unwrap();
    }
}

#[test]
fn rotation_neither_syncs_nor_writes_hints() {
    let dir = tempfile::tempdir().unwrap();
    let vfs = FaultyVfs::new(Arc::new(StdVfs));
    let s = open(dir.path(), &vfs, 60_000);
    let before = vfs.file_syncs();
    fill(&s, 200);
    assert!(s.file_stats().len() > 10, "the puts rotated files");
    assert_eq!(vfs.file_syncs() - before, 0, "no fsync on the write path");
    assert_eq!(count(dir.path(), ".hint"), 0, "no hint before sealing");
    // Closing seals every file: each closed data file gets its hint.
    drop(s);
    assert_eq!(count(dir.path(), ".hint"), count(dir.path(), ".data"));
    assert_eq!(count(dir.path(), ".hint.tmp"), 0);
    let s = open(dir.path(), &vfs, 60_000);
    let report = s.recovery_report().clone();
    assert_eq!(report.files_scanned, 0, "{report:?}");
    for i in 0..200u32 {
        assert_eq!(
            s.get(format!("k{i:05}").as_bytes()).unwrap().unwrap(),
            VALUE
        );
    }
}

#[test]
fn background_thread_seals_after_the_delay() {
    let dir = tempfile::tempdir().unwrap();
    let vfs = FaultyVfs::new(Arc::new(StdVfs));
    let s = open(dir.path(), &vfs, 100);
    fill(&s, 200);
    let closed = s.file_stats().len() - 1;
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(dir.path(), ".hint") < closed {
        assert!(Instant::now() < deadline, "files were not sealed in time");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(vfs.file_syncs() >= closed as u64);
}

#[test]
fn sync_makes_unsealed_files_durable() {
    let dir = tempfile::tempdir().unwrap();
    let vfs = FaultyVfs::new(Arc::new(StdVfs));
    let s = open(dir.path(), &vfs, 60_000);
    fill(&s, 200);
    let closed = (s.file_stats().len() - 1) as u64;
    let before = vfs.file_syncs();
    s.sync().unwrap();
    // Every closed file and the active one, once each.
    assert_eq!(vfs.file_syncs() - before, closed + 1);
    let before = vfs.file_syncs();
    s.sync().unwrap();
    assert_eq!(vfs.file_syncs() - before, 0, "nothing new to sync");
}

#[test]
fn merge_deletes_dead_unsealed_files_without_syncing_them() {
    let dir = tempfile::tempdir().unwrap();
    let vfs = FaultyVfs::new(Arc::new(StdVfs));
    let s = open(dir.path(), &vfs, 60_000);
    // The same 30 keys, written over and over: every file but the newest
    // two holds only dead records.
    for _ in 0..10 {
        fill(&s, 30);
    }
    let dead: Vec<u32> = s
        .file_stats()
        .iter()
        .filter(|f| !f.active && f.live_keys == 0)
        .map(|f| f.file_id)
        .collect();
    assert!(dead.len() >= 10, "{dead:?}");
    let before = vfs.file_syncs();
    let report = s.merge(&dead).unwrap();
    assert_eq!(report.files_deleted_unread, dead.len());
    assert_eq!(
        vfs.file_syncs() - before,
        0,
        "dead unsealed files cost no I/O"
    );
    assert_eq!(count(dir.path(), ".hint.tmp"), 0, "no partial hint left");
    for i in 0..30u32 {
        assert_eq!(
            s.get(format!("k{i:05}").as_bytes()).unwrap().unwrap(),
            VALUE
        );
    }
}

#[test]
fn merging_a_sealed_file_first_makes_its_replacements_durable() {
    let dir = tempfile::tempdir().unwrap();
    let vfs = FaultyVfs::new(Arc::new(StdVfs));
    let s = open(dir.path(), &vfs, 60_000);
    fill(&s, 30);
    drop(s); // sealed on close
    let s = open(dir.path(), &vfs, 60_000);
    let sealed: Vec<u32> = s
        .file_stats()
        .iter()
        .filter(|f| !f.active)
        .map(|f| f.file_id)
        .collect();
    assert!(!sealed.is_empty());
    fill(&s, 30); // overwrites every key; nothing synced yet
    let before = vfs.file_syncs();
    let report = s.merge(&sealed).unwrap();
    assert_eq!(report.files_deleted_unread, sealed.len());
    assert!(
        vfs.file_syncs() > before,
        "the records replacing a durable file's were synced before it was deleted"
    );
}
