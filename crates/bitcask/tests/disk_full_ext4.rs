//! A real full disk: a small ext4 image, loop-mounted. Puts fail with a
//! clear "disk is full" error, work again once space is freed, and nothing
//! acknowledged is lost. Needs root (mount); outside CI it is skipped with
//! a message when mounting is impossible, under CI=true it must run.

use bitcask::{Error, Options, Store, SyncStrategy};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

struct LoopFs {
    _tmp: tempfile::TempDir,
    mnt: PathBuf,
}

impl LoopFs {
    fn mount(size_mb: u64) -> Option<LoopFs> {
        let tmp = tempfile::tempdir().unwrap();
        let img = tmp.path().join("disk.img");
        let mnt = tmp.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        std::fs::File::create(&img)
            .unwrap()
            .set_len(size_mb << 20)
            .unwrap();
        let ok = |c: &mut Command| c.output().map(|o| o.status.success()).unwrap_or(false);
        if !ok(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&img)) {
            return None;
        }
        if !ok(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&img)
            .arg(&mnt))
        {
            return None;
        }
        Some(LoopFs { _tmp: tmp, mnt })
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

fn fs_or_skip() -> Option<LoopFs> {
    let fs = LoopFs::mount(24);
    if fs.is_none() {
        assert!(
            std::env::var("CI").is_err(),
            "CI must be able to loop-mount an ext4 image (root, mkfs.ext4, mount)"
        );
        eprintln!("skipping: cannot loop-mount an ext4 image here (needs root)");
    }
    fs
}

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
    let Some(fs) = fs_or_skip() else { return };
    fill_then_free(&fs.mnt, SyncStrategy::OSync);
    fill_then_free(&fs.mnt, SyncStrategy::None);
}
