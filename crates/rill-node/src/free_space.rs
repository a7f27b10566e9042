//! Admission of puts for the leveldb backend's data: refused at once,
//! with the out-of-space error, while the filesystem holding it has less
//! free than the reserve (`bitcask.reserve`, 64 MB by default), admitted
//! again by themselves once there is room. The reserve stays free for what
//! an LSM tree must still write at a full disk: deletes' tombstones, the
//! journal's next batch, compactions that give space back. fjall refuses
//! every later write of the database after a write that met a full disk,
//! until the node restarts; refusing before the disk is full keeps it
//! from getting there through puts.

use crate::error::{KvError, OUT_OF_SPACE_RETRY_SECS};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// How long one look at the free space stands for (a put does not pay a
/// statvfs each).
const CHECK_EVERY_MS: u64 = 100;

pub(crate) struct FreeSpace {
    /// A directory on each filesystem holding leveldb data.
    dirs: Vec<PathBuf>,
    reserve_bytes: u64,
    started: Instant,
    /// When free space was last looked at, ms since `started` (+1; 0:
    /// never).
    checked_at: AtomicU64,
    /// The least free space of `dirs` then.
    free: AtomicU64,
    pub(crate) refusals: AtomicU64,
}

impl FreeSpace {
    pub(crate) fn new(dirs: Vec<PathBuf>, reserve_bytes: u64) -> FreeSpace {
        FreeSpace {
            dirs,
            reserve_bytes,
            started: Instant::now(),
            checked_at: AtomicU64::new(0),
            free: AtomicU64::new(u64::MAX),
            refusals: AtomicU64::new(0),
        }
    }

    fn free_bytes(&self) -> u64 {
        let now = self.started.elapsed().as_millis() as u64 + 1;
        let at = self.checked_at.load(Ordering::Relaxed);
        if at != 0 && now.saturating_sub(at) < CHECK_EVERY_MS {
            return self.free.load(Ordering::Relaxed);
        }
        let free = self
            .dirs
            .iter()
            .map(|d| merge_control::filesystem_free_bytes(d).unwrap_or(u64::MAX))
            .min()
            .unwrap_or(u64::MAX);
        self.free.store(free, Ordering::Relaxed);
        self.checked_at.store(now, Ordering::Relaxed);
        free
    }

    /// Whether a put may write now.
    pub(crate) fn admit_write(&self) -> Result<(), KvError> {
        if self.reserve_bytes == 0 || self.free_bytes() >= self.reserve_bytes {
            return Ok(());
        }
        let n = self.refusals.fetch_add(1, Ordering::Relaxed);
        if n == 0 || (n + 1).is_power_of_two() {
            tracing::warn!(
                reserve_bytes = self.reserve_bytes,
                refusals = n + 1,
                "less free disk space than the reserve: puts are refused until there is room"
            );
        }
        Err(KvError::OutOfSpace {
            retry_after_secs: OUT_OF_SPACE_RETRY_SECS,
        })
    }

    /// Whether puts are being refused now.
    pub(crate) fn is_low(&self) -> bool {
        self.reserve_bytes > 0 && self.free_bytes() < self.reserve_bytes
    }
}
