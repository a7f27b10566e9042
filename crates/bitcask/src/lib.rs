//! Rill's Bitcask engine: a log-structured hash table.
//!
//! Records are appended to data files that rotate at `max_file_size` (R);
//! every key lives in an in-RAM keydir pointing at its newest record; hint
//! files make restarts read keys, not values; merge copies live records
//! out of files full of dead ones.
//!
//! Invariants this crate keeps:
//! - every file starts with magic bytes and a format version
//!   (docs/format.md); a delete is a header flag, never a special value;
//! - the newest record of a key is the one with the highest sequence
//!   number, wherever it lies, so merge and recovery never reorder history;
//! - no descriptor of a deleted file stays open;
//! - after a failed write (other than a full disk, which is cut back and
//!   reported) or a failed fsync, writes are refused until reopen;
//! - all file I/O goes through [`vfs::Vfs`], so tests can break the disk.

mod append;
mod batch;
pub mod error;
mod files;
pub mod format;
mod keydir;
mod merge;
mod options;
pub mod recovery;
mod retire;
mod stats;
mod store;
pub mod vfs;

pub use batch::BatchOp;
pub use error::{DecodeError, Error, Result};
pub use merge::MergeReport;
pub use options::{
    Clock, Options, PutGate, SyncStrategy, SystemClock, UnknownSyncStrategy, WriteMode,
};
pub use recovery::RecoveryReport;
pub use stats::FileStats;
pub use store::{PutOptions, Store, StoreStats};
