//! Admission of puts for the leveldb backend's data: refused at once,
//! with the out-of-space error, while the filesystem holding it has less
//! free than the reserve (`bitcask.reserve`, 64 MB by default) plus room
//! for a compaction, and admitted again by themselves once there is room.
//!
//! An LSM tree must go on writing at a full disk: deletes' tombstones, the
//! journal, flushes of memtables, and compactions, which write their new
//! tables before they drop the old ones. fjall stops the whole database
//! (every later write refused until a restart) when a flush or a
//! compaction meets a full disk, so the room kept free is the reserve and,
//! for compactions, as much as the data itself up to 1 GiB (a compaction
//! rewrites one table of a level with the tables of the next it overlaps;
//! fjall's tables are 64 MiB, its levels ten times the one above).

use crate::error::{KvError, OUT_OF_SPACE_RETRY_SECS};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// How long one look at the free space stands for (a put does not pay a
/// statvfs each).
const CHECK_EVERY_MS: u64 = 100;

/// The most kept free for compactions.
const MAX_COMPACTION_ROOM: u64 = 1 << 30;

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
    /// Room kept for compactions, as of then.
    compaction_room: AtomicU64,
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
            compaction_room: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
        }
    }

    /// (free bytes, bytes that must stay free), looked at again when the
    /// last look is older than `CHECK_EVERY_MS`; `data_bytes` gives the
    /// data's size on disk then.
    fn look(&self, data_bytes: &dyn Fn() -> u64) -> (u64, u64) {
        let now = self.started.elapsed().as_millis() as u64 + 1;
        let at = self.checked_at.load(Ordering::Relaxed);
        if at == 0 || now.saturating_sub(at) >= CHECK_EVERY_MS {
            let free = self
                .dirs
                .iter()
                .map(|d| merge_control::filesystem_free_bytes(d).unwrap_or(u64::MAX))
                .min()
                .unwrap_or(u64::MAX);
            self.free.store(free, Ordering::Relaxed);
            self.compaction_room
                .store(data_bytes().min(MAX_COMPACTION_ROOM), Ordering::Relaxed);
            self.checked_at.store(now, Ordering::Relaxed);
        }
        let keep = self.reserve_bytes + self.compaction_room.load(Ordering::Relaxed);
        (self.free.load(Ordering::Relaxed), keep)
    }

    /// Whether a put may write now.
    pub(crate) fn admit_write(&self, data_bytes: &dyn Fn() -> u64) -> Result<(), KvError> {
        if self.reserve_bytes == 0 {
            return Ok(());
        }
        let (free, keep) = self.look(data_bytes);
        if free >= keep {
            return Ok(());
        }
        let n = self.refusals.fetch_add(1, Ordering::Relaxed);
        if n == 0 || (n + 1).is_power_of_two() {
            tracing::warn!(
                free_bytes = free,
                kept_free_bytes = keep,
                refusals = n + 1,
                "less free disk space than leveldb must keep (the reserve and room for a compaction): puts are refused until there is room"
            );
        }
        Err(KvError::OutOfSpace {
            retry_after_secs: OUT_OF_SPACE_RETRY_SECS,
        })
    }

    /// Whether puts are being refused now.
    pub(crate) fn is_low(&self, data_bytes: &dyn Fn() -> u64) -> bool {
        let (free, keep) = self.look(data_bytes);
        self.reserve_bytes > 0 && free < keep
    }
}
