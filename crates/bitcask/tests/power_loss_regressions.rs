//! Bugs the power-loss model test (`power_loss/`) found, each replayed as
//! a named scenario on the simulated disk. Every one of them fails on the
//! engine as it was before its fix (docs/durability.md lists them).

mod common;

use bitcask::vfs::{CrashKeep, SimVfs, Vfs};
use bitcask::{Options, Store, SyncStrategy};
use common::ManualClock;
use std::path::Path;
use std::sync::Arc;

const DIR: &str = "/disk/store";

fn options(vfs: &SimVfs, sync: SyncStrategy) -> Options {
    Options {
        max_file_size_bytes: 4096,
        write_buffer_bytes: 0,
        sync,
        vfs: Arc::new(vfs.clone()),
        clock: ManualClock::starting_at(1_700_000_000),
        flush_interval_ms: 3_600_000,
        seal_delay_ms: 3_600_000,
        ..Options::default()
    }
}

fn closed_files(s: &Store) -> Vec<u32> {
    s.file_stats()
        .iter()
        .filter(|f| !f.active)
        .map(|f| f.file_id)
        .collect()
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-").repeat(20).into_bytes()
}

/// Seed 4: a merge dropped a durable tombstone, since every older record of
/// its key was among its inputs, then unlinked the inputs one by one with
/// no directory fsync. The power cut kept some unlinks and not others, and
/// the deleted key came back from an input that survived.
#[test]
fn a_merge_that_drops_a_tombstone_deletes_its_inputs_all_or_nothing() {
    for seed in 0..64 {
        let vfs = SimVfs::new();
        let s = Store::open(DIR, options(&vfs, SyncStrategy::None)).unwrap();
        for i in 0..80 {
            s.put(format!("k{i}").as_bytes(), &value(i)).unwrap();
        }
        s.sync().unwrap();
        for i in 0..80 {
            s.delete(format!("k{i}").as_bytes()).unwrap();
        }
        s.put(b"rotate", &value(99)).unwrap();
        s.sync().unwrap();
        let files = closed_files(&s);
        assert!(files.len() >= 3, "the keys span several files: {files:?}");
        let report = s.merge(&files).unwrap();
        assert!(report.tombstones_dropped > 0, "{report:?}");
        let vfs = vfs.crash_keeping(seed, CrashKeep::Some);
        drop(s);
        let s = Store::open(DIR, options(&vfs, SyncStrategy::None)).unwrap();
        for i in 0..80 {
            assert_eq!(
                s.get(format!("k{i}").as_bytes()).unwrap(),
                None,
                "k{i}, seed {seed}"
            );
        }
    }
}

/// Seed 0: a merge interrupted by a power cut left a record and its copy
/// (same seq) in two files; which one the keydir took depended on whether
/// the files were loaded from hints or scanned, so two rebuilds of the same
/// directory disagreed on every file's live bytes.
#[test]
fn every_rebuild_picks_the_same_copy_of_a_record_merge_left_twice() {
    let vfs = SimVfs::new();
    let s = Store::open(DIR, options(&vfs, SyncStrategy::None)).unwrap();
    for i in 0..30 {
        s.put(format!("k{i}").as_bytes(), &value(i)).unwrap();
    }
    // The closed files are durable but not sealed (no hints yet).
    s.sync().unwrap();
    let files = closed_files(&s);
    // The merge's output is durable with its hint; the unlink of its input
    // is not, so the power cut brings the input back, to be scanned.
    s.merge(&files[..1]).unwrap();
    let vfs = vfs.crash_keeping(1, CrashKeep::Nothing);
    drop(s);
    let stats_of = |vfs: &SimVfs| {
        let s = Store::open(DIR, options(vfs, SyncStrategy::None)).unwrap();
        let mut v: Vec<_> = s
            .file_stats()
            .into_iter()
            .filter(|f| f.total_keys > 0)
            .map(|f| (f.file_id, f.live_keys, f.live_bytes))
            .collect();
        v.sort();
        s.close().unwrap();
        v
    };
    let first = stats_of(&vfs);
    let second = stats_of(&vfs);
    assert_eq!(first, second);
}

