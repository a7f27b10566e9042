//! A real full disk: a small ext4 image, loop-mounted. Puts fail with a
//! clear "disk is full" error, work again once space is freed, and nothing
//! acknowledged is lost. Needs root (mount); outside CI it is skipped with
//! a message when mounting is impossible, under CI=true it must run.

use bitcask::{Error, Options, Store, SyncStrategy};
use std::collections::BTreeMap;
use std::path::Path;
use testkit::LoopFs;

fn fill_then_free(mnt: &Path, sync: SyncStrategy) {
    let dir = mnt.join(format!("store-{sync:?}"));
    // An operator's file that can be removed to free space.
    let filler = mnt.join("filler");
    std::fs::write(&filler, vec![7u8; 4 << 20]).unwrap();
    let opts = Options {
        sync,
        max_file_size_bytes: 1 << 20,
        write_buffer_bytes: 64 << 10,
        ..Options::default()
    };
    let s = Store::open(&dir, opts.clone()).unwrap();
    let mut acked = BTreeMap::new();
    let mut full = 0;
    let mut i = 0u32;
    while full < 50 {
        let k = format!("k{i}").into_bytes();
        let v = vec![(i % 251) as u8; 8000];
        match s.put(&k, &v) {
            Ok(()) => {
                acked.insert(k, v);
            }
            Err(e) => {
                assert!(matches!(e, Error::DiskFull { .. }), "unexpected error: {e}");
                full += 1;
            }
        }
        i += 1;
        assert!(i < 100_000, "the disk never filled");
    }
    for (k, v) in acked.iter().step_by(37) {
        assert_eq!(s.get(k).unwrap().as_ref(), Some(v));
    }
    std::fs::remove_file(&filler).unwrap();
    for j in 0..200u32 {
        let k = format!("after{j}").into_bytes();
        s.put(&k, &[1u8; 8000]).unwrap();
        acked.insert(k, vec![1u8; 8000]);
    }
    s.close().unwrap();
    let s = Store::open(&dir, opts).unwrap();
    for (k, v) in &acked {
        assert_eq!(s.get(k).unwrap().as_ref(), Some(v));
    }
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn real_full_disk() {
    let Some(fs) = LoopFs::mount_or_skip(24) else {
        return;
    };
    fill_then_free(fs.path(), SyncStrategy::OSync);
    fill_then_free(fs.path(), SyncStrategy::None);
}
