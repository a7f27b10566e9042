//! The time-series engine of sensor data: the write-ahead log, blocks
//! stored per database, queries and PromQL (docs/sensors.md); the formats
//! and block codecs it stores are `rill-sensor`'s.
//!
//! A sample is acknowledged once it is in the write-ahead log on the disk
//! ([`wal`]): writers that arrive together share one write and one fsync
//! (group commit). Each series' samples wait in memory until they fill a
//! block (the sensor-data paper's B) or their time window closes
//! ([`buffer`]), the series of a group (the fields of one measurement and
//! tag set) together, to share one block's timestamps; a cut block is stored in its database's store, expiring
//! with its window ([`storage`]), and the log's segments whose samples all
//! sit in durable blocks are deleted. The [`engine`] joins them; series
//! get ids in the [`catalog`]; [`keys`] lays out what the stores hold;
//! [`ingest`] turns line protocol into samples, and [`prom_source`]
//! gives the series to `rill-promql`'s evaluator and its selectors.
//!
//! All disk access goes through `bitcask`'s [`bitcask::vfs::Vfs`], so the
//! power-loss simulation covers it.

pub mod buffer;
pub mod cache;
pub mod catalog;
pub mod engine;
pub mod ingest;
pub mod keys;
pub mod points;
pub mod prom_source;
pub mod storage;
pub mod wal;

/// A map with a fast hash (foldhash, seeded per process) for the write
/// path's lookups by series.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

pub use catalog::Placer;
pub use engine::{Engine, EngineError, EngineOptions, EngineStats, OpenReport, WriteReport};
pub use points::Points;
pub use storage::{BitcaskStorage, BlockStore, Storage, StorageStats};
