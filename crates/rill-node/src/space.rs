//! Room on the disk: which writes a node admits as its disk fills, and the
//! reserve that keeps room for deletes, merges and a start.
//!
//! The sensor-data paper (§2) warns of the lock-up of a log-structured
//! store at a full disk: no room to write, so no room to delete or merge
//! either. A node avoids it so:
//! - Between U_l and U_h a put waits the throttle's delay, once per
//!   request (not once per replica or record).
//! - At U_h a put is refused at once with [`KvError::OutOfSpace`] (HTTP
//!   `503` with `Retry-After`), unless merges can still give room back,
//!   in which case it waits the throttle's full delay once and is then
//!   admitted or refused.
//! - A file of `bitcask.reserve` bytes (`space.reserve` in the Bitcask
//!   directory) is held back while there is room. When puts meet a full
//!   disk it is released: deletes, merges and a restart then have room,
//!   and puts stay refused until the free space is twice the reserve, when
//!   the reserve is made again and puts resume by themselves.
//! - A second, small file (`start.reserve`: 1 MiB and 64 KiB a vnode)
//!   is released only by a start that finds less free space than it holds,
//!   before anything else is written: it pays for the files a start
//!   creates (each store's new active file), so a node starts on a full
//!   disk even when something else took the released reserve's room. It is
//!   made again with the other when space returns.

use crate::error::{KvError, OUT_OF_SPACE_RETRY_SECS};
use merge_control::{MergeScheduler, ThrottleSettings};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The reserve's file name in the Bitcask directory.
pub(crate) const RESERVE_FILE: &str = "space.reserve";
/// The start reserve's file name in the Bitcask directory.
pub(crate) const START_RESERVE_FILE: &str = "start.reserve";

/// Bytes of the start reserve for `vnodes` stores.
pub(crate) fn start_reserve_bytes(vnodes: u32) -> u64 {
    (1 << 20) + u64::from(vnodes) * (64 << 10)
}

/// How often, at most, a refused put checks whether space has returned.
const RECOVERY_CHECK: Duration = Duration::from_millis(100);

/// What to do with a write, given the state of the disk.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Admit {
    /// Write, after this delay (the throttle's T, zero below U_l).
    Go(Duration),
    /// At U_h while merges can still free room: wait T once, measure again.
    WaitAndRecheck(Duration),
    /// Refuse at once; `release` when nothing can free room (the reserve
    /// then goes to deletes and merges).
    Refuse { release: bool },
}

/// The admission rule, pure: `low` is true while the reserve is released.
pub(crate) fn admit(low: bool, usage: f64, t: ThrottleSettings, reclaimable: u64) -> Admit {
    if low {
        return Admit::Refuse { release: false };
    }
    if usage >= t.high_usage {
        return if reclaimable > 0 {
            Admit::WaitAndRecheck(t.delay(usage))
        } else {
            Admit::Refuse { release: true }
        };
    }
    Admit::Go(t.delay(usage))
}

/// Whether puts may resume after the reserves were released: room for
/// both reserves and the reserve's size again besides, and usage below U_h.
pub(crate) fn may_resume(
    free: u64,
    reserve: u64,
    start_reserve: u64,
    usage: f64,
    t: ThrottleSettings,
) -> bool {
    free >= reserve.saturating_mul(2).saturating_add(start_reserve) && usage < t.high_usage
}

/// The disk-space state of a node whose backend stores on disk.
pub(crate) struct Space {
    /// The Bitcask directory (statvfs, and the reserve file in it).
    dir: PathBuf,
    reserve_bytes: u64,
    /// 0 when `reserve_bytes` is 0 (no reserves at all).
    start_bytes: u64,
    /// True while the reserve is released and puts are refused.
    low: AtomicBool,
    checked: Mutex<Option<Instant>>,
    pub refusals: AtomicU64,
    /// Times the reserve was released (its file removed): a write that
    /// met a full disk retries when this moved while it ran, whichever
    /// call released it.
    releases: AtomicU64,
}