/// Seed 0, step 590: a data file created just before the power cut had its
/// name on disk but not its first sector; opening the store stopped with
/// "bad magic bytes" instead of treating the file as never written.
#[test]
fn a_data_file_whose_header_never_reached_the_disk_does_not_stop_the_open() {
    let vfs = SimVfs::new();
    let s = Store::open(DIR, options(&vfs, SyncStrategy::OSync)).unwrap();
    s.put(b"durable", b"yes").unwrap();
    // A file whose name is durable and whose bytes are zeros: what a power
    // cut leaves of a file created, named durably and written, unsynced.
    let f = vfs
        .open(
            &Path::new(DIR).join("0000000100.data"),
            bitcask::vfs::OpenMode::CreateNew,
        )
        .unwrap();
    f.write_all_at(&[0u8; 600], 0).unwrap();
    f.sync_data().unwrap();
    vfs.sync_dir(Path::new(DIR)).unwrap();
    drop(f);
    let vfs = vfs.crash_keeping(2, CrashKeep::Nothing);
    drop(s);
    let s = Store::open(DIR, options(&vfs, SyncStrategy::OSync)).unwrap();
    assert_eq!(s.get(b"durable").unwrap().as_deref(), Some(&b"yes"[..]));
    assert!(!vfs.exists(&Path::new(DIR).join("0000000100.data")));
}

/// A clean close made the active file's data durable but not its name when
/// it was created by a deferred rotation and the file closed by that
/// rotation had been merged away since: a power cut after the close lost
/// the whole file, and brought back the merged-away one.
#[test]
fn a_clean_close_makes_the_active_files_name_durable() {
    let vfs = SimVfs::new();
    let s = Store::open(DIR, options(&vfs, SyncStrategy::None)).unwrap();
    s.put(b"f1", &[1u8; 3000]).unwrap();
    s.sync().unwrap();
    // Rotates: the first file waits to be sealed, the second is created.
    s.put(b"f2", &[2u8; 3000]).unwrap();
    s.delete(b"f1").unwrap();
    // The first file holds nothing current: merge deletes it unread.
    let report = s.merge(&closed_files(&s)).unwrap();
    assert_eq!(report.files_deleted_unread, 1, "{report:?}");
    s.put(b"last", b"written before a clean close").unwrap();
    s.close().unwrap();
    let vfs = vfs.crash_keeping(3, CrashKeep::Nothing);
    let s = Store::open(DIR, options(&vfs, SyncStrategy::None)).unwrap();
    assert_eq!(
        s.get(b"last").unwrap().as_deref(),
        Some(&b"written before a clean close"[..])
    );
    assert_eq!(s.get(b"f1").unwrap(), None);
}

/// Seed 3: after a process crash, recovery scanned the last data file (it
/// had no hint) and served its records without making them durable; a
/// `sync()` then covered only the new active file, so a power cut took
/// back a delete that had been followed by a completed sync.
#[test]
fn what_recovery_serves_after_a_process_crash_is_durable() {
    let vfs = SimVfs::new();
    let s = Store::open(DIR, options(&vfs, SyncStrategy::None)).unwrap();
    s.put(b"k", b"v").unwrap();
    s.sync().unwrap();
    s.delete(b"k").unwrap();
    // The process dies; the page cache keeps the tombstone.
    let vfs = vfs.kill_process();
    drop(s);
    let s = Store::open(DIR, options(&vfs, SyncStrategy::None)).unwrap();
    assert_eq!(s.get(b"k").unwrap(), None);
    s.put(b"other", b"x").unwrap();
    s.sync().unwrap();
    let vfs = vfs.crash_keeping(4, CrashKeep::Nothing);
    drop(s);
    let s = Store::open(DIR, options(&vfs, SyncStrategy::None)).unwrap();
    assert_eq!(s.get(b"k").unwrap(), None, "the synced delete came undone");
}

