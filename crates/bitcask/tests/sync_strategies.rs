//! The three sync strategies, observed through the number of fsyncs.

mod common;

use bitcask::vfs::{FaultyVfs, StdVfs};
use bitcask::{Options, Store, SyncStrategy};
use std::sync::Arc;
use std::time::Duration;

fn syncs_after_puts(sync: SyncStrategy, puts: u32, wait: Duration) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let vfs = FaultyVfs::new(Arc::new(StdVfs));
    let s = Store::open(
        dir.path(),
        Options {
            sync,
            vfs: Arc::new(vfs.clone()),
            ..Options::default()
        },
    )
    .unwrap();
    let before = vfs.file_syncs();
    for i in 0..puts {
        s.put(format!("k{i}").as_bytes(), b"value").unwrap();
    }
    std::thread::sleep(wait);
    let n = vfs.file_syncs() - before;
    drop(s);
    n
}

#[test]
fn none_never_syncs_on_the_write_path() {
    assert_eq!(
        syncs_after_puts(SyncStrategy::None, 100, Duration::from_millis(300)),
        0
    );
}

#[test]
fn o_sync_syncs_every_put_from_one_thread() {
    assert_eq!(
        syncs_after_puts(SyncStrategy::OSync, 50, Duration::ZERO),
        50
    );
}

#[test]
fn interval_syncs_in_the_background() {
    let n = syncs_after_puts(
        SyncStrategy::Interval { interval_ms: 20 },
        10,
        Duration::from_millis(400),
    );
    // The puts happen within one interval; a sync follows, and idle
    // intervals do not sync again.
    assert!((1..=3).contains(&n), "{n} syncs");
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
    let mut put = 0u64;
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_millis(400) {
        s.put(format!("k{put:06}").as_bytes(), &value).unwrap();
        put += (7 + value.len()) as u64;
        std::thread::sleep(Duration::from_millis(2));
    }
    let on_disk: u64 = common::data_files(dir.path())
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    // At most the last flush interval's puts (about a tenth here) may be
    // only in the buffer; half is a bound that holds on a loaded machine.
    assert!(
        on_disk * 2 >= put,
        "{on_disk} bytes on the descriptor of {put} put"
    );
    drop(s);
}
