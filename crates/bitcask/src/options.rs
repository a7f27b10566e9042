//! Store settings, with Riak's names where Riak has the concept.

use crate::error::{Error, Result};
use crate::vfs::{StdVfs, Vfs};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// When appended data is made durable (Riak's `bitcask.sync.strategy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncStrategy {
    /// Never fsync on the write path; the OS decides. Buffered appends
    /// still reach the kernel within `flush_interval_ms`.
    None,
    /// Every put is on disk before it returns (group commit: concurrent
    /// puts share one fsync).
    OSync,
    /// fsync every so many milliseconds.
    Interval { interval_ms: u64 },
}

/// A sync strategy's name that is none of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected none, o_sync or interval:<ms>, found {found:?}")]
pub struct UnknownSyncStrategy {
    pub found: String,
}

impl std::str::FromStr for SyncStrategy {
    type Err = UnknownSyncStrategy;
    fn from_str(s: &str) -> Result<Self, UnknownSyncStrategy> {
        match s {
            "none" => Ok(SyncStrategy::None),
            "o_sync" => Ok(SyncStrategy::OSync),
            other => other
                .strip_prefix("interval")
                .map(|rest| rest.trim_start_matches([':', '=']))
                .and_then(|ms| ms.parse().ok())
                .map(|interval_ms| SyncStrategy::Interval { interval_ms })
                .ok_or_else(|| UnknownSyncStrategy {
                    found: other.to_string(),
                }),
        }
    }
}

/// How appends reach the data file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// Through the page cache, in chunks of `write_buffer_bytes`.
    Buffered,
    /// O_DIRECT, in 4096-aligned chunks of `write_buffer_bytes`.
    Direct,
}

/// A source of wall-clock time, replaceable in tests of expiry.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Duration;
}

/// Decides how long a put waits before it is written: the node's merge
/// control sets this from filesystem usage (put throttling, the sensor-data paper, §2.3),
/// so writers slow down before the disk fills.
pub trait PutGate: Send + Sync + 'static {
    fn delay(&self) -> Duration;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
    }
}

#[derive(Clone)]
pub struct Options {
    /// Rotation size R: a data file is closed when the next record would
    /// take it past this (Riak's `bitcask.max_file_size`, default 2 GiB).
    pub max_file_size_bytes: u64,
    pub sync: SyncStrategy,
    pub write_mode: WriteMode,
    /// Appends are gathered into writes of this size; 0 writes each put
    /// as it comes. Under buffered writes, records of 32 KiB and more skip
    /// the buffer (written from the caller's memory with what it held).
    pub write_buffer_bytes: usize,
    /// Longest time a buffered append waits before it is handed to the
    /// kernel, under every sync strategy.
    pub flush_interval_ms: u64,
    /// Default time to live for records written without their own
    /// (Riak's `bitcask.expiry`); `None` keeps them forever.
    pub default_ttl: Option<Duration>,
    pub max_key_bytes: usize,
    pub max_value_bytes: usize,
    /// Read descriptors kept open at most (the shared read-handle cache).
    pub max_open_files: usize,
    /// A file whose live share is at most this is merged by reading only
    /// its live records through its hint file.
    pub sparse_live_share: f64,
    pub vfs: Arc<dyn Vfs>,
    pub clock: Arc<dyn Clock>,
    /// Consulted before every put and delete; `None` never delays.
    pub put_gate: Option<Arc<dyn PutGate>>,
    /// Under `SyncStrategy::None`, a closed data file is sealed (fsynced,
    /// its hint written and moved into place) this long after rotation, by
    /// the store's background thread, not by the put that rotated it; a
    /// file merge deletes first is never written back at all. 0 seals at
    /// rotation, as Riak's Bitcask does. After a crash, files closed in the
    /// last `seal_delay_ms` have no hint and are scanned.
    pub seal_delay_ms: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_file_size_bytes: 2 << 30,
            sync: SyncStrategy::None,
            write_mode: WriteMode::Buffered,
            write_buffer_bytes: 1 << 20,
            flush_interval_ms: 10,
            default_ttl: None,
            max_key_bytes: crate::format::MAX_KEY_LEN,
            max_value_bytes: 64 << 20,
            max_open_files: 256,
            sparse_live_share: 0.25,
            vfs: Arc::new(StdVfs),
            clock: Arc::new(SystemClock),
            put_gate: None,
            seal_delay_ms: 30_000,
        }
    }
}

impl Options {
    pub fn validate(&self) -> Result<()> {
        let bad = |name, reason: String| Err(Error::InvalidOption { name, reason });
        if self.max_file_size_bytes < 4096 || self.max_file_size_bytes > u32::MAX as u64 {
            return bad(
                "max_file_size",
                format!(
                    "must be between 4 KiB and 4 GiB - 1, found {}",
                    self.max_file_size_bytes
                ),
            );
        }
        if self.max_key_bytes == 0 || self.max_key_bytes > crate::format::MAX_KEY_LEN {
            return bad(
                "max_key_bytes",
                format!("must be 1..=65535, found {}", self.max_key_bytes),
            );
        }
        // A record larger than max_file_size goes alone into a fresh file;
        // offsets within a file are 32-bit.
        let record_max = crate::format::RECORD_HEADER_LEN as u64
            + self.max_key_bytes as u64
            + self.max_value_bytes as u64;
        if self.max_file_size_bytes + record_max > u64::from(u32::MAX) {
            return bad(
                "max_value_bytes",
                format!(
                    "max_file_size ({}) plus the largest record ({record_max} bytes) must stay below 4 GiB",
                    self.max_file_size_bytes
                ),
            );
        }
        if self.write_mode == WriteMode::Direct && !self.write_buffer_bytes.is_multiple_of(4096) {
            return bad(
                "write_buffer_bytes",
                "must be a multiple of 4096 with direct writes".into(),
            );
        }
        if self.write_mode == WriteMode::Direct && self.write_buffer_bytes == 0 {
            return bad("write_buffer_bytes", "direct writes need a buffer".into());
        }
        if let SyncStrategy::Interval { interval_ms: 0 } = self.sync {
            return bad("sync", "interval must be at least 1 ms".into());
        }
        if self.max_open_files < 2 {
            return bad("max_open_files", "must be at least 2".into());
        }
        if !(0.0..=1.0).contains(&self.sparse_live_share) {
            return bad("sparse_live_share", "must be within 0..=1".into());
        }
        Ok(())
    }

    /// True when rotation leaves the closed file to the background sealer.
    pub(crate) fn defers_sealing(&self) -> bool {
        self.sync == SyncStrategy::None && self.seal_delay_ms > 0
    }

    pub(crate) fn now_s(&self) -> u32 {
        self.clock.now().as_secs().min(u64::from(u32::MAX)) as u32
    }

    pub(crate) fn now_us(&self) -> u64 {
        self.clock.now().as_micros() as u64
    }
}
