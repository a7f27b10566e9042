//! Rill's sensor-data storage (docs/sensors.md).
//!
//! A sample is acknowledged once it is in the write-ahead log on the disk
//! ([`wal`]): writers that arrive together share one write and one fsync
//! (group commit). Each series' samples wait in memory until they fill a
//! block (the sensor-data paper's B) or their time window closes; a full
//! block is an object of the key-value store, and the log's segments whose
//! samples all sit in durable blocks are deleted.
//!
//! All disk access goes through `bitcask`'s [`bitcask::vfs::Vfs`], so the
//! power-loss simulation covers it.

pub mod buffer;
pub mod wal;