/// Seed 1: a store poisoned by a failed fsync reported a clean close while
/// it dropped the appends still in its write buffer.
#[test]
fn closing_a_poisoned_store_is_an_error() {
    let vfs = SimVfs::new();
    let mut o = options(&vfs, SyncStrategy::None);
    o.write_buffer_bytes = 64 << 10;
    let s = Store::open(DIR, o.clone()).unwrap();
    s.put(b"k", b"buffered").unwrap();
    vfs.fail_syncs(Some(libc::EIO));
    assert!(s.sync().is_err());
    vfs.fail_syncs(None);
    assert!(s.close().is_err(), "a poisoned store's close must say so");
    // What the close could still hand to the kernel is there.
    let vfs = vfs.kill_process();
    o.vfs = Arc::new(vfs);
    let s = Store::open(DIR, o).unwrap();
    assert_eq!(s.get(b"k").unwrap().as_deref(), Some(&b"buffered"[..]));
}

/// Merge pointed the keydir at its copies before they were fsynced; when
/// the output's fsync then failed, the originals looked fully dead, a later
/// merge deleted them unread, and a power cut lost keys written under
/// o_sync.
#[test]
fn merge_points_at_copies_only_once_they_are_durable() {
    let vfs = SimVfs::new();
    let mut o = options(&vfs, SyncStrategy::OSync);
    o.max_file_size_bytes = 64 << 10;
    let s = Store::open(DIR, o.clone()).unwrap();
    for i in 0..100 {
        s.put(format!("k{i}").as_bytes(), &value(i)).unwrap();
    }
    // Half the keys are overwritten, so the first file is worth merging.
    for i in 0..50 {
        s.put(format!("k{i}").as_bytes(), &value(i + 1000)).unwrap();
    }
    s.put(b"pad", &vec![0u8; 60 << 10]).unwrap();
    let files = closed_files(&s);
    vfs.fail_syncs(Some(libc::EIO));
    assert!(s.merge(&files).is_err());
    vfs.fail_syncs(None);
    // The store refuses work until reopened. Had the keydir taken the
    // copies, the originals would now look dead and go unread, while the
    // copies were never fsynced.
    let _ = s.merge(&files);
    // Any later rotation fsyncs the directory (and so may the kernel).
    vfs.sync_dir(Path::new(DIR)).unwrap();
    let vfs = vfs.crash_keeping(5, CrashKeep::Nothing);
    drop(s);
    o.vfs = Arc::new(vfs);
    let s = Store::open(DIR, o).unwrap();
    for i in 0..100 {
        let want = if i < 50 { value(i + 1000) } else { value(i) };
        assert_eq!(
            s.get(format!("k{i}").as_bytes()).unwrap(),
            Some(want),
            "k{i}"
        );
    }
}

/// Seed 736: under o_sync a delete whose fsync failed left its tombstone
/// in the keydir; deleting the key again answered "done" at once (the key
/// looked deleted) although nothing was durable and the store refused
/// writes, and a power cut brought the value back.
#[test]
fn deleting_a_key_whose_tombstone_is_not_durable_is_not_acknowledged() {
    let vfs = SimVfs::new();
    let s = Store::open(DIR, options(&vfs, SyncStrategy::OSync)).unwrap();
    s.put(b"k", b"v").unwrap();
    vfs.fail_syncs(Some(libc::EIO));
    assert!(s.delete(b"k").is_err());
    vfs.fail_syncs(None);
    assert!(
        s.delete(b"k").is_err(),
        "a poisoned store acknowledged a delete it never made durable"
    );
}

