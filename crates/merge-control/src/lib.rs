//! Merge control for a node's Bitcask stores, after the sensor-data paper
//! ("Riak KV performance in sensor data storage application", Zhivchikova
//! and Shevchuk, 2017, sections 2-4): a node-wide scheduler with a bounded
//! number of merge workers, filesystem usage U as the trigger, the
//! Fisherman policy (and Riak's classic one for comparison), put throttling
//! and planing advice.
//!
//! The decisions (`policy`, `throttle`, `planing`) are pure functions of
//! their inputs; `scheduler` is the thin shell that measures, merges and
//! publishes metrics.

pub mod batch;
pub mod closing;
pub mod planing;
pub mod policy;
pub mod scheduler;
pub mod throttle;

pub use planing::{advise, default_rotation_bytes, PlaningAdvice};
pub use policy::{
    Classic, ClassicSettings, FileView, Fisherman, MergeWindow, Moment, Pick, Policy,
};
pub use scheduler::{
    filesystem_capacity_bytes, filesystem_free_bytes, filesystem_usage, MergeScheduler, Metrics,
    MetricsSnapshot, PutRefusals, SchedulerSettings, UsageSource,
};
pub use throttle::{Throttle, ThrottleSettings};