impl Space {
    /// Called at start, before any store opens: releases the reserves
    /// when the free space is short, else makes sure they are there.
    pub fn open(dir: &Path, reserve_bytes: u64, vnodes: u32) -> Space {
        let start_bytes = if reserve_bytes == 0 {
            0
        } else {
            start_reserve_bytes(vnodes)
        };
        let space = Space {
            dir: dir.to_path_buf(),
            reserve_bytes,
            start_bytes,
            low: AtomicBool::new(false),
            checked: Mutex::new(None),
            refusals: AtomicU64::new(0),
            releases: AtomicU64::new(0),
        };
        let (path, start_path) = (space.reserve_path(), space.start_reserve_path());
        if reserve_bytes == 0 {
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::remove_file(&start_path);
            return space;
        }
        if start_path.exists() && space.free_bytes() < start_bytes {
            tracing::warn!(
                free = space.free_bytes(),
                "starting on a full disk: the start reserve is released so the stores can open"
            );
            remove_durably(&start_path);
            space.low.store(true, Ordering::Relaxed);
        }
        let free = space.free_bytes();
        if path.exists() {
            if free < reserve_bytes {
                tracing::warn!(free, reserve = reserve_bytes, "starting with little free space: the space reserve is released for deletes and merges, puts are refused until space returns");
                space.release();
            }
        } else if !space.is_low() && free >= (reserve_bytes * 2).saturating_add(start_bytes) {
            space.make_reserves();
        } else {
            tracing::warn!(
                free,
                reserve = reserve_bytes,
                "too little free space to make the space reserve; puts are refused until space returns"
            );
            space.low.store(true, Ordering::Relaxed);
        }
        space
    }

    fn start_reserve_path(&self) -> PathBuf {
        self.dir.join(START_RESERVE_FILE)
    }

    fn reserve_path(&self) -> PathBuf {
        self.dir.join(RESERVE_FILE)
    }

    /// Whether puts are refused for space now, given usage U and the
    /// throttle's settings: asked by the merge scheduler each round, so
    /// the reserve is made again and puts admitted once space returned
    /// even when no put arrives to see it (merges work harder meanwhile).
    pub fn refusing_puts(&self, usage: f64, settings: ThrottleSettings) -> bool {
        if self.is_low() {
            self.maybe_resume(usage, settings);
        }
        self.is_low()
    }

    pub fn is_low(&self) -> bool {
        self.low.load(Ordering::Relaxed)
    }

    fn free_bytes(&self) -> u64 {
        merge_control::filesystem_free_bytes(&self.dir).unwrap_or(0)
    }

    /// Admits a write that adds data (a put, a data type update), or
    /// refuses it with [`KvError::OutOfSpace`]. Waits at most one throttle
    /// delay.
    pub fn admit_write(&self, scheduler: &MergeScheduler) -> Result<(), KvError> {
        let throttle = scheduler.throttle();
        let settings = throttle.settings();
        if self.is_low() {
            self.maybe_resume(throttle.usage(), settings);
        }
        let mut waited = false;
        loop {
            let usage = throttle.usage();
            let reclaimable = if usage >= settings.high_usage {
                scheduler.reclaimable_bytes()
            } else {
                0
            };
            match admit(self.is_low(), usage, settings, reclaimable) {
                Admit::Go(delay) => {
                    if !delay.is_zero() && !waited {
                        std::thread::sleep(delay);
                    }
                    return Ok(());
                }
                Admit::WaitAndRecheck(delay) if !waited => {
                    waited = true;
                    std::thread::sleep(delay);
                }
                Admit::WaitAndRecheck(_) => return Err(self.refuse(false)),
                Admit::Refuse { release } => return Err(self.refuse(release)),
            }
        }
    }

    fn refuse(&self, release: bool) -> KvError {
        if release {
            self.disk_full();
        }
        self.refusals.fetch_add(1, Ordering::Relaxed);
        KvError::OutOfSpace {
            retry_after_secs: OUT_OF_SPACE_RETRY_SECS,
        }
    }

