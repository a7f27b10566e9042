//! The three sync strategies, observed through the number of fsyncs.

mod common;

use bitcask::vfs::{FaultyVfs, StdVfs};
use bitcask::{Options, Store, SyncStrategy};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A store on a counting disk.
fn counted_store(sync: SyncStrategy, extra: Options) -> (tempfile::TempDir, FaultyVfs, Store) {
    let dir = tempfile::tempdir().unwrap();
    let vfs = FaultyVfs::new(Arc::new(StdVfs));
    let s = Store::open(
        dir.path(),
        Options {
            sync,
            vfs: Arc::new(vfs.clone()),
            ..extra
        },
    )
    .unwrap();
    (dir, vfs, s)
}

/// fsyncs made by `puts` puts, counted as the last put returns.
fn syncs_during_puts(sync: SyncStrategy, puts: u32) -> u64 {
    let (_dir, vfs, s) = counted_store(sync, Options::default());
    let before = vfs.file_syncs();
    for i in 0..puts {
        s.put(format!("k{i}").as_bytes(), b"value").unwrap();
    }
    vfs.file_syncs() - before
}

/// Waits, at most ten seconds, until `done` holds.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "not within 10 s: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn none_never_syncs_on_the_write_path() {
    assert_eq!(syncs_during_puts(SyncStrategy::None, 100), 0);
}

#[test]
fn o_sync_syncs_every_put_from_one_thread() {
    assert_eq!(syncs_during_puts(SyncStrategy::OSync, 50), 50);
}

#[test]
fn interval_syncs_in_the_background_and_only_what_is_new() {
    let (_dir, vfs, s) = counted_store(
        SyncStrategy::Interval { interval_ms: 20 },
        Options::default(),
    );
    let before = vfs.file_syncs();
    for i in 0..10 {
        s.put(format!("k{i}").as_bytes(), b"value").unwrap();
    }
    wait_until("the background thread syncs the puts", || {
        vfs.file_syncs() > before
    });
    // Everything put is durable now: a sync finds nothing new and makes
    // no fsync, as each idle interval's does.
    let synced = vfs.file_syncs();
    s.sync().unwrap();
    assert_eq!(vfs.file_syncs(), synced, "a sync with nothing new fsynced");
    s.put(b"one more", b"value").unwrap();
    wait_until("the next interval syncs the new put", || {
        vfs.file_syncs() > synced
    });
}

#[test]
fn o_sync_puts_from_many_threads_share_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let vfs = FaultyVfs::new(Arc::new(StdVfs));
    let s = Store::open(
        dir.path(),
        Options {
            sync: SyncStrategy::OSync,
            vfs: Arc::new(vfs.clone()),
            ..Options::default()
        },
    )
    .unwrap();
    let before = vfs.file_syncs();
    std::thread::scope(|scope| {
        for t in 0..8 {
            let s = &s;
            scope.spawn(move || {
                for i in 0..200 {
                    s.put(format!("t{t}-{i}").as_bytes(), &[0u8; 512]).unwrap();
                }
            });
        }
    });
    let n = vfs.file_syncs() - before;
    // Without group commit every put would take its own fsync.
    assert!((1..1600).contains(&n), "{n} fsyncs for 1600 puts");
    eprintln!("1600 o_sync puts from 8 threads took {n} fsyncs");
}

/// Under a steady trickle of small puts (never idle, buffer never full),
/// buffered records still reach the kernel within `flush_interval_ms`.
#[test]
fn buffered_puts_reach_the_kernel_under_steady_load() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(
        dir.path(),
        Options {
            write_buffer_bytes: 1 << 20,
            flush_interval_ms: 20,
            ..Options::default()
        },
    )
    .unwrap();
    let value = [b'v'; 100];
    let record = (7 + value.len()) as u64;
    let on_disk = || -> u64 {
        common::data_files(dir.path())
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum()
    };
    // Puts a few ms apart, never idle and far from filling the 1 MiB
    // buffer, until the bytes of the first fifty are on the descriptor.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut put = 0u64;
    let mut target = None;
    for i in 0u64.. {
        s.put(format!("k{i:06}").as_bytes(), &value).unwrap();
        put += record;
        if i == 50 {
            target = Some(put);
        }
        if target.is_some_and(|t| on_disk() >= t) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} bytes on the descriptor of {put} put under steady load",
            on_disk()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    drop(s);
}
