//! After merge deletes files, no descriptor of a deleted file stays open
//! (Riak's Bitcask kept them until the disk filled: the sensor-data paper, §2.2,
//! basho/bitcask#113). Checked through /proc/self/fd while readers run.

mod common;

use bitcask::Store;
use common::{closed_files, small_options};
use std::sync::atomic::{AtomicBool, Ordering};

fn deleted_descriptors() -> Vec<String> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|p| p.display().to_string())
        .filter(|p| p.ends_with("(deleted)"))
        .collect()
}

#[test]
fn merge_leaves_no_descriptor_of_a_deleted_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), small_options()).unwrap();
    let key = |i: u32| format!("k{i:04}").into_bytes();
    for round in 0..3u32 {
        for i in 0..1500 {
            store.put(&key(i), &vec![round as u8; 300]).unwrap();
        }
    }
    // Open a read descriptor on every file.
    for i in 0..1500 {
        assert!(store.get(&key(i)).unwrap().is_some());
    }
    assert!(store.stats().open_read_files > 3);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..3 {
            let (store, stop) = (&store, &stop);
            s.spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    let v = store.get(&key(i % 1500)).unwrap().unwrap();
                    assert_eq!(v.len(), 300);
                    i += 7;
                }
            });
        }
        for _ in 0..5 {
            let files = closed_files(&store);
            let report = store.merge(&files).unwrap();
            assert!(!report.files_deleted.is_empty());
            assert_eq!(deleted_descriptors(), Vec::<String>::new());
            for i in 0..300 {
                store.put(&key(i), &[9u8; 300]).unwrap();
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    // A fold holds files open for reading: merge defers their deletion to
    // the end of the fold, and then nothing stale remains either.
    let files = closed_files(&store);
    let mut merged = false;
    store
        .fold(|_, _| {
            if !merged {
                merged = true;
                let r = store.merge(&files).unwrap();
                assert!(!r.files_deleted.is_empty());
            }
            true
        })
        .unwrap();
    assert_eq!(deleted_descriptors(), Vec::<String>::new());
    for f in &files {
        assert!(!dir.path().join(format!("{f:010}.data")).exists());
    }
}

#[test]
fn the_read_handle_cache_stays_within_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = small_options();
    opts.max_open_files = 4;
    let store = Store::open(dir.path(), opts).unwrap();
    let key = |i: u32| format!("k{i:04}").into_bytes();
    for i in 0..2000 {
        store.put(&key(i), &[i as u8; 300]).unwrap();
    }
    assert!(store.file_stats().len() > 8);
    for round in 0..3 {
        for i in (0..2000).step_by(3 + round) {
            assert_eq!(store.get(&key(i)).unwrap().unwrap(), vec![i as u8; 300]);
            assert!(store.stats().open_read_files <= 4);
        }
    }
}