    /// A write met a full disk: release the reserve (deletes and merges
    /// get its room) and refuse puts until space returns. True when the
    /// reserve was there to release, so a retry may succeed.
    pub fn disk_full(&self) -> bool {
        if !self.low.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                dir = %self.dir.display(),
                "the disk is full: puts are refused until deletes and merges free space; the space reserve goes to deletes and merges"
            );
        }
        self.release()
    }

    fn release(&self) -> bool {
        self.low.store(true, Ordering::Relaxed);
        let removed = remove_durably(&self.reserve_path());
        if removed {
            self.releases.fetch_add(1, Ordering::Relaxed);
        }
        removed
    }

    /// How many times the reserve has been released.
    pub fn releases(&self) -> u64 {
        self.releases.load(Ordering::Relaxed)
    }

    /// At most every [`RECOVERY_CHECK`]: when space has returned, make the
    /// reserve again and admit puts.
    fn maybe_resume(&self, usage: f64, settings: ThrottleSettings) {
        let Ok(mut checked) = self.checked.try_lock() else {
            return;
        };
        if checked.is_some_and(|at| at.elapsed() < RECOVERY_CHECK) {
            return;
        }
        *checked = Some(Instant::now());
        if !may_resume(
            self.free_bytes(),
            self.reserve_bytes,
            self.start_bytes,
            usage,
            settings,
        ) {
            return;
        }
        if self.reserve_bytes == 0 || self.make_reserves() {
            tracing::info!("free space has returned: puts are admitted again");
            self.low.store(false, Ordering::Relaxed);
        }
    }

    /// Allocates both reserve files (their blocks, not a sparse length).
    /// True when they are there.
    fn make_reserves(&self) -> bool {
        let made = [
            (self.start_reserve_path(), self.start_bytes),
            (self.reserve_path(), self.reserve_bytes),
        ]
        .into_iter()
        .try_for_each(|(path, bytes)| {
            allocate(&path, bytes).inspect_err(|_| {
                let _ = std::fs::remove_file(&path);
            })
        });
        if let Ok(d) = std::fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        match made {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "cannot make the space reserve");
                self.low.store(true, Ordering::Relaxed);
                false
            }
        }
    }
}

/// Removes a file and makes the removal durable; true when it was there.
fn remove_durably(path: &Path) -> bool {
    match std::fs::remove_file(path) {
        Ok(()) => {
            if let Some(Ok(d)) = path.parent().map(std::fs::File::open) {
                let _ = d.sync_all();
            }
            true
        }
        Err(_) => false,
    }
}

fn allocate(path: &Path, bytes: u64) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    let len = libc::off_t::try_from(bytes)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: posix_fallocate only acts on the descriptor we own.
    let rc = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, len) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_table() {
        let t = ThrottleSettings {
            low_usage: 0.9,
            high_usage: 1.0,
        };
        let ms = Duration::from_millis;
        for (low, usage, reclaimable, want) in [
            (false, 0.5, 0, Admit::Go(ms(0))),
            (false, 0.9, 0, Admit::Go(ms(0))),
            (false, 0.95, 0, Admit::Go(ms(500))),
            (false, 0.95, 10, Admit::Go(ms(500))),
            (false, 1.0, 0, Admit::Refuse { release: true }),
            (false, 1.0, 4096, Admit::WaitAndRecheck(ms(1000))),
            (false, 1.2, 0, Admit::Refuse { release: true }),
            (true, 0.1, 0, Admit::Refuse { release: false }),
            (true, 1.0, 4096, Admit::Refuse { release: false }),
        ] {
            let got = admit(low, usage, t, reclaimable);
            assert_eq!(got, want, "low {low}, U {usage}, reclaimable {reclaimable}");
        }
    }

    #[test]
    fn resume_table() {
        let t = ThrottleSettings::default();
        for (free, reserve, start, usage, want) in [
            (110, 50, 10, 0.5, true),
            (109, 50, 10, 0.5, false),
            (110, 50, 10, 1.0, false),
            (0, 0, 0, 0.99, true),
            (0, 0, 0, 1.0, false),
            (u64::MAX, u64::MAX, 1, 0.1, true),
        ] {
            assert_eq!(
                may_resume(free, reserve, start, usage, t),
                want,
                "free {free}, reserve {reserve}, start {start}, U {usage}"
            );
        }
    }

    #[test]
    fn the_reserve_is_made_released_and_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let s = Space::open(dir.path(), 1 << 20, 4);
        let path = dir.path().join(RESERVE_FILE);
        let start = dir.path().join(START_RESERVE_FILE);
        assert!(!s.is_low());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 20);
        assert_eq!(
            std::fs::metadata(&start).unwrap().len(),
            start_reserve_bytes(4)
        );
        assert!(s.disk_full(), "the reserve was there to release");
        assert!(s.is_low() && !path.exists());
        assert!(start.exists(), "only a start releases the start reserve");
        assert!(!s.disk_full(), "nothing left to release");
        s.maybe_resume(0.1, ThrottleSettings::default());
        assert!(!s.is_low() && path.exists());
        // A start with the reserve present keeps it.
        drop(s);
        let s = Space::open(dir.path(), 1 << 20, 4);
        assert!(!s.is_low() && path.exists() && start.exists());
        // Turned off: the files go.
        let s = Space::open(dir.path(), 0, 4);
        assert!(!s.is_low() && !path.exists() && !start.exists());
    }
}