/// Seed 13139 (the 20000-seed run): a `sync()` made a put durable in the
/// active file; more puts followed, then a put of the same key went to a
/// new active file (the old one closed by a deferred rotation, marked "not
/// fsynced since closed"); a merge of the closed file took that mark to
/// mean nothing in it was durable, deleted it without making the newer put
/// durable, and a power cut that kept the deletion lost both: the key read
/// as never written.
#[test]
fn a_merge_makes_what_supersedes_its_inputs_durable_before_they_go() {
    for seed in 0..64 {
        let vfs = SimVfs::new();
        let s = Store::open(DIR, options(&vfs, SyncStrategy::None)).unwrap();
        s.put(b"key", b"durable").unwrap();
        s.put(b"other", &value(1)).unwrap();
        s.sync().unwrap();
        // Not synced: the file is no longer wholly durable when it closes.
        s.put(b"later", &value(2)).unwrap();
        // Too large for the active file: a rotation, deferred sealing.
        s.put(b"key", &[7u8; 6000]).unwrap();
        let closed = closed_files(&s);
        assert_eq!(closed.len(), 1, "{closed:?}");
        let report = s.merge(&closed).unwrap();
        assert_eq!(report.files_deleted, closed);
        let vfs = vfs.crash_keeping(seed, CrashKeep::Some);
        drop(s);
        let s = Store::open(DIR, options(&vfs, SyncStrategy::None)).unwrap();
        let got = s.get(b"key").unwrap();
        assert!(
            got.as_deref() == Some(&b"durable"[..]) || got.as_deref() == Some(&[7u8; 6000][..]),
            "seed {seed}: the synced put, or the newer one, not {:?}",
            got.map(|v| v.len())
        );
        assert_eq!(s.get(b"other").unwrap(), Some(value(1)), "seed {seed}");
    }
}

/// Seed 27 (batches in the model test): a merge copied a batch that was
/// not yet durable into two output files; a power cut in the middle of the
/// merge kept the first output, lost the second and the unsynced input,
/// and left part of the batch: two of its deletes without its put.
#[test]
fn a_merge_never_splits_a_batch_that_is_not_durable() {
    use bitcask::BatchOp;
    let big = |c: u8| vec![c; 1500];
    for strike in 0..40 {
        for seed in 0..4 {
            let vfs = SimVfs::new();
            let s = Store::open(DIR, options(&vfs, SyncStrategy::None)).unwrap();
            for k in [&b"a"[..], b"b", b"c"] {
                s.put(k, b"old").unwrap();
            }
            s.sync().unwrap();
            let (va, vb, vc) = (big(1), big(2), big(3));
            s.write_batch(&[
                BatchOp::Put {
                    key: b"a",
                    value: &va,
                },
                BatchOp::Put {
                    key: b"b",
                    value: &vb,
                },
                BatchOp::Put {
                    key: b"c",
                    value: &vc,
                },
            ])
            .unwrap();
            // Rotate, so the batch's file can be merged (its sealing is
            // deferred: it is not durable).
            s.put(b"rotate", &[9u8; 5000]).unwrap();
            let files = closed_files(&s);
            vfs.arm_crash(strike, seed);
            let _ = s.merge(&files);
            vfs.disarm();
            let vfs = if vfs.crashed() {
                vfs.next_boot()
            } else {
                vfs.crash_keeping(seed, CrashKeep::Some)
            };
            drop(s);
            let s = Store::open(DIR, options(&vfs, SyncStrategy::None)).unwrap();
            let got: Vec<bool> = [(&b"a"[..], &va), (b"b", &vb), (b"c", &vc)]
                .iter()
                .map(|(k, v)| {
                    let g = s.get(k).unwrap();
                    assert!(
                        g.as_deref() == Some(&b"old"[..]) || g.as_ref() == Some(*v),
                        "strike {strike} seed {seed}: {:?}",
                        g.map(|g| g.len())
                    );
                    g.as_ref() == Some(*v)
                })
                .collect();
            assert!(
                got.iter().all(|n| *n) || got.iter().all(|n| !*n),
                "strike {strike} seed {seed}: the batch survived in part: {got:?}"
            );
        }
    }
}
