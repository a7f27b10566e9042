//! The three sync strategies, observed through the number of fsyncs.

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
