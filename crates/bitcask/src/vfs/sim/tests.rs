//! The simulated disk keeps exactly what POSIX promises.

use super::{CrashKeep, SimVfs};
use crate::vfs::{OpenMode, Vfs};
use std::path::Path;

fn write(vfs: &SimVfs, path: &str, bytes: &[u8]) -> std::sync::Arc<dyn crate::vfs::VFile> {
    let f = vfs.open(Path::new(path), OpenMode::CreateNew).unwrap();
    f.write_all_at(bytes, 0).unwrap();
    f
}

fn setup() -> SimVfs {
    let vfs = SimVfs::new();
    vfs.create_dir_all(Path::new("/d")).unwrap();
    vfs.sync_dir(Path::new("/")).unwrap();
    vfs
}

#[test]
fn only_fsynced_data_under_a_durable_name_survives_a_crash_that_keeps_nothing() {
    let vfs = setup();
    let a = write(&vfs, "/d/a", b"synced");
    a.sync_data().unwrap();
    let _b = write(&vfs, "/d/b", b"named, not synced");
    vfs.sync_dir(Path::new("/d")).unwrap();
    a.write_all_at(b"more", 6).unwrap();
    let _c = write(&vfs, "/d/c", b"not named durably");
    let after = vfs.crash_keeping(7, CrashKeep::Nothing);
    assert_eq!(after.read(Path::new("/d/a")).unwrap(), b"synced");
    assert_eq!(after.read(Path::new("/d/b")).unwrap(), b"");
    assert!(!after.exists(Path::new("/d/c")));
    // The old boot's handles are dead.
    assert!(a.read_at(&mut [0u8; 4], 0).is_err());
}

#[test]
fn a_crash_that_keeps_everything_keeps_every_write_and_name() {
    let vfs = setup();
    let _f = write(&vfs, "/d/x", b"page cache");
    vfs.rename(Path::new("/d/x"), Path::new("/d/y")).unwrap();
    let after = vfs.crash_keeping(1, CrashKeep::Everything);
    assert_eq!(after.read(Path::new("/d/y")).unwrap(), b"page cache");
    assert!(!after.exists(Path::new("/d/x")));
}

#[test]
fn unlinks_and_renames_are_undone_without_a_directory_fsync() {
    let vfs = setup();
    let f = write(&vfs, "/d/old", b"1");
    f.sync_data().unwrap();
    vfs.sync_dir(Path::new("/d")).unwrap();
    vfs.remove_file(Path::new("/d/old")).unwrap();
    let after = vfs.crash_keeping(3, CrashKeep::Nothing);
    assert_eq!(after.read(Path::new("/d/old")).unwrap(), b"1");
}

#[test]
fn a_process_kill_keeps_the_page_cache_but_not_its_durability() {
    let vfs = setup();
    let _f = write(&vfs, "/d/k", b"cached");
    let restarted = vfs.kill_process();
    assert_eq!(restarted.read(Path::new("/d/k")).unwrap(), b"cached");
    let after = restarted.crash_keeping(5, CrashKeep::Nothing);
    assert!(!after.exists(Path::new("/d/k")));
}

#[test]
fn a_seed_replays_the_same_torn_state() {
    let run = |seed| {
        let vfs = setup();
        let f = write(&vfs, "/d/t", &[1u8; 4096]);
        f.sync_data().unwrap();
        vfs.sync_dir(Path::new("/d")).unwrap();
        f.write_all_at(&[2u8; 8192], 0).unwrap();
        vfs.crash_keeping(seed, CrashKeep::Some)
            .read(Path::new("/d/t"))
            .unwrap()
    };
    assert_eq!(run(11), run(11));
    let torn = (0..32).map(run).any(|d| {
        let twos = d.iter().filter(|&&b| b == 2).count();
        twos > 0 && twos < d.len()
    });
    assert!(torn, "some seed tears the write at a sector boundary");
}

#[test]
fn writes_past_the_capacity_are_short_then_fail_with_enospc() {
    let vfs = setup();
    vfs.set_capacity(Some(100));
    let f = vfs.open(Path::new("/d/full"), OpenMode::CreateNew).unwrap();
    assert_eq!(f.write_at(&[0u8; 150], 0).unwrap(), 100);
    let e = f.write_at(&[0u8; 1], 100).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
    vfs.remove_file(Path::new("/d/full")).unwrap();
    drop(f);
    assert_eq!(
        vfs.used_bytes(),
        0,
        "an unlinked, closed file frees its space"
    );
}

#[test]
fn an_armed_power_cut_fails_the_change_that_reaches_it() {
    let vfs = setup();
    // Two changes go through (create, write); the third cuts the power.
    vfs.arm_crash(2, 9);
    let f = write(&vfs, "/d/a", b"x");
    assert!(f.sync_data().is_err());
    assert!(vfs.crashed());
    assert!(!vfs.next_boot().crashed());
}
