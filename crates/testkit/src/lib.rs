//! Helpers for Rill's tests and benchmarks: a real filesystem of a fixed
//! size (an ext4 image, loop-mounted), for disk-full and capacity runs.
//! Mounting needs root; callers decide what to do without it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// An ext4 filesystem of a fixed size, mounted until dropped.
pub struct LoopFs {
    _tmp: tempfile::TempDir,
    mnt: PathBuf,
}

impl LoopFs {
    /// Creates and mounts a `size_mb` MiB ext4 image with no blocks
    /// reserved for root (so usage as `df` shows it is what writes see).
    /// `None` when it cannot be done here (not root, no mkfs.ext4).
    pub fn mount(size_mb: u64) -> Option<LoopFs> {
        let tmp = tempfile::tempdir().ok()?;
        let img = tmp.path().join("disk.img");
        let mnt = tmp.path().join("mnt");
        std::fs::create_dir(&mnt).ok()?;
        std::fs::File::create(&img)
            .ok()?
            .set_len(size_mb << 20)
            .ok()?;
        let ok = |c: &mut Command| c.output().map(|o| o.status.success()).unwrap_or(false);
        if !ok(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-m", "0"])
            .arg(&img))
        {
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

    /// Like [`LoopFs::mount`], but under `CI=true` failing to mount is an
    /// error rather than a reason to skip.
    pub fn mount_or_skip(size_mb: u64) -> Option<LoopFs> {
        let fs = LoopFs::mount(size_mb);
        if fs.is_none() {
            assert!(
                std::env::var("CI").is_err(),
                "CI must be able to loop-mount an ext4 image (root, mkfs.ext4, mount)"
            );
            eprintln!("skipping: cannot loop-mount an ext4 image here (needs root)");
        }
        fs
    }

    pub fn path(&self) -> &Path {
        &self.mnt
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

/// Every file below `dir`, in subdirectories too (for tests that damage
/// a store's files).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("a readable directory") {
            let p = e.expect("a directory entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Bytes of the files below `dir`, in subdirectories too; files deleted
/// while it counts count nothing (for directories a program is changing).
pub fn du(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => du(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}
